"""Recurrences of a length known at conversion time, unrolled into straight-line ONNX ops.

A mapping rule writes a fixed set of ops; a recurrence over ``n`` steps needs ``n`` copies of its step, so this is
an ONNX -> ONNX graph pass (``onnx-unroll``, which a backend runs before its ``onnx-to-<backend>`` table, for the
op types it has no fused op for) that writes the steps as ordinary ONNX ops (``MatMul``, ``Add``, ``Sigmoid``,
``Tanh``, ``Gather``, ``Concat`` ...), which the table then converts one by one:

* **RNN**, **GRU** (either ``linear_before_reset``) and **LSTM** (with or without peepholes ``P``), forward,
  reverse and bidirectional, ``layout`` 0 and 1, with or without ``B`` and the initial states, outputs ``Y``,
  ``Y_h`` (and ``Y_c``): per step and direction the arithmetic of ONNX's reference.  RNN:
  ``H = tanh(x W^T + H R^T + Wb + Rb)``.  GRU: ``z, r = sigmoid(x W_zr^T + H R_zr^T + Wb_zr + Rb_zr)``,
  ``h = tanh(x W_h^T + (r * H) R_h^T + Wb_h + Rb_h)``, or ``tanh(x W_h^T + r * (H R_h^T + Rb_h) + Wb_h)`` with
  ``linear_before_reset = 1``, ``H = (1 - z) * h + z * H``.  LSTM (gates i, o, f, c):
  ``i = sigmoid(x W_i^T + H R_i^T + P_i * C + Wb_i + Rb_i)``, ``f`` likewise with ``P_f``,
  ``C = f * C + i * tanh(x W_c^T + H R_c^T + Wb_c + Rb_c)``, ``o = sigmoid(... + P_o * C)`` of the new ``C``,
  ``H = o * tanh(C)``.  The reverse direction runs over the flipped sequence, its outputs put back in input order.
  With ``sequence_lens`` (a constant, or given at run time), a sequence shorter than ``t + 1`` skips step ``t``:
  its states stay as they were (``Where``) and its output there is zero, so the reverse direction, stepping from
  the end, starts at each sequence's own last step; a sequence of length 0 ends in zero states, as onnxruntime's
  kernels give.
* **Scan** (opset 9 and later): one copy of the body per step, its state inputs fed by the previous copy's state
  outputs, its scan inputs by the step's slice (``Gather`` at the step's index along ``scan_input_axes``, from the
  end for a reverse direction), the values it reads from outer graphs by name fed by their producers; each scan
  output is the steps' outputs unsqueezed and concatenated along ``scan_output_axes`` (in reverse order for a
  reverse direction).  The copied ops are ONNX ops the table converts as any other.  The length is read from the
  scan inputs' types, or, where inference left it symbolic, from the ops that fix it (a ``Reshape`` to a shape
  computed from ``Shape``s of known shapes and constants, a ``Transpose`` of such: LinearAttention's function body;
  the ``Squeeze``/``Unsqueeze`` of constant axes around a Scan-8 the opset upgrade rewrote, whose outputs are
  untyped).

A recurrence whose length is not a constant of the graph (an input's symbolic dimension), a body holding control
flow, a ``sequence_lens`` of unknown type, activations other than the defaults, ``clip``, LSTM's ``input_forget``,
or an element type other than float32/float64 is left as it is (the table then reports the op as unconverted),
with the reason in the pass's summary.
"""

from __future__ import annotations

__all__ = ["unroll_onnx", "UnrollReport", "UNROLLED"]

from typing import Any, Callable, Sequence

import attrs
import numpy as np

from amanda_core import Graph
from amanda_core.ir.graph import Op, OutputPort
from amanda_core.namespace.registry import NOT_CONSTANT
from amanda_core.namespace.types import TypeExprError

from .dtypes import elem_type_from_numpy, format_shape, parse_dtype
from .names import scope_names
from .schemas import constant_value

ONNX_FAMILY = "amanda/onnx/"
_FLOATS = {"float": np.float32, "double": np.float64}


@attrs.define
class UnrollReport:
    converted: dict[str, int] = attrs.field(factory=dict)
    left: list[str] = attrs.field(factory=list)
    kept: dict[str, int] = attrs.field(factory=dict)

    def summary(self) -> str:
        done = ", ".join(f"{n} {t}" for t, n in sorted(self.converted.items())) or "nothing"
        kept = ", ".join(f"{n} {t}" for t, n in sorted(self.kept.items()))
        left = f"; left: {'; '.join(self.left)}" if self.left else ""
        return f"{done} unrolled" + (f"; kept for the table: {kept}" if kept else "") + left


def _shape(port: OutputPort | None) -> tuple[str, list[int]] | None:
    """Element type and static dims of a port's ONNX tensor type, or None when either is not known."""
    found = _dims(port)
    if found is None or not all(isinstance(d, int) for d in found[1]):
        return None
    return found


