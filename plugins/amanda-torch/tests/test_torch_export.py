"""The torch exporter on graphs built by hand in ``amanda/pytorch``: the GraphModule (weights registered as
parameters and buffers, literals, lists, several returns), ``.pt2`` with a dynamic batch, the readable ``.py``
with ``.safetensors`` weights run in a child process, and the one-line errors that leave no file behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from amanda_core import Graph  # noqa: E402
from amanda_core.errors import AmandaError  # noqa: E402
from amanda_torch.exporter import save_model, to_module  # noqa: E402
from amanda_torch.runner import example_inputs, run  # noqa: E402

NS = "amanda/pytorch/2.13.0"


class Builder:
    """Adds ops to a graph in the representation of docs/torch.md."""

    def __init__(self, namespace: str = NS) -> None:
        self.g = Graph(namespace)
        self.rng = np.random.default_rng(0)

    def input(self, name, dtype):
        return self.g.add_input_port(name, dtype)

    def const(self, value, name=None, role=None, target=None, **meta):
        op = self.g.add_op("prim::Constant", name, outputs=["output"], attrs={"value": value})
        if role:
            op.meta.update(role=role, target=target, **meta)
        return op.output_ports["output"]

    def tensor(self, target, shape, role="parameter", dtype=np.float32, **meta):
        value = self.rng.standard_normal(shape).astype(dtype)
        return self.const(value, target.replace(".", "_"), role, target, **meta), value

    def op(self, type_, ports, outputs=("out0",), name=None):
        op = self.g.add_op(type_, name, inputs=list(ports), outputs=list(outputs), sources=list(ports.values()))
        return op.output_ports[0] if len(outputs) == 1 else op

    def output(self, name, src):
        self.g.connect(src, self.g.add_output_port(name))


def cnn():
    """conv (no bias, stride 2) - batch norm - relu - global average pool - linear, batch symbolic."""
    b = Builder()
    x = b.input("x", "Float(batch, 3, 8, 8)")
    w, wv = b.tensor("conv1.weight", (4, 3, 3, 3))
    y = b.op("aten::conv2d.default", {"input": x, "weight": w, "stride": b.const([2, 2]),
                                       "padding": b.const([1, 1])}, name="conv2d")
    gamma, gv = b.tensor("bn.weight", (4,))
    beta, bv = b.tensor("bn.bias", (4,))
    mean, mv = b.tensor("bn.running_mean", (4,), role="buffer", persistent=True)
    var = b.const(np.abs(b.rng.standard_normal(4)).astype(np.float32) + 0.5, "bn_running_var", "buffer",
                  "bn.running_var", persistent=True)
    varv = var.op.attrs["value"]
    b.const(np.array(3, dtype=np.int64), "bn_num_batches_tracked", "buffer", "bn.num_batches_tracked",
            persistent=True)
    y = b.op("aten::batch_norm.default", {"input": y, "weight": gamma, "bias": beta, "running_mean": mean,
                                           "running_var": var, "training": b.const(False),
                                           "momentum": b.const(0.1), "eps": b.const(1e-5),
                                           "cudnn_enabled": b.const(False)}, name="batch_norm")
    y = b.op("aten::relu.default", {"self": y}, name="relu")
    y = b.op("aten::mean.dim", {"self": y, "dim": b.const([2, 3])}, name="mean")
    scale, sv = b.tensor("scale", (4,), role="buffer", persistent=False)
    y = b.op("aten::mul.Tensor", {"self": y, "other": scale}, name="mul")
    fw, fwv = b.tensor("fc.weight", (5, 4))
    fb, fbv = b.tensor("fc.bias", (5,))
    y = b.op("aten::linear.default", {"input": y, "weight": fw, "bias": fb}, name="linear")
    b.output("logits", y)

    def reference(x):
        t = torch.from_numpy
        y = torch.nn.functional.conv2d(x, t(wv), None, 2, 1)
        y = torch.nn.functional.batch_norm(y, t(mv), t(varv), t(gv), t(bv), False, 0.1, 1e-5)
        y = torch.relu(y).mean(dim=(2, 3)) * t(sv)
        return torch.nn.functional.linear(y, t(fwv), t(fbv))

    return b.g, reference


def test_module_matches_the_ops_it_calls():
    g, reference = cnn()
    module = to_module(g)
    assert isinstance(module, torch.fx.GraphModule)
    x = torch.randn(3, 3, 8, 8)
    with torch.no_grad():
        assert torch.equal(module(x), reference(x))
    calls = [n.target for n in module.graph.nodes if n.op == "call_function"]
    assert calls == [torch.ops.aten.conv2d.default, torch.ops.aten.batch_norm.default, torch.ops.aten.relu.default,
                     torch.ops.aten.mean.dim, torch.ops.aten.mul.Tensor, torch.ops.aten.linear.default]


def test_weights_are_registered_parameters_and_buffers():
    g, _ = cnn()
    module = to_module(g)
    assert list(module.state_dict()) == ["conv1.weight", "bn.weight", "bn.bias", "bn.running_mean",
                                         "bn.running_var", "bn.num_batches_tracked", "fc.weight", "fc.bias"]
    assert [n for n, _ in module.named_parameters()] == ["conv1.weight", "bn.weight", "bn.bias", "fc.weight",
                                                         "fc.bias"]
    assert {n for n, _ in module.named_buffers()} == {"bn.running_mean", "bn.running_var",
                                                      "bn.num_batches_tracked", "scale"}
    assert "scale" not in module.state_dict()  # non-persistent
    assert all(p.requires_grad for p in module.parameters())
    assert not module.get_buffer("bn.num_batches_tracked").requires_grad


def test_weights_share_the_graphs_memory_unless_copied_or_read_only():
    g, _ = cnn()
    array = g.get_op("conv1_weight").attrs["value"]
    module = to_module(g)
    assert module.get_parameter("conv1.weight").data_ptr() == array.ctypes.data
    copied = to_module(g, copy=True)
    assert copied.get_parameter("conv1.weight").data_ptr() != array.ctypes.data
    array.flags.writeable = False
    frozen = to_module(g)
    assert frozen.get_parameter("conv1.weight").data_ptr() != array.ctypes.data
    assert torch.equal(frozen.get_parameter("conv1.weight").detach(), torch.from_numpy(array.copy()))


def test_fine_tuning_changes_the_parameters():
    g, _ = cnn()
    module = to_module(g, copy=True)
    before = module.get_parameter("fc.weight").detach().clone()
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
    loss = module(torch.randn(2, 3, 8, 8)).square().sum()
    loss.backward()
    optimizer.step()
    assert not torch.equal(before, module.get_parameter("fc.weight").detach())


def test_module_is_traceable_by_torch_export():
    g, reference = cnn()
    module = to_module(g)
    batch = torch.export.Dim("batch")
    program = torch.export.export(module, (torch.randn(2, 3, 8, 8),), dynamic_shapes=({0: batch},))
    signature = program.graph_signature
    assert list(signature.parameters) == ["conv1.weight", "bn.weight", "bn.bias", "fc.weight", "fc.bias"]
    assert set(signature.buffers) == {"bn.running_mean", "bn.running_var", "bn.num_batches_tracked", "scale"}
    assert list(signature.non_persistent_buffers) == ["scale"]
    x = torch.randn(5, 3, 8, 8)
    assert torch.equal(program.module()(x), reference(x))


def test_literals_lists_and_several_returns():
    b = Builder()
    x = b.input("x", "Float(2, 4, 6)")
    mx = b.op("aten::max.dim", {"self": x, "dim": b.const(1)}, outputs=("values", "indices"), name="max")
    parts = b.op("aten::split_with_sizes.default", {"self": mx.output_ports["values"],
                                                    "split_sizes": b.const([2, 4]), "dim": b.const(1)},
                 name="split")
    unpack = b.op("prim::ListUnpack", {"list": parts}, outputs=("elements_0", "elements_1"), name="unpack")
    items = b.op("prim::ListConstruct", {"elements_0": unpack.output_ports["elements_1"],
                                          "elements_1": unpack.output_ports["elements_0"]}, outputs=("list",))
    cat = b.op("aten::cat.default", {"tensors": items, "dim": b.const(-1)}, name="cat")
    to = b.op("aten::to.dtype", {"self": cat, "dtype": b.const("float64")}, name="to")
    size = b.op("aten::sym_size.int", {"self": x, "dim": b.const(0)}, outputs=("out0",), name="size")
    shape = b.op("prim::ListConstruct", {"elements_0": size, "elements_1": b.const(-1)}, outputs=("list",))
    flat = b.op("aten::reshape.default", {"self": x, "shape": shape}, name="reshape")
    zeros = b.op("aten::zeros.default", {"size": b.const([2]), "dtype": b.const("int32")}, name="zeros")
    b.output("y", to)
    b.output("indices", mx.output_ports["indices"])
    b.output("flat", flat)
    b.output("zeros", zeros)
    value = np.random.default_rng(1).standard_normal((2, 4, 6)).astype(np.float32)
    out = run(b.g, {"x": value})
    assert list(out) == ["y", "indices", "flat", "zeros"]
    t = torch.from_numpy(value)
    values, indices = t.max(1)
    expected = torch.cat([values[:, 2:], values[:, :2]], -1).double()
    assert out["y"].dtype == np.float64 and np.array_equal(out["y"], expected.numpy())
    assert np.array_equal(out["indices"], indices.numpy())
    assert np.array_equal(out["flat"], value.reshape(2, -1))
    assert out["zeros"].dtype == np.int32 and out["zeros"].shape == (2,)


def test_bfloat16_weights_and_outputs():
    b = Builder()
    x = b.input("x", "BFloat16(2, 3)")
    w = b.const(np.arange(6, dtype=np.float32).reshape(2, 3).astype(ml_dtypes.bfloat16), "w", "parameter", "w")
    b.output("y", b.op("aten::add.Tensor", {"self": x, "other": w}, name="add"))
    module = to_module(b.g)
    assert module.get_parameter("w").dtype == torch.bfloat16
    inputs = example_inputs(b.g, seed=3)
    assert inputs["x"].dtype == ml_dtypes.bfloat16
    out = run(b.g, inputs)["y"]
    assert out.dtype == ml_dtypes.bfloat16
    expected = inputs["x"].astype(np.float32) + np.arange(6, dtype=np.float32).reshape(2, 3)
    assert np.array_equal(out.astype(np.float32), expected.astype(ml_dtypes.bfloat16).astype(np.float32))


def test_example_inputs_are_seeded_and_fit_the_types():
    b = Builder()
    b.input("pixels", "Float(batch, 3, 4, 4)")
    b.input("ids", "Long(batch, seq)")
    b.input("mask", "Bool(batch, seq)")
    a = example_inputs(b.g, seed=7, dims={"batch": 3, "seq": 5})
    again = example_inputs(b.g, seed=7, dims={"batch": 3, "seq": 5})
    assert a["pixels"].shape == (3, 3, 4, 4) and a["pixels"].dtype == np.float32
    assert a["ids"].shape == (3, 5) and a["ids"].dtype == np.int64
    assert a["ids"].min() >= 0 and a["ids"].max() < 16
    assert a["mask"].dtype == np.bool_
    assert all(np.array_equal(a[k], again[k]) for k in a)
    assert example_inputs(b.g, seed=7)["ids"].shape == (1, 1)
    assert not np.array_equal(example_inputs(b.g, seed=8)["pixels"], a["pixels"][:1])


def test_pt2_has_a_dynamic_batch(tmp_path):
    g, reference = cnn()
    path = tmp_path / "cnn.pt2"
    save_model(g, path)
    loaded = torch.export.load(str(path)).module()
    for batch in (1, 3):
        x = torch.randn(batch, 3, 8, 8)
        assert torch.equal(loaded(x), reference(x))



def test_pt2_keeps_the_names_of_its_dims(tmp_path):
    """torch.export keeps its own symbols (s0 ...): the archive records the inputs' dim names, so the .pt2 read
    back says Float(batch, 3, 8, 8), and ``--dim batch=...`` still names its batch."""
    from amanda_torch.importer import load_model

    g, _ = cnn()
    path = tmp_path / "cnn.pt2"
    save_model(g, path)
    back = load_model(str(path))
    assert back.input_ports["x"].dtype == "Float(batch, 3, 8, 8)"
    assert [op.type for op in back.ops.values()].count("aten::conv2d.default") == 1


STANDALONE = textwrap.dedent("""
    import importlib.util, json, sys
    import numpy as np, torch
    spec = importlib.util.spec_from_file_location("generated", sys.argv[1])
    mod = importlib.util.module_from_spec(spec)
    sys.modules["generated"] = mod  # torch.cond traces its branches by module name
    spec.loader.exec_module(mod)
    model = getattr(mod, sys.argv[2])()
    data = np.load(sys.argv[3])
    with torch.no_grad():
        out = model(*[torch.from_numpy(data[k]) for k in json.loads(sys.argv[4])])
    out = out if isinstance(out, tuple) else (out,)
    np.savez(sys.argv[5], *[o.numpy() for o in out])
    print(json.dumps(list(model.state_dict())))
