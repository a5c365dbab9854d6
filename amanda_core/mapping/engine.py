"""Applying a mapping table to a graph.

Order, fixed and documented so that the same table gives the same graph every time:

1. rules in ``apply_after`` order, then in declaration order (tags may leave some out);
2. for each rule, each graph in turn (the graph, then the bodies of its ops and the graphs its attributes hold,
   depth first); within a graph, candidate anchor ops in topological order, taken as they were when the rule
   started; the first match found from an anchor is rewritten at once;
3. an op is rewritten by at most one match per pass of a rule: ops a rewrite created or updated are not matched
   again by the same pass (``repeat: true`` runs passes until one rewrites nothing);
4. after each rule every graph it touched is checked for cycles; a rule that made one fails with its name and
   the ops involved, and a rule that fails in a graph (a cycle, or an error of one of its rewrites) leaves that
   graph as it was before the rule (its passes run inside ``Graph.atomic``);
5. ``carry: unchanged`` then moves every op no rule took to the target namespace if its op schema is the same
   in both namespaces (how version-to-version tables need rules only for ops that changed);
6. a graph whose ops are all in the target namespace takes that namespace.
"""

from __future__ import annotations

__all__ = ["ApplyReport", "Candidate", "RuleReport", "Converter", "apply_table", "explaining_rules", "op_namespace"]

from collections import Counter
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from functools import lru_cache, partial
from typing import Any, Collection, Iterator, Sequence

import attrs

from ..errors import GraphCycleError, NamespaceError, SchemaError
from ..ir.bulk import bulk_build
from ..ir.graph import Graph, InputPort, Op, Port
from ..namespace.names import NamespaceSpec, parse_spec
from ..namespace.registry import NamespaceRegistry
from ..namespace.schema import NamespaceSchema, OpSchema
from .attrconv import library_for
from .expr import ExpressionError
from .match import MatchContext, Matcher, MissReason, anchor_candidates, type_index
from .rewrite import MappingError, RewriteContext, apply_template, keeps_only, same_family
from .table import MappingTable, Rule


@attrs.frozen
class Candidate:
    """One anchor op a traced rule tried (``Converter(explain_rules=...)``): what became of it.

    ``outcome`` is ``rewritten``, ``declined`` (it matched, and containment left it: an op the rewrite would
    remove is read outside the match) or
    ``no match`` with ``reason`` (the failed check that got furthest, :class:`~.match.MissReason`)."""

    op: str
    type: str | None
    graph: str
    outcome: str
    reason: MissReason | None = None


def _counter() -> Counter[str]:
    """An empty Counter without the call of ``Counter.__init__`` (which only counts what it is given): a report is
    made for each rule of each table applied, and most rules of a large table match nothing."""
    return Counter.__new__(Counter)


@attrs.define
class RuleReport:
    table: str
    rule: str
    matches: int = 0
    skipped: int = 0
    produced: Counter[str] = attrs.field(factory=_counter)
    removed: int = 0
    examples: list[str] = attrs.field(factory=list)
    candidates: list[Candidate] | None = None
    """For a rule named in ``explain_rules``: every anchor it tried, in order (None when not traced)."""


@attrs.define
class ApplyReport:
    table: str
    src: str
    dst: str
    rules: list[RuleReport] = attrs.field(factory=list)
    carried: int = 0

    @property
    def matches(self) -> int:
        return sum(r.matches for r in self.rules)


_EXPLAINED: ContextVar[frozenset[str]] = ContextVar("amanda_explained_rules", default=frozenset())


@contextmanager
def explaining_rules(names: Collection[str]) -> Iterator[None]:
    """Within the block, every :class:`Converter` made (as :func:`~.planner.convert` makes one) traces the rules
    named (``rule`` or ``table:rule``) as ``Converter(explain_rules=names)`` does."""
    token = _EXPLAINED.set(frozenset(names))
    try:
        yield
    finally:
        _EXPLAINED.reset(token)


