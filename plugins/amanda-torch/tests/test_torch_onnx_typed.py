"""A model Amanda writes from torch as ONNX states the type of every value (``value_info``), as torch.onnx's
exporter writes it: the values torch -> ONNX rules make (a decomposed layer norm, GELU, attention arithmetic) are
typed by ONNX's own inference after the table. Reading such a file back needs no inference."""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

MODELS = '''
import torch


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(8)
        self.q = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.ln(x)
        a = torch.softmax(self.q(h) @ h.transpose(-1, -2) / 2.0, dim=-1)
        return torch.nn.functional.gelu(a @ h).reshape(2, -1)


def make():
    torch.manual_seed(0)
    return Block().eval()
'''


def untyped(model: object) -> list[str]:
    g = model.graph  # type: ignore[attr-defined]
    typed = {v.name for v in list(g.value_info) + list(g.output) + list(g.input)
             if v.type.tensor_type.HasField("shape")}
    return [f"{n.op_type}:{o}" for n in g.node for o in n.output if o and o not in typed]


@pytest.mark.parametrize("infer", [True, False])
def test_every_value_of_the_written_model_is_typed(tmp_path, monkeypatch, capsys, infer: bool) -> None:
    import amanda_onnx
    from amanda_core.cli.main import main

    (tmp_path / "typedmodels.py").write_text(MODELS)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("typedmodels", None)
    out = tmp_path / "block.onnx"
    args = ["convert", "typedmodels:make", "--input", "x:float32[2,4,8]", "--to", "amanda/onnx", "-o", str(out)]
    assert main(args + ([] if infer else ["--no-infer-types"])) == 0, capsys.readouterr().err
    model = onnx.load(str(out))
    if not infer:  # what the rules alone leave: the check below has something to find
        assert untyped(model)
        return
    assert untyped(model) == []
    calls = []
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", lambda *a, **k: calls.append(1))
    graph = amanda_onnx.load_model(str(out))
    amanda_onnx.infer_types(graph)
    assert calls == []  # every value typed in the file: nothing left to infer
