"""Keras ``LSTM`` loops recognised whole and written as one ONNX ``LSTM`` (``docs/tensorflow.md``, "Recurrent
layers").

A Keras 3 ``LSTM`` layer (TensorFlow backend, on the CPU) traces to a ``While``/``StatelessWhile`` loop over a
``TensorListFromTensor`` of the time-major input, whose body reads step ``t`` (``TensorListGetItem``), computes the
gates ``z = x_t @ kernel + h @ recurrent_kernel + bias``, ``i, f, g, o = split(z, 4)``,
``c' = sigmoid(f) * c + sigmoid(i) * tanh(g)``, ``h' = sigmoid(o) * tanh(c')`` and writes ``h'`` to an output
list (``TensorListSetItem``) that is stacked after the loop.  :func:`fuse_keras_lstms` finds such loops, checks every
part of them (the gate arithmetic op by op, the activations, the weights being constants, the loop running exactly
over the sequence, every loop output accounted for) and replaces the loop and its list plumbing by ONNX ops:
``LSTM`` (weights permuted from Keras' gate order i, f, c, o to ONNX's i, o, f, c) and the ``Squeeze`` ops its
outputs need.  A loop that does not match exactly is left as it is, so the conversion reports it as an op no rule
maps.  The pass runs before the ``tf-to-onnx`` table (``GraphPass(before=True)``), while the graph is still all
TensorFlow.

Keras' ``GRU`` (``reset_after`` True or False) and ``SimpleRNN`` loops have the same loop around another cell; they
become one ONNX ``GRU`` (``linear_before_reset`` = ``reset_after``) or ``RNN`` the same way.
"""

from __future__ import annotations

__all__ = ["fuse_keras_lstms", "LstmReport"]

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from amanda_core.ir.graph import Graph, InputPort, Op, OutputPort

ONNX_NS = "amanda/onnx/18"
WHILE = ("While", "StatelessWhile")
# Keras gate order i, f, c, o -> ONNX i, o, f, c
KERAS_TO_ONNX = (0, 3, 1, 2)


@dataclass
class LstmReport:
    """What :func:`fuse_keras_lstms` did: the loops it replaced and those it left, with the reason."""

    fused: list[str] = field(default_factory=list)
    left: list[tuple[str, str]] = field(default_factory=list)
    fused_gru: list[str] = field(default_factory=list)
    fused_rnn: list[str] = field(default_factory=list)

    def summary(self) -> str:
        text = f"{len(self.fused)} Keras LSTM loop(s) -> ONNX LSTM"
        if self.fused_gru:
            text += f", {len(self.fused_gru)} Keras GRU loop(s) -> ONNX GRU"
        if self.fused_rnn:
            text += f", {len(self.fused_rnn)} Keras SimpleRNN loop(s) -> ONNX RNN"
        if self.left:
            text += "; left as they are: " + "; ".join(f"{n} ({why})" for n, why in self.left)
        return text


class _NoMatch(Exception):
    """The loop is not a Keras LSTM this pass converts exactly (the message says why)."""


# ----------------------------------------------------------------------------------------------- reading the body

def _through_identity(port: OutputPort | None) -> OutputPort | None:
    while port is not None and port.op is not None and port.op.type == "Identity" and port.op.input_ports:
        port = port.op.input_ports[0].source
    return port


def _src(op: Op, i: int) -> OutputPort:
    if i >= len(op.input_ports) or op.input_ports[i].source is None:
        raise _NoMatch(f"{op.type} {op.name!r} has no input {i}")
    p = _through_identity(op.input_ports[i].source)
    assert p is not None
    return p


def _op_of(port: OutputPort, *types: str) -> Op:
    op = port.op
    if op is None or op.type not in types:
        what = f"{op.type} {op.name!r}" if op is not None else f"graph input {port.name!r}"
        raise _NoMatch(f"expected {'/'.join(types)}, found {what}")
    return op


def _input_index(body: Graph, port: OutputPort) -> int:
    if port.op is not None:
        raise _NoMatch(f"expected a loop variable, found {port.op.type} {port.op.name!r}")
    return list(body.input_ports).index(port)  # type: ignore[arg-type]


def _is_input(body: Graph, port: OutputPort, k: int) -> None:
    if _input_index(body, port) != k:
        raise _NoMatch(f"expected loop variable {k}")


def _const(port: OutputPort | None) -> np.ndarray | None:
    port = _through_identity(port)
    if port is None or port.op is None or port.op.type != "Const":
        return None
    return np.asarray(port.op.attrs.get("value"))


def _scalar(port: OutputPort | None) -> float | None:
    v = _const(port)
    return float(v) if v is not None and v.size == 1 else None


def _pair(a: OutputPort, b: OutputPort, want_a: Any) -> tuple[OutputPort, OutputPort]:
    """(a, b) or (b, a): the one for which ``want_a`` does not raise first (commutative inputs)."""
    try:
        want_a(a)
        return a, b
    except _NoMatch:
        want_a(b)
        return b, a


def _activation(port: OutputPort, kind: str) -> OutputPort:
    """The input of a ``Sigmoid``/``Tanh`` (Keras' defaults; other activations are refused)."""
    op = _op_of(port, kind)
    return _src(op, 0)


def _add_operands(port: OutputPort) -> tuple[OutputPort, OutputPort]:
    op = _op_of(port, "AddV2", "Add")
    return _src(op, 0), _src(op, 1)


def _mul_operands(port: OutputPort) -> tuple[OutputPort, OutputPort]:
    op = _op_of(port, "Mul")
    return _src(op, 0), _src(op, 1)


