"""Graph passes on the ONNX graphs the ``torch-to-onnx`` table writes: what is not a local rewrite of one torch op.

The table converts op by op; what is left for a careful hand export is global, or needs the values of
several constants at once.  :func:`fold` runs after ``torch-to-onnx`` (opset 18), on the graph and every graph
nested in it, until nothing changes:

* **batch normalization into convolutions**: ``Conv -> BatchNormalization`` (inference mode, scale, bias, mean
  and variance constants, the Conv's weight and bias constants, the Conv read by the BatchNormalization only)
  becomes one ``Conv`` whose weight is ``W * scale / sqrt(var + eps)`` per output channel and whose bias is
  ``(B - mean) * scale / sqrt(var + eps) + bias``, computed in float64 and rounded once to the weight's type.  A
  BatchNormalization in training mode, one whose statistics are computed, or one that also gives its running
  statistics, is left as it is;
* **zero padding into convolutions**: ``Pad`` (constant mode, value 0, constant pads on the spatial axes only,
  no negative pad) read only by ``Conv`` ops with explicit pads becomes those Convs' pads;
* **constant folding**: an op whose inputs are all constants becomes one constant, for the ops whose result numpy
  computes exactly as ONNX defines it (shape ops, ``Cast``, comparisons and logic, ``Where``, integer and
  float32 ``Add``/``Sub``/``Mul``, ``Div``, ``Neg``, ``Sqrt``, ``Reciprocal``, ``Range``, ``ConstantOfShape``);
  transcendental functions (``Exp``, ``Erf``, ``Tanh`` ...) are left to the runtime, whose rounding may differ,
  and so is a fold whose result would be much larger than its inputs (an ``Expand`` to a big shape);
* **constants as initializers**: ``Constant`` nodes of the main graph become ``Initializer`` ops (graph
  initializers, not nodes), and ``Constant`` nodes nothing reads are removed, as are initializers of the main
  graph nothing reads (BatchNorm's ``num_batches_tracked`` buffer);
* **no-ops**: ``Identity``, a ``Cast`` to the element type its input has and an ``Expand`` to a shape its input
  has (both read from the port types) are bypassed, unless they feed a graph output.

:func:`fuse_gelu` runs after ``onnx-opset-19-to-20`` (so only when the target opset has ``Gelu``): the exact
form the ``gelu_erf`` rule writes, ``x * (1 + erf(x / sqrt 2)) * 0.5``, becomes one ``Gelu``, and the tanh form
the ``gelu_tanh`` rule writes one ``Gelu(approximate="tanh")``.  Only ops that rule wrote (their provenance) are
fused, so ONNX models converted between opsets keep their own graph.
"""

from __future__ import annotations

__all__ = ["FoldReport", "fold", "fuse_gelu"]

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from amanda_core import Graph, Op
from amanda_core.mapping.rewrite import inherit_origin

#: A folded constant may hold at most this many elements more than its inputs together (an Expand or
#: ConstantOfShape to a large shape is cheaper to compute at run time than to store).
GROWTH_LIMIT = 4096


@dataclass
class FoldReport:
    """What a pass did, by kind of rewrite."""

    name: str
    nodes_before: int = 0
    nodes_after: int = 0
    rewrites: dict[str, int] = field(default_factory=dict)

    def count(self, what: str, n: int = 1) -> None:
        self.rewrites[what] = self.rewrites.get(what, 0) + n

    def summary(self) -> str:
        done = ", ".join(f"{k} {v}" for k, v in sorted(self.rewrites.items()))
        return f"nodes {self.nodes_before} -> {self.nodes_after} ({done or 'no rewrites'})"


def _graphs(graph: Graph) -> list[Graph]:
    return [graph] + [n.graph for n in graph.nested_graphs()]


def _nodes(graph: Graph) -> int:
    """ONNX nodes: every op but initializers, in the graph and the graphs nested in it."""
    return sum(1 for g in _graphs(graph) for op in g if op.type not in ("Initializer", "SparseInitializer"))


_CONSTANT_KEYS = (("value", None), ("value_float", np.float32), ("value_floats", np.float32),
                  ("value_int", np.int64), ("value_ints", np.int64))


