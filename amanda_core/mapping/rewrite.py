"""Rewriting a match with a rule's mapper.

The rules of rewriting (``docs/mapping-tables.md``, "Mappers"):

* a key in both matcher and mapper names the matched op, updated in place (type, attributes, name, ports);
  a key only in the matcher names an op that is removed; a key only in the mapper names a new op;
* mapper edges between mapper ops are created;
* **edges at the boundary of a match** are carried by mapper edges that name a matched op's ports:
  ``$m.in0 -> new.a`` - the value that fed ``$m.in0`` now feeds ``new.a``;
  ``new.product -> $m.out0`` - whatever read ``$m.out0`` now reads ``new.product``;
  ``$m.in0 -> $m.out0`` - readers of ``out0`` read what fed ``in0`` (a bypass);
  ``$c.inputs* -> new.values*`` - a variadic group, element by element;
* when one op is replaced by one op and the mapper says nothing about its ports, its edges are carried by
  position: input *i* to the new op's input slot *i*, output *j* to output slot *j* (slots from the target
  schema), so ``aten::matmul(in0, in1) -> out0`` becomes ``MatMul(a, b) -> product``;
* a removed op whose output is read outside the match and not carried makes the match invalid (containment):
  the rewrite is skipped and the graph is untouched;
* control edges of removed ops move to the new ops that start (control inputs) and end (control outputs) the
  rewritten region;
* an op whose type changes keeps only the attributes the mapper gives (``keep_attrs`` keeps others); an op
  whose type stays keeps its attributes and the mapper's override them;
* an updated op's ports take the names the mapper lists; otherwise, if its type changed or a port name is not a
  slot of the target schema (a newer version that renamed a parameter), the target schema's slot names by
  position;
* a new op whose ``name`` is the name of an op the same rewrite removes takes that name once the op is gone;
* a new op's variadic group joined to a matched op's group by an edge (``$c.inputs* -> new.values*``,
  ``new.outputs* -> $s.outputs*``) gets one port per element;
* every new or updated op records ``(table, rule)`` in ``provenance`` and carries the target namespace.
"""

from __future__ import annotations

__all__ = ["RewriteContext", "Rewrite", "MappingError", "apply_template", "default_ports", "ORIGIN_KEY", "HISTORY_KEY",
           "recording_origins", "origin_of", "inherit_origin"]

import contextlib
import contextvars
from typing import AbstractSet, Any, Callable, Iterator, Sequence

import attrs

from ..errors import AmandaError, GraphError
from ..ir.graph import Graph, InputPort, Op, OutputPort, Port
from ..namespace.names import parse_namespace
from ..namespace.registry import NOT_CONSTANT, ConstantOp
from ..namespace.schema import NO_DEFAULT, NamespaceSchema, OpSchema, PortSchema
from .expr import ExpressionError
from .match import Match, MatchContext, group_ports, resolve_port
from .table import EdgeRef, EdgeSpec, OpTemplate, Rule, Template, ValueSpec
from .views import OpView


class MappingError(AmandaError):
    """A rule that cannot be applied, or whose result breaks the graph; names table, rule and ops."""

    def __init__(self, message: str, table: str | None = None, rule: str | None = None,
                 ops: Sequence[str] = ()) -> None:
        self.reason = message
        self.table = table
        self.rule = rule
        self.ops = tuple(ops)
        where = ""
        if table:
            where += f"table {table!r}"
        if rule:
            where += f"{', ' if where else ''}rule {rule!r}"
        if ops:
            where += f"{' ' if where else ''}(ops {', '.join(ops[:8])}{' ...' if len(ops) > 8 else ''})"
        super().__init__(f"{where}: {message}" if where else message)


@attrs.define
class RewriteContext:
    table: str
    dst_namespace: str
    dst_schema: NamespaceSchema | None
    match_ctx: MatchContext
    same_family: bool = False
    src_schema_of: Callable[[Op], OpSchema | None] = lambda op: None
    make_constant: Callable[[Any], ConstantOp] | None = None
    """How the target namespace writes a constant (for mapper ``consts``)."""
    shared_constants: dict[Any, Op] | None = None
    """Constant ops made so far in this graph by this table application that other inputs may read too
    (:attr:`ConstantOp.shared`), by :func:`literal_key`; None: every constant is made for its one input."""
    made_constants: dict[Any, tuple[ConstantOp, Any]] | None = None
    """What ``make_constant`` gave for each plain literal value so far (by :func:`_literal`), with its
    :func:`literal_key`: the same value makes the same constant, so a table application asks once per value
    (a model's convolutions read a handful of strides and paddings, six literals each)."""


@attrs.define
class _OpPlan:
    """What the mapper says of one op, every expression evaluated (nothing in the graph changed yet)."""

    type: str | None = None
    name: str | None = None
    """The evaluated ``name`` expression (None: the op keeps its name, or a new one is named by its key)."""
    attr_values: dict[str, Any] = attrs.field(factory=dict)
    meta: dict[str, Any] = attrs.field(factory=dict)
    inputs: list[tuple[str, Any]] | None = None
    outputs: list[tuple[str, Any]] | None = None
    consts: dict[str, ConstantOp | None] = attrs.field(factory=dict)
    """Mapper ``consts``: the constant that feeds each input (None: the input goes unfed)."""
    const_keys: dict[str, Any] = attrs.field(factory=dict)
    """The :func:`literal_key` of each constant in ``consts`` that may be shared (absent: made for its input)."""


@attrs.define
class Rewrite:
    """What one application of a rule did."""

    created: list[Op] = attrs.field(factory=list)
    updated: list[Op] = attrs.field(factory=list)
    removed: list[str] = attrs.field(factory=list)
    may_cycle: bool = True
    """False when the rewrite cannot have closed a cycle: it made no edge but constants' (which read nothing) and
    edges carried one for one from an op it replaced, so the engine need not sort the graph again to find out."""


