"""ONNX -> TensorFlow: Resize with run-time scales or aspect-kept sizes, GridSample, AffineGrid, Col2Im, Unique and
DeformConv (``onnx_to_tf_resize_runtime.yaml``, ``onnx_to_tf_gridsample.yaml``, ``onnx_to_tf_sampling.yaml``,
``onnx_to_tf_unique.yaml`` and their ahead-of-the-chain parts) on some node cases, and against onnx's reference
evaluator on inputs the node cases do not reach (grids far outside [-1, 1], scales whose coordinates differ from
out / in, NaNs in Unique, offsets reaching outside the input).  The full run is ``.venv/bin/python
bench/onnx_node_suite_tf.py -k resize -k gridsample -k affine_grid -k col2im -k unique -k deform``.
This module imports TensorFlow; it never imports torch.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("onnx")

MODULES = ["resize", "gridsample", "affinegrid", "col2im", "unique", "deformconv"]
"""The node-case modules generated for :data:`CASES` (the ``cases`` fixture)."""

CASES = ["test_resize_downsample_scales_cubic_A_n0p5_exclude_outside", "test_resize_upsample_scales_nearest_axes_3_2",
         "test_deform_conv_with_multiple_offset_groups",
         "test_resize_downsample_sizes_nearest_not_smaller", "test_resize_upsample_scales_linear_half_pixel_symmetric",
         "test_resize_tf_crop_and_resize_axes_3_2", "test_resize_tf_crop_and_resize_extrapolation_value",
         "test_gridsample_bicubic_align_corners_1_additional_1", "test_gridsample_reflection_padding",
         "test_gridsample_volumetric_bilinear_align_corners_0", "test_affine_grid_3d_align_corners",
         "test_col2im", "test_col2im_5d", "test_unique_not_sorted_without_axis", "test_unique_sorted_without_axis",
         "test_resize_downsample_scales_cubic_antialias", "test_resize_downsample_scales_linear_antialias",
         "test_unique_sorted_with_axis"]
"""Node cases that convert and pass (test_col2im: two block shapes fit its shapes, the run-time one picks)."""

REFUSED = ["test_unique_bfloat16_sorted_without_axis"]
"""Unique in bfloat16 (no rule; onnxruntime fails it too): refused."""


@pytest.mark.parametrize("name", CASES + REFUSED)
def test_node_cases(bench: Any, cases: dict[str, Any], name: str) -> None:
    assert name in cases, f"no node case {name}"
    outcome, detail = bench.attempt(cases[name])
    assert outcome == ("refused" if name in REFUSED else "pass"), (outcome, detail)


def _check(bench: Any, node: Any, inputs: dict[str, Any], out_shape: list[int], opset: int) -> None:
    """The one-node model converted and run by TF equals onnx's reference evaluator (float32 rounding apart)."""
    import onnx
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    feeds = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
             for k, v in inputs.items()]
    result = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, out_shape)
    graph = helper.make_graph([node], "g", feeds, [result])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    expected = ReferenceEvaluator(model).run(None, inputs)
    assert list(expected[0].shape) == out_shape

    class Case:
        name = node.name
        rtol, atol = 1e-5, 1e-6

    Case.model = onnx.shape_inference.infer_shapes(model)
    Case.data_sets = [([numpy_helper.from_array(v) for v in inputs.values()], expected)]
    assert bench.attempt(Case) == ("pass", ""), node


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_gridsample_far_outside(bench: Any, mode: str) -> None:
    """Grids reaching 3x past the borders, every padding mode, both align_corners."""
    import numpy as np
    from onnx import helper

    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    grid = rng.uniform(-3.2, 3.2, (2, 3, 6, 2)).astype(np.float32)
    grid[0, 0, :3] = [[-1, -1], [1, 1], [0.5, -0.25]]  # on the corners and between pixels
    for pad in ("zeros", "border", "reflection"):
        for ac in (0, 1):
            node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=pad,
                                    align_corners=ac, name=f"gridsample_{mode}_{pad}_{ac}")
            _check(bench, node, {"x": x, "grid": grid}, [2, 3, 3, 6], 20)


