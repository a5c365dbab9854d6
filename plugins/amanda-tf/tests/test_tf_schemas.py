"""The amanda/tensorflow namespace generated from TensorFlow's op registry."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from amanda_core import Graph
from amanda_core.cli.main import main
from amanda_core.errors import NamespaceError
from amanda_core.ir.tensor import Tensor
from amanda_core.namespace import NO_DEFAULT, NamespaceRegistry, TypeSystemRegistry, load_schema, validate
from amanda_core.namespace.schema import dump_schema, op_schema_from_dict, op_schema_to_dict
from amanda_core.plugin import manager
from amanda_tf.dtypes import is_dtype_name
from amanda_tf.framework import TensorFlowMissingError
from amanda_tf.namespace import TensorFlowNamespaces
from amanda_tf.schema import GENERATOR_VERSION, cache_key, load_schema_data
from amanda_tf.types import TFTypeSystem, parse_attr_type

# --------------------------------------------------------------------------- op schemas


def test_matmul_spot_check(tf_schema):
    """TF `MatMul` has ports `a`, `b`, `product` and attrs `transpose_a`/`transpose_b` defaulting to false."""
    mm = tf_schema["MatMul"]
    assert [p.name for p in mm.input_ports] == ["a", "b"]
    assert [p.name for p in mm.output_ports] == ["product"]
    assert mm.attr("transpose_a").default is False
    assert mm.attr("transpose_b").default is False
    assert mm.attr("transpose_a").type == "tf.bool"
    t = mm.attr("T")
    assert t.type == "tf.type" and t.required
    assert "float32" in t.allowed_values and "string" not in t.allowed_values
    assert {p.type for p in mm.input_ports + mm.output_ports} == {"T"}


def test_every_registered_op_is_in_the_schema(tf_schema, op_list, tf_version):
    assert len(tf_schema) >= 1800
    assert len(tf_schema) == len(op_list.op)
    assert tf_schema.namespace == f"amanda/tensorflow/{tf_version}"
    assert tf_schema.default_type_system == "tf"
    assert tf_schema.meta["op_count"] == len(op_list.op)
    for op_def in op_list.op:
        s = tf_schema[op_def.name]
        assert [p.name for p in s.input_ports] == [a.name for a in op_def.input_arg], op_def.name
        assert [p.name for p in s.output_ports] == [a.name for a in op_def.output_arg], op_def.name
        assert [(a.name, a.type) for a in s.attrs] == [(a.name, f"tf.{a.type}") for a in op_def.attr], op_def.name
        assert s.deprecated == op_def.HasField("deprecation"), op_def.name
        assert s.doc == op_def.summary


def test_schema_has_more_than_raw_ops(tf_schema):
    import tensorflow as tf

    raw = {n for n in dir(tf.raw_ops) if not n.startswith("_")}
    assert raw <= set(tf_schema.op_schemas)
    assert len(tf_schema) > len(raw)
    assert "_Arg" in tf_schema and "_Arg" not in raw


def test_concat_v2_values_is_variadic_counted_by_n(tf_schema):
    s = tf_schema["ConcatV2"]
    values, axis = s.input_ports
    assert values.name == "values" and values.variadic and values.type == "T"
    assert values.min_count == 2 and values.meta["number_attr"] == "N"
    assert s.attr("N").type == "tf.int" and s.attr("N").meta["minimum"] == 2
    assert axis.name == "axis" and not axis.variadic and axis.type == "Tidx"
    assert s.attr("Tidx").default == "int32" and s.attr("Tidx").allowed_values == ("int32", "int64")
    assert s.input("values_5") is values and s.input("values") is values


def test_switch_and_merge(tf_schema):
    sw = tf_schema["Switch"]
    assert [(p.name, p.type) for p in sw.input_ports] == [("data", "T"), ("pred", "bool")]
    assert [(p.name, p.type) for p in sw.output_ports] == [("output_false", "T"), ("output_true", "T")]
    merge = tf_schema["Merge"]
    (inputs,) = merge.input_ports
    assert inputs.variadic and inputs.min_count == 1 and inputs.meta == {"number_attr": "N"}
    assert [(p.name, p.type) for p in merge.output_ports] == [("output", "T"), ("value_index", "int32")]


def test_identity_n_ports_are_typed_by_a_type_list(tf_schema):
    s = tf_schema["IdentityN"]
    (inp,), (out,) = s.input_ports, s.output_ports
    for p in (inp, out):
        assert p.variadic and p.type == "T" and p.meta == {"type_list_attr": "T"} and p.min_count == 1
    assert s.attr("T").type == "tf.list(type)" and s.attr("T").meta == {"minimum": 1}


def test_assign_keeps_ref_ness(tf_schema):
    s = tf_schema["Assign"]
    ref, value = s.input_ports
    assert (ref.name, ref.type, dict(ref.meta)) == ("ref", "Ref(T)", {"is_ref": True})
    assert (value.name, value.type, dict(value.meta)) == ("value", "T", {})
    assert s.output_ports[0].type == "Ref(T)" and s.output_ports[0].meta["is_ref"] is True
    assert s.meta["allows_uninitialized_input"] is True
    assert tf_schema["VariableV2"].output_ports[0].type == "Ref(dtype)"


def test_op_flags_and_deprecation(tf_schema):
    assert tf_schema["AddV2"].commutative == ("x", "y")
    assert tf_schema["AddN"].commutative == ("inputs",) and tf_schema["AddN"].meta["is_aggregate"] is True
    assert tf_schema["MatMul"].commutative == ()
    assert tf_schema["VariableV2"].meta["is_stateful"] is True
    assert "is_stateful" not in tf_schema["MatMul"].meta
    old = tf_schema["BatchCholesky"]
    assert old.deprecated and old.meta["deprecation"]["version"] == 13
    assert "Cholesky" in old.meta["deprecation"]["explanation"]
    assert not tf_schema["Cholesky"].deprecated


def test_defaults_are_python_values(tf_schema):
    conv = tf_schema["Conv2D"]
    assert conv.attr("dilations").default == [1, 1, 1, 1]
    assert conv.attr("data_format").default == "NHWC"
    assert conv.attr("padding").allowed_values == ("SAME", "VALID", "EXPLICIT") and conv.attr("padding").required
    assert conv.attr("explicit_paddings").default == []
    assert tf_schema["Placeholder"].attr("shape").default is None  # unknown rank
    assert tf_schema["FusedBatchNorm"].attr("epsilon").default == 0.0001  # float32 shown as its shortest decimal
    assert tf_schema["DebugNumericSummary"].attr("lower_bound").default == -math.inf
    assert tf_schema["While"].attr("body").type == "tf.func" and tf_schema["While"].attr("body").required
    assert tf_schema["While"].attr("output_shapes").default == []
    bad_color = tf_schema["ImageSummary"].attr("bad_color").default
    assert isinstance(bad_color, Tensor) and bad_color.dtype == "uint8"
    np.testing.assert_array_equal(bad_color.numpy(), [255, 0, 0, 255])
    d = tf_schema["DefaultAttrs"]  # TensorFlow's op with a default of every kind
    assert d.attr("shape_list_val").default == [[], [1]]
    assert d.attr("tensor_val").default == Tensor(np.array(1, dtype=np.int32))
    assert d.attr("tensor_list_val").default == [Tensor(np.array(1, dtype=np.int32))]
    assert d.attr("type_val").default == "int32" and d.attr("type_list_val").default == ["int32", "float32"]
    assert d.attr("string_val").default == "abc"


def test_every_op_schema_is_self_consistent(tf_schema):
    """Every type parses, every default and allowed value passes the tf type system, every port type names a
    type attribute of its op or a dtype, and every count attribute exists."""
    ts = TFTypeSystem()
    for s in tf_schema:
        attrs = {a.name: a for a in s.attrs}
        for a in s.attrs:
            assert a.type.startswith("tf."), (s.type, a.name)
            is_list, base = parse_attr_type(a.type)
            if a.default is not NO_DEFAULT:
                assert ts.check_value(a.type[3:], a.default) is None, (s.type, a.name, a.default)
            if a.allowed_values is not None:
                for v in a.allowed_values:
                    assert ts.check_value(base, v) is None, (s.type, a.name, v)
        for p in s.input_ports + s.output_ports:
            t = p.type[4:-1] if p.type.startswith("Ref(") else p.type
            assert p.type.startswith("Ref(") == bool(p.meta.get("is_ref")), (s.type, p.name)
            if t in attrs:
                assert parse_attr_type(attrs[t].type)[1] == "type", (s.type, p.name)
            else:
                assert is_dtype_name(t), (s.type, p.name, p.type)
            for key in ("number_attr", "type_list_attr"):
                if key in p.meta:
                    assert p.variadic and p.meta[key] in attrs, (s.type, p.name)
        assert set(s.commutative) <= {p.name for p in s.input_ports}


KNOWN_CORE_FLOAT_ISSUE = {"ApproximateEqual", "QuantizedInstanceNorm"}  # defaults written 1e-05, see below


def test_op_schemas_survive_the_dict_form(tf_schema):
    for s in tf_schema:
        if s.type in KNOWN_CORE_FLOAT_ISSUE:
            continue
        assert op_schema_from_dict(op_schema_to_dict(s)) == s, s.type


def test_exponent_float_default_survives_the_dict_form(tf_schema):
    s = tf_schema["ApproximateEqual"]
    assert op_schema_from_dict(op_schema_to_dict(s)) == s


def test_tensor_default_dumps_to_yaml(tf_schema):
    text = dump_schema(tf_schema["ImageSummary"])
    assert "bad_color" in text and "!tensor" in text
    assert load_schema(dump_schema(tf_schema))["ImageSummary"] == tf_schema["ImageSummary"]


# --------------------------------------------------------------------------- validation


def seed_graph(version: str) -> Graph:
    """The TensorFlow single-layer graph of examples/seed/tf_single_layer.yaml, in the installed namespace."""
    g = Graph(f"amanda/tensorflow/{version}", {"versions": {"producer": 27}})
    ph = g.add_op("Placeholder", "Placeholder", attrs={"shape": [1, 784], "dtype": "float32"},
                  outputs=[("output", "float32")])
    kernel = g.add_op("VariableV2", "dense/kernel", attrs={"shape": [784, 10], "dtype": "float32", "container": "",
                                                           "shared_name": ""}, outputs=[("ref", "float32_ref")])
    mm = g.add_op("MatMul", "dense/MatMul", attrs={"T": "float32", "transpose_a": False, "transpose_b": False},
                  inputs=[("a", "float32"), ("b", "float32")], outputs=[("product", "float32")])
    relu = g.add_op("Relu", "dense/Relu", attrs={"T": "float32"}, inputs=[("features", "float32")],
                    outputs=[("activations", "float32")])
    g.connect(ph.output_ports["output"], mm.input_ports["a"])
    g.connect(kernel.output_ports["ref"], mm.input_ports["b"])
    g.connect(mm.output_ports["product"], relu.input_ports["features"])
    return g


def test_seed_graph_validates(tf_registry, tf_version):
    assert validate(seed_graph(tf_version), tf_registry.namespaces) == []


def test_invalid_seed_graph_reports_every_problem(tf_registry, tf_version):
    g = Graph(f"amanda/tensorflow/{tf_version}")
    ph = g.add_op("Placeholder", "Placeholder", attrs={"shape": [1, 784], "dtype": "float32", "shapes": [1]},
                  outputs=[("output", "float32")])
    kernel = g.add_op("VariableV2", "dense/kernel", attrs={"dtype": "float32", "container": 0},
                      outputs=[("ref", "float32")])
    mm = g.add_op("MatMul", "dense/MatMul", attrs={"T": "string", "transpose_a": "no"},
                  inputs=[("a", "float32"), ("b", "float32")], outputs=[("product", "float32")])
    g.add_op("Relu", "dense/Relu", attrs={"T": "float32"}, outputs=[("activations", "float32")])
    g.connect(ph.output_ports["output"], mm.input_ports["a"])
    g.connect(kernel.output_ports["ref"], mm.input_ports["b"])
    problems = validate(g, tf_registry.namespaces)
    found = [(p.op, p.message) for p in problems]
    expected = [
        ("Placeholder", "unknown attribute 'shapes'"),  # unknown attr (with a hint)
        ("dense/kernel", "missing required attribute 'shape'"),
        ("dense/kernel", "attribute 'container': expected a string"),  # wrong attr type
        ("dense/kernel", "port 'ref': expects a reference"),
        ("dense/MatMul", "attribute 'T' = 'string' is not one of"),  # dtype not in allowed values
        ("dense/MatMul", "attribute 'transpose_a': expected a bool"),
        ("dense/MatMul", "port 'product': dtype float32 does not match attribute T = string"),
        ("dense/Relu", "missing input port 'features'"),  # missing port
    ]
    for op, text in expected:
        assert any(o == op and text in m for o, m in found), (op, text, found)
    assert all(p.op and p.severity == "error" for p in problems)
    assert len(problems) == len(expected) + 2  # MatMul's ports a and b disagree with T as well
    assert "did you mean 'shape'" in next(m for o, m in found if "shapes" in m)


def test_port_dtypes_are_checked_against_type_attrs(tf_registry, tf_version):
    g = Graph(f"amanda/tensorflow/{tf_version}")
    c = g.add_op("ConcatV2", "concat", attrs={"N": 2, "T": "float32"},
                 inputs=[("values_0", "float32"), ("values_1", "int32[2,3]"), ("axis", "int32")],
                 outputs=[("output", "float32")])
    assert c is not None
    msgs = [p.message for p in validate(g, tf_registry.namespaces)]
    assert msgs == ["port 'values_1': dtype int32[2,3] does not match attribute T = float32"]
    g2 = Graph(f"amanda/tensorflow/{tf_version}")
    g2.add_op("ConcatV2", "concat", attrs={"N": 1, "T": "float32"}, inputs=[("values_0", "float32"), "axis"],
              outputs=["output"])
    assert [p.message for p in validate(g2, tf_registry.namespaces)] == [
        "needs at least 2 input port(s) values_<i>, has 1"]


# --------------------------------------------------------------------------- namespace, cache, errors


def test_plugin_registers_the_namespace_and_type_system(tf_registry, tf_version):
    reg = tf_registry.namespaces
    assert ("amanda/tensorflow/" + tf_version, "amanda-tf") in reg.namespaces()
    assert reg.resolve("amanda/tensorflow") == f"amanda/tensorflow/{tf_version}"
    assert isinstance(tf_registry.type_systems["tf"], TFTypeSystem)
    assert reg.schema("amanda/tensorflow")["MatMul"] is not None


def test_other_versions_have_no_schema(tf_registry, tf_version):
    with pytest.raises(NamespaceError, match=f"has version\\(s\\) {tf_version}"):
        tf_registry.namespaces.schema("amanda/tensorflow/1.13.1")
    with pytest.raises(NamespaceError, match=f"installed TensorFlow, which is {tf_version}"):
        TensorFlowNamespaces().schema("1.13.1")


def test_missing_tensorflow_says_how_to_install():
    provider = TensorFlowNamespaces(distributions=("amanda-test-no-such-tensorflow",))
    assert provider.versions() == []
    with pytest.raises(TensorFlowMissingError, match=r"pip install amanda-tf\[cpu\]"):
        provider.schema(None)
    reg = NamespaceRegistry(TypeSystemRegistry([TFTypeSystem()]))
    reg.add(provider, "amanda-tf")
    assert reg.namespaces() == [("amanda/tensorflow", "amanda-tf")]
    with pytest.raises(NamespaceError, match=r"not installed; install it with `pip install amanda-tf\[cpu\]`"):
        reg.schema("amanda/tensorflow")


def test_broken_tensorflow_is_reported(monkeypatch, tmp_path, tf_version):
    monkeypatch.setenv("AMANDA_CACHE_DIR", str(tmp_path))
    monkeypatch.setitem(sys.modules, "tensorflow", None)
    with pytest.raises(TensorFlowMissingError, match=f"TensorFlow {tf_version} .* is installed but cannot be imported"):
        TensorFlowNamespaces().schema(None)
    assert list(tmp_path.iterdir()) == []


def test_schema_is_cached_under_version_and_generator(tf_schema, tf_cache_dir, tf_version):
    name = cache_key(tf_version) + ".json"
    assert tf_version in name and f"gen{GENERATOR_VERSION}" in name
    with open(os.path.join(tf_cache_dir, name), encoding="utf-8") as f:
        data = json.load(f)
    assert data["generator"] == GENERATOR_VERSION and data["tensorflow_version"] == tf_version
    assert len(data["ops"]) == len(tf_schema)


def test_foreign_cache_file_is_not_trusted(monkeypatch, tmp_path, tf_schema, tf_version):
    monkeypatch.setenv("AMANDA_CACHE_DIR", str(tmp_path))
    (tmp_path / f"{cache_key(tf_version)}.json").write_text(json.dumps({"ops": [], "generator": "0"}))
    data = load_schema_data(tf_version)
    assert len(data["ops"]) == len(tf_schema)


WARM = textwrap.dedent("""
    import json, sys, time
    t0 = time.perf_counter()
    from amanda_core.plugin.manager import registry
    reg = registry().namespaces
    names = [n for n, _ in reg.namespaces()]
    t1 = time.perf_counter()
    ops = len(reg.schema("amanda/tensorflow")) if "--schema" in sys.argv else None
    t2 = time.perf_counter()
    print(json.dumps({"names": names, "ops": ops, "tensorflow_imported": "tensorflow" in sys.modules,
                      "list_seconds": t1 - t0, "schema_seconds": t2 - t1}))
