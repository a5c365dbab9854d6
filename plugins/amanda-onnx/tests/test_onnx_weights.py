"""Weights stay in their files: inline tensors read from their offsets in the model file, external data mapped,
exports streamed, shape inference without weights, missing data named, interrupted writes leaving nothing,
conversion in place.  Small models exercising the code paths large ones take (bench/large_model.py measures
those)."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import amanda_onnx
from amanda_core.errors import AmandaError, FormatError
from amanda_core.ir.tensor import FileTensor
from amanda_onnx import exporter, wire
from amanda_onnx.tensors import ExternalTensor


def _mlp(layers: int = 3, n: int = 32, opset: int = 13) -> tuple[onnx.ModelProto, list[np.ndarray]]:
    rng = np.random.default_rng(0)
    ws = [rng.standard_normal((n, n), dtype=np.float32) for _ in range(layers)]
    nodes, prev = [], "x"
    for i in range(layers):
        out = f"h{i}" if i < layers - 1 else "y"
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [out], name=f"mm{i}"))
        prev = out
    nodes.append(helper.make_node("Constant", [], ["c"], name="c",
                                  value=numpy_helper.from_array(np.arange(n * n, dtype=np.float32).reshape(n, n))))
    nodes.append(helper.make_node("Add", ["y", "c"], ["z"], name="add"))
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", n])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", n])],
                          [numpy_helper.from_array(w, f"w{i}") for i, w in enumerate(ws)]
                          + [numpy_helper.from_array(np.array([1, 2], np.int64), "small")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), ws


def _bytes(m: onnx.ModelProto) -> bytes:
    return m.SerializeToString(deterministic=True)


def _save_external(m: onnx.ModelProto, path) -> None:
    onnx.save_model(m, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=os.path.basename(str(path)) + ".data", size_threshold=1024)


def test_inline_tensors_are_read_from_their_offsets_in_the_model_file(tmp_path):
    m, ws = _mlp()
    path = tmp_path / "m.onnx"
    path.write_bytes(_bytes(m))
    g = amanda_onnx.load_model(path)
    values = [g.ops[f"w{i}"].attrs["value"] for i in range(3)]
    assert all(isinstance(v, FileTensor) and not v.is_loaded for v in values)
    data = path.read_bytes()
    for v, w in zip(values, ws):
        assert v.path == str(path) and data[v.offset:v.offset + v.length] == w.tobytes()
    assert isinstance(g.ops["small"].attrs["value"], np.ndarray)  # small tensors are parsed as before
    const = g.ops["c"].attrs["value"]
    assert isinstance(const, FileTensor)  # a Constant node's tensor too
    assert amanda_onnx.to_model(g).SerializeToString(deterministic=True) == _bytes(m)
    assert np.array_equal(values[1].numpy(), ws[1]) and not values[1].numpy().flags.writeable
    assert values[1].numpy().base is not None  # a view of the mapped file, not a copy


def test_the_wire_rewrite_gives_back_the_same_message():
    m, _ = _mlp(layers=2)
    data = _bytes(m)
    kept: list[bytes] = []

    def swap(buf, info):
        _, start, n = info.raw
        if n < 1024:
            return None
        kept.append(bytes(buf[start:start + n]))
        ref = wire.placeholder(len(kept) - 1)
        return [ref], len(ref)

    pieces, n = wire.rewrite(memoryview(data), swap, lambda s, e: e - s >= 1024)
    light = b"".join(pieces)
    assert len(light) == n and len(kept) == 3 and len(light) < len(data) // 3

    def back(buf, info):
        _, start, length = info.raw
        raw = buf[start:start + length]
        if not wire.is_placeholder(raw):
            return None
        value = kept[wire.placeholder_index(raw)]
        return [value], len(value)

    pieces, n = wire.rewrite(memoryview(light), back, lambda s, e: True)
    assert b"".join(pieces) == data and n == len(data)


def test_streamed_inline_export_is_byte_identical(tmp_path):
    m, _ = _mlp()
    src = tmp_path / "m.onnx"
    src.write_bytes(_bytes(m))
    g = amanda_onnx.load_model(src)
    out = tmp_path / "out.onnx"
    saved = amanda_onnx.save_model(g, out)
    assert out.read_bytes() == _bytes(m)
    assert not saved.graph.initializer[0].HasField("raw_data")  # streamed: not held by the returned proto
    assert not any(g.ops[f"w{i}"].attrs["value"].is_loaded for i in range(3))  # copied file to file


def test_arrays_are_streamed_too(tmp_path):
    m, _ = _mlp()
    g = amanda_onnx.load_model(m)  # from a ModelProto: numpy arrays
    assert isinstance(g.ops["w0"].attrs["value"], np.ndarray)
    out = tmp_path / "out.onnx"
    amanda_onnx.save_model(g, out)
    assert out.read_bytes() == _bytes(m)


def test_external_data_is_mapped_and_streamed(tmp_path):
    m, ws = _mlp()
    src = tmp_path / "ext.onnx"
    _save_external(m, src)
    g = amanda_onnx.load_model(src)
    v = g.ops["w2"].attrs["value"]
    assert isinstance(v, ExternalTensor) and not v.is_loaded
    out = tmp_path / "copy.onnx"
    amanda_onnx.save_model(g, out)
    assert (tmp_path / "copy.onnx.data").exists() and not v.is_loaded
    back = onnx.load(str(out))
    assert np.array_equal(numpy_helper.to_array(back.graph.initializer[2]), ws[2])
    inline = tmp_path / "inline.onnx"
    amanda_onnx.save_model(g, inline, external_data=False)  # external data embedded by streaming
    assert not (tmp_path / "inline.onnx.data").exists()
    back = onnx.load(str(inline), load_external_data=False)
    assert all(not t.HasField("data_location") for t in back.graph.initializer)
    assert [numpy_helper.to_array(t).tobytes() for t in back.graph.initializer] == \
        [w.tobytes() for w in ws] + [np.array([1, 2], np.int64).tobytes()]


def test_over_the_size_limit_external_data_and_a_notice(tmp_path, capsys):
    m, ws = _mlp()
    src = tmp_path / "m.onnx"
    src.write_bytes(_bytes(m))
    g = amanda_onnx.load_model(src)
    out = tmp_path / "big.onnx"
    saved = amanda_onnx.save_model(g, out, max_size=6000)  # as if over 2 GB
    assert (tmp_path / "big.onnx.data").exists()
    assert saved.graph.initializer[0].data_location == TensorProto.EXTERNAL
    back = onnx.load(str(out))
    assert np.array_equal(numpy_helper.to_array(back.graph.initializer[1]), ws[1])


def test_over_the_limit_notice_text(tmp_path, capsys):
    m, _ = _mlp()
    g = amanda_onnx.load_model(m)
    amanda_onnx.save_model(g, tmp_path / "big.onnx", max_size=6000)
    err = capsys.readouterr().err
    assert "over ONNX's 2 GB limit" in err and "external data in big.onnx.data" in err


def test_embedding_more_than_two_gigabytes_is_refused(tmp_path, monkeypatch):
    m, _ = _mlp()
    g = amanda_onnx.load_model(m)
    monkeypatch.setattr(exporter, "MAX_PROTO_SIZE", exporter._HEADROOM + 4000)
    with pytest.raises(AmandaError, match="over ONNX's 2 GB limit"):
        amanda_onnx.save_model(g, tmp_path / "m.onnx", external_data=False)
    assert list(tmp_path.iterdir()) == []


def test_shape_inference_reads_no_weights(tmp_path):
    m, _ = _mlp()
    for node in m.graph.node:
        if node.op_type == "MatMul":
            node.output[0] = node.output[0]
    del m.graph.value_info[:]
    src = tmp_path / "m.onnx"
    src.write_bytes(_bytes(m))
    g = amanda_onnx.load_model(src)
    weightless = amanda_onnx.to_model(g, weightless=True)
    assert all(t.data_location == TensorProto.EXTERNAL for t in weightless.graph.initializer if t.name != "small")
    assert weightless.ByteSize() < 2000
    assert amanda_onnx.infer_types(g) >= 3
    assert g.ops["mm0"].output_ports[0].dtype == "tensor(float)[N,32]"
    assert not any(g.ops[f"w{i}"].attrs["value"].is_loaded for i in range(3))


def _convert(g, target: str):
    from amanda_core.mapping import convert
    from amanda_core.plugin.manager import registry
    from amanda_onnx import opset

    return convert(g, target, opset.tables(), registry().namespaces, copy=False).graph


def test_opset_conversion_moves_weights_without_reading_them(tmp_path):
    m, _ = _mlp()
    src = tmp_path / "m.onnx"
    src.write_bytes(_bytes(m))
    g = amanda_onnx.load_model(src)
    out_graph = _convert(g, "amanda/onnx/21")
    assert out_graph.namespace == "amanda/onnx/21"
    assert not any(g.ops[f"w{i}"].attrs["value"].is_loaded for i in range(3))
    out = tmp_path / "m21.onnx"
    amanda_onnx.save_model(out_graph, out)
    a, b = onnx.load(str(src)), onnx.load(str(out))
    assert [t.raw_data for t in a.graph.initializer] == [t.raw_data for t in b.graph.initializer]


def test_missing_external_data_file_names_the_tensor_and_file(tmp_path):
    m, _ = _mlp()
    src = tmp_path / "ext.onnx"
    _save_external(m, src)
    os.unlink(tmp_path / "ext.onnx.data")
    with pytest.raises(FormatError, match=r"'w0'.*ext\.onnx\.data not found"):
        amanda_onnx.load_model(src)


def test_short_external_data_file_names_the_tensor_and_file(tmp_path):
    m, _ = _mlp()
    src = tmp_path / "ext.onnx"
    _save_external(m, src)
    data = tmp_path / "ext.onnx.data"
    with open(data, "r+b") as f:
        f.truncate(os.path.getsize(data) - 100)
    with pytest.raises(FormatError, match=r"'w2'.*ext\.onnx\.data has \d+ bytes"):
        amanda_onnx.load_model(src)


def test_a_data_file_truncated_after_reading_is_named_when_written(tmp_path):
    m, _ = _mlp()
    src = tmp_path / "ext.onnx"
    _save_external(m, src)
    g = amanda_onnx.load_model(src)
    with open(tmp_path / "ext.onnx.data", "r+b") as f:
        f.truncate(10)
    out = tmp_path / "out" / "o.onnx"
    out.parent.mkdir()
    with pytest.raises(AmandaError, match=r"'w0'.*ext\.onnx\.data has 10 bytes"):
        amanda_onnx.save_model(g, out)
    assert list(out.parent.iterdir()) == []


def test_an_interrupted_write_leaves_nothing(tmp_path, monkeypatch):
    m, _ = _mlp()
    src = tmp_path / "ext.onnx"
    _save_external(m, src)
    g = amanda_onnx.load_model(src)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    calls = []
    real = FileTensor.copy_to

    def interrupted(self, f):
        calls.append(self.label)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real(self, f)

    monkeypatch.setattr(FileTensor, "copy_to", interrupted)
    for kwargs in ({}, {"external_data": False}):
        calls.clear()
        with pytest.raises(KeyboardInterrupt):
            amanda_onnx.save_model(g, out_dir / "o.onnx", **kwargs)
        assert list(out_dir.iterdir()) == []


def test_converting_in_place_reads_the_source_it_replaces(tmp_path):
    m, ws = _mlp()
    src = tmp_path / "ext.onnx"
    _save_external(m, src)  # its data in ext.onnx.data, the file the output writes too
    amanda_onnx.save_model(_convert(amanda_onnx.load_model(src), "amanda/onnx/21"), src)
    back = onnx.load(str(src))
    assert back.opset_import[0].version == 21
    assert [p.name for p in sorted(tmp_path.iterdir())] == ["ext.onnx", "ext.onnx.data"]
    for i, w in enumerate(ws):
        assert np.array_equal(numpy_helper.to_array(back.graph.initializer[i]), w)
    inline = tmp_path / "m.onnx"
    inline.write_bytes(_bytes(m))
    g = amanda_onnx.load_model(inline)
    amanda_onnx.save_model(g, inline, external_data=True)  # the inline source is replaced while read
    assert np.array_equal(numpy_helper.to_array(onnx.load(str(inline)).graph.initializer[0]), ws[0])
    assert np.array_equal(g.ops["w0"].attrs["value"].numpy(), ws[0])  # the graph still reads the old file


def test_progress_is_silent_off_a_terminal(capsys):
    from amanda_core import progress

    progress.enable(True)
    try:
        with progress.task("work", total=3) as t:
            t.advance(3)
        assert capsys.readouterr().err == ""
        progress.enable(False, quiet=True)
        progress.notice("hello")
        assert capsys.readouterr().err == ""
    finally:
        progress.enable(False)
