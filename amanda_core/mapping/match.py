"""Subgraph matching: find where a rule's matcher fits in a graph.

A pattern is a set of op patterns joined by edges.  The search starts from an *anchor* op pattern (one with a
literal type, taken from an index of the graph's ops by type, in topological order) and grows the match along
the pattern's edges through the graph's O(1) producer/consumer links, so for a pattern of bounded size the cost
grows linearly with the graph.  Op patterns not joined to the anchor by edges are looked up in the type index.

Semantics (``docs/mapping-tables.md``):

* an op pattern matches an op of the table's source namespace that no other op of the same match took, whose
  type, name and attributes fit (a missing attribute takes its schema default), and whose listed ports exist;
* a pattern edge ``$a.x -> $b.y`` needs that data edge (``^control`` for a control edge); port names resolve
  by name, by position (``in1``, ``out0``) or through the op's schema (``self`` is the first input);
* ``commutative`` (per op, per rule, or ``true`` to use the op schema's list) lets edges into an op's
  commutative inputs match in any order;
* ``$name`` captures an op, a port or a value; a value captured twice must be equal;
* expressions (``${...}``) are checked once every op is bound, so they may use every variable; ``where`` is
  checked last.

Why an anchor did not match (:meth:`Matcher.why_not`, ``amanda convert --explain-rule``): the same search runs
with a recorder switched on, which keeps the reason of the failed check that got furthest (most pattern ops
bound; at equal progress, the first one met), as a :class:`MissReason` of one kind: ``namespace``, ``taken``,
``type``, ``name``, ``attribute``, ``const``, ``port``, ``port type``, ``containment``, ``edge``, ``commutative
order``, ``expression`` or ``where``.  Without the recorder a failed check costs one ``is None`` test more and
builds no message.
"""

from __future__ import annotations

__all__ = ["Match", "MatchContext", "Matcher", "MissReason", "find_matches", "resolve_port"]

import itertools
from typing import Any, Callable, Iterator, Mapping, Sequence

import attrs

from ..ir.compare import values_equal
from ..ir.graph import Graph, InputPort, Op, Port
from ..matching.types import Match, MatchContext
from ..matching.views import OpView
from ..namespace.registry import NOT_CONSTANT
from ..namespace.schema import NO_DEFAULT, OpSchema
from .expr import ExpressionError
from .table import EdgeSpec, OpPattern, Pattern, PortPattern, Rule, ValueSpec

# --------------------------------------------------------------------------- ports


def _positional(name: str, prefix: str) -> int | None:
    if name.startswith(prefix) and name[len(prefix):].isdigit():
        return int(name[len(prefix):])
    return None


def resolve_port(op: Op, name: str, kind: str, schema: OpSchema | None) -> Port | None:
    """The port of ``op`` that ``name`` means: ``kind`` is "in" or "out".

    By name first; then ``in<i>`` / ``out<i>`` as the i-th port; then a schema slot name as the port at that
    slot's position (for ops whose ports carry positional names)."""
    ports = op.input_ports if kind == "in" else op.output_ports
    p = ports.get(name)
    if p is not None:
        return p
    pos = _positional(name, kind)
    if pos is not None:
        return ports[pos] if pos < len(ports) else None
    if schema is not None:
        slots = schema.input_ports if kind == "in" else schema.output_ports
        for i, slot in enumerate(slots):
            if slot.variadic:
                break
            if slot.name == name:
                return ports[i] if i < len(ports) and _positional(ports[i].name, kind) is not None else None
    return None


def const_input(op: Op, name: str, schema: OpSchema | None, constant_of: Callable[[Op], Any]) -> Any:
    """The constant value input ``name`` of ``op`` receives: the value of the constant op feeding it, or, when the
    port is absent or unfed, its schema default (None without one); ``NOT_CONSTANT`` when anything else feeds it."""
    port = resolve_port(op, name, "in", schema)
    source = port.source if isinstance(port, InputPort) else None
    if source is None:
        slot = schema.input(name) if schema is not None else None
        if slot is None and schema is not None:
            for s in schema.input_ports:
                if s.accepts_name(name):
                    slot = s
                    break
        return None if slot is None or slot.default is NO_DEFAULT else slot.default
    producer = source.op
    if producer is None:
        return NOT_CONSTANT
    return constant_of(producer)


