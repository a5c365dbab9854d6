"""ONNX -> torch tables (``amanda_torch/tables/onnx_to_torch_*.yaml``) on a fast subset of the ONNX node test suite.

Only the node-case modules named in :data:`MODULES` are generated (importing one of onnx's node-case modules makes
its cases), then each case is converted with ``bench/onnx_torch.py``'s functions and run with the torch runner
against its expected outputs.  A case that converts must pass (a conversion that cannot be exact must be refused),
and the cases listed in :data:`CONVERTS` do convert.  The whole suite, with onnxruntime and onnx2torch beside it,
is ``.venv/bin/python bench/onnx_torch.py``.
"""

from __future__ import annotations

import importlib
import importlib.util
import warnings
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("onnx")


MODULES = ["add", "relu", "div", "mod", "pow", "where", "clip", "softmax", "gemm", "conv", "maxpool",
           "batch_normalization", "reshape", "transpose", "concat", "cast", "slice", "gather", "gatherelements",
           "scatterelements", "pad", "split", "rangeop", "constantofshape", "size", "trilu", "reducesum",
           "negativeloglikelihoodloss", "depthtospace", "hardmax", "einsum", "topk", "lpnormalization",
           "layernormalization", "resize", "equal", "greater", "greater_or_equal", "mul", "max", "bitshift",
           "quantizelinear", "dequantizelinear", "dynamicquantizelinear", "qlinearmatmul", "matmulinteger",
           "convinteger", "rmsnormalization", "attention", "cumsum", "cumprod", "lppool", "averagepool", "bitcast",
           "col2im", "affinegrid", "scatternd", "center_crop_pad", "rotaryembedding", "unique",
           "causal_conv_with_state", "reducemax", "reducel1", "unsqueeze", "rnn", "lstm", "gelu", "groupnormalization",
           "swish", "spacetodepth", "isinf", "celu", "dropout", "lrn", "meanvariancenormalization", "eyelike",
           "gridsample", "tensorscatter", "reversesequence", "compress", "convtranspose", "if_", "deformconv",
           "tfidfvectorizer", "maxunpool", "gru", "scan",
           "linear_attention"]

