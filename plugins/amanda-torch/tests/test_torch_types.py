"""The torch type system: schema types, Python values, TorchScript value types (port dtypes), enum tables."""

import numpy as np
import pytest
import torch

from amanda_core.ir import Tensor
from amanda_core.ir.tensor import resolve_dtype
from amanda_torch import LAYOUTS, MEMORY_FORMATS, QSCHEMES, SCALAR_TYPES, TorchTypeSystem, lookup_scalar_type
from amanda_torch.scalar_types import lookup_enum
from amanda_torch.schema_text import parse_function_schema
from amanda_torch.typeexpr import ListOf, Named, OptionalOf, TypeParseError, format_type, parse_schema_type
from amanda_torch.valuetypes import DtypeParseError, TensorValueType, parse_value_type

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:torch.*", "ignore::UserWarning")

TS = TorchTypeSystem()


# --------------------------------------------------------------------------- enum tables against torch


def _script(source):
    return torch.jit.CompilationUnit(source)


def test_scalar_type_table_matches_installed_torch():
    unit = _script("def dtype_number(x: torch.Tensor) -> int:\n    return x.dtype\n")
    dtypes = {getattr(torch, n) for n in dir(torch) if isinstance(getattr(torch, n), torch.dtype)}
    rows = {r.torch_name: r for r in SCALAR_TYPES}
    assert {str(d)[len("torch."):] for d in dtypes} == set(rows)
    for d in dtypes:
        row = rows[str(d)[len("torch."):]]
        assert torch._C.TensorType.get().with_dtype(d).scalarType() == row.script_name
        assert unit.dtype_number(torch.empty(0, dtype=d)) == row.number, row
        assert (d.itemsize, d.is_floating_point, d.is_complex) == (
            row.itemsize, row.is_floating_point, row.is_complex), row
        assert lookup_scalar_type(d) is row
        if row.numpy_name:
            assert resolve_dtype(row.numpy_name).itemsize == row.itemsize or row.numpy_name in (
                "int2", "int4", "uint2", "uint4")


def test_layout_and_memory_format_tables_match_installed_torch():
    unit = _script(
        "def lay() -> List[int]:\n"
        "    return [torch.strided, torch.sparse_coo, torch.sparse_csr, torch._mkldnn, torch.sparse_csc,\n"
        "            torch.sparse_bsr, torch.sparse_bsc, torch.jagged]\n"
        "def mf() -> List[int]:\n"
        "    return [torch.contiguous_format, torch.preserve_format, torch.channels_last, torch.channels_last_3d]\n")
    assert unit.lay() == [r.number for r in LAYOUTS]
    assert unit.mf() == [r.number for r in MEMORY_FORMATS]
    for table in (LAYOUTS, MEMORY_FORMATS, QSCHEMES):
        for row in table:
            obj = getattr(torch, row.torch_name)
            assert str(obj) == f"torch.{row.torch_name}"
            assert lookup_enum(table, obj) is row and lookup_enum(table, row.cpp_name) is row


def test_scalar_type_spellings():
    for spelling in (6, "Float", "float32", "torch.float32", "torch.float", "float", np.float32, np.dtype("float32")):
        assert lookup_scalar_type(spelling).script_name == "Float", spelling
    assert lookup_scalar_type("long").number == 4 and lookup_scalar_type("int").torch_name == "int32"
    for bad in (True, 99, "Floaty", None, 1.5):
        assert lookup_scalar_type(bad) is None


# --------------------------------------------------------------------------- value types (port dtypes)


