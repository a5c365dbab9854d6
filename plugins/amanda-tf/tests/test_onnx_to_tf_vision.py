"""ONNX -> TensorFlow: vision and indexing corners (NonMaxSuppression, pooling in 3-D and with dilations, scatters
that multiply, ...) on node cases of the ONNX suite, and NonMaxSuppression on random inputs against onnx's
reference evaluator.

Each case is converted with ``bench/onnx_node_suite_tf.py``'s functions and run with TensorFlow against its
expected outputs.  This module imports TensorFlow; it never imports torch.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("onnx")

MODULES = ["nonmaxsuppression", "scatterelements", "scatternd", "spacetodepth", "maxpool", "maxunpool", "convtranspose",
           "ai_onnx_ml.tree_ensemble", "unique", "string_split", "resize"]
"""onnx's case modules the ``cases`` fixture generates."""

CONVERTS = [
    "test_nonmaxsuppression_flipped_coordinates", "test_nonmaxsuppression_limit_output_size",
    "test_nonmaxsuppression_single_box", "test_nonmaxsuppression_identical_boxes",
    "test_nonmaxsuppression_center_point_box_format", "test_nonmaxsuppression_two_classes",
    "test_nonmaxsuppression_two_batches", "test_nonmaxsuppression_iou_threshold_boundary",
    "test_scatter_elements_with_reduction_mul", "test_scatternd_multiply", "test_spacetodepth_crd_mode_example",
    "test_maxpool_with_argmax_2d_precomputed_pads", "test_maxpool_with_argmax_2d_precomputed_strides",
    "test_maxunpool_export_without_output_shape", "test_convtranspose_3d",
    "test_ai_onnx_ml_tree_ensemble_single_tree", "test_ai_onnx_ml_tree_ensemble_set_membership",
    "test_unique_sorted_with_axis", "test_unique_sorted_with_axis_3d", "test_unique_sorted_with_negative_axis",
    "test_string_split_maxsplit", "test_resize_downsample_scales_linear_antialias",
    "test_resize_downsample_scales_cubic_antialias",
]
"""Cases the tables convert (each must convert and pass)."""


@pytest.mark.parametrize("name", CONVERTS)
def test_converts_and_matches(bench: Any, cases: dict[str, Any], name: str) -> None:
    assert name in cases, f"no node case {name}"
    outcome, detail = bench.attempt(cases[name])
    assert outcome == "pass", detail


def _case(model: Any, feeds: list[Any], name: str, runtime: bool = False, expected: Any = None) -> Any:
    """A node case of ``model`` on ``feeds``, its expected outputs given or computed by onnx's reference evaluator
    (or by onnxruntime)."""
    names = [i.name for i in model.graph.input]
    if expected is not None:
        pass
    elif runtime:
        import onnxruntime as ort

        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        expected = session.run(None, dict(zip(names, feeds)))
    else:
        from onnx.reference import ReferenceEvaluator

        expected = ReferenceEvaluator(model).run(None, dict(zip(names, feeds)))

    class Case:
        rtol, atol = 0.0, 0.0

    Case.name = name
    Case.model = model
    Case.data_sets = [(feeds, expected)]
    return Case


def _nms_model(b: int, c: int, n: int, center: int, with_score_threshold: bool) -> Any:
    import onnx
    from onnx import TensorProto, helper

    ins = ["boxes", "scores", "m", "iou"] + (["st"] if with_score_threshold else [])
    node = helper.make_node("NonMaxSuppression", ins, ["y"], center_point_box=center)
    inputs = [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [b, n, 4]),
              helper.make_tensor_value_info("scores", TensorProto.FLOAT, [b, c, n]),
              helper.make_tensor_value_info("m", TensorProto.INT64, [1]),
              helper.make_tensor_value_info("iou", TensorProto.FLOAT, [1])]
    if with_score_threshold:
        inputs.append(helper.make_tensor_value_info("st", TensorProto.FLOAT, [1]))
    graph = helper.make_graph([node], "nms", inputs, [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    return onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]))


