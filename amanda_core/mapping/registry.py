"""Tables registered by plugins (the ``amanda_mapping_tables`` hook): table objects or paths to YAML files.

Tables installed by plugins are trusted to run expressions.  A table declared ``bidirectional`` also registers its
derived reverse.  Loading happens once per registry, on first use.
"""

from __future__ import annotations

__all__ = ["registered_tables", "broken_tables", "tables_between", "unusable_reason"]

import copy
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


def tables_between(registry: Any, sources: Any, target: str) -> list[MappingTable]:
    """The registered tables that can take part in a conversion from namespaces ``sources`` (the graph's, and the
    namespaces of its ops) to ``target`` on a path that enters each framework family at most once: a conversion
    within one family stays in it (ONNX opset 13 to 21 never goes through torch), one between families passes
    through each family on its way once.  A table file is read only that far: its header (``src``, ``dst``,
    ``bidirectional``) says whether it can be on such a path, and a table that cannot is not parsed at all.
    Broken tables among those read are left out as :func:`registered_tables` leaves them."""
    headers: list[tuple[str, str, bool]] = []
    for item, _plugin in registry.tables:
        head = _header(item)
        if head is not None:
            headers.append(head)
    edges: dict[str, set[str]] = {}
    for src, dst, bidir in headers:
        a, b = _family(src), _family(dst)
        edges.setdefault(a, set()).add(b)
        if bidir:
            edges.setdefault(b, set()).add(a)
    goal = _family(target)
    used: set[tuple[str, str]] = set()  # family steps on a path that visits each family at most once
    for start in {_family(ns) for ns in sources}:
        _simple_paths(start, goal, edges, [start], used)

    def relevant(src: str, dst: str, bidir: bool) -> bool:
        pairs = [(src, dst)] + ([(dst, src)] if bidir else [])
        return any((_family(a), _family(b)) in used for a, b in pairs)

    found = _gather(registry, relevant)
    _PARTIAL[id(registry)] = (registry, found[2])
    return found[1]


_PARTIAL: dict[int, tuple[Any, list[str]]] = {}


def _simple_paths(here: str, goal: str, edges: dict[str, set[str]], path: list[str],
                  used: set[tuple[str, str]]) -> None:
    """Add to ``used`` every family step of every path from ``here`` to ``goal`` that enters no family twice
    (with the version steps inside each family it passes through)."""
    if here == goal:
        for fam in path:
            used.add((fam, fam))
        used.update(zip(path, path[1:]))
        return
    for nxt in sorted(edges.get(here, ())):
        if nxt not in path:
            _simple_paths(nxt, goal, edges, path + [nxt], used)


def _family(spec: str) -> str:
    from ..namespace.names import parse_spec

    try:
        return parse_spec(spec).family
    except NamespaceError:
        return spec


_HEADERS: dict[tuple[str, float, int], tuple[str, str, bool] | None] = {}


def _header(item: Any) -> tuple[str, str, bool] | None:
    """``(src, dst, bidirectional)`` of a registered table without parsing its rules; None when it cannot be told
    cheaply (the table is then read in full)."""
    if isinstance(item, MappingTable):
        return item.src, item.dst, item.bidirectional
    if not isinstance(item, (str, os.PathLike)):
        return None
    path = os.fspath(item)
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (path, st.st_mtime, st.st_size)
    if key not in _HEADERS:
        _HEADERS[key] = _read_header(path)
    return _HEADERS[key]


def _read_header(path: str) -> tuple[str, str, bool] | None:
    import re

    from ..serialization.yamlio import safe_load

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return None
    m = re.search(r"^[ \t]*rules:", text, re.M)  # the header is what comes before the rules (the whole file else)
    try:
        data = safe_load(text[:m.start()] if m is not None else text)
    except Exception:
        return None
    if isinstance(data, dict) and isinstance(data.get("table"), dict):
        data = data["table"]
    if not isinstance(data, dict) or not isinstance(data.get("src"), str) or not isinstance(data.get("dst"), str):
        return None
    return data["src"], data["dst"], data.get("bidirectional") is True


def broken_tables(registry: Any = None) -> list[str]:
    """One line per plugin whose tables were left out by :func:`registered_tables` (or, when only
    :func:`tables_between` read tables, by it), naming the file and rule."""
    if registry is None:
        from ..plugin.manager import registry as current

        registry = current()
    full = _CACHE.get(id(registry))
    if full is not None and full[0] is registry:
        return list(full[2])
    partial = _PARTIAL.get(id(registry))
    if partial is not None and partial[0] is registry:
        return list(partial[1])
    registered_tables(registry)
    return list(_CACHE[id(registry)][2])


_LOADED: dict[tuple[str, float, int], MappingTable] = {}


def _load(path: Any) -> MappingTable:
    """A table file, parsed once per process while the file is unchanged."""
    p = os.fspath(path)
    st = os.stat(p)
    key = (p, st.st_mtime, st.st_size)
    table = _LOADED.get(key)
    if table is None:
        table = _LOADED[key] = load_table(p, trusted=True)
    return copy.copy(table)  # (its rules shared: the caller sets the plugin it came from)


def _gather(registry: Any, relevant: Any = None) -> tuple[Any, list[MappingTable], list[str]]:
    out: list[MappingTable] = []
    loaded: list[MappingTable] = []
    problems: dict[str | None, str] = {}
    for item, plugin in registry.tables:
        if plugin in problems:
            continue
        if relevant is not None:
            head = _header(item)
            if head is not None and not relevant(*head):
                continue
        if isinstance(item, MappingTable):
            table = item
        elif isinstance(item, (str, os.PathLike)):
            try:
                table = _load(item)
            except OSError as e:
                problems[plugin] = f"plugin {plugin!r} registered a table it cannot read, so its tables are left " \
                                   f"out: {e}"
                continue
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
