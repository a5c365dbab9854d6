"""Before ``onnx-to-torch``: each size list reads literals of its own.

A size computed at run time is, in ONNX, a ``Concat`` of one-dimension ``Shape`` slices and one-element int64
literals, read as the shape of ``Reshape`` or ``Expand``; the ``onnx-to-torch`` rules turn such a list into
torch's SymInts and ints (``docs/torch.md``, "Sizes known at run time").  Writers of ONNX share a constant among
all that read the same value (a ``[0]`` that is a Slice's start, an axis, and a size), and a literal the rules
turn into a Python int must be read by size lists alone.  So each size list's literal that something else reads
too is given to the list as its own ``Constant`` (eight bytes each); nothing else changes.

Writers also read several sizes at once: torch.onnx writes ``x.reshape(-1, *x.shape[-2:])`` as a ``Slice`` of the
whole ``Shape(x)`` from -2 to -1 and one from -1 to the end, and ``x.shape[:-2]`` as one slice of several sizes.
:func:`split_shape_reads` first splits each such read of a size list (a ``Shape`` of several dimensions, or a
constant ``Slice`` of one) into one piece per dimension: the size as a literal where ``x``'s type knows it, else a
``Shape`` of that one dimension, so that the list is of the form above; a list two ops read (torch.onnx's
``expand_as`` of two masks to one ``Shape``) becomes one list each.
"""

from __future__ import annotations

__all__ = ["private_size_literals", "split_shape_reads"]

from typing import Any

import numpy as np

from amanda_core import Graph
from amanda_core.mapping.attrconv import onnx_int_literal
from amanda_core.matching.views import OpView

from .onnx_passes import _const, _tensor_type

_SIZE_READERS = ("Reshape", "Expand")


def _read_as_sizes(port: Any) -> bool:
    readers = port.consumers
    return bool(readers) and all(r.op is not None and r.op.type in _SIZE_READERS and r.name == "shape"
                                 for r in readers)


def _is_size_list(op: Any) -> bool:
    """A Concat on axis 0 read only as the ``shape`` of Reshape or Expand."""
    if op.type != "Concat" or op.attrs.get("axis") not in (0, -1) or not op.output_ports:
        return False
    return _read_as_sizes(op.output_ports[0])


def _ints(port: Any) -> list[int] | None:
    """The ints of an integer constant of at most one dimension feeding ``port`` (None otherwise)."""
    value = _const(port) if port is not None else None
    if value is None or value.dtype.kind not in "iu" or value.ndim > 1:
        return None
    return [int(v) for v in value.reshape(-1)]


def _dims_read(op: Any) -> tuple[Any, list[int], list[Any]] | None:
    """For a ``Shape`` op, or a ``Slice`` by constants (one axis, step 1) of one: the port whose shape is read,
    the dimensions read (in order) and that port's shape (ints where known); None for anything else.  ONNX's
    bounds of both (negative from the end, clamped to the length) are Python's slice bounds."""
    shape_op, lo, hi = op, None, None
    if op.type == "Slice":
        ports = op.input_ports
        data = ports.get("data")
        shape_op = data.source.op if data is not None and data.source is not None else None
        starts, ends = _ints(ports.get("starts")), _ints(ports.get("ends"))
        axes = _ints(ports.get("axes")) if ports.get("axes") is not None and ports["axes"].source else [0]
        steps = _ints(ports.get("steps")) if ports.get("steps") is not None and ports["steps"].source else [1]
        if starts is None or ends is None or len(starts) != 1 or len(ends) != 1 or axes not in ([0], [-1]) \
                or steps != [1]:
            return None
        lo, hi = starts[0], ends[0]
    if shape_op is None or shape_op.type != "Shape" or not shape_op.input_ports:
        return None
    x = shape_op.input_ports[0].source
    t = _tensor_type(x.dtype) if x is not None else None
    if t is None or t[1] is None:
        return None
    shape = [d if isinstance(d, int) and d >= 0 else None for d in t[1]]
    dims = list(range(len(shape)))[shape_op.attrs.get("start"):shape_op.attrs.get("end")]
    return x, dims[lo:hi], shape