SEED_TEXTS = ["Float(1, 784)", "Float(100, 784)", "Float(784, 100)", "Float(1, 100)"]
OTHER_TEXTS = [
    "Float(1, 784, strides=[784, 1], requires_grad=0, device=cpu)", "Long()", "Long(requires_grad=0, device=cpu)",
    "Tensor", "Float", "Tensor(2, 3)", "int", "int[]", "Float(*, 784)", "Float(SS(-3), 784)", "(Tensor, Tensor)",
    "Tensor?", "Tensor[]", "Tensor?[]", "Dict(str, Tensor)", "Future[Tensor]", "Future(int)", "Union(Tensor, int)",
    "NoneType", "Device", "str", "bool", "float", "(Float(2, 2, strides=[2, 1], requires_grad=0, device=cpu), "
    "Tensor[])", "Float(2, 3, strides=[3, 1], requires_grad=1, device=cuda:0)", "Float(2)[Undefined]",
    "__torch__.torch.nn.modules.container.Sequential", "Enum<__torch__.Color>", "Half(1, 3)", "BFloat16(4)",
    "((int, int), Tensor)", "Dict(str, Tensor)[]", "int[]?", "Any", "()",
]


PARSED = [  # text, then what it parses to: kind, element dtype, sizes (None: unknown rank, or not a tensor)
    ('Float(1, 784)', 'TensorType', 'float32', [1, 784]),
    ('Float(100, 784)', 'TensorType', 'float32', [100, 784]),
    ('Float(784, 100)', 'TensorType', 'float32', [784, 100]),
    ('Float(1, 100)', 'TensorType', 'float32', [1, 100]),
    ('Float(1, 784, strides=[784, 1], requires_grad=0, device=cpu)', 'TensorType', 'float32', [1, 784]),
    ('Long()', 'TensorType', 'int64', []),
    ('Long(requires_grad=0, device=cpu)', 'TensorType', 'int64', []),
    ('Tensor', 'TensorType', None, None),
    ('Float', 'TensorType', 'float32', None),
    ('Tensor(2, 3)', 'TensorType', None, [2, 3]),
    ('int', 'IntType', 'int64', None),
    ('int[]', 'ListType', None, None),
    ('Float(*, 784)', 'TensorType', 'float32', [None, 784]),
    ('Float(SS(-3), 784)', 'TensorType', 'float32', [None, 784]),
    ('(Tensor, Tensor)', 'TupleType', None, None),
    ('Tensor?', 'OptionalType', None, None),
    ('Tensor[]', 'ListType', None, None),
    ('Tensor?[]', 'ListType', None, None),
    ('Dict(str, Tensor)', 'DictType', None, None),
    ('Future[Tensor]', 'FutureType', None, None),
    ('Future(int)', 'FutureType', None, None),
    ('Union(Tensor, int)', 'UnionType', None, None),
    ('NoneType', 'NoneType', None, None),
    ('Device', 'DeviceObjType', None, None),
    ('str', 'StringType', None, None),
    ('bool', 'BoolType', 'bool', None),
    ('float', 'FloatType', 'float64', None),
    ('(Float(2, 2, strides=[2, 1], requires_grad=0, device=cpu), Tensor[])', 'TupleType', None, None),
    ('Float(2, 3, strides=[3, 1], requires_grad=1, device=cuda:0)', 'TensorType', 'float32', [2, 3]),
    ('Float(2)[Undefined]', 'TensorType', 'float32', [2]),
    ('__torch__.torch.nn.modules.container.Sequential', 'ClassType', None, None),
    ('Enum<__torch__.Color>', 'EnumType', None, None),
    ('Half(1, 3)', 'TensorType', 'float16', [1, 3]),
    ('BFloat16(4)', 'TensorType', 'bfloat16', [4]),
    ('((int, int), Tensor)', 'TupleType', None, None),
    ('Dict(str, Tensor)[]', 'ListType', None, None),
    ('int[]?', 'OptionalType', None, None),
    ('Any', 'AnyType', None, None),
    ('()', 'TupleType', None, None),
]


def test_every_value_type_text_has_its_parse_checked():
    assert [row[0] for row in PARSED] == SEED_TEXTS + OTHER_TEXTS