def _eval(spec: ValueSpec | None, env: dict[str, Any], rule: Rule, match: Match) -> Any:
    if spec is None:
        return None
    if spec.kind == "literal":
        return spec.value
    if spec.kind == "var":
        name = spec.value
        if name not in env:
            raise MappingError(f"the mapper uses ${name}, which the matcher did not bind", None, rule.name,
                               [o.name for o in match.all_ops])
        value = env[name]
        return value._op.name if isinstance(value, OpView) else value
    try:
        return spec.value.evaluate(env)
    except ExpressionError as e:
        where = f"{e.location}: " if e.location is not None else ""
        raise MappingError(f"{where}{e.reason} (matched {match.describe()})", None, rule.name,
                           [o.name for o in match.all_ops]) from None


def _as_dtype_text(value: Any) -> str | None:
    return None if value is None else str(value)


_SLOT_NAMES: dict[tuple[int, str, int], tuple[OpSchema, list[str]]] = {}


def _slot_names(schema: OpSchema, kind: str, count: int) -> list[str]:
    """The names ``count`` ports of one side take by position: :func:`default_ports` with nothing wanted,
    remembered per schema (every match of a rule asks the same)."""
    key = (id(schema), kind, count)
    found = _SLOT_NAMES.get(key)
    if found is None or found[0] is not schema:
        if len(_SLOT_NAMES) > 4096:
            _SLOT_NAMES.clear()
        found = _SLOT_NAMES[key] = (schema, default_ports(schema, kind, set(), count)[:count])
    return found[1]


def default_ports(schema: OpSchema | None, kind: str, wanted: AbstractSet[str], count: int = 0) -> list[str]:
    """Port names for a new op: the schema's slots in order, up to the last one that is required, referenced
    (``wanted``) or needed to place ``count`` positional ports; variadic slots numbered as referenced."""
    if schema is None:
        return []
    slots: tuple[PortSchema, ...] = schema.input_ports if kind == "in" else schema.output_ports
    names: list[str] = []
    last_needed = -1
    for i, s in enumerate(slots):
        if s.variadic:
            break
        if (not s.optional and s.default is NO_DEFAULT) or s.name in wanted or i < count:
            last_needed = i
    for i, s in enumerate(slots):
        if s.variadic:
            prefix = s.name + "_"
            numbered = sorted(int(w[len(prefix):]) for w in wanted if w.startswith(prefix)
                              and w[len(prefix):].isdigit())
            extra = max(count - i, 0)
            top = max([n + 1 for n in numbered] + [extra, s.min_count if s.min_count > 0 else 0])
            names.extend(f"{s.name}_{k}" for k in range(top))
            break
        if i <= last_needed:
            names.append(s.name)
    return names


@attrs.frozen
class _Shape:
    """What a mapper does with one set of matched keys, the same for every match of the rule: worked out once
    (:func:`_shape_of`), not per match."""

    kept: tuple[str, ...]
    removed: tuple[str, ...]
    new_keys: tuple[str, ...]
    data_edges: tuple[EdgeSpec, ...]
    control_edges: tuple[EdgeSpec, ...]
    positional: bool
    """One op replaced by one op, and the mapper names none of its ports: edges carried by position."""
    wanted_in: dict[str, frozenset[str]]
    """For each new op: the input ports mapper edges and ``consts`` name."""
    wanted_out: dict[str, frozenset[str]]
    problem: str | None
    """Why the mapper cannot apply to such a match (an edge end naming no op of the match or the mapper, a control
    edge joining a removed op), or None."""
    in_place: bool
    """Every matched op is kept, and the mapper makes no op and writes no edge (it retypes ops and feeds their
    inputs constants)."""
    acyclic: bool
    """The mapper writes no edge and removes nothing, or replaces one op by one taking its edges by position: its
    rewrites add no path between ops that were not joined before (constants it feeds read nothing), so they cannot
    close a cycle."""


_SHAPES: dict[tuple[int, tuple[str, ...]], tuple[Template, _Shape]] = {}


def _shape_of(t: Template, keys: tuple[str, ...]) -> _Shape:
    cached = _SHAPES.get((id(t), keys))
    if cached is not None and cached[0] is t:
        return cached[1]
    kept = tuple(k for k in keys if k in t.ops)
    removed = tuple(k for k in keys if k not in t.ops)
    new_keys = tuple(k for k in t.ops if k not in keys)
    data = tuple(e for e in t.edges if not e.control)
    control = tuple(e for e in t.edges if e.control)
    positional = (len(removed) == 1 and len(new_keys) == 1 and not kept
                  and not any(e.src.op == removed[0] or e.dst.op == removed[0] for e in t.edges))
    wanted_in: dict[str, set[str]] = {k: set(t.ops[k].consts) for k in new_keys}
    wanted_out: dict[str, set[str]] = {k: set() for k in new_keys}
    for e in data:
        if e.src.op in wanted_out:
            wanted_out[e.src.op].add(e.src.port)
        if e.dst.op in wanted_in:
            wanted_in[e.dst.op].add(e.dst.port)
    known = set(keys) | set(new_keys)
    problem = None
    for e in t.edges:
        for end in (e.src, e.dst):
            if problem is None and end.op not in known:
                problem = f"edge end {end} names no op of the match or the mapper"
        if e.control and problem is None and (e.src.op in removed or e.dst.op in removed):
            problem = f"control edge {e} joins an op the rule removes or does not know"
    shape = _Shape(kept, removed, new_keys, data, control, positional,
                   {k: frozenset(v) for k, v in wanted_in.items()}, {k: frozenset(v) for k, v in wanted_out.items()},
                   problem, not removed and not new_keys and not t.edges, not t.edges and (not removed or positional))
    if len(_SHAPES) > 4096:
        _SHAPES.clear()
    _SHAPES[(id(t), keys)] = (t, shape)
    return shape