def _op_value(op: Op | None) -> np.ndarray | None:
    """The array a constant op holds (an ``Initializer`` that is not a graph input, or a ``Constant``)."""
    if op is None:
        return None
    if op.type == "Initializer":
        if op.attrs.get("graph_input"):
            return None
        v = op.attrs.get("value")
        return v if isinstance(v, np.ndarray) else None
    if op.type == "Constant":
        for key, dtype in _CONSTANT_KEYS:
            if key in op.attrs:
                v = op.attrs[key]
                if isinstance(v, np.ndarray):
                    return v
                if dtype is not None and isinstance(v, (int, float, list)):
                    return np.asarray(v, dtype=dtype)
                return None
    return None


def _tensor_type(dtype: Any) -> tuple[str, tuple[Any, ...] | None] | None:
    """``("float32", (2, 16))`` for an ONNX tensor type (``tensor(float)[2,16]``), else None."""
    if dtype is None:
        return None
    from amanda_onnx.typesystem import OnnxTypeSystem

    return OnnxTypeSystem().tensor_type(dtype)


def _producer(port: Any) -> Op | None:
    src = port.source
    return None if src is None else src.op


def _const(port: Any) -> np.ndarray | None:
    """The array a constant op feeds into input ``port``, else None (unfed ports too)."""
    src = port.source
    if src is None or src.op is None:
        return None
    return _op_value(src.op)


def _pinned(op: Op | None) -> bool:
    """An op with control edges: one whose value a nested graph reads by its ONNX name (an ``OuterValue``: the
    op holding that graph has a control edge from it), or one ordered on purpose.  Such an op keeps its name,
    its type and its place."""
    return op is not None and bool(op.control_outputs or op.control_inputs)


def _fed(op: Op, name: str) -> Any:
    """Input port ``name`` of ``op`` if it exists and is fed, else None."""
    port = op.input_ports.get(name)
    return port if port is not None and port.source is not None else None


def _only_reader(port: Any) -> Op | None:
    """The one op reading output ``port`` (not a graph output), else None."""
    readers = list(port.consumers)
    if len(readers) != 1 or readers[0].op is None:
        return None
    return readers[0].op