CONVERTS = [
    # one op to one op, constant attributes
    "test_add", "test_add_bcast", "test_relu", "test_div", "test_div_uint8", "test_pow", "test_where_example",
    "test_clip_default_inbounds", "test_softmax_axis_1", "test_gemm_all_attributes", "test_gemm_default_no_bias",
    "test_conv_with_strides_padding", "test_maxpool_2d_default", "test_batchnorm_example", "test_transpose_default",
    "test_concat_2d_axis_0", "test_cast_FLOAT_to_DOUBLE",
    # opset 28 Mod through the exact 28 -> 27 downgrade
    "test_mod_mixed_sign_int32", "test_mod_mixed_sign_float32",
    # shapes, axes, bounds, pads and counts given as graph inputs (run-time values)
    "test_reshape_reordered_all_dims", "test_reshape_zero_dim", "test_reshape_allowzero_reordered",
    "test_slice", "test_slice_default_axes", "test_slice_negative_axes", "test_split_variable_parts_2d_opset18",
    "test_split_equal_parts_1d_opset18", "test_range_float_type_positive_delta",
    "test_range_int32_type_negative_delta", "test_constantofshape_int_zeros", "test_tril",
    "test_reduce_sum_keepdims_example", "test_reduce_sum_empty_axes_input_noop_example",
    "test_constant_pad", "test_constant_pad_axes",
    # indexing
    "test_gather_1", "test_gather_negative_indices", "test_gather_elements_negative_indices",
    "test_scatter_elements_with_reduction_max", "test_size_example",
    # composite ops and their expansions into other ops
    "test_nllloss_NCd1d2_with_weight_reduction_mean", "test_nllloss_NC_expanded", "test_depthtospace_example",
    "test_hardmax_axis_1", "test_einsum_batch_matmul", "test_layer_normalization_4d_axis1",
    "test_layer_normalization_3d_axis1_epsilon_expanded", "test_layer_normalization_4d_axis_negative_2_expanded",
    # equal values in increasing index order (torch's topk orders ties otherwise), K at run time
    "test_top_k_same_values", "test_top_k_smallest", "test_maxpool_2d_same_upper", "test_l2normalization_axis_0",
    "test_resize_downsample_scales_linear", "test_resize_upsample_sizes_cubic",
    # uint16/32/64: views as the signed type of the same width, int64 copies, the sign bit flipped for uint64 order
    "test_add_uint32", "test_mul_uint64", "test_div_uint16", "test_greater_uint64", "test_greater_equal_uint32",
    "test_max_uint64", "test_bitshift_left_uint16", "test_bitshift_right_uint32", "test_equal_uint64",
    # quantization as integer and float64 arithmetic
    "test_quantizelinear", "test_quantizelinear_axis", "test_dequantizelinear_axis", "test_dynamicquantizelinear",
    "test_dynamicquantizelinear_min_adjusted", "test_qlinearmatmul_3D_int8_float32", "test_matmulinteger",
    "test_convinteger_with_padding",
    # opset 23-28 ops converted ahead of the opset chain (onnx_newest_to_torch.yaml)
    "test_rms_normalization_4d_axis1", "test_rms_normalization_3d_axis_negative_1_epsilon",
    "test_bitshift_right_int8_negative_shift", "test_bitshift_left_int32_overflow", "test_mod_mixed_sign_float32",
    "test_attention_4d_gqa_causal", "test_attention_3d_diff_heads_sizes_attn_mask", "test_attention_4d_attn_mask_bool",
    "test_attention_4d_attn_mask_4d_causal", "test_attention_3d_gqa_with_past_and_present",
    "test_attention_4d_causal_with_past_and_present", "test_attention_23_boolmask_fullymasked_row_nan_robustness",
    # the axis at run time; exclusive and reverse by shifting and flipping (CumProd: opset 26)
    "test_cumsum_1d_reverse_exclusive", "test_cumprod_2d_int32",
    # pooling as depthwise sums: LpPool, AveragePool with dilations and ceil_mode (opset 19)
    "test_lppool_2d_dilations",
    "test_averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_True",
    # Resize in nearest mode as ONNX's reference computes it
    "test_resize_upsample_scales_nearest", "test_resize_downsample_sizes_nearest",
    "test_resize_upsample_sizes_nearest_floor_align_corners", "test_resize_upsample_scales_nearest_axes_3_2",
    # more ops torch has whole, or nearly
    "test_bitcast_float32_to_int32", "test_col2im_pads", "test_affine_grid_3d",
    "test_scatternd_multiply", "test_center_crop_pad_crop_and_pad",
    "test_center_crop_pad_crop_axes_hwc_expanded", "test_rotary_embedding_3d_input",
    "test_rotary_embedding_no_position_ids_rotary_dim",
    "test_rotary_embedding_expanded", "test_unique_not_sorted_without_axis",
    "test_causal_conv_with_state_silu_with_past_state",
    # reductions over empty run-time axes, of empty sets, of booleans
    "test_reduce_l1_default_axes_keepdims_example", "test_reduce_max_empty_set", "test_reduce_max_bool_inputs",
    "test_unsqueeze_three_axes",
    # recurrent layers with their weights given at run time
    "test_simple_rnn_bidirectional", "test_lstm_with_initial_bias",
    # Attention op by op where scaled_dot_product_attention cannot say it: softcap, the qk_matmul output, float16,
    # sliding windows with nonpad_kv_seqlen or a past; float16 MatMul and Softmax of the expansions
    "test_attention_4d_softcap", "test_attention_4d_with_qk_matmul_softmax", "test_attention_4d_fp16",
    "test_attention_local_window_ext_cache_rank2_mask", "test_attention_local_window_with_past",
    "test_attention_4d_fp16_expanded",
    # newer ops and modes torch has whole or in a few ops
    "test_gelu_tanh_1", "test_group_normalization_example", "test_swish", "test_spacetodepth_crd_mode_example",
    "test_isinf_float16", "test_celu_float16", "test_dropout_default_mask", "test_lrn", "test_mvn",
    "test_eyelike_populate_off_main_diagonal", "test_gridsample_volumetric_bilinear_align_corners_0",
    "test_tensorscatter_circular", "test_reversesequence_time", "test_compress_default_axis",
    "test_convtranspose_output_shape", "test_maxpool_with_argmax_2d_precomputed_strides",
    "test_qlinearmatmul_2D_int8_float16", "test_batchnorm_example_training_mode", "test_mod_float16_mixed_sign_fmod_0",
    # Resize in linear and cubic mode with run-time scales or sizes, op by op as the reference
    "test_resize_upsample_scales_linear_align_corners", "test_resize_downsample_scales_cubic_align_corners",
    "test_resize_upsample_scales_cubic_A_n0p5_exclude_outside",
    "test_resize_downsample_sizes_linear_pytorch_half_pixel",
    # Resize in nearest mode keeping the aspect ratio (one scale from the sizes at run time)
    "test_resize_upsample_sizes_nearest_not_larger", "test_resize_downsample_sizes_nearest_not_smaller",
    # Pad in edge, reflect and wrap mode with pads given at run time
    "test_edge_pad", "test_reflect_pad", "test_wrap_pad",
    # DeformConv: taps sampled with grid_sampler as the reference does, one matrix product
    "test_deform_conv_with_mask_bias", "test_deform_conv_with_multiple_offset_groups",
    # TfIdfVectorizer (TF, unigrams and bigrams with skips) as integer comparisons summed
    "test_tfidfvectorizer_tf_batch_uniandbigrams_skip5", "test_tfidfvectorizer_tf_onlybigrams_levelempty",
    "test_maxunpool_export_without_output_shape",
    # ONNX If through the control-flow pass
    "test_if",
    # recurrences of a static length unrolled before the table (GRU, linear_before_reset = 0)
    "test_gru_defaults", "test_gru_with_initial_bias", "test_gru_seq_length", "test_gru_reverse",
    "test_gru_bidirectional", "test_gru_batchwise", "test_scan9_sum", "test_scan9_multi_state", "test_scan9_scalar",
    "test_scan_sum",  # opset 8 (a batch axis), which the upgrade writes as Scan-9 between untyped Squeeze/Unsqueeze
    # LinearAttention's function body: a Scan over a length fixed by a Reshape to shapes computed from known shapes
    "test_linear_attention_linear_expanded", "test_linear_attention_gated_delta_gqa_expanded",
    # LinearAttention (opset 27) expanded into its function body ahead of the chain, then unrolled
    "test_linear_attention_linear", "test_linear_attention_gated_delta", "test_linear_attention_prefill_with_past",
    "test_linear_attention_fp16",
    # Resize-19's half_pixel_symmetric mode through the opset-18 rules
    "test_resize_downsample_scales_linear_half_pixel_symmetric",
    "test_resize_upsample_scales_linear_half_pixel_symmetric",
]
"""Cases the tables convert (each must convert and pass)."""