def op_namespace(op: Op, inherited: str | None) -> str | None:
    """The namespace an op is in: its own, else its graph's, else ``inherited`` (the namespace of the graph that
    holds the op's graph as an attribute value)."""
    if op.namespace is not None:
        return op.namespace
    g = op.graph
    while g is not None:
        if g.namespace is not None:
            return g.namespace
        owner = g.owner
        g = owner.graph if owner is not None else None
    return inherited


def graphs_in(graph: Graph, inherited: str | None) -> Iterator[tuple[Graph, str | None]]:
    """The graph and every graph nested in it (:meth:`Graph.nested_graphs`), with the namespace each inherits."""
    yield graph, inherited
    for nested in graph.nested_graphs(inherited):
        yield nested.graph, nested.inherited


class Converter:
    """Applies tables with one registry's schemas and type systems (schemas looked up once)."""

    def __init__(self, registry: NamespaceRegistry | None = None, *, explain_rules: Collection[str] = ()) -> None:
        self.registry = registry or NamespaceRegistry()
        self.explain_rules = frozenset(explain_rules) | _EXPLAINED.get()
        """Rules (by name, or ``table:rule``) whose every candidate anchor is reported with why it did not match
        (:attr:`RuleReport.candidates`; also those named by an enclosing :func:`explaining_rules`); matching
        other rules costs nothing more."""
        self._schemas: dict[str, NamespaceSchema | None] = {}
        self._op_schemas: dict[tuple[str | None, str | None], OpSchema | None] = {}
        self.library = library_for(self.registry.type_systems)
        self._parse_cache: dict[tuple[str, str], Any] = {}
        self._slot_systems: dict[tuple[Any, ...], str | None] = {}
        self._index_cache: dict[int, tuple[Graph, int, dict[str | None, list[Op]]]] = {}
        self._shared: dict[int, tuple[Graph, dict[Any, Op]]] = {}  # literal constants shared in the current apply
        self._made: dict[Any, Any] = {}  # make_constant's answers by literal value, in the current apply

    # -- schemas and dtypes
    def schema(self, namespace: str | None) -> NamespaceSchema | None:
        if namespace is None:
            return None
        if namespace not in self._schemas:
            try:
                self._schemas[namespace] = self.registry.schema(namespace)
            except (NamespaceError, SchemaError):
                self._schemas[namespace] = None
        return self._schemas[namespace]

    def resolve(self, spec: str) -> str:
        """A concrete registered namespace for ``spec`` (the newest in a range), or the spec itself if exact."""
        try:
            return self.registry.resolve(spec)
        except NamespaceError:
            s = parse_spec(spec)
            if s.exact is not None or (s.specifier is None and s.exact is None):
                return spec
            raise

    def op_schema(self, op: Op, inherited: str | None = None) -> OpSchema | None:
        """The schema of ``op``'s type in its namespace (looked up once per namespace and type)."""
        key = (op_namespace(op, inherited), op.type)
        try:
            return self._op_schemas[key]
        except KeyError:
            s = self.schema(key[0])
            found = self._op_schemas[key] = s.get(key[1]) if s is not None and key[1] is not None else None
            return found

    def parse_dtype(self, port: Port, inherited: str | None = None) -> Any:
        """A port's dtype parsed by the type system of its schema slot (or of its namespace)."""
        text = port.dtype
        if text is None or not isinstance(text, str):
            return text
        system = self._dtype_system(port, inherited)
        if system is None:
            return text
        key = (system, text)
        if key not in self._parse_cache:
            ts = self.registry.type_systems.get(system)
            try:
                self._parse_cache[key] = ts.parse_dtype(text) if ts is not None else text
            except Exception:
                self._parse_cache[key] = text
        return self._parse_cache[key]

    def _dtype_system(self, port: Port, inherited: str | None) -> str | None:
        op = port.op
        if op is not None:
            ns = op_namespace(op, inherited)
            key = (ns, op.type, port.__class__, port.name, _index(port))
            found = self._slot_systems.get(key, _UNSET)
            if found is _UNSET:
                found = self._slot_systems[key] = self._op_port_system(op, port, ns)
            return found  # type: ignore[return-value]
        g = port.owner
        return self._namespace_dtype_system(g.namespace if isinstance(g, Graph) else inherited)

    def _op_port_system(self, op: Op, port: Port, ns: str | None) -> str | None:
        """The type system of the schema slot a port of ``op`` fills, else of the op's namespace."""
        schema = self.schema(ns)
        if schema is not None and op.type is not None:
            s = schema.get(op.type)
            if s is not None:
                kind = "in" if isinstance(port, InputPort) else "out"
                slots = s.input_ports if kind == "in" else s.output_ports
                slot = None
                for i, sl in enumerate(slots):
                    if sl.accepts_name(port.name) or (sl.variadic and i <= _index(port)) or i == _index(port):
                        slot = sl
                        break
                if slot is not None and slot.type:
                    ts, _local = self.registry.type_systems.resolve(slot.type, schema.default_type_system)
                    if ts is not None and ts.name != "python":
                        return ts.name
        return self._namespace_dtype_system(ns)

    @lru_cache(maxsize=256)  # noqa: B019 - one converter per conversion
    def _namespace_dtype_system(self, namespace: str | None) -> str | None:
        if namespace is None:
            return None
        schema = self.schema(namespace)
        if schema is not None and schema.meta.get("dtype_type_system"):
            return str(schema.meta["dtype_type_system"])
        declared = self.registry.dtype_type_system(namespace)
        if declared:
            return declared
        if schema is not None and schema.default_type_system and schema.default_type_system != "python":
            return schema.default_type_system
        return None

    # -- applying
    def apply(self, graph: Graph, table: MappingTable, *, src: str | None = None, dst: str | None = None,
              include_tags: Sequence[str] = (), exclude_tags: Sequence[str] = ()) -> ApplyReport:
        """Apply ``table`` to ``graph`` (changed in place) from namespace ``src`` (default: the graph's) to ``dst``
        (default: the newest registered namespace the table's ``dst`` admits)."""
        src_ns = src or graph.namespace
        if src_ns is None:
            raise MappingError("the graph has no namespace; say which one it is in", table.name)
        src_spec = parse_spec(table.src)
        if not src_spec.matches(src_ns):
            raise MappingError(f"the table reads {table.src}, but the graph is in {src_ns}", table.name)
        dst_ns = dst or self.resolve(table.dst)
        if not parse_spec(table.dst).matches(dst_ns):
            raise MappingError(f"the table writes {table.dst}, not {dst_ns}", table.name)
        report = ApplyReport(table.name, src_ns, dst_ns)
        self._shared = {}
        self._made = {}
        rules = _select(table.ordered_rules(), include_tags, exclude_tags)
        dst_schema = self.schema(dst_ns)
        family_same = same_family(src_ns, dst_ns)
        graphs = list(graphs_in(graph, None))
        changed_any = False
        present: set[str | None] | None = None  # op types in any of the graphs, until a rule changes them
        for rule in rules:
            rr = RuleReport(table.name, rule.name)
            explained = bool(self.explain_rules) and (rule.name in self.explain_rules
                                                      or f"{table.name}:{rule.name}" in self.explain_rules)
            if explained:
                rr.candidates = []
            report.rules.append(rr)
            anchors = _anchor_types(rule)
            if anchors is not None and not explained:
                if present is None:
                    present = set()
                    for g, _ in graphs:
                        present.update(self._types(g).keys())
                if not anchors & present:
                    continue  # no op of a type it starts from, in any graph: one set test instead of a walk
            if self._apply_rule(graphs, table, rule, src_spec, dst_ns, dst_schema, family_same, rr):
                changed_any = True
                present = None
                if rule.dst.transform is not None or _may_nest(rule):
                    graphs = list(graphs_in(graph, None))  # a rewrite may have made or dropped nested graphs
        if changed_any and len(graphs) > 1:  # rewritten ops holding graphs may have moved namespace: walk again
            graphs = list(graphs_in(graph, None))
        report.carried = self._finish(graphs, graph, src_spec, src_ns, dst_ns, table.carry == "unchanged")
        if not family_same:
            self._translate_dtypes(graphs, src_ns, dst_ns)
        return report

    def _translate_dtypes(self, graphs: list[tuple[Graph, str | None]], src_ns: str, dst_ns: str) -> None:
        """After a table that moves ops to another family, the port types they kept are written in the source
        family's type system: rewrite each one the target's system cannot read as a tensor type of the target
        (element type and shape carried through :meth:`TypeSystem.tensor_type`), or drop it (None) when neither
        can say it.  Ports of ops left in the source namespace keep theirs; graph ports follow their graph."""
        systems = self.registry.type_systems
        src_name, dst_name = self._namespace_dtype_system(src_ns), self._namespace_dtype_system(dst_ns)
        src_ts = systems.get(src_name) if src_name else None
        dst_ts = systems.get(dst_name) if dst_name else None
        if dst_ts is None or src_ts is dst_ts:
            return
        cache: dict[str, str | None] = {}

        def translate(text: Any) -> Any:
            if text is None or not isinstance(text, str):
                return text
            if text not in cache:
                if dst_ts.tensor_type(text) is not None:
                    cache[text] = text
                else:
                    t = src_ts.tensor_type(text) if src_ts is not None else None
                    cache[text] = dst_ts.make_tensor_type(*t) if t is not None else None
            return cache[text]

        for g, inherited in graphs:
            if (g.namespace or inherited) == dst_ns:
                for gp in list(g.input_ports) + list(g.output_ports):
                    gp.dtype = translate(gp.dtype)
            for op in g:
                if op_namespace(op, inherited) != dst_ns:
                    continue
                for ports in (op.input_ports, op.output_ports):
                    for p in ports:
                        text = p.dtype
                        if text is not None:
                            new = translate(text)
                            if new is not text:  # a type the target reads as it is stays (no change recorded)
                                p.dtype = new

    def _apply_rule(self, graphs: list[tuple[Graph, str | None]], table: MappingTable, rule: Rule,
                    src_spec: NamespaceSpec, dst_ns: str, dst_schema: NamespaceSchema | None, family_same: bool,
                    rr: RuleReport) -> bool:
        """Apply one rule to every graph; True if it rewrote anything."""
        anchors = _anchor_types(rule)
        keeps = keeps_only(rule)
        changed = False
        for g, inherited in graphs:
            if anchors is not None and not anchors & self._types(g).keys():
                continue  # no op of the anchor's type here: nothing can match
            # a rule that fails in this graph (a rewrite's error, a cycle its rewrites made) leaves it as it was
            # before the rule; a rule that only moves ops to the target namespace can neither fail nor make a cycle
            before = g.version
            with nullcontext() if keeps else _undoable(g):
                if self._apply_rule_to(g, inherited, table, rule, src_spec, dst_ns, dst_schema, family_same, rr,
                                       keeps):
                    changed = True
            if keeps:
                # a keep-only rule moves ops to the target namespace and may rename their ports; it changes no
                # op's type and no edge, so the index by type made before it is still true at the new version
                # (the next rule need not build it again)
                cached = self._index_cache.get(id(g))
                if cached is not None and cached[0] is g and cached[1] == before:
                    self._index_cache[id(g)] = (g, g.version, cached[2])
        return changed

    def _apply_rule_to(self, g: Graph, inherited: str | None, table: MappingTable, rule: Rule,
                       src_spec: NamespaceSpec, dst_ns: str, dst_schema: NamespaceSchema | None, family_same: bool,
                       rr: RuleReport, keeps: bool) -> bool:
        passes = 0
        touched = False
        may_cycle = [False]  # set by a rewrite that may have closed a cycle (Rewrite.may_cycle)
        while True:
            passes += 1
            rewrote = self._pass(g, inherited, table, rule, src_spec, dst_ns, dst_schema, family_same, rr,
                                 may_cycle)
            touched |= rewrote
            if not rule.repeat or not rewrote or passes > len(g) + 1:
                break
        if not touched or keeps or not may_cycle[0]:
            return touched
        try:
            g.topological_order()
        except GraphCycleError as e:
            names = list(e.ops)
            by_rule = [n for n in names if n in g.ops and g.ops[n].provenance == (table.name, rule.name)]
            raise MappingError(f"the rule's rewrites made a cycle: {' -> '.join(names + names[:1])}"
                               + (f" (created by this rule: {', '.join(by_rule)})" if by_rule else ""),
                               table.name, rule.name, names) from None
        return True

    def _shared_constants(self, g: Graph) -> dict[Any, Op]:
        """The literal constants shared among the inputs of ``g`` in the table application under way."""
        found = self._shared.get(id(g))
        if found is None or found[0] is not g:
            found = self._shared[id(g)] = (g, {})
        return found[1]

    def _types(self, g: Graph) -> dict[str | None, list[Op]]:
        """Ops of ``g`` by type in topological order, kept until the graph changes."""
        cached = self._index_cache.get(id(g))
        if cached is not None and cached[0] is g and cached[1] == g.version:
            return cached[2]
        index = type_index(g)
        self._index_cache[id(g)] = (g, g.version, index)
        return index

    def _pass(self, g: Graph, inherited: str | None, table: MappingTable, rule: Rule, src_spec: NamespaceSpec,
              dst_ns: str, dst_schema: NamespaceSchema | None, family_same: bool, rr: RuleReport,
              may_cycle: list[bool]) -> bool:
        in_ns: dict[str | None, bool] = {}  # a namespace -> whether the table reads it (asked of every candidate)

        def in_src(op: Op) -> bool:
            ns = op_namespace(op, inherited)
            found = in_ns.get(ns)
            if found is None:
                found = in_ns[ns] = ns is not None and src_spec.matches(ns)
            return found

        schema_of = partial(self.op_schema, inherited=inherited)

        ctx = MatchContext(in_namespace=in_src, schema_of=schema_of,
                           parse_dtype=lambda port: self.parse_dtype(port, inherited), library=self.library,
                           constant_of=lambda op: self.registry.constant_value(op, op_namespace(op, inherited)))
        rctx = RewriteContext(table.name, dst_ns, dst_schema, ctx, family_same, schema_of,
                              lambda value: self.registry.make_constant(value, dst_ns), self._shared_constants(g),
                              self._made)
        claimed: set[Op] = set()
        rewrote = False
        if rule.src.query is not None:
            from ..regex import query_matches

            matches = query_matches(g, rule.src.query, ctx, rule=rule, schema=self.schema(g.namespace or inherited))
            for qm in matches:
                if any(op.graph is not g or op in claimed for op in qm.all_ops):
                    continue
                if rule.src.where is not None and not self._where(g, qm, rule, ctx):
                    continue
                rewrote |= self._record(apply_template(g, qm, rule, rctx), rr, claimed, may_cycle)
            return rewrote
        index = self._types(g)
        matcher = Matcher(g, rule.src, ctx, rule, index)
        traced = rr.candidates
        for anchor in anchor_candidates(g, rule.src, index):
            if anchor.graph is not g or anchor in claimed:
                if traced is not None and anchor.graph is g:
                    traced.append(Candidate(anchor.name, anchor.type, _graph_path(g), "no match", MissReason(
                        "taken", f"{anchor.name} was rewritten by an earlier match of this pass", None,
                        anchor.name)))
                continue
            m = matcher.at(anchor, claimed.__contains__)
            if m is None:
                if traced is not None:
                    traced.append(Candidate(anchor.name, anchor.type, _graph_path(g), "no match",
                                            matcher.why_not(anchor, claimed.__contains__)))
                continue
            done = self._record(apply_template(g, m, rule, rctx), rr, claimed, may_cycle)
            rewrote |= done
            if traced is not None:
                traced.append(Candidate(anchor.name, anchor.type, _graph_path(g), "rewritten" if done else "declined"))
        return rewrote

    @staticmethod
    def _where(g: Graph, m: Any, rule: Rule, ctx: MatchContext) -> bool:
        """A query rule's ``where`` condition on one match."""
        from .views import OpView

        env = ctx.env(g, m, rule.src)
        env["op"] = OpView(m.all_ops[-1], ctx.parse_dtype)
        assert rule.src.where is not None
        try:
            return bool(rule.src.where.evaluate(env))
        except ExpressionError as e:
            raise MappingError(f"{e.reason} (matched {m.describe()})", rule=rule.name,
                               ops=[o.name for o in m.all_ops]) from None

    @staticmethod
    def _record(rw: Any, rr: RuleReport, claimed: set[Op], may_cycle: list[bool]) -> bool:
        if rw is None:
            rr.skipped += 1
            return False
        if rw.may_cycle:
            may_cycle[0] = True
        rr.matches += 1
        for op in rw.created + rw.updated:
            claimed.add(op)
            rr.produced[op.type or "(no type)"] += 1
            if len(rr.examples) < 5:
                rr.examples.append(op.name)
        rr.removed += len(rw.removed)
        return True

    def _finish(self, graphs: list[tuple[Graph, str | None]], graph: Graph, src_spec: NamespaceSpec, src_ns: str,
                dst_ns: str, carry: bool) -> int:
        """Carry unchanged ops (when asked) and settle namespaces, in one walk per graph; returns how many ops
        were carried.

        An op no rule took, in the source namespace, moves to the target when ``carry`` is set and its op schema
        is the same in both.  A graph whose ops are then all in the target (or in another family, like ONNX-ML
        beside ONNX) takes the target namespace and its ops drop their own; a graph left mixed pins each op to
        the namespace it is in; a graph where nothing moved stays as it was."""
        src_schema, dst_schema = self.schema(src_ns), self.schema(dst_ns)
        carry = carry and src_schema is not None and dst_schema is not None
        same = _same_ops(src_schema, dst_schema) if carry else {}  # op type -> same op schema in both
        in_src: dict[str, bool] = {}
        moved = 0
        nested_inheriting: list[Graph] = []
        for g, inherited in graphs:
            default = g.namespace or inherited
            if g.namespace is None and g is not graph:
                nested_inheriting.append(g)
            has_dst = False
            stuck: list[Op] = []
            carried: list[Op] = []
            for op in g:
                ns = op.namespace or default
                if ns == dst_ns:
                    has_dst = True
                    continue
                if ns is None:
                    continue
                ok = in_src.get(ns)
                if ok is None:
                    ok = in_src[ns] = src_spec.matches(ns)
                if not ok:
                    continue  # another family (ONNX-ML beside ONNX): not this table's business
                if carry:
                    t = op.type
                    unchanged = same.get(t)
                    if unchanged is None:
                        a = src_schema.get(t) if t is not None else None  # type: ignore[union-attr]
                        b = dst_schema.get(t) if t is not None else None  # type: ignore[union-attr]
                        unchanged = a is not None and b is not None and (a is b or a == b)
                        if a is not None and b is not None:  # (a type one of them lacks may be added to it)
                            same[t] = unchanged
                    if unchanged:
                        carried.append(op)
                        continue
                stuck.append(op)
            moved += len(carried)
            if g.namespace is not None and not stuck and in_src.get(g.namespace, src_spec.matches(g.namespace)):
                pass  # every op of the source is in the target now (or there was none): the graph follows
            elif not has_dst and not carried:
                continue  # nothing moved here: the graph stays as it was
            if g.namespace is not None and not stuck:
                g.namespace = dst_ns  # every op is in the target now: they inherit it
                for op in carried:
                    op.namespace = None  # (one pinned by an earlier step of a mixed graph too)
                for op in g:
                    if op.namespace == dst_ns:
                        op.namespace = None
            else:
                for op in carried:
                    op.namespace = dst_ns
                if g.namespace is not None:
                    for op in stuck:
                        if op.namespace is None:
                            op.namespace = g.namespace  # pinned where it is: the graph is mixed now
        if graph.namespace == dst_ns:  # nested graphs that inherit no longer need to name the target
            for g in nested_inheriting:
                for op in g:
                    if op.namespace == dst_ns:
                        op.namespace = None
        return moved