def group_ports(op: Op, name: str, kind: str, schema: OpSchema | None) -> list[Port]:
    """The ports of a variadic group ``name*``: ``name_0``, ``name_1`` ... in order (or, for ops with positional
    port names, every port from the schema's variadic slot on)."""
    ports = op.input_ports if kind == "in" else op.output_ports
    numbered = []
    prefix = name + "_"
    for p in ports:
        if p.name.startswith(prefix) and p.name[len(prefix):].isdigit():
            numbered.append((int(p.name[len(prefix):]), p))
    if numbered:
        return [p for _, p in sorted(numbered, key=lambda t: t[0])]
    if name in ports:
        return [ports[name]]
    if name in ("in", "out") or (schema is None and name == kind):
        return list(ports)
    if schema is not None:
        slots = schema.input_ports if kind == "in" else schema.output_ports
        for i, slot in enumerate(slots):
            if slot.name == name and slot.variadic:
                return [p for p in list(ports)[i:] if _positional(p.name, kind) is not None]
    return []


def _commutative_ports(op: Op, pat: OpPattern, rule_comm: bool, schema: OpSchema | None) -> tuple[str, ...]:
    if isinstance(pat.commutative, tuple):
        return pat.commutative
    if pat.commutative or rule_comm:
        if schema is not None and schema.commutative:
            return tuple(schema.commutative)
    return ()


# --------------------------------------------------------------------------- why not


MISS_KINDS = ("namespace", "taken", "type", "name", "attribute", "const", "port", "port type", "containment",
              "edge", "commutative order", "expression", "where")
"""The kinds of :class:`MissReason`, in the order of the checks (an op's own checks, its edges, then conditions)."""


@attrs.frozen
class MissReason:
    """Why a pattern did not match from one anchor: the failed check that got furthest.

    ``kind`` is one of :data:`MISS_KINDS`; ``pattern_op`` the op pattern being checked (None for ``where``);
    ``op`` the name of the graph op it was checked against (None when no op was found); ``bound`` how many op
    patterns were bound when it failed."""

    kind: str
    message: str
    pattern_op: str | None = None
    op: str | None = None
    bound: int = 0

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


class _Why:
    """The recorder of a traced search: the furthest failure (rank: ops bound, then the stage of the check)."""

    __slots__ = ("best", "rank")

    def __init__(self) -> None:
        self.best: MissReason | None = None
        self.rank: tuple[int, int] = (-1, -1)

    def note(self, rank: tuple[int, int], kind: str, message: str, key: str | None, op: Op | None) -> None:
        if rank > self.rank:
            self.rank = rank
            self.best = MissReason(kind, message, key, op.name if op is not None else None, rank[0])


def _spec_text(spec: ValueSpec) -> str:
    if spec.kind == "var":
        return f"${spec.value}"
    if spec.kind == "expr":
        src = str(getattr(spec.value, "source", None) or spec.text).strip()
        return src if src.startswith("${") else "${" + src + "}"
    return repr(spec.value)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


# --------------------------------------------------------------------------- matching


