"""A small Keras image classifier defined in code (channels-last, seeded random weights, no download)::

    amanda convert examples.tf.small_cnn:build --to amanda/onnx/18 -o cnn.onnx --explain --check
"""

from __future__ import annotations

from typing import Any


def build(seed: int = 0) -> Any:
    """The model: two convolution blocks with batch norm, global average pooling and a softmax head; batch-norm
    statistics drawn from ``seed`` too, so that outputs are far from uniform."""
    import keras
    import numpy as np

    keras.utils.set_random_seed(seed)
    inputs = keras.Input((32, 32, 3), name="image")
    x = keras.layers.Conv2D(16, 3, padding="same")(inputs)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.ReLU()(x)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Conv2D(32, 3, strides=2, padding="same", activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(10, activation="softmax", name="probs")(x)
    model = keras.Model(inputs, outputs, name="small_cnn")
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            gamma, beta, mean, var = layer.get_weights()
            layer.set_weights([gamma, beta, rng.normal(size=mean.shape).astype("float32"),
                               rng.uniform(0.5, 2.0, size=var.shape).astype("float32")])
    return model
