"""The layout pass of TF -> ONNX: remove the transposes the conversion put around channels-last ops.

``tf-to-onnx`` converts each NHWC op (convolutions, pooling, fused batch norm) to its ONNX op between two explicit
``Transpose`` ops and leaves every other op in the layout of its data.  :func:`optimize` then, on an
``amanda/onnx`` graph and every graph nested in it, until nothing changes:

* **cancels and composes**: ``Transpose(p)`` feeding ``Transpose(q)`` becomes one ``Transpose`` (none when the
  composed permutation is the identity);
* **folds into constants**: a ``Transpose`` of a constant becomes a constant holding the transposed array;
* **pushes transposes down** through the ops that commute with a permutation, when every reader of the transpose
  can take it: elementwise ops of one input (``Relu``, ``Clip``, ``Sigmoid`` ...), elementwise ops of several
  inputs whose other inputs are the same permutation or constants (a broadcast constant is expanded to the rank
  and transposed), ``Pad`` with constant pads (permuted), reductions with constant axes (axes remapped;
  ``keepdims=0`` leaves the permutation of the kept axes, often none), ``Concat`` (axis remapped) and
  ``Softmax``/``LogSoftmax`` along a remapped axis;
* **folds constants**: elementwise arithmetic, ``Sqrt``, ``Reciprocal``, ``Transpose``, ``Reshape``, ``Squeeze``,
  ``Unsqueeze`` and ``Cast`` of constants become one ``Initializer``;
* **folds per-channel scales and shifts into convolutions**: ``Conv -> Mul(c) -> Add(b)`` with ``c``/``b``
  constant along the channel axis (what Keras 3's batch normalisation becomes once frozen) becomes one ``Conv``
  with scaled weights and a bias.

Transposes that feed a graph output or an op none of the rules commute with stay. :func:`count_transposes`
counts those left (nested graphs included).
"""

from __future__ import annotations

__all__ = ["optimize", "count_transposes", "LayoutReport", "to_onnx", "tf_to_onnx_tables", "run_pass"]

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from amanda_core import AmandaError, Graph, Op
from amanda_core.ir.layout import format_perm, record_input_layout, record_output_layout

from .layout_tf import stand_for

_UNARY = {"Relu", "Sigmoid", "Tanh", "Exp", "Log", "Neg", "Abs", "Sqrt", "Floor", "Ceil", "Erf", "Softplus",
          "Softsign", "Selu", "Sin", "Cos", "Reciprocal", "Sign", "Round", "Not", "IsNaN", "Elu", "LeakyRelu",
          "Identity", "Cast", "HardSigmoid", "HardSwish", "Gelu", "Mish"}
_CLIP = {"Clip"}
_BINARY = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "Greater", "Less", "Equal", "GreaterOrEqual",
           "LessOrEqual", "And", "Or", "Where", "PRelu", "Mod"}
_REDUCE = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"}
_FOLD = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": None, "Sqrt": np.sqrt,
         "Reciprocal": None, "Neg": np.negative}


@dataclass
class LayoutReport:
    """What :func:`optimize` did: transposes before and after, and the counts of each rewrite."""

    transposes_before: int = 0
    transposes_after: int = 0
    rewrites: dict[str, int] = field(default_factory=dict)
    control: str = ""
    """What the control-flow step before the pass did (``amanda_tf.control.tf_control_to_onnx``), when any."""

    def count(self, what: str) -> None:
        self.rewrites[what] = self.rewrites.get(what, 0) + 1

    def summary(self) -> str:
        done = ", ".join(f"{k} {v}" for k, v in sorted(self.rewrites.items()))
        text = f"layout: transposes {self.transposes_before} -> {self.transposes_after} ({done or 'no rewrites'})"
        return f"control flow: {self.control}; {text}" if self.control else text


def _graphs(graph: Graph) -> list[Graph]:
    out = [graph]
    for op in graph:
        for value in op.attrs.values():
            items = value if isinstance(value, list) else [value]
            for v in items:
                if isinstance(v, Graph):
                    out.extend(_graphs(v))
        if op.body is not None:
            out.extend(_graphs(op.body))
    return out


def count_transposes(graph: Graph) -> int:
    """The ``Transpose`` ops in ``graph`` and every graph nested in it."""
    return sum(1 for g in _graphs(graph) for op in g if op.type == "Transpose")


