"""The layout pass of ONNX -> TF: remove the transposes the conversion put around channels-last ops.

``onnx-to-tf`` writes each channels-first ONNX op that TensorFlow runs channels-last only (convolutions, pooling)
as ``Transpose(NCHW -> NHWC) -> ... NHWC op ... -> Transpose(NHWC -> NCHW)`` and leaves every other op in the
layout of its data, so a CNN holds a pair of transposes between every two convolutions.  :func:`optimize` then, on
the ``amanda/tensorflow`` graph (top level; function bodies are left as they are), until nothing changes:

* **folds constants** (:func:`amanda_tf.fold.fold_constants`: the reshaped batch-norm statistics, ``Sqrt`` of the
  variance, a ``Transpose`` of a ``Const``);
* **cancels and composes**: ``Transpose(p)`` feeding ``Transpose(q)`` becomes one ``Transpose`` (none when the
  composed permutation is the identity); transposes of one value by one permutation become one;
* **pushes transposes down** through the ops that commute with a permutation, when every reader of the transpose
  can take it: elementwise ops of one input (``Relu``, ``Relu6``, ``Sigmoid``, ``Cast`` ...), ``ClipByValue`` with
  scalar bounds, elementwise ops of several inputs whose other inputs are the same permutation or constants (a
  broadcast constant is expanded to the rank and transposed), ``BiasAdd`` and ``FusedBatchNormV3`` (the channel
  axis named again by ``data_format``), ``Pad``/``PadV2``/``MirrorPad`` (paddings permuted), reductions with
  constant axes (remapped; without ``keep_dims`` the kept axes' permutation is left, often none), ``ConcatV2``
  (axis remapped), ``Softmax``/``LogSoftmax`` when the last axis stays last, ``Squeeze`` with its axes listed, and
  a ``Reshape`` to a constant shape when the transpose moves only axes of size 1 (it is then a reshape itself:
  dropped; a global pool with ``keepdims`` before ``Flatten``).

Every rewrite computes the same numbers in the same order of arithmetic: nothing is approximated.  The graph's
inputs and outputs keep ONNX's layout: the transposes left are those reading a graph input (one per input and
permutation) or feeding a graph output or an op none of the rules commute with (a ``Reshape`` that mixes
channels with spatial positions, for one).  :func:`count_transposes` counts them.  With
``channels_last_inputs``, a graph input read only by transposes of one permutation takes that layout itself (its
type is permuted, the transposes go; the graph's ``amanda.input_layout.<input>`` attribute records the
permutation, so a caller permutes its data first); with ``channels_last_outputs`` each output fed by a
transpose gives the value before it (``amanda.output_layout.<output>``).
"""

from __future__ import annotations

__all__ = ["optimize", "count_transposes", "NhwcReport", "run_pass"]

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from amanda_core import AmandaError, Graph, Op
from amanda_core.ir.layout import record_input_layout, record_output_layout

_UNARY = {"Relu", "Relu6", "Elu", "Selu", "Sigmoid", "Tanh", "Exp", "Expm1", "Log", "Log1p", "Neg", "Abs", "Sqrt",
          "Rsqrt", "Square", "Floor", "Ceil", "Rint", "Round", "Erf", "Erfc", "Softplus", "Softsign", "Sin", "Cos",
          "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Reciprocal", "Inv", "Sign",
          "LogicalNot", "IsNan", "IsInf", "IsFinite", "Identity", "Cast", "LeakyRelu", "ZerosLike", "OnesLike",
          "Invert", "StopGradient"}
_BINARY = {"AddV2", "Add", "Sub", "Mul", "RealDiv", "Div", "DivNoNan", "Maximum", "Minimum", "Pow",
           "SquaredDifference", "FloorDiv", "FloorMod", "TruncateDiv", "TruncateMod", "Greater", "GreaterEqual",
           "Less", "LessEqual", "Equal", "NotEqual", "LogicalAnd", "LogicalOr", "SelectV2", "BitwiseAnd",
           "BitwiseOr", "BitwiseXor", "Atan2"}
_REDUCE = {"Mean", "Sum", "Max", "Min", "Prod", "All", "Any"}
_PAD = {"Pad", "PadV2", "MirrorPad"}
_FORMATS = {"NCHW", "NHWC", "NCDHW", "NDHWC"}
_BATCH_NORM = {"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"}
_KEEPS_PERM = _UNARY | _BINARY | _PAD | _BATCH_NORM | {"ClipByValue", "BiasAdd", "ConcatV2", "GatherV2", "Softmax",
                                                       "LogSoftmax"}