def _constant(port: OutputPort | None) -> Any:
    """The value of a port fed by an ONNX constant (:func:`~.schemas.constant_value`: an ``Initializer`` no graph
    input overrides, a ``Constant``), as a numpy array; else None."""
    op = port.op if port is not None else None
    if op is None or op.namespace is not None:
        return None
    value = constant_value(op)
    return None if value is NOT_CONSTANT else value


def _dtype(elem: str | None, dims: Sequence[Any] | None) -> str | None:
    """``tensor(<elem>)[dims]`` (a dim may be a symbolic name); None when the element type is not known."""
    if elem is None or dims is None:
        return None
    return f"tensor({elem}){format_shape(dims)}"


def _dims(port: OutputPort | None) -> tuple[str, list[Any]] | None:
    """Element type and dims (ints, or the names of symbolic ones) of a port's ONNX tensor type of a known rank."""
    if port is None or port.dtype is None:
        return None
    try:
        t = parse_dtype(str(port.dtype))
    except TypeExprError:
        return None
    if t.kind != "tensor" or t.shape is None:
        return None
    return t.elem_type, list(t.shape)  # type: ignore[return-value]


class _Writer:
    """Adds ONNX ops to a graph, each output typed ``tensor(<elem>)[dims]``."""

    def __init__(self, g: Graph, base: str) -> None:
        self.g, self.base = g, base

    def op(self, type_: str, inputs: Sequence[tuple[str, OutputPort]], outputs: Sequence[tuple[str, str, list[int]]],
           **attributes: Any) -> list[OutputPort]:
        o = self.g.add_op(type_, self.g.unique_name(f"{self.base}_{type_.lower()}"),
                          inputs=[n for n, _ in inputs],
                          outputs=[(n, _dtype(e, dims)) for n, e, dims in outputs],
                          attrs=dict(attributes) or None, sources=[p for _, p in inputs])
        return list(o.output_ports)

    def const(self, value: Any) -> OutputPort:
        value = np.asarray(value)
        o = self.g.add_op("Constant", self.g.unique_name(f"{self.base}_const"), attrs={"value": value},
                          outputs=[("output", _dtype(elem_type_from_numpy(value.dtype), value.shape))])
        return o.output_ports[0]

    def one(self, type_: str, ins: Sequence[OutputPort], elem: str, dims: list[int], names: Sequence[str],
            out: str, **attributes: Any) -> OutputPort:
        return self.op(type_, list(zip(names, ins)), [(out, elem, dims)], **attributes)[0]

    # the few op shapes used below
    def binary(self, type_: str, a: OutputPort, b: OutputPort, elem: str, dims: list[int]) -> OutputPort:
        return self.one(type_, [a, b], elem, dims, ["A", "B"], "C")

    def matmul(self, a: OutputPort, b: OutputPort, elem: str, dims: list[int]) -> OutputPort:
        return self.one("MatMul", [a, b], elem, dims, ["A", "B"], "Y")

    def unary(self, type_: str, x: OutputPort, elem: str, dims: list[int]) -> OutputPort:
        if type_ in ("Tanh", "Identity"):
            return self.one(type_, [x], elem, dims, ["input"], "output")
        return self.one(type_, [x], elem, dims, ["X"], "Y")

    def gather(self, x: OutputPort, index: int, elem: str, dims: list[int], axis: int = 0) -> OutputPort:
        return self.one("Gather", [x, self.const(np.array(index, dtype=np.int64))], elem, dims,
                        ["data", "indices"], "output", axis=axis)

    def transpose(self, x: OutputPort, perm: list[int], elem: str, dims: list[int]) -> OutputPort:
        return self.one("Transpose", [x], elem, dims, ["data"], "transposed", perm=perm)

    def unsqueeze(self, x: OutputPort, axis: int, elem: str, dims: list[int]) -> OutputPort:
        return self.one("Unsqueeze", [x, self.const(np.array([axis], dtype=np.int64))], elem, dims,
                        ["data", "axes"], "expanded")

    def concat(self, xs: Sequence[OutputPort], axis: int, elem: str, dims: list[int]) -> OutputPort:
        if len(xs) == 1:
            return xs[0]
        return self.one("Concat", xs, elem, dims, [f"inputs_{i}" for i in range(len(xs))], "concat_result",
                        axis=axis)

    def split(self, x: OutputPort, sizes: list[int], axis: int, elem: str, dims: list[int]) -> list[OutputPort]:
        outs = []
        for i, s in enumerate(sizes):
            d = list(dims)
            d[axis] = s
            outs.append((f"outputs_{i}", elem, d))
        return self.op("Split", [("input", x), ("split", self.const(np.array(sizes, dtype=np.int64)))], outs,
                       axis=axis)


UNROLLED = ("RNN", "GRU", "LSTM", "Scan")


