"""Namespace schemas generated from onnx.defs: namespaces, the opset rule, ports, attributes, YAML form, CLI."""

import math

import numpy as np
import onnx
import onnx.defs
import pytest
import yaml
from attrs import evolve

from amanda_core.cli.main import main
from amanda_core.errors import NamespaceError
from amanda_core.namespace import NO_DEFAULT, dump_schema, load_schema, op_schema_from_dict, op_schema_to_dict
from amanda_onnx import ATTR_KINDS, COMMUTATIVE_OPS
from amanda_onnx.schemas import decode_attr_default, family_of, in_force
from amanda_onnx.structural import STRUCTURAL_TYPES

NEWEST = onnx.defs.onnx_opset_version()
ML_NEWEST = onnx.defs.onnx_ml_opset_version()


def onnx_domains():
    return {s.domain or "ai.onnx" for s in onnx.defs.get_all_schemas_with_history()}


# --------------------------------------------------------------------------- namespaces


def test_every_domain_and_opset_is_a_namespace(onnx_registry):
    assert onnx_registry.versions("amanda/onnx") == [str(v) for v in range(1, NEWEST + 1)]
    assert onnx_registry.versions("amanda/onnx/ai.onnx.ml") == [str(v) for v in range(1, ML_NEWEST + 1)]
    assert "amanda/onnx/ai.onnx.preview.training/1" in onnx_registry
    assert set(onnx_registry.families()) == {family_of(d) for d in onnx_domains()}
    assert onnx_registry.resolve("amanda/onnx") == f"amanda/onnx/{NEWEST}"
    assert onnx_registry.resolve("amanda/onnx/>=13,<18") == "amanda/onnx/17"


def test_schema_names_and_meta(onnx_registry):
    s = onnx_registry.schema("amanda/onnx/13")
    assert s.namespace == "amanda/onnx/13"
    assert s.default_type_system == "onnx"
    assert s.meta["opset"] == 13 and s.meta["domain"] == "ai.onnx" and s.meta["onnx_version"]
    ml = onnx_registry.schema("amanda/onnx/ai.onnx.ml/3")
    assert ml.namespace == "amanda/onnx/ai.onnx.ml/3"
    assert all(o.domain == "ai.onnx.ml" for o in ml)


def test_schema_is_built_once_per_version(onnx_registry):
    (provider, _), = onnx_registry.providers("amanda/onnx")
    assert provider.schema("13") is provider.schema(13)
    assert onnx_registry.schema("amanda/onnx/13") is onnx_registry.schema("amanda/onnx/13.0")


def test_unknown_opsets_are_errors(onnx_registry):
    with pytest.raises(NamespaceError, match="not registered"):
        onnx_registry.schema(f"amanda/onnx/{NEWEST + 1}")
    (provider, _), = onnx_registry.providers("amanda/onnx")
    with pytest.raises(NamespaceError, match=f"opsets 1 to {NEWEST}"):
        provider.schema(NEWEST + 1)
    with pytest.raises(NamespaceError, match="whole number"):
        provider.schema("13a")
    with pytest.raises(NamespaceError, match="needs an opset"):
        provider.schema(None)


# --------------------------------------------------------------------------- the opset rule


def test_squeeze_axes_attribute_at_11_input_at_13(onnx_registry):
    s11 = onnx_registry.schema("amanda/onnx/11")["Squeeze"]
    assert s11.since_version == "11"
    assert s11.attr("axes").type == "onnx.INTS" and s11.attr("axes").default is None
    assert [p.name for p in s11.input_ports] == ["data"]
    s13 = onnx_registry.schema("amanda/onnx/13")["Squeeze"]
    assert s13.since_version == "13"
    assert s13.attr("axes") is None
    axes = s13.input("axes")
    assert axes is not None and axes.optional and axes.type == "tensor(int64)"
    assert "axes?: tensor(int64)" in dump_schema(s13, docs=False)


