"""Recurrences of a static length unrolled before ``onnx-to-torch`` (``amanda_torch/unroll_onnx.py``): GRU variants
the node suite does not hold, checked against onnxruntime, and the cases that must stay refused."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402


def _expected(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """onnxruntime's outputs; a batch-major GRU (which onnxruntime's kernel refuses) as the sequence-major one on
    the swapped inputs, its outputs swapped back."""
    layout = {a.name: a.i for a in model.graph.node[0].attribute}.get("layout", 0)
    if layout:
        model = onnx.ModelProto.FromString(model.SerializeToString())
        node = model.graph.node[0]
        for a in node.attribute:
            if a.name == "layout":
                a.i = 0
        for vi in model.graph.input:
            if vi.name in ("X", "H0"):
                dims = vi.type.tensor_type.shape.dim
                d0, d1 = dims[0].dim_value, dims[1].dim_value
                dims[0].dim_value, dims[1].dim_value = d1, d0
        feeds = {k: (np.swapaxes(v, 0, 1).copy() if k in ("X", "H0") else v) for k, v in feeds.items()}
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    y, y_h = session.run(None, feeds)
    if layout:
        y, y_h = np.transpose(y, (2, 0, 1, 3)), np.swapaxes(y_h, 0, 1)
    return [y, y_h]


def _run(bench: Any, tables: list[Any], model: Any, feeds: dict[str, np.ndarray]) -> tuple[str, str]:
    """Amanda's outcome on ``model`` against onnxruntime's outputs on ``feeds``."""
    from amanda_core.plugin.manager import registry

    expected = _expected(model, feeds)
    case = SimpleNamespace(model=model, data_sets=[(list(feeds.values()), expected)], rtol=1e-4, atol=1e-5)
    outcome, why, _ = bench.amanda_case(case, tables, registry().namespaces)
    return outcome, why


def _gru(direction: str, layout: int, lbr: int, seq: int | str = 4, seq_lens: Any = None,
         lens_input: bool = False, **extra: Any) -> tuple[Any, dict[str, np.ndarray]]:
    rng = np.random.default_rng(7)
    batch, size, hidden = 2, 3, 4
    dirs = 2 if direction == "bidirectional" else 1
    s = seq if isinstance(seq, int) else 4
    x_shape = [batch, seq, size] if layout else [seq, batch, size]
    h_shape = [batch, dirs, hidden] if layout else [dirs, batch, hidden]
    feeds = {"X": rng.standard_normal([batch, s, size] if layout else [s, batch, size]).astype(np.float32),
             "W": rng.standard_normal([dirs, 3 * hidden, size]).astype(np.float32),
             "R": rng.standard_normal([dirs, 3 * hidden, hidden]).astype(np.float32),
             "B": rng.standard_normal([dirs, 6 * hidden]).astype(np.float32),
             "H0": rng.standard_normal(h_shape).astype(np.float32)}
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, x_shape if n == "X" else list(v.shape))
              for n, v in feeds.items()]
    inits = []
    lens = ""
    if seq_lens is not None:
        lens = "lens"
        if lens_input:
            feeds["lens"] = np.array(seq_lens, dtype=np.int32)
            inputs.append(helper.make_tensor_value_info("lens", TensorProto.INT32, [batch]))
        else:
            inits.append(helper.make_tensor("lens", TensorProto.INT32, [batch], seq_lens))
    node = helper.make_node("GRU", ["X", "W", "R", "B", lens, "H0"], ["Y", "Y_h"], hidden_size=hidden,
                            direction=direction, layout=layout, linear_before_reset=lbr, **extra)
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Y_h")]
    graph = helper.make_graph([node], "gru", inputs, outputs, initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), feeds


@pytest.mark.parametrize("direction,layout,lbr", [("forward", 0, 1), ("reverse", 1, 0), ("bidirectional", 0, 0),
                                                  ("bidirectional", 1, 1)])
def test_gru_unrolled_matches_onnxruntime(bench: Any, tables: list[Any], direction: str, layout: int,
                                          lbr: int) -> None:
    model, feeds = _gru(direction, layout, lbr)
    assert _run(bench, tables, model, feeds) == ("passed", "")


def test_gru_constant_full_sequence_lens(bench: Any, tables: list[Any]) -> None:
    model, feeds = _gru("forward", 0, 0, seq_lens=[4, 4])
    assert _run(bench, tables, model, feeds) == ("passed", "")


@pytest.mark.parametrize("kwargs", [dict(seq_lens=[4, 2]), dict(seq_lens=[4, 4], lens_input=True),
                                    dict(seq="steps"), dict(clip=1.0),
                                    dict(activations=["Sigmoid", "Relu"])])
def test_gru_not_static_is_refused(bench: Any, tables: list[Any], kwargs: dict[str, Any]) -> None:
    model, feeds = _gru("forward", 0, 0, **kwargs)
    from amanda_core.plugin.manager import registry

    case = SimpleNamespace(model=model, data_sets=[], rtol=1e-4, atol=1e-5)
    outcome, why, _ = bench.amanda_case(case, tables, registry().namespaces)
    assert (outcome, why) == ("refused", "GRU")


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


def _ort_case(model: Any, feeds: dict[str, np.ndarray]) -> Any:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return SimpleNamespace(model=model, data_sets=[(list(feeds.values()), session.run(None, feeds))], rtol=1e-5,
                           atol=1e-6)


@pytest.mark.parametrize("reverse_in,out_axis,reverse_out", [(0, 0, 0), (1, 1, 1), (1, -1, 0), (0, 2, 1)])
def test_scan_unrolled_matches_onnxruntime(bench: Any, tables: list[Any], reverse_in: int, out_axis: int,
                                           reverse_out: int) -> None:
    from amanda_core.plugin.manager import registry

    model, feeds = _scan(reverse_in=reverse_in, out_axis=out_axis, reverse_out=reverse_out)
    outcome, why, _ = bench.amanda_case(_ort_case(model, feeds), tables, registry().namespaces)
    assert (outcome, why) == ("passed", "")


def test_scan_of_unknown_length_is_refused(bench: Any, tables: list[Any]) -> None:
    from amanda_core.plugin.manager import registry

    model, _ = _scan(seq="steps")
    case = SimpleNamespace(model=model, data_sets=[], rtol=1e-5, atol=1e-6)
    outcome, why, _ = bench.amanda_case(case, tables, registry().namespaces)
    assert outcome == "refused" and "Scan" in why.split(", "), (outcome, why)


def test_linear_attention_of_unknown_length_is_refused(bench: Any, tables: list[Any]) -> None:
    """LinearAttention expands into its function body; with a symbolic sequence length its Scan stays refused."""
    from amanda_core.plugin.manager import registry

    node = helper.make_node("LinearAttention", ["q", "k", "v"], ["out", "state"], q_num_heads=2, kv_num_heads=2)
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, "seq", 8]) for n in ("q", "k", "v")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("out", "state")]
    model = helper.make_model(helper.make_graph([node], "la", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 27)])
    case = SimpleNamespace(model=model, data_sets=[], rtol=1e-5, atol=1e-6)
    outcome, why, _ = bench.amanda_case(case, tables, registry().namespaces)
    assert outcome == "refused" and "Scan" in why.split(", "), (outcome, why)
