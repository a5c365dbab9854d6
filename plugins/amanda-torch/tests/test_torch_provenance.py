"""A converted torch program records what made it: the ``.pt2`` archive in an extra file that the importer reads
back, the ``.py`` module in a comment and in its weights' metadata."""

from __future__ import annotations

import json

import torch

from amanda_torch.exporter import save_model
from amanda_torch.importer import load_model

RECORD = {"amanda": "0.1.0", "source": "amanda/onnx/18", "target": "amanda/pytorch/2.13.0",
          "tables": [{"name": "onnx-to-torch", "hash": "sha256:00"}]}


def _graph():
    module = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
    graph = load_model(module, example_inputs=(torch.randn(2, 4),))
    graph.attrs["amanda_provenance"] = dict(RECORD)
    return graph


def test_pt2_keeps_the_record_and_the_importer_reads_it(tmp_path):
    save_model(_graph(), tmp_path / "m.pt2")
    assert load_model(str(tmp_path / "m.pt2")).attrs["amanda_provenance"] == RECORD
    plain = _graph()
    del plain.attrs["amanda_provenance"]
    save_model(plain, tmp_path / "plain.pt2")
    assert "amanda_provenance" not in load_model(str(tmp_path / "plain.pt2")).attrs


def test_py_keeps_the_record_in_a_comment_and_in_the_weights(tmp_path):
    from safetensors import safe_open

    first = save_model(_graph(), tmp_path / "m.py")
    line = next(x for x in first.splitlines() if x.startswith("# amanda provenance: "))
    assert json.loads(line.split(": ", 1)[1]) == RECORD
    with safe_open(str(tmp_path / "m.safetensors"), "pt") as f:
        assert json.loads(f.metadata()["amanda.provenance"]) == RECORD
    again = save_model(_graph(), tmp_path / "n.py")
    assert again.replace("n.safetensors", "m.safetensors").replace("n.py", "m.py") == first  # same record, same text
