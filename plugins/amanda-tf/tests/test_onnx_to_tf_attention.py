"""ONNX -> TensorFlow: Attention in the forms the general rule converts (``onnx_newest_to_tf_attention.yaml``), the
float16 rules (``onnx_to_tf_fp16.yaml``, ``onnx_newest_to_tf_fp16.yaml``) and the shape ops on values of unknown
rank (``onnx_to_tf_rankless.yaml``) that the expanded RotaryEmbedding bodies hold.

Node cases go through ``bench/onnx_node_suite_tf.py``'s functions (converted, run with TensorFlow, compared with
the case's tolerance); the float16 ones must moreover give the expected bits exactly, since the rules round where
ONNX's reference rounds.  Small graphs built here check the rank-less Split and Slice against onnx's reference
evaluator.  This module imports TensorFlow; it never imports torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("tensorflow")
onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

CONVERTS = [
    # Attention: the qk_matmul output (modes 0, 2, 3, 1 with softcap, 3 on a fully masked row), past and present, 3-D
    "test_attention_4d_with_qk_matmul", "test_attention_4d_with_qk_matmul_bias",
    "test_attention_4d_with_qk_matmul_softmax", "test_attention_3d_with_past_and_present_qk_matmul_softcap",
    "test_attention_24_fullymasked_qk_matmul_output_mode3_zero",
    # nonpad_kv_seqlen: decode with grouped heads, a negative offset, with a boolean mask, with a window and a
    # rank-3 mask
    "test_attention_4d_gqa_causal_nonpad_decode", "test_attention_4d_causal_nonpad_negative_offset_structural_empty",
    "test_attention_4d_causal_nonpad_attn_mask_composition", "test_attention_local_window_ext_cache_rank3_head_mask",
    # softmax_precision float64 of float32 inputs, with softcap, a window and grouped heads
    "test_attention_local_window_gqa_rank4_mask",
    # the expanded RotaryEmbedding bodies (Split by run-time sizes, then shapes of unknown rank)
    "test_rotary_embedding_expanded", "test_rotary_embedding_3d_input_expanded",
    "test_rotary_embedding_with_interleaved_rotary_dim_expanded",
]

EXACT_FP16 = [
    "test_attention_4d_fp16", "test_attention_4d_gqa_with_past_and_present_fp16",
    "test_attention_24_qk_matmul_output_mode3_softmax_precision", "test_attention_local_window_ext_cache_float16_mask",
    "test_attention_4d_causal_fp16_expanded", "test_flexattention_fp16_expanded_ver26",
    "test_causal_conv_with_state_silu_fp16", "test_causal_conv_with_state_fp16_expanded",
]
"""float16 cases whose converted graph gives the expected outputs bit for bit."""

REFUSED = ["test_attention_4d_causal_bf16"]
"""bfloat16 Attention: no rule (onnxruntime fails it too)."""


@pytest.fixture(scope="module")
def stored(bench: Any) -> dict[str, Any]:
    return {c.name: c for c in bench.load_cases(CONVERTS + EXACT_FP16 + REFUSED)}


@pytest.mark.parametrize("name", CONVERTS)
def test_converts_and_matches(bench: Any, stored: dict[str, Any], name: str) -> None:
    outcome, detail = bench.attempt(stored[name])
    assert outcome == "pass", detail


@pytest.mark.parametrize("name", EXACT_FP16)
def test_float16_is_the_reference_bit_for_bit(bench: Any, stored: dict[str, Any], name: str) -> None:
    from amanda_tf.runner import Runnable

    case = stored[name]
    graph = bench.to_tf(case.model)
    runnable = Runnable(graph)
    inputs, expected = case.data_sets[0]
    got = list(runnable({n: bench._normalize(v) for n, v in zip(graph.input_ports.names(), inputs)}).values())
    for ref, out in zip(expected, got):
        ref = bench._normalize(ref)
        assert out.dtype == ref.dtype == np.float16
        np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("name", REFUSED)
def test_refused(bench: Any, stored: dict[str, Any], name: str) -> None:
    outcome, detail = bench.attempt(stored[name])
    assert outcome == "refused" and "Attention" in detail, (outcome, detail)


def _model(nodes: list[Any], inputs: list[Any], outputs: list[Any], opset: int, inits: list[Any] = ()) -> Any:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _run_both(bench: Any, model: Any, feeds: dict[str, np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    from onnx.reference import ReferenceEvaluator

    from amanda_tf.runner import Runnable

    ref = ReferenceEvaluator(model).run(None, feeds)
    graph = bench.to_tf(model)
    got = list(Runnable(graph)(feeds).values())
    return ref, got


def test_attention_mode0_with_softcap_is_refused(bench: Any) -> None:
    """qk_matmul_output_mode 0 with softcap: the specification says the raw product, the reference gives it
    softcapped; no rule guesses."""
    from amanda_core.mapping import ConversionError

    f = TensorProto.FLOAT
    node = helper.make_node("Attention", ["Q", "K", "V"], ["Y", "", "", "QK"], softcap=2.0, qk_matmul_output_mode=0)
    model = _model([node], [helper.make_tensor_value_info(n, f, s) for n, s in
                            (("Q", [1, 2, 3, 4]), ("K", [1, 2, 5, 4]), ("V", [1, 2, 5, 4]))],
                   [helper.make_tensor_value_info("Y", f, [1, 2, 3, 4]),
                    helper.make_tensor_value_info("QK", f, [1, 2, 3, 5])],
                   23)
    with pytest.raises(ConversionError) as e:
        bench.to_tf(model)
    assert "Attention" in {u[0] for u in e.value.unconverted}


def test_rankless_split_parts_and_slice(bench: Any) -> None:
    """A value of unknown rank split into 3 parts of an axis of 7 (3, 3, 1: ONNX's ceil, not an even split), and
    sliced on a negative axis and on axis 1 with ends computed at run time (a negative start, an end past the
    size, a step of 2), against onnx's reference evaluator."""
    f, i64 = TensorProto.FLOAT, TensorProto.INT64
    nodes = [
        helper.make_node("Split", ["x"], ["a", "b", "c"], axis=-1, num_outputs=3),
        helper.make_node("Sub", ["n", "two"], ["end"]),
        helper.make_node("Slice", ["x", "minus_three", "end", "axes_m2", "steps_1"], ["s1"]),
        helper.make_node("Add", ["n", "two"], ["far"]),
        helper.make_node("Slice", ["x", "one", "far", "axes_1", "steps_2"], ["s2"]),
    ]
    inits = [helper.make_tensor("two", i64, [1], [2]), helper.make_tensor("minus_three", i64, [1], [-3]),
             helper.make_tensor("one", i64, [1], [1]), helper.make_tensor("axes_m2", i64, [1], [-2]),
             helper.make_tensor("axes_1", i64, [1], [1]), helper.make_tensor("steps_1", i64, [1], [1]),
             helper.make_tensor("steps_2", i64, [1], [2])]
    outs = [helper.make_tensor_value_info(n, f, None) for n in ("a", "b", "c", "s1", "s2")]
    model = _model(nodes, [helper.make_tensor_value_info("x", f, None), helper.make_tensor_value_info("n", i64, [1])],
                   outs, 18, inits)
    x = np.arange(2 * 6 * 5 * 7, dtype=np.float32).reshape(2, 6, 5, 7)
    ref, got = _run_both(bench, model, {"x": x, "n": np.array([6], np.int64)})
    assert [r.shape for r in ref[:3]] == [(2, 6, 5, 3), (2, 6, 5, 3), (2, 6, 5, 1)]
    for r, g in zip(ref, got):
        np.testing.assert_array_equal(g, r)


def test_float16_softmax_and_matmul_round_as_the_reference(bench: Any) -> None:
    """float16 Softmax over the last axis and a batched float16 MatMul: bit for bit the reference's."""
    h = TensorProto.FLOAT16
    nodes = [helper.make_node("Softmax", ["x"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "w"], ["y"])]
    model = _model(nodes,
                   [helper.make_tensor_value_info("x", h, [3, 9, 5]), helper.make_tensor_value_info("w", h, [3, 5, 6])],
                   [helper.make_tensor_value_info("p", h, [3, 9, 5]), helper.make_tensor_value_info("y", h, [3, 9, 6])],
                   18)
    rng = np.random.default_rng(7)
    feeds = {"x": (rng.standard_normal((3, 9, 5)) * 3).astype(np.float16),
             "w": rng.standard_normal((3, 5, 6)).astype(np.float16)}
    ref, got = _run_both(bench, model, feeds)
    for r, g in zip(ref, got):
        assert g.dtype == np.float16
        np.testing.assert_array_equal(g, r)
