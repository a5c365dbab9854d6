"""The tf type system: attribute values, port dtype strings, the DataType table."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from amanda_core import Graph
from amanda_core.ir.tensor import Tensor
from amanda_core.namespace import (
    NamespaceRegistry,
    OpSchema,
    PortSchema,
    PythonTypeSystem,
    TypeSystemRegistry,
    load_schema,
    validate,
)
from amanda_core.namespace.schema import AttrSchema
from amanda_core.namespace.types import TypeExprError
from amanda_tf.dtypes import (
    DTYPES,
    DTypeError,
    TFDType,
    dtype_enum,
    dtype_from_enum,
    dtype_from_numpy,
    dtype_names,
    is_dtype_name,
    numpy_dtype,
    parse_dtype,
)
from amanda_tf.types import TFTypeSystem

TS = TFTypeSystem()

# --------------------------------------------------------------------------- attribute values

GOOD = [
    ("string", "SAME"), ("string", b"\xff\xfe"), ("int", 3), ("int", -1), ("float", 0.5), ("float", 1),
    ("float", float("inf")), ("bool", False), ("type", "float32"), ("type", "bfloat16"), ("type", "resource"),
    ("shape", [1, 784]), ("shape", [-1, 3]), ("shape", []), ("shape", None), ("shape", (2, 2)),
    ("tensor", np.zeros((2, 2), np.float32)), ("tensor", Tensor(np.array([1, 2], np.int64))),
    ("tensor", np.array([b"a", b"b"], dtype=object)), ("tensor", np.zeros(2, ml_dtypes.bfloat16)),
    ("tensor", Tensor(dtype="float32", shape=(3,), loader=lambda: np.zeros(3, np.float32))),
    ("func", "body_fn"), ("func", {"name": "f", "attr": {"T": "float32"}}), ("func", {"name": "f"}),
    ("list(int)", [1, 2, 2, 1]), ("list(int)", []), ("list(type)", ["int32", "float32"]),
    ("list(shape)", [[], [1], None]), ("list(string)", ["a", b"b"]), ("list(float)", [1.0, 2]),
    ("list(bool)", [True]), ("list(func)", ["f", {"name": "g", "attr": {}}]),
    ("list(tensor)", [np.zeros(1, np.int32)]),
    ("DType", "int8"), ("TensorShape", [3]), ("Tensor", np.zeros(1)), ("list(DType)", ["int8"]),
    ("tf.int", 3),
]

BAD = [
    ("string", 3, "expected a string, got int 3"),
    ("int", True, "expected an int, got bool True"),
    ("int", 1.5, "expected an int"),
    ("float", "1.0", "expected a float, got str '1.0'"),
    ("float", False, "expected a float"),
    ("bool", 0, "expected a bool, got int 0"),
    ("type", "flaot32", "unknown TensorFlow dtype 'flaot32' (did you mean 'float32'?)"),
    ("type", "float32_ref", "a type attribute holds a plain dtype, not the reference type 'float32_ref'"),
    ("type", 1, "expected a dtype name such as 'float32', got int 1"),
    ("shape", [1, -2], "expected a shape"),
    ("shape", [1, 2.0], "expected a shape"),
    ("shape", [True], "expected a shape"),
    ("shape", "1,2", "expected a shape"),
    ("tensor", [1, 2], "expected a tensor (numpy array or amanda_core.ir.Tensor), got list [1, 2]"),
    ("tensor", np.zeros(2, np.float128) if hasattr(np, "float128") else np.zeros(2, "datetime64[s]"),
     "has no TensorFlow dtype"),
    ("func", "", "expected a function name, got an empty string"),
    ("func", {"name": "f", "attrs": {}}, "got also ['attrs']"),
    ("func", {"attr": {}}, "needs a non-empty 'name'"),
    ("func", {"name": "f", "attr": [1]}, "'attr' maps attribute names to values"),
    ("func", 3, "expected a function"),
    ("list(int)", 3, "expected a list of int, got int 3"),
    ("list(int)", [1, "2"], "item 1: expected an int, got str '2'"),
    ("list(type)", ["int32", "int33"], "item 1: unknown TensorFlow dtype 'int33'"),
    ("list(shape)", [[1], [-5]], "item 1: expected a shape"),
]


@pytest.mark.parametrize("type_expr, value", GOOD, ids=[f"{t}-{i}" for i, (t, _) in enumerate(GOOD)])
def test_values_of_their_type_pass(type_expr, value):
    assert TS.check_value(type_expr, value) is None


@pytest.mark.parametrize("type_expr, value, reason", BAD, ids=[f"{t}-{i}" for i, (t, _, _) in enumerate(BAD)])
def test_values_of_another_type_are_reported(type_expr, value, reason):
    got = TS.check_value(type_expr, value)
    assert got is not None and reason in got


@pytest.mark.parametrize("expr", ["Int", "list(int", "list(list(int))", "python.int", "T", "list(T)"])
def test_unknown_attribute_types_are_schema_errors(expr):
    with pytest.raises(TypeExprError, match="unknown tf attribute type"):
        TS.check_value(expr, 1)


def test_type_names_cover_every_opdef_attr_type():
    names = set(TS.type_names())
    for t in ("string", "int", "float", "bool", "type", "shape", "tensor", "func"):
        assert t in names and f"list({t})" in names
    assert {"DType", "TensorShape", "Tensor"} <= names


# --------------------------------------------------------------------------- dtype strings


@pytest.mark.parametrize("text, name, ref, shape", [
    ("float32", "float32", False, None),
    ("float32_ref", "float32", True, None),
    ("float32[1,784]", "float32", False, (1, 784)),
    ("float32[?,784]", "float32", False, (None, 784)),
    ("int64[]", "int64", False, ()),
    ("float32_ref[784,10]", "float32", True, (784, 10)),
    ("float8_e4m3fn[2]", "float8_e4m3fn", False, (2,)),
    ("resource_ref", "resource", True, None),
    ("string[0]", "string", False, (0,)),
])
def test_dtype_strings_parse_and_print_back(text, name, ref, shape):
    d = TS.parse_dtype(text)
    assert (d.name, d.is_ref, d.shape) == (name, ref, shape)
    assert str(d) == text
    assert parse_dtype(str(d)) == d


def test_dtype_strings_tolerate_spaces_but_print_canonically():
    assert str(parse_dtype(" float32[ 1, ? ] ")) == "float32[1,?]"


@pytest.mark.parametrize("text, message", [
    ("flaot32", "unknown TensorFlow dtype 'flaot32' in 'flaot32' (did you mean 'float32'?)"),
    ("float32[-1,3]", "dimension '-1' in 'float32[-1,3]': write '?' for an unknown dimension"),
    ("float32[a]", "dimension 'a' in 'float32[a]' is neither a size nor '?'"),
    ("float32[1,]", "dimension '' in 'float32[1,]' is neither a size nor '?'"),
    ("Float(1, 784)", "cannot read TensorFlow dtype 'Float(1, 784)'"),
    ("float32[1][2]", "cannot read TensorFlow dtype"),
    ("", "cannot read TensorFlow dtype ''"),
])
def test_bad_dtype_strings_say_what_is_wrong(text, message):
    with pytest.raises(DTypeError) as e:
        parse_dtype(text)
    assert message in str(e.value)


def test_non_string_dtype_is_rejected():
    with pytest.raises(DTypeError, match="a TensorFlow port dtype is a string"):
        parse_dtype(1)  # type: ignore[arg-type]


def test_parsed_dtype_properties():
    d = parse_dtype("float32_ref[?,10]")
    assert d.full_name == "float32_ref" and d.enum == 101 and d.rank == 2
    assert d.shape_list() == [-1, 10] and parse_dtype("float32").shape_list() is None
    assert d.base() == TFDType("float32") and d.numpy_dtype == np.dtype(np.float32)
    assert parse_dtype("bfloat16").numpy_dtype == np.dtype(ml_dtypes.bfloat16)
    assert parse_dtype("variant").numpy_dtype is None
    with pytest.raises(DTypeError):
        TFDType("float")


# --------------------------------------------------------------------------- the DataType table


def test_dtype_table_matches_tensorflow():
    import tensorflow as tf
    from tensorflow.core.framework import types_pb2

    numbers = [v.number for v in types_pb2.DataType.DESCRIPTOR.values if v.number != 0]
    assert sorted(dtype_enum(n) for n in dtype_names(refs=True)) == sorted(numbers)
    for number in numbers:
        tf_dtype = tf.as_dtype(number)
        name = dtype_from_enum(number)
        assert name == tf_dtype.name, number
        assert dtype_enum(name) == number
        assert is_dtype_name(name, ref=None)
        if number > 100:
            continue
        ours = numpy_dtype(name)
        if name in ("resource", "variant"):
            assert ours is None
            continue
        theirs = np.dtype(tf_dtype.as_numpy_dtype)
        if theirs.fields:  # quantized: one-field record over the storage type
            (theirs, _), = theirs.fields.values()
        assert ours == theirs, name


def test_dtype_table_lookups():
    assert len({d.enum for d in DTYPES}) == len({d.name for d in DTYPES}) == len(DTYPES)
    assert dtype_enum("float32") == 1 and dtype_enum("float32_ref") == 101 and dtype_from_enum(120) == "resource_ref"
    assert dtype_from_numpy(np.float32) == "float32" and dtype_from_numpy("int64") == "int64"
    assert dtype_from_numpy(np.dtype(ml_dtypes.bfloat16)) == "bfloat16" and dtype_from_numpy(object) == "string"
    assert dtype_from_numpy(np.bytes_) == "string" and dtype_from_numpy(np.bool_) == "bool"
    assert numpy_dtype("string") == np.dtype(object) and numpy_dtype("qint8") == np.dtype(np.int8)
    assert is_dtype_name("float32") and not is_dtype_name("float32_ref") and is_dtype_name("float32_ref", ref=True)
    assert not is_dtype_name("float32", ref=True) and not is_dtype_name(3)
    with pytest.raises(DTypeError, match="unknown TensorFlow DataType number 99"):
        dtype_from_enum(99)
    with pytest.raises(DTypeError, match="no TensorFlow counterpart"):
        dtype_from_numpy("datetime64[s]")
    with pytest.raises(DTypeError, match="not a numpy dtype"):
        dtype_from_numpy("nonsense")
    with pytest.raises(DTypeError, match="unknown TensorFlow dtype 'half'"):
        dtype_enum("half")


# --------------------------------------------------------------------------- port dtypes


MATMUL = OpSchema("MatMul", attrs=(AttrSchema("T", "tf.type", allowed_values=("float32", "int32")),
                                   AttrSchema("transpose_a", "tf.bool", False)),
                  input_ports=(PortSchema("a", "T"), PortSchema("b", "T")), output_ports=(PortSchema("product", "T"),))
IDENTITY_N = OpSchema("IdentityN", attrs=(AttrSchema("T", "tf.list(type)"),),
                      input_ports=(PortSchema("input", "T", variadic=True),),
                      output_ports=(PortSchema("output", "T", variadic=True),))
CAST = OpSchema("Cast", attrs=(AttrSchema("DstT", "tf.type", "float32"),), output_ports=(PortSchema("y", "DstT"),))


def ctx(schema, attrs=None, inputs=(), outputs=(), port=None, bindings=None):
    g = Graph("amanda/tensorflow/2.21.0")
    op = g.add_op(schema.type, "op", attrs=attrs or {}, inputs=list(inputs), outputs=list(outputs))
    out = {"op": op, "op_schema": schema, "bindings": {} if bindings is None else bindings}
    if port is not None:
        kind, name = port
        p = (op.input_ports if kind == "in" else op.output_ports)[name]
        out["port"] = p
        out["port_schema"] = (schema.input if kind == "in" else schema.output)(name)
    return out


def test_port_type_naming_a_type_attr_takes_its_value():
    c = ctx(MATMUL, {"T": "float32"})
    assert TS.check_dtype("T", "float32[1,784]", c) is None
    assert TS.check_dtype("T", "float32_ref", c) is None  # a reference feeds a plain input
    assert TS.check_dtype("T", "int32", c) == "dtype int32 does not match attribute T = float32"


def test_unset_type_attr_uses_default_then_allowed_values_and_agreement():
    assert TS.check_dtype("DstT", "float32", ctx(CAST)) is None
    assert TS.check_dtype("DstT", "int8", ctx(CAST)) == "dtype int8 does not match attribute DstT = float32"
    c = ctx(MATMUL)
    assert TS.check_dtype("T", "float64", c) == "dtype float64 is not allowed for T (allowed: float32, int32)"
    assert TS.check_dtype("T", "int32", c) is None
    assert TS.check_dtype("T", "float32", c) == "dtype float32 differs from int32, which another port binds to T"
    assert TS.check_dtype("T", "int32[2]", c) is None


def test_invalid_attr_value_is_left_to_the_attribute_check():
    assert TS.check_dtype("T", "float32", ctx(MATMUL, {"T": "flaot32"})) is None
    assert TS.check_dtype("T", "float32", ctx(MATMUL, {"T": 7})) is None
    assert TS.check_dtype("T", "float32", ctx(IDENTITY_N, {"T": ["int32", 3]})) is None


def test_type_list_attr_types_each_port():
    attrs = {"T": ["int32", "float32"]}
    ins = [("input_0", "int32"), ("input_1", "float32")]
    assert TS.check_dtype("T", "int32", ctx(IDENTITY_N, attrs, ins, port=("in", "input_0"))) is None
    assert TS.check_dtype("T", "float32", ctx(IDENTITY_N, attrs, ins, port=("in", "input_0"))) == (
        "dtype float32 does not match T[0] = int32 (attribute T = ['int32', 'float32'])")
    many = ins + [("input_2", "int32")]
    assert TS.check_dtype("T", "int32", ctx(IDENTITY_N, attrs, many, port=("in", "input_2"))) == (
        "port number 2 has no type in attribute T = ['int32', 'float32']")
    # without the port in the context, the dtype must be one of the listed types
    assert TS.check_dtype("T", "float32", ctx(IDENTITY_N, attrs)) is None
    assert TS.check_dtype("T", "int8", ctx(IDENTITY_N, attrs)) == (
        "dtype int8 is none of attribute T = ['int32', 'float32']")


def test_fixed_ref_and_any_port_types():
    assert TS.check_dtype("int32", "int32[]", ctx(MATMUL)) is None
    assert TS.check_dtype("int32", "int64", ctx(MATMUL)) == "expected dtype int32, got int64"
    assert TS.check_dtype("Ref(T)", "float32_ref", ctx(MATMUL, {"T": "float32"})) is None
    assert TS.check_dtype("Ref(T)", "float32", ctx(MATMUL, {"T": "float32"})) == (
        "expects a reference (float32_ref), got the plain dtype float32")
    assert TS.check_dtype("Ref(int32)", "int32_ref", {}) is None
    assert TS.check_dtype("int32_ref", "int32", {}) == "expects a reference (int32_ref), got the plain dtype int32"
    assert TS.check_dtype("int32_ref", "int64_ref", {}) == "expected dtype int32_ref, got int64_ref"
    assert TS.check_dtype("DType", "variant", None) is None
    assert TS.check_dtype("DType", "float32_ref[1]", None) is None


def test_output_port_may_not_carry_a_reference_of_a_plain_type():
    c = ctx(MATMUL, {"T": "float32"}, outputs=[("product", "float32_ref")], port=("out", "product"))
    assert TS.check_dtype("T", "float32_ref", c) == "produces a plain tensor, not the reference float32_ref"


def test_unusable_port_types_and_dtypes_are_reported():
    assert TS.check_dtype("T", "flaot32", ctx(MATMUL)).startswith("unknown TensorFlow dtype 'flaot32'")
    assert TS.check_dtype("U", "float32", ctx(MATMUL)) == (
        "port type 'U' names neither a TensorFlow dtype nor a type attribute of MatMul")
    assert TS.check_dtype("transpose_a", "float32", ctx(MATMUL)) == (
        "port type 'transpose_a' names neither a TensorFlow dtype nor a type attribute of MatMul")


def test_seed_minimal_schema_validates_with_the_tf_type_system():
    """The minimal schema examples/schemas/tensorflow-1.13.1.yaml (tf.DType, tf.TensorShape) and its graph,
    checked by this type system."""
    examples = Path(__file__).resolve().parents[3] / "examples" / "schemas" / "tensorflow-1.13.1.yaml"
    reg = NamespaceRegistry(TypeSystemRegistry([PythonTypeSystem(), TFTypeSystem()]))
    reg.add_schema(load_schema(examples))
    g = Graph("amanda/tensorflow/1.13.1")
    ph = g.add_op("Placeholder", "Placeholder", attrs={"shape": [1, 784], "dtype": "float32"},
                  outputs=[("output", "float32")])
    k = g.add_op("VariableV2", "dense/kernel", attrs={"shape": [784, 10], "dtype": "float32", "container": "",
                                                      "shared_name": ""}, outputs=[("ref", "float32_ref")])
    mm = g.add_op("MatMul", "dense/MatMul", attrs={"T": "float32", "transpose_a": False, "transpose_b": False},
                  inputs=[("a", "float32"), ("b", "float32")], outputs=[("product", "float32")])
    g.connect(ph.output_ports["output"], mm.input_ports["a"])
    g.connect(k.output_ports["ref"], mm.input_ports["b"])
    assert validate(g, reg) == []
    ph.attrs["dtype"] = "float"
    ph.output_ports["output"].dtype = "Float(1, 784)"
    msgs = [p.message for p in validate(g, reg)]
    assert len(msgs) == 2
    assert msgs[0].startswith("attribute 'dtype': unknown TensorFlow dtype 'float'")
    assert msgs[1].startswith("port 'output': cannot read TensorFlow dtype 'Float(1, 784)'")


def test_canonical_element_types_for_dtype_conversion():
    from amanda_tf.types import TFTypeSystem

    ts = TFTypeSystem()
    assert ts.canonical_dtype("float32") == "float32" and ts.canonical_dtype("float32_ref") == "float32"
    assert ts.canonical_dtype("int64[1,784]") == "int64" and ts.canonical_dtype(1) == "float32"
    assert ts.canonical_dtype("string") == "string" and ts.canonical_dtype("resource") is None
    assert ts.canonical_dtype("flaot32") is None
    assert ts.from_canonical_dtype("bfloat16") == "bfloat16" and ts.from_canonical_dtype("int8") == "int8"
    assert ts.from_canonical_dtype("string") == "string"
