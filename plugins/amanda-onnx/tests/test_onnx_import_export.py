"""The ONNX importer and exporter, construct by construct: how each part of a model appears in the graph, and
that each comes back exactly (deterministic serialization compared byte for byte)."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import amanda_onnx
from amanda_core import GraphCycleError, GraphError
from amanda_core.ir import Graph, Tensor
from amanda_core.namespace import validate
from amanda_onnx.tensors import ExternalTensor


def model_of(nodes, inputs, outputs, initializers=(), opset=17, **kw):
    opsets = kw.pop("opsets", None)
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers), **kw)
    return helper.make_model(graph, opset_imports=opsets or [helper.make_opsetid("", opset)])


def fvi(name, shape=None, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def same(a, b):
    return a.SerializeToString(deterministic=True) == b.SerializeToString(deterministic=True)


def round_trip(model):
    g = amanda_onnx.load_model(model)
    out = amanda_onnx.to_model(g)
    assert same(model, out), "\n".join(__import__("difflib").unified_diff(str(model).splitlines(),
                                                                          str(out).splitlines(), lineterm=""))
    return g


def run(model, feeds):
    ort = pytest.importorskip("onnxruntime")
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


# --------------------------------------------------------------------------- the basic mapping


def test_graph_ops_ports_and_initializers():
    w = numpy_helper.from_array(np.arange(3, dtype=np.float32), "w")
    m = model_of([helper.make_node("Add", ["x", "w"], ["s"], name="add"),
                  helper.make_node("Relu", ["s"], ["y"], name="relu")],
                 [fvi("x", ["N", 3])], [fvi("y", ["N", 3])], [w])
    g = round_trip(m)
    assert g.namespace == "amanda/onnx/17"
    assert list(g.ops) == ["w", "add", "relu"]
    init = g.ops["w"]
    assert init.type == "Initializer" and init.output_ports.names() == ["output"]
    value = init.attrs["value"]
    assert isinstance(value, np.ndarray) and not value.flags.writeable and value.tolist() == [0, 1, 2]
    add = g.ops["add"]
    assert add.input_ports.names() == ["A", "B"] and add.output_ports.names() == ["C"]
    assert add.input_ports["A"].source is g.input_ports["x"]
    assert add.input_ports["B"].source is init.output_ports["output"]
    assert add.meta == {"outputs": {"C": "s"}} and add.namespace is None
    assert g.input_ports["x"].dtype == "tensor(float)[N,3]"
    assert g.output_ports["y"].source is g.ops["relu"].output_ports["Y"]
    assert g.attrs["opset_import"] == [{"domain": "", "version": 17}]
    assert g.attrs["ir_version"] == m.ir_version and g.attrs["name"] == "g"


def test_imported_graph_validates_against_its_namespace(onnx_plugin_loaded):
    from amanda_core.plugin import registry

    w = numpy_helper.from_array(np.ones((2, 2), np.float32), "w")
    m = model_of([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [fvi("x", [2, 2])], [fvi("y", [2, 2])],
                 [w])
    g = amanda_onnx.load_model(m)
    problems = [p for p in validate(g, registry().namespaces) if p.severity == "error"]
    assert problems == []


def test_unnamed_nodes_get_deterministic_names_and_export_restores_the_empty_name():
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Relu", ["b"], ["c"], name="relu")]
    nodes[1].name = ""  # present but empty: distinct from an absent name in the encoding
    m = model_of(nodes, [fvi("x")], [fvi("c")])
    g = round_trip(m)
    assert list(g.ops) == ["relu_1", "relu_2", "relu"]  # 'relu' stays free for the node that has that name
    assert g.ops["relu_1"].meta["name"] is None and g.ops["relu_2"].meta["name"] == ""
    assert "name" not in g.ops["relu"].meta
    assert list(g.ops) == list(amanda_onnx.load_model(m).ops)  # deterministic


def test_duplicate_node_names_are_kept():
    m = model_of([helper.make_node("Relu", ["x"], ["a"], name="n"), helper.make_node("Relu", ["a"], ["b"], name="n")],
                 [fvi("x")], [fvi("b")])
    g = round_trip(m)
    assert list(g.ops) == ["n", "n_1"] and g.ops["n_1"].meta["name"] == "n"


def test_variadic_ports_are_numbered():
    m = model_of([helper.make_node("Concat", ["x", "y", "z"], ["c"], axis=0, name="cat"),
                  helper.make_node("Sum", ["x", "y"], ["s"], name="sum")],
                 [fvi("x", [1]), fvi("y", [1]), fvi("z", [1])], [fvi("c", [3]), fvi("s", [1])])
    g = round_trip(m)
    assert g.ops["cat"].input_ports.names() == ["inputs_0", "inputs_1", "inputs_2"]
    assert g.ops["sum"].input_ports.names() == ["data_0_0", "data_0_1"]
    assert g.ops["cat"].attrs == {"axis": 0} and "attrs" not in g.ops["cat"].meta


def test_empty_optional_inputs_in_the_middle_and_at_the_end_come_back():
    mx = numpy_helper.from_array(np.array(1.0, np.float32), "mx")
    m = model_of([helper.make_node("Clip", ["x", "", "mx"], ["a"], name="c1"),
                  helper.make_node("Clip", ["a", "", ""], ["b"], name="c2"),
                  helper.make_node("Dropout", ["b"], ["y", ""], name="d")],
                 [fvi("x", [3])], [fvi("y", [3])], [mx])
    g = round_trip(m)
    c1, c2 = g.ops["c1"], g.ops["c2"]
    assert c1.input_ports.names() == ["input", "min", "max"] and c1.input_ports["min"].source is None
    assert c2.input_ports.names() == ["input", "min", "max"]
    assert c2.input_ports["min"].source is None and c2.input_ports["max"].source is None
    assert g.ops["d"].meta["outputs"] == {"output": "y", "mask": ""}
    x = np.array([-2, 0.5, 3], np.float32)
    assert np.array_equal(run(m, {"x": x})[0], run(amanda_onnx.to_model(g), {"x": x})[0])


def test_other_domains_have_their_own_namespaces_and_custom_ones_positional_ports():
    foo = helper.make_node("Foo", ["n", "x"], ["y", "z"], domain="com.example", name="foo", alpha=1.5)
    foo.attribute.append(helper.make_attribute("sizes", [], attr_type=onnx.AttributeProto.INTS))
    foo.attribute.append(helper.make_attribute("kind", helper.make_tensor_type_proto(TensorProto.FLOAT, [2])))
    m = model_of([helper.make_node("Normalizer", ["x"], ["n"], domain="ai.onnx.ml", norm="MAX", name="norm"), foo],
                 [fvi("x", [1, 2])], [fvi("y"), fvi("z")],
                 opsets=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3),
                         helper.make_opsetid("com.example", 1)])
    g = round_trip(m)
    norm, foo = g.ops["norm"], g.ops["foo"]
    assert norm.namespace == "amanda/onnx/ai.onnx.ml/3" and norm.input_ports.names() == ["X"]
    assert foo.namespace == "amanda/onnx/com.example/1"
    assert foo.input_ports.names() == ["in0", "in1"] and foo.output_ports.names() == ["out0", "out1"]
    assert foo.attrs["alpha"] == 1.5 and foo.attrs["sizes"] == [] and foo.attrs["kind"] == "tensor(float)[2]"
    # what the value cannot say without a schema: the empty list's kind, TYPE_PROTO versus STRING
    assert foo.meta["attrs"] == {"sizes": {"type": "INTS"}, "kind": {"type": "TYPE_PROTO"}}


def test_unknown_domain_is_kept_and_reported_by_validation(onnx_plugin_loaded):
    from amanda_core.plugin import registry

    m = model_of([helper.make_node("Bar", ["x"], ["y"], domain="org.unknown", name="bar")], [fvi("x")], [fvi("y")],
                 opsets=[helper.make_opsetid("", 17), helper.make_opsetid("org.unknown", 2)])
    g = round_trip(m)
    assert g.ops["bar"].namespace == "amanda/onnx/org.unknown/2"
    problems = [str(p) for p in validate(g, registry().namespaces) if p.severity == "error"]
    assert problems and all("bar" in p and "org.unknown" in p for p in problems)


def test_default_domain_spelled_out_and_odd_domain_names_are_kept():
    a = helper.make_node("Relu", ["x"], ["a"], name="a", domain="")
    b = helper.make_node("Relu", ["a"], ["b"], name="b", domain="ai.onnx")
    c = helper.make_node("Baz", ["b"], ["y"], name="c", domain="my domain/v2")
    m = model_of([a, b, c], [fvi("x")], [fvi("y")],
                 opsets=[helper.make_opsetid("", 17), helper.make_opsetid("my domain/v2", 1)])
    g = round_trip(m)
    assert g.ops["a"].meta["domain"] == "" and g.ops["b"].meta["domain"] == "ai.onnx"
    assert g.ops["c"].namespace == "amanda/onnx/my_domain_v2/1" and g.ops["c"].meta["domain"] == "my domain/v2"


# --------------------------------------------------------------------------- subgraphs and outer scope


def _if_model():
    c1 = numpy_helper.from_array(np.array([10.0], np.float32), "c1")
    then_g = helper.make_graph([helper.make_node("Add", ["x", "c1"], ["t"], name="then_add")], "then", [],
                               [fvi("t", [1])])
    else_g = helper.make_graph([helper.make_node("Sub", ["x", "h"], ["e"], name="else_sub")], "else", [],
                               [fvi("e", [1])])
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="hidden"),
             helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then_g, else_branch=else_g)]
    return model_of(nodes, [fvi("x", [1]), fvi("cond", [], TensorProto.BOOL)], [fvi("y", [1])], [c1])


def test_if_branches_are_graph_attributes_with_outer_values_made_explicit():
    m = _if_model()
    g = round_trip(m)
    op_if = g.ops["if"]
    then_g, else_g = op_if.attrs["then_branch"], op_if.attrs["else_branch"]
    assert isinstance(then_g, Graph) and then_g.namespace is None and then_g.attrs["name"] == "then"
    outer = {op.attrs["name"]: op for op in then_g if op.type == "OuterValue"}
    assert set(outer) == {"x", "c1"}
    assert then_g.ops["then_add"].input_ports["A"].source is outer["x"].output_ports["output"]
    assert {op.attrs["name"] for op in else_g if op.type == "OuterValue"} == {"x", "h"}
    # the ordering dependency stays visible: producers of outer values run before the op holding the subgraph
    assert set(op_if.control_inputs) == {g.ops["c1"], g.ops["hidden"]}
    for cond in (True, False):
        feeds = {"x": np.array([2.0], np.float32), "cond": np.array(cond)}
        assert np.array_equal(run(m, feeds)[0], run(amanda_onnx.to_model(g), feeds)[0])


def test_nested_subgraphs_pass_outer_values_through_every_level():
    inner = helper.make_graph([helper.make_node("Add", ["v", "top"], ["r"], name="deep_add")], "inner", [],
                              [fvi("r", [1])])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep"),
         helper.make_node("Identity", ["v_in"], ["v"], name="v_id"),
         helper.make_node("If", ["cond_in"], ["v_out"], name="inner_if", then_branch=inner, else_branch=inner)],
        "body", [fvi("i", [], TensorProto.INT64), fvi("cond_in", [], TensorProto.BOOL), fvi("v_in", [1])],
        [fvi("cond_out", [], TensorProto.BOOL), fvi("v_out", [1])])
    m = model_of([helper.make_node("Neg", ["x"], ["top"], name="top"),
                  helper.make_node("Loop", ["n", "c", "x"], ["y"], name="loop", body=body)],
                 [fvi("x", [1]), fvi("n", [], TensorProto.INT64), fvi("c", [], TensorProto.BOOL)], [fvi("y", [1])])
    g = round_trip(m)
    loop = g.ops["loop"]
    assert loop.input_ports.names() == ["M", "cond", "v_initial_0"]
    body_g = loop.attrs["body"]
    middle = [op for op in body_g if op.type == "OuterValue"]
    assert [op.attrs["name"] for op in middle] == ["top"]  # made for the inner subgraph's use
    assert set(body_g.ops["inner_if"].control_inputs) == {middle[0], body_g.ops["v_id"]}
    assert set(loop.control_inputs) == {g.ops["top"]}
    feeds = {"x": np.array([1.5], np.float32), "n": np.array(3), "c": np.array(True)}
    assert np.array_equal(run(m, feeds)[0], run(amanda_onnx.to_model(g), feeds)[0])


def test_scan_body_and_subgraph_returning_an_outer_value_directly():
    then_g = helper.make_graph([], "then", [], [fvi("x", [1])])  # returns the outer x itself
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["nx"])], "else", [], [fvi("nx", [1])])
    m = model_of([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
                 [fvi("x", [1]), fvi("c", [], TensorProto.BOOL)], [fvi("y", [1])])
    g = round_trip(m)
    then_graph = g.ops["if"].attrs["then_branch"]
    assert then_graph.output_ports["x"].source.op.type == "OuterValue"


# --------------------------------------------------------------------------- initializers


def test_initializers_that_are_graph_inputs_stay_distinguishable():
    w = numpy_helper.from_array(np.ones(2, np.float32), "w")
    m = model_of([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [fvi("x", [2]), fvi("w", [2])],
                 [fvi("y", [2])], [w])
    m.ir_version = 3
    g = round_trip(m)
    assert g.ops["w"].attrs["graph_input"] is True and not g.ops["w"].has_consumers()
    assert g.ops["add"].input_ports["B"].source is g.input_ports["w"]


def test_initializer_named_like_a_node():
    w = numpy_helper.from_array(np.ones(2, np.float32), "relu")
    m = model_of([helper.make_node("Add", ["x", "relu"], ["a"], name="relu")], [fvi("x", [2])], [fvi("a", [2])], [w])
    g = round_trip(m)
    assert g.ops["relu"].type == "Initializer" and g.ops["relu_1"].type == "Add"
    assert g.ops["relu_1"].meta["name"] == "relu"


def test_sparse_initializers_and_sparse_attributes():
    values = numpy_helper.from_array(np.array([1.5, -2.0], np.float32), "sp")
    indices = numpy_helper.from_array(np.array([1, 4], np.int64), "sp_idx")
    sparse = helper.make_sparse_tensor(values, indices, [2, 3])
    cvals = numpy_helper.from_array(np.array([7], np.int64), "cv")
    cidx = numpy_helper.from_array(np.array([[0, 1]], np.int64), "ci")
    const = helper.make_node("Constant", [], ["k"], name="k", sparse_value=helper.make_sparse_tensor(cvals, cidx,
                                                                                                      [2, 2]))
    graph = helper.make_graph([helper.make_node("Identity", ["sp"], ["y"], name="id"), const], "g", [],
                              [fvi("y", [2, 3]), helper.make_tensor_value_info("k", TensorProto.INT64, [2, 2])],
                              sparse_initializer=[sparse])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    g = round_trip(m)
    sp = g.ops["sp"]
    assert sp.type == "SparseInitializer"
    st = sp.attrs["value"]
    assert isinstance(st, amanda_onnx.SparseTensor) and st.dims == (2, 3)
    assert st.to_dense().tolist() == [[0, 1.5, 0], [0, -2.0, 0]]
    assert sp.meta["sparse_tensor"]["indices"]["name"] == "sp_idx"
    assert g.ops["k"].attrs["sparse_value"].to_dense().tolist() == [[0, 7], [0, 0]]
    assert g.ops["id"].input_ports["input"].source is sp.output_ports["output"]


# --------------------------------------------------------------------------- tensors


def _const(name, tensor):
    return helper.make_node("Constant", [], [name], name=name, value=tensor)


@pytest.mark.parametrize("tensor", [
    helper.make_tensor("t", TensorProto.FLOAT, [2], [1.5, float("nan")]),  # float_data
    helper.make_tensor("t", TensorProto.FLOAT16, [3], np.array([1, -2, 65504], np.float16)),  # int32_data bits
    helper.make_tensor("t", TensorProto.BFLOAT16, [2], [1.0, -3.0]),
    helper.make_tensor("t", TensorProto.BOOL, [3], [True, False, True]),
    helper.make_tensor("t", TensorProto.INT8, [2], [-5, 7]),
    helper.make_tensor("t", TensorProto.UINT16, [2], [0, 65535]),
    helper.make_tensor("t", TensorProto.COMPLEX64, [2], [1 + 2j, -3j]),
    helper.make_tensor("t", TensorProto.UINT32, [2], [1, 2**32 - 1]),
    helper.make_tensor("t", TensorProto.STRING, [2], [b"a", b"\xff\xfe"]),
    helper.make_tensor("t", TensorProto.INT4, [3], [-8, 7, 1]),  # packed into int32_data
    helper.make_tensor("t", TensorProto.FLOAT8E4M3FN, [2], [1.0, -0.5]),
    helper.make_tensor("t", TensorProto.FLOAT, [0], []),  # no data field at all
    helper.make_tensor("t", TensorProto.DOUBLE, [], [2.5]),  # a scalar
    numpy_helper.from_array(np.arange(6, dtype=np.int64).reshape(2, 3), "t"),  # raw_data
    helper.make_tensor("t", TensorProto.UINT4, [3], bytes([0x21, 0xF3]), raw=True),  # packed, non-zero padding
], ids=lambda t: f"{TensorProto.DataType.Name(t.data_type)}-{'raw' if t.HasField('raw_data') else 'typed'}")
def test_tensor_storage_forms_come_back_exactly(tensor):
    m = model_of([_const("c", tensor)], [], [helper.make_tensor_value_info("c", tensor.data_type, None)])
    g = round_trip(m)
    value = g.ops["c"].attrs["value"]
    assert isinstance(value, np.ndarray) and value.shape == tuple(tensor.dims)
    if tensor.data_type not in (TensorProto.STRING,):
        assert not value.flags.writeable
    if tensor.data_type == TensorProto.STRING:
        assert value.tolist() == [b"a", b"\xff\xfe"]
    else:
        assert value.tobytes() == numpy_helper.to_array(tensor).tobytes()


def test_changed_tensor_values_are_written_fresh_not_from_the_recorded_bits():
    t = helper.make_tensor("t", TensorProto.UINT4, [3], bytes([0x21, 0xF3]), raw=True)  # padding nibble F
    m = model_of([_const("c", t)], [], [helper.make_tensor_value_info("c", TensorProto.UINT4, None)])
    g = amanda_onnx.load_model(m)
    assert "verbatim" in g.ops["c"].meta["attrs"]["value"]["tensor"]
    new = np.array([1, 2, 4], dtype=g.ops["c"].attrs["value"].dtype)
    g.ops["c"].attrs["value"] = new
    out = amanda_onnx.to_model(g).graph.node[0].attribute[0].t
    assert out.raw_data == bytes([0x21, 0x04]) and numpy_helper.to_array(out).tolist() == [1, 2, 4]


def test_non_utf8_strings_stay_bytes():
    node = helper.make_node("Foo", ["x"], ["y"], domain="com.example", name="foo", label=b"\xff\x00ok",
                            names=[b"a", b"\xfe"])
    m = model_of([node], [fvi("x")], [fvi("y")],
                 opsets=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    g = round_trip(m)
    assert g.ops["foo"].attrs == {"label": b"\xff\x00ok", "names": ["a", b"\xfe"]}


# --------------------------------------------------------------------------- model and graph fields


def test_doc_strings_metadata_value_info_and_model_fields():
    a = helper.make_node("Relu", ["x"], ["h"], name="a", doc_string="first")
    helper.set_metadata_props(a, {"origin": "conv1"})
    a.attribute.append(helper.make_attribute("unused", 3, doc_string="an attribute doc"))
    b = helper.make_node("Neg", ["h"], ["y"], name="b")
    x = fvi("x", ["N", 2])
    x.doc_string = "the input"
    graph = helper.make_graph([a, b], "main", [x], [fvi("y", ["N", 2])], doc_string="graph doc",
                              value_info=[fvi("h", ["N", 2]), fvi("x", ["N", 2])])
    graph.value_info[1].type.denotation = "TENSOR"
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="tests",
                          producer_version="1.0", doc_string="model doc", model_version=7, domain="org.tests")
    helper.set_model_props(m, {"author": "someone", "license": "none"})
    g = round_trip(m)
    assert g.attrs["model_doc_string"] == "model doc" and g.attrs["doc_string"] == "graph doc"
    assert g.attrs["producer_name"] == "tests" and g.attrs["model_version"] == 7
    assert g.attrs["model_metadata_props"] == [{"key": "author", "value": "someone"},
                                               {"key": "license", "value": "none"}]
    assert g.ops["a"].meta["doc_string"] == "first"
    assert g.ops["a"].meta["metadata_props"] == [{"key": "origin", "value": "conv1"}]
    assert g.ops["a"].meta["attrs"]["unused"]["doc_string"] == "an attribute doc"
    assert g.ops["a"].output_ports["Y"].dtype == "tensor(float)[N,2]"  # value_info of a node output
    assert g.attrs["value_info"][0] == "h" and isinstance(g.attrs["value_info"][1], dict)  # x: no node output
    assert g.attrs["port_info"]["inputs"]["x"] == {"doc_string": "the input"}


def test_value_info_follows_the_port_dtype():
    m = model_of([helper.make_node("Relu", ["x"], ["h"], name="a"), helper.make_node("Neg", ["h"], ["y"], name="b")],
                 [fvi("x", [2])], [fvi("y", [2])], value_info=[fvi("h", [2])])
    g = amanda_onnx.load_model(m)
    g.ops["a"].output_ports["Y"].dtype = "tensor(float)[M]"
    vi = amanda_onnx.to_model(g).graph.value_info
    assert [v.name for v in vi] == ["h"] and vi[0].type.tensor_type.shape.dim[0].dim_param == "M"


def test_model_local_functions_with_attribute_references():
    fn = helper.make_function(
        "custom", "Scale", ["X"], ["Y"],
        [helper.make_node("Constant", [], ["k"], value_float=1.0),
         helper.make_node("Mul", ["X", "k"], ["Y0"]),
         helper.make_node("LeakyRelu", ["Y0"], ["Y"])],
        [helper.make_opsetid("", 17)], attributes=["alpha"])
    fn.node[2].attribute.append(helper.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT))
    fn.node[0].attribute[0].CopyFrom(helper.make_attribute_ref("value_float", onnx.AttributeProto.FLOAT))
    fn.node[0].attribute[0].ref_attr_name = "factor"
    fn.attribute_proto.append(helper.make_attribute("factor", 2.0))
    m = model_of([helper.make_node("Scale", ["x"], ["y"], domain="custom", name="call", alpha=0.1)],
                 [fvi("x", [3])], [fvi("y", [3])],
                 opsets=[helper.make_opsetid("", 17), helper.make_opsetid("custom", 1)])
    m.functions.append(fn)
    g = round_trip(m)
    (f,) = g.attrs["functions"]
    assert isinstance(f, Graph) and f.attrs["name"] == "Scale" and f.attrs["domain"] == "custom"
    assert f.namespace == "amanda/onnx/17" and f.input_ports.names() == ["X"]
    assert f.attrs["attribute"] == ["alpha"] and f.attrs["attribute_proto"] == {"factor": 2.0}
    leaky = next(op for op in f if op.type == "LeakyRelu")
    assert "alpha" not in leaky.attrs and leaky.meta["attrs"]["alpha"] == {"ref_attr_name": "alpha", "type": "FLOAT"}
    x = np.array([-1.0, 0.5, 2.0], np.float32)
    assert np.array_equal(run(m, {"x": x})[0], run(amanda_onnx.to_model(g), {"x": x})[0])


def test_training_info_is_kept():
    w = numpy_helper.from_array(np.ones(2, np.float32), "w")
    m = model_of([helper.make_node("Mul", ["x", "w"], ["y"], name="mul")], [fvi("x", [2])], [fvi("y", [2])], [w])
    algo = helper.make_graph([helper.make_node("Add", ["w", "w"], ["w_new"], name="step")], "algo", [],
                             [fvi("w_new", [2])])
    init = helper.make_graph([helper.make_node("Constant", [], ["w0"], name="c",
                                               value=numpy_helper.from_array(np.zeros(2, np.float32)))],
                             "init", [], [fvi("w0", [2])])
    t = m.training_info.add()
    t.algorithm.CopyFrom(algo)
    t.initialization.CopyFrom(init)
    e = t.update_binding.add()
    e.key, e.value = "w", "w_new"
    g = round_trip(m)
    (info,) = g.attrs["training_info"]
    assert isinstance(info["algorithm"], Graph) and info["update_binding"] == [{"key": "w", "value": "w_new"}]
    assert [op.attrs["name"] for op in info["algorithm"] if op.type == "OuterValue"] == ["w"]


# --------------------------------------------------------------------------- external data


def _external_model(tmp_path):
    w = np.arange(1024, dtype=np.float32).reshape(32, 32)
    m = model_of([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [fvi("x", [1, 32])],
                 [fvi("y", [1, 32])], [numpy_helper.from_array(w, "w")])
    src = tmp_path / "src"
    src.mkdir()
    onnx.save(m, src / "m.onnx", save_as_external_data=True, location="m.weights", size_threshold=0)
    return src / "m.onnx", w


def test_external_data_is_read_lazily_and_kept_as_a_reference(tmp_path):
    path, w = _external_model(tmp_path)
    g = amanda_onnx.load_model(path)
    value = g.ops["w"].attrs["value"]
    assert isinstance(value, ExternalTensor) and isinstance(value, Tensor) and not value.is_loaded
    assert value.location == "m.weights" and value.shape == (32, 32)
    original = onnx.load(path, load_external_data=False)
    assert same(original, amanda_onnx.to_model(g))  # still a reference to the same file
    assert not value.is_loaded
    assert np.array_equal(value.numpy(), w) and not value.numpy().flags.writeable  # a read-only map of the file
    embedded = amanda_onnx.to_model(g, external_data=False)
    assert embedded.graph.initializer[0].raw_data == w.tobytes()


def test_saving_writes_external_data_beside_the_model(tmp_path):
    path, w = _external_model(tmp_path)
    g = amanda_onnx.load_model(path)
    out = tmp_path / "out" / "copy.onnx"
    out.parent.mkdir()
    amanda_onnx.save_model(g, out)  # tensors read from external data stay external
    assert (out.parent / "copy.onnx.data").exists()
    back = amanda_onnx.load_model(out)
    assert np.array_equal(back.ops["w"].attrs["value"].numpy(), w)
    x = np.ones((1, 32), np.float32)
    assert np.array_equal(run(onnx.load(path), {"x": x})[0], run(onnx.load(out), {"x": x})[0])
    inline = tmp_path / "out" / "inline.onnx"
    amanda_onnx.save_model(g, inline, external_data=False)
    assert not (inline.parent / "inline.onnx.data").exists()
    assert onnx.load(inline).graph.initializer[0].raw_data == w.tobytes()


def test_external_data_on_request_and_for_models_over_the_size_limit(tmp_path):
    w = numpy_helper.from_array(np.ones(4096, np.float32), "big")
    s = numpy_helper.from_array(np.ones(2, np.float32), "small")
    m = model_of([helper.make_node("Add", ["x", "big"], ["a"], name="a"),
                  helper.make_node("Add", ["x", "small"], ["b"], name="b")],
                 [fvi("x", [1])], [fvi("a", [4096]), fvi("b", [2])], [w, s])
    g = amanda_onnx.load_model(m)
    asked = tmp_path / "asked.onnx"
    saved = amanda_onnx.save_model(g, asked, external_data=True, external_data_location="w.bin")
    big, small = saved.graph.initializer
    assert big.data_location == TensorProto.EXTERNAL and not small.HasField("data_location")
    assert {e.key: e.value for e in big.external_data} == {"location": "w.bin", "offset": "0", "length": "16384"}
    assert (tmp_path / "w.bin").stat().st_size == 16384
    limited = tmp_path / "limited.onnx"
    saved = amanda_onnx.save_model(g, limited, max_size=8000)  # as if the model were over 2 GB
    assert saved.graph.initializer[0].data_location == TensorProto.EXTERNAL
    assert (tmp_path / "limited.onnx.data").exists()
    back = onnx.load(limited)
    assert numpy_helper.to_array(back.graph.initializer[0]).sum() == 4096


def test_kept_external_references_do_not_count_toward_the_size_limit(tmp_path, monkeypatch):
    from amanda_onnx import exporter

    path, _ = _external_model(tmp_path)
    g = amanda_onnx.load_model(path)
    monkeypatch.setattr(exporter, "MAX_PROTO_SIZE", exporter._HEADROOM + 1000)  # less than the 4 KiB tensor
    assert amanda_onnx.to_model(g).graph.initializer[0].data_location == TensorProto.EXTERNAL


def test_in_memory_export_over_the_size_limit_is_refused(monkeypatch):
    from amanda_onnx import exporter

    monkeypatch.setattr(exporter, "MAX_PROTO_SIZE", exporter._HEADROOM + 1000)
    m = model_of([helper.make_node("Identity", ["w"], ["y"], name="id")], [], [fvi("y", [4096])],
                 [numpy_helper.from_array(np.ones(4096, np.float32), "w")])
    g = amanda_onnx.load_model(m)
    with pytest.raises(GraphError, match="2 GB.*save_model"):
        amanda_onnx.to_model(g)


# --------------------------------------------------------------------------- graphs built in Amanda


def test_exporting_a_graph_built_by_hand():
    g = Graph("amanda/onnx/17")
    x = g.add_input_port("x", "tensor(float)[3]")
    g.add_input_port("passthrough", "tensor(float)[3]")
    hi = g.add_op("Initializer", "hi", outputs=["output"], attrs={"value": np.array(1.0, np.float32)})
    clip = g.add_op("Clip", "clip", inputs=["input", "max"], outputs=["output"])  # 'min' left out
    g.connect(x, clip.input_ports["input"])
    g.connect(hi.output_ports["output"], clip.input_ports["max"])
    g.connect(clip.output_ports["output"], g.add_output_port("y", "tensor(float)[3]"))
    g.connect(g.input_ports["passthrough"], g.add_output_port("same", "tensor(float)[3]"))
    m = amanda_onnx.to_model(g)
    onnx.checker.check_model(m, full_check=True)
    clip_node = next(n for n in m.graph.node if n.op_type == "Clip")
    assert list(clip_node.input) == ["x", "", "hi"] and list(clip_node.output) == ["y"]
    ident = next(n for n in m.graph.node if n.op_type == "Identity")  # an output that is another value
    assert list(ident.input) == ["passthrough"] and list(ident.output) == ["same"]
    feeds = {"x": np.array([-1, 0.5, 3], np.float32), "passthrough": np.array([1, 2, 3], np.float32)}
    y, same_out = run(m, feeds)
    assert y.tolist() == [-1, 0.5, 1] and same_out.tolist() == [1, 2, 3]


def test_generated_value_names_do_not_collide():
    g = Graph("amanda/onnx/17")
    x = g.add_input_port("x")
    a = g.add_op("Relu", "a", inputs=["X"], outputs=["Y"])
    a.meta = {"outputs": {"Y": "b_Y"}}  # the name the next op's output would get
    b = g.add_op("Relu", "b", inputs=["X"], outputs=["Y"])
    g.connect(x, a.input_ports["X"])
    g.connect(a.output_ports["Y"], b.input_ports["X"])
    g.connect(b.output_ports["Y"], g.add_output_port("out"))
    nodes = amanda_onnx.to_model(g).graph.node
    assert [list(n.output) for n in nodes] == [["b_Y"], ["out"]]


def test_export_errors_name_what_is_wrong(tmp_path):
    g = Graph("amanda/pytorch/2.13.0")
    with pytest.raises(GraphError, match="amanda/pytorch/2.13.0"):
        amanda_onnx.to_model(g)
    g = Graph("amanda/onnx/17")
    x = g.add_input_port("x")
    op = g.add_op("aten::relu", "r", inputs=["in0"], outputs=["out0"], namespace="amanda/pytorch/2.13.0")
    g.connect(x, op.input_ports["in0"])
    with pytest.raises(GraphError, match="'r'.*amanda/pytorch/2.13.0"):
        amanda_onnx.to_model(g)
    g = Graph("amanda/onnx/17")
    op = g.add_op("Relu", "r", inputs=["input"], outputs=["Y"])
    g.connect(g.add_input_port("x"), op.input_ports["input"])
    with pytest.raises(GraphError, match="'r'.*'input'.*parameters: X"):
        amanda_onnx.to_model(g)


def test_export_refuses_a_data_cycle_and_leaves_no_file(tmp_path):
    g = Graph("amanda/onnx/17")
    a = g.add_op("Relu", "a", inputs=["X"], outputs=["Y"])
    b = g.add_op("Relu", "b", inputs=["X"], outputs=["Y"])
    g.connect(a.output_ports["Y"], b.input_ports["X"])
    g.connect(b.output_ports["Y"], a.input_ports["X"])
    g.connect(b.output_ports["Y"], g.add_output_port("y"))
    target = tmp_path / "cycle.onnx"
    with pytest.raises(GraphCycleError, match="a -> b -> a|b -> a -> b"):
        amanda_onnx.save_model(g, target)
    assert list(tmp_path.iterdir()) == []


def test_export_refuses_two_producers_of_one_name(tmp_path):
    g = Graph("amanda/onnx/17")
    x = g.add_input_port("x")
    for name in ("a", "b"):
        op = g.add_op("Relu", name, inputs=["X"], outputs=["Y"])
        op.meta = {"outputs": {"Y": "v"}}
        g.connect(x, op.input_ports["X"])
    g.connect(g.ops["b"].output_ports["Y"], g.add_output_port("v"))
    with pytest.raises(GraphError, match="two producers of the ONNX value 'v': op 'a' and op 'b'"):
        amanda_onnx.save_model(g, tmp_path / "m.onnx", external_data=True)
    assert list(tmp_path.iterdir()) == []


def test_atomic_write_keeps_the_previous_file_on_failure(tmp_path):
    target = tmp_path / "m.onnx"
    target.write_bytes(b"previous")
    g = Graph("amanda/onnx/17")
    op = g.add_op("Foo", "foo", attrs={"weird": object()}, namespace="amanda/onnx/com.x/1")
    assert op is not None
    with pytest.raises(GraphError, match="'foo'.*'weird'"):
        amanda_onnx.save_model(g, target)
    assert target.read_bytes() == b"previous" and sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


# --------------------------------------------------------------------------- plugin hooks


def test_importer_and_exporter_are_registered_through_the_hooks(onnx_plugin_loaded, tmp_path):
    from amanda_core.plugin import registry

    reg = registry()
    (imp,) = [i for i, _ in reg.importers if i.name == "onnx"]
    (exp,) = [e for e, _ in reg.exporters if e.name == "onnx"]
    assert imp.namespace == "amanda/onnx" and imp.extensions == (".onnx",)
    m = model_of([helper.make_node("Relu", ["x"], ["y"], name="r")], [fvi("x")], [fvi("y")])
    assert imp.handles(m) and imp.handles("model.onnx") and not imp.handles(object())
    g = imp.load(m)
    assert exp.handles_namespace(g.namespace) and exp.handles_path(tmp_path / "x.onnx")
    assert not exp.handles_namespace("amanda/pytorch/2.13.0")
    out = exp.save(g, tmp_path / "x.onnx")
    assert same(out, m) and same(onnx.load(tmp_path / "x.onnx"), m)


def test_a_name_onnxruntime_takes_for_itself_is_kept_from_a_file_and_avoided_otherwise():
    """onnxruntime's Gather-to-Split fusion adds an initializer ``squeeze_axes`` without looking for one: a graph
    made in code (from another framework) writes its constant of that name under another; a graph read from an
    ONNX file keeps its names."""
    model = model_of([helper.make_node("Squeeze", ["x", "squeeze_axes"], ["y"], name="squeeze")],
                     [fvi("x", [1, 3])], [fvi("y", [3])],
                     [numpy_helper.from_array(np.array([0], dtype=np.int64), "squeeze_axes")], opset=18)
    read = amanda_onnx.load_model(model)
    assert [i.name for i in amanda_onnx.to_model(read).graph.initializer] == ["squeeze_axes"]

    made = Graph(namespace=read.namespace)
    made.add_input_port("x", "tensor(float)[1,3]")
    axes = made.add_op("Initializer", "squeeze_axes", attrs={"value": np.array([0], dtype=np.int64)},
                       outputs=["output"])
    sq = made.add_op("Squeeze", "squeeze", inputs=["data", "axes"], outputs=["squeezed"])
    made.connect(made.input_ports["x"], sq.input_ports["data"])
    made.connect(axes.output_ports[0], sq.input_ports["axes"])
    made.add_output_port("y", "tensor(float)[3]")
    made.connect(sq.output_ports[0], made.output_ports["y"])
    written = amanda_onnx.to_model(made)
    onnx.checker.check_model(written)
    assert [i.name for i in written.graph.initializer] == ["squeeze_axes_1"]
    assert list(written.graph.node[0].input) == ["x", "squeeze_axes_1"]