def _const(port: Any) -> np.ndarray | None:
    """The array a constant op feeds into ``port`` (an input port or an output port), else None."""
    src = port.source if hasattr(port, "source") else port
    if src is None or src.op is None:
        return None
    op = src.op
    if op.type == "Initializer" and not op.attrs.get("graph_input"):
        v = op.attrs.get("value")
    elif op.type == "Constant" and "value" in op.attrs:
        v = op.attrs["value"]
    else:
        return None
    return v if isinstance(v, np.ndarray) else None


def _producer(port: Any) -> Op | None:
    src = port.source
    return None if src is None else src.op


class _Pass:
    def __init__(self, graph: Graph, report: LayoutReport) -> None:
        self.g = graph
        self.report = report

    # -- helpers
    def new_const(self, base: str, value: np.ndarray) -> Any:
        op = self.g.add_op("Initializer", self.g.unique_name(base), outputs=["output"],
                           attrs={"value": np.asarray(value, order="C")})  # (ascontiguousarray makes 0-d 1-d)
        return op.output_ports[0]

    def new_transpose(self, src: Any, perm: list[int], base: str) -> Any:
        op = self.g.add_op("Transpose", self.g.unique_name(base), inputs=["data"], outputs=["transposed"],
                           attrs={"perm": [int(p) for p in perm]}, sources=[src])
        return op.output_ports[0]

    def drop_if_unused(self, op: Op | None) -> None:
        while op is not None and op.graph is self.g and not any(p.consumers for p in op.output_ports):
            if op.type in ("Initializer",) and op.attrs.get("graph_input"):
                return
            feeders = [_producer(p) for p in op.input_ports]
            self.g.remove_op(op)
            for f in feeders:
                if f is not None and f.type in ("Initializer", "Constant", "Transpose"):
                    self.drop_if_unused(f)
            return

    # -- transposes
    def compose(self, t: Op) -> bool:
        prev = _producer(t.input_ports[0])
        if prev is None or prev.type != "Transpose":
            return False
        p, q = list(prev.attrs["perm"]), list(t.attrs["perm"])
        perm = [p[i] for i in q]
        src = prev.input_ports[0].source
        if perm == list(range(len(perm))):
            self.g.replace_all_uses(t.output_ports[0], src)
            self.g.remove_op(t)
            self.report.count("cancelled")
        else:
            self.g.connect(src, t.input_ports[0], replace=True)
            t.attrs["perm"] = perm
            self.report.count("composed")
        self.drop_if_unused(prev)
        return True

    def merge_siblings(self, t: Op) -> bool:
        """Other ``Transpose`` ops of the same permutation reading what ``t`` reads become ``t``."""
        src = t.input_ports[0].source
        if src is None:
            return False
        perm = list(t.attrs["perm"])
        twins = [c.op for c in src.consumers
                 if c.op is not None and c.op is not t and c.op.type == "Transpose"
                 and c.op.graph is self.g and list(c.op.attrs["perm"]) == perm]
        for o in twins:
            self.g.replace_all_uses(o.output_ports[0], t.output_ports[0])
            self.g.remove_op(o)
            self.report.count("merged")
        return bool(twins)

    def merge_concat(self, op: Op) -> bool:
        """A ``Concat`` whose input is another ``Concat`` on the same axis read by nothing else takes that
        one's inputs in its place (Keras' nested ``concatenate`` layers: InceptionV3's mixed9 and mixed10)."""
        rank = _rank(op.output_ports[0].dtype)
        axis = int(op.attrs.get("axis", 0))

        def same_axis(inner: Op) -> bool:
            a = int(inner.attrs.get("axis", 0))
            if a == axis:
                return True
            return rank is not None and a % rank == axis % rank

        sources: list[Any] = []
        merged: list[Op] = []
        for p in op.input_ports:
            inner = _producer(p)
            if (inner is not None and inner.type == "Concat" and inner.graph is self.g and same_axis(inner)
                    and len(inner.output_ports[0].consumers) == 1 and not inner.has_control_inputs()
                    and not inner.control_outputs):
                sources.extend(q.source for q in inner.input_ports)
                merged.append(inner)
            else:
                sources.append(p.source)
        if not merged or any(s is None for s in sources) or op.has_control_inputs() or op.control_outputs:
            return False
        new = self.g.add_op("Concat", self.g.unique_name(op.name + "/merged"),
                            inputs=[f"inputs_{i}" for i in range(len(sources))], outputs=["concat_result"],
                            attrs=dict(op.attrs), namespace=op.namespace, sources=sources)
        new.output_ports[0].dtype = op.output_ports[0].dtype
        stand_for(new, op, *merged)
        self.g.replace_all_uses(op.output_ports[0], new.output_ports[0])
        name = op.name
        self.g.remove_op(op)
        for inner in merged:
            self.g.remove_op(inner)
            self.report.count("concats merged")
        self.g.rename_op(new, name)
        return True

    def fold_const(self, t: Op) -> bool:
        value = _const(t.input_ports[0])
        if value is None:
            return False
        out = self.new_const(t.name + "/folded", np.transpose(value, t.attrs["perm"]))
        self.g.replace_all_uses(t.output_ports[0], out)
        prev = _producer(t.input_ports[0])
        self.g.remove_op(t)
        self.drop_if_unused(prev)
        self.report.count("folded into constants")
        return True

    def push(self, t: Op) -> bool:
        out = t.output_ports[0]
        readers = list(out.consumers)
        if not readers or any(r.op is None for r in readers):  # feeds a graph output
            return False
        perm = list(t.attrs["perm"])
        ops: list[Op] = []
        for r in readers:
            if r.op not in ops:
                ops.append(r.op)
        if not all(o.type == "Transpose" or self.can_push(o, perm) for o in ops):
            return False
        pushed = [o for o in ops if o.type != "Transpose"]
        if not pushed:  # only transposes read it: they compose with it on their own visit
            return False
        for o in pushed:
            self.push_through(o, perm)
        # what is left reading t: transposes, which compose on their own visit
        if t.graph is self.g and not out.consumers:
            self.g.remove_op(t)
        return True

    def can_push(self, op: Op, perm: list[int]) -> bool:
        t = op.type
        rank = len(perm)
        data = [p for p in op.input_ports if p.source is not None]
        if t in _UNARY or t in _CLIP:
            first = op.input_ports[0]
            return _is_transpose(first, perm) and all(
                _const(p) is not None and _const(p).ndim == 0 for p in data[1:])
        if t in _BINARY:
            ok = False
            for p in data:
                if _is_transpose(p, perm):
                    ok = True
                    continue
                c = _const(p)
                if c is None or c.ndim > rank:
                    return False
            return ok
        if t == "Pad":
            return (_is_transpose(op.input_ports[0], perm) and _const(op.input_ports["pads"]) is not None
                    and ("axes" not in op.input_ports or op.input_ports["axes"].source is None))
        if t in _REDUCE:
            axes = op.input_ports["axes"] if "axes" in op.input_ports else None
            return (_is_transpose(op.input_ports[0], perm) and axes is not None and _const(axes) is not None)
        if t == "Concat":
            return all(_is_transpose(p, perm) or (_const(p) is not None and _const(p).ndim == rank) for p in data)
        if t in ("Softmax", "LogSoftmax"):
            return _is_transpose(op.input_ports[0], perm)
        if t == "Squeeze":
            return (_is_transpose(op.input_ports[0], perm) and len(data) == 2
                    and _const(op.input_ports["axes"]) is not None)
        if t == "Reshape":
            return (_is_transpose(op.input_ports[0], perm) and _moves_ones_only(_producer(op.input_ports[0]))
                    and all(p.source is not op.input_ports[0].source for p in data[1:])
                    and (bool(op.attrs.get("allowzero", 0)) or (_const(op.input_ports["shape"]) is not None
                                                                 and 0 not in _const(op.input_ports["shape"]))))
        if t == "Shape":
            return (_is_transpose(op.input_ports[0], perm) and op.attrs.get("start") is None
                    and op.attrs.get("end") is None)
        return False

    def push_through(self, op: Op, perm: list[int]) -> None:
        rank = len(perm)
        inv = [perm.index(i) for i in range(rank)]
        t = op.type
        out_perm: list[int] | None = perm
        for p in list(op.input_ports):
            if p.source is None:
                continue
            prod = _producer(p)
            if prod is not None and prod.type == "Transpose" and list(prod.attrs["perm"]) == perm:
                self.g.connect(prod.input_ports[0].source, p, replace=True)
                self.drop_if_unused(prod)
                continue
            c = _const(p)
            if c is None:
                continue
            if t in _UNARY or t in _CLIP or (t == "Pad" and p.name != "pads") or t in _REDUCE:
                pass
            if t in _BINARY or t == "Concat":
                if c.ndim == 0:
                    continue
                full = c.reshape((1,) * (rank - c.ndim) + c.shape)
                new = self.new_const((prod.name if prod else op.name) + "/t", np.transpose(full, inv))
                self.g.connect(new, p, replace=True)
                self.drop_if_unused(prod)
            elif t == "Pad" and p.name == "pads":
                begins, ends = list(c[:rank]), list(c[rank:])
                pads = np.asarray([begins[i] for i in inv] + [ends[i] for i in inv], dtype=np.int64)
                self.g.connect(self.new_const(op.name + "/pads", pads), p, replace=True)
                self.drop_if_unused(prod)
            elif (t in _REDUCE or t == "Squeeze") and p.name == "axes":
                axes_y = [int(a) % rank for a in c.reshape(-1)]
                axes_x = sorted(perm[a] for a in axes_y)
                self.g.connect(self.new_const(op.name + "/axes", np.asarray(axes_x, dtype=np.int64)), p,
                               replace=True)
                self.drop_if_unused(prod)
                if t == "Squeeze" or not op.attrs.get("keepdims", 1):
                    kept_y = [i for i in range(rank) if i not in axes_y]
                    kept_x = [i for i in range(rank) if i not in axes_x]
                    out_perm = [kept_x.index(perm[i]) for i in kept_y]
        if t == "Concat":
            op.attrs["axis"] = perm[int(op.attrs.get("axis", 0)) % rank]
        if t in ("Softmax", "LogSoftmax"):
            op.attrs["axis"] = perm[int(op.attrs.get("axis", -1)) % rank]
        if t == "Reshape":  # the transpose moved axes of size 1 only: the same elements in the same order
            out_perm = None
        if t == "Shape":  # Shape(Transpose(x, perm)) = Gather(Shape(x), perm)
            out_perm = None
            readers = list(op.output_ports[0].consumers)
            gather = self.g.add_op("Gather", self.g.unique_name(op.name + "/permuted"), inputs=["data", "indices"],
                                   outputs=["output"], attrs={"axis": 0},
                                   sources=[op.output_ports[0],
                                            self.new_const(op.name + "/perm", np.asarray(perm, np.int64))])
            gather.output_ports[0].dtype = op.output_ports[0].dtype
            stand_for(gather, op)
            for r in readers:
                self.g.connect(gather.output_ports[0], r, replace=True)
            self.report.count("pushed down")
            return
        self.report.count("pushed down")
        for q in op.output_ports:
            readers = list(q.consumers)
            if not readers:
                continue
            old_dtype = q.dtype
            q.dtype = None
            if out_perm is None or out_perm == list(range(len(out_perm))):
                continue
            new = self.new_transpose(q, out_perm, op.name + "/to_nhwc")
            stand_for(new.op, op)
            new.dtype = old_dtype
            for r in readers:
                self.g.connect(new, r, replace=True)

    # -- constants
    def fold(self, op: Op) -> bool:
        t = op.type
        ins = [p for p in op.input_ports if p.source is not None]
        if not ins or len(op.output_ports) != 1:
            return False
        vals = [_const(p) for p in ins]
        if any(v is None for v in vals):
            return False
        try:
            if t in ("Add", "Sub", "Mul", "Neg", "Sqrt"):
                r = _FOLD[t](*vals)
            elif t == "Div":
                r = vals[0] / vals[1] if vals[0].dtype.kind == "f" else vals[0] // vals[1]
            elif t == "Reciprocal":
                r = np.reciprocal(vals[0])
            elif t == "Transpose":
                r = np.transpose(vals[0], op.attrs.get("perm"))
            elif t == "Reshape":
                shape = [int(s) for s in vals[1]]
                shape = [vals[0].shape[i] if s == 0 and not op.attrs.get("allowzero") else s
                         for i, s in enumerate(shape)]
                r = vals[0].reshape(shape)
            elif t in ("Squeeze", "Unsqueeze") and len(vals) == 2:
                axes = tuple(int(a) for a in vals[1].reshape(-1))
                r = np.squeeze(vals[0], axes) if t == "Squeeze" else np.expand_dims(vals[0], axes)
            elif t == "Squeeze" and len(vals) == 1:  # no axes: every axis of size 1
                r = np.squeeze(vals[0])
            else:
                return False
        except (ValueError, TypeError):
            return False
        r = np.asarray(r).astype(vals[0].dtype, copy=False)
        out = self.new_const(op.name + "/folded", r)
        self.g.replace_all_uses(op.output_ports[0], out)
        feeders = [_producer(p) for p in ins]
        self.g.remove_op(op)
        for f in feeders:
            self.drop_if_unused(f)
        self.report.count("constants folded")
        return True

    def fuse_conv(self, op: Op) -> bool:
        """``Conv -> Mul(c)`` or ``Conv -> Add(b)`` (``c``, ``b`` constant per output channel) into the Conv."""
        if op.type not in ("Mul", "Add", "Sub"):
            return False
        conv, c = None, None
        for i, p in enumerate(op.input_ports[:2]):
            prod = _producer(p)
            if prod is not None and prod.type == "Conv":
                other = op.input_ports[1 - i]
                if op.type == "Sub" and i != 0:
                    return False
                conv, c = prod, _const(other)
        if conv is None or c is None or len(conv.output_ports[0].consumers) != 1:
            return False
        w = _const(conv.input_ports["W"])
        if w is None or w.dtype.kind != "f":
            return False
        cout, rank = w.shape[0], w.ndim
        if c.ndim > rank or c.size not in (1, cout):
            return False
        if c.size == cout:
            full = c.reshape((1,) * (rank - c.ndim) + c.shape)
            if full.shape[1] != cout:
                return False
        vec = np.broadcast_to(c.reshape(-1), (cout,)).astype(w.dtype)
        bport = conv.input_ports["B"] if "B" in conv.input_ports else None
        b = _const(bport) if bport is not None and bport.source is not None else None
        if bport is not None and bport.source is not None and b is None:
            return False
        b = np.zeros((cout,), w.dtype) if b is None else b
        if op.type == "Mul":  # one pass over the weights, written in C order (the filter is often a transposed view)
            w2, b2 = np.multiply(w, vec.reshape((cout,) + (1,) * (rank - 1)), order="C"), b * vec
        elif op.type == "Add":
            w2, b2 = w, b + vec
        else:
            w2, b2 = w, b - vec
        wprod = _producer(conv.input_ports["W"])
        if w2 is not w:
            self.g.connect(self.new_const(wprod.name, w2), conv.input_ports["W"], replace=True)
            self.drop_if_unused(wprod)
        if bport is None:
            bport = conv.add_input_port("B")
        bprod = _producer(bport)
        self.g.connect(self.new_const(conv.name + "/bias", b2.astype(w.dtype)), bport, replace=True)
        self.drop_if_unused(bprod)
        self.g.replace_all_uses(op.output_ports[0], conv.output_ports[0])
        feeders = [_producer(p) for p in op.input_ports]
        self.g.remove_op(op)
        for f in feeders:
            self.drop_if_unused(f)
        self.report.count("fused into Conv")
        return True

    def fuse_pad(self, pad: Op) -> bool:
        """A zero ``Pad`` of the spatial axes only feeding convolutions (directly, or through one ``Transpose`` to
        channels-first: Keras' ``ZeroPadding2D`` before a ``Conv2D``) becomes the convolutions' ``pads``."""
        if pad.type != "Pad" or pad.attrs.get("mode", "constant") not in ("constant", b"constant"):
            return False
        if "axes" in pad.input_ports and pad.input_ports["axes"].source is not None:
            return False
        cv = pad.input_ports["constant_value"] if "constant_value" in pad.input_ports else None
        if cv is not None and cv.source is not None:
            value = _const(cv)
            if value is None or value.size != 1 or float(value.reshape(-1)[0]) != 0.0:
                return False
        pads = _const(pad.input_ports["pads"])
        if pads is None or (pads < 0).any():
            return False
        rank = pads.size // 2
        readers = [c.op for c in pad.output_ports[0].consumers]
        if not readers or any(r is None for r in readers):
            return False
        perm = list(range(rank))
        t = None
        if len(readers) == 1 and readers[0].type == "Transpose":
            t = readers[0]
            perm = list(t.attrs["perm"])
            readers = [c.op for c in t.output_ports[0].consumers]
            if not readers or any(r is None for r in readers):
                return False
        begins = [int(pads[perm[i]]) for i in range(rank)]
        ends = [int(pads[rank + perm[i]]) for i in range(rank)]
        if begins[:2] != [0, 0] or ends[:2] != [0, 0] or rank < 3:
            return False
        for r in readers:
            if r.type != "Conv" or r.input_ports[0].source is not (t or pad).output_ports[0]:
                return False
            if r.attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID", b"NOTSET", b"VALID"):
                return False
            if any(c.op is r for c in (t or pad).output_ports[0].consumers if c is not r.input_ports[0]):
                return False
        for r in readers:
            old = list(r.attrs.get("pads") or [0] * (2 * (rank - 2)))
            n = rank - 2
            r.attrs["pads"] = [old[i] + begins[2 + i] for i in range(n)] + [old[n + i] + ends[2 + i] for i in range(n)]
            r.attrs.pop("auto_pad", None)
        src = pad.input_ports[0].source
        if t is not None:
            self.g.connect(src, t.input_ports[0], replace=True)
        else:
            self.g.replace_all_uses(pad.output_ports[0], src)
        feeders = [_producer(p) for p in pad.input_ports]
        self.g.remove_op(pad)
        for f in feeders:
            self.drop_if_unused(f)
        self.report.count("pads fused into Conv")
        return True

    def fuse_gemm(self, op: Op) -> bool:
        """``MatMul(a, W) -> Add(b)`` with a 2-D ``a``, a constant 2-D ``W`` and a constant bias ``b`` of ``[N]``
        (a Keras ``Dense``) becomes one ``Gemm``."""
        if op.type != "MatMul" or len(op.output_ports[0].consumers) != 1:
            return False
        add = op.output_ports[0].consumers[0].op
        if add is None or add.type != "Add":
            return False
        w = _const(op.input_ports[1])
        if w is None or w.ndim != 2 or _rank(op.output_ports[0].dtype) != 2:
            return False
        other = [p for p in add.input_ports if p.source is not op.output_ports[0]]
        if len(other) != 1:
            return False
        b = _const(other[0])
        if b is None or b.ndim > 1 or b.size not in (1, w.shape[1]) or b.dtype != w.dtype:
            return False
        gemm = self.g.add_op("Gemm", self.g.unique_name(op.name + "/gemm"), inputs=["A", "B", "C"],
                             outputs=["Y"], sources=[op.input_ports[0].source, op.input_ports[1].source,
                                                     other[0].source])
        gemm.output_ports[0].dtype = add.output_ports[0].dtype
        stand_for(gemm, op, add)
        self.g.replace_all_uses(add.output_ports[0], gemm.output_ports[0])
        self.g.remove_op(add)
        self.g.remove_op(op)
        self.report.count("fused into Gemm")
        return True

    def run(self) -> None:
        changed = True
        while changed:
            changed = False
            for op in list(self.g.topological_order()):
                if op.graph is not self.g:
                    continue
                if op.type == "Transpose":
                    done = (self.compose(op) or self.merge_siblings(op) or self.fold_const(op)
                            or self.push(op))
                elif op.type == "Concat":
                    done = self.merge_concat(op)
                elif op.type == "Pad":
                    done = self.fold(op) or self.fuse_pad(op)
                elif op.type == "MatMul":
                    done = self.fold(op) or self.fuse_gemm(op)
                else:
                    done = self.fold(op) or self.fuse_conv(op)
                changed = changed or done