_SAME_OPS: dict[tuple[int, int], tuple[NamespaceSchema, NamespaceSchema, dict[str | None, bool]]] = {}


def _same_ops(a: NamespaceSchema | None, b: NamespaceSchema | None) -> dict[str | None, bool]:
    """Whether an op type's schema is the same in ``a`` and ``b``, by type, as found so far (an op schema does not
    change once made, so a process converting many graphs between two opsets compares each type once)."""
    key = (id(a), id(b))
    found = _SAME_OPS.get(key)
    if found is not None and found[0] is a and found[1] is b:
        return found[2]
    if len(_SAME_OPS) > 256:
        _SAME_OPS.clear()
    same: dict[str | None, bool] = {}
    if a is not None and b is not None:
        _SAME_OPS[key] = (a, b, same)
    return same


@contextmanager
def _undoable(g: Graph) -> Iterator[None]:
    """``g.atomic()`` with the cyclic garbage collector paused: until the block ends its undo records hold
    everything a rewrite drops, so nothing the rule's passes leave behind is garbage yet, and collections during
    them would only walk the growing record (a quarter of the time of a rule over 100k ops)."""
    with bulk_build(), g.atomic():
        yield


def _graph_path(g: Graph) -> str:
    """Where a graph is, for a report: ``main``, or the owner ops' names down to it (``loop/body``)."""
    parts = []
    while g.owner is not None:
        parts.append(g.owner.name)
        parent = g.owner.graph
        if parent is None:
            break
        g = parent
    return "/".join(reversed(parts)) or "main"