class _Folder:
    def __init__(self, graph: Graph, report: FoldReport, top: bool) -> None:
        self.g = graph
        self.report = report
        self.top = top

    # -- helpers
    def new_const(self, base: str, value: np.ndarray, dtype: Any = None) -> Any:
        """A new constant op holding ``value``: an ``Initializer`` in the main graph, a ``Constant`` node in a
        nested one (their initializers would be visible to the branches only)."""
        value = np.asarray(value)
        if not value.flags.c_contiguous:
            value = value.copy(order="C")
        if self.top:
            op = self.g.add_op("Initializer", self.g.unique_name(base), outputs=["output"], attrs={"value": value})
        else:
            op = self.g.add_op("Constant", self.g.unique_name(base), outputs=["output"], attrs={"value": value})
        out = op.output_ports[0]
        if dtype is not None:
            out.dtype = dtype
        return out

    def refeed(self, port: Any, value: np.ndarray, dtype: Any, new_name: str) -> str:
        """Feed ``port`` a new constant holding ``value`` instead of what fed it, and return its name: the name of
        the constant it replaces when that one goes (nothing else reads it), so a folded weight keeps its name;
        else ``<that name>_folded``; ``new_name`` when nothing fed the port."""
        old = _producer(port)
        if port.source is not None:
            self.g.disconnect(port)
        self.drop_if_unused(old)
        name = new_name if old is None else old.name if old.graph is not self.g else f"{old.name}_folded"
        out = self.new_const(name, value, dtype)
        self.g.connect(out, port)
        return out.op.name  # type: ignore[no-any-return]

    def drop_if_unused(self, op: Op | None) -> None:
        """Remove a constant op nothing reads any more (an initializer that is a graph input stays)."""
        if op is None or op.graph is not self.g or op.type not in ("Initializer", "Constant") or _pinned(op):
            return
        if op.attrs.get("graph_input") or any(p.consumers for p in op.output_ports):
            return
        self.g.remove_op(op)

    def swap_for_const(self, op: Op, value: np.ndarray) -> None:
        """``op`` (one output) becomes a constant op of the same name holding ``value``; the constants only it
        read go."""
        out = op.output_ports[0]
        readers, dtype, name = list(out.consumers), out.dtype, op.name
        feeders = [_producer(p) for p in op.input_ports]
        for r in readers:
            self.g.disconnect(r)
        self.g.remove_op(op)
        new = self.new_const(name, value, dtype)
        for r in readers:
            self.g.connect(new, r)
        for f in feeders:
            self.drop_if_unused(f)

    def replace(self, op: Op, out: Any) -> None:
        """Readers of ``op``'s output read ``out``; ``op`` goes, and the constants only it read.  When that
        output is a graph output, ``out`` takes its ONNX value name, so no ``Identity`` is needed to rename it."""
        old = op.output_ports[0]
        if out.op is not None and any(r.op is None for r in old.consumers):
            names = dict(out.op.meta.get("outputs") or {})
            recorded = (op.meta.get("outputs") or {}).get(old.name)
            if recorded:
                names[out.name] = recorded
            else:
                names.pop(out.name, None)
            meta = dict(out.op.meta)
            meta["outputs"] = names
            out.op.meta = meta
        self.g.replace_all_uses(op.output_ports[0], out)
        feeders = [_producer(p) for p in op.input_ports]
        self.g.remove_op(op)
        for f in feeders:
            self.drop_if_unused(f)

    # -- Conv + BatchNormalization
    def fold_batch_norm(self, bn: Op) -> bool:
        x = bn.input_ports[0]
        conv = _producer(x)
        if conv is None or conv.type != "Conv" or _only_reader(conv.output_ports[0]) is not bn or _pinned(bn):
            return False
        if int(bn.attrs.get("training_mode", 0)) != 0:
            return False
        if any(p.consumers for p in bn.output_ports[1:]):
            return False
        stats = [_const(p) for p in bn.input_ports[1:5]]
        if len(stats) != 4 or any(s is None for s in stats):
            return False
        w = _const(conv.input_ports["W"])
        if w is None or w.dtype.kind != "f" or w.ndim < 3:
            return False
        cout = w.shape[0]
        if any(s.dtype.kind != "f" or s.shape != (cout,) for s in stats):
            return False
        bport = _fed(conv, "B")
        b = np.zeros((cout,), w.dtype) if bport is None else _const(bport)
        if b is None or b.shape != (cout,):
            return False
        scale, beta, mean, var = (s.astype(np.float64) for s in stats)
        eps = float(bn.attrs.get("epsilon", 1e-5))
        k = scale / np.sqrt(var + eps)
        w2 = (w.astype(np.float64) * k.reshape((cout,) + (1,) * (w.ndim - 1))).astype(w.dtype)
        b2 = ((b.astype(np.float64) - mean) * k + beta).astype(w.dtype)
        wport = conv.input_ports["W"]
        wname = self.refeed(wport, w2, wport.source.dtype, conv.name + "_weight")
        if bport is None:
            bport = conv.input_ports.get("B") or conv.add_input_port("B")
        # a new bias is named after the weight (``features.0.weight`` -> ``features.0.bias``), as torch names a
        # convolution's: the folded module's state_dict reads like a convolution's
        stem, dot, leaf = wname.rpartition(".")
        self.refeed(bport, b2, None, f"{stem}.bias" if dot and leaf == "weight" else conv.name + "_bias")
        dtype = bn.output_ports[0].dtype
        inherit_origin(conv, conv, bn)  # (the convolution now computes the batch norm's value too)
        self.replace(bn, conv.output_ports[0])
        if dtype is not None:
            conv.output_ports[0].dtype = dtype
        self.report.count("BatchNormalization folded into Conv")
        return True

    # -- Pad + Conv
    def fold_pad(self, pad: Op) -> bool:
        if pad.attrs.get("mode", "constant") != "constant" or _fed(pad, "axes") is not None or _pinned(pad):
            return False
        pads_port = _fed(pad, "pads")
        pads = None if pads_port is None else _const(pads_port)
        if pads is None:
            return False
        cv = _fed(pad, "constant_value")
        if cv is not None:
            c = _const(cv)
            if c is None or c.size != 1 or float(c.reshape(-1)[0]) != 0.0 or np.signbit(c.reshape(-1)[0]):
                return False
        readers = list(pad.output_ports[0].consumers)
        if not readers or any(r.op is None or r.op.type != "Conv" or r.name != r.op.input_ports[0].name
                              for r in readers):
            return False
        rank = pads.size // 2
        p = [int(v) for v in pads.reshape(-1)]
        if rank < 3 or min(p) < 0 or p[0] or p[1] or p[rank] or p[rank + 1]:
            return False
        begins, ends = p[2:rank], p[rank + 2:]
        for r in readers:
            conv = r.op
            if conv.attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "", b"NOTSET"):
                return False
        for r in readers:
            conv = r.op
            old = list(conv.attrs.get("pads") or [0] * (2 * (rank - 2)))
            n = rank - 2
            conv.attrs["pads"] = [old[i] + begins[i] for i in range(n)] + [old[n + i] + ends[i] for i in range(n)]
            inherit_origin(conv, conv, pad)
            self.g.connect(pad.input_ports[0].source, r, replace=True)
        feeders = [_producer(q) for q in pad.input_ports]
        self.g.remove_op(pad)
        for f in feeders:
            self.drop_if_unused(f)
        self.report.count("Pad folded into Conv")
        return True

    # -- constant folding
    def fold_constant(self, op: Op) -> bool:
        fn = _FOLDERS.get(op.type)
        if fn is None or len(op.output_ports) != 1 or not op.output_ports[0].consumers or _pinned(op):
            return False
        if any(r.op is None for r in op.output_ports[0].consumers):
            return False  # a graph output keeps its producer
        if not any(p.source is not None for p in op.input_ports):
            return False
        vals: dict[str, np.ndarray | None] = {}
        for p in op.input_ports:
            if p.source is None:
                vals[p.name] = None
                continue
            v = _const(p)
            if v is None:
                return False
            vals[p.name] = v
        args = [vals[p.name] for p in op.input_ports]
        try:
            r = fn(op.attrs, args)
        except (ValueError, TypeError, IndexError, OverflowError, FloatingPointError):
            return False
        if r is None:
            return False
        r = np.asarray(r)
        size_in = sum(v.size for v in args if v is not None)
        if r.size > size_in + GROWTH_LIMIT:
            return False
        self.swap_for_const(op, r)
        self.report.count("constants folded")
        return True

    # -- ops that do nothing on their input
    def bypass_noop(self, op: Op) -> bool:
        """``Cast`` to the element type its input already has, ``Expand`` to a shape its input already has
        (read from the port types), ``Identity``: readers read the input."""
        out = op.output_ports[0]
        src = op.input_ports[0].source
        if src is None or not out.consumers or any(r.op is None for r in out.consumers) or _pinned(op):
            return False  # a graph output keeps its producer
        have = _tensor_type(src.dtype)
        if op.type == "Cast":
            if have is None or _ONNX_TO_NUMPY.get(int(op.attrs.get("to", -1))) != np.dtype(have[0]).type:
                return False
        elif op.type == "Expand":
            shape = _fed(op, "shape")
            want = None if shape is None else _const(shape)
            if have is None or want is None or have[1] is None or not all(isinstance(d, int) for d in have[1]):
                return False
            dims = list(have[1])
            new = _ints(want)
            if len(new) > len(dims) or any(d != 1 and d != h for d, h in zip(reversed(new), reversed(dims))):
                return False
        elif op.type != "Identity":
            return False
        dtype = out.dtype
        self.replace(op, src)
        if src.dtype is None:
            src.dtype = dtype
        self.report.count(f"no-op {op.type} removed")
        return True

    # -- Constant nodes
    def constant_to_initializer(self, op: Op) -> bool:
        if _pinned(op):
            return False
        if not op.output_ports[0].consumers:
            self.g.remove_op(op)
            self.report.count("unread Constant nodes removed")
            return True
        if not self.top:
            return False
        v = _op_value(op)
        if v is None:
            return False
        self.swap_for_const(op, v)
        self.report.count("Constant nodes to initializers")
        return True

    def drop_unread_initializers(self) -> None:
        """Parameters and buffers nothing reads (BatchNorm's ``num_batches_tracked``): onnxruntime warns about
        each and drops it."""
        for op in list(self.g):
            if op.type == "Initializer" and not op.attrs.get("graph_input") and not _pinned(op) and \
                    not any(p.consumers for p in op.output_ports):
                self.g.remove_op(op)
                self.report.count("unread initializers removed")

    def run(self) -> None:
        changed = True
        while changed:
            changed = False
            for op in list(self.g.topological_order()):
                if op.graph is not self.g:
                    continue
                t = op.type
                if t == "BatchNormalization":
                    done = self.fold_batch_norm(op)
                elif t == "Pad":
                    done = self.fold_pad(op) or self.fold_constant(op)
                elif t == "Constant":
                    done = self.constant_to_initializer(op)
                elif t in ("Cast", "Expand", "Identity"):
                    done = self.fold_constant(op) or self.bypass_noop(op)
                else:
                    done = self.fold_constant(op)
                changed = changed or done