def _rank(dtype: Any) -> int | None:
    """The rank an ONNX port type text says (``tensor(float)[?,2048]`` -> 2), else None."""
    if not isinstance(dtype, str) or not dtype.endswith("]") or "[" not in dtype:
        return None
    dims = dtype[dtype.index("[") + 1:-1].strip()
    return 0 if not dims else dims.count(",") + 1


def _moves_ones_only(t: Op | None) -> bool:
    """Whether transpose ``t`` keeps the order of every axis whose size is not known to be 1 (it moves axes of
    size 1 only, so it is a reshape), read from the shape of its output."""
    if t is None or t.type != "Transpose":
        return False
    from amanda_onnx.typesystem import OnnxTypeSystem

    tt = OnnxTypeSystem().tensor_type(t.output_ports[0].dtype) if t.output_ports[0].dtype is not None else None
    if tt is None or tt[1] is None:
        return False
    perm = list(t.attrs["perm"])
    if len(tt[1]) != len(perm):
        return False
    moved = [perm[i] for i, d in enumerate(tt[1]) if d != 1]
    return moved == sorted(moved)


def _is_transpose(port: Any, perm: list[int]) -> bool:
    prod = _producer(port)
    return prod is not None and prod.type == "Transpose" and list(prod.attrs["perm"]) == perm


