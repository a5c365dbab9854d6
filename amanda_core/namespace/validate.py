"""Validation of a graph against its namespace schema.

Every problem is reported, each with the op's path; nothing stops at the first.
Checked per op: the type exists in the namespace; every attribute is known,
has the declared type (through the type system) and an allowed value; every
required attribute is present; every port name is known and the port counts
fit (optional and variadic ports allowed for); port dtypes fit the schema's
port types where the type system can tell.

Port names: an op's ports are named as in the schema (``a``, ``b``), with
variadic ones numbered (``inputs_0``, ``inputs_1``), or positionally
(``in0``, ``in1`` / ``out0``), the names given to anonymous ports.
"""

from __future__ import annotations

__all__ = ["Problem", "validate", "fill_defaults", "match_ports"]

import difflib
from typing import Any, Iterable, Sequence

import attrs

from ..errors import NamespaceError, SchemaError
from ..ir.graph import Graph, Op, Port
from .registry import NamespaceRegistry
from .schema import NO_DEFAULT, NamespaceSchema, OpSchema, PortSchema


@attrs.frozen
class Problem:
    """One validation finding."""

    message: str
    op: str | None = None
    op_type: str | None = None
    severity: str = "error"

    def __str__(self) -> str:
        where = f"op {self.op!r}" + (f" ({self.op_type})" if self.op_type else "") if self.op else "graph"
        tag = "" if self.severity == "error" else f"{self.severity}: "
        return f"{tag}{where}: {self.message}"


