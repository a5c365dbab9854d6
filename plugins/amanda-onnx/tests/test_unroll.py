"""The ONNX -> ONNX passes the backends run before their tables (``amanda_onnx/unroll.py``,
``amanda_onnx/functions.py``): each model is read, rewritten by the pass, written back and run in onnxruntime
against the original model's outputs; and the cases the passes must leave as they are."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import amanda_onnx  # noqa: E402
from amanda_onnx.functions import expand_functions  # noqa: E402
from amanda_onnx.unroll import unroll_onnx  # noqa: E402

_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _session_run(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    return session.run(None, {k: v for k, v in feeds.items() if k in names})


def _rewritten(model: Any, run: Any) -> tuple[Any, str, Any]:
    """``model`` read, typed, rewritten by ``run`` (a pass); the model written back, the pass's summary, the graph."""
    graph = amanda_onnx.load_model(model)
    amanda_onnx.infer_types(graph)
    summary = run(graph)
    summary = summary if isinstance(summary, str) else summary.summary()
    return amanda_onnx.to_model(graph), summary, graph


def _assert_same(model: Any, feeds: dict[str, np.ndarray], run: Any = unroll_onnx, atol: float = 1e-5) -> str:
    expected = _session_run(model, feeds)
    rewritten, summary, graph = _rewritten(model, run)
    node_types = {op.type for op in graph}
    assert not node_types & {"RNN", "GRU", "LSTM", "Scan", "LinearAttention"}, (summary, node_types)
    got = _session_run(rewritten, feeds)
    assert len(got) == len(expected)
    for ref, out in zip(expected, got):
        assert ref.shape == out.shape and ref.dtype == out.dtype
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=atol)
    return summary


def _recurrence(kind: str, direction: str = "forward", layout: int = 0, seq: int | str = 4,
                lens: Any = None, lens_input: bool = False, bias: bool = True, states: bool = True,
                peepholes: bool = False, outputs: tuple[str, ...] = (), opset: int = 14,
                **extra: Any) -> tuple[Any, dict[str, np.ndarray]]:
    """One RNN, GRU or LSTM node over ``seq`` steps (batch 3, input size 2, hidden size 4) with random weights given
    as graph inputs; ``lens`` as sequence_lens, a constant or (``lens_input``) an input."""
    rng = np.random.default_rng(11)
    batch, size, hidden, gates = 3, 2, 4, _GATES[kind]
    dirs = 2 if direction == "bidirectional" else 1
    steps = seq if isinstance(seq, int) else 4
    x_dims = [batch, seq, size] if layout else [seq, batch, size]
    state = [batch, dirs, hidden] if layout else [dirs, batch, hidden]
    feeds = {"X": rng.standard_normal([batch, steps, size] if layout else [steps, batch, size]).astype(np.float32),
             "W": rng.standard_normal([dirs, gates * hidden, size]).astype(np.float32),
             "R": rng.standard_normal([dirs, gates * hidden, hidden]).astype(np.float32)}
    names = ["X", "W", "R", "", "", "", "", ""]
    if bias:
        feeds["B"] = rng.standard_normal([dirs, 2 * gates * hidden]).astype(np.float32)
        names[3] = "B"
    inits = []
    if lens is not None:
        names[4] = "L"
        if lens_input:
            feeds["L"] = np.array(lens, dtype=np.int32)
        else:
            inits.append(helper.make_tensor("L", TensorProto.INT32, [batch], lens))
    if states:
        feeds["H0"] = rng.standard_normal(state).astype(np.float32)
        names[5] = "H0"
        if kind == "LSTM":
            feeds["C0"] = rng.standard_normal(state).astype(np.float32)
            names[6] = "C0"
    if peepholes:
        feeds["P"] = rng.standard_normal([dirs, 3 * hidden]).astype(np.float32)
        names[7] = "P"
    while names[-1] == "":
        names.pop()
    outs = list(outputs) or (["Y", "Y_h", "Y_c"] if kind == "LSTM" else ["Y", "Y_h"])
    node = helper.make_node(kind, names, outs, hidden_size=hidden, direction=direction, **extra,
                            **({"layout": layout} if layout else {}))
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT32 if n == "L" else TensorProto.FLOAT,
                                            x_dims if n == "X" else list(v.shape)) for n, v in feeds.items()]
    graph = helper.make_graph([node], kind.lower(), inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs if o],
                              initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), feeds


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_recurrence_unrolled_matches_onnxruntime(kind: str, direction: str) -> None:
    model, feeds = _recurrence(kind, direction, peepholes=kind == "LSTM")
    assert _assert_same(model, feeds) == f"1 {kind} unrolled"


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_sequence_lens_at_run_time(kind: str, direction: str) -> None:
    """Shorter sequences skip the steps past their end (states kept, outputs zero); an empty one ends in zeros."""
    model, feeds = _recurrence(kind, direction, lens=[4, 1, 0], lens_input=True)
    _assert_same(model, feeds)


