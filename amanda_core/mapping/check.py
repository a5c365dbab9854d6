"""Checking a table against the schemas of its two namespaces.

A matcher may only name op types, attributes and ports that exist in the source namespace, a mapper only those of
the target namespace; each slip is reported with file, line, table and rule.  Ranges are checked against the
newest registered namespace they admit.  A namespace with no registered schema cannot be checked: that is
reported as a note, not an error.
"""

from __future__ import annotations

__all__ = ["check_table"]

import difflib
from typing import Iterable

from ..errors import Location, NamespaceError, SchemaError
from ..namespace.registry import NamespaceRegistry
from ..namespace.schema import NamespaceSchema, OpSchema
from .table import MappingTable, OpPattern, OpTemplate, Rule, TableError, ValueSpec


def _schema(registry: NamespaceRegistry, spec: str) -> NamespaceSchema | None:
    try:
        return registry.schema(spec)
    except (NamespaceError, SchemaError):
        return None


def _hint(name: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _literal_types(spec: ValueSpec | None) -> list[str]:
    if spec is None or spec.kind != "literal":
        return []
    v = spec.value
    return [str(x) for x in v] if isinstance(v, list) else [str(v)]


def _port_known(schema: OpSchema, name: str, kind: str) -> bool:
    slots = schema.input_ports if kind == "in" else schema.output_ports
    if any(s.accepts_name(name) for s in slots):
        return True
    prefix = "in" if kind == "in" else "out"
    if name.startswith(prefix) and name[len(prefix):].isdigit():
        pos = int(name[len(prefix):])
        return pos < len(slots) or any(s.variadic for s in slots)
    return any(s.variadic and s.name == name for s in slots)


def _check_op(schema: NamespaceSchema, op_types: list[str], attrs: Iterable[str],
              ports: Iterable[tuple[str, str]], what: str, key: str) -> list[str]:
    problems = []
    attrs = list(attrs)
    # With several op types, an attribute only some of them have is read as absent (None) on the others, as the
    # matcher does (`data_format: "${value in (None, 'NHWC')}"` on elementwise ops and BiasAdd): a slip only when
    # none of them has it.
    schemas = [schema.get(t) for t in op_types]
    everywhere = {a for a in attrs if not any(x is not None and a in x.attr_names() for x in schemas)}
    for t in op_types:
        s = schema.get(t)
        if s is None:
            problems.append(f"{what} op {key!r}: {schema.namespace} has no op type {t!r}{_hint(t, schema.op_schemas)}")
            continue
        known = s.attr_names()
        for a in attrs:
            if a not in known and (len(op_types) == 1 or a in everywhere):
                problems.append(f"{what} op {key!r}: {t} has no attribute {a!r}{_hint(a, known)}")
        for name, kind in ports:
            if name and not _port_known(s, name, kind):
                slots = [p.name for p in (s.input_ports if kind == "in" else s.output_ports)]
                problems.append(f"{what} op {key!r}: {t} has no {'input' if kind == 'in' else 'output'} port "
                                f"{name!r}{_hint(name, slots)}")
    return problems


def check_table(table: MappingTable, registry: NamespaceRegistry) -> tuple[list[TableError], list[str]]:
    """Problems of ``table`` against the registered schemas, and notes on what could not be checked."""
    errors: list[TableError] = []
    notes: list[str] = []
    src = _schema(registry, table.src)
    dst = _schema(registry, table.dst)
    if src is None:
        notes.append(f"table {table.name!r}: no schema is registered for {table.src}; its matchers were not checked")
    if dst is None:
        notes.append(f"table {table.name!r}: no schema is registered for {table.dst}; its mappers were not checked")
    def err(rule: Rule, message: str, line: int | None) -> None:
        source = rule.source or table.source  # a table merged from parts: the part the rule is in
        errors.append(TableError(message, Location(source, line) if source else None, rule.name, table.name))

    for rule in table.rules.values():
        if src is not None:
            for pat in rule.src.ops.values():
                for msg in _check_pattern(src, pat):
                    err(rule, msg, pat.line)
            for e in rule.src.edges:
                for end, kind in ((e.src, "out"), (e.dst, "in")):
                    pat = rule.src.ops[end.op]
                    if end.port_var or end.port == "^control" or end.group:
                        continue
                    for t in _literal_types(pat.type):
                        s = src.get(t)
                        if s is not None and not _port_known(s, end.port, kind):
                            err(rule, f"matcher edge {e}: {t} has no {'input' if kind == 'in' else 'output'} port "
                                f"{end.port!r}", e.line)
        if dst is not None:
            for key, tpl in rule.dst.ops.items():
                for msg in _check_template(dst, tpl, rule.src.ops.get(key)):
                    err(rule, msg, tpl.line)
    return errors, notes


def _check_pattern(schema: NamespaceSchema, pat: OpPattern) -> list[str]:
    ports = [(p.name, "in") for p in pat.inputs or () if p.name and not p.group]
    ports += [(p.name, "out") for p in pat.outputs or () if p.name and not p.group]
    return _check_op(schema, _literal_types(pat.type), pat.attrs, ports, "matcher", pat.key)


def _check_template(schema: NamespaceSchema, tpl: OpTemplate, matched: OpPattern | None) -> list[str]:
    types = _literal_types(tpl.type)
    if not types and matched is not None and tpl.type is None:
        return []  # the matched op keeps its type: it stays in the source vocabulary by the rule's own intent
    ports = [(n, "in") for n, _ in tpl.inputs or ()] + [(n, "out") for n, _ in tpl.outputs or ()]
    return _check_op(schema, types, tpl.attrs, ports, "mapper", tpl.key)