""")


def run_generated(path, class_name, inputs, tmp_path):
    """Runs the generated module in a child process (torch and safetensors only); its outputs and state_dict
    keys."""
    np.savez(tmp_path / "inputs.npz", **inputs)
    script = tmp_path / "standalone.py"
    script.write_text(STANDALONE)
    proc = subprocess.run([sys.executable, str(script), str(path), class_name, str(tmp_path / "inputs.npz"),
                           json.dumps(list(inputs)), str(tmp_path / "outputs.npz")],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    with np.load(tmp_path / "outputs.npz") as data:
        outputs = [data[f"arr_{i}"] for i in range(len(data.files))]
    return outputs, json.loads(proc.stdout.strip().splitlines()[-1])


def test_python_module_runs_standalone(tmp_path):
    g, reference = cnn()
    path = tmp_path / "out" / "cnn_model.py"
    path.parent.mkdir()
    source = save_model(g, path, class_name="tiny cnn")
    assert (tmp_path / "out" / "cnn_model.safetensors").exists()
    assert "class TinyCnn(torch.nn.Module):" in source
    assert "conv2d = F.conv2d(x, conv1_weight, stride=[2, 2], padding=[1, 1])" in source
    assert "batch_norm = torch.ops.aten.batch_norm.default(" in source
    assert "_buffer(self, 'scale', tensors['scale'], persistent=False)" in source
    x = np.random.default_rng(2).standard_normal((2, 3, 8, 8)).astype(np.float32)
    (out,), keys = run_generated(path, "TinyCnn", {"x": x}, tmp_path)
    assert np.array_equal(out, reference(torch.from_numpy(x)).numpy())
    assert keys == list(to_module(g).state_dict())


def test_python_module_is_traceable_by_torch_export(tmp_path, monkeypatch):
    g, reference = cnn()
    save_model(g, tmp_path / "traced.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    module = importlib.import_module("traced").Model()
    program = torch.export.export(module, (torch.randn(2, 3, 8, 8),),
                                  dynamic_shapes=({0: torch.export.Dim("batch")},))
    x = torch.randn(4, 3, 8, 8)
    assert torch.equal(program.module()(x), reference(x))



class HeadsView(torch.nn.Module):
    """A view over the batch times the heads (nn.MultiheadAttention's ``bsz * num_heads``), and back."""

    def forward(self, x):
        b = x.shape[0]
        return x.view(b * 4, -1, 2).view(b, (b * 8) // b, 2) + 1


def test_number_arithmetic_on_sizes_keeps_the_batch_dynamic(tmp_path, monkeypatch):
    """aten::mul.int and kin on a SymInt are lowered to Python's operators, as torch.export writes them: called
    as torch.ops.aten.mul.int, the size would be fixed at the example's batch in the .pt2 and the .py."""
    from amanda_torch.importer import load_model

    batch = torch.export.Dim("batch", min=2, max=64)
    g = load_model(HeadsView().eval(), example_inputs=(torch.randn(3, 16),), dynamic_shapes={"x": {0: batch}})
    assert any(op.type == "aten::mul.int" for op in g.ops.values())
    save_model(g, tmp_path / "heads.pt2")
    loaded = torch.export.load(str(tmp_path / "heads.pt2")).module()
    source = save_model(g, tmp_path / "heads_view.py")
    assert " * 4" in source and "aten.mul.int" not in source
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    program = torch.export.export(importlib.import_module("heads_view").Model(), (torch.randn(3, 16),),
                                  dynamic_shapes=({0: batch},))
    for n in (2, 5):
        x = torch.randn(n, 16)
        want = HeadsView()(x)
        assert torch.equal(loaded(x), want) and torch.equal(program.module()(x), want)


# --------------------------------------------------------------------------- errors


def one_line(excinfo) -> str:
    text = str(excinfo.value)
    assert "\n" not in text
    return text


def test_unknown_op_type_is_named():
    b = Builder()
    x = b.input("x", "Float(2)")
    b.output("y", b.op("aten::no_such_op.default", {"self": x}, name="mystery"))
    with pytest.raises(AmandaError) as e:
        to_module(b.g)
    assert "'mystery'" in one_line(e) and "aten::no_such_op.default" in str(e.value)


def test_ports_that_do_not_fit_the_overload_are_named():
    b = Builder()
    x = b.input("x", "Float(2)")
    b.output("y", b.op("aten::relu.default", {"input": x}, name="bad_relu"))
    with pytest.raises(AmandaError) as e:
        to_module(b.g)
    assert "'bad_relu'" in one_line(e) and "'input'" in str(e.value)
    b = Builder()
    x = b.input("x", "Float(2, 3)")
    b.output("y", b.op("aten::linear.default", {"input": x}, name="no_weight"))
    with pytest.raises(AmandaError) as e:
        to_module(b.g)
    assert "'no_weight'" in one_line(e) and "'weight'" in str(e.value)


def test_graph_outside_amanda_pytorch_is_refused(tmp_path):
    b = Builder("amanda/onnx/18")
    x = b.input("x", "Float(2)")
    b.output("y", x)
    with pytest.raises(AmandaError, match="amanda/onnx/18"):
        save_model(b.g, tmp_path / "m.py")
    assert os.listdir(tmp_path) == []


def test_failed_writes_leave_no_file(tmp_path):
    b = Builder()
    x = b.input("x", "Float(2)")
    b.output("y", b.op("aten::no_such_op.default", {"self": x}, name="mystery"))
    for name in ("m.py", "m.pt2"):
        with pytest.raises(AmandaError, match="mystery"):
            save_model(b.g, tmp_path / name)
    b = Builder()
    x = b.input("x", "Float(batch, 3)")
    size = b.op("aten::sym_size.int", {"self": x, "dim": b.const(0)}, name="size")
    # data-dependent Python control flow torch.export refuses: the batch must equal 5 for the view below
    shape = b.op("prim::ListConstruct", {"elements_0": b.const(5), "elements_1": b.const(3)}, outputs=("list",))
    b.output("y", b.op("aten::view.default", {"self": x, "size": shape}, name="view"))
    b.output("n", size)
    with pytest.raises(AmandaError, match="torch.export"):
        save_model(b.g, tmp_path / "m.pt2")
    (tmp_path / "keep.py").write_text("old")
    g, _ = cnn()
    g.get_op("conv1_weight").meta["target"] = "conv1..weight"
    with pytest.raises(AmandaError, match="conv1..weight"):
        save_model(g, tmp_path / "keep.py")
    assert sorted(os.listdir(tmp_path)) == ["keep.py"]
    assert (tmp_path / "keep.py").read_text() == "old"
