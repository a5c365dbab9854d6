"""Conversion planning: from a graph's namespace to a target namespace through registered tables.

The planner searches the shortest chain of tables (fewest tables; ties broken by the order tables were given:
tables named on the command line first, then plugins' tables in plugin order) whose namespaces link the graph's
namespace to the target:

* a table applies to namespace ``N`` when its ``src`` (an exact namespace, a PEP 440 range, or a family)
  admits ``N``;
* it leads to the target itself when its ``dst`` admits the target, else to the newest registered namespace its
  ``dst`` admits (``amanda/onnx/>=13`` leads to the newest ONNX opset), else to ``dst`` itself when exact.

After the chain is applied every op must be in the target namespace, or in a namespace the target's family holds
(``amanda/onnx/ai.onnx.ml/3`` stays beside ``amanda/onnx/18``).  Otherwise the conversion fails with each
unconverted op type, its count and example op names, unless ``allow_partial`` keeps them (and says so).
"""

from __future__ import annotations

__all__ = ["Step", "Conversion", "ConversionError", "plan", "convert", "interpret", "unconverted_ops", "order_tables",
           "exclude_tables"]

from collections import deque
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import attrs

from ..errors import AmandaError, NamespaceError
from ..ir.graph import Graph, Op
from ..namespace.names import is_within, parse_namespace, parse_spec, spec_matches
from ..namespace.registry import NamespaceRegistry
from .engine import ApplyReport, Converter, graphs_in, op_namespace
from .table import MappingTable

if TYPE_CHECKING:
    from ..plugin.types import GraphPass


class ConversionError(AmandaError):
    """No chain of tables reaches the target, or ops were left unconverted."""

    def __init__(self, message: str, unconverted: Sequence[tuple[str, str | None, int, list[str]]] = ()) -> None:
        self.unconverted = list(unconverted)
        super().__init__(message)


@attrs.frozen
class Step:
    table: MappingTable
    src: str
    dst: str
    over: tuple[MappingTable, ...] = ()
    """Other tables that lead from ``src`` to ``dst`` too, which this one was chosen over."""
    reason: str = ""
    """Why this table was chosen over them (empty when it was the only one)."""
    detour: tuple[MappingTable, ...] = ()
    """For a step between two families: the shortest chain of other tables between the same namespaces (through
    a third family: torch -> ONNX -> TF beside a direct torch -> TF table), which this step was chosen over for
    being shorter."""
    ahead: bool = False
    """A table that goes ahead of the chain (:attr:`MappingTable.ahead`): it converts the ops it has rules for
    where they stand, and leaves the rest to the chain."""

    def __str__(self) -> str:
        return f"{self.src} -> {self.dst} ({self.table.name}{', ahead of the chain' if self.ahead else ''})"


