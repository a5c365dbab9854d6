"""A small image classifier defined in code: the model Amanda's main job converts.

``build()`` makes it with seeded random weights (no download) and sets its batch-norm statistics from one seeded
batch, so that its outputs are far from zero and a comparison of two runtimes checks something::

    amanda convert examples.torch.small_cnn:build --input "x:float32[batch,3,32,32]" --to amanda/onnx -o cnn.onnx
"""

from __future__ import annotations

import torch
from torch import nn


class SmallCNN(nn.Module):
    """Two convolution blocks (conv, batch norm, ReLU, pooling), global average pooling and a linear head."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        )
        self.head = nn.Linear(32, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.features(x)
        y = y.mean(dim=(2, 3))
        return torch.softmax(self.head(y), dim=-1)


def build(seed: int = 0) -> SmallCNN:
    """The model in eval mode, its weights and batch-norm statistics drawn from ``seed``."""
    torch.manual_seed(seed)
    model = SmallCNN()
    model.train()
    with torch.no_grad():
        model(torch.randn(8, 3, 32, 32))  # batch-norm running statistics from one seeded batch
    return model.eval()