@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("with_score_threshold", [True, False])
def test_nms_random_against_reference(bench: Any, center: int, with_score_threshold: bool) -> None:
    """Random boxes on a coarse grid (equal scores, identical and touching boxes, IoUs exactly at the threshold),
    several batches and classes, caps from 0 to above the box count, thresholds from below 0 to above 1 and NaN."""
    import numpy as np

    rng = np.random.default_rng(7 + center + 2 * with_score_threshold)
    b, c, n = 2, 3, 9
    model = _nms_model(b, c, n, center, with_score_threshold)
    for trial, (cap, iou) in enumerate([(0, 0.5), (2, 0.0), (4, 1 / 3), (20, 0.5), (3, -0.5), (20, 1.5),
                                        (20, float("nan")), (5, 0.25)]):
        boxes = rng.integers(0, 5, size=(b, n, 4)).astype(np.float32)
        if center:
            boxes[..., 2:] = rng.integers(0, 4, size=(b, n, 2))   # widths and heights, some zero
        boxes[:, 1] = boxes[:, 0]                                 # identical boxes
        scores = rng.integers(0, 4, size=(b, c, n)).astype(np.float32) / 4   # many equal scores
        feeds = [boxes, scores, np.array([cap], np.int64), np.array([iou], np.float32)]
        if with_score_threshold:
            feeds.append(np.array([0.25], np.float32))
        assert bench.attempt(_case(model, feeds, f"nms_{trial}")) == ("pass", ""), trial


def _pool_model(op: str, shape: list[int], opset: int, **attrs: Any) -> Any:
    import onnx
    from onnx import TensorProto, helper

    node = helper.make_node(op, ["x"], ["y"], **attrs)
    graph = helper.make_graph([node], "pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))


POOLS = [
    ("AveragePool", [1, 2, 5, 6], 19, dict(kernel_shape=[2, 3], dilations=[2, 1], pads=[1, 0, 1, 1], strides=[2, 2],
                                           ceil_mode=1, count_include_pad=1)),
    ("AveragePool", [1, 2, 5, 6], 19, dict(kernel_shape=[2, 3], dilations=[2, 2], pads=[1, 1, 0, 2], strides=[1, 3],
                                           ceil_mode=1, count_include_pad=0)),
    ("AveragePool", [2, 1, 7, 5], 18, dict(kernel_shape=[3, 2], pads=[1, 1, 1, 0], strides=[3, 2], ceil_mode=1,
                                           count_include_pad=1)),
    ("AveragePool", [1, 2, 4, 5, 6], 19, dict(kernel_shape=[2, 2, 3], dilations=[1, 2, 2], pads=[0, 1, 1, 0, 0, 1],
                                              strides=[2, 1, 2], ceil_mode=1, count_include_pad=1)),
    ("AveragePool", [1, 2, 4, 5, 6], 18, dict(kernel_shape=[3, 2, 2], pads=[1, 1, 1, 1, 0, 1], strides=[2, 2, 3],
                                              ceil_mode=1, count_include_pad=0)),
    ("MaxPool", [1, 2, 5, 6, 7], 18, dict(kernel_shape=[2, 3, 2], dilations=[2, 1, 3], pads=[1, 0, 1, 0, 1, 1],
                                          strides=[2, 2, 1], ceil_mode=1)),
    ("LpPool", [1, 2, 5, 4, 6], 18, dict(kernel_shape=[2, 2, 3], dilations=[1, 2, 1], pads=[0, 1, 1, 1, 0, 1],
                                         strides=[1, 2, 2], p=3)),
]


@pytest.mark.parametrize("index", range(len(POOLS)))
def test_pools_by_axis_against_reference(bench: Any, index: int) -> None:
    """Windows with dilations, pads, ceil_mode and counted or uncounted padding, in 2-D and 3-D, against
    onnxruntime (onnx's reference evaluator places a dilated window over begin padding differently)."""
    import numpy as np

    op, shape, opset, attrs = POOLS[index]
    model = _pool_model(op, shape, opset, **attrs)
    x = np.random.default_rng(index).standard_normal(shape).astype(np.float32)
    case = _case(model, [x], f"{op}_{index}", runtime=True)
    case.rtol, case.atol = 1e-5, 1e-6
    assert bench.attempt(case) == ("pass", ""), attrs


@pytest.mark.parametrize("op", ["ScatterElements", "ScatterND"])
def test_scatter_mul_duplicates_against_reference(bench: Any, op: str) -> None:
    """reduction = mul with repeated and negative indices (int64: the products are exact in any order)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    if op == "ScatterElements":
        shapes, node = ([3, 4], [3, 5], [3, 5]), helper.make_node(op, ["x", "i", "u"], ["y"], axis=1, reduction="mul")
        idx = np.array([[0, 1, 1, -1, 3], [2, 2, 2, 0, -4], [1, 3, 0, 0, 1]], np.int64)
    else:
        shapes, node = ([4, 3, 2], [5, 1], [5, 3, 2]), helper.make_node(op, ["x", "i", "u"], ["y"], reduction="mul")
        idx = np.array([[0], [2], [-4], [3], [2]], np.int64)
    graph = helper.make_graph([node], "scatter", [helper.make_tensor_value_info("x", TensorProto.INT64, shapes[0]),
                                                  helper.make_tensor_value_info("i", TensorProto.INT64, shapes[1]),
                                                  helper.make_tensor_value_info("u", TensorProto.INT64, shapes[2])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    model = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    rng = np.random.default_rng(3)
    feeds = [rng.integers(-9, 9, size=shapes[0]), idx, rng.integers(-9, 9, size=shapes[2])]
    assert bench.attempt(_case(model, feeds, op)) == ("pass", "")


@pytest.mark.parametrize("storage_order", [0, 1])
def test_maxpool_indices_against_runtime(bench: Any, storage_order: int) -> None:
    """MaxPool's indices with pads, strides, dilations and many equal values (the first maximum in scan order),
    two batches and channels, against onnxruntime."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 2], pads=[1, 0, 1, 1], strides=[2, 1],
                            dilations=[1, 2], storage_order=storage_order)
    graph = helper.make_graph([node], "pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 6, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("i", TensorProto.INT64, None)])
    model = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)]))
    x = np.random.default_rng(storage_order).integers(0, 3, size=(2, 3, 6, 5)).astype(np.float32)
    assert bench.attempt(_case(model, [x], "maxpool_indices", runtime=True)) == ("pass", "")


