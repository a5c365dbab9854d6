"""What decides a conversion, pinned and recorded.

* :func:`environment` describes the environment a conversion runs in: Amanda's version, every loaded plugin and
  its version, every framework behind a namespace and its version, every registered namespace family with its
  versions, and a content hash of every mapping table;
* :func:`write_lock` / :func:`read_lock` keep that description in a lock file (``amanda.lock``, JSON with sorted
  keys: the same environment always gives the same bytes);
* :func:`differences` lists every way the current environment differs from a lock (``amanda convert --lock``
  refuses to run while there is one);
* :func:`provenance` and :func:`attach_provenance` record, in the converted graph, what made it: Amanda's
  version, the source and target namespaces, and each table applied with its hash.  Exporters keep it in their
  format's own metadata (see :func:`attach_provenance`); :func:`read_provenance` finds it again in a loaded graph.

Nothing here holds a time, a host name or an absolute path: two conversions of the same input with the same lock
record the same provenance.  The core imports no framework: versions come from the installed distributions'
metadata.
"""

from __future__ import annotations

__all__ = ["LOCK_FORMAT", "PROVENANCE_KEY", "environment", "table_hash", "write_lock", "read_lock", "differences",
           "provenance", "attach_provenance", "read_provenance"]

import hashlib
import json
import os
from typing import Any, Iterable, Mapping, Sequence

from .errors import AmandaError

LOCK_FORMAT = 1
PROVENANCE_KEY = "amanda.provenance"
"""The key of the provenance record in an ONNX model's ``metadata_props`` (and in every plugin's metadata)."""
PROVENANCE_ATTR = "amanda_provenance"
"""The graph attribute holding the provenance record (as a dict) for formats other than ONNX."""

# Distributions that provide a framework named by an importer or exporter (``framework=``): the first installed.
_FRAMEWORK_DISTRIBUTIONS = {
    "tensorflow": ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel", "tensorflow-macos",
                   "tf-nightly", "tf-nightly-cpu"),
    "torch": ("torch",),
    "onnx": ("onnx",),
}


def _dist_version(name: str) -> str | None:
    try:
        from importlib_metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover - the backport is a dependency
        from importlib.metadata import PackageNotFoundError, version  # type: ignore[assignment]
    try:
        return str(version(name))
    except PackageNotFoundError:
        return None


def _framework_versions(registry: Any) -> dict[str, str | None]:
    """``{framework: "distribution version"}`` for every framework an importer or exporter names."""
    names: set[str] = set()
    for item, _plugin in list(registry.importers) + list(registry.exporters):
        if getattr(item, "framework", None):
            names.add(item.framework)
    out: dict[str, str | None] = {}
    for name in sorted(names):
        found = None
        for dist in _FRAMEWORK_DISTRIBUTIONS.get(name, (name,)):
            v = _dist_version(dist)
            if v is not None:
                found = f"{dist} {v}"
                break
        out[name] = found
    return out


def table_hash(table: Any) -> str:
    """``sha256:...`` of what a table is: its name, namespaces and the bytes of the file(s) it was read from (every
    part of a table in parts, in order); a table built in code, its YAML form."""
    h = hashlib.sha256()
    h.update(f"{table.name}\0{table.src}\0{table.dst}\0{table.carry}\0{int(bool(table.bidirectional))}\0".encode())
    parts = table.raw.get("parts") if isinstance(getattr(table, "raw", None), dict) else None
    files = [p for p in (parts if isinstance(parts, list) else [table.source]) if p]
    if files and all(isinstance(p, str) and os.path.isfile(p) for p in files):
        for path in files:
            with open(path, "rb") as f:
                h.update(f.read())
            h.update(b"\0")
    else:
        from .mapping.table import dump_table

        h.update(dump_table(table).encode("utf-8"))
    return "sha256:" + h.hexdigest()