def optimize(graph: Graph, *, channels_first_inputs: bool = False, channels_first_outputs: bool = False
             ) -> LayoutReport:
    """Remove the transposes of ``graph`` (an ``amanda/onnx`` graph) that can go, in place, nested graphs
    included; returns what was done.

    With ``channels_first_inputs``, a graph input read only by transposes of one permutation (NHWC -> NCHW) takes
    that layout itself: its type becomes the permuted one, the transposes go, and the model's metadata records it
    (``model_metadata_props``: ``amanda.input_layout.<input>`` = the permutation applied, ``"0,3,1,2"``), so a
    caller feeding it permutes its data first.  With ``channels_first_outputs``, each graph output fed by a
    transpose (NCHW -> NHWC) gives the transpose's input instead (``amanda.output_layout.<output>`` = the
    permutation that gives the old output, ``"0,2,3,1"``).  Both are also recorded with
    :func:`amanda_core.ir.layout.record_input_layout` (and ``record_output_layout``), which ``amanda check`` reads.
    """
    from .control import tf_control_to_onnx

    control = tf_control_to_onnx(graph)  # TF's functional control flow as If/Loop first (bodies included below)
    report = LayoutReport(transposes_before=count_transposes(graph))
    if control.converted or control.left:
        report.control = control.summary()
    for g in _graphs(graph):
        if any(op.type == "Transpose" and "perm" not in op.attrs for op in g):
            # a TF Transpose no rule converted (its permutation computed at run time): left for the conversion
            # to report by name; the pass reads permutations as constants
            report.count("graphs left with an unconverted Transpose")
            continue
        _Pass(g, report).run()
        _sweep_unread(g, report)
    if channels_first_inputs:
        _inputs_channels_first(graph, report)
    if channels_first_outputs:
        _outputs_channels_first(graph, report)
    report.transposes_after = count_transposes(graph)
    return report