"""Ops whose output, once a transpose is pushed through them, is transposed by the same permutation."""


@dataclass
class NhwcReport:
    """What :func:`optimize` did: transposes before and after, and the counts of each rewrite."""

    transposes_before: int = 0
    transposes_after: int = 0
    rewrites: dict[str, int] = field(default_factory=dict)

    def count(self, what: str, n: int = 1) -> None:
        if n:
            self.rewrites[what] = self.rewrites.get(what, 0) + n

    def summary(self) -> str:
        done = ", ".join(f"{k} {v}" for k, v in sorted(self.rewrites.items()))
        return f"layout: transposes {self.transposes_before} -> {self.transposes_after} ({done or 'no rewrites'})"


def count_transposes(graph: Graph) -> int:
    """The ``Transpose`` ops of ``graph`` (top level)."""
    return sum(1 for op in graph if op.type == "Transpose")


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class _Pass:
    def __init__(self, graph: Graph, report: NhwcReport) -> None:
        from .types import TFTypeSystem

        self.g = graph
        self.report = report
        self.types = TFTypeSystem()
        self.free_outputs = False
        """Whether transposes at graph outputs cost nothing (they go afterwards: channels-last outputs)."""

    # -- reading the graph
    @staticmethod
    def const(port: Any) -> np.ndarray | None:
        """The array a ``Const`` feeds into input ``port``, else None."""
        src = port.source
        op = None if src is None else src.op
        if op is None or op.type != "Const" or op.has_control_inputs():
            return None
        v = op.attrs.get("value")
        return v if isinstance(v, np.ndarray) else None

    def perm(self, op: Op | None) -> list[int] | None:
        """The permutation of a plain ``Transpose`` (constant ``perm``, no control edges), else None."""
        if op is None or op.type != "Transpose" or op.graph is not self.g:
            return None
        if op.has_control_inputs() or op.control_outputs or op.input_ports[0].source is None:
            return None
        v = self.const(op.input_ports["perm"])
        if v is None or v.ndim != 1 or v.dtype.kind not in "iu":
            return None
        p = [int(a) for a in v]
        return p if sorted(p) == list(range(len(p))) else None

    def is_transpose(self, port: Any, perm: list[int]) -> bool:
        src = port.source
        return src is not None and self.perm(src.op) == perm

    def shape(self, port: Any) -> tuple[Any, ...] | None:
        tt = self.types.tensor_type(port.dtype) if port.dtype is not None else None
        return None if tt is None else tt[1]

    def permuted_type(self, dtype: Any, perm: list[int]) -> Any:
        """The type text of ``transpose(v, perm)`` for a value of type ``dtype`` (None when unknown)."""
        tt = self.types.tensor_type(dtype) if dtype is not None else None
        if tt is None or tt[1] is None or len(tt[1]) != len(perm):
            return None
        return self.types.make_tensor_type(tt[0], tuple(tt[1][i] for i in perm))

    # -- writing the graph
    def new_const(self, base: str, value: np.ndarray, namespace: Any) -> Any:
        from .dtypes import dtype_from_numpy

        value = np.asarray(value, order="C")  # (np.ascontiguousarray makes a 0-d array 1-d)
        elem = dtype_from_numpy(value.dtype)
        op = self.g.add_op("Const", self.g.unique_name(base), outputs=["output"], namespace=namespace,
                           attrs={"dtype": elem, "value": value})
        op.output_ports[0].dtype = f"{elem}[{','.join(str(d) for d in value.shape)}]"
        return op.output_ports[0]

    def new_transpose(self, src: Any, perm: list[int], base: str, like: Op) -> Any:
        name = self.g.unique_name(base)
        p = self.new_const(name + "/perm", np.asarray(perm, np.int32), like.namespace)
        attrs = {"Tperm": "int32"}
        if "T" in like.attrs:
            attrs["T"] = like.attrs["T"]
        op = self.g.add_op("Transpose", name, inputs=["x", "perm"], outputs=["y"], attrs=attrs,
                           namespace=like.namespace, sources=[src, p])
        return op.output_ports[0]

    def set_perm(self, t: Op, perm: list[int]) -> None:
        port = t.input_ports["perm"]
        old = port.source.op
        self.g.connect(self.new_const(t.name + "/perm", np.asarray(perm, np.int32), t.namespace), port,
                       replace=True)
        if "Tperm" in t.attrs:
            t.attrs["Tperm"] = "int32"
        self.drop_if_unused(old)

    def drop_if_unused(self, op: Op | None) -> None:
        if op is None or op.graph is not self.g or op.control_outputs or op.has_control_inputs():
            return
        if any(p.consumers for p in op.output_ports) or op.type not in ("Const", "Transpose"):
            return
        feeders = [p.source.op for p in op.input_ports if p.source is not None]
        self.g.remove_op(op)
        for f in feeders:
            self.drop_if_unused(f)

    # -- transposes
    def compose(self, t: Op, q: list[int]) -> bool:
        prev = t.input_ports[0].source.op
        p = self.perm(prev)
        if p is None or len(p) != len(q):
            return False
        perm = [p[i] for i in q]
        src = prev.input_ports[0].source
        if perm == list(range(len(perm))):
            self.g.replace_all_uses(t.output_ports[0], src)
            old = t.input_ports["perm"].source.op
            self.g.remove_op(t)
            self.drop_if_unused(old)
            self.report.count("cancelled")
        else:
            self.g.connect(src, t.input_ports[0], replace=True)
            self.set_perm(t, perm)
            self.report.count("composed")
        self.drop_if_unused(prev)
        return True

    def merge_siblings(self, t: Op, perm: list[int]) -> bool:
        """Other transposes of the same value by the same permutation become ``t``."""
        src = t.input_ports[0].source
        twins = [c.op for c in src.consumers if c.op is not None and c.op is not t and self.perm(c.op) == perm
                 and c is c.op.input_ports[0]]
        for o in twins:
            self.g.replace_all_uses(o.output_ports[0], t.output_ports[0])
            old = o.input_ports["perm"].source.op
            self.g.remove_op(o)
            self.drop_if_unused(old)
            self.report.count("merged")
        return bool(twins)

    def identity(self, t: Op, perm: list[int]) -> bool:
        if perm != list(range(len(perm))):
            return False
        self.g.replace_all_uses(t.output_ports[0], t.input_ports[0].source)
        old = t.input_ports["perm"].source.op
        self.g.remove_op(t)
        self.drop_if_unused(old)
        self.report.count("cancelled")
        return True

    def push(self, t: Op, perm: list[int]) -> bool:
        out = t.output_ports[0]
        readers = list(out.consumers)
        if not readers or any(r.op is None for r in readers):  # feeds a graph output
            return False
        ops: list[Op] = []
        for r in readers:
            if r.op not in ops:
                ops.append(r.op)
        pushed = [o for o in ops if self.perm(o) is None]
        if not pushed:  # only transposes read it: they compose with it on their own visit
            return False
        pending = set(pushed)
        if not all(self.can_push(o, perm, pending) for o in pushed):
            return False
        # one transpose into several that could only stop at graph outputs: more transposes, none cancelled
        stuck = [o for o in pushed if (o.type in _KEEPS_PERM or o.type in _REDUCE and o.attrs.get("keep_dims"))
                 and any(c.op is None for q in o.output_ports for c in q.consumers)]
        if len(stuck) > 1 and not self.free_outputs:
            return False
        while pushed:  # an op reading another pushed op's output goes after it (it then reads a transpose)
            o = next(o for o in pushed if not any(p.source.op in pending and p.source.op is not o
                                                    for p in o.input_ports))
            self.push_through(o, perm)
            pushed.remove(o)
            pending.discard(o)
        if t.graph is self.g and not out.consumers:
            old = t.input_ports["perm"].source.op
            self.g.remove_op(t)
            self.drop_if_unused(old)
        return True

    def transposed(self, port: Any, perm: list[int], pending: set[Op]) -> bool:
        """Whether ``port`` reads a transpose by ``perm``, or will once the ``pending`` ops are pushed through."""
        if self.is_transpose(port, perm):
            return True
        src = port.source
        return src is not None and src.op in pending and src.op.type in _KEEPS_PERM

    def can_push(self, op: Op, perm: list[int], pending: set[Op]) -> bool:
        t = op.type
        rank = len(perm)
        if op.graph is not self.g or op.has_control_inputs() or op.control_outputs:
            return False
        data = [p for p in op.input_ports if p.source is not None]
        if len(data) != len(op.input_ports):
            return False
        first = op.input_ports[0]
        if t in _UNARY:
            return len(data) == 1 and len(op.output_ports) == 1 and self.is_transpose(first, perm)
        if t == "ClipByValue":
            return self.is_transpose(first, perm) and all(
                self.const(p) is not None and self.const(p).ndim == 0 for p in data[1:])
        if t in _BINARY:
            ok = False
            for p in data:
                if self.transposed(p, perm, pending):
                    ok = True
                    continue
                c = self.const(p)
                if c is None or c.ndim > rank:
                    return False
            return ok
        if t == "BiasAdd" or t in _BATCH_NORM:
            # per-channel arithmetic: the order of the other axes does not matter, only where the channels go
            fmt = _text(op.attrs.get("data_format", "NHWC"))
            if fmt not in _FORMATS or (len(fmt) != rank if t in _BATCH_NORM else fmt not in ("NHWC", "NCHW")) or (
                    op.attrs.get("is_training", False) or any(q.consumers for q in op.output_ports[1:])):
                return False
            axis = perm[1 if fmt.startswith("NC") else rank - 1]
            return (self.is_transpose(first, perm) and (axis == rank - 1 or (axis == 1 and rank == 4))
                    and not any(self.is_transpose(p, perm) for p in data[1:]))
        if t in _PAD:
            c = self.const(op.input_ports[1])
            return (self.is_transpose(first, perm) and c is not None and c.shape == (rank, 2)
                    and all(self.const(p) is not None for p in data[2:]))
        if t in _REDUCE:
            c = self.const(op.input_ports[1])
            return self.is_transpose(first, perm) and c is not None and c.dtype.kind in "iu"
        if t == "ConcatV2":
            axis = self.const(op.input_ports[-1])
            return (axis is not None and axis.size == 1 and len(data) >= 2 and all(
                self.transposed(p, perm, pending) or (self.const(p) is not None and self.const(p).ndim == rank)
                for p in data[:-1]) and any(self.is_transpose(p, perm) for p in data[:-1]))
        if t == "GatherV2":  # a gather of 1-D constant indices along a constant axis: the axis is remapped
            idx, axis = self.const(op.input_ports[1]), self.const(op.input_ports[2])
            return (self.is_transpose(first, perm) and idx is not None and idx.ndim == 1 and axis is not None
                    and axis.size == 1 and not op.attrs.get("batch_dims", 0)
                    and not self.is_transpose(op.input_ports[1], perm))
        if t in ("Softmax", "LogSoftmax"):
            return self.is_transpose(first, perm) and perm[-1] == rank - 1
        if t == "Squeeze":
            dims = op.attrs.get("squeeze_dims") or []
            return self.is_transpose(first, perm) and len(dims) > 0
        if t == "Reshape":
            c = self.const(op.input_ports[1])
            return (self.is_transpose(first, perm) and c is not None and c.dtype.kind in "iu"
                    and self.moves_ones_only(first.source.op, perm))
        return False

    def moves_ones_only(self, t: Op, perm: list[int]) -> bool:
        """Whether transpose ``t`` keeps the order of every axis whose size is not known to be 1 (it then moves
        axes of size 1 only: a reshape), from the shape of its output or of its input."""
        shape = self.shape(t.output_ports[0])
        if shape is None:
            src = self.shape(t.input_ports[0].source)
            shape = None if src is None or len(src) != len(perm) else tuple(src[i] for i in perm)
        if shape is None or len(shape) != len(perm):
            return False
        moved = [perm[i] for i, d in enumerate(shape) if d != 1]
        return moved == sorted(moved)

    def push_through(self, op: Op, perm: list[int]) -> None:
        rank = len(perm)
        inv = [perm.index(i) for i in range(rank)]
        t = op.type
        out_perm: list[int] | None = perm
        for p in list(op.input_ports):
            prod = p.source.op
            if self.perm(prod) == perm and (t != "BiasAdd" and t not in _BATCH_NORM or p is op.input_ports[0]):
                self.g.connect(prod.input_ports[0].source, p, replace=True)
                self.drop_if_unused(prod)
                continue
            c = self.const(p)
            if c is None:
                continue
            if t in _BINARY or (t == "ConcatV2" and p is not op.input_ports[-1]):
                if c.ndim == 0:
                    continue
                full = c.reshape((1,) * (rank - c.ndim) + c.shape)
                self.g.connect(self.new_const(prod.name + "/t", np.transpose(full, inv), prod.namespace), p,
                               replace=True)
                self.drop_if_unused(prod)
            elif t in _PAD and p is op.input_ports[1]:
                self.g.connect(self.new_const(op.name + "/paddings", c[inv], prod.namespace), p, replace=True)
                self.drop_if_unused(prod)
            elif t in _REDUCE and p is op.input_ports[1]:
                axes_y = sorted({int(a) % rank for a in c.reshape(-1)})
                axes_x = sorted(perm[a] for a in axes_y)
                self.g.connect(self.new_const(op.name + "/axes", np.asarray(axes_x, c.dtype), prod.namespace), p,
                               replace=True)
                self.drop_if_unused(prod)
                if not op.attrs.get("keep_dims", False):
                    kept_y = [i for i in range(rank) if i not in axes_y]
                    kept_x = [i for i in range(rank) if i not in axes_x]
                    out_perm = [kept_x.index(perm[i]) for i in kept_y]
            elif t == "GatherV2" and p is op.input_ports[2]:
                axis = perm[int(c.reshape(-1)[0]) % rank]
                self.g.connect(self.new_const(op.name + "/axis", np.full(c.shape, axis, c.dtype), prod.namespace),
                               p, replace=True)
                self.drop_if_unused(prod)
            elif t == "ConcatV2" and p is op.input_ports[-1]:
                axis = perm[int(c.reshape(-1)[0]) % rank]
                self.g.connect(self.new_const(op.name + "/axis", np.full(c.shape, axis, c.dtype), prod.namespace),
                               p, replace=True)
                self.drop_if_unused(prod)
        if t == "BiasAdd" or t in _BATCH_NORM:
            fmt = _text(op.attrs.get("data_format", "NHWC"))
            last = "NDHWC" if t in _BATCH_NORM and rank == 5 else "NHWC"
            op.attrs["data_format"] = last if perm[1 if fmt.startswith("NC") else rank - 1] == rank - 1 else "NCHW"
        if t == "Squeeze":
            axes_y = sorted({int(a) % rank for a in op.attrs.get("squeeze_dims")})
            axes_x = sorted(perm[a] for a in axes_y)
            op.attrs["squeeze_dims"] = axes_x
            kept_y = [i for i in range(rank) if i not in axes_y]
            kept_x = [i for i in range(rank) if i not in axes_x]
            out_perm = [kept_x.index(perm[i]) for i in kept_y]
        if t == "Reshape":  # the transpose moved axes of size 1 only: the same elements in the same order
            out_perm = None
        self.report.count("pushed down")
        outputs = op.output_ports[:1] if t in _BATCH_NORM else op.output_ports
        for q in outputs:
            readers = list(q.consumers)
            old_dtype = q.dtype
            if out_perm is None or out_perm == list(range(len(out_perm))):
                continue
            inv_out = [out_perm.index(i) for i in range(len(out_perm))]
            q.dtype = self.permuted_type(old_dtype, inv_out)
            if not readers:
                continue
            new = self.new_transpose(q, out_perm, op.name + "/to_nchw", op)
            stand_for(new.op, op)
            new.dtype = old_dtype
            for r in readers:
                self.g.connect(new, r, replace=True)

    # -- the graph's inputs
    def inputs_channels_last(self) -> None:
        """Each graph input read by transposes of one permutation (and maybe other ops) takes that layout: the
        transposes go, the other readers read it through the inverse transpose (which the pass then pushes)."""
        for port in self.g.input_ports:
            readers = [c.op for c in port.consumers if c.op is not None]
            perms = {tuple(self.perm(r)) for r in readers if self.perm(r) is not None
                     and r.input_ports[0].source is port}
            if len(perms) != 1:
                continue
            perm = list(perms.pop())
            new_type = self.permuted_type(port.dtype, perm) if port.dtype is not None else None
            if port.dtype is not None and new_type is None:
                continue
            others = [c for c in port.consumers if c.op is None or self.perm(c.op) != perm
                      or c is not c.op.input_ports[0]]
            transposes = [r for r in readers if self.perm(r) == perm and r.input_ports[0].source is port]
            if others:
                inv = [perm.index(i) for i in range(len(perm))]
                back = self.new_transpose(port, inv, port.name + "/to_nchw", transposes[0])
                back.dtype = port.dtype
                for c in others:
                    self.g.connect(back, c, replace=True)
            port.dtype = new_type
            for r in transposes:
                self.g.replace_all_uses(r.output_ports[0], port)
                old = r.input_ports["perm"].source.op
                self.g.remove_op(r)
                self.drop_if_unused(old)
            self.report.count("inputs made channels-last")
            record_input_layout(self.g, port.name, perm)

    def outputs_channels_last(self) -> None:
        """Each graph output fed by a transpose gives the transpose's input instead (the graph's
        ``amanda.output_layout.<output>`` attribute records the permutation that gives the old output)."""
        for port in self.g.output_ports:
            src = port.source
            perm = None if src is None else self.perm(src.op)
            if perm is None:
                continue
            t = src.op
            self.g.connect(t.input_ports[0].source, port, replace=True)
            inv = [perm.index(i) for i in range(len(perm))]
            port.dtype = self.permuted_type(port.dtype, inv) if port.dtype is not None else None
            if not t.output_ports[0].consumers:
                old = t.input_ports["perm"].source.op
                self.g.remove_op(t)
                self.drop_if_unused(old)
            self.report.count("outputs left channels-last")
            record_output_layout(self.g, port.name, perm)

    def run(self) -> None:
        from .fold import fold_constants

        changed = True
        while changed:
            folded = fold_constants(self.g)
            self.report.count("constants folded", folded)
            changed = bool(folded)
            for op in list(self.g.topological_order()):
                if op.graph is not self.g:
                    continue
                perm = self.perm(op)
                if perm is None:
                    continue
                done = (self.identity(op, perm) or self.compose(op, perm) or self.merge_siblings(op, perm)
                        or self.push(op, perm))
                changed = changed or done