""")


def _run(code: str, cache_dir: str, *args: str) -> dict:
    env = dict(os.environ, AMANDA_CACHE_DIR=cache_dir, AMANDA_PLUGINS="amanda-tf")
    env.pop("AMANDA_DISABLE_PLUGIN_AUTOLOAD", None)
    env.pop("AMANDA_NO_CACHE", None)
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_warm_cache_needs_no_tensorflow(tf_schema, tf_cache_dir, tf_version):
    result = _run(WARM, tf_cache_dir, "--schema")
    assert f"amanda/tensorflow/{tf_version}" in result["names"]
    assert result["ops"] == len(tf_schema)
    assert result["tensorflow_imported"] is False


def test_listing_needs_no_tensorflow_even_cold(tmp_path, tf_version):
    result = _run(WARM, str(tmp_path))
    assert f"amanda/tensorflow/{tf_version}" in result["names"]
    assert result["tensorflow_imported"] is False
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- CLI


@pytest.fixture
def only_amanda_tf(monkeypatch, tf_schema):
    """The process-wide plugin manager, loading the installed amanda-tf entry point only."""
    monkeypatch.setenv("AMANDA_PLUGINS", "amanda-tf")
    monkeypatch.delenv("AMANDA_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    manager.reset()
    yield
    manager.reset()


def test_cli_prints_an_op_schema(only_amanda_tf, capsys):
    assert main(["schema", "amanda/tensorflow", "MatMul"]) == 0
    out = capsys.readouterr().out
    assert "type: MatMul" in out and "transpose_a: tf.bool = false" in out and "- product: T" in out


def test_cli_lists_the_namespace(only_amanda_tf, capsys, tf_version):
    assert main(["namespaces"]) == 0
    assert f"amanda/tensorflow/{tf_version}" in capsys.readouterr().out


def test_metadata_and_module_must_agree(monkeypatch, tf_version):
    import tensorflow as tf

    from amanda_tf.schema import generate

    monkeypatch.setattr(tf, "__version__", "1.13.1")
    with pytest.raises(NamespaceError, match=f"metadata says {tf_version} but the module that imports is 1.13.1"):
        generate(tf_version)


def test_version_comes_from_metadata_without_local_label(monkeypatch, tmp_path, tf_version):
    info = tmp_path / "site" / "amanda_test_fake_tf-2.99.0+cu999.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: amanda-test-fake-tf\nVersion: 2.99.0+cu999\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("AMANDA_CACHE_DIR", str(tmp_path / "cache"))
    provider = TensorFlowNamespaces(distributions=("amanda-test-fake-tf",))
    assert provider.installed() == ("amanda-test-fake-tf", "2.99.0")
    assert provider.versions() == ["2.99.0"]
    # the module that imports is the real release, so nothing is generated or cached under 2.99.0
    with pytest.raises(NamespaceError, match=f"metadata says 2.99.0 but the module that imports is {tf_version}"):
        provider.schema("2.99.0")
    assert not (tmp_path / "cache").exists() or list((tmp_path / "cache").iterdir()) == []


def test_import_tensorflow_errors(monkeypatch):
    from amanda_tf.framework import import_tensorflow, normalize_version

    monkeypatch.setitem(sys.modules, "tensorflow", None)
    with pytest.raises(TensorFlowMissingError, match=r"^TensorFlow is not installed; install it with `pip install "
                                                     r"amanda-tf\[cpu\]`"):
        import_tensorflow(("amanda-test-no-such-tensorflow",))
    assert normalize_version("2.21.0+cpu") == "2.21.0" and normalize_version("2.22.0.dev20250101") == (
        "2.22.0.dev20250101")
    assert normalize_version("nightly+x") == "nightly"