def _sweep_unread(g: Graph, report: LayoutReport) -> None:
    """Remove the ONNX ops of ``g`` whose results nothing reads (not a graph output, no control edges), and then
    what fed only them: values TF computed only for an operand a rule reads as a constant or from the value types
    (a transposed convolution's run-time output shape).  ONNX ops have no side effects."""
    outputs = {id(p.source) for p in g.output_ports if p.source is not None}

    def unread(op: Op) -> bool:
        return (op.graph is g and (op.namespace is None or op.namespace.startswith("amanda/onnx"))
                and not op.control_outputs and not op.control_inputs and op.body is None
                and not any(q.consumers or id(q) in outputs for q in op.output_ports))

    todo = [op for op in g if unread(op)]
    while todo:
        op = todo.pop()
        if op.graph is not g or not unread(op):
            continue
        feeders = [s.op for s in op.input_ports.sources() if s is not None and s.op is not None]
        g.remove_op(op)
        report.count("unread ops removed")
        todo += [f for f in feeders if f.graph is g]


def _inputs_channels_first(graph: Graph, report: LayoutReport) -> None:
    from amanda_onnx.typesystem import OnnxTypeSystem

    types = OnnxTypeSystem()

    for port in graph.input_ports:
        readers = [c.op for c in port.consumers]
        if not readers or any(r is None or r.type != "Transpose" for r in readers):
            continue
        perms = {tuple(r.attrs["perm"]) for r in readers}
        if len(perms) != 1:
            continue
        perm = list(perms.pop())
        tt = types.tensor_type(port.dtype) if port.dtype is not None else None
        if tt is not None and tt[1] is not None:
            if len(tt[1]) != len(perm):
                continue
            port.dtype = types.make_tensor_type(tt[0], tuple(tt[1][i] for i in perm))
        for r in readers:
            graph.replace_all_uses(r.output_ports[0], port)
            graph.remove_op(r)
            report.count("inputs made channels-first")
        _say_layout(graph, "input", port.name, record_input_layout(graph, port.name, perm))


