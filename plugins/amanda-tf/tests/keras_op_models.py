"""One small Keras model (or ``tf.function``) per op kind a Keras user meets most, for the TF -> ONNX coverage tests
(``test_keras_ops_to_onnx.py``).

``CASES`` maps a case name to a factory returning ``(model, inputs)``: a Keras model with a symbolic batch, or a
``tf.function`` with an input signature, and seeded inputs by input name.  Weights are seeded (and batch norms get
random statistics), so the outputs are not trivially zero.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

CASES: dict[str, Callable[[], tuple[Any, dict[str, np.ndarray]]]] = {}


def _x(shape: tuple[int, ...], seed: int = 0, scale: float = 1.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def _keras(name: str, shape: tuple[int, ...], *layers: Any, batch: int = 2, scale: float = 1.0,
           dtype: str = "float32") -> None:
    """A case: ``layers`` (or callables of a Keras tensor) applied in turn to an input of ``shape`` (no batch)."""

    def factory() -> tuple[Any, dict[str, np.ndarray]]:
        import keras

        keras.utils.set_random_seed(len(name))
        inp = keras.Input(shape, name="x", dtype=dtype)
        y = inp
        for layer in layers:
            y = layer(y)
        model = keras.Model(inp, y)
        _randomize_batch_norms(model)
        if dtype.startswith("int"):
            x = np.random.default_rng(1).integers(0, 5, (batch, *shape)).astype(dtype)
        else:
            x = _x((batch, *shape), scale=scale)
        return model, {"x": x}

    CASES[name] = factory


def _layer(cls_name: str, *args: Any, **kwargs: Any) -> Callable[[Any], Any]:
    """A Keras layer made when the model is built (so that the seed applies to its weights)."""

    def make(t: Any) -> Any:
        import keras

        return getattr(keras.layers, cls_name)(*args, **kwargs)(t)

    return make


def _op(fn_name: str, **kwargs: Any) -> Callable[[Any], Any]:
    """A Keras op (``keras.ops.<fn_name>``) applied to the tensor."""

    def make(t: Any) -> Any:
        import keras

        return getattr(keras.ops, fn_name)(t, **kwargs)

    return make


def _activation(name: str, **kwargs: Any) -> Callable[[Any], Any]:
    def make(t: Any) -> Any:
        import keras

        fn = getattr(keras.activations, name)
        return keras.layers.Lambda(lambda v: fn(v, **kwargs))(t)

    return make


def _randomize_batch_norms(model: Any) -> None:
    import keras

    rng = np.random.default_rng(0)
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            (c,) = {w.shape for w in layer.get_weights()}
            weights = [rng.uniform(0.5, 1.5, c)] if layer.scale else []
            weights += [rng.normal(0, 0.5, c)] if layer.center else []
            layer.set_weights(weights + [rng.normal(0, 0.1, c), rng.uniform(0.5, 1.5, c)])


def _function(name: str, body: Callable[..., Any], *specs: tuple[str, list[int | None], str],
              inputs: dict[str, np.ndarray]) -> None:
    """A case: a ``tf.function`` of ``body`` with named input specs ``(name, shape, dtype)``."""

    def factory() -> tuple[Any, dict[str, np.ndarray]]:
        import tensorflow as tf

        sig = [tf.TensorSpec(s, getattr(tf, d), name=n) for n, s, d in specs]
        return tf.function(body, input_signature=sig), dict(inputs)

    CASES[name] = factory


# ------------------------------------------------------------------ convolutions
_keras("Conv1D", (11, 4), _layer("Conv1D", 5, 3, padding="same"))
_keras("Conv1D_valid_strided", (11, 4), _layer("Conv1D", 5, 3, strides=2))
_keras("Conv1D_causal_dilated", (11, 4), _layer("Conv1D", 5, 3, padding="causal", dilation_rate=2))
_keras("Conv2D", (9, 10, 4), _layer("Conv2D", 6, 3, padding="same", activation="relu"))
_keras("Conv2D_strided_valid", (9, 10, 4), _layer("Conv2D", 6, (3, 2), strides=2))
_keras("Conv2D_dilated", (9, 10, 4), _layer("Conv2D", 6, 3, padding="same", dilation_rate=2))
_keras("Conv2D_grouped", (9, 10, 4), _layer("Conv2D", 6, 3, padding="same", groups=2))
_keras("Conv3D", (5, 6, 7, 3), _layer("Conv3D", 4, 3, padding="same"))
_keras("Conv3D_strided_valid", (5, 6, 7, 3), _layer("Conv3D", 4, 2, strides=2))
_keras("DepthwiseConv2D", (9, 10, 4), _layer("DepthwiseConv2D", 3, padding="same", depth_multiplier=2))
_keras("DepthwiseConv1D", (11, 4), _layer("DepthwiseConv1D", 3, padding="same"))
_keras("SeparableConv2D", (9, 10, 4), _layer("SeparableConv2D", 6, 3, padding="same"))
_keras("SeparableConv1D", (11, 4), _layer("SeparableConv1D", 6, 3))
_keras("Conv2DTranspose", (5, 6, 4), _layer("Conv2DTranspose", 3, 3, strides=2, padding="same"))
_keras("Conv2DTranspose_valid", (5, 6, 4), _layer("Conv2DTranspose", 3, (3, 2), strides=(2, 1)))
_keras("Conv1DTranspose", (7, 4), _layer("Conv1DTranspose", 3, 3, strides=2, padding="same"))
_keras("Conv3DTranspose", (3, 4, 5, 2), _layer("Conv3DTranspose", 3, 3, strides=2, padding="same"))

# ------------------------------------------------------------------ pooling
_keras("MaxPooling1D", (11, 4), _layer("MaxPooling1D", 2))
_keras("AveragePooling1D_same", (11, 4), _layer("AveragePooling1D", 3, strides=2, padding="same"))
_keras("MaxPooling2D", (9, 10, 4), _layer("MaxPooling2D", 2))
_keras("MaxPooling2D_same", (9, 10, 4), _layer("MaxPooling2D", 3, strides=2, padding="same"))
_keras("AveragePooling2D_same", (9, 10, 4), _layer("AveragePooling2D", 3, strides=2, padding="same"))
_keras("MaxPooling3D", (5, 6, 7, 3), _layer("MaxPooling3D", 2))
_keras("AveragePooling3D_same", (5, 6, 7, 3), _layer("AveragePooling3D", 2, padding="same"))
_keras("GlobalAveragePooling1D", (11, 4), _layer("GlobalAveragePooling1D"))
_keras("GlobalMaxPooling1D", (11, 4), _layer("GlobalMaxPooling1D"))
_keras("GlobalAveragePooling2D", (9, 10, 4), _layer("GlobalAveragePooling2D"))
_keras("GlobalMaxPooling2D_keepdims", (9, 10, 4), _layer("GlobalMaxPooling2D", keepdims=True))
_keras("GlobalAveragePooling3D", (5, 6, 7, 3), _layer("GlobalAveragePooling3D"))

# ------------------------------------------------------------------ normalisations
_keras("BatchNormalization", (9, 10, 4), _layer("BatchNormalization"))
_keras("BatchNormalization_dense", (6,), _layer("BatchNormalization"))
_keras("LayerNormalization", (5, 8), _layer("LayerNormalization"))
_keras("LayerNormalization_2axes", (5, 8), _layer("LayerNormalization", axis=[1, 2]))
_keras("GroupNormalization", (6, 7, 8), _layer("GroupNormalization", groups=4))
_keras("UnitNormalization", (5, 8), _layer("UnitNormalization"))

# ------------------------------------------------------------------ activations
for _name in ("relu", "relu6", "elu", "selu", "sigmoid", "tanh", "softplus", "softsign", "swish", "silu",
              "hard_sigmoid", "hard_swish", "mish", "softmax", "log_softmax", "exponential", "linear"):
    _keras(f"activation_{_name}", (5, 8), _activation(_name), scale=4.0)
_keras("activation_gelu_erf", (5, 8), _activation("gelu", approximate=False), scale=4.0)
_keras("activation_gelu_tanh", (5, 8), _activation("gelu", approximate=True), scale=4.0)
_keras("activation_leaky_relu", (5, 8), _activation("leaky_relu", negative_slope=0.1), scale=4.0)
_keras("LeakyReLU", (5, 8), _layer("LeakyReLU", negative_slope=0.3), scale=4.0)
_keras("ReLU_max_threshold", (5, 8), _layer("ReLU", max_value=2.5, negative_slope=0.1, threshold=0.5), scale=4.0)
_keras("PReLU", (5, 8), _layer("PReLU", alpha_initializer="random_normal"), scale=4.0)
_keras("ELU_alpha", (5, 8), _layer("ELU", alpha=0.5), scale=4.0)
_keras("Softmax_axis1", (5, 8), _layer("Softmax", axis=1), scale=4.0)

# ------------------------------------------------------------------ resize
_keras("UpSampling2D_nearest", (5, 6, 3), _layer("UpSampling2D", 2))
_keras("UpSampling2D_bilinear", (5, 6, 3), _layer("UpSampling2D", (2, 3), interpolation="bilinear"))
_keras("UpSampling1D", (7, 3), _layer("UpSampling1D", 2))
_keras("UpSampling3D", (3, 4, 5, 2), _layer("UpSampling3D", 2))
for _method in ("bilinear", "nearest", "bicubic", "area"):
    _keras(f"Resizing_{_method}", (5, 6, 3), _layer("Resizing", 8, 9, interpolation=_method))
_function("image_resize_bilinear_down", lambda x: __import__("tensorflow").image.resize(x, [3, 4]),
          ("x", [None, 7, 9, 3], "float32"), inputs={"x": _x((2, 7, 9, 3))})
_function("image_resize_nearest_up", lambda x: __import__("tensorflow").image.resize(x, [10, 13], "nearest"),
          ("x", [None, 5, 6, 3], "float32"), inputs={"x": _x((2, 5, 6, 3))})
_function("image_resize_align_corners",
          lambda x: __import__("tensorflow").compat.v1.image.resize_bilinear(x, [9, 11], align_corners=True),
          ("x", [None, 5, 6, 3], "float32"), inputs={"x": _x((2, 5, 6, 3))})

# ------------------------------------------------------------------ pad
_keras("ZeroPadding1D", (7, 3), _layer("ZeroPadding1D", (1, 2)))
_keras("ZeroPadding2D", (5, 6, 3), _layer("ZeroPadding2D", ((1, 2), (3, 0))))
_keras("ZeroPadding3D", (3, 4, 5, 2), _layer("ZeroPadding3D", 1))
for _mode in ("CONSTANT", "REFLECT", "SYMMETRIC"):
    _function(f"tf_pad_{_mode.lower()}",
              lambda x, m=_mode: __import__("tensorflow").pad(x, [[0, 0], [1, 2], [2, 1]], m,
                                                              constant_values=1.5 if m == "CONSTANT" else 0),
              ("x", [None, 5, 6], "float32"), inputs={"x": _x((2, 5, 6))})
_keras("Cropping2D", (7, 8, 3), _layer("Cropping2D", ((1, 2), (2, 1))))
_keras("Cropping1D", (7, 3), _layer("Cropping1D", (1, 2)))


# ------------------------------------------------------------------ slicing
def _slices(x: Any) -> Any:
    return (x[:, 1:4], x[..., 0], x[:, None, 2], x[:, ::-1], x[:, ::2, 1:], x[-1], x[:, -3:-1, ::-2])


_function("strided_slice_masks", _slices, ("x", [None, 6, 5], "float32"), inputs={"x": _x((3, 6, 5))})
_function("gather", lambda x, i: __import__("tensorflow").gather(x, i, axis=1),
          ("x", [None, 6, 5], "float32"), ("i", [4], "int32"),
          inputs={"x": _x((2, 6, 5)), "i": np.array([0, 5, 2, 2], np.int32)})


# ------------------------------------------------------------------ reductions
def _reductions(x: Any) -> Any:
    import tensorflow as tf

    return (tf.reduce_mean(x, 1), tf.reduce_sum(x, [1, 2], keepdims=True), tf.reduce_max(x, -1),
            tf.reduce_min(x, 2), tf.reduce_prod(x, 1), tf.math.reduce_logsumexp(x, 2), tf.math.reduce_std(x, 1),
            tf.math.reduce_variance(x, 2), tf.argmax(x, 1), tf.argmin(x, 2, output_type=tf.int32),
            tf.reduce_all(x > 0, 1), tf.reduce_any(x > 1, 2), tf.norm(x, axis=-1))


_function("reductions", _reductions, ("x", [None, 4, 5], "float32"), inputs={"x": _x((2, 4, 5))})


# ------------------------------------------------------------------ matmul, einsum
_keras("Dense", (6,), _layer("Dense", 4, activation="tanh"))
_keras("Dense_3d", (5, 6), _layer("Dense", 4))
_keras("EinsumDense", (5, 6), _layer("EinsumDense", "abc,cd->abd", output_shape=(None, 4), bias_axes="d"))
_function("batch_matmul", lambda a, b: __import__("tensorflow").matmul(a, b, transpose_b=True),
          ("a", [None, 3, 4], "float32"), ("b", [None, 5, 4], "float32"),
          inputs={"a": _x((2, 3, 4)), "b": _x((2, 5, 4), 1)})
_function("einsum", lambda a, b: __import__("tensorflow").einsum("bij,bkj->bik", a, b),
          ("a", [None, 3, 4], "float32"), ("b", [None, 5, 4], "float32"),
          inputs={"a": _x((2, 3, 4)), "b": _x((2, 5, 4), 1)})


def _attention(t: Any) -> Any:
    import keras

    return keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)(t, t)


_keras("MultiHeadAttention", (5, 8), _attention)

# ------------------------------------------------------------------ reshape family
_keras("Flatten", (3, 4, 2), _layer("Flatten"))
_keras("Reshape", (3, 4, 2), _layer("Reshape", (4, 6)))
_keras("Permute", (3, 4, 2), _layer("Permute", (2, 3, 1)))
_keras("RepeatVector", (5,), _layer("RepeatVector", 3))
_function("reshape_family", lambda x: (__import__("tensorflow").squeeze(x, 2),
                                       __import__("tensorflow").expand_dims(x, -1),
                                       __import__("tensorflow").transpose(x, [1, 0, 2, 3]),
                                       __import__("tensorflow").reshape(x, [-1, 3])),
          ("x", [2, 3, 1, 4], "float32"), inputs={"x": _x((2, 3, 1, 4))})


# ------------------------------------------------------------------ concat, split, merge layers
def _concat_split(x: Any) -> Any:
    import tensorflow as tf

    a, b = tf.split(x, 2, axis=1)
    c, d, e = tf.split(x, [1, 2, 3], axis=-1)
    return (tf.concat([b, a], 1), c + d[..., :1] + e[..., 2:], tf.stack([x[:, 0], x[:, 2]], axis=1),
            tf.tile(x, [1, 2, 1]))


_function("concat_split", _concat_split, ("x", [None, 4, 6], "float32"), inputs={"x": _x((2, 4, 6))})
_function("unstack", lambda x: __import__("tensorflow").unstack(x, axis=2)[1] * 2.0, ("x", [None, 4, 3], "float32"),
          inputs={"x": _x((2, 4, 3))})


def _merges(t: Any) -> Any:
    import keras

    a = keras.layers.Dense(4)(t)
    b = keras.layers.Dense(4)(t)
    return keras.layers.Concatenate()([keras.layers.Add()([a, b]), keras.layers.Multiply()([a, b]),
                                       keras.layers.Subtract()([a, b]), keras.layers.Average()([a, b]),
                                       keras.layers.Maximum()([a, b]), keras.layers.Minimum()([a, b])])


_keras("merge_layers", (6,), _merges)
_keras("Embedding", (7,), _layer("Embedding", 20, 4), dtype="int32")
_keras("Dropout", (6,), _layer("Dropout", 0.5))

# ------------------------------------------------------------------ recurrent
_keras("LSTM", (7, 5), _layer("LSTM", 6))
_keras("LSTM_sequences", (7, 5), _layer("LSTM", 6, return_sequences=True))
_keras("GRU", (7, 5), _layer("GRU", 6))
_keras("GRU_sequences", (7, 5), _layer("GRU", 6, return_sequences=True))
_keras("GRU_reset_before", (7, 5), _layer("GRU", 6, reset_after=False))
_keras("SimpleRNN", (7, 5), _layer("SimpleRNN", 6))
_keras("Bidirectional_LSTM", (7, 5), lambda t: __import__("keras").layers.Bidirectional(
    __import__("keras").layers.LSTM(6))(t))


# ------------------------------------------------------------------ control flow
def _cond(x: Any) -> Any:
    import tensorflow as tf

    return tf.cond(tf.reduce_sum(x) > 0, lambda: tf.nn.relu(x) * 2.0, lambda: tf.tanh(x) - 1.0)


def _while(x: Any, n: Any) -> Any:
    import tensorflow as tf

    i, y = tf.while_loop(lambda i, y: i < n, lambda i, y: (i + 1, tf.sin(y) * 1.5 + 0.1), [tf.constant(0), x])
    return y


_function("tf_cond", _cond, ("x", [None, 3], "float32"), inputs={"x": _x((2, 3))})
_function("tf_while_loop", _while, ("x", [None, 3], "float32"), ("n", [], "int32"),
          inputs={"x": _x((2, 3)), "n": np.array(3, np.int32)})
