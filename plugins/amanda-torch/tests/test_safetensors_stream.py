"""The streaming ``.safetensors`` writer (``amanda_torch.safetensors_writer``) and the torch exporter's ``.py`` +
``.safetensors`` written through it: files ``safetensors.safe_open`` reads back identical, tensors still in their
source file copied without being read, and an interrupted write that leaves nothing."""

from __future__ import annotations

import json
import os
import struct

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")
safetensors = pytest.importorskip("safetensors")

from amanda_core import Graph  # noqa: E402
from amanda_core.errors import AmandaError  # noqa: E402
from amanda_core.ir.tensor import FileTensor, MappedFile  # noqa: E402
from amanda_core.serialization import atomic_write  # noqa: E402
from amanda_torch import safetensors_writer  # noqa: E402
from amanda_torch.exporter import save_model  # noqa: E402
from amanda_torch.safetensors_writer import write_safetensors  # noqa: E402
from amanda_torch.tensors import to_numpy  # noqa: E402

NS = "amanda/pytorch/2.13.0"


def read_back(path):
    """{name: numpy array} and the metadata, read by safetensors itself."""
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        return {k: to_numpy(f.get_tensor(k)) for k in f.keys()}, f.metadata()  # noqa: SIM118


def same_bytes(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(
        np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8))


def file_tensor(tmp_path, array, name="weights.bin", pad=13):
    """A FileTensor on the bytes of ``array`` at an odd offset of a file."""
    path = tmp_path / name
    path.write_bytes(b"\x07" * pad + np.ascontiguousarray(array).tobytes() + b"\x09" * 5)
    return FileTensor(MappedFile(str(path)), pad, array.nbytes, dtype=array.dtype.name, shape=array.shape,
                      label=f"tensor {name}")


def test_every_kind_of_tensor_reads_back_identical(tmp_path):
    rng = np.random.default_rng(0)
    big = rng.standard_normal((256, 300)).astype(np.float32)  # 300 KB from a file
    matrix = rng.standard_normal((6, 5))
    tensors = [
        ("layer.0.weight", big),
        ("from_file", file_tensor(tmp_path, big)),
        ("half", rng.standard_normal((3, 4)).astype(np.float16)),
        ("bf16", rng.standard_normal((7,)).astype(ml_dtypes.bfloat16)),
        ("f8", rng.standard_normal((4,)).astype(ml_dtypes.float8_e4m3fn)),
        ("ints", np.arange(-5, 5, dtype=np.int64).reshape(2, 5)),
        ("u8", np.arange(200, 210, dtype=np.uint8)),
        ("mask", np.array([True, False, True])),
        ("scalar", np.float64(2.5).reshape(())),
        ("empty", np.zeros((0, 3), np.float32)),
        ("transposed", matrix.T),  # not contiguous
        ("big_endian", np.arange(6, dtype=">i4")),
        ("torch_param", torch.arange(12, dtype=torch.float32).reshape(3, 4)),
        ("torch_bf16", torch.linspace(-1, 1, 5, dtype=torch.bfloat16)),
    ]
    path = tmp_path / "m.safetensors"
    with atomic_write(path, "wb") as f:
        n = write_safetensors(f, tensors, {"format": "pt", "note": "x"})
    assert n == os.path.getsize(path)
    got, meta = read_back(path)
    assert meta == {"format": "pt", "note": "x"}
    assert set(got) == {name for name, _ in tensors}
    expected = {name: (to_numpy(v) if isinstance(v, torch.Tensor) else
                       v.numpy() if isinstance(v, FileTensor) else np.asarray(v)) for name, v in tensors}
    expected["big_endian"] = expected["big_endian"].astype("<i4")
    for name, value in expected.items():
        assert same_bytes(got[name], value), name
    # the header is 8-byte aligned JSON; the data follows in the order given, back to back
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    assert size % 8 == 0
    head = json.loads(raw[8:8 + size])
    offsets = [head[name]["data_offsets"] for name, _ in tensors]
    assert offsets[0][0] == 0 and all(a[1] == b[0] for a, b in zip(offsets, offsets[1:]))
    assert offsets[-1][1] == len(raw) - 8 - size