def unroll_onnx(graph: Graph, ops: Sequence[str] = UNROLLED,
                keep: Callable[[Op], bool] | None = None) -> UnrollReport:
    """Unroll every recurrence of a static length among ``ops`` (op types of :data:`UNROLLED`) in ``graph`` (an
    ``amanda/onnx`` graph) and its nested graphs; an op for which ``keep`` returns true is left for the table (a
    backend's fused op that computes it as it is)."""
    report = UnrollReport()
    if not (graph.namespace or "").startswith(ONNX_FAMILY):
        return report
    unknown = sorted(set(ops) - set(UNROLLED))
    if unknown:
        raise ValueError(f"no unrolling for {', '.join(unknown)} (known: {', '.join(UNROLLED)})")
    graphs = [graph] + [n.graph for n in graph.nested_graphs(graph.namespace)
                        if (n.graph.namespace or n.inherited or "").startswith(ONNX_FAMILY)]
    for g in graphs:
        for op in list(g):
            if op.graph is not g or op.namespace is not None or op.type not in ops:
                continue
            if keep is not None and keep(op):
                report.kept[op.type] = report.kept.get(op.type, 0) + 1
                continue
            why = _UNROLL[op.type](g, op)
            if why:
                report.left.append(f"{op.type} {op.path}: {why}")
            else:
                report.converted[op.type] = report.converted.get(op.type, 0) + 1
    if report.converted:
        _type_copies(graph)
    return report


def _type_copies(graph: Graph) -> None:
    """The values of the copied steps that their body left untyped (a Scan body typed by name only, or written by
    an opset table) typed by onnx's inference over the unrolled graph, for tables whose rules read element types."""
    from amanda_core.errors import AmandaError

    from .infer import infer_types

    try:
        infer_types(graph)
    except AmandaError:
        pass  # a graph inference refuses (already partly in another namespace): its rules decide as they are


def _replace_outputs(g: Graph, op: Op, new: dict[str, OutputPort]) -> None:
    """Readers of ``op``'s outputs read ``new[name]``; the new producers keep the ONNX value names; ``op`` goes."""
    recorded = (op.meta or {}).get("outputs") or {}
    for q in op.output_ports:
        port = new.get(q.name)
        if port is None:
            continue
        if q.consumers:
            g.replace_all_uses(q, port)
        name = recorded.get(q.name)
        producer = port.op
        if name and producer is not None:
            meta = dict(producer.meta or {})
            meta["outputs"] = {**(meta.get("outputs") or {}), port.name: name}
            producer.meta = meta
    g.remove_op(op, rewire={q.name: None for q in op.output_ports})


# --------------------------------------------------------------------------- RNN, GRU, LSTM

_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_ACTIVATIONS = {"RNN": ["tanh"], "GRU": ["sigmoid", "tanh"], "LSTM": ["sigmoid", "tanh", "tanh"]}