@pytest.mark.parametrize("text,kind,dtype,sizes", PARSED)
def test_value_type_round_trip(text, kind, dtype, sizes):
    t = TS.parse_dtype(text)
    assert (t.kind(), getattr(t, "dtype", None), t.sizes() if isinstance(t, TensorValueType) else None) == (
        kind, dtype, sizes)
    assert str(t) == text
    assert TS.parse_dtype(t) is t


def test_tensor_value_type_methods():
    t = TS.parse_dtype("Float(1, 784, strides=[784, 1], requires_grad=0, device=cpu)")
    assert isinstance(t, TensorValueType) and t.kind() == "TensorType"
    assert t.scalarType() == "Float" and t.dtype == "float32"
    assert t.sizes() == [1, 784] and t.dim() == 2 and t.strides() == [784, 1]
    assert t.device() == "cpu" and t.requires_grad() is False and t.requiresGrad() is False
    assert t.isComplete() and t.shape == (1, 784)
    seed = TS.parse_dtype("Float(1, 100)")
    assert seed.scalarType() == "Float" and seed.sizes() == [1, 100] and seed.strides() is None
    assert seed.device() is None and seed.requires_grad() is None and not seed.isComplete()
    unknown = TS.parse_dtype("Float(*, 784)")
    assert unknown.sizes() == [None, 784] and unknown.dim() == 2
    sym = TS.parse_dtype("Float(SS(-3), 784)")
    assert sym.sizes() == [None, 784] and sym.symbolic_sizes() == ["SS(-3)", 784]
    assert TS.parse_dtype("Long()").dim() == 0 and TS.parse_dtype("Long()").dtype == "int64"
    assert TS.parse_dtype("Float").dim() is None and TS.parse_dtype("Float").sizes() is None
    plain = TS.parse_dtype("Tensor")
    assert plain.scalarType() is None and plain.dtype is None and plain.dim() is None
    assert TS.parse_dtype("BFloat16(4)").dtype == "bfloat16"
    assert TS.parse_dtype("Float(2)[Undefined]").undefined() is True
    cuda = TS.parse_dtype("Float(2, 3, strides=[3, 1], requires_grad=1, device=cuda:0)")
    assert cuda.device() == "cuda:0" and cuda.requires_grad() is True


def test_container_value_types():
    tup = TS.parse_dtype("(Float(2, 2), Tensor[])")
    assert tup.kind() == "TupleType" and [str(e) for e in tup.elements()] == ["Float(2, 2)", "Tensor[]"]
    assert tup.elements()[1].getElementType().kind() == "TensorType"
    d = TS.parse_dtype("Dict(str, Tensor)")
    assert d.kind() == "DictType" and str(d.getKeyType()) == "str" and str(d.getValueType()) == "Tensor"
    assert TS.parse_dtype("Future[Tensor]").kind() == "FutureType"
    opt = TS.parse_dtype("Tensor?")
    assert opt.kind() == "OptionalType" and opt.getElementType().kind() == "TensorType"
    assert TS.parse_dtype("int").kind() == "IntType" and TS.parse_dtype("int").dtype == "int64"
    assert TS.parse_dtype("int").scalarType() is None
    assert TS.parse_dtype("__torch__.M").kind() == "ClassType"
    assert TS.parse_dtype("Enum<__torch__.Color>").kind() == "EnumType"


@pytest.mark.parametrize("bad", ["Flaot(1)", "Float(1, 784", "Float(1, x=2)", "float32", "Float(1,, 2)",
                                 "Dict(str)", "Tensor[", "int int", ""])
def test_bad_value_types_are_reported_with_position(bad):
    with pytest.raises(DtypeParseError, match="cannot parse TorchScript value type"):
        parse_value_type(bad)


def _all_value_types(graph, out):
    """Each value's type as the graph prints it (``type().str()``) and in annotation form (``str(type())``), with
    the torch type it came from: ``(text, type)`` pairs."""
    for v in graph.inputs():
        out += [(v.type().str(), v.type()), (str(v.type()), v.type())]
    for node in graph.nodes():
        for v in node.outputs():
            out += [(v.type().str(), v.type()), (str(v.type()), v.type())]
        for block in node.blocks():
            _all_value_types(block, out)
        for name in node.attributeNames():
            if node.kindOf(name) == "g":
                _all_value_types(node.g(name), out)
    return out


