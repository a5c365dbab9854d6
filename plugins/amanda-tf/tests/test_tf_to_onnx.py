"""TF -> ONNX: the ``tf-to-onnx`` table and the layout pass, checked in onnxruntime against TensorFlow/Keras.

Never imports torch (this process imports TensorFlow).
"""

from __future__ import annotations

import collections
import os
from typing import Any

import numpy as np
import pytest

from amanda_core.mapping import ConversionError
from amanda_tf.layout import count_transposes, to_onnx

TOL = 1e-4


@pytest.fixture(scope="module")
def tf_registry(tf_schema) -> Any:
    """The amanda-tf and amanda-onnx plugins (the TF -> ONNX conversion needs both namespaces)."""
    import amanda_onnx.plugin
    import amanda_tf.plugin
    from amanda_core.plugin import PluginManager

    pm = PluginManager(autoload=False)
    pm.register(amanda_tf.plugin, "amanda-tf")
    pm.register(amanda_onnx.plugin, "amanda-onnx")
    return pm.registry()


def _run_onnx(graph: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnx
    import onnxruntime as ort

    import amanda_onnx

    model = amanda_onnx.to_model(graph)
    onnx.checker.check_model(model)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return sess.run(None, {n: feeds[n] for n in names})


def _close(got: np.ndarray, ref: np.ndarray) -> None:
    assert got.shape == ref.shape
    diff = float(np.abs(got.astype(np.float64) - ref.astype(np.float64)).max()) if ref.size else 0.0
    scale = max(float(np.abs(ref).max()), 1e-12) if ref.size else 1.0
    assert diff <= TOL or diff / scale <= TOL, f"max abs diff {diff}, relative {diff / scale}"


def _check(fn: Any, feeds: dict[str, np.ndarray], tf_registry: Any, max_transposes: int | None = None) -> Any:
    from amanda_tf.importer import load_model

    graph = load_model(fn)
    onnx_graph, report = to_onnx(graph, tf_registry)
    refs = fn(**feeds) if not hasattr(fn, "layers") else fn(list(feeds.values())[0])
    refs = list(refs.values()) if isinstance(refs, dict) else refs if isinstance(refs, (list, tuple)) else [refs]
    got = _run_onnx(onnx_graph, feeds)
    for g, r in zip(got, refs):
        _close(g, np.asarray(r))
    if max_transposes is not None:
        assert count_transposes(onnx_graph) <= max_transposes, report.summary()
    return onnx_graph


# ------------------------------------------------------------------ Keras models

MOBILENET_TRANSPOSES = 1
"""Transposes left on MobileNetV2 after the layout pass (measured: one, NHWC -> NCHW at the graph input;
tf2onnx 1.17 opset 17 leaves one too)."""


@pytest.fixture(scope="module")
def mobilenet() -> Any:
    import keras

    keras.utils.set_random_seed(0)
    # logits (no softmax): random weights give a uniform softmax, which would hide any error
    model = keras.applications.MobileNetV2(weights=None, input_shape=(96, 96, 3), classifier_activation=None)
    _randomize_batch_norms(model)
    return model


def _randomize_batch_norms(model: Any) -> None:
    """Random batch-norm statistics and scales: with Keras' initial ones the logits of a random network vanish
    (about 1e-11), and the folding of the statistics into the convolutions would go untested."""
    import keras

    rng = np.random.default_rng(0)
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            (c,) = {w.shape for w in layer.get_weights()}  # InceptionV3's have no scale (gamma)
            weights = [rng.uniform(1.5, 4.5, c)] if layer.scale else []
            weights += [rng.normal(0, 0.5, c)] if layer.center else []
            layer.set_weights(weights + [rng.normal(0, 0.1, c), rng.uniform(0.5, 1.5, c)])


def test_mobilenet_v2_symbolic_batch(mobilenet, tf_registry) -> None:
    from amanda_tf.importer import load_model

    graph = load_model(mobilenet)
    onnx_graph, report = to_onnx(graph, tf_registry)
    assert count_transposes(onnx_graph) == MOBILENET_TRANSPOSES, report.summary()
    assert report.transposes_before > 100
    types = collections.Counter(op.type for op in onnx_graph)
    assert types["Conv"] == 52 and "BatchNormalization" not in types and types["Mul"] == 0
    name = onnx_graph.input_ports[0].name
    for batch in (1, 3):
        x = np.random.default_rng(batch).standard_normal((batch, 96, 96, 3)).astype(np.float32)
        ref = mobilenet(x).numpy()
        assert float(np.abs(ref).max()) > 0.1
        (got,) = _run_onnx(onnx_graph, {name: x})
        _close(got, ref)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("AMANDA_SLOW"), reason="slow: set AMANDA_SLOW=1")
@pytest.mark.parametrize("app,size", [("ResNet50", 224), ("InceptionV3", 299)])
def test_keras_applications(app: str, size: int, tf_registry) -> None:
    import keras

    from amanda_tf.importer import load_model

    keras.utils.set_random_seed(0)
    model = getattr(keras.applications, app)(weights=None, input_shape=(size, size, 3), classifier_activation=None)
    _randomize_batch_norms(model)
    onnx_graph, report = to_onnx(load_model(model), tf_registry)
    assert count_transposes(onnx_graph) <= 1, report.summary()
    for batch in (1, 3):
        x = np.random.default_rng(batch).standard_normal((batch, size, size, 3)).astype(np.float32)
        (got,) = _run_onnx(onnx_graph, {onnx_graph.input_ports[0].name: x})
        _close(got, model(x).numpy())


# ------------------------------------------------------------------ per op

def _fn(body: Any, *specs: Any) -> Any:
    import tensorflow as tf

    return tf.function(body, input_signature=[tf.TensorSpec(s, d, name=n) for n, s, d in specs])