def _recurrence(g: Graph, op: Op) -> str | None:
    """RNN, GRU or LSTM of a static length, step by step (ONNX's equations, ``docs`` of each op)."""
    kind = op.type
    gates = _GATES[kind]
    ports = {p.name: p.source for p in op.input_ports}
    x_t = _shape(ports.get("X"))
    if x_t is None or len(x_t[1]) != 3:
        return "the shape of X is not known"
    elem, xdims = x_t
    if elem not in _FLOATS:
        return f"element type {elem}"
    layout = int(op.attrs.get("layout", 0) or 0)
    seq, batch, size = (xdims[1], xdims[0], xdims[2]) if layout == 1 else xdims
    hidden = op.attrs.get("hidden_size")
    w_t, r_t = _shape(ports.get("W")), _shape(ports.get("R"))
    if w_t is None or r_t is None:
        return "the shapes of W and R are not known"
    dirs = w_t[1][0]
    hidden = int(hidden) if hidden is not None else r_t[1][-1]
    direction = op.attrs.get("direction", "forward")
    direction = direction.decode() if isinstance(direction, bytes) else str(direction)
    if direction not in ("forward", "reverse", "bidirectional") or dirs != (2 if direction == "bidirectional" else 1):
        return f"direction {direction} with {dirs} weight sets"
    if w_t[1] != [dirs, gates * hidden, size] or r_t[1] != [dirs, gates * hidden, hidden]:
        return "W or R has an unexpected shape"
    acts = op.attrs.get("activations")
    if acts is not None:
        names = [a.decode() if isinstance(a, bytes) else str(a) for a in acts]
        if [a.lower() for a in names] != _ACTIVATIONS[kind] * dirs:
            return f"activations {names}"
    if op.attrs.get("clip") is not None:
        return "clip"
    if kind == "LSTM" and int(op.attrs.get("input_forget", 0) or 0):
        return "input_forget"
    seq_lens = ports.get("sequence_lens")
    if seq_lens is not None:
        lens = _constant(seq_lens)
        if lens is not None and (lens.shape != (batch,) or np.any(lens < 0) or np.any(lens > seq)):
            return "sequence_lens is a constant out of the sequence's bounds"
        if lens is not None and np.all(lens == seq):
            seq_lens = None  # every step of every sequence
        elif _shape(seq_lens) not in (("int32", [batch]), ("int64", [batch])):
            return "sequence_lens's type is not known"
    if seq < 1:
        return "an empty sequence"
    state_dims = [batch, dirs, hidden] if layout == 1 else [dirs, batch, hidden]
    b, h0 = ports.get("B"), ports.get("initial_h")
    c0, peep = ports.get("initial_c"), ports.get("P")
    if b is not None and _shape(b) != (elem, [dirs, 2 * gates * hidden]):
        return "B's shape is not known"
    if h0 is not None and _shape(h0) != (elem, state_dims):
        return "initial_h's shape is not known"
    if c0 is not None and _shape(c0) != (elem, state_dims):
        return "initial_c's shape is not known"
    if peep is not None and _shape(peep) != (elem, [dirs, 3 * hidden]):
        return "P's shape is not known"

    w = _Writer(g, op.name)
    x = ports["X"]
    assert x is not None
    if layout == 1:
        x = w.transpose(x, [1, 0, 2], elem, [seq, batch, size])
        h0 = None if h0 is None else w.transpose(h0, [1, 0, 2], elem, [dirs, batch, hidden])
        c0 = None if c0 is None else w.transpose(c0, [1, 0, 2], elem, [dirs, batch, hidden])
    steps = [w.gather(x, t, elem, [batch, size]) for t in range(seq)]
    lens_dtype = np.int32 if seq_lens is not None and _elem(seq_lens) == "int32" else np.int64
    ys, yhs, ycs = [], [], []
    for d in range(dirs):
        weights = _Weights(w, ports, d, elem, size, hidden, gates, b, peep)
        h = w.gather(h0, d, elem, [batch, hidden]) if h0 is not None else \
            w.const(np.zeros((batch, hidden), dtype=_FLOATS[elem]))
        c = None
        if kind == "LSTM":
            c = w.gather(c0, d, elem, [batch, hidden]) if c0 is not None else \
                w.const(np.zeros((batch, hidden), dtype=_FLOATS[elem]))
        reverse = direction == "reverse" or d == 1
        zeros = None if seq_lens is None else w.const(np.zeros((), dtype=_FLOATS[elem]))
        outs: dict[int, OutputPort] = {}
        bh = [batch, hidden]
        for t in (range(seq - 1, -1, -1) if reverse else range(seq)):
            if kind == "RNN":
                h_t = _rnn_step(w, weights, steps[t], h, elem, batch, hidden)
            elif kind == "GRU":
                h_t = _gru_step(w, weights, steps[t], h, elem, batch, hidden,
                                int(op.attrs.get("linear_before_reset", 0) or 0))
            else:
                h_t, c_t = _lstm_step(w, weights, steps[t], h, c, elem, batch, hidden)  # type: ignore[arg-type]
            if seq_lens is None:
                h, outs[t] = h_t, h_t
                c = c_t if kind == "LSTM" else None
                continue
            # a sequence shorter than t + 1 skips step t: its state stays, its output there is zero (the reverse
            # direction, stepping from the end, so starts at each sequence's own last step)
            within = w.one("Less", [w.const(np.array(t, dtype=lens_dtype)),
                                    seq_lens], "bool", [batch], ["A", "B"], "C")
            within = w.unsqueeze(within, 1, "bool", [batch, 1])
            h = w.one("Where", [within, h_t, h], elem, bh, ["condition", "X", "Y"], "output")
            outs[t] = w.one("Where", [within, h_t, zeros], elem, bh, ["condition", "X", "Y"],  # type: ignore
                            "output")
            if kind == "LSTM":
                c = w.one("Where", [within, c_t, c], elem, bh, ["condition", "X", "Y"], "output")
        if seq_lens is not None:  # a sequence of no steps ends in zero states (as onnxruntime's kernels give)
            some = w.one("Less", [w.const(np.array(0, dtype=lens_dtype)),
                                  seq_lens], "bool", [batch], ["A", "B"], "C")
            some = w.unsqueeze(some, 1, "bool", [batch, 1])
            h = w.one("Where", [some, h, zeros], elem, bh, ["condition", "X", "Y"], "output")  # type: ignore
            if c is not None:
                c = w.one("Where", [some, c, zeros], elem, bh, ["condition", "X", "Y"], "output")  # type: ignore
        ys.append(w.concat([w.unsqueeze(w.unsqueeze(outs[t], 0, elem, [1] + bh), 1, elem, [1, 1] + bh)
                            for t in range(seq)], 0, elem, [seq, 1] + bh))
        yhs.append(w.unsqueeze(h, 0, elem, [1] + bh))
        if c is not None:
            ycs.append(w.unsqueeze(c, 0, elem, [1] + bh))
    y = w.concat(ys, 1, elem, [seq, dirs, batch, hidden])
    finals = {"Y_h": w.concat(yhs, 0, elem, [dirs, batch, hidden])}
    if ycs:
        finals["Y_c"] = w.concat(ycs, 0, elem, [dirs, batch, hidden])
    if layout == 1:
        y = w.transpose(y, [2, 0, 1, 3], elem, [batch, seq, dirs, hidden])
        finals = {k: w.transpose(v, [1, 0, 2], elem, [batch, dirs, hidden]) for k, v in finals.items()}
    wanted = {q.name for q in op.output_ports}
    new = {name: _identity(w, port, elem) for name, port in [("Y", y), *finals.items()] if name in wanted}
    _replace_outputs(g, op, new)
    return None