class _Applier:
    def __init__(self, graph: Graph, match: Match, rule: Rule, ctx: RewriteContext) -> None:
        self.g = graph
        self.m = match
        self.rule = rule
        self.ctx = ctx
        self.t = rule.dst
        # the names the matcher's conditions saw are the mapper's too (the same match, pattern and context)
        self.env = match.scope if match.scope is not None else ctx.match_ctx.env(graph, match, rule.src)
        self.shape = shape = _shape_of(self.t, tuple(match.ops))
        ops = match.ops
        self.kept = {k: ops[k] for k in shape.kept}
        self.removed = {k: ops[k] for k in shape.removed}
        self.removed_set = set(self.removed.values())
        self.new_keys = shape.new_keys
        self.new: dict[str, Op] = {}
        self.deferred_names: list[tuple[str, str]] = []  # (temporary name, name it takes after the removal)
        self.dead_candidates: list[Op | None] = []  # constant ops that may go unread after the rewrite
        self.consts_made: list[Op] = []
        self.plans: dict[str, _OpPlan] = {}
        last = next(reversed(ops.values()), None)
        self.default_op = OpView(last, ctx.match_ctx.parse_dtype) if last is not None else None

    def fail(self, message: str) -> MappingError:
        return MappingError(message, self.ctx.table, self.rule.name, [o.name for o in self.m.all_ops])

    def env_for(self, key: str) -> dict[str, Any]:
        env = self.env
        op = self.m.ops.get(key)
        env["op"] = OpView(op, self.ctx.match_ctx.parse_dtype) if op is not None else self.default_op
        return env

    def dst_schema(self, op_type: str | None) -> OpSchema | None:
        if self.ctx.dst_schema is None or op_type is None:
            return None
        return self.ctx.dst_schema.get(op_type)

    # -- classifying edge ends
    def source_of(self, ref: EdgeRef) -> list[Port | None]:
        """Value sources an edge end stands for (one per group element; None = an unfed optional input)."""
        if ref.op in self.new:
            op = self.new[ref.op]
            if ref.group:
                return list(group_ports(op, ref.port, "out", self.dst_schema(op.type)))
            return [self.port_of_new(op, ref.port, "out")]
        found = self.m.ops.get(ref.op)
        if found is None:
            raise self.fail(f"edge end {ref} names no op of the match or the mapper")
        op = found
        schema = self.ctx.src_schema_of(op) if op in self.removed_set else self.dst_schema(op.type)
        if ref.port_var is not None and ref.port_var not in self.m.ports:
            return [None]  # an optional port ($p? in the matcher) the op lacks: carries nothing
        if ref.port_var is not None:
            ports: list[Port] = [self.m.ports[ref.port_var]]
        elif ref.group:
            ports = group_ports(op, ref.port, "in", schema) or group_ports(op, ref.port, "out", schema)
        else:
            p = resolve_port(op, ref.port, "out", schema) or resolve_port(op, ref.port, "in", schema)
            if p is None and op not in self.removed_set:
                p = op.add_output_port(ref.port)  # a port the updated op gains (its new type has it)
            if p is None:
                raise self.fail(f"edge end {ref}: op {op.name!r} has no port {ref.port!r}")
            ports = [p]
        out: list[Port | None] = []
        for p in ports:
            if isinstance(p, InputPort):
                out.append(p.source)  # the value that fed it
            else:
                if op in self.removed_set:
                    raise self.fail(f"edge end {ref}: {op.name}.{p.name} is an output of an op the rule removes")
                out.append(p)
        return out

    def targets_of(self, ref: EdgeRef) -> list[tuple[str, Port]]:
        """What an edge's target end stands for: ("in", input port) or ("readers", output port)."""
        if ref.op in self.new:
            op = self.new[ref.op]
            if ref.group:
                return [("in", p) for p in group_ports(op, ref.port, "in", self.dst_schema(op.type))]
            return [("in", self.port_of_new(op, ref.port, "in"))]
        op = self.m.ops[ref.op]
        kept = op not in self.removed_set
        schema = self.dst_schema(op.type) if kept else self.ctx.src_schema_of(op)
        if ref.port_var is not None and ref.port_var not in self.m.ports:
            return []  # an optional port ($p? in the matcher) the op lacks: nothing to feed or read
        if ref.port_var is not None:
            ports: list[Port] = [self.m.ports[ref.port_var]]
        elif ref.group:
            ports = group_ports(op, ref.port, "out", schema) or group_ports(op, ref.port, "in", schema)
        else:
            p = (resolve_port(op, ref.port, "in", schema) if kept else None) or resolve_port(op, ref.port, "out",
                                                                                              schema)
            if p is None and kept:
                p = op.add_input_port(ref.port)  # a port the updated op gains (its new type has it)
            if p is None:
                raise self.fail(f"edge end {ref}: op {op.name!r} has no port {ref.port!r}")
            ports = [p]
        out: list[tuple[str, Port]] = []
        for p in ports:
            if isinstance(p, OutputPort):
                out.append(("readers", p))
            elif kept:
                out.append(("in", p))
            else:
                raise self.fail(f"edge end {ref}: {op.name}.{p.name} is an input of an op the rule removes")
        return out

    def port_of_new(self, op: Op, name: str, kind: str) -> Port:
        p = resolve_port(op, name, kind, self.dst_schema(op.type))
        if p is not None:
            return p
        return op.add_input_port(name) if kind == "in" else op.add_output_port(name)

    # -- containment
    def carried_outputs(self) -> set[int]:
        carried: set[int] = set()
        for e in self.t.edges:
            if e.control or e.dst.op not in self.m.ops:
                continue
            op = self.m.ops[e.dst.op]
            if op not in self.removed_set:
                continue
            schema = self.ctx.src_schema_of(op)
            if e.dst.port_var is not None:
                if e.dst.port_var in self.m.ports:  # else an optional port the op lacks
                    carried.add(id(self.m.ports[e.dst.port_var]))
            elif e.dst.group:
                carried.update(id(p) for p in group_ports(op, e.dst.port, "out", schema))
            else:
                p = resolve_port(op, e.dst.port, "out", schema)
                if p is not None:
                    carried.add(id(p))
        return carried

    def positional(self) -> bool:
        """One op replaced by one op, and the mapper names none of its ports: carry edges by position."""
        return self.shape.positional

    def contained(self) -> bool:
        if self.positional():
            return True
        carried = self.carried_outputs()
        matched = set(self.m.ops.values())
        for op in self.removed.values():
            for q in op.output_ports:
                outer = [c for c in q.consumers if c.op not in matched]
                if outer and id(q) not in carried:
                    return False
        return True

    # -- building
    def new_name(self, key: str, tpl: OpTemplate) -> str:
        """The name of a new op: its ``name`` (made unique), else the key, else ``<first matched op>_<var>``.
        A ``name`` held by an op this rewrite removes is given to the new op once that op is gone."""
        if tpl.name is not None:
            name = self.plans[key].name
            assert name is not None
            holder = self.g.ops.get(name)
            if holder is not None and holder in self.removed_set:
                unique = self.g.unique_name(name)
                self.deferred_names.append((unique, name))
                return unique
        elif tpl.var is None:
            name = key
        else:
            anchor = next(iter(self.m.ops.values()), None)
            name = f"{anchor.name}_{tpl.var}" if anchor is not None else tpl.var
        return self.g.unique_name(name)



    # -- the plan: every expression evaluated and every check that needs no change made, before any change
    def plan(self) -> None:
        """Evaluate what the mapper says of each op (type, name, attributes, meta, port types, constants) and
        check what can be checked on the graph as it is (edge ends and control edges name ops of the match or
        the mapper); raises MappingError with the graph untouched."""
        if self.shape.problem is not None:
            raise self.fail(self.shape.problem)
        for key, tpl in self.t.ops.items():
            if key not in self.new_keys and key not in self.kept:
                continue
            env = self.env_for(key)
            plan = _OpPlan()
            if tpl.type is not None:
                op_type = _eval(tpl.type, env, self.rule, self.m)
                plan.type = str(op_type) if op_type is not None else None
            elif key in self.kept:
                plan.type = self.kept[key].type
            if key in self.new_keys and plan.type is None:
                raise self.fail(f"mapper op {key!r} creates an op, so it needs a 'type'")
            if tpl.name is not None:
                name = _eval(tpl.name, env, self.rule, self.m)
                if not isinstance(name, str) or not name:
                    raise self.fail(f"mapper op {key!r}: the name expression gave {name!r}, not a non-empty string")
                plan.name = name
            plan.attr_values = self.attrs_of(tpl, env)
            plan.meta = {mk: _eval(spec, env, self.rule, self.m) for mk, spec in tpl.meta.items()}
            if tpl.inputs is not None:
                plan.inputs = [(n, _as_dtype_text(_eval(dt, env, self.rule, self.m))) for n, dt in tpl.inputs]
            if tpl.outputs is not None:
                plan.outputs = [(n, _eval(dt, env, self.rule, self.m)) for n, dt in tpl.outputs]
            made_cache = self.ctx.made_constants
            for name, spec in tpl.consts.items():
                value = _eval(spec, env, self.rule, self.m)
                if value is None:
                    plan.consts[name] = None
                    continue
                if self.ctx.make_constant is None:
                    raise self.fail(f"mapper op {key!r}: consts need a target namespace that says how to write a "
                                    "constant")
                lit = _literal(value) if made_cache is not None else None
                hit = made_cache.get(lit) if lit is not None else None  # type: ignore[union-attr]
                if hit is None:
                    try:
                        made = self.ctx.make_constant(value)
                    except AmandaError as e:
                        raise self.fail(f"mapper op {key!r}, consts {name!r}: {e}") from None
                    hit = (made, literal_key(made) if made.shared else None)
                    if lit is not None:
                        made_cache[lit] = hit  # type: ignore[index]
                plan.consts[name] = hit[0]
                if hit[1] is not None:
                    plan.const_keys[name] = hit[1]
            self.plans[key] = plan

    def attrs_of(self, tpl: OpTemplate, env: dict[str, Any]) -> dict[str, Any]:
        """The attributes the mapper gives an op, evaluated in ``env`` (its :meth:`env_for`, already made)."""
        out = {}
        for name, spec in tpl.attrs.items():
            value = _eval(spec, env, self.rule, self.m)
            if value is not None or spec.kind == "literal":
                out[name] = value
        return out

    def create(self) -> None:
        wanted_in, wanted_out = self.shape.wanted_in, self.shape.wanted_out
        count_in = count_out = 0
        if self.positional():
            (r,) = self.removed.values()
            count_in, count_out = len(r.input_ports), len(r.output_ports)
        for key in self.new_keys:
            tpl = self.t.ops[key]
            plan = self.plans[key]
            env = self.env_for(key)
            op = self.g.add_op(plan.type, self.new_name(key, tpl), attrs=plan.attr_values,
                               namespace=self.ctx.dst_namespace)
            op.provenance = (self.ctx.table, self.rule.name)
            if plan.meta:
                op.meta = {**op.meta, **plan.meta}
            schema = self.dst_schema(op.type)
            if plan.inputs is not None:
                for pname, dtext in plan.inputs:
                    op.add_input_port(pname, dtext)
            elif schema is None:  # no target schema to name the slots: anonymous ports, by position
                for _ in range(count_in):
                    op.add_input_port()
            else:
                for pname in default_ports(schema, "in", wanted_in[key], count_in):
                    op.add_input_port(pname)
            if plan.outputs is not None:
                for pname, dt in plan.outputs:
                    op.add_output_port(pname, _as_dtype_text(dt))
            elif schema is None:
                for _ in range(count_out):
                    op.add_output_port()
            else:
                for pname in default_ports(schema, "out", wanted_out[key], count_out):
                    op.add_output_port(pname)
            if tpl.body is not None:
                self.build_body(op, tpl.body, env)
            self.new[key] = op

    def build_body(self, op: Op, tpl: Template, env: dict[str, Any]) -> None:
        """Give a new op the graph its mapper describes: new ops, and edges among them and ``graph.<port>`` (the
        op's own ports, which produce inside the body for inputs and consume for outputs)."""
        body = Graph()
        op.set_body(body)
        made: dict[str, Op] = {}
        for key, it in tpl.ops.items():
            op_type = _eval(it.type, env, self.rule, self.m) if it.type is not None else None
            if op_type is None:
                raise self.fail(f"op {key!r} in the body of {op.name!r} needs a 'type'")
            name = _eval(it.name, env, self.rule, self.m) if it.name is not None else (it.var or key)
            inner = body.add_op(str(op_type), body.unique_name(str(name)),
                                attrs={k: _eval(v, env, self.rule, self.m) for k, v in it.attrs.items()})
            inner.provenance = (self.ctx.table, self.rule.name)
            for pname, dt in it.inputs or ():
                inner.add_input_port(pname, _as_dtype_text(_eval(dt, env, self.rule, self.m)))
            for pname, dt in it.outputs or ():
                inner.add_output_port(pname, _as_dtype_text(_eval(dt, env, self.rule, self.m)))
            if it.body is not None:
                self.build_body(inner, it.body, env)
            made[key] = inner
        for e in tpl.edges:
            try:
                if e.control:
                    body.connect_control(made[e.src.op], made[e.dst.op])
                    continue
                if e.src.op == "graph":
                    src: Port = body.input_ports[e.src.port]
                else:
                    a = made[e.src.op]
                    src = a.output_ports.get(e.src.port) or a.add_output_port(e.src.port)
                if e.dst.op == "graph":
                    dst: Port = body.output_ports[e.dst.port]
                else:
                    b = made[e.dst.op]
                    dst = b.input_ports.get(e.dst.port) or b.add_input_port(e.dst.port)
                body.connect(src, dst)  # type: ignore[arg-type]
            except (KeyError, GraphError) as err:
                raise self.fail(f"body edge {e} of {op.name!r}: {err}") from None

    def update(self) -> None:
        for key, op in self.kept.items():
            tpl = self.t.ops[key]
            plan = self.plans[key]
            old_type = op.type
            new_type = plan.type
            given = plan.attr_values
            # an op that keeps its type keeps its attributes, unless it changes family (a TF `T` means nothing
            # to an ONNX op of the same name)
            keep = tpl.keep_attrs if tpl.keep_attrs is not None else (new_type == old_type and self.ctx.same_family)
            if keep is True:
                attrs_new = dict(op.attrs)
            elif keep:
                attrs_new = {k: v for k, v in op.attrs.items() if k in keep}
            else:
                attrs_new = {}
            attrs_new.update(given)
            if plan.meta:
                op.meta = {**op.meta, **plan.meta}
            if tpl.name is not None:
                self.g.rename_op(op, self.new_name(key, tpl))
            self.drop_const_ports(key, op, tpl, new_type, new_type != old_type)
            # the four fields in one change: one undo record and one version step
            op.retarget(str(new_type) if new_type is not None else None, attrs_new, self.ctx.dst_namespace,
                        (self.ctx.table, self.rule.name))
            self.rename_ports(op, plan, new_type != old_type)

    def drop_const_ports(self, key: str, op: Op, tpl: OpTemplate, new_type: Any, type_changed: bool) -> None:
        """An updated op loses the inputs its matcher read as constants (``consts``) when its type changes, or when
        the target schema of its type has no such input, unless the mapper lists them: their values went into the
        rewrite (the constant ops, now unread, are swept)."""
        pat = self.rule.src.ops.get(key)
        if pat is None or not pat.consts:
            return
        target = self.dst_schema(str(new_type)) if new_type is not None else None
        if not type_changed:
            if target is None:
                return
            keep = {n for n in pat.consts if target.input(n) is not None}
        else:
            keep = set()
        listed = {n for n, _ in tpl.inputs} if tpl.inputs is not None else set()
        named = {e.dst.port for e in self.t.edges if e.dst.op == key} | {e.src.port for e in self.t.edges
                                                                           if e.src.op == key}
        schema = self.ctx.src_schema_of(op)
        for name in pat.consts:
            if name in listed or name in named or name in keep:
                continue
            port = resolve_port(op, name, "in", schema)
            if not isinstance(port, InputPort):
                continue
            if port.source is not None:
                self.dead_candidates.append(port.source.op)
                self.g.disconnect(port)
            op.remove_input_port(port)

    def feed_consts(self) -> None:
        """Mapper ``consts``: a new constant op of the target namespace feeds each named input (None: unfed)."""
        for key, tpl in self.t.ops.items():
            if not tpl.consts:
                continue
            op = self.new.get(key) or self.kept.get(key)
            if op is None:
                continue
            schema = self.dst_schema(op.type)
            plan = self.plans[key]
            pool = self.ctx.shared_constants
            for name, made in plan.consts.items():
                port = resolve_port(op, name, "in", schema)
                if made is None:
                    if isinstance(port, InputPort) and port.source is not None:
                        self.dead_candidates.append(port.source.op)
                        self.g.disconnect(port)
                    continue
                if not isinstance(port, InputPort):
                    port = op.add_input_port(name, index=_slot_index(op, name, schema))
                elif port.source is not None:
                    self.dead_candidates.append(port.source.op)
                literal = plan.const_keys.get(name) if pool is not None else None
                const = pool.get(literal) if literal is not None else None  # type: ignore[union-attr]
                if const is not None and const.graph is not self.g:
                    const = None  # undone with the rule that made it, or swept since
                if const is None:
                    const = self.g.add_op(made.type, self.g.unique_name(f"{op.name}_{name}"),
                                          attrs=dict(made.attrs), namespace=self.ctx.dst_namespace,
                                          outputs=[made.port])
                    const.provenance = (self.ctx.table, self.rule.name)
                    self.consts_made.append(const)
                    if literal is not None:
                        pool[literal] = const  # type: ignore[index]
                self.g.connect(const.output_ports[0], port, replace=True)

    def sweep(self) -> list[str]:
        """Constant ops that fed the match and that nothing reads any more are removed."""
        names = []
        constant_of = self.ctx.match_ctx.constant_of
        seen: set[int] = set()
        for op in self.dead_candidates:
            if op is None or id(op) in seen or op.graph is not self.g:
                continue
            seen.add(id(op))
            if any(q.consumers for q in op.output_ports) or any(True for _ in op.control_outputs):
                continue
            if constant_of(op) is NOT_CONSTANT:
                continue
            names.append(op.name)
            self.g.remove_op(op)
        return names

    def rename_ports(self, op: Op, plan: _OpPlan, type_changed: bool) -> None:
        """Ports the mapper lists take those names (by position); otherwise, when the type changed or a port's name
        is not a slot of the target schema (a version that renamed its parameters), every port of that side takes
        the target schema's slot names by position."""
        schema = self.dst_schema(op.type)
        for kind, listed in (("in", plan.inputs), ("out", plan.outputs)):
            ports = list(op.input_ports if kind == "in" else op.output_ports)
            if listed is not None:
                names = [n for n, _ in listed]
                dtypes = [dt for _, dt in listed]
            elif not ports:
                continue
            elif schema is not None and (type_changed or not _names_fit(ports, schema, kind)):
                names = _slot_names(schema, kind, len(ports))
                dtypes = [None] * len(names)
            else:
                continue
            _rename_ports(op, kind, ports, names, dtypes)

    def connect_edges(self) -> None:
        plans: list[tuple[EdgeSpec, list[Port | None], list[tuple[str, Port]]]] = []
        for e in self.shape.data_edges:
            plans.append((e, self.source_of(e.src), self.targets_of(e.dst)))  # resolve before changing
        for e, sources, targets in plans:
            if len(sources) != len(targets) and e.dst.group and e.dst.op in self.new:
                op = self.new[e.dst.op]  # a new op's variadic group takes as many ports as the values given
                for i in range(len(sources)):
                    if f"{e.dst.port}_{i}" not in op.input_ports:
                        op.add_input_port(f"{e.dst.port}_{i}")
                targets = self.targets_of(e.dst)
            elif len(sources) != len(targets) and e.src.group and e.src.op in self.new:
                op = self.new[e.src.op]  # ... and as many output ports as there are groups of readers to serve
                for i in range(len(targets)):
                    if f"{e.src.port}_{i}" not in op.output_ports:
                        op.add_output_port(f"{e.src.port}_{i}")
                sources = self.source_of(e.src)
            if not targets and e.dst.port_var is not None and e.dst.port_var not in self.m.ports:
                continue  # to an optional port the op lacks: nothing reads it
            if len(sources) != len(targets):
                raise self.fail(f"edge {e}: {len(sources)} source(s) for {len(targets)} target(s)")
            for src, (kind, tgt) in zip(sources, targets):
                if src is None:
                    continue  # an optional input nobody fed: nothing to carry
                try:
                    if kind == "in":
                        self.g.connect(src, tgt, replace=True)  # type: ignore[arg-type]
                    else:
                        made = src.op is not None and (src.op in self.new.values() or src.op in self.kept.values())
                        if made and src.dtype is None and tgt.dtype is not None:
                            src.dtype = tgt.dtype  # the same value: later rules (and exporters) see its type
                        self.g.replace_all_uses(tgt, src)  # type: ignore[arg-type]
                except GraphError as err:
                    raise self.fail(f"edge {e}: {err}") from None

    def carry_by_position(self) -> None:
        (r,) = self.removed.values()
        (new,) = self.new.values()
        new_in, new_out = list(new.input_ports), list(new.output_ports)
        for i, p in enumerate(r.input_ports):
            if p.source is None:
                continue
            if i >= len(new_in):
                raise self.fail(f"{r.name}.{p.name} is fed, but the new op {new.name!r} ({new.type}) has only "
                                f"{len(new_in)} input port(s); say where it goes with a mapper edge")
            self.g.connect(p.source, new_in[i], replace=True)
        for j, q in enumerate(r.output_ports):
            if j < len(new_out) and q.dtype is not None and new_out[j].dtype is None:  # the same value
                new_out[j].dtype = q.dtype
            if not q.consumers:
                continue
            if j >= len(new_out):
                raise self.fail(f"{r.name}.{q.name} is read, but the new op {new.name!r} ({new.type}) has only "
                                f"{len(new_out)} output port(s); say where its readers go with a mapper edge")
            self.g.replace_all_uses(q, new_out[j])

    def control(self) -> None:
        for e in self.shape.control_edges:
            a = self.new.get(e.src.op) or self.m.ops.get(e.src.op)
            b = self.new.get(e.dst.op) or self.m.ops.get(e.dst.op)
            if a is None or b is None or a in self.removed_set or b in self.removed_set:
                raise self.fail(f"control edge {e} joins an op the rule removes or does not know")
            self.g.connect_control(a, b)
        if not self.removed:
            return
        ctrl_in = {o for r in self.removed.values() for o in r.control_inputs if o not in self.removed_set}
        ctrl_out = {o for r in self.removed.values() for o in r.control_outputs if o not in self.removed_set}
        if not ctrl_in and not ctrl_out:
            return
        region = list(self.new.values()) + list(self.kept.values())
        members = set(region)
        entries = [o for o in region if not any(p in members for p in o.predecessors())]
        exits = [o for o in region if not any(s in members for s in o.successors())]
        if not region:
            for a in sorted(ctrl_in, key=lambda o: o.name):
                for b in sorted(ctrl_out, key=lambda o: o.name):
                    if a is not b:
                        self.g.connect_control(a, b)
            return
        for a in sorted(ctrl_in, key=lambda o: o.name):
            for b in entries:
                if a is not b:
                    self.g.connect_control(a, b)
        for b in sorted(ctrl_out, key=lambda o: o.name):
            for a in exits:
                if a is not b:
                    self.g.connect_control(a, b)

    def check_removable(self) -> None:
        """Every reader of a removed op's output is in the match (or was carried elsewhere by now)."""
        matched = set(self.m.ops.values())
        for op in self.removed.values():
            for q in op.output_ports:
                for c in q.consumers:
                    if c.op not in matched:
                        raise self.fail(f"{op.name}.{q.name} is still read by {c.qualified_name} after the rewrite")

    def remove(self) -> list[str]:
        names = []
        matched = set(self.m.ops.values())
        for op in self.removed.values():
            for q in op.output_ports:
                for c in list(q.consumers):
                    if c.op in matched:  # a matcher edge the mapper did not restate: it goes (mapping-tables.md)
                        self.g.disconnect(c)
        for op in self.removed.values():
            names.append(op.name)
            self.g.remove_op(op)
        return names

    def unfed_after(self, fed_by_removed: Sequence[Port]) -> None:
        """A kept op's input that a removed op fed and the mapper did not feed again is an error when the
        target schema requires it (an optional input may simply go unfed)."""
        for p in fed_by_removed:
            if not isinstance(p, InputPort) or p.op is None:
                continue
            if p.source is not None and p.source.op not in self.removed_set:
                continue  # fed again (the check runs before the removed ops go)
            op = p.op
            schema = self.dst_schema(op.type)
            slot = schema.input(p.name) if schema is not None else None
            if slot is None and schema is not None:
                idx = op.input_ports.index(p.name)
                slots = schema.input_ports
                slot = slots[idx] if idx < len(slots) else (slots[-1] if slots and slots[-1].variadic else None)
            if slot is None or (not slot.optional and slot.default is NO_DEFAULT):
                raise self.fail(f"input {op.name}.{p.name} was fed by an op the rule removes, and the mapper "
                                "does not feed it again; add a mapper edge into it (or remove the op too)")

    def run(self) -> Rewrite | None:
        """Plan (evaluate and check; nothing changes), then commit inside :meth:`Graph.atomic`: the checks that
        need the rewritten edges run before any op is removed, and a failure at any step leaves the graph as it
        was (``graph == copy``)."""
        if self.shape.in_place:
            # every matched op kept, nothing new, no edge: nothing to contain, carry, connect or remove, so only
            # the updates, the constants fed and the sweep of constants left unread
            self.plan()
            with self.g.atomic():
                self.update()
                self.feed_consts()
                removed = self.sweep()
            return Rewrite(self.consts_made, list(self.kept.values()), removed, False)
        if not self.contained():
            return None
        self.plan()
        with self.g.atomic():
            fed_by_removed = [p for op in self.kept.values() for p in op.input_ports
                              if p.source is not None and p.source.op in self.removed_set]
            self.dead_candidates.extend(p.source.op for op in self.removed.values() for p in op.input_ports
                                        if p.source is not None and p.source.op not in self.removed_set)
            self.create()
            self.update()
            self.feed_consts()
            self.connect_edges()
            if self.positional():
                self.carry_by_position()
            self.control()
            self.check_removable()
            self.unfed_after(fed_by_removed)
            # from here on nothing can fail: the matched ops go, then constants nothing reads, then names
            removed = self.remove()
            removed.extend(self.sweep())
            for temp, name in self.deferred_names:
                if name not in self.g.ops and temp in self.g.ops:
                    self.g.rename_op(temp, name)
        return Rewrite(list(self.new.values()) + self.consts_made, list(self.kept.values()), removed,
                       not self.shape.acyclic)


