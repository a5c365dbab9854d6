"""Helpers for testing plugins and code that uses them.

In a test module or ``conftest.py``::

    pytest_plugins = ["amanda_core.plugin.testing"]

    def test_my_rules(amanda_plugin):
        amanda_plugin(MyPlugin())      # registered for this test only
        ...

or, without pytest, ``with registered_plugin(MyPlugin()): ...``.
"""

from __future__ import annotations

__all__ = ["registered_plugin", "amanda_plugin"]

import contextlib
from typing import Any, Callable, Iterator

try:
    import pytest
except ImportError:  # pragma: no cover - the helper works without pytest
    pytest = None  # type: ignore[assignment]

from .manager import get_manager


@contextlib.contextmanager
def registered_plugin(plugin: Any, name: str | None = None) -> Iterator[str]:
    """Register ``plugin`` in the process-wide manager for the duration of the block."""
    manager = get_manager()
    registered = manager.register(plugin, name)
    try:
        yield registered
    finally:
        manager.unregister(registered)


def _amanda_plugin() -> Iterator[Callable[..., str]]:
    """Call it with a plugin object to register it until the test ends."""
    stack = contextlib.ExitStack()

    def register(plugin: Any, name: str | None = None) -> str:
        return stack.enter_context(registered_plugin(plugin, name))

    with stack:
        yield register


amanda_plugin = pytest.fixture(_amanda_plugin, name="amanda_plugin") if pytest is not None else _amanda_plugin
