"""Constant folding on a TensorFlow graph, before ``tf-to-onnx``: the values a frozen Keras model computes from its
weights alone become ``Const`` ops.

Keras 3 writes a frozen batch normalisation as a dozen ops on constants (each statistic reshaped to
``[1, 1, 1, C]``, ``Rsqrt(variance + epsilon) * gamma``, ``beta - mean * scale``) and a convolution's bias as a
``Squeeze`` of a reshaped constant: on ResNet50 two thirds of the graph's 1,508 ops compute nothing from the
input.  Converting each of them by a rule and folding them again in ONNX costs more than the rest of the
conversion, so :func:`fold_constants` computes them here once, with numpy, in the element type TensorFlow uses:

* shape ops of any element type: ``Reshape``, ``Squeeze``, ``ExpandDims``, ``Transpose``, ``ConcatV2``,
  ``Pack``, ``GatherV2`` (no batch dimensions), and integer ``Range`` (Keras computes the permutations of its
  ``Softmax`` on another axis and of ``Dense`` on a 3-D input so, which an ONNX ``Transpose`` needs as constants);
* arithmetic on floats (and ``Add``/``Sub``/``Mul`` on integers, which wrap alike): ``AddV2``, ``Add``, ``Sub``,
  ``Mul``, ``RealDiv``, ``Maximum``, ``Minimum``, ``Neg``, ``Sqrt``, ``Rsqrt``, ``Reciprocal``/``Inv``,
  ``Square``.

An op is folded only when every data input is a ``Const``, it has one output, no control edges come in or go
out, and the result has the output's element type and (where the graph records it) shape; anything else is left
to the table.  Only the top-level graph is folded (function bodies go to the tables as they are).
"""

from __future__ import annotations

__all__ = ["fold_constants"]

from typing import Any, Callable

import numpy as np

from amanda_core import Graph, Op
from amanda_core.ir.tensor import Tensor

_FLOAT_ONLY: dict[str, Callable[..., Any]] = {
    "RealDiv": np.divide, "Maximum": np.maximum, "Minimum": np.minimum, "Sqrt": np.sqrt,
    "Rsqrt": lambda x: np.reciprocal(np.sqrt(x)), "Reciprocal": np.reciprocal, "Inv": np.reciprocal,
    "Neg": np.negative, "Square": np.square,
}
_ANY_NUMBER: dict[str, Callable[..., Any]] = {"AddV2": np.add, "Add": np.add, "Sub": np.subtract, "Mul": np.multiply}
_SHAPE = {"Reshape", "Squeeze", "ExpandDims", "Transpose", "ConcatV2", "Pack", "GatherV2", "Range"}


def _const_value(op: Op | None) -> np.ndarray | None:
    if op is None or op.type != "Const" or op.has_control_inputs():
        return None
    v = op.attrs.get("value")
    if isinstance(v, Tensor):  # a weight still in its file: read (a view of the map) only when folded
        v = v.numpy()
    return v if isinstance(v, np.ndarray) and v.dtype.kind in "biuf" else None


def _compute(op: Op, vals: list[np.ndarray]) -> np.ndarray | None:
    t = op.type
    x = vals[0]
    if t in _ANY_NUMBER or t in _FLOAT_ONLY:
        if any(v.dtype != x.dtype for v in vals) or (t in _FLOAT_ONLY and x.dtype.kind != "f"):
            return None
        if t in _ANY_NUMBER and x.dtype.kind not in "iuf":
            return None
        fn = _ANY_NUMBER.get(t) or _FLOAT_ONLY[t]
        with np.errstate(all="ignore"):
            return np.asarray(fn(*vals))
    if t == "Reshape" and len(vals) == 2 and vals[1].dtype.kind in "iu":
        return x.reshape([int(s) for s in vals[1].reshape(-1)])
    if t == "Squeeze" and len(vals) == 1:
        dims = [int(d) % max(x.ndim, 1) for d in op.attrs.get("squeeze_dims") or []]
        if any(x.shape[d] != 1 for d in dims):
            return None
        return np.squeeze(x, tuple(dims)) if dims else np.squeeze(x)
    if t == "ExpandDims" and len(vals) == 2 and vals[1].size == 1 and vals[1].dtype.kind in "iu":
        d = int(vals[1].reshape(-1)[0])
        if not -x.ndim - 1 <= d <= x.ndim:
            return None
        return np.expand_dims(x, d if d >= 0 else d + x.ndim + 1)
    if t == "Transpose" and len(vals) == 2 and vals[1].dtype.kind in "iu":
        perm = [int(p) for p in vals[1].reshape(-1)]
        if sorted(perm) != list(range(x.ndim)):
            return None
        return np.asarray(np.transpose(x, perm), order="C")
    if t == "ConcatV2" and len(vals) >= 2 and vals[-1].size == 1 and vals[-1].dtype.kind in "iu":
        parts = vals[:-1]
        if any(v.dtype != x.dtype or v.ndim != x.ndim for v in parts) or x.ndim == 0:
            return None
        return np.concatenate(parts, axis=int(vals[-1].reshape(-1)[0]))
    if t == "Pack" and vals:
        if any(v.dtype != x.dtype or v.shape != x.shape for v in vals):
            return None
        return np.stack(vals, axis=int(op.attrs.get("axis", 0)))
    if (t == "GatherV2" and len(vals) == 3 and not op.attrs.get("batch_dims") and vals[1].dtype.kind in "iu"
            and vals[2].size == 1):
        axis = int(vals[2].reshape(-1)[0])
        if not -x.ndim <= axis < x.ndim or ((vals[1] < 0) | (vals[1] >= x.shape[axis])).any():
            return None  # (TF's CPU kernel fails on indices out of range)
        return np.take(x, vals[1], axis=axis)
    if t == "Range" and len(vals) == 3 and all(v.size == 1 and v.dtype.kind in "iu" for v in vals):
        start, limit, delta = (int(v.reshape(-1)[0]) for v in vals)
        if delta == 0:
            return None
        return np.arange(start, limit, delta, dtype=x.dtype)
    return None