@dataclass
class _Cell:
    k_x: int        # the input list (TensorListFromTensor) among the loop variables
    k_t: int        # the time index
    k_h: int
    k_c: int
    k_out: int      # the output list
    k_kernel: int
    k_recurrent: int
    k_bias: int | None
    out_index: str  # "time" (every step kept) or "zero" (the last step only, in slot 0)
    set_item: Op
    kind: str = "lstm"
    slices: tuple[Op, ...] = ()  # GRU: the column slices z, r, h of h @ recurrent_kernel (+ recurrent bias)
    reset_after: bool = True     # GRU: reset_after=False reads the recurrent kernel in two column slices
    kernel_slices: tuple[Op, ...] = ()  # GRU with reset_after=False: recurrent_kernel[:, :2u], [:, 2u:]


def _read_cell(body: Graph) -> _Cell:
    """An LSTM cell, else a GRU cell (reset_after True or False), else a SimpleRNN cell; _NoMatch says why it is
    none of them."""
    try:
        return _read_lstm_cell(body)
    except _NoMatch as lstm:
        try:
            return _read_gru_cell(body)
        except _NoMatch as gru_after:
            try:
                return _read_gru_reset_before_cell(body)
            except _NoMatch as gru_before:
                gru = f"{gru_after}; with reset_after=False: {gru_before}"
            try:
                return _read_simple_cell(body)
            except _NoMatch as simple:
                raise _NoMatch(f"not an LSTM ({lstm}) nor a GRU ({gru}) nor a SimpleRNN ({simple})") from None


def _read_simple_cell(body: Graph) -> _Cell:
    """Keras' SimpleRNN cell with its default tanh: ``h' = tanh(x_t @ kernel (+ bias) + h @ recurrent_kernel)``
    (ONNX ``RNN``)."""
    outs = [_through_identity(p.source) for p in body.output_ports]
    k_out, set_item = _set_item(body, outs)
    h_new = _src(set_item, 2)
    pre = _activation(h_new, "Tanh")
    a, b = _add_operands(pre)

    def recurrent_term(p: OutputPort) -> None:
        mm = _op_of(p, "MatMul")
        _input_index(body, _src(mm, 0))

    hr, xw = _pair(a, b, recurrent_term)
    k_bias = None
    if xw.op is not None and xw.op.type == "BiasAdd":
        if xw.op.attrs.get("data_format", "NHWC") != "NHWC":
            raise _NoMatch("BiasAdd in NCHW")
        k_bias = _input_index(body, _src(xw.op, 1))
        xw = _src(xw.op, 0)
    mm_x, mm_h = _op_of(xw, "MatMul"), _op_of(hr, "MatMul")
    for mm in (mm_x, mm_h):
        if mm.attrs.get("transpose_a") or mm.attrs.get("transpose_b"):
            raise _NoMatch(f"MatMul {mm.name!r} transposes an operand")
    get = _op_of(_src(mm_x, 0), "TensorListGetItem")
    k_x = _input_index(body, _src(get, 0))
    k_t = _input_index(body, _src(get, 1))
    k_kernel = _input_index(body, _src(mm_x, 1))
    k_h = _input_index(body, _src(mm_h, 0))
    k_recurrent = _input_index(body, _src(mm_h, 1))
    if outs[k_h] is not h_new:
        raise _NoMatch("the state h is not carried to the next step")
    _steps_and_weights(body, outs, k_t, [k_x, k_kernel, k_recurrent, k_bias])
    return _Cell(k_x, k_t, k_h, -1, k_out, k_kernel, k_recurrent, k_bias, _out_index(body, set_item, k_t), set_item,
                 "rnn")


def _set_item(body: Graph, outs: list[OutputPort | None]) -> tuple[int, Op]:
    sets = [(k, p.op) for k, p in enumerate(outs) if p is not None and p.op is not None
            and p.op.type == "TensorListSetItem"]
    if len(sets) != 1:
        raise _NoMatch(f"the body writes {len(sets)} lists (one expected)")
    k_out, set_item = sets[0]
    assert set_item is not None
    if _input_index(body, _src(set_item, 0)) != k_out:
        raise _NoMatch("the output list is not the loop variable it is written back to")
    return k_out, set_item


def _steps_and_weights(body: Graph, outs: list[OutputPort | None], k_t: int, constant: list[int | None]) -> None:
    """The time index steps by one; the input list and the weights come back unchanged."""
    step = outs[k_t]
    if step is None or step.op is None or step.op.type not in ("AddV2", "Add"):
        raise _NoMatch("the time index is not incremented")
    a, b = _src(step.op, 0), _src(step.op, 1)
    t_in, one = _pair(a, b, lambda p: _is_input(body, p, k_t))
    if _scalar(one) != 1.0:
        raise _NoMatch("the time index does not step by one")
    for k in constant:
        if k is not None and outs[k] is not body.input_ports[k]:
            raise _NoMatch(f"loop variable {k} (the input list or a weight) changes in the loop")


def _out_index(body: Graph, set_item: Op, k_t: int) -> str:
    idx = _through_identity(set_item.input_ports[1].source)
    if idx is body.input_ports[k_t]:
        return "time"
    if _scalar(idx) == 0.0:
        return "zero"
    raise _NoMatch("the output list is written at an index other than the time or 0")


