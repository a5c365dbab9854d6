"""Small models for the cross-framework command-line tests (``test_cross_framework_paths.py``), as factories a
child process names (``cross_models:keras_features``); each builds its framework's model only when called."""

from __future__ import annotations

from typing import Any


def keras_features(seed: int = 0) -> Any:
    """A Keras model whose output is a feature map (NHWC): two convolutions with a residual add, no head."""
    import keras

    keras.utils.set_random_seed(seed)
    inputs = keras.Input((12, 12, 3), name="image")
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inputs)
    y = keras.layers.Conv2D(8, 3, padding="same")(x)
    outputs = keras.layers.ReLU(name="features")(keras.layers.Add()([x, y]))
    return keras.Model(inputs, outputs, name="features")


def torch_relu() -> Any:
    """``relu(x)``: one op, for a direct torch -> TF table."""
    import torch

    class Relu(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return torch.relu(x)

    return Relu().eval()


def torch_feature_cnn(seed: int = 0) -> Any:
    """A torch CNN whose output is a feature map (NCHW): conv, batch norm, relu, conv, residual add."""
    import torch

    torch.manual_seed(seed)

    class Features(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(8)
            self.b = torch.nn.Conv2d(8, 8, 3, padding=1)

        def forward(self, x: Any) -> Any:
            h = torch.relu(self.bn(self.a(x)))
            return torch.relu(h + self.b(h))

    model = Features().eval()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 2.0)
    return model