RNG = np.random.default_rng(0)
IMG = RNG.standard_normal((2, 9, 10, 4)).astype(np.float32)


@pytest.mark.parametrize("strides,padding,dilations", [
    (1, "SAME", 1), (2, "SAME", 1), (2, "VALID", 1), (1, "VALID", 2), (1, "SAME", 2), (3, "SAME", 1),
    (1, [[0, 0], [1, 2], [0, 3], [0, 0]], 1),
])
def test_conv2d(strides, padding, dilations, tf_registry) -> None:
    import tensorflow as tf

    w = RNG.standard_normal((3, 3, 4, 5)).astype(np.float32)
    f = _fn(lambda x: tf.nn.relu(tf.nn.conv2d(x, w, strides, padding, dilations=dilations)),
            ("x", [None, 9, 10, 4], tf.float32))
    g = _check(f, {"x": IMG}, tf_registry, max_transposes=2)
    assert any(op.type == "Conv" for op in g)


@pytest.mark.parametrize("strides,padding,mult", [(1, "SAME", 1), (2, "VALID", 2), (2, "SAME", 3)])
def test_depthwise_conv2d(strides, padding, mult, tf_registry) -> None:
    import tensorflow as tf

    w = RNG.standard_normal((3, 3, 4, mult)).astype(np.float32)
    f = _fn(lambda x: tf.nn.depthwise_conv2d(x, w, [1, strides, strides, 1], padding),
            ("x", [None, 9, 10, 4], tf.float32))
    _check(f, {"x": IMG}, tf_registry, max_transposes=2)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("ksize,strides,padding", [(2, 2, "VALID"), (3, 2, "SAME"), (3, 1, "SAME")])
def test_pool(kind, ksize, strides, padding, tf_registry) -> None:
    import tensorflow as tf

    pool = tf.nn.max_pool2d if kind == "max" else tf.nn.avg_pool2d
    f = _fn(lambda x: pool(x, ksize, strides, padding), ("x", [None, 9, 10, 4], tf.float32))
    _check(f, {"x": IMG}, tf_registry, max_transposes=2)


def test_conv_chain_leaves_input_and_output_transposes_only(tf_registry) -> None:
    """conv -> bias -> relu6 -> pad -> depthwise -> scale/shift -> add -> mean: only the boundary transposes stay."""
    import tensorflow as tf

    w1 = RNG.standard_normal((3, 3, 4, 6)).astype(np.float32)
    b1 = RNG.standard_normal((6,)).astype(np.float32)
    w2 = RNG.standard_normal((3, 3, 6, 1)).astype(np.float32)
    s = RNG.standard_normal((6,)).astype(np.float32)

    def body(x):
        y = tf.nn.relu6(tf.nn.bias_add(tf.nn.conv2d(x, w1, 1, "SAME"), b1))
        z = tf.nn.depthwise_conv2d(tf.pad(y, [[0, 0], [1, 1], [1, 1], [0, 0]]), w2, [1, 1, 1, 1], "VALID")
        z = z * s - 0.5
        return tf.reduce_mean(tf.concat([y + z, tf.sqrt(tf.abs(y))], axis=3), axis=[1, 2])

    f = _fn(body, ("x", [None, 9, 10, 4], tf.float32))
    g = _check(f, {"x": IMG}, tf_registry)
    assert count_transposes(g) == 1  # the graph input's NHWC -> NCHW


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_elementwise_and_shapes(dtype, tf_registry) -> None:
    import tensorflow as tf

    a = (RNG.standard_normal((3, 4)) * 5).astype(dtype)
    tfd = tf.as_dtype(dtype)

    def body(x, y):
        s = tf.maximum(x, y) - tf.minimum(x, y) * 2 + tf.reshape(tf.transpose(x), [3, 4])
        r = tf.reduce_sum(s, axis=1, keepdims=True)
        return tf.concat([s, r], axis=1), tf.squeeze(tf.expand_dims(s, 0), [0]), tf.cast(s > 0, tf.float32)

    f = _fn(body, ("x", [3, 4], tfd), ("y", [3, 4], tfd))
    _check(f, {"x": a, "y": a[::-1].copy()}, tf_registry)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True)])
def test_matmul_softmax(ta, tb, tf_registry) -> None:
    import tensorflow as tf

    w = RNG.standard_normal((5, 4) if tb else (4, 5)).astype(np.float32)
    x = RNG.standard_normal((4, 3) if ta else (3, 4)).astype(np.float32)
    f = _fn(lambda x: tf.nn.softmax(tf.matmul(x, w, transpose_a=ta, transpose_b=tb) + 1.0),
            ("x", list(x.shape), tf.float32))
    _check(f, {"x": x}, tf_registry)


def test_unary_activations(tf_registry) -> None:
    import tensorflow as tf

    x = RNG.standard_normal((2, 7)).astype(np.float32)

    def body(x):
        return (tf.sigmoid(x), tf.tanh(x), tf.nn.elu(x), tf.nn.leaky_relu(x, 0.3), tf.math.rsqrt(tf.abs(x) + 1),
                tf.square(x), tf.math.squared_difference(x, 1.0), tf.nn.log_softmax(x), tf.exp(x), tf.nn.softplus(x))

    _check(_fn(body, ("x", [None, 7], tf.float32)), {"x": x}, tf_registry)


def test_unmapped_op_is_reported_by_name_and_count(tf_registry) -> None:
    import tensorflow as tf

    from amanda_tf.importer import load_model

    f = _fn(lambda x: tf.math.cumprod(tf.math.cumprod(x, axis=1), axis=0) + 1.0, ("x", [2, 3], tf.float32))
    with pytest.raises(ConversionError, match=r"2 x Cumprod"):
        to_onnx(load_model(f), tf_registry)
