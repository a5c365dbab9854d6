"""The TF -> ONNX layout pass (``amanda_tf.layout``) on the patterns of Keras' ResNet50 and InceptionV3: how many
transposes and nodes are left, and that the result still computes what Keras computes (onnxruntime).

Never imports torch (this process imports TensorFlow).
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np
import pytest

from amanda_tf.layout import count_transposes, to_onnx

TOL = 1e-4


@pytest.fixture(scope="module")
def onnx_registry(tf_schema) -> Any:
    import amanda_onnx.plugin
    import amanda_tf.plugin
    from amanda_core.plugin import PluginManager

    pm = PluginManager(autoload=False)
    pm.register(amanda_tf.plugin, "amanda-tf")
    pm.register(amanda_onnx.plugin, "amanda-onnx")
    return pm.registry()


def _run(graph: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnx
    import onnxruntime as ort

    import amanda_onnx

    model = amanda_onnx.to_model(graph)
    onnx.checker.check_model(model)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: feeds[i.name] for i in sess.get_inputs()})


def _close(got: np.ndarray, ref: np.ndarray) -> None:
    assert got.shape == ref.shape
    diff = float(np.abs(got.astype(np.float64) - ref.astype(np.float64)).max())
    scale = max(float(np.abs(ref).max()), 1e-12)
    assert diff <= TOL and diff / scale <= TOL, f"max abs diff {diff}, relative {diff / scale}"


def _randomize_batch_norms(model: Any, seed: int = 0) -> None:
    import keras

    rng = np.random.default_rng(seed)
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            (c,) = {w.shape for w in layer.get_weights()}
            weights = [rng.normal(0, 0.5, c), rng.normal(0, 0.1, c), rng.uniform(0.5, 1.5, c)]  # beta, mean, var
            if layer.scale:
                weights.insert(0, rng.uniform(0.5, 1.5, c))  # gamma
            layer.set_weights(weights)


def _resnet_like(keepdims: bool = False) -> Any:
    """ResNet50's patterns at small size: zero padding + conv with bias + batch norm + relu, max pooling, a
    bottleneck block whose shortcut is a projection (conv + bn) and one whose shortcut is the identity, global
    average pooling (+ flatten when ``keepdims``), dense logits."""
    import keras
    from keras import layers

    keras.utils.set_random_seed(0)
    x = inp = keras.Input((20, 20, 3), name="image")
    x = layers.ZeroPadding2D(3)(x)
    x = layers.Conv2D(8, 7, strides=2)(x)
    x = layers.BatchNormalization(epsilon=1.001e-5)(x)
    x = layers.Activation("relu")(x)
    x = layers.ZeroPadding2D(1)(x)
    x = layers.MaxPooling2D(3, strides=2)(x)
    for projection in (True, False):
        shortcut = x
        if projection:
            shortcut = layers.BatchNormalization()(layers.Conv2D(16, 1)(x))
        y = layers.Activation("relu")(layers.BatchNormalization()(layers.Conv2D(4, 1)(x)))
        y = layers.Activation("relu")(layers.BatchNormalization()(layers.Conv2D(4, 3, padding="same")(y)))
        y = layers.BatchNormalization()(layers.Conv2D(16, 1)(y))
        x = layers.Activation("relu")(layers.Add()([shortcut, y]))
    x = layers.GlobalAveragePooling2D(keepdims=keepdims)(x)
    if keepdims:
        x = layers.Flatten()(x)
    out = layers.Dense(5, name="logits")(x)
    model = keras.Model(inp, out)
    _randomize_batch_norms(model)
    return model


@pytest.mark.parametrize("keepdims", [False, True])
def test_resnet_pattern(keepdims: bool, onnx_registry) -> None:
    from amanda_tf.importer import load_model

    model = _resnet_like(keepdims)
    graph, report = to_onnx(load_model(model), onnx_registry)
    assert report is not None and report.transposes_before > 10
    assert count_transposes(graph) <= 1, report.summary()
    types = collections.Counter(op.type for op in graph if op.type not in ("Initializer", "Constant"))
    # batch norms folded into the convolutions, the first zero pad into the first convolution, dense as Gemm
    assert types["Conv"] == 8 and types["Mul"] == 0 and types["Sub"] == 0, types
    assert types["Add"] == 2 and types["Gemm"] == 1 and types["Pad"] == 1, types
    for batch in (1, 3):
        x = np.random.default_rng(batch).standard_normal((batch, 20, 20, 3)).astype(np.float32)
        ref = model(x).numpy()
        assert float(np.abs(ref).max()) > 0.1
        (got,) = _run(graph, {"image": x})
        _close(got, ref)


def test_resnet_pattern_channels_first_inputs(onnx_registry) -> None:
    """With ``channels_first_inputs`` the graph input takes NCHW data and no transpose is left."""
    from amanda_tf.importer import load_model

    model = _resnet_like()
    graph, report = to_onnx(load_model(model), onnx_registry, channels_first_inputs=True)
    assert count_transposes(graph) == 0, report.summary()
    assert graph.input_ports["image"].dtype == "tensor(float)[?,3,20,20]"
    props = {p["key"]: p["value"] for p in graph.attrs["model_metadata_props"]}
    assert props == {"amanda.input_layout.image": "0,3,1,2"}
    x = np.random.default_rng(0).standard_normal((2, 20, 20, 3)).astype(np.float32)
    (got,) = _run(graph, {"image": np.ascontiguousarray(x.transpose(0, 3, 1, 2))})
    _close(got, model(x).numpy())


def test_inception_pattern(onnx_registry) -> None:
    """InceptionV3's patterns: conv without bias + batch norm without scale, branches of different kernels
    concatenated on channels, average pooling, max pooling, global pooling."""
    import keras
    from keras import layers

    keras.utils.set_random_seed(1)

    def conv_bn(t: Any, filters: int, kh: int, kw: int, strides: int = 1, padding: str = "same") -> Any:
        t = layers.Conv2D(filters, (kh, kw), strides=strides, padding=padding, use_bias=False)(t)
        return layers.Activation("relu")(layers.BatchNormalization(scale=False)(t))

    x = inp = keras.Input((17, 17, 3), name="image")
    x = conv_bn(x, 8, 3, 3, strides=2, padding="valid")
    x = layers.MaxPooling2D(3, strides=1)(x)
    b1 = conv_bn(x, 4, 1, 1)
    b2 = conv_bn(conv_bn(x, 4, 1, 1), 6, 1, 3)
    b2 = conv_bn(b2, 6, 3, 1)
    b3 = conv_bn(layers.AveragePooling2D(3, strides=1, padding="same")(x), 2, 1, 1)
    x = layers.concatenate([b1, b2, b3], axis=3)
    x = layers.GlobalAveragePooling2D()(x)
    out = layers.Dense(4, name="logits")(x)
    model = keras.Model(inp, out)
    _randomize_batch_norms(model)

    from amanda_tf.importer import load_model

    graph, report = to_onnx(load_model(model), onnx_registry)
    assert count_transposes(graph) <= 1, report.summary()
    types = collections.Counter(op.type for op in graph if op.type not in ("Initializer", "Constant"))
    assert types["Conv"] == 6 and types["Mul"] == 0 and types["Add"] == 0 and types["Concat"] == 1, types
    x = np.random.default_rng(0).standard_normal((2, 17, 17, 3)).astype(np.float32)
    (got,) = _run(graph, {"image": x})
    _close(got, model(x).numpy())


def test_reshape_and_squeeze_see_through_transposes(onnx_registry) -> None:
    """A transpose that only moves axes of size 1 is a reshape (dropped before a Reshape); a Squeeze takes the
    transpose below it with its axes remapped."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 3, 4, 6)).astype(np.float32)

    @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 4], tf.float32, name="x")])
    def f(x: Any) -> Any:
        y = tf.nn.relu(tf.nn.conv2d(x, w, 1, "SAME"))
        pooled = tf.reduce_mean(y, axis=[1, 2], keepdims=True)          # [N, 1, 1, 6]
        flat = tf.reshape(pooled, [-1, 6])                               # [N, 6]
        col = tf.squeeze(tf.reduce_max(y, axis=[2], keepdims=True), [2])  # [N, 8, 6]
        return flat * 2.0, tf.nn.softmax(col)

    from amanda_tf.importer import load_model

    graph, report = to_onnx(load_model(f), onnx_registry)
    x = rng.standard_normal((2, 8, 8, 4)).astype(np.float32)
    refs = [r.numpy() for r in f(x)]
    for got, ref in zip(_run(graph, {"x": x}), refs):
        _close(got, ref)
    # the input's transpose, and one before the softmax of the [N, 8, 6] output (NCW -> NWC), nothing more
    assert count_transposes(graph) == 2, report.summary()