def _rename_ports(op: Op, kind: str, ports: list[Any], names: list[str], dtypes: list[Any]) -> None:
    """Give ``ports`` (one side of ``op``) ``names`` by position, and ``dtypes`` where not None; names past the
    last port make new ports."""
    rename: Callable[[Any, str], None] = op.rename_input_port if kind == "in" else op.rename_output_port
    changed = [(p, n) for p, n in zip(ports, names) if p.name != n]
    if changed and not {n for _, n in changed}.isdisjoint(p.name for p in ports):
        # a name another port holds (a swap): two steps, so that no rename collides
        for i, (p, _) in enumerate(changed):
            rename(p, f"\0{i}")
    for p, n in changed:
        rename(p, n)
    for p, dt in zip(ports, dtypes):
        if dt is not None:
            p.dtype = str(dt)
    for n, dt in zip(names[len(ports):], dtypes[len(ports):]):
        add = op.add_input_port if kind == "in" else op.add_output_port
        add(n, _as_dtype_text(dt))


def _slot_index(op: Op, name: str, schema: OpSchema | None) -> int | None:
    """Where a new input port ``name`` goes among ``op``'s inputs: after every port whose schema slot comes before
    its own (the end when the schema does not say)."""
    if schema is None:
        return None
    mine = schema.input_position(name)
    if mine is None:
        return None
    ports = op.input_ports
    for i in range(len(ports) - 1, -1, -1):  # the last such port (constants are mostly added in slot order)
        pos = schema.input_position(ports[i].name)
        if pos is None or pos < mine:
            return i + 1
    return 0