def _hint(name: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def match_ports(names: Sequence[str], slots: Sequence[PortSchema], positional_prefix: str
                ) -> tuple[dict[str, PortSchema], list[str]]:
    """Assign an op's port names to schema slots; returns the assignment and problems."""
    assigned: dict[str, PortSchema] = {}
    problems: list[str] = []
    kind = "input" if positional_prefix == "in" else "output"
    counts: dict[str, int] = {}
    for name in names:
        slot = None
        for s in slots:
            if s.accepts_name(name):
                slot = s
                break
        if slot is None and name.startswith(positional_prefix) and name[len(positional_prefix):].isdigit():
            pos = int(name[len(positional_prefix):])
            slot = _slot_at(slots, pos)
            if slot is None:
                problems.append(f"has {kind} port {name!r} but the schema allows at most {_max_ports(slots)} "
                                f"{kind} port(s)")
                continue
        if slot is None:
            if not slots:
                problems.append(f"unknown {kind} port {name!r}: the schema declares no {kind} ports")
            else:
                problems.append(f"unknown {kind} port {name!r}{_hint(name, [s.name for s in slots])}; "
                                f"schema {kind}s: {', '.join(_slot_label(s) for s in slots)}")
            continue
        assigned[name] = slot
        counts[slot.name] = counts.get(slot.name, 0) + 1
    for s in slots:
        n = counts.get(s.name, 0)
        if s.variadic:
            if n < s.min_count:
                problems.append(f"needs at least {s.min_count} {kind} port(s) {s.name}_<i>, has {n}")
        elif n == 0 and not s.optional and s.default is NO_DEFAULT:
            problems.append(f"missing {kind} port {s.name!r}")
        elif n > 1:
            problems.append(f"{kind} port {s.name!r} given {n} times")
    return assigned, problems


def _slot_label(s: PortSchema) -> str:
    return s.name + ("?" if s.optional else "") + ("..." if s.variadic else "")


def _max_ports(slots: Sequence[PortSchema]) -> str:
    return "any number of" if any(s.variadic for s in slots) else str(len(slots))


def _slot_at(slots: Sequence[PortSchema], pos: int) -> PortSchema | None:
    for i, s in enumerate(slots):
        if s.variadic:
            return s
        if i == pos:
            return s
    return None


def validate(graph: Graph, registry: NamespaceRegistry, namespace: str | None = None, *,
             fill: bool = False) -> list[Problem]:
    """Every problem of ``graph`` against the schema of ``namespace`` (default:
    the graph's own); with ``fill``, missing attributes that have a default are
    set to it."""
    problems: list[Problem] = []
    for msg in graph.verify():
        problems.append(Problem(msg))
    ns = namespace or graph.namespace
    if ns is None:
        problems.append(Problem("the graph has no namespace; give one to validate against"))
        return problems
    _validate_graph(graph, registry, ns, problems, fill, namespace is not None)
    return problems


def _schema_for(registry: NamespaceRegistry, ns: str, cache: dict[str, Any]) -> NamespaceSchema | str:
    if ns not in cache:
        try:
            cache[ns] = registry.schema(ns)
        except (NamespaceError, SchemaError) as e:
            cache[ns] = str(e)
    return cache[ns]  # type: ignore[no-any-return]


def _validate_graph(graph: Graph, registry: NamespaceRegistry, ns: str, problems: list[Problem], fill: bool,
                    override: bool, cache: dict[str, Any] | None = None) -> None:
    """The graph's ops, then those of every nested graph (:meth:`Graph.nested_graphs`) in the namespace it
    inherits; with ``override`` (a namespace given by the caller) ops' own namespaces are not looked at."""
    cache = {} if cache is None else cache
    _validate_ops(graph, registry, ns, problems, fill, override, cache)
    for nested in graph.nested_graphs(ns):
        if override:
            inner = (nested.graph.namespace if nested.attr is not None else None) or ns
        else:
            inner = nested.graph.namespace or nested.inherited or ns
        _validate_ops(nested.graph, registry, inner, problems, fill, override, cache)


def _validate_ops(graph: Graph, registry: NamespaceRegistry, ns: str, problems: list[Problem], fill: bool,
                  override: bool, cache: dict[str, Any]) -> None:
    for op in graph:
        op_ns = op.namespace if (op.namespace and not override) else ns
        schema = _schema_for(registry, op_ns, cache)
        if isinstance(schema, str):
            key = ("ns", op_ns)
            if key not in cache:
                cache[key] = True  # type: ignore[index]
                problems.append(Problem(schema, op.path, op.type))
            continue
        _validate_op(op, schema, registry, problems, fill)


def _validate_op(op: Op, schema: NamespaceSchema, registry: NamespaceRegistry, problems: list[Problem],
                 fill: bool) -> None:
    path, t = op.path, op.type
    if not t:
        problems.append(Problem("op has no type", path))
        return
    s = schema.get(t)
    if s is None:
        if op.body is not None:
            problems.append(Problem(f"type {t!r} is not in {schema.namespace}; treated as a composite op "
                                    f"defined by its body", path, t, "warning"))
            return
        problems.append(Problem(f"unknown op type {t!r} in {schema.namespace}{_hint(t, schema.op_schemas)}",
                                path, t))
        return
    if s.deprecated:
        problems.append(Problem(f"op type {t!r} is deprecated in {schema.namespace}", path, t, "warning"))
    _check_attrs(op, s, schema, registry, problems, fill)
    ins, p1 = match_ports(op.input_ports.names(), s.input_ports, "in")
    outs, p2 = match_ports(op.output_ports.names(), s.output_ports, "out")
    for msg in p1 + p2:
        problems.append(Problem(msg, path, t))
    _check_dtypes(op, s, schema, registry, ins, outs, problems)


def _check_attrs(op: Op, s: OpSchema, schema: NamespaceSchema, registry: NamespaceRegistry,
                 problems: list[Problem], fill: bool) -> None:
    path, t = op.path, op.type
    known = {a.name: a for a in s.attrs}
    for name, value in op.attrs.items():
        a = known.get(name)
        if a is None:
            problems.append(Problem(f"unknown attribute {name!r}{_hint(name, known)}", path, t))
            continue
        if value is None and (a.default is None):
            continue
        ts, local = registry.type_systems.resolve(a.type, schema.default_type_system)
        if ts is None:
            problems.append(Problem(f"attribute {name!r} has type {a.type!r} of an unregistered type system",
                                    path, t))
            continue
        try:
            reason = ts.check_value(local, value)
        except SchemaError as e:
            reason = f"schema type {a.type!r} cannot be checked: {e}"
        if reason:
            problems.append(Problem(f"attribute {name!r}: {reason}", path, t))
        elif a.allowed_values is not None and not _allowed(value, a.allowed_values):
            shown = ", ".join(map(str, a.allowed_values[:12]))
            problems.append(Problem(f"attribute {name!r} = {value!r} is not one of: {shown}", path, t))
    for a in s.attrs:
        if a.name in op.attrs:
            continue
        if a.required:
            problems.append(Problem(f"missing required attribute {a.name!r} ({a.type})", path, t))
        elif fill and a.default is not None:
            op.set_attr(a.name, _fresh(a.default))


def _allowed(value: Any, allowed: tuple[Any, ...]) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_allowed(v, allowed) for v in value)
    return value in allowed


def _fresh(value: Any) -> Any:
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    return value


def _check_dtypes(op: Op, s: OpSchema, schema: NamespaceSchema, registry: NamespaceRegistry,
                  ins: dict[str, PortSchema], outs: dict[str, PortSchema], problems: list[Problem]) -> None:
    context: dict[str, Any] = {"op": op, "op_schema": s, "bindings": {}}
    pairs: list[tuple[Port, PortSchema]] = [(op.input_ports[n], ps) for n, ps in ins.items()]
    pairs += [(op.output_ports[n], ps) for n, ps in outs.items()]
    for port, ps in pairs:
        if port.dtype is None or ps.type is None:
            continue
        ts, local = registry.type_systems.resolve(ps.type, schema.default_type_system)
        if ts is None:
            continue
        context["port"] = port
        context["port_schema"] = ps
        reason = ts.check_dtype(local, port.dtype, context)
        if reason:
            problems.append(Problem(f"port {port.name!r}: {reason}", op.path, op.type))


def fill_defaults(graph: Graph, registry: NamespaceRegistry, namespace: str | None = None) -> list[Problem]:
    """Set every missing attribute that has a non-null default; returns the problems found meanwhile."""
    return validate(graph, registry, namespace, fill=True)