def test_clip_min_max_attributes_at_6_inputs_from_11(onnx_registry):
    c6 = onnx_registry.schema("amanda/onnx/6")["Clip"]
    assert c6.attr("min").type == "onnx.FLOAT" and c6.attr("max").type == "onnx.FLOAT"
    # float32 limits, written as the shortest decimal that is that float32
    assert c6.attr("max").default == 3.4028235e38 and np.float32(c6.attr("max").default) == np.finfo(np.float32).max
    assert np.float32(c6.attr("min").default) == np.finfo(np.float32).min
    assert [p.name for p in c6.input_ports] == ["input"]
    for n in range(11, NEWEST + 1):
        c = onnx_registry.schema(f"amanda/onnx/{n}")["Clip"]
        assert c.attr("min") is None and c.attr("max") is None
        assert [(p.name, p.optional) for p in c.input_ports] == [("input", False), ("min", True), ("max", True)]
    assert onnx_registry.schema("amanda/onnx/12")["Clip"].since_version == "12"
    assert onnx_registry.schema("amanda/onnx/11")["Clip"].since_version == "11"


def test_op_introduced_at_n_is_absent_before(onnx_registry):
    first_since = {}
    for ref in onnx.defs.get_all_schemas_with_history():
        if ref.domain == "":
            first_since[ref.name] = min(first_since.get(ref.name, 10**6), ref.since_version)
    for op in onnx_registry.schema(f"amanda/onnx/{NEWEST}"):
        if op.type in STRUCTURAL_TYPES:
            continue
        first = first_since[op.type]
        assert op.type in onnx_registry.schema(f"amanda/onnx/{first}")
        if first > 1:
            assert op.type not in onnx_registry.schema(f"amanda/onnx/{first - 1}"), op.type
    assert "Gelu" not in onnx_registry.schema("amanda/onnx/19")
    assert onnx_registry.schema("amanda/onnx/20")["Gelu"].since_version == "20"


@pytest.mark.parametrize("domain", sorted(onnx_domains()))
def test_opset_rule_agrees_with_onnx_for_every_op_and_opset(onnx_registry, domain):
    """For every opset N of the domain: the ops present and each one's since_version are what
    onnx.defs.get_schema(op, N, domain) gives."""
    family = family_of(domain)
    onnx_domain = "" if domain == "ai.onnx" else domain
    names = {s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain == onnx_domain}
    for v in onnx_registry.versions(family):
        n = int(v)
        schema = onnx_registry.schema(f"{family}/{v}")
        expected = {}
        for name in names:
            try:
                expected[name] = onnx.defs.get_schema(name, n, onnx_domain)
            except onnx.defs.SchemaError:
                continue
        assert set(schema.op_schemas) - STRUCTURAL_TYPES == set(expected), (family, n)
        for name, ref in expected.items():
            ours = schema[name]
            assert ours.since_version == str(ref.since_version)
            assert ours.deprecated == ref.deprecated
            assert [p.name for p in ours.input_ports] == [p.name for p in ref.inputs]
            assert [p.name for p in ours.output_ports] == [p.name for p in ref.outputs]
            assert set(ours.attr_names()) == set(ref.attributes)
            assert {k: list(v) for k, v in ours.type_constraints.items()} == {
                tc.type_param_str: list(tc.allowed_type_strs) for tc in ref.type_constraints}


def test_deprecated_ops_are_marked_not_removed(onnx_registry):
    assert not onnx_registry.schema("amanda/onnx/9")["Upsample"].deprecated
    for n in (10, NEWEST):
        up = onnx_registry.schema(f"amanda/onnx/{n}")["Upsample"]
        assert up.deprecated and up.since_version == "10"
    assert onnx_registry.schema("amanda/onnx/11")["Scatter"].deprecated
    assert onnx_registry.schema("amanda/onnx/18")["GroupNormalization"].deprecated
    assert not onnx_registry.schema("amanda/onnx/21")["GroupNormalization"].deprecated


