"""ONNX -> TensorFlow with amanda-onnx's ``onnx-static-if`` pass before ``onnx-to-tf``: AffineGrid's expanded body
asks ``Size(size) == 5`` of an input of static shape, and its branch splits ``size`` into one-element vectors
that a ``Range`` reads (TF's ``Range`` takes scalars: the ``range_one_element`` rule reshapes them).  This module
imports TensorFlow; it never imports torch."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("tensorflow")
onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402


def test_the_if_a_static_shape_decides_is_folded_and_the_case_matches(bench: Any) -> None:
    (case,) = bench.load_cases(["test_affine_grid_3d_expanded"])
    graph = bench.to_tf(case.model)
    assert not {"StatelessIf", "If"} & {op.type for op in graph}
    assert bench.attempt(case) == ("pass", "")


def _range_model(shape: list[int]) -> Any:
    vi = [helper.make_tensor_value_info(n, TensorProto.INT64, shape) for n in ("a", "b", "d")]
    graph = helper.make_graph([helper.make_node("Range", ["a", "b", "d"], ["y"])], "g", vi,
                              [helper.make_tensor_value_info("y", TensorProto.INT64, [None])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("shape", [[], [1]])
def test_range_of_scalars_and_of_one_element_vectors(bench: Any, shape: list[int]) -> None:
    import amanda_tf.runner as runner

    graph = bench.to_tf(_range_model(shape))
    feeds = {"a": np.array([2] if shape else 2, np.int64), "b": np.array([11] if shape else 11, np.int64),
             "d": np.array([3] if shape else 3, np.int64)}
    out = runner.run(graph, feeds)
    np.testing.assert_array_equal(np.asarray(out["y"]), np.arange(2, 11, 3))