class _Weights:
    """One direction's weights, transposed for ``x @ W^T`` (GRU's split into the update and reset gates and the
    candidate's), and its biases summed where the equations add them together."""

    def __init__(self, w: _Writer, ports: dict[str, OutputPort | None], d: int, elem: str, size: int, hidden: int,
                 gates: int, b: OutputPort | None, peep: OutputPort | None) -> None:
        H, G = hidden, gates
        wd = w.gather(ports["W"], d, elem, [G * H, size])  # type: ignore[arg-type]
        rd = w.gather(ports["R"], d, elem, [G * H, H])  # type: ignore[arg-type]
        self.w = w.transpose(wd, [1, 0], elem, [size, G * H])
        self.r = w.transpose(rd, [1, 0], elem, [H, G * H])
        self.bias: OutputPort | None = None
        self.wb_h: OutputPort | None = None
        self.rb_h: OutputPort | None = None
        if G == 3:  # GRU: [z, r] and h apart
            self.w, self.w_h = w.split(self.w, [2 * H, H], 1, elem, [size, 3 * H])
            self.r, self.r_h = w.split(self.r, [2 * H, H], 1, elem, [H, 3 * H])
        if b is not None:
            bd = w.gather(b, d, elem, [2 * G * H])
            if G == 3:
                wb_zr, self.wb_h, rb_zr, self.rb_h = w.split(bd, [2 * H, H, 2 * H, H], 0, elem, [6 * H])
                self.bias = w.binary("Add", wb_zr, rb_zr, elem, [2 * H])
            else:
                wb, rb = w.split(bd, [G * H, G * H], 0, elem, [2 * G * H])
                self.bias = w.binary("Add", wb, rb, elem, [G * H])
        self.peep = None
        if peep is not None:  # p_i, p_o, p_f
            self.peep = w.split(w.gather(peep, d, elem, [3 * H]), [H, H, H], 0, elem, [3 * H])
        self.one = w.const(np.ones((), dtype=_FLOATS[elem])) if G == 3 else None


def _rnn_step(w: _Writer, k: _Weights, x: OutputPort, h: OutputPort, elem: str, batch: int,
              hidden: int) -> OutputPort:
    """``H = tanh(x W^T + H R^T + Wb + Rb)``."""
    bh = [batch, hidden]
    pre = w.binary("Add", w.matmul(x, k.w, elem, bh), w.matmul(h, k.r, elem, bh), elem, bh)
    if k.bias is not None:
        pre = w.binary("Add", pre, k.bias, elem, bh)
    return w.unary("Tanh", pre, elem, bh)


def _gru_step(w: _Writer, k: _Weights, x: OutputPort, h: OutputPort, elem: str, batch: int, hidden: int,
              lbr: int) -> OutputPort:
    """``z, r = sigmoid(x W_zr^T + H R_zr^T + Wb_zr + Rb_zr)``; the candidate ``tanh(x W_h^T + (r * H) R_h^T + Wb_h
    + Rb_h)`` (``tanh(x W_h^T + r * (H R_h^T + Rb_h) + Wb_h)`` with ``linear_before_reset``);
    ``H = (1 - z) * candidate + z * H``."""
    H, bh, b2 = hidden, [batch, hidden], [batch, 2 * hidden]
    gates = w.binary("Add", w.matmul(x, k.w, elem, b2), w.matmul(h, k.r, elem, b2), elem, b2)
    if k.bias is not None:
        gates = w.binary("Add", gates, k.bias, elem, b2)
    z_pre, r_pre = w.split(gates, [H, H], 1, elem, b2)
    z, r = w.unary("Sigmoid", z_pre, elem, bh), w.unary("Sigmoid", r_pre, elem, bh)
    xh = w.matmul(x, k.w_h, elem, bh)
    if lbr:
        hr = w.matmul(h, k.r_h, elem, bh)
        if k.rb_h is not None:
            hr = w.binary("Add", hr, k.rb_h, elem, bh)
        pre = w.binary("Add", xh, w.binary("Mul", r, hr, elem, bh), elem, bh)
        if k.wb_h is not None:
            pre = w.binary("Add", pre, k.wb_h, elem, bh)
    else:
        pre = w.binary("Add", xh, w.matmul(w.binary("Mul", r, h, elem, bh), k.r_h, elem, bh), elem, bh)
        if k.wb_h is not None and k.rb_h is not None:
            pre = w.binary("Add", w.binary("Add", pre, k.wb_h, elem, bh), k.rb_h, elem, bh)
    cand = w.unary("Tanh", pre, elem, bh)
    return w.binary("Add", w.binary("Mul", w.binary("Sub", k.one, z, elem, bh), cand, elem, bh),  # type: ignore
                    w.binary("Mul", z, h, elem, bh), elem, bh)