@pytest.mark.parametrize("kind,extra", [("GRU", dict(linear_before_reset=1, layout=1)),
                                        ("GRU", dict(direction="bidirectional", layout=1)),
                                        ("LSTM", dict(layout=1, peepholes=True)),
                                        ("LSTM", dict(bias=False, states=False, outputs=("", "Y_h"))),
                                        ("RNN", dict(bias=False, lens=[4, 2, 3]))])
def test_variants(kind: str, extra: dict[str, Any]) -> None:
    layout = extra.get("layout", 0)
    opset = 14
    model, feeds = _recurrence(kind, opset=opset, **extra)
    if layout:  # onnxruntime's kernels take sequence-major data only: compare with the same model, swapped
        ref, ref_feeds = _recurrence(kind, opset=opset, **{**extra, "layout": 0})
        swapped = {k: (np.swapaxes(v, 0, 1).copy() if k in ("X", "H0", "C0") else v) for k, v in feeds.items()}
        expected = _session_run(ref, swapped)
        rewritten, summary, _ = _rewritten(model, unroll_onnx)
        assert summary == f"1 {kind} unrolled"
        got = _session_run(rewritten, feeds)
        np.testing.assert_allclose(got[0], np.transpose(expected[0], (2, 0, 1, 3)), rtol=1e-4, atol=1e-5)
        for e, g in zip(expected[1:], got[1:]):
            np.testing.assert_allclose(g, np.swapaxes(e, 0, 1), rtol=1e-4, atol=1e-5)
    else:
        _assert_same(model, feeds)


@pytest.mark.parametrize("kind,extra,why", [
    ("GRU", dict(seq="steps"), "the shape of X is not known"),
    ("RNN", dict(clip=1.0), "clip"),
    ("LSTM", dict(activations=["Sigmoid", "Relu", "Tanh"]), "activations"),
    ("LSTM", dict(input_forget=1), "input_forget"),
    ("GRU", dict(lens=[4, 5, 4]), "sequence_lens is a constant out of the sequence's bounds")])
def test_left_as_it_is(kind: str, extra: dict[str, Any], why: str) -> None:
    model, _ = _recurrence(kind, **extra)
    _, summary, graph = _rewritten(model, unroll_onnx)
    assert [op.type for op in graph if op.type == kind] == [kind]
    assert summary.startswith("nothing unrolled; left: ") and why in summary, summary


def test_kept_for_the_table_and_ops_chosen() -> None:
    model, _ = _recurrence("LSTM")
    _, summary, graph = _rewritten(model, lambda g: unroll_onnx(g, keep=lambda op: op.type == "LSTM"))
    assert summary == "nothing unrolled; kept for the table: 1 LSTM" and "LSTM" in {op.type for op in graph}
    _, summary, _ = _rewritten(model, lambda g: unroll_onnx(g, ops=("GRU", "Scan")))
    assert summary == "nothing unrolled"
    with pytest.raises(ValueError, match="no unrolling for Loop"):
        _rewritten(model, lambda g: unroll_onnx(g, ops=("Loop",)))