def test_every_value_type_of_a_real_trace_round_trips():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 100, bias=False), torch.nn.ReLU())
    traced = torch.jit.trace(model, (torch.randn(1, 784),))
    pairs = _all_value_types(traced.graph, []) + _all_value_types(traced.inlined_graph, [])
    texts = [text for text, _ in pairs]
    assert "Float(1, 784, strides=[784, 1], requires_grad=0, device=cpu)" in texts
    assert "Float(1, 100, strides=[100, 1], requires_grad=1, device=cpu)" in texts
    _assert_parsed_as_torch_types(pairs)
    relu = [n for n in traced.inlined_graph.nodes() if n.kind() == "aten::relu"][0]
    out = TS.parse_dtype(relu.output().type().str())
    assert out.scalarType() == "Float" and out.sizes() == list(relu.output().type().sizes())
    assert out.strides() == list(relu.output().type().strides()) and out.dtype == "float32"
    assert TS.check_dtype("Tensor", out) is None


def test_every_value_type_of_a_scripted_module_round_trips():
    class M(torch.nn.Module):
        def forward(self, x: torch.Tensor, d: dict[str, torch.Tensor], o: torch.Tensor | None):
            fut = torch.jit.fork(torch.relu, x)
            pair = (x, [x, x])
            if o is not None:
                x = x + o
            return torch.jit.wait(fut) + d["k"] + x, pair, x.device, x.dtype, x.size()

    scripted = torch.jit.script(M())
    pairs = _all_value_types(scripted.graph, [])
    assert {"Future[Tensor]", "Dict(str, Tensor)", "Tensor?", "Device", "int[]"} <= {text for text, _ in pairs}
    _assert_parsed_as_torch_types(pairs)


def _assert_parsed_as_torch_types(pairs):
    """Each text parses to the kind torch gave it, and a tensor type as the graph prints it to torch's scalar type
    and sizes (the annotation form, ``Tensor``, has neither)."""
    for text, ty in pairs:
        t = TS.parse_dtype(text)
        assert t.kind() == ty.kind(), text
        if ty.kind() == "TensorType" and text == ty.str():
            assert (t.scalarType(), t.sizes()) == (ty.scalarType(), ty.varyingSizes()), text
        assert str(t) == text


# --------------------------------------------------------------------------- schema types


def test_every_schema_type_of_torch_parses_and_prints_back():
    for s in torch._C._jit_get_all_schemas():
        parsed = parse_function_schema(str(s))
        assert [a.name for a in parsed.args] == [a.name for a in s.arguments]
        for arg in (*parsed.args, *parsed.returns):
            t, aliases = parse_schema_type(arg.annotated)
            assert format_type(t) == arg.type and aliases == arg.aliases
            assert parse_schema_type(arg.type) == (t, ())
            TS.check_value(arg.type, None)  # every type torch uses is known to the type system


def test_schema_text_details():
    p = parse_function_schema("aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) "
                              "-> Tensor(a!)")
    assert p.qualified_name == "aten::add.out" and [a.kwarg_only for a in p.args] == [False, False, True, True]
    assert p.args[2].default == "1" and p.args[3].mutable and p.returns[0].aliases == ("a!",)
    p = parse_function_schema("aten::max.dim(Tensor self, int dim, bool keepdim=False) -> "
                              "(Tensor values, Tensor indices)")
    assert [r.name for r in p.returns] == ["values", "indices"]
    p = parse_function_schema("aten::items.str(Dict(str, t) self) -> ((str, t)[])")
    assert [r.type for r in p.returns] == ["(str, t)[]"]
    p = parse_function_schema("prim::TupleUnpack(Any tup) -> ...")
    assert p.varret and not p.returns
    p = parse_function_schema('aten::strip(str self, str chars=" \\n\\t\\f\\v") -> str')
    assert p.args[1].default == '" \\n\\t\\f\\v"'
    with pytest.raises(TypeParseError, match="cannot parse operator schema"):
        parse_function_schema("aten::add(Tensor self -> Tensor")