def _lstm_step(w: _Writer, k: _Weights, x: OutputPort, h: OutputPort, c: OutputPort, elem: str, batch: int,
               hidden: int) -> tuple[OutputPort, OutputPort]:
    """Gates in ONNX's order i, o, f, c: ``i = sigmoid(x W_i^T + H R_i^T + P_i * C + Wb_i + Rb_i)``, ``f`` the same
    with ``P_f``, ``C' = f * C + i * tanh(x W_c^T + H R_c^T + Wb_c + Rb_c)``, ``o = sigmoid(... + P_o * C')``,
    ``H' = o * tanh(C')``."""
    H, bh, b4 = hidden, [batch, hidden], [batch, 4 * hidden]
    gates = w.binary("Add", w.matmul(x, k.w, elem, b4), w.matmul(h, k.r, elem, b4), elem, b4)
    if k.bias is not None:
        gates = w.binary("Add", gates, k.bias, elem, b4)
    i_pre, o_pre, f_pre, c_pre = w.split(gates, [H, H, H, H], 1, elem, b4)
    if k.peep is not None:
        p_i, p_o, p_f = k.peep
        i_pre = w.binary("Add", i_pre, w.binary("Mul", p_i, c, elem, bh), elem, bh)
        f_pre = w.binary("Add", f_pre, w.binary("Mul", p_f, c, elem, bh), elem, bh)
    i, f = w.unary("Sigmoid", i_pre, elem, bh), w.unary("Sigmoid", f_pre, elem, bh)
    cell = w.binary("Add", w.binary("Mul", f, c, elem, bh),
                    w.binary("Mul", i, w.unary("Tanh", c_pre, elem, bh), elem, bh), elem, bh)
    if k.peep is not None:
        o_pre = w.binary("Add", o_pre, w.binary("Mul", p_o, cell, elem, bh), elem, bh)
    o = w.unary("Sigmoid", o_pre, elem, bh)
    return w.binary("Mul", o, w.unary("Tanh", cell, elem, bh), elem, bh), cell


def _identity(w: _Writer, x: OutputPort, elem: str | None, known: Any = None) -> OutputPort:
    """An op of its own for an output (so its ONNX name is recorded on a producer no other output shares), typed
    as computed, else as the replaced output was (``known``)."""
    typed = _dims(x)
    out = w.one("Identity", [x], elem, typed[1] if typed else None, ["input"], "output")  # type: ignore[arg-type]
    if out.dtype is None and known is not None:
        out.dtype = known
    if x.dtype is None and known is not None:
        x.dtype = known  # the same value
    return out


# --------------------------------------------------------------------------- Scan


def _ints(value: Any, n: int, default: int) -> list[int]:
    return [default] * n if value is None else [int(v) for v in value]


def _scan(g: Graph, op: Op) -> str | None:
    body = op.attrs.get("body")
    if not isinstance(body, Graph):
        return "its body is not a graph"
    m = int(op.attrs.get("num_scan_inputs", 0))
    ins = [p.source for p in op.input_ports]
    if any(p is None for p in ins) or m < 1 or m > len(ins):
        return "its inputs do not fit num_scan_inputs"
    n = len(ins) - m
    k = len(op.output_ports) - n
    if len(body.input_ports) != n + m or len(body.output_ports) != n + k or k < 0:
        return "its body's ports do not fit its inputs and outputs"
    for inner in body:
        if any(isinstance(v, Graph) for v in inner.attrs.values()):
            return "its body holds control flow"
    in_axes = _ints(op.attrs.get("scan_input_axes"), m, 0)
    in_dirs = _ints(op.attrs.get("scan_input_directions"), m, 0)
    out_axes = _ints(op.attrs.get("scan_output_axes"), k, 0)
    out_dirs = _ints(op.attrs.get("scan_output_directions"), k, 0)
    scans = ins[n:]
    shapes = [_known_dims(p) for p in scans]
    if any(s is None for s in shapes):
        return "the types of its scan inputs are not known"
    for p, (elem, dims) in zip(scans, shapes):  # type: ignore[misc]
        if all(isinstance(d, int) for d in dims):  # the dims the ops making it fix, as its type
            p.dtype = _dtype(elem, dims)
    axes, length = [], None
    for (_, dims), a in zip(shapes, in_axes):  # type: ignore[misc]
        a = a + len(dims) if a < 0 else a
        if not 0 <= a < len(dims) or not isinstance(dims[a], int):
            return "the sequence length is not known at conversion"
        if length is not None and dims[a] != length:
            return "its scan inputs differ in length"
        length = dims[a]
        axes.append(a)
    assert length is not None
    if length < 1:
        return "an empty sequence"
    outer = _outer_values(g, body)
    if isinstance(outer, str):
        return outer
    w = _Writer(g, op.name)
    state = list(ins[:n])
    collected: list[list[OutputPort]] = [[] for _ in range(k)]
    order = body.topological_order()
    for t in range(length):
        feeds = list(state)
        for p, (elem, dims), a, d in zip(scans, shapes, axes, in_dirs):  # type: ignore[misc]
            feeds.append(w.gather(p, length - 1 - t if d else t, elem, dims[:a] + dims[a + 1:], axis=a))
        outs = _inline(g, body, order, feeds, outer, f"{op.name}_step{t}")
        state = outs[:n]
        for j in range(k):
            collected[j].append(outs[n + j])
    new: dict[str, OutputPort] = {}
    for i, q in enumerate(op.output_ports[:n]):
        new[q.name] = _identity(w, state[i], _elem(state[i]), q.dtype)
    for j, q in enumerate(op.output_ports[n:]):
        steps = collected[j][::-1] if out_dirs[j] else collected[j]
        typed = _dims(steps[0])
        elem, dims = typed if typed is not None else (None, None)
        rank = (len(dims) if dims is not None else None)
        a = out_axes[j]
        if a < 0:
            if rank is None:
                return "the rank of a scan output is not known"
            a += rank + 1
        ex = None if dims is None else dims[:a] + [1] + dims[a:]
        full = None if dims is None else dims[:a] + [length] + dims[a:]
        parts = [w.unsqueeze(y, a, elem, ex) for y in steps]  # type: ignore[arg-type]
        new[q.name] = _identity(w, w.concat(parts, a, elem, full), elem, q.dtype)  # type: ignore[arg-type]
    _replace_outputs(g, op, new)
    return None


