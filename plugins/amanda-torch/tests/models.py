"""Small, deterministic PyTorch models shared by the amanda-torch tests and benches.

Every factory takes a ``seed`` and returns ``(module, example_inputs)``: an ``nn.Module`` in eval mode with
random weights (no download) and a tuple of positional example inputs made from the same seed.  Calling the
factory twice with one seed gives the same weights and inputs.

Random-weight networks with BatchNorm give outputs near zero (or blown up) when the running statistics are the
initial 0/1: :func:`calibrate_batchnorm` sets them from one seeded batch, so comparisons check real numbers.

Factories: :func:`small_cnn`, :func:`resnet`, :func:`mobilenet_v2`, :func:`vit`, :func:`bert` (transformers'
models from small configs), :func:`cond_module` (``torch.cond``), :func:`scripted_loop` (a TorchScript module
with a data-dependent ``while`` loop).  :data:`FACTORIES` names them all.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import nn

Example = tuple[nn.Module, tuple[Any, ...]]

IMAGE = 64  # side of the vision models' input images


def _generator(seed: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def images(seed: int, batch: int = 2, side: int = IMAGE, channels: int = 3) -> torch.Tensor:
    """A seeded batch of images, ``float32[batch, channels, side, side]``, roughly standard normal."""
    return torch.randn(batch, channels, side, side, generator=_generator(seed + 1))


@torch.no_grad()
def calibrate_batchnorm(module: nn.Module, *inputs: Any, **kwargs: Any) -> nn.Module:
    """Set every BatchNorm's running mean and variance from one forward pass over the inputs; returns the module
    in eval mode."""
    norms = [m for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    saved = [m.momentum for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative average: after one batch, exactly that batch's statistics
    module.train()
    module(*inputs, **kwargs)
    for m, momentum in zip(norms, saved):
        m.momentum = momentum
    return module.eval()


class SmallCNN(nn.Module):
    """conv-bn-relu, a residual conv block, max pool, global average pool, linear."""

    def __init__(self, channels: int = 3, classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 16, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        y = y + torch.relu(self.conv2(y))
        y = self.pool(y)
        y = y.mean(dim=(2, 3))
        return self.fc(y)


def small_cnn(seed: int = 0, batch: int = 2, side: int = IMAGE) -> Example:
    """:class:`SmallCNN` on ``float32[batch, 3, side, side]``."""
    torch.manual_seed(seed)
    model = SmallCNN()
    x = images(seed, batch, side)
    calibrate_batchnorm(model, images(seed + 100, 4, side))
    return model, (x,)


def resnet(seed: int = 0, batch: int = 2) -> Example:
    """transformers' ``ResNetModel``: two stages of basic blocks, 16 and 32 channels, 64x64 images."""
    from transformers import ResNetConfig, ResNetModel

    torch.manual_seed(seed)
    config = ResNetConfig(num_channels=3, embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                          layer_type="basic", hidden_act="relu", downsample_in_first_stage=False)
    model = ResNetModel(config)
    calibrate_batchnorm(model, images(seed + 100, 4))
    return model, (images(seed, batch),)


def mobilenet_v2(seed: int = 0, batch: int = 2) -> Example:
    """transformers' ``MobileNetV2Model`` with depth multiplier 0.35 on 64x64 images."""
    from transformers import MobileNetV2Config, MobileNetV2Model

    torch.manual_seed(seed)
    config = MobileNetV2Config(num_channels=3, image_size=IMAGE, depth_multiplier=0.35, hidden_act="relu6")
    model = MobileNetV2Model(config)
    calibrate_batchnorm(model, images(seed + 100, 4))
    return model, (images(seed, batch),)


def vit(seed: int = 0, batch: int = 2) -> Example:
    """transformers' ``ViTModel``: 2 layers, hidden 64, 4 heads, 8x8 patches of 32x32 images."""
    from transformers import ViTConfig, ViTModel

    torch.manual_seed(seed)
    config = ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=64, num_hidden_layers=2,
                       num_attention_heads=4, intermediate_size=128, hidden_dropout_prob=0.0,
                       attention_probs_dropout_prob=0.0)
    model = ViTModel(config, add_pooling_layer=True).eval()
    return model, (images(seed, batch, 32),)


