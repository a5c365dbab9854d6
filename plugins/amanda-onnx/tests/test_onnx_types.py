"""The onnx type system: element types, dtype strings, attribute values, port dtypes, validation."""

import copy
import re

import ml_dtypes
import numpy as np
import onnx
import onnx.defs
import onnx.helper
import pytest

from amanda_core import Graph, Tensor
from amanda_core.namespace import validate
from amanda_core.namespace.types import TypeExprError
from amanda_onnx import (
    ATTR_KINDS,
    ELEM_TYPES,
    OnnxType,
    OnnxTypeSystem,
    SparseTensor,
    dtype_from_type_proto,
    elem_type_from_numpy,
    elem_type_name,
    elem_type_number,
    numpy_dtype,
    parse_dtype,
    type_proto_from_dtype,
)

TS = OnnxTypeSystem()


# --------------------------------------------------------------------------- element types


def test_elem_table_matches_onnx():
    onnx_types = {num: name for name, num in onnx.TensorProto.DataType.items() if num != 0}
    assert {e.number: e.name.upper() for e in ELEM_TYPES} == onnx_types
    for e in ELEM_TYPES:
        assert numpy_dtype(e.number) == onnx.helper.tensor_dtype_to_np_dtype(e.number), e.name
        assert elem_type_number(e.name) == e.number and elem_type_name(e.number) == e.name


def test_elem_types_named_in_schemas_are_known():
    named = set()
    for s in onnx.defs.get_all_schemas_with_history():
        for tc in s.type_constraints:
            for t in tc.allowed_type_strs:
                named.add(t)
    for text in named:
        parse_dtype(text)  # raises on an unknown element type


def test_numpy_conversions():
    assert numpy_dtype("float") == np.float32 and numpy_dtype(7) == np.int64
    assert numpy_dtype("bfloat16") == np.dtype(ml_dtypes.bfloat16)
    assert numpy_dtype("float8e4m3fn") == np.dtype(ml_dtypes.float8_e4m3fn)
    assert numpy_dtype("int4") == np.dtype(ml_dtypes.int4)
    assert numpy_dtype("string") == np.dtype(object)
    for e in ELEM_TYPES:
        if e.name != "string":
            assert elem_type_from_numpy(numpy_dtype(e.name)) == e.name
    assert elem_type_from_numpy(np.float64) == "double"
    assert elem_type_from_numpy("bfloat16") == "bfloat16"
    assert elem_type_from_numpy(np.dtype("U5")) == "string" and elem_type_from_numpy(object) == "string"
    with pytest.raises(ValueError, match="unknown ONNX element type number 99"):
        elem_type_name(99)
    with pytest.raises(ValueError, match="unknown ONNX element type 'float33'"):
        elem_type_number("float33")
    with pytest.raises(ValueError, match="has no ONNX element type"):
        elem_type_from_numpy(np.dtype("datetime64[s]"))
    with pytest.raises(ValueError, match="is not a numpy dtype"):
        elem_type_from_numpy("no-such-dtype")


# --------------------------------------------------------------------------- dtype strings

ROUND_TRIP = [  # text, then what it parses to: kind, element type, shape, the inner type (seq, map, optional)
    ("tensor(float)", "tensor", "float", None, None),
    ("tensor(float)[1,3,N,?]", "tensor", "float", (1, 3, "N", None), None),
    ("tensor(int64)[]", "tensor", "int64", (), None),
    ("tensor(bfloat16)[2, 3]", "tensor", "bfloat16", (2, 3), None),
    ("tensor(float8e5m2fnuz)[?]", "tensor", "float8e5m2fnuz", (None,), None),
    ("tensor(float)[-1,batch.size]", "tensor", "float", (-1, "batch.size"), None),
    ('tensor(float)["batch size",3,"?","s0 + 1"]', "tensor", "float", ("batch size", 3, "?", "s0 + 1"), None),
    ("sparse_tensor(float)[100,100]", "sparse_tensor", "float", (100, 100), None),
    ("seq(tensor(int64))", "seq", None, None, "tensor(int64)"),
    ("seq(tensor(int64)[N])", "seq", None, None, "tensor(int64)"),
    ("map(string, tensor(float))", "map", None, None, "tensor(float)"),
    ("map(int64,tensor(float))", "map", None, None, "tensor(float)"),
    ("map(string, float)", "map", None, None, "tensor(float)"),
    ("seq(map(int64, float))", "seq", None, None, "map(int64, tensor(float))"),
    ("optional(tensor(float))", "optional", None, None, "tensor(float)"),
    ("optional(seq(tensor(uint4)))", "optional", None, None, "seq(tensor(uint4))"),
    ("opaque(com.example,Blob)", "opaque", None, None, None),
    ("opaque(Blob)", "opaque", None, None, None),
    ("float", "tensor", "float", (), None),
    ("  tensor ( float ) [ 1 , N ]  ", "tensor", "float", (1, "N"), None),
]


