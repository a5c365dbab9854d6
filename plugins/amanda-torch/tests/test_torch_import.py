"""PyTorch import (docs/torch.md): torch.export and TorchScript programs into ``amanda/pytorch/<torch>`` graphs."""

from __future__ import annotations

import collections
import os
import sys
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, os.path.dirname(__file__))
import models  # noqa: E402

from amanda_core.errors import AmandaError  # noqa: E402
from amanda_core.namespace import validate  # noqa: E402
from amanda_torch.importer import load_model  # noqa: E402


def _errors(graph, registry):
    return [str(p) for p in validate(graph, registry) if p.severity == "error"]


def _spec(name, dtype, shape):
    return SimpleNamespace(name=name, dtype=dtype, shape=shape)


@pytest.fixture(scope="module")
def imported(torch_schema):
    """Each section-5 model imported once through torch.export: name -> (module, inputs, graph)."""
    out = {}
    for name in ("small_cnn", *models.TRANSFORMERS_MODELS, "cond_module"):
        module, inputs = models.FACTORIES[name]()
        out[name] = (module, inputs, load_model(module, example_inputs=inputs))
    return out


@pytest.mark.parametrize("name", ["small_cnn", *models.TRANSFORMERS_MODELS, "cond_module"])
def test_model_imports_and_validates(imported, torch_registry, name):
    module, inputs, graph = imported[name]
    assert graph.namespace == f"amanda/pytorch/{torch.__version__.split('+')[0]}"
    assert _errors(graph, torch_registry) == []
    types = {op.type for op in graph.walk()}
    assert all(t.startswith(("aten::", "prim::", "higher_order::")) for t in types)
    assert all("." in t for t in types if t.startswith("aten::"))  # every ATen op is one overload


def test_names_of_inputs_outputs_and_weights(imported):
    module, inputs, graph = imported["bert"]
    assert graph.input_ports.names() == ["input_ids", "attention_mask"]
    assert graph.output_ports.names() == ["last_hidden_state", "pooler_output"]
    assert str(graph.input_ports["input_ids"].dtype) == "Long(2, 16)"
    assert str(graph.output_ports["last_hidden_state"].dtype) == "Float(2, 16, 64)"
    w = graph.get_op("encoder.layer.0.attention.self.query.weight")
    assert w.type == "prim::Constant" and w.meta == {"role": "parameter",
                                                     "target": "encoder.layer.0.attention.self.query.weight"}
    buf = graph.get_op("embeddings.position_ids")
    assert buf.meta["role"] == "buffer" and buf.meta["persistent"] is False


def test_op_types_ports_and_literals(imported):
    module, inputs, graph = imported["small_cnn"]
    conv = graph.get_op("conv2d")
    assert conv.type == "aten::conv2d.default"
    assert conv.input_ports.names() == ["input", "weight", "stride", "padding"]  # bias=False: absent
    assert conv.input_ports["input"].source.qualified_name == "graph.x"
    assert conv.input_ports["weight"].source.op.name == "conv1.weight"
    for port, value in (("stride", [2, 2]), ("padding", [1, 1])):
        const = conv.input_ports[port].source.op
        assert const.type == "prim::Constant" and const.attrs["value"] == value
        assert str(const.output_ports["output"].dtype) == "int[]"
    mean = graph.get_op("mean")
    assert mean.type == "aten::mean.dim"
    assert mean.input_ports["dim"].source.op.attrs["value"] == [2, 3]
    assert str(graph.get_op("linear").output_ports["out0"].dtype) == "Float(2, 10)"


def test_dtype_literals_by_name(imported):
    module, inputs, graph = imported["bert"]
    to = next(op for op in graph if op.type == "aten::to.dtype_layout")
    assert to.input_ports["dtype"].source.op.attrs["value"] in ("float32", "int64", "bool")


def test_weights_share_torch_storage(imported):
    for name, fqn in (("small_cnn", "conv1.weight"), ("resnet", "embedder.embedder.convolution.weight"),
                      ("bert", "embeddings.word_embeddings.weight")):
        module, inputs, graph = imported[name]
        value = graph.get_op(fqn).attrs["value"]
        tensor = module.get_parameter(fqn)
        assert isinstance(value, np.ndarray) and value.shape == tuple(tensor.shape)
        assert np.shares_memory(value, tensor.detach().numpy())
    module, inputs, graph = imported["resnet"]
    mean = next(op for op in graph if op.meta.get("role") == "buffer" and op.name.endswith("running_mean"))
    assert np.shares_memory(mean.attrs["value"], module.get_buffer(mean.meta["target"]).numpy())
    assert np.abs(mean.attrs["value"]).max() > 0.01  # calibrated statistics, not the initial zeros


