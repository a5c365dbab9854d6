"""Graph passes registered by plugins (the ``amanda_graph_passes`` hook): code that runs after named tables."""

from __future__ import annotations

__all__ = ["registered_passes", "passes_after"]

from typing import Any, Sequence

from ..errors import PluginError
from .types import GraphPass


def registered_passes(manager: Any = None) -> list[GraphPass]:
    """Every graph pass the loaded plugins registered, in plugin order."""
    if manager is None:
        from .manager import get_manager

        manager = get_manager()
    out: list[GraphPass] = []
    for plugin, items in manager.call_hook("amanda_graph_passes"):
        for item in items:
            if not isinstance(item, GraphPass):
                raise PluginError(f"plugin {plugin!r} registered {item!r}, which is not a GraphPass")
            out.append(item)
    return out


def passes_after(table_name: str, passes: Sequence[GraphPass]) -> list[GraphPass]:
    """The passes that run after the table named ``table_name``."""
    return [p for p in passes if table_name in p.tables]