@pytest.mark.parametrize("text,kind,elem_type,shape,inner", ROUND_TRIP)
def test_dtype_parse_round_trips(text, kind, elem_type, shape, inner):
    t = parse_dtype(text)
    assert (t.kind, t.elem_type, t.shape) == (kind, elem_type, shape)
    assert (t.inner.canonical if getattr(t, "inner", None) is not None else None) == inner
    assert str(t) == text
    assert TS.parse_dtype(text) == t
    again = parse_dtype(t.format())
    assert again == t and str(again) == t.format()
    assert parse_dtype(t.canonical).canonical == t.canonical
    assert t.without_shapes().canonical == t.canonical


def test_dtype_components():
    t = parse_dtype("tensor(float)[1,3,N,?]")
    assert (t.kind, t.elem_type, t.shape, t.rank) == ("tensor", "float", (1, 3, "N", None), 4)
    assert t.numpy_dtype == np.float32 and t.canonical == "tensor(float)"
    assert parse_dtype("tensor(float)").shape is None and parse_dtype("tensor(float)").rank is None
    assert parse_dtype("tensor(int64)[]").shape == ()
    q = parse_dtype('tensor(float)["batch size",?]')
    assert q.shape == ("batch size", None) and q.format() == 'tensor(float)["batch size",?]'
    assert parse_dtype('tensor(float)["?"]').shape == ("?",)
    m = parse_dtype("map(string, seq(tensor(float)[3]))")
    assert (m.kind, m.key, m.inner.kind, m.inner.inner.shape) == ("map", "string", "seq", (3,))
    assert m.canonical == "map(string, seq(tensor(float)))"
    o = parse_dtype("optional(seq(tensor(float)))")
    assert o.kind == "optional" and o.inner.kind == "seq" and o.elem_type is None
    s = parse_dtype("sparse_tensor(double)[10]")
    assert s.kind == "sparse_tensor" and s.elem_type == "double" and s.numpy_dtype == np.float64
    scalar = parse_dtype("float")
    assert scalar.scalar and scalar.kind == "tensor" and scalar.shape == () and scalar.canonical == "tensor(float)"
    assert scalar == parse_dtype("tensor(float)[]")
    assert parse_dtype("map(string, float)").canonical == "map(string, tensor(float))"
    op = parse_dtype("opaque(com.example, Blob)")
    assert (op.domain, op.name, op.format()) == ("com.example", "Blob", "opaque(com.example,Blob)")
    with pytest.raises(ValueError, match="not a tensor type"):
        parse_dtype("seq(tensor(float))").numpy_dtype


def test_dtype_constructors():
    t = OnnxType.tensor("float", [1, "N", None])
    assert str(t) == "tensor(float)[1,N,?]"
    assert str(OnnxType.seq(OnnxType.tensor("int64"))) == "seq(tensor(int64))"
    assert str(OnnxType.map("string", OnnxType.tensor("float"))) == "map(string, tensor(float))"
    assert str(OnnxType.optional(OnnxType.tensor("float", sparse=True))) == "optional(sparse_tensor(float))"
    assert str(OnnxType.opaque("", "X")) == "opaque(X)"
    with pytest.raises(ValueError, match="map keys"):
        OnnxType.map("float", t)
    with pytest.raises(ValueError, match="unknown ONNX element type"):
        OnnxType.tensor("float33")


