"""The per-op check (``amanda check --per-op``): where a conversion starts computing something else.

The reference (the source model) and the candidate (its conversion) run on the same inputs.  Each candidate op
stands for some reference ops: the ops its rewrite replaced, as the engine records them in
``meta["amanda.origin"]`` when asked (:func:`amanda_core.mapping.rewrite.recording_origins`), else the op of the
same name.  Ops that stand for the same reference ops form a *group*; the values that leave a group (read by
another group, or graph outputs) are the ones that can be lined up: a candidate value leaving a group is compared
with the reference value that leaves the same group in the reference graph, of the same shape (or the same
shape channels-last, ``N...C`` against ``NC...``).  The first candidate op, in topological order, whose value is
beyond tolerance is reported with the rule that made it and both values' statistics.

Memory stays bounded: the reference runs first (:attr:`Runner.run_each`) and each value that will be compared
is written to a temporary folder as it is produced (nothing is held in memory); the candidate then runs, and each
of its values is compared as it is produced with the reference value read back from disk, which is deleted once
no other candidate value reads it.  The candidate run stops at the first divergence.
"""

from __future__ import annotations

__all__ = ["ValueStats", "Divergence", "PerOpReport", "Lineup", "line_up", "check_per_op", "value_stats"]

import os
import shutil
import tempfile
from typing import Any, Mapping

import attrs

from .errors import AmandaError
from .ir.graph import Graph, Op
from .mapping.rewrite import origin_of


@attrs.define
class ValueStats:
    shape: list[int]
    dtype: str
    min: float | None = None
    max: float | None = None
    mean: float | None = None
    std: float | None = None

    def describe(self) -> str:
        if self.min is None:
            return f"{self.dtype}{self.shape}"
        return (f"{self.dtype}{self.shape} min {self.min:.4g} max {self.max:.4g} mean {self.mean:.4g} "
                f"std {self.std:.4g}")


def value_stats(value: Any) -> ValueStats:
    import numpy as np

    a = np.asarray(value)
    if a.size and (a.dtype.kind in "fiub"):
        f = a.astype(np.float64)
        finite = f[np.isfinite(f)] if a.dtype.kind == "f" else f
        if finite.size:
            return ValueStats(list(a.shape), str(a.dtype), float(finite.min()), float(finite.max()),
                              float(finite.mean()), float(finite.std()))
    return ValueStats(list(a.shape), str(a.dtype))


@attrs.define
class Divergence:
    """The first candidate op whose value is beyond tolerance."""

    op: str
    op_type: str | None
    port: str
    table: str | None
    rule: str | None
    reference_ops: list[str]
    reference_types: list[str | None]
    reference_port: str
    reference: ValueStats
    candidate: ValueStats
    max_abs_diff: float | None
    layout: str = ""
    problem: str | None = None

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.define
class PerOpReport:
    compared: int
    lined_up: int
    unmatched: list[str]
    tolerance: str
    divergence: Divergence | None
    inputs: dict[str, list[int]] = attrs.field(factory=dict)

    @property
    def ok(self) -> bool:
        return self.divergence is None

    def to_json(self) -> dict[str, Any]:
        return {"compared": self.compared, "lined_up": self.lined_up, "unmatched": self.unmatched,
                "tolerance": self.tolerance, "match": self.ok, "inputs": self.inputs,
                "divergence": None if self.divergence is None else self.divergence.to_json()}

    def lines(self) -> list[str]:
        out = []
        d = self.divergence
        if d is None:
            out.append(f"no op diverges: {self.compared} value(s) of {self.lined_up} lined-up op(s) within "
                       f"{self.tolerance}")
        else:
            made = f"table {d.table!r}, rule {d.rule!r}" if d.table else "no rule (kept as it was)"
            refs = ", ".join(f"{n} ({t})" for n, t in zip(d.reference_ops, d.reference_types))
            out.append(f"first diverging op: {d.op} ({d.op_type}), output {d.port}, made by {made}")
            out.append(f"  stands for: {refs}, output {d.reference_port}")
            if d.problem:
                out.append(f"  {d.problem}")
            else:
                out.append(f"  max abs diff {d.max_abs_diff:.4g} (tolerance {self.tolerance}){d.layout}")
            out.append(f"  reference: {d.reference.describe()}")
            out.append(f"  candidate: {d.candidate.describe()}")
            out.append(f"  {self.compared - 1} value(s) within tolerance before it")
        if self.unmatched:
            shown = ", ".join(self.unmatched[:8]) + (" ..." if len(self.unmatched) > 8 else "")
            out.append(f"not lined up ({len(self.unmatched)} op(s) that stand for no reference value): {shown}")
        return out


# --------------------------------------------------------------------------- lining up