def _may_nest(rule: Rule) -> bool:
    """Whether a rule's rewrites can add or drop nested graphs: it removes ops (which may hold graphs) or gives
    a new op an attribute that may hold one (an expression)."""
    dst = rule.dst
    if any(k not in dst.ops for k in rule.src.ops):
        return True
    return any(v.kind == "expr" for t in dst.ops.values() for v in t.attrs.values())


def _anchor_types(rule: Rule) -> set[str | None] | None:
    """The op types a rule's search can start from (None: any op, or a query); worked out once per rule."""
    cached = rule.anchors
    if cached is None:
        cached = (_find_anchor_types(rule),)
        object.__setattr__(rule, "anchors", cached)  # a derived value of a frozen rule, as keeps_ops is
    return cached[0]  # type: ignore[no-any-return]


def _find_anchor_types(rule: Rule) -> set[str | None] | None:
    if rule.src.query is not None or not rule.src.ops:
        return None
    from .match import _plan

    key = _plan(rule.src)[0][0]
    t = rule.src.ops[key].type
    if t is None or t.kind != "literal":
        return None
    return set(t.value) if isinstance(t.value, list) else {t.value}


OPT_IN_TAGS = frozenset({"approximate"})
"""Tags whose rules apply only when asked for by name (``include_tags``): ``approximate`` rules compute the same
thing up to floating-point rounding, not exactly, so a conversion uses them only when told to."""