@attrs.define
class Conversion:
    graph: Graph
    target: str
    steps: list[Step]
    reports: list[ApplyReport]
    unconverted: list[tuple[str, str | None, int, list[str]]] = attrs.field(factory=list)
    passes: list[tuple[int, str, str]] = attrs.field(factory=list)
    """Graph passes that ran: (index of the step they followed, pass name, its summary)."""
    source: str | None = None
    """The namespace the graph was in before the conversion."""
    passes_before: list[tuple[int, str, str]] = attrs.field(factory=list)
    """Graph passes that ran before a table (``GraphPass.before``): (index of the step, pass name, summary)."""
    options_taken: dict[str, list[str]] = attrs.field(factory=dict)
    """Each pass option given to the conversion, and the passes that ran that took it."""

    def explain(self) -> str:
        """Per table and rule: how many matches each rewrote and which ops it produced."""
        lines = []
        for step_index, report in enumerate(self.reports):
            step = self.steps[step_index] if step_index < len(self.steps) else None
            ahead = " (ahead of the chain: the ops it has rules for, where they stand)" if step and step.ahead else ""
            for before, name, summary in self.passes_before:
                if before == step_index:
                    lines.append(f"pass {name}, before table {report.table}: {summary}")
            lines.append(f"table {report.table}: {report.src} -> {report.dst}{ahead}")
            if step is not None and step.over:
                others = ", ".join(f"{t.name} ({_origin(t)})" for t in step.over)
                lines.append(f"  chosen ({_origin(step.table)}) over {others}: {step.reason}")
            if step is not None and step.detour:
                way = " -> ".join(t.name for t in step.detour)
                lines.append(f"  chosen ({_origin(step.table)}) over the chain {way} ({len(step.detour)} tables "
                             f"between the same namespaces): one table is fewer (the planner takes the chain of "
                             f"fewest tables; --exclude-table {step.table.name} takes the longer one)")
            idle = sum(1 for r in report.rules if not r.matches and not r.skipped)
            for r in report.rules:
                if not r.matches and not r.skipped:
                    continue
                produced = ", ".join(f"{n} {t}" for t, n in sorted(r.produced.items())) or "no op"
                examples = f" ({', '.join(r.examples[:3])}{', ...' if len(r.examples) > 3 else ''})" \
                    if r.examples else ""
                extra = f"; {r.skipped} match(es) skipped (an output read outside the match was not carried)" \
                    if r.skipped else ""
                lines.append(f"  rule {r.rule}: {r.matches} match(es) -> produced {produced}{examples}; "
                             f"removed {r.removed} op(s){extra}")
            if report.carried:
                lines.append(f"  carried unchanged: {report.carried} op(s)")
            if idle:
                lines.append(f"  {idle} rule(s) matched nothing")
            for after, name, summary in self.passes:
                if after == step_index:
                    lines.append(f"  then pass {name}: {summary}")
        if self.unconverted:
            lines.append("left unconverted:")
            for t, ns, n, names in self.unconverted:
                lines.append(f"  {n} x {t} ({ns}): {', '.join(names)}")
        return "\n".join(lines)


def _leads_to(table: MappingTable, target: str, registry: NamespaceRegistry) -> str | None:
    if spec_matches(table.dst, target):
        return target
    dst = parse_spec(table.dst)
    try:
        return registry.resolve(table.dst)
    except NamespaceError:
        return table.dst if dst.exact is not None else None


_PLANS: dict[tuple[Any, ...], tuple[tuple[MappingTable, ...], NamespaceRegistry, tuple[Step, ...]]] = {}
"""Chains planned, by source, target, registry and tables (and what of each table the planner reads): a process
converts many graphs with the same installed tables, and planning walks all of them once or twice."""


def plan(source: str, target: str, tables: Sequence[MappingTable], registry: NamespaceRegistry | None = None
         ) -> list[Step]:
    """The shortest chain of ``tables`` from namespace ``source`` to ``target`` (empty if they are the same).
    A step between two families records the longer chain it was chosen over, if any (:attr:`Step.detour`)."""
    registry = registry or NamespaceRegistry()
    key = (source, target, id(registry), registry.generation,
           tuple((id(t), t.src, t.dst, t.ahead, t.plugin) for t in tables))
    known = _PLANS.get(key)
    if known is not None and known[1] is registry and all(a is b for a, b in zip(known[0], tables)):
        return list(known[2])
    steps = _plan(source, target, tables, registry)
    if len(_PLANS) >= 64:
        _PLANS.clear()
    _PLANS[key] = (tuple(tables), registry, tuple(steps))  # (holding them keeps their ids from being reused)
    return steps


def _plan(source: str, target: str, tables: Sequence[MappingTable], registry: NamespaceRegistry) -> list[Step]:
    steps = _shortest(source, target, tables, registry)
    for i, step in enumerate(steps):
        if _same_family(step.src, step.dst):
            continue
        direct = {id(step.table)} | {id(t) for t in step.over}
        try:
            other = _shortest(step.src, step.dst, [t for t in tables if id(t) not in direct], registry)
        except ConversionError:
            continue
        if other:
            steps[i] = attrs.evolve(step, detour=tuple(s.table for s in other))
    return steps


