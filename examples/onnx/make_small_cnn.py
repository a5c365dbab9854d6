"""Build the bundled example model: a small image classifier written at ONNX opset 11.

It is made of ops whose schemas changed after opset 11, so upgrading it exercises real conversion rules:
Squeeze, Unsqueeze and ReduceSum take ``axes`` as an input from opset 13 (an attribute at 11), Split takes
``split`` as an input from 13, ReduceMean takes ``axes`` as an input from 18, Softmax changes its axis semantics
at 13, and BatchNormalization, Conv, Relu, MaxPool, Gemm and Concat are carried through their own versions.
Weights are random with a fixed seed, so the file is the same every time.

    python examples/onnx/make_small_cnn.py examples/onnx/small_cnn_opset11.onnx
"""

from __future__ import annotations

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build() -> onnx.ModelProto:
    rng = np.random.default_rng(2024)

    def init(name: str, *shape: int, scale: float = 0.1) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [
        init("conv1.weight", 8, 3, 3, 3), init("conv1.bias", 8),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "bn.scale"),
        init("bn.bias", 8), init("bn.mean", 8),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "bn.var"),
        init("conv2.weight", 8, 4, 3, 3), init("fc.weight", 10, 12), init("fc.bias", 10),
    ]
    nodes = [
        helper.make_node("Conv", ["image", "conv1.weight", "conv1.bias"], ["c1"], name="conv1",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "bn.scale", "bn.bias", "bn.mean", "bn.var"], ["b1"], name="bn",
                         epsilon=1e-5),
        helper.make_node("Relu", ["b1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Split", ["p1"], ["s1", "s2"], name="split", axis=1, split=[4, 4]),
        helper.make_node("Conv", ["s1", "conv2.weight"], ["c2"], name="conv2", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         group=1),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("ReduceMean", ["r2"], ["m2"], name="pool2", axes=[2, 3], keepdims=1),
        helper.make_node("ReduceSum", ["s2"], ["m3"], name="sum3", axes=[2, 3], keepdims=1),
        helper.make_node("Concat", ["m2", "m3"], ["cat"], name="concat", axis=1),
        helper.make_node("Squeeze", ["cat"], ["flat"], name="squeeze", axes=[2, 3]),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1),
        helper.make_node("Unsqueeze", ["probs"], ["probs3d"], name="unsqueeze", axes=[1]),
    ]
    graph = helper.make_graph(
        nodes, "small_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, 16, 16])],
        [helper.make_tensor_value_info("probs3d", TensorProto.FLOAT, ["batch", 1, 10])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], producer_name="amanda-example",
                              ir_version=6)
    onnx.checker.check_model(model, full_check=True)
    return model


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        raise SystemExit(__doc__)
    onnx.save(build(), argv[0])


if __name__ == "__main__":
    main(sys.argv[1:])
