"""A torch model written as ONNX at the newest opset (the default target) comes back to torch and checks, with a
dynamic batch: the values the table that goes ahead of the opset chain converts (Gelu, newer than opset 18) are
read by the ONNX rules after it (Gemm asks its input's element type, whatever family typed it), LayerNormalization
needs only its normalized sizes known, and ``convert --check`` runs the module file it wrote."""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

MODELS = '''
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.ln = torch.nn.LayerNorm(8)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        h = torch.relu(self.bn(self.conv(x)))
        h = h.mean(dim=(2, 3))
        return self.fc(torch.nn.functional.gelu(self.ln(h)))


def make():
    torch.manual_seed(0)
    return Net().eval()
'''


def test_newest_opset_and_back_with_a_dynamic_batch(tmp_path, monkeypatch, capsys) -> None:
    from amanda_core.cli.main import main

    (tmp_path / "backmodels.py").write_text(MODELS)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("backmodels", None)
    onnx_file, py_file = tmp_path / "net.onnx", tmp_path / "out" / "net.py"
    py_file.parent.mkdir()
    assert main(["convert", "backmodels:make", "--input", "x:float32[batch,3,16,16]", "--to", "amanda/onnx",
                 "-o", str(onnx_file)]) == 0, capsys.readouterr().err
    model = onnx.load(str(onnx_file))
    assert {"Gelu", "LayerNormalization", "Gemm"} <= {n.op_type for n in model.graph.node}
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    capsys.readouterr()
    # the code against the file it became, no --input: the code is traced on inputs like the file's
    assert main(["check", "backmodels:make", str(onnx_file), "--dim", "batch=2"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "x: float32[2, 3, 16, 16]" in out and "same outputs (torch / onnxruntime" in out
    assert main(["convert", str(onnx_file), "--to", "amanda/pytorch", "-o", str(py_file), "--check"]) == 0, \
        capsys.readouterr().err
    out = capsys.readouterr().out
    assert "same outputs (onnxruntime / torch" in out and "-> ok" in out
    text = py_file.read_text()
    assert "layer_norm" in text and "addmm" in text and "gelu" in text


def test_check_a_model_in_code_against_a_file_without_input_specs(tmp_path, monkeypatch, capsys) -> None:
    """``amanda check model.onnx pkg:factory``: the factory's module is traced on inputs like the ONNX model's,
    made as the check makes them, so no --input is needed."""
    from amanda_core.cli.main import main

    (tmp_path / "checkmodels.py").write_text(MODELS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("checkmodels", None)
    assert main(["convert", "checkmodels:make", "--input", "x:float32[batch,3,16,16]", "--to", "amanda/onnx",
                 "-o", "net.onnx"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["check", "net.onnx", "checkmodels:make", "--dim", "batch=3"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "float32[3, 3, 16, 16]" in out and "same outputs (onnxruntime / torch" in out


BERT = '''
import sys
sys.path.insert(0, {tests!r})
import models


def bert():
    return models.bert()[0]
'''


def test_bert_with_its_mask_at_any_batch_and_length(tmp_path, monkeypatch, capsys) -> None:
    """Both of BERT's inputs share the symbolic batch and length of ``--input`` (one example size each, so
    torch.export takes them for one); the padding mask, which transformers index with aranges of the run-time
    batch and length, becomes a GatherND, and the ONNX file comes back as a ``.pt2`` (the sizes GatherElements
    wraps its indices by are numbers where the type states them, so torch.export has no constant left unread)
    that runs at other sizes as the model does."""
    import os

    import numpy as np
    import onnxruntime as ort

    from amanda_core.cli.main import main

    tests = os.path.dirname(__file__)
    (tmp_path / "bertmodels.py").write_text(BERT.format(tests=tests))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("bertmodels", None)
    onnx_file, pt2 = tmp_path / "bert.onnx", tmp_path / "bert.pt2"
    specs = ["--input", "input_ids:int64[batch,seq]", "--input", "attention_mask:int64[batch,seq]"]
    assert main(["convert", "bertmodels:bert", *specs, "--to", "amanda/onnx", "-o", str(onnx_file)]) == 0, \
        capsys.readouterr().err
    model = onnx.load(str(onnx_file))
    assert "GatherND" in {n.op_type for n in model.graph.node}
    assert [d.dim_param for d in model.graph.input[1].type.tensor_type.shape.dim] == ["batch", "seq"]
    capsys.readouterr()
    assert main(["convert", str(onnx_file), "--to", "amanda/pytorch", "-o", str(pt2)]) == 0, \
        capsys.readouterr().err
    program = torch.export.load(str(pt2)).module()
    session = ort.InferenceSession(str(onnx_file), providers=["CPUExecutionProvider"])
    sys.path.insert(0, tests)
    import models

    for batch, seq in ((1, 5), (3, 21)):
        module, (ids, mask) = models.bert(batch=batch, seq=seq)
        with torch.no_grad():
            want = [t.numpy() for t in module(input_ids=ids, attention_mask=mask).to_tuple()]
            got = [t.detach().numpy() for t in program(ids, mask)]
        onnx_out = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})
        for w, g, o in zip(want, got, onnx_out):
            scale = float(np.abs(w).max())
            assert float(np.abs(g - w).max()) <= 1e-4 * max(scale, 1.0)
            assert float(np.abs(o - w).max()) <= 1e-4 * max(scale, 1.0)


def test_check_of_code_against_a_missing_file_names_the_file(tmp_path, monkeypatch, capsys) -> None:
    from amanda_core.cli.main import main

    (tmp_path / "backmodels.py").write_text(MODELS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("backmodels", None)
    for args in (["backmodels:make", "missing.onnx"], ["missing.onnx", "backmodels:make"]):
        assert main(["check", *args]) != 0
        err = capsys.readouterr().err
        assert "missing.onnx: no such file or folder" in err and "example inputs" not in err


UNSEEDED = '''
import torch


class Recurrent(torch.nn.Module):
    """An LSTM over a dynamic batch (its zero initial states are zeros of [layers, batch, hidden]), weights drawn
    at random on every call of the factory: nothing seeds them."""

    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(8, 16, num_layers=2, batch_first=True)

    def forward(self, x):
        return self.lstm(x)[0]


def make():
    return Recurrent().eval()


class Gated(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = torch.nn.GRU(8, 8, batch_first=True, bidirectional=True)

    def forward(self, x):
        return self.gru(x)[0]


def make_gru():
    return Gated().eval()
'''


@pytest.mark.parametrize("factory", ["make", "make_gru"])
def test_convert_check_of_code_compares_with_the_model_it_converted(factory, tmp_path, monkeypatch, capsys) -> None:
    """``convert pkg:factory --check`` checks the file against the model it converted, not a second call of the
    factory (which draws other random weights: the check reported a mismatch the conversion did not make).  The
    LSTM's zero states over the batch come back as torch's full() of a size list, and the GRU as one
    aten::gru.input (not unrolled, which needs a static batch), so the .pt2 keeps the batch dynamic."""
    from amanda_core.cli.main import main

    (tmp_path / "unseeded.py").write_text(UNSEEDED)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("unseeded", None)
    onnx_file, pt2_file = tmp_path / "rnn.onnx", tmp_path / "rnn.pt2"
    assert main(["convert", f"unseeded:{factory}", "--input", "x:float32[batch,5,8]", "--to", "amanda/onnx",
                 "-o", str(onnx_file), "--check", "--dim", "batch=3"]) == 0, capsys.readouterr()
    assert "same outputs (torch / onnxruntime" in capsys.readouterr().out
    assert main(["convert", str(onnx_file), "--to", "amanda/pytorch", "-o", str(pt2_file), "--check",
                 "--dim", "batch=2"]) == 0, capsys.readouterr()
    assert "same outputs (onnxruntime / torch" in capsys.readouterr().out
    program = torch.export.load(str(pt2_file))
    x = torch.randn(4, 5, 8)
    assert program.module()(x).shape == (4, 5, 16)