def _read_gru_cell(body: Graph) -> _Cell:
    """Keras' GRU cell with ``reset_after=True``: ``x_z, x_r, x_h = split(x_t @ kernel (+ input bias), 3)``,
    ``m = h @ recurrent_kernel (+ recurrent bias)`` sliced into columns ``m_z, m_r, m_h``,
    ``z = sigmoid(x_z + m_z)``, ``r = sigmoid(x_r + m_r)``, ``hh = tanh(x_h + r * m_h)``,
    ``h' = z * h + (1 - z) * hh`` (ONNX ``GRU`` with ``linear_before_reset = 1``, gates in the same order)."""
    outs = [_through_identity(p.source) for p in body.output_ports]
    k_out, set_item = _set_item(body, outs)
    h_new = _src(set_item, 2)
    a, b = _add_operands(h_new)

    def keep_term(p: OutputPort) -> None:  # z * h
        x, y = _mul_operands(p)
        _pair(x, y, lambda q: _op_of(q, "Sigmoid") and _input_index(body, y if q is x else x))

    zh, new_term = _pair(a, b, keep_term)
    x, y = _mul_operands(zh)
    z_sig, h_prev = _pair(x, y, lambda q: _op_of(q, "Sigmoid") and _input_index(body, y if q is x else x))
    k_h = _input_index(body, h_prev)
    x, y = _mul_operands(new_term)
    one_minus_z, hh = _pair(x, y, lambda q: _op_of(q, "Sub"))
    sub = _op_of(one_minus_z, "Sub")
    if _scalar(sub.input_ports[0].source) != 1.0 or _src(sub, 1) is not z_sig:
        raise _NoMatch("the new state's weight is not 1 - z")
    hh_pre = _activation(hh, "Tanh")
    r_sig_in, z_in = None, _activation(z_sig, "Sigmoid")
    # hh_pre = x_h + r * m_h
    a, b = _add_operands(hh_pre)
    r_mh, x_h = _pair(a, b, lambda p: _op_of(p, "Mul"))
    x, y = _mul_operands(r_mh)
    r_sig, m_h = _pair(x, y, lambda q: _op_of(q, "Sigmoid"))
    r_sig_in = _activation(r_sig, "Sigmoid")
    parts = []
    for pre in (z_in, r_sig_in):
        a, b = _add_operands(pre)
        xs, ms = _pair(a, b, lambda p: _op_of(p, "Split"))
        parts.append((xs, ms))
    (x_z, m_z), (x_r, m_r) = parts
    split = x_z.op
    assert split is not None
    if x_r.op is not split or x_h.op is not split or split.attrs.get("num_split") != 3:
        raise _NoMatch("the input gates are not the three parts of one Split")
    if [list(split.output_ports).index(p) for p in (x_z, x_r, x_h)] != [0, 1, 2]:  # type: ignore[arg-type]
        raise _NoMatch("the input gates are not in Keras' order z, r, h")
    if _scalar(split.input_ports[0].source) not in (1.0, -1.0):
        raise _NoMatch("the input gates are not split along the last axis")
    slices = tuple(_op_of(m, "StridedSlice") for m in (m_z, m_r, m_h))
    inner = _src(slices[0], 0)
    if any(_src(sl, 0) is not inner for sl in slices):
        raise _NoMatch("the recurrent gates are not slices of one product")
    # the biases: Squeeze(Split(bias, 2, axis 0)) parts 0 (input) and 1 (recurrent), or none
    xw = _src(split, 1)
    k_bias = None
    b_in = b_rec = None
    if xw.op is not None and xw.op.type == "BiasAdd":
        if xw.op.attrs.get("data_format", "NHWC") != "NHWC":
            raise _NoMatch("BiasAdd in NCHW")
        b_in = _src(xw.op, 1)
        xw = _src(xw.op, 0)
    if inner.op is not None and inner.op.type in ("AddV2", "Add"):
        a, b = _add_operands(inner)
        inner, b_rec = _pair(a, b, lambda p: _op_of(p, "MatMul"))
    if (b_in is None) != (b_rec is None):
        raise _NoMatch("one bias without the other")
    if b_in is not None and b_rec is not None:
        sq_in, sq_rec = _op_of(b_in, "Squeeze"), _op_of(b_rec, "Squeeze")
        bsplit = _src(sq_in, 0).op
        if (bsplit is None or bsplit.type != "Split" or _src(sq_rec, 0).op is not bsplit
                or bsplit.attrs.get("num_split") != 2 or _scalar(bsplit.input_ports[0].source) != 0.0
                or [list(bsplit.output_ports).index(p) for p in (_src(sq_in, 0), _src(sq_rec, 0))] != [0, 1]):
            raise _NoMatch("the biases are not the two rows of the bias")
        k_bias = _input_index(body, _src(bsplit, 1))
    mm_x, mm_h = _op_of(xw, "MatMul"), _op_of(inner, "MatMul")
    for mm in (mm_x, mm_h):
        if mm.attrs.get("transpose_a") or mm.attrs.get("transpose_b"):
            raise _NoMatch(f"MatMul {mm.name!r} transposes an operand")
    get = _op_of(_src(mm_x, 0), "TensorListGetItem")
    k_x = _input_index(body, _src(get, 0))
    k_t = _input_index(body, _src(get, 1))
    k_kernel = _input_index(body, _src(mm_x, 1))
    if _input_index(body, _src(mm_h, 0)) != k_h:
        raise _NoMatch("the recurrent product does not read the state h")
    k_recurrent = _input_index(body, _src(mm_h, 1))
    if outs[k_h] is not h_new:
        raise _NoMatch("the state h is not carried to the next step")
    _steps_and_weights(body, outs, k_t, [k_x, k_kernel, k_recurrent, k_bias])
    return _Cell(k_x, k_t, k_h, -1, k_out, k_kernel, k_recurrent, k_bias, _out_index(body, set_item, k_t), set_item,
                 "gru", slices)