class _Search:
    def __init__(self, graph: Graph, pattern: Pattern, ctx: MatchContext, rule: Rule | None,
                 taken: Callable[[Op], bool]) -> None:
        self.graph = graph
        self.pattern = pattern
        self.ctx = ctx
        self.rule = rule
        self.taken = taken
        self.rule_comm = bool(rule.commutative) if rule is not None else False
        self.order = _plan(pattern)
        self.ready = _ready_edges(pattern, self.order)
        """For each step of the order: the pattern edges that step's op closes (both ends bound by then)."""
        self.schemas: dict[Op, OpSchema | None] = {}
        self.why: _Why | None = None
        """The recorder of failures, set only while :meth:`Matcher.why_not` runs."""

    def miss(self, m: Match, stage: int, kind: str, message: str, key: str | None, op: Op | None) -> None:
        """Record a failed check; called only when tracing (``self.why`` set), so that a search no one asks to
        explain builds no message."""
        assert self.why is not None
        self.why.note((len(m.ops), stage), kind, message, key, op)

    def schema(self, op: Op) -> OpSchema | None:
        try:
            return self.schemas[op]
        except KeyError:
            s = self.schemas[op] = self.ctx.schema_of(op)
            return s

    # -- literal checks while searching; expressions wait until every op is bound
    def op_fits(self, op: Op, pat: OpPattern, m: Match, deferred: list[tuple[ValueSpec, Any, Op]]) -> bool:
        key = pat.key
        if op.graph is not self.graph:
            if self.why is not None:
                self.miss(m, 0, "containment", f"{op.name} is in another graph", key, op)
            return False
        if self.taken(op):
            if self.why is not None:
                self.miss(m, 0, "taken", f"{op.name} was already taken by an earlier match of this pass",
                                 key, op)
            return False
        if not self.ctx.in_namespace(op):
            if self.why is not None:
                self.miss(m, 0, "namespace", f"{op.name} is not in the table's source namespace", key, op)
            return False
        if any(o is op for o in m.ops.values()):
            if self.why is not None:
                self.miss(m, 0, "edge", f"{key} would be {op.name}, already bound to another op pattern",
                                 key, op)
            return False
        if pat.type is not None and not self.value_fits(pat.type, op.type, op, m, deferred):
            if self.why is not None:
                self.miss(m, 0, "type", f"{key}: {op.name} is a {op.type}, not {self.wanted(pat.type, m)}",
                                 key, op)
            return False
        if pat.name is not None and not self.value_fits(pat.name, op.name, op, m, deferred):
            if self.why is not None:
                self.miss(m, 0, "name", f"{key}: the name {op.name!r} is not {self.wanted(pat.name, m)}",
                                 key, op)
            return False
        if pat.attrs:
            schema = self.schema(op)
            for name, spec in pat.attrs.items():
                if name in op.attrs:
                    value = op.attrs[name]
                else:
                    a = schema.attr(name) if schema is not None else None
                    if a is None or a.default is NO_DEFAULT:
                        if spec.kind == "expr":
                            value = None
                        else:
                            if self.why is not None:
                                self.miss(m, 0, "attribute", f"{key}: {op.name} has no attribute {name} and "
                                                 "its schema gives no default", key, op)
                            return False
                    else:
                        value = a.default
                if not self.value_fits(spec, value, op, m, deferred):
                    if self.why is not None:
                        self.miss(m, 0, "attribute", f"{key}: attribute {name} of {op.name} is {_short(value)}"
                                         f", not {self.wanted(spec, m)}", key, op)
                    return False
        if pat.consts and not self.consts_fit(op, pat, m, deferred):
            return False
        for plist, kind in ((pat.inputs, "in"), (pat.outputs, "out")):
            if plist and not self.ports_fit(op, pat, plist, kind, m, deferred):
                return False
        if pat.body is not None:
            return self.body_fits(op, pat, m)
        return True

    def wanted(self, spec: ValueSpec, m: Match) -> str:
        """What a spec asked for, for a reason: the literal, or the value a variable captured before."""
        if spec.kind == "var" and spec.value in m.values:
            return f"{_short(m.values[spec.value])} (captured by ${spec.value} before)"
        return _spec_text(spec)

    def consts_fit(self, op: Op, pat: OpPattern, m: Match, deferred: list[tuple[ValueSpec, Any, Op]]) -> bool:
        """Each port named in ``consts`` is fed by a constant op (its value) or is absent or unfed (its schema
        default, None without one); a port fed by anything else does not fit."""
        for name, spec in pat.consts.items():
            value = const_input(op, name, self.schema(op), self.ctx.constant_of)
            if value is NOT_CONSTANT:
                if self.why is not None:
                    self.miss(m, 0, "const", f"{pat.key}: input {name} of {op.name} is not fed by a constant",
                                     pat.key, op)
                return False
            if not self.value_fits(spec, value, op, m, deferred):
                if self.why is not None:
                    self.miss(m, 0, "const", f"{pat.key}: constant input {name} of {op.name} is "
                                     f"{_short(value)}, not {self.wanted(spec, m)}", pat.key, op)
                return False
        return True

    def body_fits(self, op: Op, pat: OpPattern, m: Match) -> bool:
        """The op contains a graph in which the nested pattern matches (the first match, in topological order);
        what that match binds joins the outer match's variables."""
        body = op.body
        assert pat.body is not None
        if body is None:
            if self.why is not None:
                self.miss(m, 0, "containment", f"{pat.key}: {op.name} holds no body", pat.key, op)
            return False
        index = type_index(body)
        matcher = Matcher(body, pat.body, attrs.evolve(self.ctx, in_namespace=lambda o: True), self.rule, index)
        first: Op | None = None
        for anchor in anchor_candidates(body, pat.body, index):
            first = first or anchor
            inner = matcher.at(anchor)
            if inner is None:
                continue
            for name, value in inner.values.items():
                if name in m.values and not values_equal(m.values[name], value):
                    if self.why is not None:
                        self.miss(m, 0, "containment", f"{pat.key}: the body of {op.name} captures ${name} = "
                                         f"{_short(value)}, but it is {_short(m.values[name])} outside", pat.key, op)
                    return False
            m.values.update(inner.values)
            m.inner[pat.key] = inner
            return True
        if self.why is not None:
            inner_why = matcher.why_not(first) if first is not None else None
            detail = (f"from {first.name}: {inner_why}" if first is not None and inner_why is not None
                      else "no op of the nested pattern's anchor type")
            if self.why is not None:
                self.miss(m, 0, "containment", f"{pat.key}: the nested pattern does not match in the body of "
                          f"{op.name} ({detail})", pat.key, op)
        return False

    def value_fits(self, spec: ValueSpec, value: Any, op: Op, m: Match, deferred: list[tuple[ValueSpec, Any, Op]]
                   ) -> bool:
        if spec.kind == "literal":
            lit = spec.value
            if value.__class__ is str:  # op types and names: plain string equality
                if lit.__class__ is str:
                    return value == lit
                if lit.__class__ is list:
                    return value in lit
            if isinstance(lit, list) and not isinstance(value, list):
                return any(values_equal(value, x) for x in lit)  # alternatives: type: [Add, Sub]
            return values_equal(value, lit)
        if spec.kind == "var":
            name = spec.value
            if name in m.values:
                return values_equal(m.values[name], value) or str(m.values[name]) == str(value)
            m.values[name] = value
            return True
        deferred.append((spec, value, op))
        return True

    def ports_fit(self, op: Op, pat: OpPattern, plist: tuple[PortPattern, ...], kind: str, m: Match,
                  deferred: list[tuple[ValueSpec, Any, Op]]) -> bool:
        ports = op.input_ports if kind == "in" else op.output_ports
        schema = self.schema(op)
        for pp in plist:
            if pp.group:
                name = pp.name if pp.name is not None else pp.var
                members = group_ports(op, pp.name or "", kind, schema) if pp.name else list(ports)[pp.position:]
                if not members and not pp.optional:
                    if self.why is not None:
                        self.miss(m, 0, "port", f"{pat.key}: {op.name} has no {kind}put ports in group "
                                         f"{name}*", pat.key, op)
                    return False
                if pp.var:
                    m.groups[pp.var] = members
                m.portmap[(pat.key, kind, f"{name}*")] = members[0] if members else None  # type: ignore[assignment]
                continue
            port: Port | None
            if pp.var is not None:
                port = ports[pp.position] if pp.position < len(ports) else None
            else:
                assert pp.name is not None
                port = resolve_port(op, pp.name, kind, schema)
            if port is None:
                if pp.optional:
                    continue
                what = pp.name if pp.name is not None else f"#{pp.position} (${pp.var})"
                if self.why is not None:
                    self.miss(m, 0, "port", f"{pat.key}: {op.name} has no {kind}put port {what}", pat.key, op)
                return False
            if pp.var is not None:
                if pp.var in m.ports and m.ports[pp.var] is not port:
                    if self.why is not None:
                        self.miss(m, 0, "port", f"{pat.key}: port ${pp.var} was bound to another port before",
                                         pat.key, op)
                    return False
                m.ports[pp.var] = port
            if pp.name is not None:
                m.portmap[(pat.key, kind, pp.name)] = port
            if pp.dtype is not None:
                dtype = self.ctx.parse_dtype(port) if port.dtype is not None else None
                if pp.dtype.kind == "literal":
                    if str(port.dtype) != str(pp.dtype.value):
                        if self.why is not None:
                            self.miss(m, 0, "port type", f"{pat.key}: port {port.name} of {op.name} is "
                                             f"{port.dtype}, not {pp.dtype.value}", pat.key, op)
                        return False
                elif not self.value_fits(pp.dtype, dtype, op, m, deferred):
                    if self.why is not None:
                        self.miss(m, 0, "port type", f"{pat.key}: port {port.name} of {op.name} is "
                                         f"{port.dtype}, not {self.wanted(pp.dtype, m)}", pat.key, op)
                    return False
        return True

    # -- edges
    def end_ports(self, m: Match, key: str, port: str, port_var: str | None, kind: str, group: bool) -> list[Port]:
        """The ports an edge end may be (several for commutative inputs)."""
        op = m.ops[key]
        if port_var is not None:
            p = m.ports.get(port_var)
            return [p] if p is not None else []
        if group:
            return group_ports(op, port, kind, self.schema(op))
        fixed = m.portmap.get((key, kind, port))
        if fixed is not None:
            return [fixed]
        p = resolve_port(op, port, kind, self.schema(op))
        if port == "^control":
            return []
        if kind == "in":
            comm = _commutative_ports(op, self.pattern.ops[key], self.rule_comm, self.schema(op))
            if p is not None and p.name in comm or port in comm:
                alts = [resolve_port(op, c, kind, self.schema(op)) for c in comm]
                return [a for a in alts if a is not None]
        return [p] if p is not None else []

    def edges_fit(self, m: Match, edges: Sequence[EdgeSpec]) -> Iterator[Match]:
        """Every way the pattern edges among bound ops hold (commutative inputs may give several)."""
        if not edges:
            yield m
            return
        e, rest = edges[0], edges[1:]
        a, b = m.ops[e.src.op], m.ops[e.dst.op]
        if e.control:
            if b in a.control_outputs:
                yield from self.edges_fit(m, rest)
            else:
                if self.why is not None:
                    self.miss(m, -1, "edge", f"{e}: no control edge from {a.name} to {b.name}", e.dst.op, b)
            return
        srcs = self.end_ports(m, e.src.op, e.src.port, e.src.port_var, "out", e.src.group)
        dsts = self.end_ports(m, e.dst.op, e.dst.port, e.dst.port_var, "in", e.dst.group)
        if e.src.group or e.dst.group:
            if srcs and len(srcs) == len(dsts) and all(isinstance(d, InputPort) and d.source is s
                                                        for s, d in zip(srcs, dsts)):
                yield from self.edges_fit(m, rest)
            else:
                if self.why is not None:
                    self.miss(m, -1, "edge", f"{e}: the ports of {a.name} ({len(srcs)}) do not feed those of {b.name} "
                              f"({len(dsts)}) one to one", e.dst.op, b)
            return
        used = set(id(p) for p in m.portmap.values() if isinstance(p, InputPort))
        fed_but_used = False
        for s in srcs:
            for d in dsts:
                if not isinstance(d, InputPort) or d.source is not s:
                    continue
                key = (e.dst.op, "in", e.dst.port)
                if e.dst.port_var is None and key not in m.portmap and id(d) in used:
                    fed_but_used = True
                    continue
                if len(dsts) > 1 and e.dst.port_var is None:
                    m2 = attrs.evolve(m, portmap=dict(m.portmap))
                    m2.portmap[key] = d
                    yield from self.edges_fit(m2, rest)
                else:
                    yield from self.edges_fit(m, rest)
                    return
        if self.why is not None:
            self.edge_miss(m, e, a, b, srcs, dsts, fed_but_used)

    def edge_miss(self, m: Match, e: EdgeSpec, a: Op, b: Op, srcs: list[Port], dsts: list[Port],
                  fed_but_used: bool) -> None:
        """Record why a data edge between bound ops does not hold (tracing only)."""
        if not srcs:
            self.miss(m, -1, "port", f"{e}: {a.name} has no output port {e.src.port}", e.src.op, a)
        elif not dsts:
            self.miss(m, -1, "port", f"{e}: {b.name} has no input port {e.dst.port}", e.dst.op, b)
        elif len(dsts) > 1:
            names = ", ".join(p.name for p in dsts)
            why = ("the one it feeds is already matched by another edge" if fed_but_used
                   else f"{a.name} feeds none of them")
            self.miss(m, -1, "commutative order", f"{e}: tried the commutative inputs {names} of {b.name} in any "
                      f"order; {why}", e.dst.op, b)
        else:
            d = dsts[0]
            src = d.source if isinstance(d, InputPort) else None
            fed = f"fed by {src.op.name if src.op is not None else 'the graph'}.{src.name}" if src is not None \
                else "not fed"
            self.miss(m, -1, "edge", f"{e}: input {d.name} of {b.name} is {fed}, not by {a.name}."
                      f"{srcs[0].name}", e.dst.op, b)

    # -- growing a match
    def candidates(self, i: int, m: Match, index: Mapping[str | None, list[Op]]) -> Iterator[Op]:
        key, via = self.order[i]
        if via is None:
            pat = self.pattern.ops[key]
            if pat.type is not None and pat.type.kind == "literal":
                types = pat.type.value if isinstance(pat.type.value, list) else [pat.type.value]
                for t in types:
                    yield from index.get(t, ())
            else:
                for ops in index.values():
                    yield from ops
            return
        e, known_is_src = via
        if e.control:
            if known_is_src:
                yield from m.ops[e.src.op].control_outputs
            else:
                yield from m.ops[e.dst.op].control_inputs
            return
        if known_is_src:
            seen: set[int] = set()
            for s in self.end_ports(m, e.src.op, e.src.port, e.src.port_var, "out", e.src.group):
                for c in s.consumers:  # type: ignore[attr-defined]
                    o = c.op
                    if o is not None and id(o) not in seen:
                        seen.add(id(o))
                        yield o
            return
        known = m.ops[e.dst.op]
        if e.dst.port_var is not None or e.dst.group:
            dsts = self.end_ports(m, e.dst.op, e.dst.port, e.dst.port_var, "in", e.dst.group)
        else:
            dsts = self.end_ports(m, e.dst.op, e.dst.port, None, "in", False)
            if not dsts:
                dsts = [p for p in known.input_ports]
        seen = set()
        for d in dsts:
            src = d.source  # type: ignore[attr-defined]
            if src is not None and src.op is not None and id(src.op) not in seen:
                seen.add(id(src.op))
                yield src.op

    def grow(self, i: int, m: Match, deferred: list[tuple[ValueSpec, Any, Op]],
             index: Mapping[str | None, list[Op]]) -> Iterator[Match]:
        if i == len(self.order):
            yield from self.finish(m, deferred)
            return
        key, via = self.order[i]
        pat = self.pattern.ops[key]
        tried = False
        for op in self.candidates(i, m, index):
            tried = True
            m2 = Match(m.graph, dict(m.ops), dict(m.ports), dict(m.groups), dict(m.values), dict(m.portmap), m.rule,
                       dict(m.inner))
            d2 = list(deferred)
            if not self.op_fits(op, pat, m2, d2):
                continue
            m2.ops[key] = op
            for m3 in self.edges_fit(m2, self.ready[i]):
                yield from self.grow(i + 1, m3, d2, index)
        if not tried and self.why is not None:
            if via is None:
                text = f"{key}: no op of type {_spec_text(pat.type)} in the graph" if pat.type is not None \
                    else f"{key}: no op in the graph"
            else:
                text = f"{key}: nothing is joined to the match along {via[0]}"
            self.miss(m, 0, "edge", text, key, None)

    def finish(self, m: Match, deferred: list[tuple[ValueSpec, Any, Op]]) -> Iterator[Match]:
        if deferred or self.pattern.where is not None:
            env = self.ctx.env(self.graph, m, self.pattern)
            for spec, value, op in deferred:
                env["op"] = OpView(op, self.ctx.parse_dtype)
                env["value"] = value
                try:
                    ok = spec.value.evaluate(env)
                except ExpressionError as e:
                    raise _with_rule(e, self.rule, m) from None
                if not ok:
                    key = next((k for k, o in m.ops.items() if o is op), None)
                    if self.why is not None:
                        self.miss(m, 1, "expression", f"{key}: {_spec_text(spec)} is false for {op.name} (value "
                                  f"{_short(value)})", key, op)
                    return
            if self.pattern.where is not None:
                env.pop("value", None)
                last = list(m.ops.values())[-1]
                env["op"] = OpView(last, self.ctx.parse_dtype)
                try:
                    if not self.pattern.where.evaluate(env):
                        if self.why is not None:
                            self.miss(m, 2, "where", f"where {self.pattern.where.source.strip()!r} is false for "
                                      f"{m.describe()}", None, None)
                        return
                except ExpressionError as e:
                    raise _with_rule(e, self.rule, m) from None
            env.pop("value", None)
            m.scope = env
        m.ops = {k: m.ops[k] for k in self.pattern.ops}  # declaration order
        yield m