def test_bfloat16_weights_through_ml_dtypes(torch_registry):
    module = torch.nn.Linear(4, 3).to(torch.bfloat16).eval()
    graph = load_model(module, example_inputs=(torch.randn(2, 4, dtype=torch.bfloat16),))
    value = graph.get_op("weight").attrs["value"]
    assert value.dtype.name == "bfloat16"
    assert np.shares_memory(value, module.weight.detach().view(torch.int16).numpy())
    assert np.array_equal(value.astype(np.float32), module.weight.detach().float().numpy())
    assert str(graph.input_ports["input"].dtype) == "BFloat16(2, 4)"
    assert _errors(graph, torch_registry) == []


def test_dynamic_batch_from_input_specs(torch_registry):
    module, _ = models.small_cnn()
    graph = load_model(module, inputs=[_spec("x", "float32", ["batch", 3, 64, 64])])
    assert str(graph.input_ports["x"].dtype) == "Float(batch, 3, 64, 64)"
    assert str(graph.output_ports["output"].dtype) == "Float(batch, 10)"
    assert graph.input_ports["x"].dtype is not None
    from amanda_torch.valuetypes import parse_value_type

    t = parse_value_type(str(graph.output_ports["output"].dtype))
    assert t.sizes() == [None, 10] and t.symbolic_sizes() == ["batch", 10]
    assert _errors(graph, torch_registry) == []


def test_dynamic_dims_and_symbolic_arithmetic(torch_registry):
    module, inputs = models.bert()
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq", max=64)
    graph = load_model(module, example_inputs=inputs, dynamic_shapes=({0: batch, 1: seq}, {0: batch, 1: seq}))
    assert [str(p.dtype) for p in graph.input_ports] == ["Long(batch, seq)", "Long(batch, seq)"]
    assert str(graph.output_ports["last_hidden_state"].dtype) == "Float(batch, seq, 64)"
    sizes = [op for op in graph if op.type == "aten::sym_size.int"]
    assert sizes and all(str(op.output_ports["out0"].dtype) == "int" for op in sizes)
    lists = [op for op in graph if op.type == "prim::ListConstruct"]
    assert any(p.source.op.type == "aten::sym_size.int" for op in lists for p in op.input_ports)
    assert _errors(graph, torch_registry) == []


def test_symint_python_arithmetic_as_scalar_ops(torch_registry):
    class Flatten(torch.nn.Module):
        def forward(self, x):
            return x.reshape(x.shape[0] * x.shape[1], -1)

    graph = load_model(Flatten(), example_inputs=(torch.randn(3, 4, 5),),
                       dynamic_shapes=({0: torch.export.Dim("n"), 1: torch.export.Dim("m")},))
    mul = [op for op in graph if op.type == "aten::mul.int"]
    assert len(mul) == 1 and mul[0].input_ports.names() == ["a", "b"]
    assert str(graph.output_ports["output"].dtype) == "Float(m*n, 5)"
    assert _errors(graph, torch_registry) == []


def test_multi_output_and_list_outputs(torch_registry):
    class M(torch.nn.Module):
        def forward(self, x):
            values, indices = torch.max(x, dim=1)
            a, b = torch.split(x, [1, 3], dim=1)
            return values, indices, a + b.sum(dim=1, keepdim=True)

    graph = load_model(M(), example_inputs=(torch.randn(2, 4),))
    mx = next(op for op in graph if op.type == "aten::max.dim")
    assert mx.output_ports.names() == ["values", "indices"]
    assert graph.output_ports.names() == ["out0", "out1", "out2"]
    assert graph.output_ports["out1"].source is mx.output_ports["indices"]
    split = next(op for op in graph if op.type.startswith("aten::split"))
    unpack = split.output_ports[0].consumers[0].op
    assert unpack.type == "prim::ListUnpack" and unpack.output_ports.names() == ["elements_0", "elements_1"]
    assert str(unpack.output_ports["elements_1"].dtype) == "Float(2, 3)"
    assert _errors(graph, torch_registry) == []


def test_cond_branches_as_subgraphs(imported, torch_registry):
    module, inputs, graph = imported["cond_module"]
    cond = next(op for op in graph if op.type == "higher_order::cond")
    assert cond.input_ports.names()[0] == "pred"
    assert cond.input_ports["pred"].source.op.type == "aten::gt.Scalar"
    true_g, false_g = cond.attrs["true_graph"], cond.attrs["false_graph"]
    assert {op.type for op in true_g} >= {"aten::sin.default", "aten::mul.Tensor"}
    assert {op.type for op in false_g} >= {"aten::cos.default", "aten::add.Tensor"}
    assert true_g.input_ports.names() == false_g.input_ports.names() == cond.input_ports.names()[1:]
    assert true_g.output_ports.names() == false_g.output_ports.names() == cond.output_ports.names()
    assert graph.output_ports["output"].source is cond.output_ports["outputs_0"]