def _read_gru_reset_before_cell(body: Graph) -> _Cell:
    """Keras' GRU cell with ``reset_after=False``: ``x_z, x_r, x_h = split(x_t @ kernel (+ bias), 3)``,
    ``m = h @ recurrent_kernel[:, :2u]`` sliced into ``m_z, m_r``, ``z = sigmoid(x_z + m_z)``,
    ``r = sigmoid(x_r + m_r)``, ``hh = tanh(x_h + (r * h) @ recurrent_kernel[:, 2u:])``, ``h' = z * h + (1 - z) * hh``
    (ONNX ``GRU`` with ``linear_before_reset = 0`` and no recurrent bias)."""
    outs = [_through_identity(p.source) for p in body.output_ports]
    k_out, set_item = _set_item(body, outs)
    h_new = _src(set_item, 2)
    a, b = _add_operands(h_new)

    def keep_term(p: OutputPort) -> None:
        x, y = _mul_operands(p)
        _pair(x, y, lambda q: _op_of(q, "Sigmoid") and _input_index(body, y if q is x else x))

    zh, new_term = _pair(a, b, keep_term)
    x, y = _mul_operands(zh)
    z_sig, h_prev = _pair(x, y, lambda q: _op_of(q, "Sigmoid") and _input_index(body, y if q is x else x))
    k_h = _input_index(body, h_prev)
    x, y = _mul_operands(new_term)
    one_minus_z, hh = _pair(x, y, lambda q: _op_of(q, "Sub"))
    sub = _op_of(one_minus_z, "Sub")
    if _scalar(sub.input_ports[0].source) != 1.0 or _src(sub, 1) is not z_sig:
        raise _NoMatch("the new state's weight is not 1 - z")
    a, b = _add_operands(_activation(hh, "Tanh"))
    rh_r, x_h = _pair(a, b, lambda p: _op_of(p, "MatMul"))
    mm_rh = _op_of(rh_r, "MatMul")
    x, y = _mul_operands(_src(mm_rh, 0))
    r_sig, h_again = _pair(x, y, lambda q: _op_of(q, "Sigmoid"))
    if h_again is not h_prev:
        raise _NoMatch("the reset gate does not scale the state h")
    parts = []
    for pre in (_activation(z_sig, "Sigmoid"), _activation(r_sig, "Sigmoid")):
        a, b = _add_operands(pre)
        parts.append(_pair(a, b, lambda p: _op_of(p, "Split")))
    (x_z, m_z), (x_r, m_r) = parts
    split = x_z.op
    assert split is not None
    if x_r.op is not split or x_h.op is not split or split.attrs.get("num_split") != 3 \
            or [list(split.output_ports).index(p) for p in (x_z, x_r, x_h)] != [0, 1, 2]:  # type: ignore[arg-type]
        raise _NoMatch("the input gates are not the parts z, r, h of one Split")
    if _scalar(split.input_ports[0].source) not in (1.0, -1.0):
        raise _NoMatch("the input gates are not split along the last axis")
    slices = (_op_of(m_z, "StridedSlice"), _op_of(m_r, "StridedSlice"))
    mm_h = _op_of(_src(slices[0], 0), "MatMul")
    if _src(slices[1], 0).op is not mm_h or _input_index(body, _src(mm_h, 0)) != k_h:
        raise _NoMatch("the recurrent gates are not slices of h @ recurrent_kernel")
    kernel_slices = (_op_of(_src(mm_h, 1), "StridedSlice"), _op_of(_src(mm_rh, 1), "StridedSlice"))
    k_recurrent = _input_index(body, _src(kernel_slices[0], 0))
    if _input_index(body, _src(kernel_slices[1], 0)) != k_recurrent:
        raise _NoMatch("the two recurrent products do not read one kernel")
    xw = _src(split, 1)
    k_bias = None
    if xw.op is not None and xw.op.type == "BiasAdd":
        if xw.op.attrs.get("data_format", "NHWC") != "NHWC":
            raise _NoMatch("BiasAdd in NCHW")
        k_bias = _input_index(body, _src(xw.op, 1))
        xw = _src(xw.op, 0)
    mm_x = _op_of(xw, "MatMul")
    for mm in (mm_x, mm_h, mm_rh):
        if mm.attrs.get("transpose_a") or mm.attrs.get("transpose_b"):
            raise _NoMatch(f"MatMul {mm.name!r} transposes an operand")
    get = _op_of(_src(mm_x, 0), "TensorListGetItem")
    k_x, k_t = _input_index(body, _src(get, 0)), _input_index(body, _src(get, 1))
    k_kernel = _input_index(body, _src(mm_x, 1))
    if outs[k_h] is not h_new:
        raise _NoMatch("the state h is not carried to the next step")
    _steps_and_weights(body, outs, k_t, [k_x, k_kernel, k_recurrent, k_bias])
    return _Cell(k_x, k_t, k_h, -1, k_out, k_kernel, k_recurrent, k_bias, _out_index(body, set_item, k_t), set_item,
                 "gru", slices, False, kernel_slices)


def _columns(op: Op, width: int) -> list[int] | None:
    """The columns a 2-D ``StridedSlice`` keeps of a ``[rows, width]`` value (None unless it keeps every row)."""
    if any(op.attrs.get(m) for m in ("ellipsis_mask", "new_axis_mask", "shrink_axis_mask")):
        return None
    b, e, st = (_const(op.input_ports[i].source) for i in (1, 2, 3))
    if b is None or e is None or st is None or b.size != 2 or e.size != 2 or [int(v) for v in st] != [1, 1]:
        return None
    bm, em = int(op.attrs.get("begin_mask", 0)), int(op.attrs.get("end_mask", 0))
    if not (bm & 1 or int(b[0]) == 0) or not em & 1:
        return None
    start = None if bm & 2 else int(b[1])
    stop = None if em & 2 else int(e[1])
    return list(range(width))[start:stop]


