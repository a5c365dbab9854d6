"""``If`` ops whose condition is known at conversion, replaced by the branch it takes.

ONNX function bodies test properties of their inputs that a model fixes: AffineGrid's body asks ``Size(size) ==
4`` (a 2-D or a 3-D grid) of an input whose shape is static, and ``align_corners == 0`` of a constant.  A backend
that converts the ``If`` as control flow (TensorFlow's ``StatelessIf``) loses what the taken branch says of its
values' ranks and shapes, and the rules after it, which need them, decline.  This pass evaluates such conditions
from constants and static shapes (``Shape``, ``Size``, comparisons, logic, casts) and puts the ops of the branch
taken in the ``If``'s place, as the ``If`` would run them, then types the copies with onnx's inference.

An ``If`` whose condition depends on a value known only at run time is left as it is, with the reason in the pass's
summary.  The ops of the branch taken keep the ONNX names of their values, so that graphs inside it still read them
by name.
"""

from __future__ import annotations

__all__ = ["fold_static_ifs", "StaticIfReport"]

import attrs
import numpy as np

from amanda_core import Graph
from amanda_core.ir.graph import Op

from .unroll import ONNX_FAMILY, _inline, _outer_values, _replace_outputs, _static_value, _type_copies


@attrs.define
class StaticIfReport:
    folded: int = 0
    left: list[str] = attrs.field(factory=list)

    def summary(self) -> str:
        left = f"; left: {'; '.join(self.left)}" if self.left else ""
        return f"{self.folded} If folded into the branch it takes" + left


def _fold(g: Graph, op: Op) -> str | None:
    if not op.input_ports or op.input_ports[0].source is None:
        return "its condition is not fed"
    cond = _static_value(op.input_ports[0].source)
    if cond is None or np.asarray(cond).size != 1:
        return "its condition is known only at run time"
    branch = op.attrs.get("then_branch" if bool(np.asarray(cond).reshape(-1)[0]) else "else_branch")
    if not isinstance(branch, Graph):
        return "its branch is not a graph"
    if branch.input_ports or len(branch.output_ports) != len(op.output_ports):
        return "its branch's ports do not fit its outputs"
    outer = _outer_values(g, branch)
    if isinstance(outer, str):
        return outer
    if any(go.source is None for go in branch.output_ports):
        return "an output of its branch is not fed"
    # taken once, the copies may keep the ONNX names of their values (unique across a graph and the graphs in
    # it), so that graphs inside the branch still read them by name
    outs = _inline(g, branch, branch.topological_order(), [], outer, op.name, keep_names=True)
    _replace_outputs(g, op, {q.name: p for q, p in zip(op.output_ports, outs)})
    return None


def fold_static_ifs(graph: Graph) -> StaticIfReport:
    """Replace every ``If`` of ``graph`` (an ``amanda/onnx`` graph; not in nested graphs) whose condition is known
    at conversion by the ops of the branch it takes."""
    report = StaticIfReport()
    if not (graph.namespace or "").startswith(ONNX_FAMILY):
        return report
    changed = True
    while changed:  # a folded If may make the condition of a later one known (its outputs now typed)
        changed = False
        left: list[str] = []
        for op in list(graph):
            if op.graph is not graph or op.namespace is not None or op.type != "If":
                continue
            why = _fold(graph, op)
            if why is None:
                report.folded += 1
                changed = True
            else:
                left.append(f"If {op.path}: {why}")
        if changed:
            _type_copies(graph)
    report.left = left
    return report
