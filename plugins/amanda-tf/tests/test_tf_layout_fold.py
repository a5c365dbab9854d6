"""Constant folding on the TF graph before ``tf-to-onnx`` (``amanda_tf.fold``): what it folds, what it leaves, and
that the folded values are TensorFlow's.

Never imports torch (this process imports TensorFlow).
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np

from amanda_tf.fold import fold_constants


def _types(graph: Any) -> collections.Counter[str]:
    return collections.Counter(op.type for op in graph)


def test_folds_constant_chains_and_keeps_the_rest(tf_schema) -> None:
    import tensorflow as tf

    from amanda_tf.importer import load_model
    from amanda_tf.runner import run

    rng = np.random.default_rng(0)
    var = rng.uniform(0.5, 1.5, (6,)).astype(np.float32)
    gamma = rng.standard_normal((6,)).astype(np.float32)
    table = rng.standard_normal((2, 3)).astype(np.float32)
    counts = np.asarray([3, 4], np.int32)

    @tf.function(input_signature=[tf.TensorSpec([None, 6], tf.float32, name="x")])
    def f(x: Any) -> Any:
        scale = tf.math.rsqrt(tf.reshape(var, [1, 6]) + 1e-3) * tf.reshape(gamma, [1, 6])  # Keras' batch norm
        bias = tf.squeeze(tf.expand_dims(tf.transpose(table), 0), [0])                   # [3, 2]
        n = counts * 2 - 1                                                                   # integer arithmetic
        return x * scale, tf.reshape(bias, [-1]) + tf.reduce_sum(x), tf.cast(n, tf.float32) * tf.sqrt(x[:, :2] ** 2)

    graph = load_model(f)
    before = _types(graph)
    assert before["Rsqrt"] == 1 and before["Reshape"] >= 3 and before["Squeeze"] == 1
    folded = fold_constants(graph)
    after = _types(graph)
    assert folded >= 9, (folded, after)
    # nothing computing from constants alone is left; what reads the input stays
    for t in ("Rsqrt", "Squeeze", "ExpandDims", "Transpose", "Sub"):
        assert after[t] == 0, after
    assert after["Reshape"] == 0 and after["Sqrt"] == 1 and after["Mul"] == 2 and after["Cast"] == 1, after
    (scale,) = [op for op in graph if op.type == "Mul" and op.input_ports[0].source.op is None]
    const = scale.input_ports[1].source.op
    assert const.type == "Const" and const.output_ports[0].dtype == "float32[1,6]"
    assert not const.attrs["value"].flags.writeable
    x = rng.standard_normal((3, 6)).astype(np.float32)
    got = list(run(graph, {"x": x}).values())
    for g, r in zip(got, f(x)):
        np.testing.assert_allclose(g, r.numpy(), rtol=1e-6, atol=1e-6)


def test_to_onnx_runs_the_pass_first(tf_schema) -> None:
    """Through ``to_onnx`` the folded ops never reach the table: a batch norm's statistics arrive as two constants
    folded into the convolution, and the layout pass has no constant left to fold."""
    import keras

    from amanda_tf.importer import load_model
    from amanda_tf.layout import to_onnx

    keras.utils.set_random_seed(0)
    inp = keras.Input((8, 8, 3), name="image")
    x = keras.layers.BatchNormalization()(keras.layers.Conv2D(4, 3)(inp))
    model = keras.Model(inp, keras.layers.GlobalAveragePooling2D()(x))
    model.layers[2].set_weights([np.full(4, 2.0, np.float32), np.full(4, 0.5, np.float32),
                                 np.full(4, 0.1, np.float32), np.full(4, 4.0, np.float32)])
    graph, report = to_onnx(load_model(model))
    assert "constants folded" not in report.summary(), report.summary()
    assert _types(graph)["Conv"] == 1 and _types(graph)["Mul"] == 0 and _types(graph)["Add"] == 0
    import onnxruntime as ort

    import amanda_onnx

    sess = ort.InferenceSession(amanda_onnx.to_model(graph).SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).standard_normal((2, 8, 8, 3)).astype(np.float32)
    (got,) = sess.run(None, {"image": x})
    np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-5, atol=1e-5)


def test_layout_pass_keeps_folded_scalars_scalar() -> None:
    """A constant the ONNX-side pass folds keeps its rank, 0-d included (a [1] would change the rank of what a
    0-d input broadcasts with)."""
    from amanda_core import Graph
    from amanda_tf.layout import optimize

    g = Graph(namespace="amanda/onnx/18")
    x = g.add_input_port("x", "tensor(float)[]")
    four = g.add_op("Initializer", "four", outputs=["output"], attrs={"value": np.asarray(4.0, np.float32)})
    sqrt = g.add_op("Sqrt", "sqrt", inputs=["X"], outputs=["Y"], sources=[four.output_ports[0]])
    add = g.add_op("Add", "add", inputs=["A", "B"], outputs=["C"], sources=[x, sqrt.output_ports[0]])
    g.add_output_port("y").dtype = "tensor(float)[]"
    g.connect(add.output_ports[0], g.output_ports[0])
    report = optimize(g)
    assert report.rewrites.get("constants folded") == 1, report.summary()
    (const,) = [op for op in g if op.type == "Initializer"]
    assert const.attrs["value"].shape == () and float(const.attrs["value"]) == 2.0