def _read_lstm_cell(body: Graph) -> _Cell:
    outs = [_through_identity(p.source) for p in body.output_ports]
    sets = [(k, p.op) for k, p in enumerate(outs) if p is not None and p.op is not None
            and p.op.type == "TensorListSetItem"]
    if len(sets) != 1:
        raise _NoMatch(f"the body writes {len(sets)} lists (one expected)")
    k_out, set_item = sets[0]
    assert set_item is not None
    if _input_index(body, _src(set_item, 0)) != k_out:
        raise _NoMatch("the output list is not the loop variable it is written back to")
    h_new = _src(set_item, 2)
    # h' = sigmoid(o) * tanh(c')
    a, b = _mul_operands(h_new)
    o_sig, tanh_c = _pair(a, b, lambda p: _op_of(p, "Sigmoid"))
    c_new = _activation(tanh_c, "Tanh")
    o_pre = _activation(o_sig, "Sigmoid")
    # c' = sigmoid(f) * c + sigmoid(i) * tanh(g)
    a, b = _add_operands(c_new)

    def forget_term(p: OutputPort) -> None:
        x, y = _mul_operands(p)
        _pair(x, y, lambda q: _op_of(q, "Sigmoid") and _input_index(body, y if q is x else x))

    fc, ig = _pair(a, b, forget_term)
    x, y = _mul_operands(fc)
    f_sig, c_prev = _pair(x, y, lambda q: _op_of(q, "Sigmoid") and _input_index(body, y if q is x else x))
    k_c = _input_index(body, c_prev)
    x, y = _mul_operands(ig)
    i_sig, g_tanh = _pair(x, y, lambda q: _op_of(q, "Sigmoid"))
    pres = [_activation(i_sig, "Sigmoid"), _activation(f_sig, "Sigmoid"), _activation(g_tanh, "Tanh"), o_pre]
    split = pres[0].op
    if split is None or split.type != "Split" or any(p.op is not split for p in pres):
        raise _NoMatch("the gates are not the four parts of one Split")
    if [list(split.output_ports).index(p) for p in pres] != [0, 1, 2, 3]:  # type: ignore[arg-type]
        raise _NoMatch("the gates are not in Keras' order i, f, c, o")
    if _scalar(split.input_ports[0].source) not in (1.0, -1.0) or split.attrs.get("num_split") != 4:
        raise _NoMatch("the gates are not split in four along the last axis")
    z = _src(split, 1)
    k_bias = None
    if z.op is not None and z.op.type == "BiasAdd":
        if z.op.attrs.get("data_format", "NHWC") != "NHWC":
            raise _NoMatch("BiasAdd in NCHW")
        k_bias = _input_index(body, _src(z.op, 1))
        z = _src(z.op, 0)
    # z = x_t @ kernel + h @ recurrent_kernel
    a, b = _add_operands(z)

    def input_term(p: OutputPort) -> None:
        mm = _op_of(p, "MatMul")
        _op_of(_src(mm, 0), "TensorListGetItem")

    xw, hr = _pair(a, b, input_term)
    mm_x, mm_h = _op_of(xw, "MatMul"), _op_of(hr, "MatMul")
    for mm in (mm_x, mm_h):
        if mm.attrs.get("transpose_a") or mm.attrs.get("transpose_b"):
            raise _NoMatch(f"MatMul {mm.name!r} transposes an operand")
    get = _op_of(_src(mm_x, 0), "TensorListGetItem")
    k_x = _input_index(body, _src(get, 0))
    k_t = _input_index(body, _src(get, 1))
    k_kernel = _input_index(body, _src(mm_x, 1))
    k_h = _input_index(body, _src(mm_h, 0))
    k_recurrent = _input_index(body, _src(mm_h, 1))
    # the loop variables come back as they should: h', c', t + 1, the lists, the weights unchanged
    if outs[k_h] is not h_new or outs[k_c] is not c_new:
        raise _NoMatch("the states h and c are not carried to the next step")
    step = outs[k_t]
    if step is None or step.op is None or step.op.type not in ("AddV2", "Add"):
        raise _NoMatch("the time index is not incremented")
    a, b = _src(step.op, 0), _src(step.op, 1)
    t_in, one = _pair(a, b, lambda p: _is_input(body, p, k_t))
    if _scalar(one) != 1.0:
        raise _NoMatch("the time index does not step by one")
    for k in (k_x, k_kernel, k_recurrent) + ((k_bias,) if k_bias is not None else ()):
        if outs[k] is not body.input_ports[k]:
            raise _NoMatch(f"loop variable {k} (the input list or a weight) changes in the loop")
    idx = _through_identity(set_item.input_ports[1].source)
    if idx is body.input_ports[k_t]:
        out_index = "time"
    elif _scalar(idx) == 0.0:
        out_index = "zero"
    else:
        raise _NoMatch("the output list is written at an index other than the time or 0")
    return _Cell(k_x, k_t, k_h, k_c, k_out, k_kernel, k_recurrent, k_bias, out_index, set_item)


# ------------------------------------------------------------------------------------------------ the loop around

def _value(port: OutputPort | None) -> np.ndarray | None:
    """A small constant expression's value: ``Const``, ``Range`` and ``Max``/``Min`` of them (Keras' iteration
    bound)."""
    port = _through_identity(port)
    if port is None or port.op is None:
        return None
    op = port.op
    if op.type == "Const":
        return np.asarray(op.attrs.get("value"))
    args = [_value(p.source) for p in op.input_ports]
    if any(a is None for a in args):
        return None
    if op.type == "Range" and len(args) == 3:
        return np.arange(args[0], args[1], args[2])  # type: ignore[arg-type]
    if op.type in ("Max", "Min") and len(args) == 2:
        fn = np.max if op.type == "Max" else np.min
        axes = tuple(int(a) for a in np.ravel(args[1]))  # type: ignore[arg-type]
        return np.asarray(fn(args[0], axis=axes, keepdims=bool(op.attrs.get("keep_dims"))))
    return None