# ---------------------------------------------------------------------------------------------- folders
# Each takes the op's attributes and its input values in port order (None for an unfed port) and returns the
# output array, or None when it does not fold (an attribute or type it does not compute exactly).

Folder = Callable[[dict[str, Any], list[Any]], Any]


def _same_kind(*vals: np.ndarray) -> bool:
    return len({v.dtype for v in vals}) == 1 and vals[0].dtype.kind in "biuf"


def _arith(fn: Callable[[Any, Any], Any]) -> Folder:
    def run(attrs: dict[str, Any], args: list[Any]) -> Any:
        a, b = args[0], args[1]
        if a is None or b is None or not _same_kind(a, b):
            return None
        if a.dtype.kind == "f" and a.dtype != np.float32 and a.dtype != np.float64:
            return None  # float16 / bfloat16: ONNX runtimes may compute in float32 and round once
        with np.errstate(all="raise"):
            return fn(a, b).astype(a.dtype)
    return run


def _div(attrs: dict[str, Any], args: list[Any]) -> Any:
    a, b = args
    if a is None or b is None or not _same_kind(a, b):
        return None
    if a.dtype.kind == "f":
        if a.dtype not in (np.float32, np.float64) or not np.all(b != 0):
            return None
        return (a / b).astype(a.dtype)
    if a.dtype.kind in "iu" and np.all(b > 0) and np.all(a >= 0):  # ONNX truncates, numpy floors: same here
        return (a // b).astype(a.dtype)
    return None


def _unary_float(fn: Callable[[Any], Any]) -> Folder:
    def run(attrs: dict[str, Any], args: list[Any]) -> Any:
        a = args[0]
        if a is None or a.dtype not in (np.float32, np.float64):
            return None
        with np.errstate(all="raise"):
            return fn(a).astype(a.dtype)
    return run


def _neg(attrs: dict[str, Any], args: list[Any]) -> Any:
    a = args[0]
    return None if a is None or a.dtype.kind not in "if" else np.negative(a)


def _compare(fn: Callable[[Any, Any], Any]) -> Folder:
    def run(attrs: dict[str, Any], args: list[Any]) -> Any:
        a, b = args[0], args[1]
        if a is None or b is None or a.dtype != b.dtype:
            return None
        return fn(a, b)
    return run


def _logic(fn: Callable[[Any, Any], Any]) -> Folder:
    def run(attrs: dict[str, Any], args: list[Any]) -> Any:
        a, b = args[0], args[1]
        if a is None or b is None or a.dtype != np.bool_ or b.dtype != np.bool_:
            return None
        return fn(a, b)
    return run


def _not(attrs: dict[str, Any], args: list[Any]) -> Any:
    a = args[0]
    return None if a is None or a.dtype != np.bool_ else np.logical_not(a)


def _where(attrs: dict[str, Any], args: list[Any]) -> Any:
    c, x, y = args
    if c is None or x is None or y is None or c.dtype != np.bool_ or x.dtype != y.dtype:
        return None
    return np.where(c, x, y)


def _ints(v: np.ndarray) -> list[int]:
    return [int(i) for i in v.reshape(-1)]


def _reshape(attrs: dict[str, Any], args: list[Any]) -> Any:
    data, shape = args
    if data is None or shape is None:
        return None
    dims = _ints(shape)
    if not attrs.get("allowzero"):
        dims = [data.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return data.reshape(dims)


def _axes(attrs: dict[str, Any], args: list[Any], rank: int) -> list[int] | None:
    axes = args[1] if len(args) > 1 and args[1] is not None else None
    if axes is None:
        return None
    return [a % rank for a in _ints(axes)]


def _unsqueeze(attrs: dict[str, Any], args: list[Any]) -> Any:
    data = args[0]
    if data is None or len(args) < 2 or args[1] is None:
        return None
    rank = data.ndim + args[1].size
    out = data
    for a in sorted(a % rank for a in _ints(args[1])):
        out = np.expand_dims(out, a)
    return out


def _squeeze(attrs: dict[str, Any], args: list[Any]) -> Any:
    data = args[0]
    if data is None:
        return None
    axes = _axes(attrs, args, max(data.ndim, 1))
    if axes is None:
        return np.squeeze(data)
    if any(data.shape[a] != 1 for a in axes):
        return None
    return np.squeeze(data, tuple(axes))


def _transpose(attrs: dict[str, Any], args: list[Any]) -> Any:
    perm = attrs.get("perm")
    return np.transpose(args[0], None if perm is None else [int(p) for p in perm])


def _expand(attrs: dict[str, Any], args: list[Any]) -> Any:
    data, shape = args
    dims = _ints(shape)
    rank = max(data.ndim, len(dims))
    have = (1,) * (rank - data.ndim) + data.shape
    want = [1] * (rank - len(dims)) + dims
    out = [h if w == 1 else w for h, w in zip(have, want)]
    return np.broadcast_to(data, out).copy()


def _concat(attrs: dict[str, Any], args: list[Any]) -> Any:
    vals = [a for a in args if a is not None]
    if not vals or len({v.dtype for v in vals}) != 1:
        return None
    return np.concatenate(vals, axis=int(attrs.get("axis", 0)))


def _slice(attrs: dict[str, Any], args: list[Any]) -> Any:
    data, starts, ends = args[0], args[1], args[2]
    axes = args[3] if len(args) > 3 and args[3] is not None else None
    steps = args[4] if len(args) > 4 and args[4] is not None else None
    if data is None or starts is None or ends is None:
        return None
    s, e = _ints(starts), _ints(ends)
    ax = list(range(len(s))) if axes is None else [a % data.ndim for a in _ints(axes)]
    st = [1] * len(s) if steps is None else _ints(steps)
    index: list[slice] = [slice(None)] * data.ndim
    for a, b, c, d in zip(ax, s, e, st):
        if d == 0:
            return None
        n = data.shape[a]
        # ONNX clamps starts and ends as Python's slice() does, with INT_MAX/INT_MIN meaning "to the end"
        index[a] = slice(max(min(b, n), -n - 1) if d < 0 else b, max(min(c, n), -n - 1), d)
    return data[tuple(index)]


def _gather(attrs: dict[str, Any], args: list[Any]) -> Any:
    data, idx = args
    if data is None or idx is None or idx.dtype.kind not in "iu":
        return None
    axis = int(attrs.get("axis", 0)) % data.ndim
    n = data.shape[axis]
    if np.any(idx >= n) or np.any(idx < -n):
        return None
    return np.take(data, np.where(idx < 0, idx + n, idx), axis=axis)


def _gather_elements(attrs: dict[str, Any], args: list[Any]) -> Any:
    data, idx = args
    if data is None or idx is None or idx.dtype.kind not in "iu" or idx.ndim != data.ndim:
        return None
    axis = int(attrs.get("axis", 0)) % data.ndim
    n = data.shape[axis]
    if np.any(idx >= n) or np.any(idx < -n):
        return None
    return np.take_along_axis(data, np.where(idx < 0, idx + n, idx), axis=axis)


def _cast_numpy(attrs: dict[str, Any], args: list[Any]) -> Any:
    a = args[0]
    to = _ONNX_TO_NUMPY.get(int(attrs.get("to", -1)))
    if a is None or to is None or a.dtype.kind not in "biuf" or a.dtype.itemsize > 8:
        return None
    if a.dtype.kind == "f" and a.dtype not in (np.float32, np.float64):
        return None
    if a.dtype.kind == "f" and np.dtype(to).kind in "iub":
        if not np.all(np.isfinite(a)):
            return None
        if np.dtype(to).kind in "iu":
            info = np.iinfo(to)
            if np.any(a < info.min) or np.any(a > info.max):
                return None
    return a.astype(to)


_ONNX_TO_NUMPY = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
                  9: np.bool_, 11: np.float64, 12: np.uint32, 13: np.uint64}


def _range(attrs: dict[str, Any], args: list[Any]) -> Any:
    start, limit, delta = args
    if start is None or limit is None or delta is None or not _same_kind(start, limit, delta):
        return None
    if start.dtype.kind not in "iu":
        return None  # float ranges: ONNX adds delta step by step, numpy multiplies
    s, lim, d = int(start), int(limit), int(delta)
    if d == 0:
        return None
    n = max(-((s - lim) // d), 0)  # ceil((limit - start) / delta) in integers
    return (s + d * np.arange(n, dtype=np.int64)).astype(start.dtype)


def _constant_of_shape(attrs: dict[str, Any], args: list[Any]) -> Any:
    shape = args[0]
    if shape is None:
        return None
    value = attrs.get("value")
    v = np.zeros((1,), np.float32) if value is None else np.asarray(value)
    if v.size != 1:
        return None
    return np.full(_ints(shape), v.reshape(-1)[0], dtype=v.dtype)


def _shape(attrs: dict[str, Any], args: list[Any]) -> Any:
    data = args[0]
    dims = list(data.shape)
    start = int(attrs.get("start", 0))
    end = attrs.get("end")
    return np.asarray(dims[start:None if end is None else int(end)], dtype=np.int64)


def _identity(attrs: dict[str, Any], args: list[Any]) -> Any:
    return args[0]


_FOLDERS: dict[str, Folder] = {
    "Add": _arith(np.add), "Sub": _arith(np.subtract), "Mul": _arith(np.multiply), "Div": _div,
    "Neg": _neg, "Sqrt": _unary_float(np.sqrt), "Reciprocal": _unary_float(np.reciprocal),
    "Equal": _compare(np.equal), "Less": _compare(np.less), "Greater": _compare(np.greater),
    "LessOrEqual": _compare(np.less_equal), "GreaterOrEqual": _compare(np.greater_equal),
    "And": _logic(np.logical_and), "Or": _logic(np.logical_or), "Xor": _logic(np.logical_xor), "Not": _not,
    "Where": _where, "Reshape": _reshape, "Unsqueeze": _unsqueeze, "Squeeze": _squeeze, "Transpose": _transpose,
    "Expand": _expand, "Concat": _concat, "Slice": _slice, "Gather": _gather, "GatherElements": _gather_elements,
    "Cast": _cast_numpy,
    "Range": _range, "ConstantOfShape": _constant_of_shape, "Shape": _shape, "Identity": _identity,
}


def fold(graph: Graph) -> FoldReport:
    """Fold batch normalization and zero padding into convolutions, fold constant subgraphs and turn ``Constant``
    nodes into initializers, in place, in ``graph`` (``amanda/onnx``) and every graph nested in it."""
    report = FoldReport("torch-onnx-fold", nodes_before=_nodes(graph))
    for g in _graphs(graph):
        folder = _Folder(g, report, top=g is graph)
        folder.run()
        if g is graph:
            folder.drop_unread_initializers()
    report.nodes_after = _nodes(graph)
    return report


# ---------------------------------------------------------------------------------------------- GELU
_GELU_RULES = {("torch-to-onnx", "gelu_erf"): "none", ("torch-to-onnx", "gelu_tanh"): "tanh"}


def _scalar(port: Any) -> float | None:
    v = _const(port)
    return None if v is None or v.size != 1 or v.dtype.kind != "f" else float(v.reshape(-1)[0])


def _gelu_input(half: Op) -> tuple[Any, str] | None:
    """``x``'s source and the approximation when ``half`` ends a GELU as the ``gelu_*`` rules write it, else
    None.  The structure and every constant are checked, not only the provenance."""
    approximate = _GELU_RULES.get(half.provenance) if half.provenance is not None else None
    if approximate is None or half.type != "Mul" or _scalar(half.input_ports[1]) != 0.5:
        return None
    mul = _producer(half.input_ports[0])
    if mul is None or mul.type != "Mul" or _only_reader(mul.output_ports[0]) is not half:
        return None
    x = mul.input_ports[0].source
    one = _producer(mul.input_ports[1])
    if x is None or one is None or one.type != "Add" or _scalar(one.input_ports[1]) != 1.0:
        return None
    if _only_reader(one.output_ports[0]) is not mul:
        return None
    inner = _producer(one.input_ports[0])
    if inner is None or _only_reader(inner.output_ports[0]) is not one:
        return None
    if approximate == "none":
        if inner.type != "Erf":
            return None
        div = _producer(inner.input_ports[0])
        if (div is None or div.type != "Div" or div.input_ports[0].source is not x
                or _only_reader(div.output_ports[0]) is not inner):
            return None
        c = _scalar(div.input_ports[1])
        if c is None or abs(c - math.sqrt(2.0)) > 1e-6:
            return None
        return x, approximate
    # tanh(0.7978845608 * (x + 0.044715 * x ** 3))
    if inner.type != "Tanh":
        return None
    scale = _producer(inner.input_ports[0])
    if scale is None or scale.type != "Mul" or _only_reader(scale.output_ports[0]) is not inner:
        return None
    c = _scalar(scale.input_ports[1])
    if c is None or abs(c - math.sqrt(2.0 / math.pi)) > 1e-6:
        return None
    add = _producer(scale.input_ports[0])
    if add is None or add.type != "Add" or add.input_ports[0].source is not x:
        return None
    k = _producer(add.input_ports[1])
    c = None if k is None or k.type != "Mul" else _scalar(k.input_ports[1])
    if k is None or c is None or abs(c - 0.044715) > 1e-7:
        return None
    cube = _producer(k.input_ports[0])
    if cube is None or cube.type != "Pow" or cube.input_ports[0].source is not x or _scalar(cube.input_ports[1]) != 3.0:
        return None
    if any(_only_reader(o.output_ports[0]) is not r for o, r in ((add, scale), (k, add), (cube, k))):
        return None
    return x, approximate


def _gelu_region(half: Op, x: Any) -> list[Op]:
    """The ops between ``x`` and ``half`` (their constants left out)."""
    region: list[Op] = []
    todo = [half]
    while todo:
        op = todo.pop()
        if op in region:
            continue
        region.append(op)
        for p in op.input_ports:
            prod = _producer(p)
            if prod is not None and prod.type not in ("Initializer", "Constant") and p.source is not x:
                todo.append(prod)
    return region


def fuse_gelu(graph: Graph) -> FoldReport:
    """Replace the GELU subgraphs the ``gelu_erf``/``gelu_tanh`` rules wrote by ``Gelu`` ops, in place, in
    ``graph`` (``amanda/onnx`` at opset 20 or later) and every graph nested in it."""
    report = FoldReport("torch-onnx-gelu", nodes_before=_nodes(graph))
    for g in _graphs(graph):
        for half in list(g.topological_order()):
            if half.graph is not g or half.type != "Mul":
                continue
            found = _gelu_input(half)
            if found is None:
                continue
            x, approximate = found
            if any(_pinned(op) for op in _gelu_region(half, x)):
                continue
            region = _gelu_region(half, x)
            name = half.name
            out_dtype = half.output_ports[0].dtype
            readers = list(half.output_ports[0].consumers)
            feeders = [_producer(p) for op in region for p in op.input_ports]
            for r in readers:
                g.disconnect(r)
            for op in region:
                for p in op.input_ports:
                    if p.source is not None:
                        g.disconnect(p)
            for op in region:
                g.remove_op(op)
            attrs = {"approximate": "tanh"} if approximate == "tanh" else {}
            gelu = g.add_op("Gelu", name, inputs=["X"], outputs=[("Y", out_dtype)], attrs=attrs, sources=[x],
                            namespace=half.namespace)
            gelu.provenance = half.provenance
            for r in readers:
                g.connect(gelu.output_ports[0], r)
            for f in feeders:
                if f is not None and f.graph is g and f.type in ("Constant", "Initializer") and \
                        not f.attrs.get("graph_input") and not any(p.consumers for p in f.output_ports):
                    g.remove_op(f)
            report.count("GELU subgraphs to Gelu")
    report.nodes_after = _nodes(graph)
    return report
