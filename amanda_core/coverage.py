"""``amanda coverage``: before converting, which table and rule would convert each op type of a model.

The model is converted in memory (a copy; nothing is written) with the engine recording, in each op it produces,
the source ops it stands for and the rules that made it (:func:`amanda_core.mapping.rewrite.recording_origins`).
Each source op is then *covered* by the first rule of the chain that rewrote it, *carried* (its type exists in
the target and a table carries it unchanged), *removed* (a rule dropped it, as an Identity is), or *uncovered*
(it, or something it became, is left unconverted).
"""

from __future__ import annotations

__all__ = ["CoverageRow", "CoverageReport", "coverage"]

from collections import Counter
from typing import Any, Sequence

import attrs

from .ir.graph import Graph
from .mapping.rewrite import HISTORY_KEY, origin_of, recording_origins


@attrs.define
class CoverageRow:
    op_type: str
    count: int
    rules: list[tuple[str, str]]
    """``(table, rule)`` of each rule that converts ops of this type (the first table of the chain)"""
    carried: int = 0
    removed: int = 0
    uncovered: int = 0
    examples: list[str] = attrs.field(factory=list)
    """names of uncovered ops"""

    @property
    def covered(self) -> bool:
        return self.uncovered == 0

    def to_json(self) -> dict[str, Any]:
        return {"op_type": self.op_type, "count": self.count, "covered": self.covered,
                "rules": [{"table": t, "rule": r} for t, r in self.rules], "carried": self.carried,
                "removed": self.removed, "uncovered": self.uncovered, "uncovered_ops": self.examples}


@attrs.define
class CoverageReport:
    source: str
    target: str
    chain: list[str]
    rows: list[CoverageRow]

    @property
    def ok(self) -> bool:
        return all(r.covered for r in self.rows)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "target": self.target, "chain": self.chain, "covered": self.ok,
                "op_types": [r.to_json() for r in self.rows]}

    def lines(self) -> list[str]:
        out = [f"{self.source} -> {self.target}" + (f" through {' -> '.join(self.chain)}" if self.chain else "")]
        width = max((len(r.op_type) for r in self.rows), default=0)
        for r in self.rows:
            parts = []
            if r.rules:
                parts.append("; ".join(f"{t}: {rule}" for t, rule in r.rules))
            if r.carried:
                parts.append(f"carried unchanged ({r.carried})")
            if r.removed:
                parts.append(f"removed by a rule ({r.removed})")
            if r.uncovered:
                parts.append(f"NOT COVERED ({r.uncovered}, e.g. {', '.join(r.examples[:3])})")
            out.append(f"  {r.count:>5}  {r.op_type:<{width}}  {' | '.join(parts)}")
        left = [r for r in self.rows if not r.covered]
        out.append(f"{len(self.rows) - len(left)} of {len(self.rows)} op type(s) covered" +
                   (f"; not covered: {', '.join(r.op_type for r in left)}" if left else ""))
        return out


def coverage(graph: Graph, target: str, tables: Sequence[Any], registry: Any, **options: Any) -> CoverageReport:
    """Which rule converts each op of ``graph`` on its way to ``target`` (``options`` as :func:`convert` takes
    them: include_tags, exclude_tags, passes).  Raises ConversionError when no chain of tables leads there."""
    from .mapping import convert

    source_ops = {op.name: op for op in graph.ops.values()}
    with recording_origins():
        result = convert(graph, target, tables, registry, allow_partial=True, copy=True, **options)
    out = result.graph
    stands: dict[str, list[Any]] = {}
    for op in out.ops.values():
        for name in origin_of(op):
            if name in source_ops:
                stands.setdefault(name, []).append(op)
    left_names = {n for _t, _ns, _n, names in result.unconverted for n in names}
    left_ops = {op.name for op in out.ops.values() if op.name in left_names}
    # result.unconverted lists a few names per type: every op left in a namespace other than the target counts
    tgt = result.target
    for op in out.ops.values():
        if op.namespace not in (None, tgt) and not str(op.namespace).startswith(tgt):
            left_ops.add(op.name)
    rows: dict[str, CoverageRow] = {}
    counts: Counter[str] = Counter()
    for name, op in source_ops.items():
        t = op.type or "(no type)"
        counts[t] += 1
        row = rows.setdefault(t, CoverageRow(t, 0, []))
        produced = stands.get(name, [])
        if any(p.name in left_ops for p in produced):
            row.uncovered += 1
            row.examples.append(name)
            continue
        firsts = []
        for p in produced:
            history = p.meta.get(HISTORY_KEY) if isinstance(p.meta, dict) else None
            if history:
                firsts.append((str(history[0][0]), str(history[0][1])))
        if firsts:
            for f in firsts:
                if f not in row.rules:
                    row.rules.append(f)
        elif produced:
            row.carried += 1
        else:
            row.removed += 1
    for t, row in rows.items():
        row.count = counts[t]
    ordered = sorted(rows.values(), key=lambda r: (r.covered, -r.count, r.op_type))
    return CoverageReport(str(graph.namespace), str(result.target), [s.table.name for s in result.steps], ordered)