def test_in_force_picks_newest_not_after_opset():
    history = [{"since": 1}, {"since": 6}, {"since": 13}]
    assert in_force(history, 0) is None
    assert in_force(history, 5)["since"] == 1
    assert in_force(history, 6)["since"] == 6
    assert in_force(history, 12)["since"] == 6
    assert in_force(history, 99)["since"] == 13


# --------------------------------------------------------------------------- ports


def test_concat_inputs_are_variadic(onnx_registry):
    c = onnx_registry.schema("amanda/onnx/13")["Concat"]
    (inputs,) = c.input_ports
    assert inputs.name == "inputs" and inputs.variadic and inputs.min_count == 1 and inputs.type == "T"
    assert c.input("inputs_0") is inputs and c.input("inputs_17") is inputs
    assert "inputs+: T" in dump_schema(c, docs=False)
    assert c.attr("axis").required


def test_zero_or_more_and_heterogeneous_variadic_ports(onnx_registry):
    loop1 = onnx_registry.schema("amanda/onnx/1")["Loop"]
    loop = onnx_registry.schema("amanda/onnx/13")["Loop"]
    assert loop1.input("v_initial").min_count == 1
    v = loop.input("v_initial")
    assert v.variadic and v.min_count == 0 and v.meta == {"homogeneous": False}
    assert "v_initial*" in dump_schema(loop, docs=False)
    assert loop.input("M").optional and loop.input("cond").optional
    concat = onnx_registry.schema("amanda/onnx/13")["Concat"]
    assert concat.input("inputs").meta == {}


def test_every_port_of_every_opset_follows_onnx_arity(onnx_registry):
    option = onnx.defs.OpSchema.FormalParameterOption
    for s in onnx.defs.get_all_schemas_with_history():
        family = family_of(s.domain)
        ours = onnx_registry.schema(f"{family}/{s.since_version}")[s.name]
        for ref, port in zip([*s.inputs, *s.outputs], [*ours.input_ports, *ours.output_ports]):
            assert port.name == ref.name and port.type == ref.type_str
            assert port.optional == (ref.option == option.Optional)
            assert port.variadic == (ref.option == option.Variadic)
            if port.variadic:
                assert port.min_count == ref.min_arity


# --------------------------------------------------------------------------- attributes


def test_attribute_types_and_defaults(onnx_registry):
    s = onnx_registry.schema("amanda/onnx/15")
    bn = s["BatchNormalization"]
    assert bn.attr("epsilon").type == "onnx.FLOAT" and bn.attr("epsilon").default == 1e-05
    assert bn.attr("momentum").default == 0.9
    assert s["LeakyRelu"].attr("alpha").default == 0.01
    conv = s["Conv"]
    assert conv.attr("auto_pad").type == "onnx.STRING" and conv.attr("auto_pad").default == "NOTSET"
    assert conv.attr("group").default == 1
    assert conv.attr("kernel_shape").type == "onnx.INTS" and conv.attr("kernel_shape").default is None
    assert s["Cast"].attr("to").required and s["Cast"].attr("to").default is NO_DEFAULT
    assert s["If"].attr("then_branch").type == "onnx.GRAPH" and s["If"].attr("then_branch").required
    const = s["Constant"]
    assert const.attr("value").type == "onnx.TENSOR" and const.attr("value").default is None
    assert const.attr("sparse_value").type == "onnx.SPARSE_TENSOR"
    assert s["Optional"].attr("type").type == "onnx.TYPE_PROTO"
    assert onnx_registry.schema("amanda/onnx/19")["Resize"].attr("mode").default == "nearest"