def _scan(seq: int | str = 4, reverse_in: int = 1, out_axis: int = 1,
          reverse_out: int = 1) -> tuple[Any, dict[str, np.ndarray]]:
    """A Scan (opset 16) summing rows into a state, its scan input read backwards along axis 1, its scan output
    stacked along ``out_axis`` in reverse, the body reading an outer value (a scale) by name."""
    rng = np.random.default_rng(5)
    feeds = {"init": rng.standard_normal([3]).astype(np.float32),
             "xs": rng.standard_normal([3, 4]).astype(np.float32),
             "scale": rng.standard_normal([3]).astype(np.float32)}
    body = helper.make_graph(
        [helper.make_node("Constant", [], ["ax0"], value=helper.make_tensor("c", TensorProto.INT64, [1], [0])),
         helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
         helper.make_node("Mul", ["s_out", "scale"], ["y_pre"]),
         helper.make_node("Unsqueeze", ["y_pre", "ax0"], ["y_t"])],
        "body", [helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [3]),
                 helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("y_t", TensorProto.FLOAT, [1, 3])])
    node = helper.make_node("Scan", ["init", "xs"], ["final", "ys"], body=body, num_scan_inputs=1,
                            scan_input_axes=[1], scan_input_directions=[reverse_in], scan_output_axes=[out_axis],
                            scan_output_directions=[reverse_out])
    inputs = [helper.make_tensor_value_info("init", TensorProto.FLOAT, [3]),
              helper.make_tensor_value_info("xs", TensorProto.FLOAT, [3, seq]),
              helper.make_tensor_value_info("scale", TensorProto.FLOAT, [3])]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("final", "ys")]
    graph = helper.make_graph([node], "scan", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]), feeds


@pytest.mark.parametrize("reverse_in,out_axis,reverse_out", [(0, 0, 0), (1, 1, 1), (1, -1, 0), (0, 2, 1)])
def test_scan_unrolled_matches_onnxruntime(reverse_in: int, out_axis: int, reverse_out: int) -> None:
    model, feeds = _scan(reverse_in=reverse_in, out_axis=out_axis, reverse_out=reverse_out)
    assert _assert_same(model, feeds) == "1 Scan unrolled"


def test_scan_of_unknown_length_is_left() -> None:
    model, _ = _scan(seq="steps")
    _, summary, _ = _rewritten(model, unroll_onnx)
    assert "Scan" in summary and "the sequence length is not known at conversion" in summary, summary


def _linear_attention(seq: int | str) -> tuple[Any, dict[str, np.ndarray]]:
    rng = np.random.default_rng(3)
    node = helper.make_node("LinearAttention", ["q", "k", "v"], ["out", "state"], q_num_heads=2, kv_num_heads=2,
                            update_rule="linear")
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, seq, 8]) for n in ("q", "k", "v")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("out", "state")]
    model = helper.make_model(helper.make_graph([node], "la", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 27)])
    feeds = {n: (rng.standard_normal([1, 3, 8]) * 0.5).astype(np.float32) for n in ("q", "k", "v")}
    return model, feeds


def test_linear_attention_as_its_function_body_unrolled() -> None:
    model, feeds = _linear_attention(3)
    summary = _assert_same(model, feeds, run=lambda g: f"{expand_functions(g)}; {unroll_onnx(g).summary()}")
    assert summary == "1 expanded into their function bodies; 1 Scan unrolled", summary


def test_linear_attention_of_unknown_length_keeps_its_scan() -> None:
    model, _ = _linear_attention("seq")
    graph = amanda_onnx.load_model(model)
    amanda_onnx.infer_types(graph)
    assert expand_functions(graph) == "1 expanded into their function bodies"
    summary = unroll_onnx(graph).summary()
    assert "the sequence length is not known at conversion" in summary and "Scan" in {op.type for op in graph}