def _shortest(source: str, target: str, tables: Sequence[MappingTable], registry: NamespaceRegistry
              ) -> list[Step]:
    if _same(source, target):
        return []
    ordered = order_tables(tables)
    prev: dict[str, tuple[str, Step] | None] = {source: None}
    queue = deque([source])
    while queue:
        here = queue.popleft()
        candidates: dict[str, list[MappingTable]] = {}
        for table in ordered:
            if table.ahead or not spec_matches(table.src, here):
                continue  # (a table that goes ahead converts some ops only: never a step of a chain)
            nxt = _leads_to(table, target, registry)
            if nxt is None or nxt in prev:
                continue
            candidates.setdefault(nxt, []).append(table)
        for nxt, found in candidates.items():
            prev[nxt] = (here, Step(found[0], here, nxt, tuple(found[1:]),
                                    _why(found[0], found[1:]) if len(found) > 1 else ""))
            if _same(nxt, target):
                steps = []
                at: str | None = nxt
                while at is not None and prev[at] is not None:
                    back, step = prev[at]  # type: ignore[misc]
                    steps.append(step)
                    at = back
                return list(reversed(steps))
            queue.append(nxt)
    reachable = sorted(n for n in prev if n != source)
    hint = f"; from {source} the tables reach: {', '.join(reachable[:10])}" if reachable else \
        f"; no table reads {source}"
    raise ConversionError(f"no chain of mapping tables leads from {source} to {target}{hint}")


@lru_cache(maxsize=1024)
def _specificity(spec_text: str) -> int:
    """0 for an exact namespace, 1 for a version range, 2 for a whole family."""
    try:
        spec = parse_spec(spec_text)
    except NamespaceError:
        return 2
    return 0 if spec.exact is not None else 1 if spec.specifier is not None else 2


def order_tables(tables: Sequence[MappingTable]) -> list[MappingTable]:
    """``tables`` in the order the planner prefers them when several lead from one namespace to the same next one:

    1. tables given by the user (``--table``; no plugin) before installed ones;
    2. the table whose ``src`` is more specific (an exact namespace, then a version range, then a whole family),
       then whose ``dst`` is;
    3. the order they were given in (installed tables in plugin order: entry points load in name order, so the
       order does not depend on the order of installation).

    The same installed tables always give the same choice; ``--exclude-table NAME`` or ``--table FILE`` change it.
    """
    indexed = list(enumerate(tables))
    indexed.sort(key=lambda it: (0 if it[1].plugin is None else 1, _specificity(it[1].src),
                                 _specificity(it[1].dst), it[0]))
    return [t for _, t in indexed]


def _origin(table: MappingTable) -> str:
    return f"plugin {table.plugin}" if table.plugin else "given with --table"


def _why(chosen: MappingTable, others: Sequence[MappingTable]) -> str:
    """Why ``chosen`` comes before each of ``others`` in :func:`order_tables`."""
    words = ("an exact namespace", "a version range", "a whole family")
    reasons = []
    for other in others:
        if chosen.plugin is None and other.plugin is not None:
            reasons.append(f"a table given with --table comes before installed ones ({other.name})")
        elif _specificity(chosen.src) != _specificity(other.src):
            reasons.append(f"its src {chosen.src} is {words[_specificity(chosen.src)]}, more specific than "
                           f"{other.name}'s {other.src}")
        elif _specificity(chosen.dst) != _specificity(other.dst):
            reasons.append(f"its dst {chosen.dst} is {words[_specificity(chosen.dst)]}, more specific than "
                           f"{other.name}'s {other.dst}")
        else:
            reasons.append(f"equally specific as {other.name}, and registered first (plugins load in entry-point "
                           "name order, tables in the order a plugin gives them)")
    return "; ".join(reasons) + " (--exclude-table NAME leaves a table out)"