def test_nested_concatenations_merge(onnx_registry) -> None:
    """Concatenations feeding only a concatenation on the same axis (InceptionV3's mixed9/mixed10, nested here
    two deep and with a negative axis) become one ``Concat``; transposes of one input by the same permutation
    (the graph input read by three convolutions) become one."""
    import keras
    from keras import layers

    keras.utils.set_random_seed(2)
    x = inp = keras.Input((9, 9, 3), name="image")
    a = layers.Conv2D(4, 1, activation="relu")(x)
    b = layers.Conv2D(3, 3, padding="same")(x)
    inner = layers.concatenate([layers.Conv2D(2, (1, 3), padding="same")(a),
                                layers.Conv2D(2, (3, 1), padding="same")(a)], axis=3)
    inner2 = layers.concatenate([b, layers.Conv2D(1, 1)(x)], axis=-1)
    x = layers.concatenate([a, inner, inner2], axis=3)
    x = layers.concatenate([x, layers.MaxPooling2D(3, 1, padding="same")(b)])
    shared = layers.concatenate([a, b])  # read twice: stays
    y = layers.Add()([layers.Conv2D(7, 1)(shared), layers.Conv2D(7, 3, padding="same")(shared)])
    x = layers.concatenate([layers.Conv2D(5, 1)(x), y])
    out = layers.Dense(3, name="logits")(layers.GlobalAveragePooling2D()(x))
    model = keras.Model(inp, out)

    from amanda_tf.importer import load_model

    graph, report = to_onnx(load_model(model), onnx_registry)
    types = collections.Counter(op.type for op in graph if op.type not in ("Initializer", "Constant"))
    assert types["Concat"] == 3, (types, report.summary())
    assert report.rewrites.get("concats merged") == 3, report.summary()
    assert count_transposes(graph) == 1, report.summary()
    (merged,) = [op for op in graph if op.type == "Concat" and len(op.input_ports) == 6]
    assert merged.attrs["axis"] == 1
    for batch in (1, 2):
        x = np.random.default_rng(batch).standard_normal((batch, 9, 9, 3)).astype(np.float32)
        (got,) = _run(graph, {"image": x})
        _close(got, model(x).numpy())
