"""Type inference before conversions: models that type only their inputs and outputs (what framework exporters
write) still get exact opset downgrades, which must know the element type of intermediate values."""

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import amanda_onnx
from amanda_core import registry
from amanda_core.cli.main import main
from amanda_core.mapping import convert
from amanda_onnx import opset


def untyped_model(dilations=(1, 1)):
    """Opset 13, as torch writes it: a Constant (opset 13 changed Constant), Add and Relu on float values whose
    types only inference can tell, and a MaxPool with explicit unit dilations (an attribute opset 10 added)."""
    shift = numpy_helper.from_array(np.array(0.5, np.float32))
    nodes = [
        helper.make_node("Constant", [], ["shift"], name="c", value=shift),
        helper.make_node("Add", ["x", "shift"], ["a"], name="add"),
        helper.make_node("Relu", ["a"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["y"], name="pool", kernel_shape=[2, 2], strides=[2, 2],
                         dilations=list(dilations), ceil_mode=0, pads=[0, 0, 0, 0]),
    ]
    g = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, 2, 2])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def test_inference_types_the_intermediate_values_and_nothing_else():
    onnx.checker.check_model(untyped_model(), full_check=True)
    g = amanda_onnx.load_model(untyped_model())
    before = {op.name: [q.dtype for q in op.output_ports] for op in g}
    assert before["add"] == [None] and before["relu"] == [None]
    assert amanda_onnx.infer_types(g) == 4
    assert g.ops["add"].output_ports[0].dtype == "tensor(float)[N,2,4,4]"
    assert g.ops["c"].output_ports[0].dtype == "tensor(float)[]"
    assert g.ops["pool"].output_ports[0].dtype.startswith("tensor(float)")
    assert amanda_onnx.infer_types(g) == 0  # nothing left to type


def test_the_registry_offers_the_onnx_inferer():
    inferer = registry().type_inferer_for("amanda/onnx/13")
    assert inferer is not None and inferer.name == "onnx-types"
    assert registry().type_inferer_for("amanda/tensorflow/2.21.0") is None


def test_downgrade_needs_the_types_and_is_exact_with_them():
    tables = opset.tables()
    namespaces = registry().namespaces
    blind = convert(amanda_onnx.load_model(untyped_model()), "amanda/onnx/9", tables, namespaces, allow_partial=True)
    assert {t for t, _, _, _ in blind.unconverted} == {"Constant", "Relu"}  # no type known: no exact downgrade
    g = amanda_onnx.load_model(untyped_model())
    amanda_onnx.infer_types(g)
    result = convert(g, "amanda/onnx/9", tables, namespaces)
    model = amanda_onnx.to_model(result.graph)
    onnx.checker.check_model(model, full_check=True)
    assert [o.version for o in model.opset_import] == [9]
    pool = next(n for n in model.graph.node if n.op_type == "MaxPool")
    assert "dilations" not in {a.name for a in pool.attribute}  # opset 9 has none; unit dilations say nothing
    x = np.random.default_rng(0).standard_normal((3, 2, 4, 4)).astype(np.float32)
    want = ort.InferenceSession(untyped_model().SerializeToString()).run(None, {"x": x})
    got = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    assert np.array_equal(want[0], got[0])


def test_real_dilations_are_not_dropped():
    g = amanda_onnx.load_model(untyped_model(dilations=(2, 1)))
    amanda_onnx.infer_types(g)
    result = convert(g, "amanda/onnx/9", opset.tables(), registry().namespaces, allow_partial=True)
    assert [(t, ns) for t, ns, _, _ in result.unconverted] == [("MaxPool", "amanda/onnx/10")]


def test_cli_convert_infers_types_unless_told_not_to(tmp_path, capsys):
    src, out = tmp_path / "m.onnx", tmp_path / "m9.onnx"
    onnx.save(untyped_model(), src)
    assert main(["convert", str(src), "--to", "amanda/onnx/9", "-o", str(out)]) == 0
    stdout = capsys.readouterr().out
    assert "(4 value types filled in by onnx-types)" in stdout and out.exists()
    out.unlink()
    assert main(["convert", str(src), "--to", "amanda/onnx/9", "-o", str(out), "--no-infer-types"]) != 0
    err = capsys.readouterr().err
    assert "x Relu (amanda/onnx/13)" in err and not out.exists()


def test_re_export_does_not_infer(tmp_path, capsys):
    src, out = tmp_path / "m.onnx", tmp_path / "same.onnx"
    onnx.save(untyped_model(), src)
    assert main(["convert", str(src), "-o", str(out)]) == 0
    assert "inferred" not in capsys.readouterr().out
    assert onnx.load(out).SerializeToString(deterministic=True) == onnx.load(src).SerializeToString(
        deterministic=True)


def typed_model(batch="N"):
    """Add of an initializer and Relu, with the intermediate value's type in value_info and the output's type."""
    w = numpy_helper.from_array(np.array([0.5, 1.5], np.float32), "w")
    nodes = [helper.make_node("Add", ["x", "w"], ["a"], name="add"),
             helper.make_node("Relu", ["a"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 2])], [w],
                          value_info=[helper.make_tensor_value_info("a", TensorProto.FLOAT, [batch, 2])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def test_a_model_typed_throughout_is_not_inferred_again(monkeypatch):
    """When every node output is typed, or untyped only where it is a graph output of a static type, onnx's
    inference is not run: initializers are typed from their tensors, those outputs by the graph output's type,
    as inference types them."""
    calls = []
    real = onnx.shape_inference.infer_shapes
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", lambda *a, **k: calls.append(1) or real(*a, **k))
    dynamic = amanda_onnx.load_model(typed_model())  # the output's type has a symbolic size: inference runs
    assert amanda_onnx.infer_types(dynamic) == 2 and calls == [1]
    graph = amanda_onnx.load_model(typed_model(3))
    before = {op.name: [q.dtype for q in op.output_ports] for op in graph}
    assert before == {"w": [None], "add": ["tensor(float)[3,2]"], "relu": [None]}
    assert amanda_onnx.infer_types(graph) == 2 and calls == [1]
    assert {op.name: [q.dtype for q in op.output_ports] for op in graph} == \
        {"w": ["tensor(float)[2]"], "add": ["tensor(float)[3,2]"], "relu": ["tensor(float)[3,2]"]}
    assert {op.name: [q.dtype for q in op.output_ports] for op in dynamic} == \
        {"w": ["tensor(float)[2]"], "add": ["tensor(float)[N,2]"], "relu": ["tensor(float)[N,2]"]}
    assert amanda_onnx.infer_types(graph) == 0 and calls == [1]
    assert amanda_onnx.infer_types(amanda_onnx.load_model(untyped_model())) == 4 and calls == [1, 1]
