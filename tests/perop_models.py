"""Small torch and TF models for the per-op check and the unconverted-op tests across frameworks, as
factories a child process names (``tests.perop_models:torch_leaky``); each imports its framework when called."""

from __future__ import annotations

from typing import Any


def torch_leaky(seed: int = 0) -> Any:
    """``linear -> tanh -> leaky_relu(0.1) -> + x``: the leaky relu's slope is what a wrong rule changes."""
    import torch

    torch.manual_seed(seed)

    class Leaky(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)

        def forward(self, x: Any) -> Any:
            h = torch.tanh(self.fc(x))
            return torch.nn.functional.leaky_relu(h, 0.1) + x

    return Leaky().eval()


def keras_leaky(seed: int = 0) -> Any:
    """The same in Keras: ``Dense -> tanh -> LeakyReLU(0.1) -> + x``."""
    import keras

    keras.utils.set_random_seed(seed)
    x = keras.Input((8,), name="x")
    h = keras.layers.Dense(8, activation="tanh")(x)
    y = keras.layers.Add(name="y")([keras.layers.LeakyReLU(negative_slope=0.1)(h), x])
    return keras.Model(x, y, name="leaky")


def tf_lgamma() -> Any:
    """A ``tf.function`` holding ``Lgamma``, which no TF -> ONNX rule converts: ``lgamma(relu(x)) + 1``."""
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def lgamma_model(x: Any) -> Any:
        return tf.math.lgamma(tf.nn.relu(x) + 0.5) + 1.0

    return lgamma_model