def _with_rule(e: ExpressionError, rule: Rule | None, m: Match) -> ExpressionError:
    name = rule.name if rule is not None else None
    return ExpressionError(f"{e.reason} (matching ops {m.describe()})", e.location, name)


def _plan(pattern: Pattern) -> list[tuple[str, tuple[EdgeSpec, bool] | None]]:
    """Order in which op patterns are bound: an anchor with a literal type first, then along edges."""
    keys = list(pattern.ops)
    degree = {k: 0 for k in keys}
    for e in pattern.edges:
        degree[e.src.op] += 1
        degree[e.dst.op] += 1

    def anchor_score(k: str) -> tuple[int, int, int]:
        t = pattern.ops[k].type
        literal = t is not None and t.kind == "literal"
        return (0 if literal else 1, -degree[k], keys.index(k))

    order: list[tuple[str, tuple[EdgeSpec, bool] | None]] = []
    placed: set[str] = set()
    remaining = set(keys)
    while remaining:
        start = min(remaining, key=anchor_score)
        order.append((start, None))
        placed.add(start)
        remaining.discard(start)
        grew = True
        while grew:
            grew = False
            for e in pattern.edges:
                if e.src.op in placed and e.dst.op not in placed:
                    order.append((e.dst.op, (e, True)))
                    placed.add(e.dst.op)
                    remaining.discard(e.dst.op)
                    grew = True
                elif e.dst.op in placed and e.src.op not in placed:
                    order.append((e.src.op, (e, False)))
                    placed.add(e.src.op)
                    remaining.discard(e.src.op)
                    grew = True
    return order


