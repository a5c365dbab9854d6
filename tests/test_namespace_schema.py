from pathlib import Path

import pytest

from amanda_core.errors import FormatError, SchemaError
from amanda_core.namespace import (
    NO_DEFAULT,
    NamespaceSchema,
    dump_schema,
    load_schema,
    op_schema_from_dict,
    schema_from_dict,
    schema_to_dict,
)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "schemas"


@pytest.mark.parametrize("name", ["tensorflow-1.13.1.yaml", "pytorch-1.4.0.yaml"])
def test_seed_schemas_load_and_round_trip(name):
    s = load_schema(EXAMPLES / name)
    assert isinstance(s, NamespaceSchema) and len(s) == 4
    again = load_schema(dump_schema(s), filename="dumped.yaml")
    assert again == s
    assert dump_schema(again) == dump_schema(s)


def test_seed_tf_schema_contents():
    s = load_schema(EXAMPLES / "tensorflow-1.13.1.yaml")
    assert s.namespace == "amanda/tensorflow/1.13.1" and s.default_type_system == "python"
    v = s["VariableV2"]
    assert [a.name for a in v.attrs] == ["shape", "dtype", "container", "shared_name"]
    assert v.attr("shape").required and v.attr("shape").default is NO_DEFAULT
    assert v.attr("container").default == ""
    m = s["MatMul"]
    assert m.attr("transpose_a").default is False
    assert [p.name for p in m.input_ports] == ["a", "b"]
    assert m.output_ports[0].type == "tf.DType"
    text = dump_schema(m)
    assert "transpose_a: bool = false" in text and "container" not in text


def test_port_extensions_optional_and_variadic():
    s = op_schema_from_dict({
        "type": "Concat",
        "input_ports": [{"inputs+": "T"}, {"axis?": "int = 0"}, {"x*": {"type": "T", "doc": "many"}}],
        "output_ports": [{"concat_result": "T"}],
        "type_constraints": {"T": ["tensor(float)"]},
        "commutative": [],
    })
    inputs, axis, x = s.input_ports
    assert inputs.variadic and inputs.min_count == 1 and inputs.accepts_name("inputs_3")
    assert not inputs.accepts_name("inputs_x")
    assert axis.optional and axis.default == 0
    assert x.variadic and x.min_count == 0 and x.doc == "many"
    assert s.input("inputs_0") is inputs
    dumped = schema_to_dict(NamespaceSchema("amanda/x", [s]))["namespace_schema"]["op_schemas"][0]
    assert op_schema_from_dict(dumped) == s


def test_long_form_attr_with_allowed_values_round_trips():
    d = {"type": "Conv2D", "attrs": {"padding": {"type": "tf.string", "allowed_values": ["SAME", "VALID"]},
                                     "data_format": "tf.string = \"NHWC\""}}
    s = op_schema_from_dict(d)
    assert s.attr("padding").allowed_values == ("SAME", "VALID") and s.attr("padding").required
    assert s.attr("data_format").default == "NHWC"
    ns = NamespaceSchema("amanda/x/1", [s])
    assert load_schema(dump_schema(ns), filename="x") == ns


@pytest.mark.parametrize(
    "bad,match",
    [
        ({"type": "X", "attrs": {"a": 3}}, "expected 'type'"),
        ({"type": "X", "input_ports": [{"a": 1, "b": 2}]}, "a port is written"),
        ({"type": "X", "bogus": 1}, "unknown keys"),
        ({"attrs": {}}, "with a 'type'"),
        ({"type": "X", "attrs": {"a": {"default": 1}}}, "needs 'type'"),
    ],
)
def test_malformed_op_schemas(bad, match):
    with pytest.raises(SchemaError, match=match):
        op_schema_from_dict(bad)


def test_duplicate_op_type_rejected():
    with pytest.raises(SchemaError, match="defined twice"):
        schema_from_dict({"namespace": "amanda/x", "op_schemas": [{"type": "A"}, {"type": "A"}]})


def test_yaml_syntax_error_has_file_and_line(tmp_path):
    p = tmp_path / "broken.yaml"
    p.write_text("namespace_schema:\n  namespace: amanda/x\n  op_schemas: [\n    - type: A\n")
    with pytest.raises(FormatError) as exc:
        load_schema(p)
    assert str(exc.value).startswith(f"{p}:")
    assert exc.value.location.line is not None


def test_input_position_is_the_slot_order_and_leaves_equality_alone() -> None:
    from amanda_core.namespace.schema import OpSchema, PortSchema

    a = OpSchema("Conv", input_ports=(PortSchema("X"), PortSchema("W"), PortSchema("B", optional=True)))
    b = OpSchema("Conv", input_ports=(PortSchema("X"), PortSchema("W"), PortSchema("B", optional=True)))
    assert [a.input_position(n) for n in ("X", "W", "B", "Y")] == [0, 1, 2, None]
    assert a == b  # the positions a was asked for are no part of what it is