def _table_key(plugin: str | None, name: str) -> str:
    return f"{plugin or '(given)'}:{name}"


def environment(registry: Any = None, tables: Sequence[Any] | None = None) -> dict[str, Any]:
    """What decides a conversion here: a JSON-ready dict (see the module's documentation).  ``tables`` defaults
    to every table the plugins register."""
    from .mapping.registry import registered_tables
    from .plugin.manager import get_manager

    manager = get_manager()
    if registry is None:
        registry = manager.registry()
    if tables is None:
        tables = registered_tables(registry, strict=True)
    plugins = {i.name: {"distribution": i.distribution, "version": i.version} for i in manager.plugins()}
    ns = registry.namespaces
    families = {}
    for family in sorted(ns.families()):
        families[family] = list(ns.versions(family))
    return {
        "amanda_lock": LOCK_FORMAT,
        "amanda": _dist_version("amanda-core"),
        "plugins": dict(sorted(plugins.items())),
        "frameworks": _framework_versions(registry),
        "namespaces": families,
        "tables": {_table_key(t.plugin, t.name): {"src": t.src, "dst": t.dst, "hash": table_hash(t)}
                   for t in sorted(tables, key=lambda t: (t.plugin or "", t.name))},
    }


def _dumps(data: Mapping[str, Any]) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def write_lock(path: str | os.PathLike[str], env: Mapping[str, Any] | None = None) -> str:
    """Write the lock of ``env`` (default: this environment) to ``path`` atomically; returns the path."""
    from .serialization.files import atomic_write

    text = _dumps(env if env is not None else environment())
    target = os.fspath(path)
    with atomic_write(target, "w") as f:
        f.write(text)
    return target