def _check_cond(cond: Graph, loop: Op, k_t: int, steps: int) -> None:
    """The loop stops when ``t < steps`` fails (and an iteration counter bounded by at least ``steps``)."""
    if len(cond.output_ports) != 1:
        raise _NoMatch("the loop condition has several outputs")
    terms = [_through_identity(cond.output_ports[0].source)]
    ok = False
    while terms:
        p = terms.pop()
        if p is None or p.op is None:
            raise _NoMatch("the loop condition is not a comparison")
        if p.op.type == "LogicalAnd":
            terms += [_src(p.op, 0), _src(p.op, 1)]
            continue
        less = _op_of(p, "Less")
        k = _input_index(cond, _src(less, 0))
        bound_port = _src(less, 1)
        if bound_port.op is None:  # a loop variable: its value outside the loop
            bound = _value(loop.input_ports[_input_index(cond, bound_port)].source)
        else:
            bound = _value(bound_port)
        start = _value(loop.input_ports[k].source)
        if bound is None or bound.size != 1 or start is None or start.size != 1 or float(start) != 0:
            raise _NoMatch("the loop's bounds are not constants")
        if k == k_t:
            if float(bound) != steps:
                raise _NoMatch(f"the loop runs {float(bound):g} steps over a sequence of {steps}")
            ok = True
        elif float(bound) < steps:
            raise _NoMatch("an iteration counter stops the loop early")
    if not ok:
        raise _NoMatch("the loop condition does not bound the time index")


def _shape(port: OutputPort | InputPort | None) -> list[int | None] | None:
    if port is None or port.dtype is None:
        return None
    from .dtypes import DTypeError, parse_dtype

    try:
        t = parse_dtype(str(port.dtype))
    except (DTypeError, TypeError, ValueError):
        return None
    return None if t.shape is None else list(t.shape)


@dataclass
class _Plan:
    loop: Op
    cell: _Cell
    x: OutputPort                  # time-major input [T, B, I]
    kernel: np.ndarray
    recurrent: np.ndarray
    bias: np.ndarray | None
    h0: OutputPort | None          # None: zeros
    c0: OutputPort | None
    stacks: list[Op]               # TensorListStack of the output list
    removed: list[Op]              # list plumbing to remove with the loop
    steps: int
    units: int


def _is_zeros(port: OutputPort | None) -> bool:
    port = _through_identity(port)
    if port is None or port.op is None:
        return False
    if port.op.type == "Fill":
        return _scalar(port.op.input_ports[1].source) == 0.0
    v = _const(port)
    return v is not None and not np.any(v)


def _plan(graph: Graph, loop: Op) -> _Plan:
    body, cond = loop.attrs.get("body"), loop.attrs.get("cond")
    if not isinstance(body, Graph) or not isinstance(cond, Graph):
        raise _NoMatch("the loop's body or condition is not in the graph")
    n = len(loop.input_ports)
    if len(body.input_ports) != n or len(body.output_ports) != n or len(loop.output_ports) != n:
        raise _NoMatch("the loop's body does not carry its variables")
    cell = _read_cell(body)
    outer = [_through_identity(p.source) for p in loop.input_ports]
    from_tensor = outer[cell.k_x]
    if from_tensor is None or from_tensor.op is None or from_tensor.op.type != "TensorListFromTensor":
        raise _NoMatch("the input list is not made from a tensor")
    x = _through_identity(from_tensor.op.input_ports[0].source)
    shape = _shape(x)
    if x is None or shape is None or len(shape) != 3 or shape[0] is None or shape[2] is None:
        raise _NoMatch("the input sequence is not [time, batch, features] with known time and features")
    steps, features = int(shape[0]), int(shape[2])
    weights = [_const(outer[k]) if k is not None else None
               for k in (cell.k_kernel, cell.k_recurrent, cell.k_bias)]
    kernel, recurrent, bias = weights
    if kernel is None or recurrent is None or (cell.k_bias is not None and bias is None):
        raise _NoMatch("the weights are not constants")
    units = recurrent.shape[0] if recurrent.ndim == 2 else -1
    gates, bias_shape = {"lstm": (4, (4 * units,)), "gru": (3, (2, 3 * units)), "rnn": (1, (units,))}[cell.kind]
    if cell.kind == "gru" and not cell.reset_after:
        bias_shape = (3 * units,)
    if (kernel.shape != (features, gates * units) or recurrent.shape != (units, gates * units)
            or (bias is not None and bias.shape != bias_shape)):
        raise _NoMatch(f"the weights' shapes are not an {cell.kind.upper()}'s")
    width = 3 * units if cell.reset_after else 2 * units
    for k, sl in enumerate(cell.slices):
        if _columns(sl, width) != list(range(k * units, (k + 1) * units)):
            raise _NoMatch("the recurrent gates are not the columns z, r, h of the product")
    if cell.kernel_slices and ([_columns(sl, 3 * units) for sl in cell.kernel_slices]
                               != [list(range(2 * units)), list(range(2 * units, 3 * units))]):
        raise _NoMatch("the recurrent kernel is not read as its columns z, r and h")
    if kernel.dtype != np.float32 or recurrent.dtype != np.float32:
        raise _NoMatch("the weights are not float32")
    reserve = outer[cell.k_out]
    if reserve is None or reserve.op is None or reserve.op.type != "TensorListReserve":
        raise _NoMatch("the output list is not reserved before the loop")
    size = _value(reserve.op.input_ports[1].source)
    want = steps if cell.out_index == "time" else 1
    if size is None or size.size != 1 or int(size) != want:
        raise _NoMatch("the output list's size does not fit the loop")
    _check_cond(cond, loop, cell.k_t, steps)
    if _value(outer[cell.k_t]) is None or float(_value(outer[cell.k_t])) != 0.0:  # type: ignore[arg-type]
        raise _NoMatch("the time index does not start at 0")
    stacks: list[Op] = []
    for k, port in enumerate(loop.output_ports):
        readers = [c.op for c in port.consumers]
        if not readers:
            continue
        if k == cell.k_out and all(r is not None and r.type == "TensorListStack" for r in readers):
            stacks += [r for r in readers if r is not None]
        elif k not in (cell.k_h, cell.k_c):
            raise _NoMatch(f"loop output {k} is read after the loop")
    if loop.control_outputs or loop.control_inputs:
        raise _NoMatch("the loop has control edges")
    removed = [from_tensor.op, reserve.op]
    h0 = outer[cell.k_h]
    c0 = outer[cell.k_c] if cell.kind == "lstm" else None
    return _Plan(loop, cell, x, kernel, recurrent, bias, None if _is_zeros(h0) else h0,
                 None if c0 is None or _is_zeros(c0) else c0, stacks, removed, steps, units)


