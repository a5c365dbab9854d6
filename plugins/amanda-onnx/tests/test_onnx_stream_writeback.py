"""The ONNX exporter's streaming write with early writeback (``start_writeback`` every so many bytes): the files
are the same as without it, inline and external, and an interrupted write still leaves nothing."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import amanda_onnx
import amanda_onnx.exporter as exporter
from amanda_core.serialization.files import start_writeback


def _model(path, external):
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32), f"w{i}") for i in range(4)]
    nodes = [helper.make_node("MatMul", ["x" if i == 0 else f"h{i - 1}", f"w{i}"], [f"h{i}"]) for i in range(4)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
                          [helper.make_tensor_value_info("h3", TensorProto.FLOAT, ["N", 64])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    if external:
        onnx.save(m, path, save_as_external_data=True, location=os.path.basename(path) + ".data",
                  size_threshold=1024)
    else:
        onnx.save(m, path)
    return m


@pytest.mark.parametrize("external", [False, True])
def test_writeback_changes_no_byte(tmp_path, monkeypatch, external):
    src = str(tmp_path / "m.onnx")
    _model(src, external)
    g = amanda_onnx.load_model(src)
    amanda_onnx.save_model(g, tmp_path / "plain.onnx")
    calls = []
    real = exporter.start_writeback

    def counted(f):
        calls.append(f.name)
        real(f)

    monkeypatch.setattr(exporter, "_WRITEBACK_EVERY", 1)  # after every tensor
    monkeypatch.setattr(exporter, "start_writeback", counted)
    amanda_onnx.save_model(g, tmp_path / "early.onnx")
    assert len(calls) == 4
    if external:  # the data file's name differs with the model's; its bytes do not
        assert (tmp_path / "plain.onnx.data").read_bytes() == (tmp_path / "early.onnx.data").read_bytes()
    plain = onnx.load(str(tmp_path / "plain.onnx"))
    early = onnx.load(str(tmp_path / "early.onnx"))
    for t in list(plain.graph.initializer) + list(early.graph.initializer):
        t.ClearField("external_data")
    assert plain.SerializeToString() == early.SerializeToString()


def test_interrupted_write_with_writeback_leaves_nothing(tmp_path, monkeypatch):
    src = str(tmp_path / "m.onnx")
    _model(src, True)
    g = amanda_onnx.load_model(src)
    monkeypatch.setattr(exporter, "_WRITEBACK_EVERY", 1)

    def interrupted(f):
        raise KeyboardInterrupt

    monkeypatch.setattr(exporter, "start_writeback", interrupted)
    with pytest.raises(KeyboardInterrupt):
        amanda_onnx.save_model(g, tmp_path / "out.onnx")
    assert sorted(os.listdir(tmp_path)) == ["m.onnx", "m.onnx.data"]


def test_start_writeback_on_a_plain_file(tmp_path):
    with open(tmp_path / "f.bin", "wb") as f:
        f.write(b"x" * 100_000)
        start_writeback(f)  # flushes what Python buffered, then asks the OS; the file is unchanged
        assert os.path.getsize(tmp_path / "f.bin") == 100_000