def test_tensor_in_its_file_is_copied_without_being_read(tmp_path):
    value = np.random.default_rng(1).standard_normal((512, 512)).astype(np.float32)  # 1 MB
    t = file_tensor(tmp_path, value)
    with atomic_write(tmp_path / "w.safetensors", "wb") as f:
        write_safetensors(f, [("w", t)])
    assert not t.is_loaded  # copied file to file, never mapped into an array here
    got, _ = read_back(tmp_path / "w.safetensors")
    assert same_bytes(got["w"], value)


def test_bad_tensors_are_named(tmp_path):
    with pytest.raises(AmandaError, match="'z'.*complex128"):
        with atomic_write(tmp_path / "a.safetensors", "wb") as f:
            write_safetensors(f, [("ok", np.zeros(2, np.float32)), ("z", np.zeros(2, np.complex128))])
    with pytest.raises(AmandaError, match="'w' is written twice"):
        with atomic_write(tmp_path / "b.safetensors", "wb") as f:
            write_safetensors(f, [("w", np.zeros(2, np.float32)), ("w", np.ones(2, np.float32))])
    assert os.listdir(tmp_path) == []


# --------------------------------------------------------------------------- through the torch exporter


def linear_graph(weight, bias):
    """y = x @ weight.T + bias, weights held as parameters (docs/torch.md representation)."""
    g = Graph(NS)
    x = g.add_input_port("x", f"Float(batch, {weight.shape[1]})")

    def const(name, value):
        op = g.add_op("prim::Constant", name, outputs=["output"], attrs={"value": value})
        op.meta.update(role="parameter", target=f"fc.{name}")
        return op.output_ports["output"]

    w, b = const("weight", weight), const("bias", bias)
    op = g.add_op("aten::linear.default", "fc", inputs=["input", "weight", "bias"], outputs=["out0"],
                  sources=[x, w, b])
    g.connect(op.output_ports[0], g.add_output_port("y"))
    return g


def test_exported_module_weights_are_streamed_from_their_file(tmp_path):
    rng = np.random.default_rng(2)
    weight = rng.standard_normal((64, 32)).astype(np.float32)
    bias = rng.standard_normal((64,)).astype(np.float32)
    wt = file_tensor(tmp_path, weight, "w.bin")
    save_model(linear_graph(wt, bias), tmp_path / "m.py")
    assert not wt.is_loaded
    got, meta = read_back(tmp_path / "m.safetensors")
    assert set(got) == {"fc.weight", "fc.bias"} and meta["format"] == "pt"
    assert same_bytes(got["fc.weight"], weight) and same_bytes(got["fc.bias"], bias)
    import importlib.util

    spec = importlib.util.spec_from_file_location("streamed_module", tmp_path / "m.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = torch.from_numpy(rng.standard_normal((3, 32)).astype(np.float32))
    ref = torch.nn.functional.linear(x, torch.from_numpy(weight), torch.from_numpy(bias))
    assert torch.equal(module.Model()(x), ref)


def test_interrupted_write_leaves_nothing(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    weight = rng.standard_normal((64, 32)).astype(np.float32)
    bias = rng.standard_normal((64,)).astype(np.float32)
    (tmp_path / "old.py").write_text("kept")
    real = safetensors_writer._write_array
    calls = []

    def interrupted(f, arr, nbytes, name):
        if calls:
            raise KeyboardInterrupt  # Ctrl-C after the header and the first tensor
        calls.append(name)
        real(f, arr, nbytes, name)

    monkeypatch.setattr(safetensors_writer, "_write_array", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_model(linear_graph(weight, bias), tmp_path / "m.py")
    assert calls and sorted(os.listdir(tmp_path)) == ["old.py"]
    monkeypatch.undo()
    # a source file cut short since it was read: the tensor and the file are named, nothing is left
    wt = file_tensor(tmp_path, weight, "w.bin")
    with open(tmp_path / "w.bin", "r+b") as f:
        f.truncate(100)
    with pytest.raises(AmandaError, match="w.bin") as e:
        save_model(linear_graph(wt, bias), tmp_path / "m.py")
    assert "\n" not in str(e.value)
    assert sorted(os.listdir(tmp_path)) == ["old.py", "w.bin"]