def test_schema_type_expressions():
    assert parse_schema_type("Tensor(a!)[]") == (ListOf(Named("Tensor")), ("a!",))
    assert parse_schema_type("t(a)?") == (OptionalOf(Named("t")), ("a",))
    assert format_type(parse_schema_type("List[Optional[Tensor]]")[0]) == "Tensor?[]"
    assert format_type(parse_schema_type("Dict(str, t)(a!)")[0]) == "Dict(str, t)"
    assert format_type(parse_schema_type("Tensor | Scalar")[0]) == "Tensor | Scalar"
    for bad in ("Tensor(", "int[x]", "(int, ", "Dict(str, int"):
        with pytest.raises(TypeParseError):
            parse_schema_type(bad)


# --------------------------------------------------------------------------- values


VALUES = [
    ("Tensor", [np.zeros((2, 3), np.float32), Tensor(np.ones(2)), torch.zeros(2)], [1, [1.0], None]),
    ("Tensor?", [None, np.zeros(1)], [1.5]),
    ("Tensor[]", [[np.zeros(1), np.ones(2)], []], [np.zeros(1), [1]]),
    ("Tensor?[]", [[None, np.zeros(1)]], [[1]]),
    ("int", [3, np.int64(3), -1], [True, 1.5, "3"]),
    ("SymInt", [3], [2.0]),
    ("float", [1.5, 2, np.float32(1)], [True, "1.5"]),
    ("bool", [True, np.bool_(False)], [1, "true"]),
    ("str", ["mean"], [1]),
    ("complex", [1j, 2.0, 1], ["1j"]),
    ("Scalar", [1, 2.5, True, 1j], ["1", None, [1]]),
    ("int[]", [[1, 2], (3,), []], [[1.5], 3, None]),
    ("int[2]", [[1, 1], 1], [[1.5], "1"]),
    ("SymInt[]", [[1, 2]], [1]),
    ("int[1]?", [None, [0], 0], ["x"]),
    ("float[]", [[1, 2.5]], [[True]]),
    ("bool[3]", [[True, False, True], True], [[1, 0, 1]]),
    ("ScalarType", ["float32", "Float", 6, "torch.int64", np.float64], ["floaty", 99, True]),
    ("ScalarType?", [None, "bfloat16"], ["x"]),
    ("Layout", ["strided", "torch.sparse_coo", "SparseCsr", 0], ["dense", 42]),
    ("MemoryFormat", ["contiguous_format", "channels_last", "ChannelsLast3d", 1], ["nchw"]),
    ("QScheme", ["per_tensor_affine", 0], ["affine"]),
    ("Device", ["cpu", "cuda:0", torch.device("cpu")], ["CPU!", 0]),
    ("Generator", [torch.Generator()], [0]),
    ("Dimname", ["N", "*"], ["1x", 3]),
    ("Any", [None, 1, object()], []),
    ("t", [1, "a", None], []),
    ("(Tensor, Tensor)", [(np.zeros(1), np.zeros(1))], [(np.zeros(1),), np.zeros(1)]),
    ("(str, t)[]", [[("a", 1), ("b", None)]], [[("a",)]]),
    ("Dict(str, Tensor)", [{"w": np.zeros(1)}, {}], [{"w": 1}, {1: np.zeros(1)}, [("w", np.zeros(1))]]),
    ("Future(t)", [torch.jit.Future()], [1]),
    ("__torch__.torch.classes.quantized.Conv2dPackedParamsBase", [object()], [None]),
    ("Tensor | Scalar", [np.zeros(1), 1], ["x"]),
    ("Graph", [], [1, "graph"]),
    ("Type", ["Float(1, 784)", "int[]"], ["Flaot(1)", 3]),
]