@pytest.mark.parametrize("text, where", [
    ("tensor(flot)", "unknown element type 'flot'"),
    ("tensor(float)[1,", "unclosed '['"),
    ("tensor(float)[1 2]", "expected ',' or ']'"),
    ("tensor(float)[1,(]", "expected a dimension"),
    ("map(float, tensor(float))", "map key is an integer type or string"),
    ("seq(tensor(float)", "expected ')' but the text ends"),
    ("foo(bar)", "unknown type 'foo'"),
    ("tensor(float) x", "unexpected 'x' after the type"),
    ("float[3]", "unexpected '[' after the type"),
    ("tensor(float)[1;2]", "unexpected ';2]'"),
    ("opaque(a,b,c)", "at most a domain and a name"),
    ("", "empty ONNX type"),
])
def test_dtype_parse_errors(text, where):
    with pytest.raises(TypeExprError, match=re.escape(where)):
        parse_dtype(text)


def test_dtype_parse_error_names_column():
    with pytest.raises(TypeExprError, match=r"bad ONNX type 'tensor\(flot\)' at column 8"):
        parse_dtype("tensor(flot)")
    with pytest.raises(TypeExprError, match="is a string"):
        parse_dtype(["tensor(float)"])


def test_type_proto_conversions():
    tp = onnx.helper.make_tensor_type_proto(onnx.TensorProto.FLOAT, [1, "N", None])
    assert dtype_from_type_proto(tp) == "tensor(float)[1,N,?]"
    assert dtype_from_type_proto(onnx.helper.make_tensor_type_proto(onnx.TensorProto.INT64, None)) == \
        "tensor(int64)"
    assert dtype_from_type_proto(onnx.helper.make_tensor_type_proto(onnx.TensorProto.INT64, [])) == \
        "tensor(int64)[]"
    seq = onnx.helper.make_sequence_type_proto(onnx.helper.make_tensor_type_proto(onnx.TensorProto.FLOAT16, ["B"]))
    assert dtype_from_type_proto(seq) == "seq(tensor(float16)[B])"
    mp = onnx.helper.make_map_type_proto(onnx.TensorProto.STRING,
                                         onnx.helper.make_tensor_type_proto(onnx.TensorProto.FLOAT, None))
    assert dtype_from_type_proto(mp) == "map(string, tensor(float))"
    opt = onnx.helper.make_optional_type_proto(seq)
    assert dtype_from_type_proto(opt) == "optional(seq(tensor(float16)[B]))"
    sp = onnx.helper.make_sparse_tensor_type_proto(onnx.TensorProto.DOUBLE, [4, 4])
    assert dtype_from_type_proto(sp) == "sparse_tensor(double)[4,4]"
    assert dtype_from_type_proto(onnx.TypeProto()) is None
    assert dtype_from_type_proto(onnx.helper.make_tensor_type_proto(0, [1])) is None
    for text, *_ in ROUND_TRIP:
        if text.startswith("opaque"):
            continue
        proto = type_proto_from_dtype(text)
        assert parse_dtype(dtype_from_type_proto(proto)) == parse_dtype(text), text
    assert type_proto_from_dtype("tensor(float)[1,N,?]") == tp
    assert type_proto_from_dtype("map(string, tensor(float))") == mp
    opaque = type_proto_from_dtype("opaque(com.example,Blob)")
    assert opaque.opaque_type.domain == "com.example" and dtype_from_type_proto(opaque) == "opaque(com.example,Blob)"


# --------------------------------------------------------------------------- attribute values


def _graph():
    return Graph("amanda/onnx/13")


def _sparse():
    return SparseTensor(np.array([1.0, 2.0], np.float32), np.array([0, 5], np.int64), [2, 3])


