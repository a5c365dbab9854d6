from pathlib import Path

import pytest

from amanda_core import Graph
from amanda_core.errors import NamespaceError
from amanda_core.namespace import (
    NamespaceRegistry,
    PythonTypeSystem,
    TypeSystem,
    TypeSystemRegistry,
    fill_defaults,
    load_schema,
    validate,
)

from .test_ir_graph import seed_torch_graph

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "schemas"


class MiniTF(TypeSystem):
    """Just enough of a ``tf`` type system for examples/schemas/tensorflow-1.13.1.yaml."""

    name = "tf"

    def check_value(self, type_expr, value):
        if type_expr == "DType":
            return None if value in ("float32", "float64", "int32") else f"not a dtype: {value!r}"
        if type_expr == "TensorShape":
            ok = value is None or (isinstance(value, list) and all(isinstance(d, int) for d in value))
            return None if ok else f"not a shape: {value!r}"
        return f"unknown tf type {type_expr}"


@pytest.fixture
def registry():
    reg = NamespaceRegistry(TypeSystemRegistry([PythonTypeSystem(), MiniTF()]))
    reg.add_schema(load_schema(EXAMPLES / "tensorflow-1.13.1.yaml"))
    reg.add_schema(load_schema(EXAMPLES / "pytorch-1.4.0.yaml"))
    return reg


def seed_tf_graph() -> Graph:
    g = Graph("amanda/tensorflow/1.13.1", {"versions": {"producer": 27}})
    ph = g.add_op("Placeholder", "Placeholder", attrs={"shape": [1, 784], "dtype": "float32"},
                  outputs=[("output", "float32")])
    k = g.add_op("VariableV2", "dense/kernel", attrs={"shape": [784, 10], "dtype": "float32", "container": "",
                                                      "shared_name": ""}, outputs=[("ref", "float32_ref")])
    mm = g.add_op("MatMul", "dense/MatMul", attrs={"T": "float32", "transpose_a": False, "transpose_b": False},
                  inputs=[("a", "float32"), ("b", "float32")], outputs=[("product", "float32")])
    r = g.add_op("Relu", "dense/Relu", attrs={"T": "float32"}, inputs=[("features", "float32")],
                 outputs=[("activations", "float32")])
    g.connect(ph.output_ports["output"], mm.input_ports["a"])
    g.connect(k.output_ports["ref"], mm.input_ports["b"])
    g.connect(mm.output_ports["product"], r.input_ports["features"])
    return g


def test_seed_graphs_validate_against_seed_schemas(registry):
    assert validate(seed_tf_graph(), registry) == []
    assert validate(seed_torch_graph(), registry) == []


def test_every_problem_reported_with_op_names(registry):
    g = seed_tf_graph()
    mm = g.ops["dense/MatMul"]
    mm.attrs["transpose_c"] = True          # unknown attribute
    mm.attrs["transpose_a"] = "yes"          # wrong type
    del g.ops["dense/Relu"].attrs["T"]       # missing required attribute
    mm.add_input_port("c")                   # unknown port
    g.add_op("Conv2D", "conv")               # unknown op type
    g.ops["Placeholder"].attrs["shape"] = "1x784"
    problems = [str(p) for p in validate(g, registry)]
    text = "\n".join(problems)
    assert "op 'dense/MatMul' (MatMul): unknown attribute 'transpose_c'" in text
    assert "did you mean 'transpose_" in text
    assert "op 'dense/MatMul' (MatMul): attribute 'transpose_a': expected bool" in text
    assert "op 'dense/Relu' (Relu): missing required attribute 'T'" in text
    assert "op 'dense/MatMul' (MatMul): unknown input port 'c'" in text
    assert "op 'conv' (Conv2D): unknown op type 'Conv2D'" in text
    assert "op 'Placeholder' (Placeholder): attribute 'shape': not a shape" in text
    assert len(problems) == 6


def test_port_counts_checked_positionally(registry):
    g = seed_torch_graph()
    g.ops["relu"].add_input_port()           # in1: relu takes one input
    extra = g.add_op("aten::t", inputs=0, outputs=1)
    problems = [str(p) for p in validate(g, registry)]
    assert any("op 'relu' (aten::relu): has input port 'in1' but the schema allows at most 1" in p for p in problems)
    assert any(f"op '{extra.name}' (aten::t): missing input port 'in0'" in p for p in problems)


def test_namespace_override_and_unknown_namespace(registry):
    g = seed_tf_graph()
    problems = validate(g, registry, "amanda/pytorch/1.4.0")
    assert any("unknown op type 'MatMul'" in str(p) for p in problems)
    g.namespace = "amanda/tensorflow/9.9"
    problems = validate(g, registry)
    assert len(problems) == 1 and "not registered" in str(problems[0])
    with pytest.raises(NamespaceError, match="1.13.1"):
        registry.resolve("amanda/tensorflow/9.9")


def test_fill_defaults(registry):
    g = seed_tf_graph()
    g.ops["dense/kernel"].del_attr("container")
    g.ops["dense/MatMul"].del_attr("transpose_b")
    version = g.version
    assert fill_defaults(g, registry) == []
    assert g.ops["dense/kernel"].attrs["container"] == ""
    assert g.ops["dense/MatMul"].attrs["transpose_b"] is False
    assert g.version > version  # the defaults went in through the IR: caches keyed on the version see them


def test_composite_op_without_schema_is_a_warning_and_body_is_checked(registry):
    g = seed_tf_graph()
    fc = g.make_subgraph([g.ops["dense/MatMul"], g.ops["dense/Relu"]], "fc", "Dense",
                         attrs={"units": 10})
    fc.body.ops["dense/Relu"].attrs["T"] = 5
    problems = validate(g, registry)
    assert [p.severity for p in problems] == ["warning", "error"]
    assert "composite op" in str(problems[0])
    assert "op 'fc/dense/Relu' (Relu): attribute 'T'" in str(problems[1])


def test_structural_problems_included(registry):
    g = seed_tf_graph()
    g.connect(g.ops["dense/Relu"].output_ports[0], g.ops["dense/MatMul"].input_ports["a"], replace=True)
    assert any("cycle" in str(p) for p in validate(g, registry))


def test_unregistered_type_system_is_reported(registry):
    reg = NamespaceRegistry(TypeSystemRegistry([PythonTypeSystem()]))
    reg.add_schema(load_schema(EXAMPLES / "tensorflow-1.13.1.yaml"))
    problems = validate(seed_tf_graph(), reg)
    assert problems and all("unregistered type system" in str(p) for p in problems)
