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

__all__ = ["Step", "Conversion", "ConversionError", "plan", "convert", "interpret", "unconverted_ops"]

from collections import deque
from typing import TYPE_CHECKING, Any, Sequence

import attrs

from ..errors import AmandaError, NamespaceError
from ..ir.graph import Graph, Op
from ..namespace.names import is_within, parse_namespace, parse_spec
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

    def __str__(self) -> str:
        return f"{self.src} -> {self.dst} ({self.table.name})"


@attrs.define
class Conversion:
    graph: Graph
    target: str
    steps: list[Step]
    reports: list[ApplyReport]
    unconverted: list[tuple[str, str | None, int, list[str]]] = attrs.field(factory=list)
    passes: list[tuple[int, str, str]] = attrs.field(factory=list)
    """Graph passes that ran: (index of the step they followed, pass name, its summary)."""

    def explain(self) -> str:
        """Per table and rule: how many matches each rewrote and which ops it produced."""
        lines = []
        for i, report in enumerate(self.reports):
            lines.append(f"table {report.table}: {report.src} -> {report.dst}")
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
            for step, name, summary in self.passes:
                if step == i:
                    lines.append(f"  then pass {name}: {summary}")
        if self.unconverted:
            lines.append("left unconverted:")
            for t, ns, n, names in self.unconverted:
                lines.append(f"  {n} x {t} ({ns}): {', '.join(names)}")
        return "\n".join(lines)


def _leads_to(table: MappingTable, target: str, registry: NamespaceRegistry) -> str | None:
    dst = parse_spec(table.dst)
    if dst.matches(target):
        return target
    try:
        return registry.resolve(table.dst)
    except NamespaceError:
        return table.dst if dst.exact is not None else None


def plan(source: str, target: str, tables: Sequence[MappingTable], registry: NamespaceRegistry | None = None
         ) -> list[Step]:
    """The shortest chain of ``tables`` from namespace ``source`` to ``target`` (empty if they are the same)."""
    registry = registry or NamespaceRegistry()
    if _same(source, target):
        return []
    prev: dict[str, tuple[str, Step] | None] = {source: None}
    queue = deque([source])
    while queue:
        here = queue.popleft()
        for table in tables:
            if not parse_spec(table.src).matches(here):
                continue
            nxt = _leads_to(table, target, registry)
            if nxt is None or nxt in prev:
                continue
            prev[nxt] = (here, Step(table, here, nxt))
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
            copy: bool = True, passes: Sequence[GraphPass] = ()) -> Conversion:
    """Convert ``graph`` to namespace ``target`` through the shortest chain of ``tables``.

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
    work = graph.copy() if copy else graph
    if work.namespace != source:
        work.namespace = source
    reports = []
    ran: list[tuple[int, str, str]] = []
    for i, step in enumerate(steps):
        reports.append(converter.apply(work, step.table, src=step.src, dst=step.dst, include_tags=include_tags,
                                       exclude_tags=exclude_tags))
        for graph_pass in passes:
            if step.table.name in graph_pass.tables:
                try:
                    summary = graph_pass.run(work)
                except AmandaError:
                    raise
                except Exception as e:
                    raise ConversionError(f"graph pass {graph_pass.name!r} (after table {step.table.name!r}) "
                                          f"failed: {type(e).__name__}: {e}") from e
                ran.append((i, graph_pass.name, str(summary)))
    problems = work.verify()
    if problems:
        raise ConversionError(f"the converted graph is broken: {'; '.join(problems[:5])}")
    left = unconverted_ops(work, target_ns, registry) if steps else []  # no step: nothing was asked to change
    result = Conversion(work, target_ns, steps, reports, left, ran)
    if left and not allow_partial:
        total = sum(n for _, _, n, _ in left)
        lines = [f"{n} x {t} ({ns or 'no namespace'}), e.g. {', '.join(names)}" for t, ns, n, names in left]
        chain = " -> ".join([source] + [s.dst for s in steps]) if steps else source
        raise ConversionError(f"{total} op(s) of {len(left)} type(s) were not converted to {target_ns} (chain: "
                              f"{chain}); no rule maps them:\n  " + "\n  ".join(lines)
                              + "\n(--allow-partial keeps them as they are)", left)
    return result


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