def test_while_loop_as_subgraphs(torch_registry):
    from torch._higher_order_ops.while_loop import while_loop

    class M(torch.nn.Module):
        def forward(self, x, n):
            def cond_fn(i, y):
                return i < n.sum()

            def body_fn(i, y):
                return i + 1, y * 2.0

            return while_loop(cond_fn, body_fn, (torch.zeros((), dtype=torch.int64), x))[1]

    graph = load_model(M(), example_inputs=(torch.randn(3), torch.tensor([2, 1])))
    loop = next(op for op in graph if op.type == "higher_order::while_loop")
    assert loop.input_ports.names()[:2] == ["carried_inputs_0", "carried_inputs_1"]
    assert loop.attrs["cond_graph"].output_ports.names() == ["pred"]
    assert loop.attrs["body_graph"].output_ports.names() == ["outputs_0", "outputs_1"]
    assert _errors(graph, torch_registry) == []


def test_runtime_assertions_are_dropped(imported):
    module, inputs, graph = imported["bert"]
    assert not [op for op in graph.walk() if "assert" in op.type]


def test_exported_program_and_pt2_file(tmp_path, torch_registry):
    module, inputs = models.small_cnn()
    program = torch.export.export(module, inputs)
    from_program = load_model(program)
    path = tmp_path / "cnn.pt2"
    torch.export.save(program, path)
    from_file = load_model(str(path))
    assert [op.type for op in from_file] == [op.type for op in from_program]
    assert from_file.input_ports.names() == ["x"] and _errors(from_file, torch_registry) == []


# --------------------------------------------------------------------------- TorchScript


def test_scripted_loop_as_blocks(torch_registry):
    module, (x,) = models.scripted_loop()
    graph = load_model(module)
    assert _errors(graph, torch_registry) == []
    loop = next(op for op in graph if op.type == "prim::Loop")
    body = loop.attrs["body"]
    assert body.input_ports.names()[:3] == ["iteration", "carried_0", "carried_1"]
    assert body.output_ports.names() == ["condition", "carried_0", "carried_1"]
    inner_if = next(op for op in body if op.type == "prim::If")
    assert set(inner_if.attrs) == {"then_block", "else_block"}
    # the block reads the outer loop counter through an explicit capture, never an edge across graphs
    types = {op.type for op in body.walk()}
    assert {"aten::mul.Scalar", "aten::add.Tensor", "aten::add.int", "aten::Bool.Tensor"} <= types
    assert graph.input_ports.names() == ["x"]


def test_torchscript_file_and_same_op_types_as_torch_export(tmp_path, torch_registry):
    module, inputs = models.small_cnn()
    path = tmp_path / "cnn.pt"
    torch.jit.save(torch.jit.script(module), path)
    scripted = load_model(str(path))
    exported = load_model(module, example_inputs=inputs)
    assert _errors(scripted, torch_registry) == []

    def counts(g):
        return collections.Counter(op.type for op in g if op.type != "prim::Constant")

    assert counts(scripted) == counts(exported)
    conv = next(op for op in scripted if op.type == "aten::conv2d.default")
    assert conv.input_ports.names()[:3] == ["input", "weight", "stride"]  # bias None: absent
    assert conv.input_ports["stride"].source.op.attrs["value"] == [2, 2]


def test_torchscript_dtype_constants_by_name(torch_registry):
    class M(torch.nn.Module):
        def forward(self, x):
            return x.to(torch.float64).sum(dim=0, dtype=torch.float32)

    graph = load_model(torch.jit.script(M()))
    to = next(op for op in graph if op.type.startswith("aten::to."))
    assert to.input_ports["dtype"].source.op.attrs["value"] == "float64"
    assert _errors(graph, torch_registry) == []


# --------------------------------------------------------------------------- errors


def test_error_pt_that_is_not_torchscript(tmp_path):
    path = tmp_path / "weights.pt"
    torch.save({"w": torch.zeros(2)}, path)
    with pytest.raises(AmandaError) as e:
        load_model(str(path))
    text = str(e.value)
    assert "\n" not in text and str(path) in text and "not a TorchScript file" in text


def test_error_pt2_that_does_not_load(tmp_path):
    path = tmp_path / "broken.pt2"
    path.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(AmandaError) as e:
        load_model(str(path))
    assert "\n" not in str(e.value) and str(path) in str(e.value) and ".pt2" in str(e.value)


def test_error_module_torch_export_cannot_export():
    class DataDependent(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x + 1
            return x - 1

    with pytest.raises(AmandaError) as e:
        load_model(DataDependent(), example_inputs=(torch.randn(3),))
    text = str(e.value)
    assert "\n" not in text and "DataDependent" in text and "cannot export" in text


def test_error_input_spec_that_does_not_fit():
    module, _ = models.small_cnn()
    with pytest.raises(AmandaError) as e:
        load_model(module, inputs=[_spec("x", "float32", [1, 5, 64, 64])])
    assert "\n" not in str(e.value) and "do not fit" in str(e.value)
    with pytest.raises(AmandaError) as e:
        load_model(module, inputs=[_spec("image", "float32", [1, 3, 64, 64])])
    assert "--input image" in str(e.value) and "arguments: x" in str(e.value)
    with pytest.raises(AmandaError) as e:
        load_model(module, inputs=[_spec("x", "float99", [1, 3, 64, 64])])
    assert "--input x" in str(e.value) and "float99" in str(e.value)