GOOD = {
    "FLOAT": [1.5, 2, np.float32(0.5)],
    "INT": [3, -1, np.int64(7)],
    "STRING": ["NOTSET", b"\xff\xfe", ""],
    "TENSOR": [np.zeros((2, 3), np.float32), Tensor(np.arange(3)), np.array(1.0)],
    "GRAPH": [_graph()],
    "SPARSE_TENSOR": [_sparse()],
    "TYPE_PROTO": ["tensor(float)", "seq(tensor(int64)[N])", parse_dtype("map(int64, float)")],
    "FLOATS": [[1.0, 2], (0.5,), []],
    "INTS": [[1, 2, 3], (), [np.int32(4)]],
    "STRINGS": [["a", b"b"], []],
    "TENSORS": [[np.zeros(2), Tensor(np.ones(3))], []],
    "GRAPHS": [[_graph(), _graph()], []],
    "SPARSE_TENSORS": [[_sparse()], []],
    "TYPE_PROTOS": [["tensor(float)", "optional(tensor(bool))"], []],
}
BAD = {
    "FLOAT": [True, "1.0", None, [1.0]],
    "INT": [1.0, True, np.bool_(True), "3", [1]],
    "STRING": [1, None, ["a"]],
    "TENSOR": [[1, 2], 1.0, "t", _sparse()],
    "GRAPH": [{"ops": {}}, None],
    "SPARSE_TENSOR": [np.zeros(3), None],
    "TYPE_PROTO": ["tensor(flot)", 1, "float32"],
    "FLOATS": [1.0, [1.0, "x"], [True]],
    "INTS": [1, [1, 2.5], [False], "12"],
    "STRINGS": ["ab", [1]],
    "TENSORS": [np.zeros(3), [[1, 2]]],
    "GRAPHS": [_graph(), [None]],
    "SPARSE_TENSORS": [_sparse(), [np.zeros(2)]],
    "TYPE_PROTOS": ["tensor(float)", ["tensor(float)", "nope"]],
}


def test_good_and_bad_values_cover_every_attribute_kind():
    assert set(GOOD) == set(BAD) == set(ATTR_KINDS) == set(TS.type_names())
    kinds = {onnx.AttributeProto.AttributeType.Name(v) for v in onnx.AttributeProto.AttributeType.values()}
    assert set(ATTR_KINDS) == kinds - {"UNDEFINED"}


@pytest.mark.parametrize("kind", sorted(GOOD))
def test_check_value_accepts(kind):
    for value in GOOD[kind]:
        assert TS.check_value(kind, value) is None, (kind, value)


@pytest.mark.parametrize("kind", sorted(BAD))
def test_check_value_rejects(kind):
    for value in BAD[kind]:
        reason = TS.check_value(kind, value)
        assert reason is not None and f"onnx.{kind}" in reason, (kind, value)


def test_check_value_reason_names_element():
    assert TS.check_value("INTS", [1, 2, "x"]) == "expected onnx.INTS: element 2 should be an int, got str 'x'"
    with pytest.raises(TypeExprError, match="unknown onnx attribute type 'LONG'"):
        TS.check_value("LONG", 1)


def test_sparse_tensor_value():
    s = _sparse()
    assert s.elem_type == "float" and s.nnz == 2 and s.dims == (2, 3)
    np.testing.assert_array_equal(s.to_dense(), np.array([[1, 0, 0], [0, 0, 2]], np.float32))
    coo = SparseTensor(np.array([7], np.int32), np.array([[1, 2]], np.int64), (2, 3))
    np.testing.assert_array_equal(coo.to_dense(), np.array([[0, 0, 0], [0, 0, 7]], np.int32))
    assert s == _sparse() and s != coo
    assert copy.deepcopy(s) is s
    assert repr(s) == "SparseTensor(float, nnz=2, dims=[2, 3])"
    with pytest.raises(AttributeError):
        s.dims = (1,)
    with pytest.raises(ValueError, match="must be 1-D"):
        SparseTensor(np.zeros((2, 2)), np.array([0, 1]), [4])
    with pytest.raises(ValueError, match="must be int64"):
        SparseTensor(np.zeros(2), np.array([0, 1], np.int32), [4])
    with pytest.raises(ValueError, match=r"must be \[2\] or \[2, 1\]"):
        SparseTensor(np.zeros(2), np.array([0, 1, 2], np.int64), [4])
    with pytest.raises(ValueError, match="non-negative ints"):
        SparseTensor(np.zeros(2), np.array([0, 1], np.int64), [-4])
    with pytest.raises(TypeError, match="values must be"):
        SparseTensor([1.0], np.array([0], np.int64), [4])


