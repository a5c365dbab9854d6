"""Tables registered by plugins (the ``amanda_mapping_tables`` hook): table objects or paths to YAML files.

Tables installed by plugins are trusted to run expressions.  A table declared ``bidirectional`` also registers its
derived reverse.  Loading happens once per registry, on first use.
"""

from __future__ import annotations

__all__ = ["registered_tables", "unusable_reason"]

import os
from typing import Any

from ..errors import NamespaceError, PluginError
from .reverse import reverse_table
from .table import MappingTable, TableError, load_table, merge_parts

_CACHE: dict[int, tuple[Any, list[MappingTable]]] = {}


def registered_tables(registry: Any = None) -> list[MappingTable]:
    """Every table the loaded plugins registered, in plugin order (reverses of bidirectional tables after them)."""
    if registry is None:
        from ..plugin.manager import registry as current

        registry = current()
    cached = _CACHE.get(id(registry))
    if cached is not None and cached[0] is registry:
        return list(cached[1])
    out: list[MappingTable] = []
    loaded: list[MappingTable] = []
    for item, plugin in registry.tables:
        if isinstance(item, MappingTable):
            table = item
        elif isinstance(item, (str, os.PathLike)):
            try:
                table = load_table(item, trusted=True)
            except TableError as e:
                raise PluginError(f"plugin {plugin!r} registered a broken table: {e}") from e
        else:
            raise PluginError(f"plugin {plugin!r} registered {item!r}, which is neither a MappingTable nor a path")
        table.plugin = table.plugin or plugin
        loaded.append(table)
    by_plugin: dict[str | None, list[MappingTable]] = {}
    for table in loaded:
        by_plugin.setdefault(table.plugin, []).append(table)
    for plugin, tables in by_plugin.items():  # parts (part_of) of one plugin's tables become one table
        try:
            merged = merge_parts(tables)
        except TableError as e:
            raise PluginError(f"plugin {plugin!r} registered a broken table: {e}") from e
        for table in merged:
            out.append(table)
            if table.bidirectional:
                try:
                    out.append(reverse_table(table))
                except TableError as e:
                    raise PluginError(f"plugin {plugin!r}: table {table.name!r} is bidirectional but {e}") from e
    _CACHE.clear()
    _CACHE[id(registry)] = (registry, out)
    return list(out)


def unusable_reason(table: MappingTable, namespaces: Any) -> str | None:
    """Why ``table`` can take part in no conversion here, or None when it can.

    A table serves the namespaces its ``src`` and ``dst`` admit (``amanda/tensorflow/>=2.15,<3``).  A range or a
    family admits nothing when no installed plugin registers that family or none of its registered versions is in
    the range; an exact namespace of a registered family must be one of its versions.  An exact namespace of a
    family nobody registers is not checked (a custom ONNX domain such as ``amanda/onnx/com.microsoft/1`` is read
    from the ops of a model)."""
    from ..namespace.names import parse_spec, version_key

    families = set(namespaces.families())
    for side in ("src", "dst"):
        text = getattr(table, side)
        try:
            spec = parse_spec(text)
        except NamespaceError as e:
            return f"its {side} {text!r} is not a namespace: {e}"
        if spec.family not in families:
            if spec.exact is None:
                return f"its {side} {text} names {spec.family}, which no installed plugin registers"
            continue
        versions = list(namespaces.versions(spec.family))
        if not any(spec.matches_version(v) for v in versions):
            shown = sorted(versions, key=version_key)
            listed = ", ".join(shown) if len(shown) <= 4 else f"{shown[0]} ... {shown[-1]}"
            return f"its {side} {text} admits no installed version of {spec.family} (installed: {listed or 'none'})"
    return None