def _select(rules: list[Rule], include: Sequence[str], exclude: Sequence[str]) -> list[Rule]:
    """Untagged rules always apply; with ``include`` tags given, a tagged rule applies only if it has one of them;
    a rule with an ``exclude`` tag never applies; a rule with an opt-in tag (:data:`OPT_IN_TAGS`) applies only if
    ``include`` names that tag (naming one does not restrict the other rules)."""
    if not include and not exclude:  # the usual case: every rule but the opt-in ones
        return [r for r in rules if not (r.tags and OPT_IN_TAGS.intersection(r.tags))]
    inc, exc = set(include), set(exclude)
    general = inc - OPT_IN_TAGS
    out = []
    for r in rules:
        tags = set(r.tags)
        if tags & exc:
            continue
        if tags & OPT_IN_TAGS - inc:
            continue
        plain = tags - OPT_IN_TAGS
        if general and plain and not (plain & general):
            continue
        out.append(r)
    return out


_UNSET = object()


def _index(port: Port) -> int:
    owner = port.owner
    if owner is None:
        return -1
    ports = owner.input_ports if isinstance(port, InputPort) else owner.output_ports
    try:
        return ports.index(port.name)  # type: ignore[arg-type]
    except KeyError:
        return -1


def apply_table(graph: Graph, table: MappingTable, registry: NamespaceRegistry | None = None, **options: Any
                ) -> ApplyReport:
    """Apply one table to ``graph`` in place (see :meth:`Converter.apply` for the options)."""
    return Converter(registry).apply(graph, table, **options)

