"""Tables registered by plugins (the ``amanda_mapping_tables`` hook): table objects or paths to YAML files.

Tables installed by plugins are trusted to run expressions.  A table declared ``bidirectional`` also registers its
derived reverse.  Loading happens once per registry, on first use.
"""

from __future__ import annotations

__all__ = ["registered_tables", "broken_tables", "unusable_reason"]

import os
from typing import Any

from ..errors import NamespaceError, PluginError
from .reverse import reverse_table
from .table import MappingTable, TableError, load_table, merge_parts

_CACHE: dict[int, tuple[Any, list[MappingTable], list[str]]] = {}


def registered_tables(registry: Any = None, *, strict: bool = False) -> list[MappingTable]:
    """Every table the loaded plugins registered, in plugin order (reverses of bidirectional tables after them).

    A plugin that registered a broken table (one that does not parse, parts that disagree, a bidirectional table
    that cannot be reversed) has *all* its tables left out, since a table in parts with one part missing would
    convert less than it says; :func:`broken_tables` says why, and the command line warns.  Conversions that need
    no table of that plugin go on.  With ``strict`` the first broken table raises :class:`PluginError` instead (a
    lock must not record a set of tables with a hole in it)."""
    if registry is None:
        from ..plugin.manager import registry as current

        registry = current()
    cached = _CACHE.get(id(registry))
    if cached is None or cached[0] is not registry:
        cached = _gather(registry)
        _CACHE.clear()
        _CACHE[id(registry)] = cached
    if strict and cached[2]:
        raise PluginError(cached[2][0])
    return list(cached[1])


def broken_tables(registry: Any = None) -> list[str]:
    """One line per plugin whose tables were left out by :func:`registered_tables`, naming the file and rule."""
    if registry is None:
        from ..plugin.manager import registry as current

        registry = current()
    registered_tables(registry)
    return list(_CACHE[id(registry)][2])


def _gather(registry: Any) -> tuple[Any, list[MappingTable], list[str]]:
    out: list[MappingTable] = []
    loaded: list[MappingTable] = []
    problems: dict[str | None, str] = {}
    for item, plugin in registry.tables:
        if plugin in problems:
            continue
        if isinstance(item, MappingTable):
            table = item
        elif isinstance(item, (str, os.PathLike)):
            try:
                table = load_table(item, trusted=True)
            except TableError as e:
                problems[plugin] = f"plugin {plugin!r} registered a broken table, so its tables are left out: {e}"
                continue
        else:
            problems[plugin] = (f"plugin {plugin!r} registered {item!r}, which is neither a MappingTable nor a "
                                "path, so its tables are left out")
            continue
        table.plugin = table.plugin or plugin
        loaded.append(table)
    by_plugin: dict[str | None, list[MappingTable]] = {}
    for table in loaded:
        if table.plugin not in problems:
            by_plugin.setdefault(table.plugin, []).append(table)
    for plugin, tables in by_plugin.items():  # parts (part_of) of one plugin's tables become one table
        try:
            merged = merge_parts(tables)
            mine = []
            for table in merged:
                mine.append(table)
                if table.bidirectional:
                    try:
                        mine.append(reverse_table(table))
                    except TableError as e:
                        raise TableError(f"table {table.name!r} is bidirectional but {e}") from e
        except TableError as e:
            problems[plugin] = f"plugin {plugin!r} registered a broken table, so its tables are left out: {e}"
            continue
        out.extend(mine)
    return registry, out, list(problems.values())


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