REFUSED = ["test_resize_tf_crop_and_resize", "test_div_uint64", "test_attention_4d_causal_bf16",
           "test_resize_downsample_scales_linear_antialias", "test_causal_conv_with_state_fp16", "test_col2im_5d",
           "test_lstm_with_peepholes", "test_convtranspose_autopad_same"]
"""Cases no rule converts exactly: Resize in tf_crop_and_resize mode (its region given at run time); uint64
division (no exact form in a type torch has kernels for); Attention in bfloat16; Resize with antialias (a filter
whose width follows the scale given at run time); float16 CausalConvWithState (the reference rounds the convolution
once, in float16); Col2Im over three axes (torch's col2im has two); LSTM with peepholes (torch's LSTM has none);
ConvTranspose whose SAME_UPPER pads crop the end only (torch crops both ends alike)."""


@pytest.fixture(scope="module")
def cases() -> dict[str, Any]:
    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for m in MODULES:
            importlib.import_module(f"onnx.backend.test.case.node.{m}")
    return {c.name: c for c in node._NodeTestCases}


def _attempt(bench: Any, tables: list[Any], case: Any) -> tuple[str, str]:
    from amanda_core.plugin.manager import registry

    outcome, why, _ = bench.amanda_case(case, tables, registry().namespaces)
    return outcome, why


@pytest.mark.parametrize("name", CONVERTS)
def test_converts_and_matches(bench: Any, tables: list[Any], cases: dict[str, Any], name: str) -> None:
    assert name in cases, f"no node case {name}"
    outcome, why = _attempt(bench, tables, cases[name])
    assert outcome == "passed", (outcome, why)


@pytest.mark.parametrize("name", REFUSED)
def test_inexact_is_refused(bench: Any, tables: list[Any], cases: dict[str, Any], name: str) -> None:
    outcome, why = _attempt(bench, tables, cases[name])
    assert outcome == "refused", (outcome, why)


def test_parts_merge_into_one_table(bench: Any) -> None:
    """Every part says ``part_of: onnx-to-torch``; merged, the constant rules (``onnx_to_torch_values.yaml``) come
    after every rule that reads constant inputs."""
    from amanda_core.mapping import load_table, merge_parts

    parts = [load_table(p, trusted=True) for p in bench.onnx_to_torch_files()]
    assert len(parts) >= 6 and all(t.part_of == "onnx-to-torch" for t in parts)
    (merged,) = merge_parts(parts)
    names = list(merged.rules)
    assert names[-2:] == ["initializer", "constant"]