# ------------------------------------------------------------------------------------------------- writing ONNX

def _onnx_type(elem: str, shape: list[int | None]) -> str:
    dims = ",".join("?" if d is None else str(d) for d in shape)
    return f"tensor({elem})[{dims}]"


def _gates(w: np.ndarray, units: int) -> np.ndarray:
    """``[n, 4H]`` in Keras' gate order -> ``[4H, n]`` in ONNX's."""
    parts = w.T.reshape(4, units, -1)
    return np.ascontiguousarray(parts[list(KERAS_TO_ONNX)].reshape(4 * units, -1))


class _Writer:
    def __init__(self, graph: Graph, base: str) -> None:
        self.graph, self.base = graph, base

    def op(self, type_: str, suffix: str, inputs: list[tuple[str, OutputPort | None]], outputs: list[tuple[str, str]],
           attrs: dict[str, Any] | None = None) -> Op:
        name = self.graph.unique_name(f"{self.base}/{suffix}")
        return self.graph.add_op(type_, name, inputs=[n for n, _ in inputs], outputs=outputs, attrs=attrs or {},
                                 namespace=ONNX_NS, sources=[s for _, s in inputs])

    def initializer(self, suffix: str, value: np.ndarray) -> OutputPort:
        elem = "float" if value.dtype == np.float32 else "int64"
        return self.op("Initializer" if value.size > 16 else "Constant", suffix, [],
                       [("output", _onnx_type(elem, list(value.shape)))], {"value": value}).output_ports[0]

    def squeeze(self, suffix: str, x: OutputPort, axis: int, shape: list[int | None]) -> OutputPort:
        axes = self.initializer(suffix + "/axes", np.array([axis], np.int64))
        return self.op("Squeeze", suffix, [("data", x), ("axes", axes)],
                       [("squeezed", _onnx_type("float", shape))]).output_ports[0]

    def unsqueeze(self, suffix: str, x: OutputPort, shape: list[int | None]) -> OutputPort:
        axes = self.initializer(suffix + "/axes", np.array([0], np.int64))
        return self.op("Unsqueeze", suffix, [("data", x), ("axes", axes)],
                       [("expanded", _onnx_type("float", shape))]).output_ports[0]


def _write(graph: Graph, p: _Plan) -> None:
    loop, cell, units = p.loop, p.cell, p.units
    batch = (_shape(p.x) or [None, None])[1]
    w = _Writer(graph, loop.name.rsplit("/", 1)[0] if "/" in loop.name else loop.name)
    if cell.kind in ("gru", "rnn"):
        rnn = _gru_op(w, p, batch) if cell.kind == "gru" else _rnn_op(w, p, batch)
        y, y_h = rnn.output_ports
        y_c = None
    else:
        rnn = _lstm_op(w, p, batch)
        y, y_h, y_c = rnn.output_ports
    kind = cell.kind
    last: dict[str, OutputPort] = {}

    def final(key: str, src: OutputPort) -> OutputPort:
        if key not in last:
            last[key] = w.squeeze(f"{kind}/{key}", src, 0, [batch, units])
        return last[key]

    for k, src in ((cell.k_h, y_h), (cell.k_c, y_c)):
        if src is None:
            continue
        port = loop.output_ports[k]
        if port.consumers:
            graph.replace_all_uses(port, final("h" if src is y_h else "c", src))
    for stack in p.stacks:
        out = stack.output_ports[0]
        if cell.out_index == "time":
            seq = w.squeeze(f"{kind}/sequence", y, 1, [p.steps, batch, units])
            graph.replace_all_uses(out, seq)
        else:  # one slot, the last step: [1, B, H] = Y_h; a slice of that slot is the last h
            for c in list(out.consumers):
                r = c.op
                if r is not None and _is_last_slot(r):
                    graph.replace_all_uses(r.output_ports[0], final("h", y_h))
                    p.removed.append(r)
            if out.consumers:
                graph.replace_all_uses(out, y_h)
        p.removed.append(stack)
    doomed = [loop] + p.stacks + p.removed
    feeders = [s for op in doomed for s in op.input_ports.sources() if s is not None and s.op is not None]
    for op in dict.fromkeys(doomed):
        if op.graph is graph and not any(q.consumers for q in op.output_ports):
            graph.remove_op(op)
    _sweep(graph, [s.op for s in feeders if s.op is not None])