# --------------------------------------------------------------------------- port dtypes


def test_check_dtype_concrete_types():
    assert TS.check_dtype("tensor(int64)", "tensor(int64)[3]") is None
    assert TS.check_dtype("tensor(int64)", "tensor(int32)") == "expected tensor(int64), got tensor(int32)"
    assert "cannot read dtype" in TS.check_dtype("tensor(int64)", "tensor(int65)")
    assert "neither a type constraint" in TS.check_dtype("T", "tensor(float)")


def test_check_dtype_type_constraints(onnx_registry):
    concat = onnx_registry.schema("amanda/onnx/13")["Concat"]
    ctx = {"op_schema": concat, "bindings": {}}
    assert TS.check_dtype("T", "tensor(float)[1,3]", ctx) is None
    assert ctx["bindings"] == {"T": "tensor(float)"}
    assert TS.check_dtype("T", "tensor(float)[N,3]", ctx) is None  # shapes never matter
    reason = TS.check_dtype("T", "tensor(int64)", ctx)
    assert reason == "type constraint T is bound to tensor(float) by another port, but this port has tensor(int64)"
    relu = onnx_registry.schema("amanda/onnx/13")["Relu"]
    reason = TS.check_dtype("T", "tensor(int64)", {"op_schema": relu, "bindings": {}})
    assert "tensor(int64) is not allowed for type constraint T" in reason and "tensor(float)" in reason


def test_check_dtype_map_and_scalar_spellings(onnx_registry):
    ml = onnx_registry.schema("amanda/onnx/ai.onnx.ml/1")
    zipmap = ml["ZipMap"]
    assert TS.check_dtype("T", "seq(map(string,tensor(float)))", {"op_schema": zipmap, "bindings": {}}) is None
    assert TS.check_dtype("T", "seq(map(string, float))", {"op_schema": zipmap, "bindings": {}}) is None
    assert TS.check_dtype("T", "seq(map(string, tensor(double)))", {"op_schema": zipmap, "bindings": {}})


def test_heterogeneous_ports_do_not_bind(onnx_registry):
    loop = onnx_registry.schema("amanda/onnx/13")["Loop"]
    ctx = {"op_schema": loop, "bindings": {}}
    assert TS.check_dtype("V", "tensor(float)", ctx) is None
    assert TS.check_dtype("V", "tensor(int64)", ctx) is None
    assert "V" not in ctx["bindings"]
    assert TS.check_dtype("V", "seq(tensor(float))", ctx) is None
    port = loop.input("v_initial")
    assert TS.check_dtype("V", "tensor(int64)", {**ctx, "port_schema": port}) is None
    concat = onnx_registry.schema("amanda/onnx/13")["Concat"]
    ctx2 = {"op_schema": concat, "bindings": {"T": "tensor(float)"}, "port_schema": concat.input("inputs")}
    assert TS.check_dtype("T", "tensor(int64)", ctx2) is not None


# --------------------------------------------------------------------------- validation