def keeps_only(rule: Rule) -> bool:
    """Whether the rule's rewrites only move the matched ops to the target namespace (:attr:`Rule.keeps_ops`);
    those take the short path of :func:`_keep`."""
    return rule.keeps_ops


def _keep(graph: Graph, match: Match, rule: Rule, ctx: RewriteContext) -> Rewrite:
    """What :class:`_Applier` does for a rule that :func:`keeps_only`, without its general machinery: each matched
    op moves to the target namespace with its attributes, edges and name; its ports take the target schema's names
    by position where theirs are not slots of it."""
    kept = list(match.ops.values())
    for op in kept:
        op.retarget(op.type, dict(op.attrs), ctx.dst_namespace, (ctx.table, rule.name))  # one change, not three
        schema = ctx.dst_schema.get(op.type) if ctx.dst_schema is not None and op.type is not None else None
        if schema is None:
            continue
        for kind in ("in", "out"):
            ports = list(op.input_ports if kind == "in" else op.output_ports)
            if not _names_fit(ports, schema, kind):
                names = _slot_names(schema, kind, len(ports))
                _rename_ports(op, kind, ports, names, [None] * len(names))
    # no op, edge or type changed: the graph's order and the engine's index of ops by type stay valid
    return Rewrite([], kept, [], False)