def stand_for(new: Op, *ops: Op) -> None:
    """An op the pass makes from ``ops`` stands for what they stand for (when the conversion records it, for
    ``amanda check --per-op``: :func:`amanda_core.mapping.rewrite.inherit_origin`)."""
    from amanda_core.mapping.rewrite import inherit_origin

    inherit_origin(new, *ops)


def optimize(graph: Graph, *, channels_last_inputs: bool = False, channels_last_outputs: bool = False
             ) -> NhwcReport:
    """Remove the transposes of ``graph`` (an ``amanda/tensorflow`` graph, top level) that can go, in place;
    returns what was done.  See the module's documentation.

    ``channels_last_inputs`` makes each graph input read by transposes of one permutation take that layout
    (``graph.attrs["amanda.input_layout"]`` maps the input's name to the permutation a caller applies to its
    data first, ``"0,2,3,1"``); ``channels_last_outputs`` makes each graph output fed by a transpose give the
    transpose's input (``graph.attrs["amanda.output_layout"]`` maps the output's name to the permutation that
    gives the ONNX layout back, ``"0,3,1,2"``)."""
    report = NhwcReport(transposes_before=count_transposes(graph))
    p = _Pass(graph, report)
    p.free_outputs = channels_last_outputs
    if channels_last_inputs:
        p.inputs_channels_last()
    p.run()
    if channels_last_outputs:
        p.outputs_channels_last()
        left = None
        while left != count_transposes(graph):  # a transpose an output no longer reads may go down further now
            left = count_transposes(graph)
            p.run()
            p.outputs_channels_last()
    report.transposes_after = count_transposes(graph)
    return report


def run_pass(graph: Graph, input_layout: str | None = None, output_layout: str | None = None) -> str:
    """The ``tf-layout-nhwc`` graph pass (after ``onnx-to-tf``): :func:`optimize`, and its summary.
    ``input_layout`` / ``output_layout`` (``amanda convert --input-layout``): ``"channels-last"`` moves the
    interface to TensorFlow's layout (``channels_last_inputs``/``channels_last_outputs``); ``"channels-first"`` is
    ONNX's, which the pass keeps without it."""
    for what, value in (("input", input_layout), ("output", output_layout)):
        if value not in (None, "channels-first", "channels-last"):
            raise AmandaError(f"tf-layout-nhwc: {what} layout {value!r} is not channels-first or channels-last")
    return optimize(graph, channels_last_inputs=input_layout == "channels-last",
                    channels_last_outputs=output_layout == "channels-last").summary()
