"""Deterministic TensorFlow models for the amanda-tf tests and benches (no downloads: ``weights=None``).

Each factory returns ``(model, inputs)``: the model (a Keras model or a ``tf.function`` with an input signature)
and seeded example inputs (a dict of numpy arrays by input name).  Weights are seeded, so a factory gives the
same model every time in one process.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _seed(seed: int) -> None:
    import keras

    keras.utils.set_random_seed(seed)


def _image_model(app: str, size: int, batch: int, seed: int) -> tuple[Any, dict[str, np.ndarray]]:
    import keras

    _seed(seed)
    factory = getattr(keras.applications, app)
    model = factory(weights=None, input_shape=(size, size, 3))
    name = model.layers[0].name  # the InputLayer, after which the importer names the graph input
    x = np.random.default_rng(seed).standard_normal((batch, size, size, 3)).astype(np.float32)
    return model, {name: x}


def resnet50(batch: int = 1, seed: int = 0) -> tuple[Any, dict[str, np.ndarray]]:
    """Keras ``ResNet50`` (224x224, random weights)."""
    return _image_model("ResNet50", 224, batch, seed)


def mobilenet_v2(batch: int = 1, seed: int = 0, size: int = 224) -> tuple[Any, dict[str, np.ndarray]]:
    """Keras ``MobileNetV2`` (random weights)."""
    return _image_model("MobileNetV2", size, batch, seed)


def inception_v3(batch: int = 1, seed: int = 0) -> tuple[Any, dict[str, np.ndarray]]:
    """Keras ``InceptionV3`` (299x299, random weights)."""
    return _image_model("InceptionV3", 299, batch, seed)


def text_model(batch: int = 2, seed: int = 0, vocab: int = 100, length: int = 12
               ) -> tuple[Any, dict[str, np.ndarray]]:
    """A small Keras text classifier: Embedding + LSTM + Dense, token ids of any batch size."""
    import keras

    _seed(seed)
    tokens = keras.Input((length,), dtype="int32", name="tokens")
    h = keras.layers.Embedding(vocab, 16, name="embedding")(tokens)
    h = keras.layers.LSTM(24, name="lstm")(h)
    out = keras.layers.Dense(3, activation="softmax", name="probs")(h)
    model = keras.Model(tokens, out, name="text_model")
    ids = np.random.default_rng(seed).integers(0, vocab, size=(batch, length)).astype(np.int32)
    return model, {"tokens": ids}


def cond_function(seed: int = 0, positive: bool = True) -> tuple[Any, dict[str, np.ndarray]]:
    """A ``tf.function`` with ``tf.cond``: ``x * w`` when ``sum(x) > 0`` else ``x - w`` (``positive`` picks the
    branch the inputs take)."""
    import tensorflow as tf

    w = np.random.default_rng(seed + 1).standard_normal((4,)).astype(np.float32)

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def cond_model(x: Any) -> Any:
        return tf.cond(tf.reduce_sum(x) > 0, lambda: tf.nn.relu(x * w), lambda: tf.tanh(x - w))

    x = np.abs(np.random.default_rng(seed).standard_normal((2, 4))).astype(np.float32)
    return cond_model, {"x": x if positive else -x}


def while_function(seed: int = 0, steps: int = 3) -> tuple[Any, dict[str, np.ndarray]]:
    """A ``tf.function`` with ``tf.while_loop``: ``steps`` times ``y = tanh(y @ w + b)``, with a ``tf.cond``
    nested in the loop body."""
    import tensorflow as tf

    rng = np.random.default_rng(seed + 1)
    w = rng.standard_normal((4, 4)).astype(np.float32)
    b = rng.standard_normal((4,)).astype(np.float32)

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x"),
                                  tf.TensorSpec([], tf.int32, name="n")])
    def while_model(x: Any, n: Any) -> Any:
        def body(i: Any, y: Any) -> Any:
            y = tf.tanh(tf.matmul(y, w) + b)
            y = tf.cond(i % 2 == 0, lambda: y * 2.0, lambda: y)
            return i + 1, y

        return tf.while_loop(lambda i, y: i < n, body, [tf.constant(0), x])[1]

    x = np.random.default_rng(seed).standard_normal((2, 4)).astype(np.float32)
    return while_model, {"x": x, "n": np.array(steps, dtype=np.int32)}


KERAS_MODELS = {"resnet50": resnet50, "mobilenet_v2": mobilenet_v2, "inception_v3": inception_v3,
                "text_model": text_model}
FUNCTIONS = {"cond_function": cond_function, "while_function": while_function}