def apply_template(graph: Graph, match: Match, rule: Rule, ctx: RewriteContext) -> Rewrite | None:
    """Rewrite ``match`` with ``rule``'s mapper; None when containment makes the match invalid (nothing is
    changed then)."""
    origins = _origins(match) if _RECORD_ORIGINS.get() else None
    history = _history(match, ctx.table, rule.name) if origins is not None else []
    if rule.dst.transform is not None:
        from .transform import apply_transform

        with graph.atomic():  # a transform that fails part way leaves the graph as it was
            rw = apply_transform(graph, match, rule, ctx)
    elif keeps_only(rule):
        rw = _keep(graph, match, rule, ctx)
    else:
        rw = _Applier(graph, match, rule, ctx).run()
    if origins is not None and rw is not None:
        _mark_origins(rw, origins, history)
    return rw


# --------------------------------------------------------------------------- origins (opt-in)
# What each produced op stands for, for the per-op check (``amanda check --per-op``), ``amanda repro`` and
# ``amanda coverage``: with :func:`recording_origins` on, every op a rewrite creates or updates gets
# ``meta[ORIGIN_KEY]``, the names of the source-graph ops the rewrite replaced (through a chain of tables, the
# names in the first graph: a matched op's own origins when it has them).  Off by default, so conversions write
# nothing new.