@pytest.mark.parametrize(("type_expr", "good", "bad"), VALUES, ids=[v[0] for v in VALUES])
def test_check_value(type_expr, good, bad):
    for v in good:
        assert TS.check_value(type_expr, v) is None, (type_expr, v)
    for v in bad:
        reason = TS.check_value(type_expr, v)
        assert reason and reason.startswith(f"expected torch.{type_expr}"), (type_expr, v)


def test_graph_values_and_unknown_types():
    from amanda_core import Graph

    assert TS.check_value("Graph", Graph()) is None
    with pytest.raises(TypeParseError, match="unknown torch type 'Tensr'"):
        TS.check_value("Tensr", 1)
    assert "cannot be checked" in TS.check_dtype("Tensr", "Float(1)")


# --------------------------------------------------------------------------- dtypes against schema types


FITS = [
    ("Tensor", ["Float(1, 784)", "Tensor", "Long()", "Float"], ["int", "Tensor?", "Tensor[]", "NoneType"]),
    ("Tensor?", ["Float(1, 784)", "Tensor?", "NoneType"], ["int", "Tensor[]"]),
    ("Tensor[]", ["Tensor[]", "Float(2)[]"], ["Tensor", "int[]"]),
    ("Tensor?[]", ["Tensor?[]", "Tensor[]"], ["Tensor"]),
    ("int", ["int"], ["float", "Tensor", "bool", "int?"]),
    ("Scalar", ["int", "float", "bool", "complex"], ["Tensor", "str"]),
    ("float", ["float", "int"], ["bool", "Tensor"]),
    ("int[]", ["int[]"], ["int", "float[]"]),
    ("int[2]", ["int[]", "int"], ["float"]),
    ("SymInt[]", ["int[]"], ["Tensor"]),
    ("ScalarType?", ["int", "NoneType", "int?"], ["str"]),
    ("Device?", ["Device", "NoneType"], ["str"]),
    ("(Tensor, Tensor)", ["(Float(1), Tensor)"], ["(Tensor)", "Tensor"]),
    ("Dict(str, Tensor)", ["Dict(str, Tensor)", "Dict(str, Float(2))"], ["Dict(int, Tensor)", "Tensor"]),
    ("Future(t)", ["Future[Tensor]"], ["Tensor"]),
    ("t", ["Tensor", "int", "Tensor?"], []),
    ("Any", ["(int, str)"], []),
    ("AnyClassType", ["__torch__.M"], ["int"]),
    ("Tensor | Scalar", ["Tensor", "int"], ["str"]),
    ("str", ["Any", "Union(str, str)"], ["Union(str, int)"]),
]


@pytest.mark.parametrize(("type_expr", "fit", "misfit"), FITS, ids=[f[0] for f in FITS])
def test_check_dtype(type_expr, fit, misfit):
    for d in fit:
        assert TS.check_dtype(type_expr, d) is None, (type_expr, d)
    for d in misfit:
        reason = TS.check_dtype(type_expr, d)
        assert reason == f"dtype {d} does not fit schema type torch.{type_expr}", reason


def test_unparsable_dtype_is_a_reason_not_an_exception():
    assert "is not a TorchScript value type" in TS.check_dtype("Tensor", "float32")
    assert TS.check_dtype("Tensor", None) is None


def test_canonical_element_types_for_dtype_conversion():
    from amanda_torch.types import TorchTypeSystem

    ts = TorchTypeSystem()
    assert ts.canonical_dtype("Float") == "float32" and ts.canonical_dtype("torch.int64") == "int64"
    assert ts.canonical_dtype(ts.parse_dtype("Double(2, 3)")) == "float64"
    assert ts.canonical_dtype("Half(1, strides=[1], requires_grad=0, device=cpu)") == "float16"
    assert ts.canonical_dtype("Tensor") is None and ts.canonical_dtype("Nope") is None
    assert ts.from_canonical_dtype("float32") == "Float" and ts.from_canonical_dtype("bool") == "Bool"