def exclude_tables(tables: Sequence[MappingTable], names: Sequence[str] | None) -> list[MappingTable]:
    """``tables`` without those named (``--exclude-table NAME``: a table's name, or ``PLUGIN:NAME``); a name that
    matches no table is an error listing the names there are."""
    if not names:
        return list(tables)
    wanted = set(names)
    hit: set[str] = set()
    out = []
    for t in tables:
        keys = {t.name, f"{t.plugin}:{t.name}"}
        if keys & wanted:
            hit |= keys & wanted
            continue
        out.append(t)
    missing = sorted(wanted - hit)
    if missing:
        known = ", ".join(sorted({t.name for t in tables})[:20])
        raise ConversionError(f"--exclude-table {', '.join(missing)}: no such table (tables: {known}"
                              f"{', ...' if len({t.name for t in tables}) > 20 else ''})")
    return out


def _same(a: str, b: str) -> bool:
    try:
        return parse_spec(b).matches(a) and parse_spec(a).matches(b)
    except NamespaceError:
        return a == b


def unconverted_ops(graph: Graph, target: str, registry: NamespaceRegistry | None = None
                    ) -> list[tuple[str, str | None, int, list[str]]]:
    """Op types not in ``target``, with counts and example names.  An op in another registered namespace inside
    the target's family (ONNX-ML beside ONNX) counts as converted; one in a namespace nobody registered (a custom
    ONNX domain) does not."""
    family = parse_namespace(target).family
    found: dict[tuple[str, str | None], list[Op]] = {}
    known: dict[str, bool] = {}
    for g, inherited in graphs_in(graph, None):
        for op in g:
            ns = op_namespace(op, inherited)
            if ns is not None and _same(ns, target):
                continue
            if ns is not None and is_within(ns, family) and not _same_family(ns, target):
                if ns not in known:
                    known[ns] = registry is not None and ns in registry
                if known[ns]:
                    continue
            found.setdefault((op.type or "(no type)", ns), []).append(op)
    out = [(t, ns, len(ops), [o.path for o in ops[:3]]) for (t, ns), ops in found.items()]
    out.sort(key=lambda r: (-r[2], r[0]))
    return out


def _same_family(a: str, b: str) -> bool:
    try:
        return parse_namespace(a).family == parse_namespace(b).family
    except NamespaceError:
        return False


