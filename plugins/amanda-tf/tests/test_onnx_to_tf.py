"""ONNX -> TensorFlow tables on a fast subset of the ONNX node test suite.

Only the case modules named in :data:`MODULES` are generated (importing one of onnx's node-case modules makes its
cases), then each case in :data:`CASES` is converted with ``bench/onnx_node_suite_tf.py``'s functions and run with
TensorFlow against its expected outputs.  A case that converts must pass (a conversion that cannot be exact must
be refused), and the cases that are expected to convert do.  The full run is
``.venv/bin/python bench/onnx_node_suite_tf.py``.  This module imports TensorFlow; it never imports torch.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("onnx")


MODULES = ["add", "sub", "mul", "div", "abs", "relu", "sigmoid", "tanh", "exp", "cast", "where", "xor", "pow",
           "elu", "leakyrelu", "equal", "max", "gemm", "matmul", "reshape", "flatten", "unsqueeze", "transpose",
           "concat", "gather", "softmax", "reducemax", "mod", "constant", "constantofshape", "slice", "expand",
           "tile", "split", "pad", "argmax", "topk", "cumsum", "einsum", "clip", "prelu", "hardsigmoid", "conv",
           "globalaveragepool", "batch_normalization", "layernormalization", "castlike", "shape"]

CONVERTS = ["test_add", "test_add_bcast", "test_sub", "test_mul_bcast", "test_div", "test_abs", "test_relu",
            "test_sigmoid", "test_tanh", "test_exp", "test_cast_FLOAT_to_DOUBLE", "test_cast_DOUBLE_to_FLOAT",
            "test_where_example", "test_xor2d", "test_pow_types_float32_int64", "test_elu_default",
            "test_leakyrelu", "test_equal", "test_max_two_inputs", "test_gemm_default_single_elem_vector_bias",
            "test_gemm_default_no_bias", "test_matmul_3d", "test_reshape_reordered_all_dims",
            "test_flatten_axis0", "test_unsqueeze_axis_0", "test_transpose_default", "test_concat_2d_axis_0",
            "test_gather_0", "test_gather_negative_indices", "test_softmax_axis_2",
            "test_reduce_max_default_axes_keepdim_example", "test_constant", "test_constantofshape_int_zeros",
            "test_slice", "test_slice_neg_steps", "test_slice_default_axes", "test_expand_dim_changed", "test_tile",
            "test_split_equal_parts_1d_opset18", "test_split_variable_parts_2d_opset18",
            "test_argmax_keepdims_example", "test_top_k", "test_cumsum_1d_reverse_exclusive", "test_einsum_transpose",
            "test_clip", "test_clip_default_min", "test_prelu_broadcast", "test_hardsigmoid",
            "test_conv_with_strides_padding", "test_conv_with_autopad_same", "test_globalaveragepool",
            "test_batchnorm_epsilon", "test_layer_normalization_4d_axis1", "test_castlike_FLOAT_to_DOUBLE",
            "test_shape_start_1_end_negative_1", "test_softmax_axis_0", "test_softmax_axis_0_expanded",
            "test_reshape_zero_dim", "test_argmax_keepdims_example_select_last_index", "test_elu",
            "test_mod_float32_mixed_sign_fmod_0", "test_edge_pad", "test_einsum_inner_prod"]
"""Cases the tables convert (each must convert and pass); a float Mod with the divisor's sign (opset 28, so by
the table that goes ahead of the chain) among them."""

REFUSED = ["test_einsum_transpose_bfloat16"]
"""Cases no rule converts exactly (a bfloat16 Einsum): refused, never wrong (read from the stored suite)."""


@pytest.mark.parametrize("name", CONVERTS)
def test_converts_and_matches(bench: Any, cases: dict[str, Any], name: str) -> None:
    assert name in cases, f"no node case {name}"
    outcome, detail = bench.attempt(cases[name])
    assert outcome == "pass", detail


def test_inexact_is_refused(bench: Any) -> None:
    found = bench.load_cases(REFUSED)
    assert sorted(c.name for c in found) == sorted(REFUSED)
    for case in found:
        outcome, detail = bench.attempt(case)
        assert outcome == "refused", (case.name, outcome, detail)


def test_subset_never_wrong(bench: Any, cases: dict[str, Any]) -> None:
    """Every generated case of the subset's modules: none converts to a graph that fails or differs, and at
    least the listed ones pass."""
    wanted = {c for c in cases if any(c == f"test_{m}" or c.startswith(f"test_{m}_") for m in MODULES)}
    suite = bench.run_suite([cases[n] for n in sorted(wanted)])
    bad = {n: r for n, r in suite["results"].items() if r[1] in ("wrong", "error")}
    assert not bad, bad
    assert suite["counts"]["pass"] >= len(CONVERTS)