_NUMPY: dict[str, Any] = {}


def _numpy(name: str) -> Any:
    """The numpy dtype of TF dtype ``name`` (None when there is none), cached."""
    if name not in _NUMPY:
        from .dtypes import numpy_dtype

        try:
            _NUMPY[name] = numpy_dtype(name)
        except Exception:  # a name the dtype table does not know: never folded
            _NUMPY[name] = None
    return _NUMPY[name]


def _fits(op: Op, value: np.ndarray, text: str, types: Any) -> bool:
    """Whether ``value`` (whose port type is ``text``) has the element type and the recorded shape of ``op``'s
    output."""
    elem = op.attrs.get("T")
    if isinstance(elem, str) and value.dtype != _numpy(elem):
        return False
    dtype = op.output_ports[0].dtype
    if dtype is None or dtype == text:
        return True
    tt = types.tensor_type(dtype)
    if tt is None or tt[1] is None:
        return tt is None or tt[0] == value.dtype.name
    if tt[0] != value.dtype.name or len(tt[1]) != value.ndim:
        return False
    return all(not isinstance(d, int) or d < 0 or d == s for d, s in zip(tt[1], value.shape))


def fold_constants(graph: Graph) -> int:
    """Fold the ops of ``graph`` (an ``amanda/tensorflow`` graph, top level) that compute from constants alone
    into ``Const`` ops, in place; returns how many were folded."""
    from .dtypes import dtype_from_numpy
    from .types import TFTypeSystem

    types = TFTypeSystem()
    folded = 0
    for op in list(graph.topological_order()):
        if op.graph is not graph or (op.type not in _SHAPE and op.type not in _ANY_NUMBER
                                     and op.type not in _FLOAT_ONLY):
            continue
        if len(op.output_ports) != 1 or op.has_control_inputs() or op.control_outputs:
            continue
        ins = [p for p in op.input_ports if p.source is not None]
        if len(ins) != len(op.input_ports) or not ins:
            continue
        producers = [p.source.op for p in ins]
        vals = [_const_value(o) for o in producers]
        if any(v is None for v in vals):
            continue
        try:
            value = _compute(op, vals)  # type: ignore[arg-type]
        except (ValueError, TypeError):
            value = None
        if value is None:
            continue
        elem = dtype_from_numpy(value.dtype)
        text = f"{elem}[{','.join(str(d) for d in value.shape)}]"
        if not _fits(op, value, text, types):
            continue
        value = np.asarray(value, order="C")  # (np.ascontiguousarray makes a 0-d array 1-d)
        value.setflags(write=False)
        name, namespace = op.name, op.namespace
        readers = list(op.output_ports[0].consumers)
        for r in readers:
            graph.disconnect(r)
        graph.remove_op(op)  # the Const takes its name (renaming an op afterwards costs a pass over the graph)
        const = graph.add_op("Const", name, outputs=["output"], namespace=namespace,
                             attrs={"dtype": elem, "value": value})
        const.output_ports[0].dtype = text
        for r in readers:
            graph.connect(const.output_ports[0], r)
        folded += 1
        for p in dict.fromkeys(producers):
            if p is not None and p.graph is graph and not p.has_consumers() and not p.control_outputs:
                graph.remove_op(p)
    return folded