def small_graph(concat_axis=1, b_dtype="tensor(float)[1,3]"):
    """x, y -> Add -> Relu -> Concat(relu, x) -> out."""
    g = Graph("amanda/onnx/13")
    x = g.add_input_port("x", "tensor(float)[1,3]")
    y = g.add_input_port("y", b_dtype)
    add = g.add_op("Add", "add", inputs=[("A", "tensor(float)[1,3]"), ("B", b_dtype)],
                   outputs=[("C", "tensor(float)[1,3]")])
    relu = g.add_op("Relu", "relu", inputs=[("X", "tensor(float)[1,3]")], outputs=[("Y", "tensor(float)[1,3]")])
    attrs = {} if concat_axis is None else {"axis": concat_axis}
    cat = g.add_op("Concat", "cat", attrs=attrs, inputs=[("inputs_0", "tensor(float)[1,3]"),
                                                         ("inputs_1", "tensor(float)[1,3]")],
                   outputs=[("concat_result", "tensor(float)[1,6]")])
    out = g.add_output_port("out", "tensor(float)[1,6]")
    g.connect(x, add.input_ports["A"])
    g.connect(y, add.input_ports["B"])
    g.connect(add.output_ports["C"], relu.input_ports["X"])
    g.connect(relu.output_ports["Y"], cat.input_ports["inputs_0"])
    g.connect(x, cat.input_ports["inputs_1"])
    g.connect(cat.output_ports["concat_result"], out)
    return g


def test_valid_onnx_graph(onnx_registry):
    assert validate(small_graph(), onnx_registry) == []
    assert validate(small_graph(), onnx_registry, "amanda/onnx/7") == []


def test_invalid_onnx_graph_problems_name_the_op(onnx_registry):
    g = small_graph(concat_axis=None, b_dtype="tensor(int64)[1,3]")
    g.get_op("relu").attrs["alpha"] = 0.1
    g.get_op("add").add_input_port("D", "tensor(float)")
    g.add_op("Squeeze", "sq", attrs={"axes": [0]}, inputs=[("data", "tensor(float)")],
             outputs=[("squeezed", "tensor(float)")])
    problems = validate(g, onnx_registry)
    text = [str(p) for p in problems]
    assert any(p.op == "cat" and p.op_type == "Concat" and "missing required attribute 'axis' (onnx.INT)"
               in p.message for p in problems), text
    assert any(p.op == "add" and "type constraint T is bound to tensor(float)" in p.message
               and "tensor(int64)" in p.message for p in problems), text
    assert any(p.op == "add" and "unknown input port 'D'" in p.message for p in problems), text
    assert any(p.op == "relu" and "unknown attribute 'alpha'" in p.message for p in problems), text
    assert any(p.op == "sq" and "unknown attribute 'axes'" in p.message for p in problems), text
    assert all(p.op for p in problems)
    # Squeeze took axes as an attribute before opset 13
    sq_problems = [p for p in validate(g, onnx_registry, "amanda/onnx/11") if p.op == "sq"]
    assert sq_problems == []


def test_attribute_of_wrong_kind_and_deprecated_op(onnx_registry):
    g = Graph("amanda/onnx/13")
    g.add_op("Concat", "cat", attrs={"axis": "1"}, inputs=["inputs_0"], outputs=["concat_result"])
    g.add_op("Upsample", "up", attrs={"mode": "nearest"}, inputs=["X", "scales"], outputs=["Y"])
    problems = validate(g, onnx_registry)
    assert any(p.op == "cat" and "expected onnx.INT (an int), got str '1'" in p.message for p in problems)
    assert any(p.op == "up" and p.severity == "warning" and "deprecated" in p.message for p in problems)


def test_variadic_minimum_is_checked(onnx_registry):
    g = Graph("amanda/onnx/13")
    g.add_op("Concat", "cat", attrs={"axis": 0}, outputs=["concat_result"])
    problems = validate(g, onnx_registry)
    assert [p.message for p in problems] == ["needs at least 1 input port(s) inputs_<i>, has 0"]


def test_canonical_element_types_for_dtype_conversion():
    from amanda_onnx.typesystem import OnnxTypeSystem

    ts = OnnxTypeSystem()
    assert ts.canonical_dtype(1) == "float32" and ts.canonical_dtype("int64") == "int64"
    assert ts.canonical_dtype("tensor(bfloat16)[2,N]") == "bfloat16" and ts.canonical_dtype("string") == "string"
    assert ts.canonical_dtype("seq(tensor(float))") is None and ts.canonical_dtype("nonsense") is None
    assert ts.from_canonical_dtype("float32") == 1 and ts.from_canonical_dtype("int64") == 7
    assert ts.from_canonical_dtype("string") == 8 and ts.from_canonical_dtype("no-such") is None