def _ready_edges(pattern: Pattern, order: Sequence[tuple[str, Any]]) -> list[tuple[EdgeSpec, ...]]:
    """The edges to check when each op of ``order`` is bound: those between it and the ops bound before it (or
    itself), in the pattern's order."""
    out: list[tuple[EdgeSpec, ...]] = []
    bound: set[str] = set()
    for key, _ in order:
        bound.add(key)
        out.append(tuple(e for e in pattern.edges
                         if e.src.op in bound and e.dst.op in bound and (e.src.op == key or e.dst.op == key)))
    return out


def type_index(graph: Graph) -> dict[str | None, list[Op]]:
    """Ops by type, each list in topological order (insertion order if the graph has a cycle)."""
    from ..errors import GraphCycleError

    try:
        order: Sequence[Op] = graph.topological_order()
    except GraphCycleError:
        order = list(graph)
    index: dict[str | None, list[Op]] = {}
    for op in order:
        index.setdefault(op.type, []).append(op)
    return index


class Matcher:
    """One pattern searched in one graph from many anchors (the search plan and schema look-ups are shared)."""

    def __init__(self, graph: Graph, pattern: Pattern, ctx: MatchContext, rule: Rule | None = None,
                 index: Mapping[str | None, list[Op]] | None = None) -> None:
        self._search = _Search(graph, pattern, ctx, rule, lambda op: False)
        self._index = index
        self.graph = graph
        self.pattern = pattern
        self.rule = rule

    def at(self, anchor: Op, taken: Callable[[Op], bool] = lambda op: False) -> Match | None:
        """The first match whose anchor op is ``anchor`` (None if there is none)."""
        search = self._search
        search.taken = taken
        key = search.order[0][0]
        m = Match(self.graph, {}, rule=self.rule)
        deferred: list[tuple[ValueSpec, Any, Op]] = []
        if not search.op_fits(anchor, self.pattern.ops[key], m, deferred):
            return None
        m.ops[key] = anchor
        if self._index is None:
            self._index = type_index(self.graph) if len(search.order) > 1 else {}
        for m2 in search.edges_fit(m, search.ready[0]):
            for found in search.grow(1, m2, deferred, self._index):
                return found
        return None

    def why_not(self, anchor: Op, taken: Callable[[Op], bool] = lambda op: False) -> MissReason | None:
        """Why no match starts at ``anchor`` (None when one does): the same search as :meth:`at`, recording the
        failed check that got furthest.  Slower than :meth:`at`; for explaining, not for converting."""
        search = self._search
        why = search.why = _Why()
        try:
            found = self.at(anchor, taken)
        finally:
            search.why = None
        if found is not None:
            return None
        if why.best is not None:
            return why.best
        return MissReason("edge", "no way to join the pattern's ops was found", self._search.order[0][0],
                          anchor.name)