def bert(seed: int = 0, batch: int = 2, seq: int = 16) -> Example:
    """transformers' ``BertModel``: 2 layers, hidden 64, 4 heads, vocabulary 128; inputs ``input_ids`` and
    ``attention_mask`` (int64 ``[batch, seq]``, the second sequence padded by 4 tokens)."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    config = BertConfig(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=128, max_position_embeddings=64, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    model = BertModel(config).eval()
    input_ids = torch.randint(0, config.vocab_size, (batch, seq), generator=_generator(seed + 1))
    attention_mask = torch.ones(batch, seq, dtype=torch.int64)
    if batch > 1:
        attention_mask[1, seq - 4:] = 0
    return model, (input_ids, attention_mask)


class CondModule(nn.Module):
    """A linear layer, then ``torch.cond`` on the sign of the sum: ``sin(y) * 2`` or ``cos(y) + bias``."""

    def __init__(self, features: int = 8) -> None:
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)

        def positive(y: torch.Tensor) -> torch.Tensor:
            return torch.sin(y) * 2.0

        def negative(y: torch.Tensor) -> torch.Tensor:
            return torch.cos(y) + self.bias

        return torch.cond(y.sum() > 0, positive, negative, (y,))


def cond_module(seed: int = 0, batch: int = 2, negative: bool = False) -> Example:
    """:class:`CondModule` on ``float32[batch, 8]``; the example input takes the positive branch, or with
    ``negative`` the other one."""
    torch.manual_seed(seed)
    model = CondModule().eval()
    x = torch.randn(batch, 8, generator=_generator(seed + 1))
    return model, (_steer(model, x, -1.0 if negative else 1.0),)


@torch.no_grad()
def _steer(model: CondModule, x: torch.Tensor, sign: float) -> torch.Tensor:
    """``x`` moved along the linear layer's input so that ``sign * sum(linear(x)) > 0`` by a clear margin."""
    direction = model.linear.weight.sum(dim=0)  # d sum(linear(x)) / dx, per batch row
    total = model.linear(x).sum()
    want = sign * (abs(float(total)) + 4.0)
    step = (want - float(total)) / (float(direction.dot(direction)) * x.shape[0])
    return x + step * direction


class LoopModule(nn.Module):
    """Doubles ``x`` and adds a learned bias while its norm stays below ``limit`` (at most 16 times): the trip
    count depends on the data."""

    def __init__(self, features: int = 8, limit: float = 100.0) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)
        self.limit = limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        steps = 0
        while bool(torch.linalg.vector_norm(x) < self.limit) and steps < 16:
            x = x * 2.0 + self.bias
            steps += 1
        return x * (steps + 1)


def scripted_loop(seed: int = 0, batch: int = 2, scale: float = 1.0) -> Example:
    """``torch.jit.script`` of :class:`LoopModule` on ``float32[batch, 8]`` (``scale`` changes the trip count:
    smaller inputs loop more often)."""
    torch.manual_seed(seed)
    model = torch.jit.script(LoopModule().eval())
    x = torch.randn(batch, 8, generator=_generator(seed + 1)) * scale
    return model, (x,)


FACTORIES: dict[str, Callable[..., Example]] = {
    "small_cnn": small_cnn,
    "resnet": resnet,
    "mobilenet_v2": mobilenet_v2,
    "vit": vit,
    "bert": bert,
    "cond_module": cond_module,
    "scripted_loop": scripted_loop,
}
"""Every factory by name."""

TRANSFORMERS_MODELS = ("resnet", "mobilenet_v2", "vit", "bert")
"""The section-5 models built from transformers' code."""


def onnx_module(model: Any) -> Any:
    """An ONNX model (a ``ModelProto`` or a file) as the ``GraphModule`` ``amanda convert --to amanda/pytorch``
    makes of it: value types filled in, the registered tables and passes."""
    import amanda_onnx
    from amanda_core.mapping import convert, registered_tables
    from amanda_core.plugin import registry
    from amanda_core.plugin.passes import registered_passes
    from amanda_torch.module import to_module

    graph = amanda_onnx.load_model(model)
    amanda_onnx.infer_types(graph)
    return to_module(convert(graph, "amanda/pytorch", registered_tables(), registry().namespaces,
                             passes=registered_passes()).graph)