def _say_layout(graph: Graph, kind: str, name: str, perm: list[int]) -> None:
    """The model's ``metadata_props`` entry ``amanda.<kind>_layout.<name>`` (for whoever feeds the ONNX model)."""
    key = f"amanda.{kind}_layout.{name}"
    props = [p for p in (graph.attrs.get("model_metadata_props") or []) if not (isinstance(p, dict)
                                                                                  and p.get("key") == key)]
    props.append({"key": key, "value": format_perm(perm)})
    graph.attrs["model_metadata_props"] = props


def _outputs_channels_first(graph: Graph, report: LayoutReport) -> None:
    """Each graph output fed by a transpose gives the transpose's input (the layout of the ops before it)."""
    for port in graph.output_ports:
        t = _producer(port)
        if t is None or t.type != "Transpose" or t.graph is not graph:
            continue
        perm = [int(p) for p in t.attrs["perm"]]
        src = t.input_ports[0].source
        if src is None:
            continue
        graph.connect(src, port, replace=True)
        port.dtype = src.dtype if src.dtype is not None else None
        if not t.output_ports[0].consumers:
            graph.remove_op(t)
        report.count("outputs left channels-first")
        _say_layout(graph, "output", port.name, record_output_layout(graph, port.name, perm))


def to_onnx(graph: Graph, registry: Any = None, *, target: str = "amanda/onnx/18", layout: bool = True,
            allow_partial: bool = False, channels_first_inputs: bool = False,
            channels_first_outputs: bool = False) -> tuple[Graph, LayoutReport | None]:
    """Convert an ``amanda/tensorflow`` graph to ONNX with the registered tables (``tf-to-onnx``, then the opset
    tables to ``target``) and run the layout pass (``channels_first_inputs``: see :func:`optimize`); returns the
    new graph and the pass's report.

    Raises :class:`amanda_core.mapping.ConversionError` naming every op type no rule maps (with its count) before
    anything is written, unless ``allow_partial``.
    """
    from amanda_core.mapping import convert
    from amanda_core.plugin import registry as plugin_registry

    reg = registry if registry is not None else plugin_registry()
    namespaces = getattr(reg, "namespaces", reg)
    tables = list(tf_to_onnx_tables())
    if target != "amanda/onnx/18":  # other opsets: the ONNX opset tables registered by amanda-onnx
        from amanda_core.mapping.registry import registered_tables

        tables += [t for t in registered_tables(reg) if str(t.src).startswith("amanda/onnx/")]
    from amanda_core.plugin.types import GraphPass

    reports: list[LayoutReport] = []

    def after_table(g: Graph) -> str:  # as the plugin's tf-layout pass: before the check for unconverted ops
        if not layout:
            from .control import tf_control_to_onnx

            return tf_control_to_onnx(g).summary()
        reports.append(optimize(g, channels_first_inputs=channels_first_inputs,
                                channels_first_outputs=channels_first_outputs))
        return reports[-1].summary()

    conversion = convert(graph, target, tables, namespaces, allow_partial=allow_partial,
                         passes=[GraphPass(name="tf-inline-calls", tables=("tf-to-onnx",), run=_inline_summary,
                                           before=True),
                                 GraphPass(name="tf-fold-constants", tables=("tf-to-onnx",), run=fold_summary,
                                           before=True),
                                 GraphPass(name="tf-layout", tables=("tf-to-onnx",), run=after_table)])
    return conversion.graph, (reports[-1] if reports else None)