def test_resize_runtime_scales(bench: Any) -> None:
    """Scales whose coordinates are not out / in (7 * 0.7 = 4.9 -> 4), every coordinate transformation."""
    import numpy as np
    from onnx import helper

    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 1, 5, 7)).astype(np.float32)
    scales = np.array([1, 1, 1.3, 0.7], np.float32)
    for mode, extra in [("nearest", {"nearest_mode": "round_prefer_ceil"}), ("nearest", {"nearest_mode": "floor"}),
                        ("linear", {}), ("cubic", {"exclude_outside": 1, "cubic_coeff_a": -0.5}), ("cubic", {})]:
        for ctm in ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"):
            node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode,
                                    coordinate_transformation_mode=ctm, name=f"resize_{mode}_{ctm}", **extra)
            _check(bench, node, {"x": x, "scales": scales}, [1, 1, 6, 4], 18)


def test_resize_crop_run_time_roi(bench: Any) -> None:
    """tf_crop_and_resize with a run-time region reaching outside the input (extrapolated), every mode."""
    import numpy as np
    from onnx import helper

    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 1, 5, 7)).astype(np.float32)
    roi = np.array([0, 0, -0.2, 0.1, 1, 1, 0.9, 1.3], np.float32)
    sizes = np.array([1, 1, 4, 9], np.int64)
    for mode in ("nearest", "linear", "cubic"):
        node = helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], mode=mode, extrapolation_value=-7.5,
                                coordinate_transformation_mode="tf_crop_and_resize", name=f"resize_crop_{mode}")
        _check(bench, node, {"x": x, "roi": roi, "sizes": sizes}, [1, 1, 4, 9], 18)


@pytest.mark.parametrize("srt", [1, 0])
def test_unique_nan_and_signed_zero(bench: Any, srt: int) -> None:
    """Unique without an axis: NaNs are one value (after every number when sorted), -0 equals 0, as numpy's unique
    in the reference; all four outputs."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    x = np.array([3.0, np.nan, -0.0, 1.5, 0.0, 3.0, np.nan, -2.0, 1.5, -2.0, 7.0, np.nan], np.float32)
    if srt:  # the reference's sorted = 0 reads a flattened position from the input as it is: 1-D only
        x = x.reshape(3, 4)
    node = helper.make_node("Unique", ["x"], ["y", "ix", "inv", "cnt"], sorted=srt)
    outs = [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)] + [
        helper.make_tensor_value_info(n, onnx.TensorProto.INT64, None) for n in ("ix", "inv", "cnt")]
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)], outs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    expected = ReferenceEvaluator(model).run(None, {"x": x})
    assert len(expected[0]) == 6

    class Case:
        name = f"unique_{srt}"
        rtol, atol = 0.0, 0.0

    Case.model = onnx.shape_inference.infer_shapes(model)
    Case.data_sets = [([numpy_helper.from_array(x)], expected)]
    assert bench.attempt(Case) == ("pass", "")


def test_deform_conv_against_reference(bench: Any) -> None:
    """DeformConv-19 with offsets reaching outside the input, strides, dilations, uneven pads, two offset groups,
    a mask and a bias, two batch entries."""
    import numpy as np
    from onnx import helper

    rng = np.random.default_rng(4)
    feeds = {"x": rng.standard_normal((2, 4, 5, 6)).astype(np.float32),
             "w": rng.standard_normal((3, 4, 2, 3)).astype(np.float32),
             "off": (3 * rng.standard_normal((2, 2 * 2 * 3 * 2, 2, 2))).astype(np.float32),
             "b": rng.standard_normal(3).astype(np.float32),
             "m": rng.random((2, 2 * 2 * 3, 2, 2)).astype(np.float32)}
    node = helper.make_node("DeformConv", ["x", "w", "off", "b", "m"], ["y"], kernel_shape=[2, 3], offset_group=2,
                            pads=[1, 0, 0, 1], strides=[2, 3], dilations=[2, 1], name="deform_conv")
    _check(bench, node, feeds, [2, 3, 2, 2], 19)
