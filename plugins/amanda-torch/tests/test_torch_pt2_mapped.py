"""A ``.pt2`` archive's weights are mapped from the file, not read into memory (``_mapped_pt2_weights``)."""

from __future__ import annotations

import os
import sys

import pytest

torch = pytest.importorskip("torch")

from amanda_torch.importer import _load_pt2, load_model  # noqa: E402


class _Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(64, 32)
        self.b = torch.nn.Linear(32, 8, bias=False).to(torch.bfloat16)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 8))

    def forward(self, x):
        return self.b(self.a(x).to(torch.bfloat16)).float() * self.scale


def _mapped_from(tensor, path: str) -> bool:
    """Whether the tensor's memory lies in a mapping of ``path`` (``/proc/self/maps``)."""
    ptr = tensor.untyped_storage().data_ptr()
    real = os.path.realpath(path)
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            start, end = (int(v, 16) for v in parts[0].split("-"))
            if start <= ptr < end:
                return len(parts) == 6 and os.path.realpath(parts[5].strip()) == real
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_pt2_weights_are_mapped_and_equal_to_torchs_reading(tmp_path):
    torch.manual_seed(0)
    model = _Model().eval()
    x = torch.randn(3, 64)
    path = str(tmp_path / "m.pt2")
    torch.export.save(torch.export.export(model, (x,)), path)
    mapped, _, _ = _load_pt2(path)
    read = torch.export.load(path)
    assert set(mapped.state_dict) == set(read.state_dict) == {"a.weight", "a.bias", "b.weight", "scale"}
    for name, t in mapped.state_dict.items():
        want = read.state_dict[name]
        assert t.dtype == want.dtype and t.shape == want.shape and torch.equal(t, want), name
        assert _mapped_from(t, path), name  # the bytes of the archive, not a copy
        assert not _mapped_from(want, path)
    with torch.no_grad():
        assert torch.equal(mapped.module()(x), model(x))
    graph = load_model(path)  # and through the importer: the same graph as before
    assert len(graph) > 0