def test_tables_check_against_both_schemas(bench: Any) -> None:
    from amanda_core.mapping import check_table, load_table
    from amanda_core.plugin.manager import registry

    for path in [*bench.onnx_to_torch_files(), *bench.onnx_ahead_files()]:
        errors, _ = check_table(load_table(path, trusted=True), registry().namespaces)
        assert errors == [], (path.name, errors)


def test_newest_ops_go_ahead_of_the_chain(bench: Any) -> None:
    """``onnx_newest_to_torch.yaml`` is one table that goes ahead of the opset chain (it reads opsets 19 and later,
    where AveragePool's dilations, AffineGrid, Attention, RMSNormalization and CumProd exist), not a part of
    ``onnx-to-torch``."""
    from amanda_core.mapping import load_table

    (path,) = bench.onnx_ahead_files()
    table = load_table(path, trusted=True)
    assert table.ahead and table.part_of is None and table.name == "onnx-newest-to-torch"
    assert {"attention", "rms_norm", "bitshift_signed", "mod_float_floor", "cumprod_runtime_axis", "bitcast",
            "affine_grid", "rotary_embedding", "causal_conv_with_state", "average_pool_dilated"} <= set(table.rules)


def test_helpers() -> None:
    from amanda_core.mapping.attrconv import (
        array_elem,
        broadcast_shape,
        conv_transpose_auto_pads,
        conv_transpose_padding,
        elem_kind,
        onnx_conv_pads,
        onnx_elem_dtype,
        shape_size,
        slice_plan,
        split_sizes,
        symmetric_pads,
        torch_pad_order,
    )

    assert onnx_conv_pads("NOTSET", None, None, [3, 3]) == [0, 0, 0, 0]
    assert onnx_conv_pads("SAME_UPPER", None, [5, 5], [2, 2]) == [0, 0, 1, 1]
    assert onnx_conv_pads("SAME_LOWER", None, [5, 5], [2, 2]) == [1, 1, 0, 0]
    assert onnx_conv_pads("SAME_UPPER", None, [None, 5], [2, 2]) is None
    assert symmetric_pads([1, 2, 1, 2]) == [1, 2] and symmetric_pads([1, 0, 0, 0]) is None
    assert torch_pad_order([0, 1, 2, 0, 3, 4]) == [2, 4, 1, 3]
    assert conv_transpose_padding([1, 1], [0], [2], [1]) == ([1], [0])
    assert conv_transpose_padding([1, 0], [0], [2], [1]) == ([1], [1])
    assert conv_transpose_padding([0, 1], [0], [2], [1]) is None
    # output_shape 10 from 3 at stride 3, kernel 3: a total of -1, the odd part at the end (a longer output)
    assert conv_transpose_auto_pads([3], [3], [3], None, None, [10], "NOTSET") == [0, -1]
    assert conv_transpose_auto_pads([3], [3], [2], None, None, None, "SAME_UPPER") == [0, 1]
    assert conv_transpose_auto_pads([3], [3], [2], None, None, None, "SAME_LOWER") == [1, 0]
    assert broadcast_shape([3, 1], [2, 1, 4]) == [2, 3, 4]
    with pytest.raises(ValueError):
        broadcast_shape([3], [4])
    assert split_sizes(7, 3) == [3, 3, 1] and split_sizes(None, 2) is None and split_sizes(6, 2, [1, 5]) == [1, 5]
    assert onnx_elem_dtype(1) == "float32" and onnx_elem_dtype(16) == "bfloat16"
    assert elem_kind("uint8") == "uint" and elem_kind(np.zeros(2, np.float16)) == "float"
    assert array_elem(np.zeros(2, np.int32)) == "int32" and array_elem(np.float64(1)) == "float64"
    assert array_elem(None) is None and array_elem([1, 2]) is None
    assert shape_size([2, 3, 4]) == 24 and shape_size([]) == 1
    plan = slice_plan([5, 4], [4], [0], [0], [-2])
    x = np.arange(20).reshape(5, 4)
    flipped = np.flip(x, plan["flip"])
    got = np.lib.stride_tricks.as_strided(np.ascontiguousarray(flipped).reshape(-1)[plan["offset"]:],
                                          plan["sizes"], [s * 8 for s in plan["strides"]])
    np.testing.assert_array_equal(got, x[4:0:-2])