ORIGIN_KEY = "amanda.origin"
HISTORY_KEY = "amanda.rules"
"""``[[table, rule], ...]``: every rule that rewrote the op or the ops it came from, first table first."""
_RECORD_ORIGINS: contextvars.ContextVar[bool] = contextvars.ContextVar("amanda_record_origins", default=False)


@contextlib.contextmanager
def recording_origins(on: bool = True) -> Iterator[None]:
    """Within this block, rewrites record in each op they create or update the source ops it stands for."""
    token = _RECORD_ORIGINS.set(on)
    try:
        yield
    finally:
        _RECORD_ORIGINS.reset(token)


def origin_of(op: Op) -> tuple[str, ...]:
    """The names of the source ops ``op`` stands for: its recorded origins, else its own name."""
    names = op.meta.get(ORIGIN_KEY) if isinstance(op.meta, dict) else None
    return tuple(names) if names else (op.name,)


def inherit_origin(op: Op, *sources: Op) -> None:
    """When origins are recorded (any of ``sources`` has them), ``op`` -- made or changed by a graph pass from
    ``sources`` (a batch norm folded into a convolution, a transpose pushed below an op) -- stands for what they
    stand for, made by the rules that made them; a plain conversion (nothing recorded) writes nothing."""
    if not any(isinstance(o.meta, dict) and ORIGIN_KEY in o.meta for o in sources):
        return
    names: list[str] = []
    rules: list[Any] = []
    for o in sources:
        names += [n for n in origin_of(o) if n not in names]
        rules += [r for r in (o.meta.get(HISTORY_KEY) or []) if r not in rules]
    op.meta[ORIGIN_KEY] = names
    if rules:
        op.meta[HISTORY_KEY] = rules