_TABLES: list[Any] = []


def run_pass(graph: Graph, input_layout: str | None = None, output_layout: str | None = None) -> str:
    """The ``tf-layout`` graph pass (after ``tf-to-onnx``): :func:`optimize`, and its summary.  ``input_layout`` /
    ``output_layout`` (``amanda convert --input-layout``): ``"channels-first"`` moves the interface to ONNX's
    layout (``channels_first_inputs``/``channels_first_outputs``); ``"channels-last"`` is TF's, which the pass keeps
    without it."""
    for what, value in (("input", input_layout), ("output", output_layout)):
        if value not in (None, "channels-first", "channels-last"):
            raise AmandaError(f"tf-layout: {what} layout {value!r} is not channels-first or channels-last")
    return optimize(graph, channels_first_inputs=input_layout == "channels-first",
                    channels_first_outputs=output_layout == "channels-first").summary()


def _inline_summary(graph: Graph) -> str:
    from .inline import run_pass

    return run_pass(graph)


def fold_summary(graph: Graph) -> str:
    """The ``tf-fold-constants`` pass (before ``tf-to-onnx``): :func:`amanda_tf.fold.fold_constants`."""
    from .fold import fold_constants

    return f"{fold_constants(graph)} op(s) computing from constants alone folded"


def tf_to_onnx_tables() -> list[Any]:
    """The plugin's ``tf_to_onnx*.yaml`` tables, loaded once (they are the plugin's own, so trusted)."""
    if not _TABLES:
        from amanda_core.mapping import load_table, merge_parts

        from .plugin import TABLES

        # the parts of table tf-to-onnx, merged in file-name order (tf_to_onnx_weights.yaml's Const rule last)
        _TABLES.extend(merge_parts(load_table(p, trusted=True) for p in sorted(TABLES.glob("tf_to_onnx*.yaml"))))
    return _TABLES