def test_maxunpool_repeated_indices_against_reference(bench: Any) -> None:
    """MaxUnpool where two values go to one place (overlapping windows): the last one written stays."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    node = helper.make_node("MaxUnpool", ["x", "i"], ["y"], kernel_shape=[2, 2], strides=[1, 1])
    graph = helper.make_graph([node], "unpool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 2, 2]),
                                                 helper.make_tensor_value_info("i", TensorProto.INT64, [1, 2, 2, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]))
    x = np.array([[[[1, 2], [3, 4]], [[5, 6], [7, 8]]]], np.float32)
    i = np.array([[[[4, 4], [0, 8]], [[9, 10], [10, 17]]]], np.int64)
    assert bench.attempt(_case(model, [x, i], "maxunpool_repeated")) == ("pass", "")


@pytest.mark.parametrize("bias", [False, True])
def test_convtranspose_3d_against_runtime(bench: Any, bias: bool) -> None:
    """3-D ConvTranspose with strides, pads, output_padding (and a bias), against onnxruntime."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    ins = ["x", "w"] + (["b"] if bias else [])
    node = helper.make_node("ConvTranspose", ins, ["y"], strides=[2, 1, 3], pads=[1, 0, 1, 0, 1, 2],
                            output_padding=[1, 0, 2])
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 3, 4, 2]),
              helper.make_tensor_value_info("w", TensorProto.FLOAT, [3, 2, 2, 3, 3])]
    if bias:
        inputs.append(helper.make_tensor_value_info("b", TensorProto.FLOAT, [2]))
    graph = helper.make_graph([node], "ct", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    rng = np.random.default_rng(5)
    feeds = [rng.standard_normal((2, 3, 3, 4, 2)).astype(np.float32),
             rng.standard_normal((3, 2, 2, 3, 3)).astype(np.float32)] \
        + ([np.array([0.5, -2], np.float32)] if bias else [])
    case = _case(model, feeds, "convtranspose_3d", runtime=True)
    case.rtol, case.atol = 1e-5, 1e-5
    assert bench.attempt(case) == ("pass", "")


def _forest(rng: Any, trees: int, features: int, targets: int) -> dict[str, Any]:
    """Random trees in TreeEnsemble's attributes: every mode, set members, missing values tracking true."""
    attrs: dict[str, list[Any]] = {k: [] for k in ("modes", "splits", "features", "true", "false", "trueleaf",
                                                   "falseleaf", "tracks", "members", "targets", "weights", "roots")}
    values = [0.5, 1.0, 1.5, 2.0, 2.5]

    def leaf() -> int:
        attrs["targets"].append(int(rng.integers(targets)))
        attrs["weights"].append(float(rng.integers(-20, 20)) / 4)
        return len(attrs["weights"]) - 1

    def node(depth: int) -> int:
        i = len(attrs["modes"])
        mode = int(rng.integers(7))
        for key, v in (("modes", mode), ("splits", float(rng.choice(values))),
                       ("features", int(rng.integers(features))),
                       ("tracks", int(rng.integers(2))), ("true", 0), ("false", 0), ("trueleaf", 1), ("falseleaf", 1)):
            attrs[key].append(v)
        if mode == 6:
            attrs["members"] += [float(v) for v in rng.choice(values, size=int(rng.integers(1, 3)))] + [float("nan")]
        for side in ("true", "false"):
            if depth < 3 and rng.random() < 0.6:
                attrs[side][i], attrs[side + "leaf"][i] = node(depth + 1), 0
            else:
                attrs[side][i] = leaf()
        return i

    for _ in range(trees):
        attrs["roots"].append(node(0))
    return attrs


@pytest.mark.parametrize("aggregate", [0, 1])
def test_tree_ensemble_random_against_reference(bench: Any, aggregate: int) -> None:
    """Random forests (every comparison mode, set membership, NaN inputs going the true way where the node says
    so), SUM and AVERAGE, against onnx's reference evaluator."""
    import numpy as np
    from onnx import TensorProto, helper

    rng = np.random.default_rng(11 + aggregate)
    f = _forest(rng, trees=4, features=3, targets=2)
    node = helper.make_node(
        "TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml", n_targets=2, aggregate_function=aggregate,
        post_transform=0, tree_roots=f["roots"], nodes_featureids=f["features"],
        nodes_modes=helper.make_tensor("m", TensorProto.UINT8, [len(f["modes"])], f["modes"]),
        nodes_splits=helper.make_tensor("s", TensorProto.DOUBLE, [len(f["splits"])], f["splits"]),
        nodes_truenodeids=f["true"], nodes_falsenodeids=f["false"], nodes_trueleafs=f["trueleaf"],
        nodes_falseleafs=f["falseleaf"], nodes_missing_value_tracks_true=f["tracks"],
        membership_values=helper.make_tensor("v", TensorProto.DOUBLE, [len(f["members"])], f["members"])
        if f["members"] else None,
        leaf_targetids=f["targets"], leaf_weights=helper.make_tensor("w", TensorProto.DOUBLE, [len(f["weights"])],
                                                                      f["weights"]))
    graph = helper.make_graph([node], "forest", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [40, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [40, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("ai.onnx.ml", 5)])
    x = rng.choice([0.5, 1.0, 1.5, 2.0, 2.5, float("nan")], size=(40, 3))
    assert bench.attempt(_case(model, [x], "forest")) == ("pass", "")


@pytest.mark.parametrize("sort", [0, 1])
@pytest.mark.parametrize("elem", ["float32", "int64"])
def test_unique_axis_against_reference(bench: Any, sort: int, elem: str) -> None:
    """Unique along an axis: repeated slices, slices holding NaN (never duplicates), -0 beside 0, sorted or in
    order of first occurrence, every output, against numpy's unique (which onnx's reference evaluator calls; in
    order of first occurrence the reference gathers the slices along axis 0 whatever the axis, so the expected
    outputs are numpy's, reordered here)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    code = TensorProto.FLOAT if elem == "float32" else TensorProto.INT64
    node = helper.make_node("Unique", ["x"], ["y", "i", "inv", "c"], axis=1, sorted=sort)
    graph = helper.make_graph([node], "unique", [helper.make_tensor_value_info("x", code, [2, 7, 2])],
                              [helper.make_tensor_value_info(n, TensorProto.INT64 if n != "y" else code, None)
                               for n in ("y", "i", "inv", "c")])
    model = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    x = np.random.default_rng(sort).integers(-1, 2, size=(2, 7, 2)).astype(elem)
    x[:, 4] = x[:, 1]
    x[:, 6] = x[:, 2]
    if elem == "float32":
        x[0, 2, 1] = x[0, 6, 1] = np.nan
        x[1, 3, 0], x[1, 5, 0] = -0.0, 0.0
    y, first, inverse, counts = np.unique(x, True, True, True, axis=1)
    if not sort:
        order = np.argsort(first)
        y, first, counts = np.take(x, first[order], axis=1), first[order], counts[order]
        inverse = np.argsort(order)[inverse.reshape(-1)]
    expected = [y, first.astype(np.int64), inverse.reshape(-1).astype(np.int64), counts.astype(np.int64)]
    assert bench.attempt(_case(model, [x], "unique_axis", expected=expected)) == ("pass", "")


@pytest.mark.parametrize("maxsplit", [0, 1, 2, 4])
def test_string_split_maxsplit_against_reference(bench: Any, maxsplit: int) -> None:
    """StringSplit on whitespace with maxsplit: leading, trailing and repeated whitespace, Unicode spaces (kept as
    they are in the rest of the string), empty strings, rows with fewer words than maxsplit."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    node = helper.make_node("StringSplit", ["x"], ["y", "n"], maxsplit=maxsplit)
    graph = helper.make_graph([node], "split", [helper.make_tensor_value_info("x", TensorProto.STRING, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.STRING, None),
                               helper.make_tensor_value_info("n", TensorProto.INT64, None)])
    model = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]))
    x = np.array([["  a  b\u3000c  ", "", "one", "x\xa0y z\u2003 w\t"],
                  ["   ", "p q", "k\x1cl m n o p", "\u00e9t\u00e9  \u00e0 la  plage "]], dtype=object)
    assert bench.attempt(_case(model, [x], "string_split")) == ("pass", "")


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("ctm", ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                 "half_pixel_symmetric"])
def test_resize_antialias_runtime_scales_against_reference(bench: Any, mode: str, ctm: str) -> None:
    """Resize with antialias and scales given at run time (the tap count follows the scale): strong and mild
    downsampling, an upsampled axis, every coordinate transformation, against onnx's reference evaluator."""
    import numpy as np
    from onnx import TensorProto, helper

    scales = np.array([1, 1, 0.3, 1.6], np.float32) if ctm != "half_pixel" else np.array([1, 1, 0.7, 0.45], np.float32)
    out = [1, 1, int(9 * scales[2]), int(7 * scales[3])]
    node = helper.make_node("Resize", ["x", "", "s"], ["y"], mode=mode, antialias=1,
                            coordinate_transformation_mode=ctm)
    graph = helper.make_graph([node], "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 9, 7]),
                                                 helper.make_tensor_value_info("s", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)])
    opset = 19 if ctm == "half_pixel_symmetric" else 18
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    x = np.random.default_rng(1).standard_normal((1, 1, 9, 7)).astype(np.float32)
    case = _case(model, [x, scales], "resize_antialias")
    case.rtol, case.atol = 1e-5, 1e-6
    assert bench.attempt(case) == ("pass", "")


