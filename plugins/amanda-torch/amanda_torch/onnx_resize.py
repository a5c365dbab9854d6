"""``Resize-19``'s ``half_pixel_symmetric`` mode into ``onnx-to-torch`` (a pass before that table).

``Resize-19`` differs from ``Resize-18`` only in the coordinate mode it added, ``half_pixel_symmetric``, which the
``onnx-to-torch`` rules for Resize in linear and cubic mode already compute (the source coordinate
``offset + (i + 0.5) / scale - 0.5`` with ``offset = in / 2 * (1 - out / (scale * in))``, the unrounded output
length).  The opset chain cannot bring such an op down to 18 (opset 18 has no such mode, so the downgrade leaves
it in its own opset), and on the way to torch that is the only thing that stops it: this pass, which runs before
``onnx-to-torch`` only, reads the op left at 19 (or later: Resize has not changed since) as the opset-18 op (its
namespace pinned to ``amanda/onnx/18``), so the table converts it with the rules every other linear or cubic
Resize goes through.  In nearest mode (no rule computes that mode with nearest rounding) it stays where it is
and is refused.
"""

from __future__ import annotations

__all__ = ["resize_symmetric_to_torch"]

from amanda_core import Graph

ONNX_FAMILY = "amanda/onnx/"
READ_AS = "amanda/onnx/18"


def _opset(ns: str | None) -> int | None:
    if not ns or not ns.startswith(ONNX_FAMILY):
        return None
    try:
        return int(ns[len(ONNX_FAMILY):])
    except ValueError:
        return None


def resize_symmetric_to_torch(graph: Graph) -> str:
    """Resize ops the chain left at opset 19+ in ``half_pixel_symmetric`` linear or cubic mode, read as the graph's
    opset-18 Resize; returns a summary."""
    if _opset(graph.namespace) is None:
        return "not an ONNX graph: nothing to do"
    moved = 0
    scopes = [(graph, graph.namespace), *((n.graph, n.graph.namespace or n.inherited)
                                          for n in graph.nested_graphs(graph.namespace))]
    for g, around in scopes:
        for op in g:
            if op.type != "Resize":
                continue
            opset = _opset(op.namespace or around)
            if opset is None or opset < 19:
                continue
            if op.attrs.get("coordinate_transformation_mode") == "half_pixel_symmetric" \
                    and op.attrs.get("mode", "nearest") in ("linear", "cubic"):
                op.namespace = READ_AS
                moved += 1
    return f"{moved} Resize (half_pixel_symmetric, linear or cubic) read as opset 18"