def _pieces(g: Graph, base: str, x: Any, dims: list[int], shape: list[Any]) -> list[Any]:
    """One output port per dimension: a literal of its size where known, else a ``Shape`` of it alone."""
    out = []
    for d in dims:
        if shape[d] is not None:
            op = g.add_op("Constant", g.unique_name(f"{base}_dim{d}"), attrs={"value": np.array([shape[d]], np.int64)},
                          outputs=[("output", "tensor(int64)[1]")])
        else:
            op = g.add_op("Shape", g.unique_name(f"{base}_dim{d}"), attrs={"start": d, "end": d + 1},
                          inputs=["data"], outputs=[("shape", "tensor(int64)[1]")], sources=[x])
        out.append(op.output_ports[0])
    return out


def _one_dim_read(op: Any, dims: list[int], shape: list[Any]) -> bool:
    """``op`` already reads one unknown size alone (a typed one-dimension ``Shape`` the rules take as it is; an
    untyped one is replaced by a typed copy)."""
    return op.type == "Shape" and len(dims) == 1 and shape[dims[0]] is None and op.output_ports[0].dtype is not None


def split_shape_reads(graph: Graph) -> int:
    """Split each read of several sizes in a size list (``graph`` and the graphs in it), and each such read that is
    itself the shape of Reshape or Expand, into one piece per dimension; a list several ops read becomes one list
    per reader (the rules take a list, and a one-dimension ``Shape`` in it, that one op reads).  Returns how many
    reads were split."""
    split = 0
    for g in [graph, *(nested.graph for nested in graph.nested_graphs())]:
        for op in list(g):
            if op.graph is not g:
                continue
            if _is_size_list(op):
                sources = [p.source for p in op.input_ports]
            elif op.type in ("Shape", "Slice") and op.output_ports and _read_as_sizes(op.output_ports[0]):
                sources = [op.output_ports[0]]
            else:
                continue
            readers = list(op.output_ports[0].consumers)
            # the list's values are the same, so its type is too (a piece kept as it was may hold several sizes);
            # an untyped list stays untyped
            list_type = op.output_ports[0].dtype
            reads = [_dims_read(src.op) if src is not None and src.op is not None else None for src in sources]
            alone = len(readers) == 1
            if alone and all(r is None or _one_dim_read(src.op, r[1], r[2]) for src, r in zip(sources, reads)):
                continue
            if all(r is not None and not r[1] for r in reads):
                continue  # an empty size list: ONNX's scalar shape, which the rules do not take
            for reader in readers:
                flat: list[Any] = []
                for src, read in zip(sources, reads):
                    if read is None or (alone and _one_dim_read(src.op, read[1], read[2])):
                        flat.append(src)
                        continue
                    x, dims, shape = read
                    flat.extend(_pieces(g, src.op.name, x, dims, shape))
                    split += 1
                if len(flat) == 1 and op.type != "Concat":
                    new = flat[0]
                else:
                    concat = g.add_op("Concat", g.unique_name(f"{op.name}_sizes"), attrs={"axis": 0},
                                      inputs=[f"inputs_{i}" for i in range(len(flat))],
                                      outputs=[("concat_result", list_type)], sources=flat)
                    new = concat.output_ports[0]
                g.connect(new, reader, replace=True)
            _remove_unread(g, op)
    return split


def _remove_unread(g: Graph, op: Any) -> None:
    """Remove ``op`` and, in turn, the ops that fed only it (down to the graph's inputs)."""
    work = [op]
    while work:
        cur = work.pop()
        if cur.graph is not g or any(p.consumers for p in cur.output_ports) or cur.attrs.get("graph_input") \
                or cur.control_outputs:
            continue
        feeders = [p.source.op for p in cur.input_ports if p.source is not None and p.source.op is not None]
        g.remove_op(cur)
        work.extend(feeders)


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