def test_every_attribute_matches_onnx(onnx_registry):
    kinds_seen = set()
    for s in onnx.defs.get_all_schemas_with_history():
        ours = onnx_registry.schema(f"{family_of(s.domain)}/{s.since_version}")[s.name]
        for name, ref in s.attributes.items():
            a = ours.attr(name)
            assert a.type == f"onnx.{ref.type.name}"
            kinds_seen.add(ref.type.name)
            assert a.required == ref.required
            if not ref.required and not ref.default_value.type:
                assert a.default is None
            elif not ref.required:
                expected = onnx.helper.get_attribute_value(ref.default_value)
                if isinstance(expected, bytes):
                    expected = expected.decode()
                if isinstance(expected, list):
                    expected = [x.decode() if isinstance(x, bytes) else x for x in expected]
                if isinstance(expected, float):
                    assert np.float32(a.default) == np.float32(expected) or (
                        math.isnan(a.default) and math.isnan(expected))
                else:
                    assert a.default == expected, (s.name, name)
    assert kinds_seen <= set(ATTR_KINDS)


def test_float_defaults_are_the_float32_value_in_short_form():
    proto = onnx.helper.make_attribute("epsilon", np.float32(1e-5))
    assert proto.f != 1e-05  # float32 storage
    assert decode_attr_default("FLOAT", proto) == (True, 1e-05, "")
    floats = onnx.helper.make_attribute("scales", [0.1, 2.5])
    assert decode_attr_default("FLOATS", floats) == (True, [0.1, 2.5], "")


def test_decode_attr_default_kinds():
    assert decode_attr_default("INT", onnx.AttributeProto()) == (False, None, "")
    assert decode_attr_default("INTS", onnx.helper.make_attribute("a", [1, 2])) == (True, [1, 2], "")
    assert decode_attr_default("STRING", onnx.helper.make_attribute("m", "NOTSET")) == (True, "NOTSET", "")
    assert decode_attr_default("STRINGS", onnx.helper.make_attribute("m", ["a", "b"])) == (True, ["a", "b"], "")
    tp = onnx.helper.make_attribute("t", onnx.helper.make_tensor_type_proto(onnx.TensorProto.FLOAT, [2, "N"]))
    assert decode_attr_default("TYPE_PROTO", tp) == (True, "tensor(float)[2,N]", "")
    t = onnx.helper.make_attribute("value", onnx.numpy_helper.from_array(np.zeros(2, np.float32)))
    has, value, note = decode_attr_default("TENSOR", t, "Op attribute value")
    assert not has and value is None and "TENSOR" in note
    bad = onnx.helper.make_attribute("m", b"\xff\xfe")
    with pytest.raises(NamespaceError, match=r"Op attribute m: default string .* is not UTF-8"):
        decode_attr_default("STRING", bad, "Op attribute m")


# --------------------------------------------------------------------------- commutative


def test_commutative_ops(onnx_registry):
    s = onnx_registry.schema("amanda/onnx/14")
    assert s["Add"].commutative == ("A", "B")
    assert s["Mul"].commutative == ("A", "B")
    assert s["Sum"].commutative == ("data_0",)
    assert s["Max"].commutative == ("data_0",)
    assert s["Equal"].commutative == ("A", "B")
    assert s["Sub"].commutative == () and s["MatMul"].commutative == () and s["Div"].commutative == ()
    old = onnx_registry.schema("amanda/onnx/6")
    assert old["Add"].attr("broadcast") is not None and old["Add"].commutative == ()
    assert onnx_registry.schema("amanda/onnx/7")["Add"].commutative == ("A", "B")
    newest = onnx_registry.schema(f"amanda/onnx/{NEWEST}")
    for name in COMMUTATIVE_OPS:
        assert newest[name].commutative == tuple(p.name for p in newest[name].input_ports), name
    assert {o.type for o in newest if o.commutative} == set(COMMUTATIVE_OPS)


# --------------------------------------------------------------------------- other domains


def test_onnx_ml_domain(onnx_registry):
    ml1 = onnx_registry.schema("amanda/onnx/ai.onnx.ml/1")
    assert "LinearClassifier" in ml1 and "TreeEnsemble" not in ml1
    newest = onnx_registry.schema(f"amanda/onnx/ai.onnx.ml/{ML_NEWEST}")
    assert "TreeEnsemble" in newest and newest["TreeEnsembleClassifier"].deprecated
    zipmap = newest["ZipMap"]
    assert zipmap.type_constraints["T"] == ("seq(map(string, float))", "seq(map(int64, float))")
    assert newest["LabelEncoder"].attr("default_string").default == "_Unused"