def _known_dims(port: OutputPort | None) -> tuple[str, list[Any]] | None:
    """``_dims`` of a port, its symbolic dims filled in where the ops producing it fix them (a ``Reshape`` to a
    shape computed from ``Shape`` of known shapes, a ``Transpose`` of such)."""
    typed = _dims(port)
    if port is None:
        return None
    if typed is None:  # an untyped value (ops an opset table wrote): its type from the ops that make it
        elem, shape = _static_elem(port, 0), _static_shape(port, 0)
        return None if elem is None or shape is None else (elem, list(shape))
    if all(isinstance(d, int) for d in typed[1]):
        return typed
    shape = _static_shape(port, 0)
    if shape is None or len(shape) != len(typed[1]):
        return typed
    return typed[0], [d if isinstance(d, int) else s for d, s in zip(typed[1], shape)]


_SAME_ELEM = ("Squeeze", "Unsqueeze", "Reshape", "Transpose", "Identity", "Neg", "Relu", "Sigmoid", "Tanh", "Exp",
              "Sqrt")


def _static_elem(port: OutputPort | None, depth: int) -> str | None:
    typed = _dims(port)
    if typed is not None:
        return typed[0]
    op = port.op if port is not None else None
    if op is None or op.namespace is not None or depth > 16 or op.type not in _SAME_ELEM or not op.input_ports:
        return None
    return _static_elem(op.input_ports[0].source, depth + 1)


def _static_shape(port: OutputPort | None, depth: int) -> list[int] | None:
    typed = _dims(port)
    if typed is not None and all(isinstance(d, int) for d in typed[1]):
        return typed[1]
    op = port.op if port is not None else None
    if op is None or op.namespace is not None or depth > 16:
        return None
    src = [p.source for p in op.input_ports]
    if op.type in ("Cast", "CastLike", "Identity", "Neg", "Relu", "Sigmoid", "Tanh", "Exp", "Sqrt") and src:
        return _static_shape(src[0], depth + 1)
    if op.type == "Transpose" and src:
        shape = _static_shape(src[0], depth + 1)
        perm = op.attrs.get("perm")
        if shape is None:
            return None
        perm = list(range(len(shape)))[::-1] if perm is None else [int(p) for p in perm]
        return [shape[p] for p in perm] if sorted(perm) == list(range(len(shape))) else None
    if op.type in ("Squeeze", "Unsqueeze") and len(src) == 2:
        shape, axes = _static_shape(src[0], depth + 1), _static_value(src[1], depth + 1)
        if shape is None or axes is None:
            return None
        if op.type == "Squeeze":
            drop = {int(a) + len(shape) if int(a) < 0 else int(a) for a in np.atleast_1d(axes)}
            return None if any(shape[a] != 1 for a in drop if a < len(shape)) else \
                [d for i, d in enumerate(shape) if i not in drop]
        rank = len(shape) + np.atleast_1d(axes).size
        put = sorted(int(a) + rank if int(a) < 0 else int(a) for a in np.atleast_1d(axes))
        out, rest = [], iter(shape)
        for i in range(rank):
            out.append(1 if i in put else next(rest))
        return out
    if op.type == "Reshape" and len(src) >= 2:
        shape, target = _static_shape(src[0], depth + 1), _static_value(src[1], depth + 1)
        if shape is None or target is None or target.ndim != 1 or op.attrs.get("allowzero"):
            return None
        dims = [shape[i] if int(v) == 0 and i < len(shape) else int(v) for i, v in enumerate(target)]
        total = int(np.prod(shape))
        if dims.count(-1) == 1:
            rest = int(np.prod([d for d in dims if d != -1]))
            if rest == 0 or total % rest:
                return None
            dims[dims.index(-1)] = total // rest
        return dims if int(np.prod(dims)) == total and all(d >= 0 for d in dims) else None
    return None