def convert(graph: Graph, target: str, tables: Sequence[MappingTable], registry: NamespaceRegistry | None = None,
            *, include_tags: Sequence[str] = (), exclude_tags: Sequence[str] = (), allow_partial: bool = False,
            copy: bool = True, passes: Sequence[GraphPass] = (), foreign: bool = True,
            infer: Callable[[Graph, str], Any] | None = None,
            pass_options: Mapping[str, Any] | None = None) -> Conversion:
    """Convert ``graph`` to namespace ``target`` through the shortest chain of ``tables``.

    ``passes`` run after the tables they name, each given the ``pass_options`` it declares (``GraphPass.options``;
    :attr:`Conversion.options_taken` says which were given to a pass that ran).  ``infer(graph, namespace)``,
    when given, runs after each table that lands in another family (after its passes): the values the ops it
    made carry are typed by the new family's own inference, before the next table (a TF -> ONNX table leaves ONNX
    values untyped that ONNX -> torch rules need the rank of) and in the result (a model written from it states
    the type of every value its family's inference finds, as the framework's own exporter writes it).

    With ``foreign``, ops in a namespace nobody registers (a custom ONNX domain such as
    ``amanda/onnx/com.microsoft/1``) or in another family than the graph's (``amanda/onnx/ai.onnx.ml/3``) are
    first converted into the graph's namespace by the shortest chain of tables that reads theirs, or, when no chain
    leads there, into the target after the main chain.

    The input graph is left as it was unless ``copy`` is false.  Raises :class:`ConversionError` listing every
    unconverted op type unless ``allow_partial``.
    """
    if graph.namespace is None:
        raise ConversionError("the graph has no namespace, so no table can be chosen for it")
    registry = registry or NamespaceRegistry()
    converter = Converter(registry)
    try:
        target_ns = registry.resolve(target)
    except NamespaceError:
        if parse_spec(target).exact is None:
            raise
        target_ns = target
    source = graph.namespace
    try:
        source = registry.resolve(source)
    except NamespaceError:
        pass
    steps = plan(source, target_ns, tables, registry)
    chain = list(steps)
    if steps:
        steps = _ahead_steps(source, target_ns, tables) + steps
    if foreign:
        before, after = _foreign_steps(graph, source, target_ns, tables, registry)
        steps = before + steps + after
    work = graph.copy() if copy else graph
    if work.namespace != source:
        work.namespace = source
    reports = []
    ran: list[tuple[int, str, str]] = []
    early: list[tuple[int, str, str]] = []
    taken: dict[str, list[str]] = {}
    rewritten_in_family = False  # a table within the graph's family rewrote ops since the graph was last typed
    for i, step in enumerate(steps):
        crosses = not step.ahead and not _same_family(step.src, step.dst)
        if infer is not None and crosses and rewritten_in_family:
            # the values the tables of its own family made (an opset table's decompositions) are typed before a
            # table reads them to leave the family (where rules ask for element types and ranks)
            _infer(infer, work, step.src, i, early)
        for graph_pass in passes:
            if graph_pass.before and step.table.name in graph_pass.tables:
                early.append((i, graph_pass.name, _run_pass(graph_pass, work, step, "before", pass_options, taken)))
        reports.append(converter.apply(work, step.table, src=step.src, dst=step.dst, include_tags=include_tags,
                                       exclude_tags=exclude_tags))
        for graph_pass in passes:
            if not graph_pass.before and step.table.name in graph_pass.tables:
                ran.append((i, graph_pass.name, _run_pass(graph_pass, work, step, "after", pass_options, taken)))
        if infer is not None and crosses:
            _infer(infer, work, step.dst, i, ran)
            rewritten_in_family = False
        elif not step.ahead and reports[-1].matches:
            rewritten_in_family = True
    problems = work.verify()
    if problems:
        raise ConversionError(f"the converted graph is broken: {'; '.join(problems[:5])}")
    left = unconverted_ops(work, target_ns, registry) if steps else []  # no step: nothing was asked to change
    result = Conversion(work, target_ns, steps, reports, left, ran, source, early, taken)
    if left and not allow_partial:
        total = sum(n for _, _, n, _ in left)
        lines = [f"{n} x {t} ({ns or 'no namespace'}), e.g. {', '.join(names)}" for t, ns, n, names in left]
        shown = " -> ".join([source] + [s.dst for s in chain]) if chain else source
        ahead_names = [s.table.name for s in steps if s.ahead]
        if ahead_names:
            shown += f"; ahead of it: {', '.join(ahead_names)}"
        raise ConversionError(f"{total} op(s) of {len(left)} type(s) were not converted to {target_ns} (chain: "
                              f"{shown}); no rule maps them:\n  " + "\n  ".join(lines)
                              + "\n(--allow-partial keeps them as they are)", left)
    return result


def _infer(infer: Callable[[Graph, str], Any], graph: Graph, namespace: str, i: int,
           record: list[tuple[int, str, str]]) -> None:
    """Type ``graph`` in ``namespace``; what came of it goes in ``record`` (inference is a help, not a condition:
    when it fails, the next rules see fewer types)."""
    try:
        typed = infer(graph, namespace)
    except AmandaError as e:
        record.append((i, "type inference", f"failed: {e}"))
    else:
        if typed:
            record.append((i, "type inference", f"{typed} value type(s) inferred"))