def read_lock(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A lock file's content; a missing, unreadable or foreign file is an :class:`AmandaError` naming it."""
    p = os.fspath(path)
    try:
        with open(p, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise AmandaError(f"{p}: no such lock file (amanda lock -o {p} writes one)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise AmandaError(f"{p}: cannot read the lock file: {e}") from None
    except json.JSONDecodeError as e:
        raise AmandaError(f"{p}:{e.lineno}: not a lock file (not JSON: {e.msg})") from None
    if not isinstance(data, dict) or data.get("amanda_lock") != LOCK_FORMAT:
        raise AmandaError(f"{p}: not an amanda lock file of format {LOCK_FORMAT} (amanda lock writes one)")
    for key in ("plugins", "frameworks", "namespaces", "tables"):
        if not isinstance(data.get(key), dict):
            raise AmandaError(f"{p}: the lock file has no {key!r} mapping")
    return data


def differences(locked: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Every way ``current`` differs from ``locked``, one line each (empty: they match)."""
    out: list[str] = []
    if locked.get("amanda") != current.get("amanda"):
        out.append(f"amanda-core is {current.get('amanda')}, the lock says {locked.get('amanda')}")

    def versions(section: str, what: str, show: Any) -> None:
        old, new = locked.get(section, {}), current.get(section, {})
        for key in sorted(set(old) | set(new)):
            if key not in new:
                out.append(f"{what} {key} is in the lock but not here")
            elif key not in old:
                out.append(f"{what} {key} is here but not in the lock")
            elif old[key] != new[key]:
                out.append(f"{what} {key} is {show(new[key])}, the lock says {show(old[key])}")

    versions("plugins", "plugin", lambda v: " ".join(str(x) for x in (v.get("distribution"), v.get("version"))
                                                     if x) or "(in-process)")
    versions("frameworks", "framework", lambda v: v or "not installed")
    versions("namespaces", "namespace family", _versions_text)
    versions("tables", "table", lambda v: f"{v.get('src')} -> {v.get('dst')} {v.get('hash', '')[:19]}")
    return out


def _versions_text(versions: Sequence[str]) -> str:
    if len(versions) > 4:
        return f"versions {versions[0]} ... {versions[-1]} ({len(versions)})"
    return "versions " + (", ".join(versions) or "none")


def provenance(conversion: Any, source: str | None = None) -> dict[str, Any]:
    """What made a converted graph: Amanda's version, source and target namespaces, and each table applied (in
    order) with its plugin and hash.  ``conversion`` is a :class:`amanda_core.mapping.Conversion`."""
    steps = list(getattr(conversion, "steps", ()))
    src = source or (steps[0].src if steps else conversion.graph.namespace)
    return {
        "amanda": _dist_version("amanda-core"),
        "source": src,
        "target": conversion.target,
        "tables": [{"name": s.table.name, "plugin": s.table.plugin, "src": s.src, "dst": s.dst,
                    "hash": table_hash(s.table)} for s in steps],
    }


def _is_onnx(graph: Any) -> bool:
    ns = graph.namespace or ""
    return ns == "amanda/onnx" or ns.startswith("amanda/onnx/")


def attach_provenance(graph: Any, record: Mapping[str, Any]) -> None:
    """Record ``record`` in ``graph`` where its format keeps it: an ONNX graph in the model's ``metadata_props``
    (``amanda.provenance``, a JSON string; kept by the ONNX exporter as ``model_metadata_props``); any other graph in
    ``graph.attrs["amanda_provenance"]`` (the YAML format writes it at the top of the graph; a plugin's exporter
    writes it to its format's metadata).  A record left by an earlier conversion is replaced."""
    text = json.dumps(dict(record), sort_keys=True, separators=(",", ":"))
    graph.attrs.pop(PROVENANCE_ATTR, None)
    props = [p for p in (graph.attrs.get("model_metadata_props") or [])
             if not (isinstance(p, Mapping) and p.get("key") == PROVENANCE_KEY)]
    if _is_onnx(graph):
        props.append({"key": PROVENANCE_KEY, "value": text})
    else:
        graph.attrs[PROVENANCE_ATTR] = json.loads(text)
    if props:
        graph.attrs["model_metadata_props"] = props
    else:
        graph.attrs.pop("model_metadata_props", None)


def read_provenance(graph: Any) -> dict[str, Any] | None:
    """The provenance a converted graph records (see :func:`attach_provenance`), or None."""
    record = graph.attrs.get(PROVENANCE_ATTR)
    if isinstance(record, Mapping):
        return dict(record)
    if isinstance(record, str):
        try:
            parsed = json.loads(record)
        except json.JSONDecodeError:
            return None
        return parsed if isinstance(parsed, dict) else None
    for p in _iter(graph.attrs.get("model_metadata_props")):
        if isinstance(p, Mapping) and p.get("key") == PROVENANCE_KEY:
            try:
                parsed = json.loads(str(p.get("value")))
            except json.JSONDecodeError:
                return None
            return parsed if isinstance(parsed, dict) else None
    return None


def _iter(items: Any) -> Iterable[Any]:
    return items if isinstance(items, (list, tuple)) else ()


def provenance_lines(record: Mapping[str, Any]) -> list[str]:
    """``amanda inspect``'s lines for a provenance record."""
    lines = [f"converted: by amanda-core {record.get('amanda')}, {record.get('source')} -> {record.get('target')}"]
    for t in _iter(record.get("tables")):
        if isinstance(t, Mapping):
            lines.append(f"  table {t.get('name')} ({t.get('plugin') or 'given'}): {t.get('src')} -> "
                         f"{t.get('dst')} {t.get('hash')}")
    for key, what in (("input_layout", "takes the source's data transposed by"),
                      ("output_layout", "transposed by {perm} is the source's output")):
        layouts = record.get(key)
        for name, perm in (layouts.items() if isinstance(layouts, Mapping) else ()):
            text = what.format(perm=perm) if "{perm}" in what else f"{what} {perm}"
            lines.append(f"  layout: {key.split('_')[0]} {name} {text}")
    return lines