def _origins(match: Match) -> list[str]:
    out: list[str] = []
    for op in match.ops.values():
        for name in origin_of(op):
            if name not in out:
                out.append(name)
    return out


def _history(match: Match, table: str, rule: str) -> list[list[str]]:
    out: list[list[str]] = []
    for op in match.ops.values():
        for step in op.meta.get(HISTORY_KEY) or () if isinstance(op.meta, dict) else ():
            if list(step) not in out:
                out.append(list(step))
    out.append([table, rule])
    return out


def _mark_origins(rw: Rewrite, origins: list[str], history: list[list[str]]) -> None:
    for op in [*rw.created, *rw.updated]:
        if op.graph is not None:
            op.meta = {**op.meta, ORIGIN_KEY: list(origins), HISTORY_KEY: [list(h) for h in history]}


def _names_fit(ports: Sequence[Port], schema: OpSchema, kind: str) -> bool:
    """Every port name is a slot of ``schema`` (or a positional name ``in0``/``out0``)."""
    slots = schema.input_ports if kind == "in" else schema.output_ports
    for p in ports:
        if any(s.accepts_name(p.name) for s in slots):
            continue
        if p.name.startswith(kind) and p.name[len(kind):].isdigit():
            continue
        return False
    return True


def same_family(a: str, b: str) -> bool:
    try:
        return parse_namespace(a).family == parse_namespace(b).family
    except AmandaError:
        return False



def _literal(value: Any) -> Any:
    """``value`` as a hashable key that tells apart what Python's equality joins (``True``, ``1`` and ``1.0``;
    a list and a tuple), or None when it is no plain literal (an array, a NaN, an object)."""
    if value is None or isinstance(value, (bool, int, str)):
        return type(value).__name__, value
    if isinstance(value, float):
        return ("float", value) if value == value else None
    if isinstance(value, (list, tuple)):
        items = tuple(_literal(v) for v in value)
        return None if any(i is None for i in items) else (type(value).__name__, items)
    return None


def literal_key(made: ConstantOp) -> Any:
    """What makes two constants of a family the same op to read: type, port and the literal of every attribute;
    None when an attribute holds no plain literal (such constants are never shared)."""
    parts = []
    for name in sorted(made.attrs):
        lit = _literal(made.attrs[name])
        if lit is None:
            return None
        parts.append((name, lit))
    return made.type, made.port, tuple(parts)