def _run_pass(graph_pass: GraphPass, graph: Graph, step: Step, when: str,
              options: Mapping[str, Any] | None = None, taken: dict[str, list[str]] | None = None) -> str:
    given = {k: v for k, v in (options or {}).items() if k in graph_pass.options}
    if taken is not None:
        for k in given:
            taken.setdefault(k, []).append(graph_pass.name)
    try:
        return str(graph_pass.run(graph, **given))
    except AmandaError:
        raise
    except Exception as e:
        raise ConversionError(f"graph pass {graph_pass.name!r} ({when} table {step.table.name!r}) failed: "
                              f"{type(e).__name__}: {e}") from e


def _ahead_steps(source: str, target: str, tables: Sequence[MappingTable]) -> list[Step]:
    """Tables that go ahead of a chain from ``source`` to ``target``: each table marked ``ahead`` whose ``src``
    admits ``source`` and whose ``dst`` admits ``target``, in :func:`order_tables` order.  The engine leaves ops of
    another namespace alone, so the chain after them carries what they made (a graph mixed for a while), and
    converts the ops they had no rule for.  ``amanda/onnx/>=23 -> amanda/pytorch`` takes ``Attention`` to
    ``aten::scaled_dot_product_attention`` where it stands, before the opset chain would have to bring it down to
    an opset that lacks it."""
    return [Step(t, source, target, ahead=True) for t in order_tables(tables)
            if t.ahead and _reads(t, source) and _writes(t, target)]


def _foreign_steps(graph: Graph, source: str, target: str, tables: Sequence[MappingTable],
                   registry: NamespaceRegistry) -> tuple[list[Step], list[Step]]:
    """One table for the ops of ``graph`` in each namespace nobody registered, or registered in another family than
    ``source``'s (an ONNX domain beside the main one, ``amanda/onnx/ai.onnx.ml/3``): one that reads it and writes
    ``source`` (applied first, so the main chain carries its results on), else one that writes ``target`` (applied
    last); among several, :func:`order_tables` decides.  A detour through another family is never taken.
    Namespaces no table reads this way are left alone (reported as unconverted as before)."""
    found: set[str] = set()
    for g, inherited in graphs_in(graph, None):
        for op in g:
            ns = op_namespace(op, inherited)
            if ns is not None and ns != source and ns not in found and (ns not in registry
                                                                         or not _same_family(ns, source)):
                found.add(ns)
    before: list[Step] = []
    after: list[Step] = []
    ordered = order_tables(tables)
    for ns in sorted(found):
        readers = [t for t in ordered if not t.ahead and _reads(t, ns)]
        for goal, out in ((source, before), (target, after)):
            fit = [t for t in readers if _writes(t, goal)]
            if fit:
                out.append(Step(fit[0], ns, goal, tuple(fit[1:]), _why(fit[0], fit[1:]) if len(fit) > 1 else ""))
                break
    return before, after


def _writes(table: MappingTable, namespace: str) -> bool:
    return spec_matches(table.dst, namespace)


def _reads(table: MappingTable, namespace: str) -> bool:
    return spec_matches(table.src, namespace)


def interpret(op: Op, target: str, tables: Sequence[MappingTable], registry: NamespaceRegistry | None = None,
              **options: Any) -> Graph:
    """One op converted on its own, as a small graph (the op's inputs and outputs become the graph's ports):
    the deeplearning4j interpreter's ``interpret(node) -> descriptor``, for tools and tests."""
    src_graph = op.graph
    namespace = op.effective_namespace if src_graph is not None else op.namespace
    if namespace is None:
        raise ConversionError(f"op {op.name!r} has no namespace")
    g = Graph(namespace)
    new = g.add_op(op.type, op.name, attrs=dict(op.attrs), inputs=[(p.name, p.dtype) for p in op.input_ports],
                   outputs=[(q.name, q.dtype) for q in op.output_ports])
    new.meta = dict(op.meta)
    if op.body is not None:
        new.set_body(op.body.copy())
    for p in op.input_ports:
        g.connect(g.add_input_port(p.name, p.dtype), new.input_ports[p.name])
    for q in op.output_ports:
        g.connect(new.output_ports[q.name], g.add_output_port(q.name, q.dtype))
    return convert(g, target, tables, registry, copy=False, **options).graph