@attrs.define
class Lineup:
    """Which candidate values are compared with which reference values."""

    pairs: dict[tuple[str, str], list[tuple[str, str]]]
    """``(candidate op, port) -> [(reference op, port), ...]`` (candidates: shapes decide among them)."""
    groups: dict[str, tuple[str, ...]]
    """candidate op -> the reference ops it stands for"""
    unmatched: list[str]

    @property
    def reference_ops(self) -> set[str]:
        return {r for refs in self.pairs.values() for r, _ in refs}

    @property
    def candidate_ops(self) -> set[str]:
        return {c for c, _ in self.pairs}

    def readers(self) -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        for refs in self.pairs.values():
            for r in refs:
                out[r] = out.get(r, 0) + 1
        return out


def _is_constant(op: Op) -> bool:
    return len(op.input_ports) == 0


def _leaving(graph: Graph, group_of: Mapping[Op, tuple[str, ...]]) -> dict[tuple[str, ...], list[tuple[Op, str]]]:
    """For each group, the output ports read outside it (by an op of another group, or a graph output), in
    topological order."""
    out: dict[tuple[str, ...], list[tuple[Op, str]]] = {}
    for op in graph.topological_order():
        g = group_of.get(op)
        if g is None:
            continue
        for q in op.output_ports:
            leaves = any(c.op is None or c.op not in group_of or group_of[c.op] != g for c in q.consumers)
            if leaves:
                out.setdefault(g, []).append((op, q.name))
    return out


def line_up(reference: Graph, candidate: Graph) -> Lineup:
    """Pair the values leaving each group of candidate ops with those leaving the same reference ops."""
    ref_ops = reference.ops
    cand_group: dict[Op, tuple[str, ...]] = {}
    groups: dict[str, tuple[str, ...]] = {}
    unmatched: list[str] = []
    for op in candidate.topological_order():
        if _is_constant(op):
            continue
        names = tuple(sorted(n for n in origin_of(op) if n in ref_ops))
        if not names:
            unmatched.append(op.name)
            continue
        cand_group[op] = names
        groups[op.name] = names
    ref_group: dict[Op, tuple[str, ...]] = {}
    for names in set(cand_group.values()):
        for n in names:
            ref_group.setdefault(ref_ops[n], names)
    ref_leaving = _leaving(reference, ref_group)
    cand_leaving = _leaving(candidate, cand_group)
    pairs: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for g, outs in cand_leaving.items():
        refs = [(op.name, p) for op, p in ref_leaving.get(g, [])]
        if not refs:
            continue
        if len(refs) == len(outs):  # one for one, in order
            for (op, p), r in zip(outs, refs):
                pairs[(op.name, p)] = [r]
        else:  # the shapes decide
            for op, p in outs:
                pairs[(op.name, p)] = list(refs)
    return Lineup(pairs, groups, unmatched)


# --------------------------------------------------------------------------- comparing

def _layouts(ref_shape: tuple[int, ...], cand_shape: tuple[int, ...]) -> list[tuple[tuple[int, ...] | None, str]]:
    """How a candidate value may be read against a reference value: as it is, or channels-last to channels-first
    (both when the shapes allow both: ``[N, 16, 16, 16]``)."""
    out: list[tuple[tuple[int, ...] | None, str]] = []
    if ref_shape == cand_shape:
        out.append((None, ""))
    r = len(cand_shape)
    if r >= 3:
        perm = (0, r - 1, *range(1, r - 1))  # N...C -> NC...
        if tuple(cand_shape[i] for i in perm) == ref_shape and perm != tuple(range(r)):
            out.append((perm, " (candidate channels-last, compared transposed)"))
    return out


def _compare(ref: Any, cand: Any, rtol: float, atol: float) -> tuple[bool, float | None, str] | None:
    """(within tolerance, max abs diff, layout note), or None when the shapes cannot be lined up.  When both
    readings fit the shapes, the value is within tolerance if either reading is; else the closer one is
    reported."""
    import numpy as np

    a, b = np.asarray(ref), np.asarray(cand)
    best: tuple[bool, float | None, str] | None = None
    for perm, note in _layouts(tuple(a.shape), tuple(b.shape)):
        bb = b if perm is None else np.transpose(b, perm)
        if a.dtype.kind in "fc" or bb.dtype.kind in "fc":
            af, bf = a.astype(np.float64), bb.astype(np.float64)
            both_nan = np.isnan(af) & np.isnan(bf)
            diff = np.where(both_nan, 0.0, np.abs(af - bf))
            ok = bool(np.all((diff <= atol + rtol * np.abs(af)) | both_nan))
            worst = float(np.nanmax(diff)) if diff.size else 0.0
        else:
            ok = bool(np.array_equal(a, bb))
            worst = float(np.max(np.abs(a.astype(np.float64) - bb.astype(np.float64)))) if a.size else 0.0
        if ok:
            return ok, worst, note
        if best is None or (best[1] is not None and worst < best[1]):
            best = (ok, worst, note)
    return best