def anchor_candidates(graph: Graph, pattern: Pattern, index: Mapping[str | None, list[Op]]) -> list[Op]:
    """The ops a search for ``pattern`` starts from, in topological order."""
    key = _plan(pattern)[0][0]
    pat = pattern.ops[key]
    if pat.type is not None and pat.type.kind == "literal":
        types = pat.type.value if isinstance(pat.type.value, list) else [pat.type.value]
        if len(types) == 1:
            return list(index.get(types[0], ()))
        wanted = set(types)
        return [op for op in itertools.chain.from_iterable(index.values()) if op.type in wanted]
    return [op for ops in index.values() for op in ops]


def find_matches(graph: Graph, pattern: Pattern, ctx: MatchContext | None = None, *, rule: Rule | None = None,
                 overlapping: bool = False) -> list[Match]:
    """Every match of ``pattern`` in ``graph`` (not nested graphs), one per anchor op, in topological order of
    the anchors; unless ``overlapping``, a match sharing an op with an earlier one is left out."""
    ctx = ctx or MatchContext()
    index = type_index(graph)
    used: set[Op] = set()
    out = []
    matcher = Matcher(graph, pattern, ctx, rule, index)
    for anchor in anchor_candidates(graph, pattern, index):
        if not overlapping and anchor in used:
            continue
        m = matcher.at(anchor, used.__contains__ if not overlapping else (lambda op: False))
        if m is not None:
            out.append(m)
            if not overlapping:
                used.update(m.all_ops)
    return out