def _gru_op(w: _Writer, p: _Plan, batch: int | None) -> Op:
    """ONNX ``GRU`` (``linear_before_reset = 1``): Keras' gate order z, r, h is ONNX's; B = input bias then
    recurrent bias."""
    units = p.units
    inputs: list[tuple[str, OutputPort | None]] = [
        ("X", p.x), ("W", w.initializer("gru/W", np.ascontiguousarray(p.kernel.T)[None])),
        ("R", w.initializer("gru/R", np.ascontiguousarray(p.recurrent.T)[None])),
        ("B", None if p.bias is None else w.initializer("gru/B", np.ascontiguousarray(
            p.bias.reshape(1, -1) if p.cell.reset_after else np.concatenate([p.bias, np.zeros_like(p.bias)])[None])))]
    if p.h0 is not None:
        inputs += [("sequence_lens", None), ("initial_h", w.unsqueeze("gru/initial_h", p.h0, [1, batch, units]))]
    while inputs[-1][1] is None:
        inputs.pop()
    return w.op("GRU", "gru", inputs, [("Y", _onnx_type("float", [p.steps, 1, batch, units])),
                                      ("Y_h", _onnx_type("float", [1, batch, units]))],
                {"hidden_size": units, "linear_before_reset": int(p.cell.reset_after)})


def _rnn_op(w: _Writer, p: _Plan, batch: int | None) -> Op:
    """ONNX ``RNN`` (tanh): W and R the transposed kernels, B = the bias then zeros."""
    units = p.units
    inputs: list[tuple[str, OutputPort | None]] = [
        ("X", p.x), ("W", w.initializer("rnn/W", np.ascontiguousarray(p.kernel.T)[None])),
        ("R", w.initializer("rnn/R", np.ascontiguousarray(p.recurrent.T)[None])),
        ("B", None if p.bias is None
         else w.initializer("rnn/B", np.concatenate([p.bias, np.zeros_like(p.bias)])[None]))]
    if p.h0 is not None:
        inputs += [("sequence_lens", None), ("initial_h", w.unsqueeze("rnn/initial_h", p.h0, [1, batch, units]))]
    while inputs[-1][1] is None:
        inputs.pop()
    return w.op("RNN", "rnn", inputs, [("Y", _onnx_type("float", [p.steps, 1, batch, units])),
                                      ("Y_h", _onnx_type("float", [1, batch, units]))],
                {"hidden_size": units})


def _lstm_op(w: _Writer, p: _Plan, batch: int | None) -> Op:
    units = p.units
    weights = [("W", w.initializer("lstm/W", _gates(p.kernel, units)[None])),
               ("R", w.initializer("lstm/R", _gates(p.recurrent, units)[None]))]
    if p.bias is not None:
        b = _gates(p.bias[None], units).reshape(-1)
        weights.append(("B", w.initializer("lstm/B", np.concatenate([b, np.zeros_like(b)])[None])))
    else:
        weights.append(("B", None))
    states = [("sequence_lens", None)]
    for name, s in (("initial_h", p.h0), ("initial_c", p.c0)):
        states.append((name, None if s is None else w.unsqueeze(f"lstm/{name}", s, [1, batch, units])))
    while states and states[-1][1] is None:
        states.pop()
    return w.op("LSTM", "lstm", [("X", p.x)] + weights + states,
                [("Y", _onnx_type("float", [p.steps, 1, batch, units])),
                 ("Y_h", _onnx_type("float", [1, batch, units])), ("Y_c", _onnx_type("float", [1, batch, units]))],
                {"hidden_size": units})


def _is_last_slot(op: Op) -> bool:
    """A ``StridedSlice`` taking element 0 (= -1) of a one-element axis 0 and dropping that axis."""
    if op.type != "StridedSlice" or op.attrs.get("shrink_axis_mask") != 1:
        return False
    if any(op.attrs.get(m) for m in ("ellipsis_mask", "new_axis_mask")):
        return False
    begin, strides = _const(op.input_ports[1].source), _const(op.input_ports[3].source)
    return (begin is not None and strides is not None and begin.size == 1 and int(begin[0]) in (0, -1)
            and int(strides[0]) == 1 and not (op.attrs.get("begin_mask", 0) & 1))


def _sweep(graph: Graph, candidates: list[Op]) -> None:
    """Remove the ops among ``candidates`` (and what fed them) that nothing reads any more."""
    todo = list(candidates)
    while todo:
        op = todo.pop()
        if op.graph is not graph or op.control_outputs or any(q.consumers for q in op.output_ports):
            continue
        if any(gp.source is not None and gp.source.op is op for gp in graph.output_ports):
            continue
        todo += [s.op for s in op.input_ports.sources() if s is not None and s.op is not None]
        graph.remove_op(op)


def fuse_keras_lstms(graph: Graph) -> LstmReport:
    """Replace every Keras ``LSTM`` loop of ``graph`` (its top level) by an ONNX ``LSTM``; see the module doc."""
    report = LstmReport()
    for op in list(graph):
        if op.graph is not graph or op.type not in WHILE:
            continue
        try:
            plan = _plan(graph, op)
        except _NoMatch as e:
            report.left.append((op.name, str(e)))
            continue
        name = op.name
        _write(graph, plan)
        {"lstm": report.fused, "gru": report.fused_gru, "rnn": report.fused_rnn}[plan.cell.kind].append(name)
    return report


def run_pass(graph: Graph) -> str:
    """The ``keras-lstm`` graph pass: :func:`fuse_keras_lstms`'s summary line."""
    return fuse_keras_lstms(graph).summary()