def _runner(graph: Graph, what: str, reg: Any) -> Any:
    from .check import runner_for

    runner = runner_for(graph, what, reg)
    if getattr(runner, "run_each", None) is None:
        raise AmandaError(f"{what}: the runner {runner.name} cannot report each op's values (no run_each), so "
                          "the per-op check cannot run on it")
    return runner


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def record_reference(reference: Graph, inputs: Mapping[str, Any], wanted: set[tuple[str, str]], folder: str,
                     reg: Any = None) -> dict[tuple[str, str], str]:
    """Run the reference and write each wanted value to ``folder`` as it is produced: ``{(op, port): path}``."""
    import numpy as np

    runner = _runner(reference, "reference", reg)
    paths: dict[tuple[str, str], str] = {}
    ops = {op for op, _ in wanted}

    def keep(op_name: str, values: dict[str, Any]) -> None:
        for port, value in values.items():
            if (op_name, port) not in wanted or isinstance(value, (list, tuple)):
                continue
            path = os.path.join(folder, f"{len(paths)}_{_safe(op_name)}_{_safe(port)}.npy")
            np.save(path, np.asarray(value))
            paths[(op_name, port)] = path

    runner.run_each(reference, dict(inputs), keep, ops)
    return paths


def check_per_op(reference: Graph, candidate: Graph, inputs: Mapping[str, Any], *, rtol: float = 1e-5,
                 atol: float = 1e-5, reg: Any = None, candidate_inputs: Mapping[str, Any] | None = None,
                 workdir: str | None = None) -> PerOpReport:
    """Run both graphs on ``inputs`` (``candidate_inputs`` when the candidate's input names differ) and report
    the first candidate op whose value is beyond ``atol + rtol * |reference|``."""
    import numpy as np

    if reg is None:
        from .plugin.manager import registry

        reg = registry()
    lineup = line_up(reference, candidate)
    cand_runner = _runner(candidate, "candidate", reg)
    readers = lineup.readers()
    tmp = tempfile.mkdtemp(prefix="amanda-perop-", dir=workdir)
    tolerance = f"atol {atol:g} + rtol {rtol:g} * |reference|"
    try:
        paths = record_reference(reference, inputs, set(readers), tmp, reg)
        state: dict[str, Any] = {"compared": 0, "divergence": None}

        def release(key: tuple[str, str]) -> None:
            readers[key] -= 1
            if readers[key] <= 0 and key in paths:
                try:
                    os.remove(paths.pop(key))
                except OSError:
                    pass

        def each(op_name: str, values: dict[str, Any]) -> bool:
            for port, value in values.items():
                refs = lineup.pairs.get((op_name, port))
                if not refs:
                    continue
                result = None
                used = None
                ref_value = None
                for key in refs:
                    path = paths.get(key)
                    if path is None or isinstance(value, (list, tuple)):
                        continue
                    ref_value = np.load(path, mmap_mode="r")
                    result = _compare(ref_value, value, rtol, atol)
                    if result is not None:
                        used = key
                        break
                if used is not None and result is not None:
                    state["compared"] += 1
                    ok, worst, note = result
                    if not ok:
                        state["divergence"] = _divergence(candidate, reference, op_name, port, used,
                                                          lineup, ref_value, value, worst, note)
                elif ref_value is not None and len(refs) == 1:
                    state["compared"] += 1
                    ref_shape = list(np.shape(ref_value))
                    state["divergence"] = _divergence(
                        candidate, reference, op_name, port, refs[0], lineup, ref_value, value, None, "",
                        problem=f"shape {list(np.shape(value))} where the reference has {ref_shape}")
                for key in refs:
                    release(key)
                del ref_value
                if state["divergence"] is not None:
                    return True
            return False

        cand_runner.run_each(candidate, dict(candidate_inputs if candidate_inputs is not None else inputs), each,
                             lineup.candidate_ops)
        return PerOpReport(state["compared"], len(lineup.groups), lineup.unmatched, tolerance,
                           state["divergence"], {k: list(np.shape(v)) for k, v in inputs.items()})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _divergence(candidate: Graph, reference: Graph, op_name: str, port: str, ref_key: tuple[str, str],
                lineup: Lineup, ref_value: Any, value: Any, worst: float | None, note: str, *,
                problem: str | None = None) -> Divergence:
    op = candidate.ops[op_name]
    table, rule = op.provenance if op.provenance else (None, None)
    names = list(lineup.groups.get(op_name, (ref_key[0],)))
    return Divergence(op_name, op.type, port, table, rule, names,
                      [reference.ops[n].type if n in reference.ops else None for n in names], f"{ref_key[0]}."
                      f"{ref_key[1]}", value_stats(ref_value), value_stats(value), worst, note, problem)