_COMPARE = {"Equal": np.equal, "Greater": np.greater, "Less": np.less, "GreaterOrEqual": np.greater_equal,
            "LessOrEqual": np.less_equal, "And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor}


def _static_value(port: OutputPort | None, depth: int = 0) -> Any:
    """The value of a small tensor computed from constants and the shapes of known shapes (``Shape``, ``Size``,
    arithmetic, comparisons, logic, casts to bool), or None."""
    value = _constant(port)
    if value is not None or port is None or depth > 16:
        return value
    op = port.op
    if op is None or op.namespace is not None:
        return None
    src = [p.source for p in op.input_ports]
    if op.type == "Shape" and src:
        shape = _static_shape(src[0], depth + 1)
        if shape is None:
            return None
        start, end = op.attrs.get("start", 0) or 0, op.attrs.get("end")
        return np.array(shape[int(start):(None if end is None else int(end))], dtype=np.int64)
    if op.type == "Size" and src:
        shape = _static_shape(src[0], depth + 1)
        return None if shape is None else np.array(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
    vals = [_static_value(p, depth + 1) for p in src]
    if any(v is None for v in vals) or not vals:
        return None
    if op.type == "Concat":
        return np.concatenate([np.atleast_1d(v) for v in vals], axis=int(op.attrs.get("axis", 0)))
    if op.type in ("Add", "Sub", "Mul") and len(vals) == 2:
        return {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}[op.type](vals[0], vals[1])
    if op.type in _COMPARE and len(vals) == 2:
        return np.asarray(_COMPARE[op.type](vals[0], vals[1]))
    if op.type == "Not" and len(vals) == 1:
        return np.logical_not(vals[0])
    if op.type in ("Identity", "Squeeze", "Reshape") and np.asarray(vals[0]).size == 1:
        return np.asarray(vals[0]).reshape(())  # a one-element value read as a scalar (a condition)
    if op.type == "Cast" and int(op.attrs.get("to", 0)) == 9:  # to bool
        return np.asarray(vals[0]).astype(bool)
    if op.type == "Div" and len(vals) == 2 and vals[0].dtype.kind in "iu" and np.all(vals[1] != 0):
        return np.trunc(vals[0] / vals[1]).astype(vals[0].dtype)  # ONNX's integer division truncates
    return None


def _elem(port: OutputPort) -> str | None:
    typed = _dims(port)
    return typed[0] if typed else None


def _outer_values(g: Graph, body: Graph) -> dict[int, OutputPort] | str:
    """What each ``OuterValue`` of ``body`` (a graph held by an op of ``g``) reads, by its name in ``g``'s scope: a
    map for :func:`_inline`, or why one cannot be found."""
    names = scope_names(g)
    outer: dict[int, OutputPort] = {}
    for inner in body:
        if inner.type == "OuterValue" and inner.namespace is None:
            name = inner.attrs.get("name")
            if name not in names:
                return f"no enclosing graph produces {name}"
            outer[id(inner.output_ports[0])] = names[name]
    return outer


def _inline(g: Graph, body: Graph, order: Sequence[Op], feeds: Sequence[OutputPort],
            outer: dict[int, OutputPort], base: str, *, keep_names: bool = False) -> list[OutputPort]:
    """One copy of ``body``'s ops in ``g``, its inputs fed by ``feeds``; returns what feeds its outputs.  The copies
    keep the ONNX names of their values only with ``keep_names`` (a body copied once; a step copied per position
    would repeat them)."""
    mapping: dict[int, OutputPort] = {id(p): f for p, f in zip(body.input_ports, feeds)}
    mapping.update(outer)
    for inner in order:
        if inner.type == "OuterValue" and inner.namespace is None:
            continue
        sources = [None if p.source is None else mapping[id(p.source)] for p in inner.input_ports]
        copy = g.add_op(inner.type, g.unique_name(f"{base}_{inner.name}"), namespace=inner.namespace,
                        inputs=[p.name for p in inner.input_ports],
                        outputs=[(q.name, q.dtype) for q in inner.output_ports],
                        attrs=dict(inner.attrs) or None, sources=sources)
        copy.meta = {key: v for key, v in (inner.meta or {}).items() if keep_names or key != "outputs"}
        for q, c in zip(inner.output_ports, copy.output_ports):
            mapping[id(q)] = c
    return [mapping[id(go.source)] for go in body.output_ports]  # type: ignore[arg-type]


_UNROLL = {"RNN": _recurrence, "GRU": _recurrence, "LSTM": _recurrence, "Scan": _scan}