def test_inexact_forms_are_refused(bench: Any) -> None:
    """Forms without an exact rule are refused, never converted: NonMaxSuppression without its
    max_output_boxes_per_class input, a TreeEnsemble taking the minimum over its trees."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    nms = helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["y"])
    graph = helper.make_graph([nms], "nms", [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 3, 4]),
                                             helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 1, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    model = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]))
    feeds = [np.zeros((1, 3, 4), np.float32), np.zeros((1, 1, 3), np.float32)]
    outcome, detail = bench.attempt(_case(model, feeds, "nms_no_cap", expected=[np.zeros((0, 3), np.int64)]))
    assert outcome == "refused" and "NonMaxSuppression" in detail, (outcome, detail)

    rng = np.random.default_rng(2)
    f = _forest(rng, trees=2, features=2, targets=1)
    tree = helper.make_node(
        "TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml", n_targets=1, aggregate_function=2, post_transform=0,
        tree_roots=f["roots"], nodes_featureids=f["features"],
        nodes_modes=helper.make_tensor("m", TensorProto.UINT8, [len(f["modes"])], f["modes"]),
        nodes_splits=helper.make_tensor("s", TensorProto.DOUBLE, [len(f["splits"])], f["splits"]),
        nodes_truenodeids=f["true"], nodes_falsenodeids=f["false"], nodes_trueleafs=f["trueleaf"],
        nodes_falseleafs=f["falseleaf"], leaf_targetids=f["targets"],
        membership_values=helper.make_tensor("v", TensorProto.DOUBLE, [len(f["members"])], f["members"])
        if f["members"] else None,
        leaf_weights=helper.make_tensor("w", TensorProto.DOUBLE, [len(f["weights"])], f["weights"]))
    graph = helper.make_graph([tree], "forest", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [4, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [4, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("ai.onnx.ml", 5)])
    outcome, detail = bench.attempt(_case(model, [np.ones((4, 2))], "forest_min", expected=[np.zeros((4, 1))]))
    assert outcome == "refused" and "TreeEnsemble" in detail, (outcome, detail)
