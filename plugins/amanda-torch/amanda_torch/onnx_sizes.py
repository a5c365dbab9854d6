"""Before ``onnx-to-torch``: each size list reads literals of its own.

A size computed at run time is, in ONNX, a ``Concat`` of one-dimension ``Shape`` slices and one-element int64
literals, read as the shape of ``Reshape`` or ``Expand``; the ``onnx-to-torch`` rules turn such a list into
torch's SymInts and ints (``docs/torch.md``, "Sizes known at run time").  Writers of ONNX share a constant among
all that read the same value (a ``[0]`` that is a Slice's start, an axis, and a size), and a literal the rules
turn into a Python int must be read by size lists alone.  So each size list's literal that something else reads
too is given to the list as its own ``Constant`` (eight bytes each); nothing else changes.
"""

from __future__ import annotations

__all__ = ["private_size_literals"]

from typing import Any

import numpy as np

from amanda_core import Graph
from amanda_core.mapping.attrconv import onnx_int_literal
from amanda_core.matching.views import OpView

_SIZE_READERS = ("Reshape", "Expand")


def _is_size_list(op: Any) -> bool:
    """A Concat on axis 0 read only as the ``shape`` of Reshape or Expand."""
    if op.type != "Concat" or op.attrs.get("axis") not in (0, -1) or not op.output_ports:
        return False
    readers = op.output_ports[0].consumers
    return bool(readers) and all(r.op is not None and r.op.type in _SIZE_READERS and r.name == "shape"
                                 for r in readers)


def private_size_literals(graph: Graph) -> int:
    """Give each size list (in ``graph`` and the graphs in it) its own copy of every one-element int64 literal it
    reads that something else reads too; returns how many copies were made."""
    made = 0
    for g in [graph, *(nested.graph for nested in graph.nested_graphs())]:
        for concat in [op for op in g if _is_size_list(op)]:
            for port in concat.input_ports:
                src = port.source
                const = src.op if src is not None else None
                if const is None or const.type not in ("Constant", "Initializer") or len(src.consumers) < 2:
                    continue
                value = onnx_int_literal(OpView(const))
                if value is None:
                    continue
                copy = g.add_op("Constant", g.unique_name(f"{concat.name}_{port.name}"),
                                attrs={"value": np.array([value], np.int64)},
                                outputs=[("output", "tensor(int64)[1]")])
                g.connect(copy.output_ports["output"], port, replace=True)
                made += 1
    return made