def test_preview_training_domain(onnx_registry):
    s = onnx_registry.schema("amanda/onnx/ai.onnx.preview.training/1")
    assert {"Adagrad", "Adam", "Gradient", "Momentum"} <= set(s.op_schemas)
    assert s["Gradient"].input("Inputs").meta == {"homogeneous": False}


# --------------------------------------------------------------------------- YAML form


def _strip_docs(op):
    return evolve(op, doc="", attrs=tuple(evolve(a, doc="") for a in op.attrs),
                  input_ports=tuple(evolve(p, doc="") for p in op.input_ports),
                  output_ports=tuple(evolve(p, doc="") for p in op.output_ports))


@pytest.mark.parametrize("domain", sorted(onnx_domains()))
def test_newest_opset_round_trips_through_yaml(onnx_registry, domain):
    family = family_of(domain)
    schema = onnx_registry.schema(family)
    text = dump_schema(schema)
    back = load_schema(text)
    assert back.namespace == schema.namespace and back.default_type_system == "onnx"
    assert back.meta == schema.meta
    for op in schema:
        assert back[op.type] == op, op.type
    assert back == schema


def test_newest_opset_round_trips_through_yaml_without_docs(onnx_registry):
    schema = onnx_registry.schema("amanda/onnx")
    back = load_schema(dump_schema(schema, docs=False))
    assert all(back[op.type] == _strip_docs(op) for op in schema)


def test_each_op_schema_of_the_newest_opset_round_trips_alone(onnx_registry):
    for op in onnx_registry.schema("amanda/onnx"):
        assert op_schema_from_dict(op_schema_to_dict(op)) == op


def test_structural_types_are_in_every_default_opset_and_nowhere_else(onnx_registry):
    for n in (1, 13, NEWEST):
        schema = onnx_registry.schema(f"amanda/onnx/{n}")
        for t in STRUCTURAL_TYPES:
            s = schema[t]
            assert s.meta["structural"] is True and s.doc.startswith("Not an ONNX operator")
            assert [p.name for p in s.output_ports] == ["output"] and not s.input_ports
        assert schema["Initializer"].attr("value").type == "onnx.TENSOR"
        assert schema["SparseInitializer"].attr("value").type == "onnx.SPARSE_TENSOR"
        assert schema["Initializer"].attr("graph_input").default is False
    ml = onnx_registry.schema("amanda/onnx/ai.onnx.ml")
    assert not STRUCTURAL_TYPES & set(ml.op_schemas)


# --------------------------------------------------------------------------- CLI


def test_cli_prints_squeeze_at_13(capsys, onnx_plugin_loaded):
    rc = main(["schema", "amanda/onnx/13", "Squeeze"])
    out, _ = capsys.readouterr()
    assert rc == 0
    squeeze = op_schema_from_dict(yaml.safe_load(out))
    assert squeeze.type == "Squeeze" and squeeze.since_version == "13"
    assert squeeze.input("axes").optional and squeeze.input("axes").type == "tensor(int64)"
    assert squeeze.attr("axes") is None
    rc = main(["schema", "amanda/onnx/11", "Squeeze", "--no-docs"])
    out, _ = capsys.readouterr()
    assert rc == 0 and "axes: onnx.INTS = null" in out
    rc = main(["schema", "amanda/onnx/13", "Squeze"])
    _, err = capsys.readouterr()
    assert rc == 2 and "no op type 'Squeze'" in err and "Squeeze" in err


def test_cli_lists_onnx_namespaces(capsys, onnx_plugin_loaded):
    assert main(["namespaces"]) == 0
    out, _ = capsys.readouterr()
    assert f"amanda/onnx/{NEWEST}" in out and "amanda/onnx/ai.onnx.ml/1" in out
