"""The mapping examples (docs/mapping-tables.md, "The design's examples") read TorchScript dtypes through
the torch type system: its expression ``op.output_ports["out0"].dtype.scalarType()`` works on what the plugin parses."""

from pathlib import Path

from amanda_core.mapping import apply_table, load_table
from amanda_core.namespace import NamespaceRegistry, PythonTypeSystem, TypeSystemRegistry, load_schema
from amanda_core.serialization import load_graph
from amanda_torch.types import TorchTypeSystem

ROOT = Path(__file__).resolve().parents[3]


def test_seed_matmul_rule_reads_the_scalar_type_with_the_torch_type_system():
    reg = NamespaceRegistry(TypeSystemRegistry([PythonTypeSystem(), TorchTypeSystem()]))
    reg.add_schema(load_schema(ROOT / "examples" / "schemas" / "pytorch-1.4.0.yaml"))
    graph = load_graph(ROOT / "examples" / "seed" / "pytorch_single_layer.yaml")
    graph.ops["matmul"].output_ports["out0"].dtype = "Double(1, 100, strides=[100, 1], requires_grad=0, device=cpu)"
    table = load_table(ROOT / "examples" / "seed" / "tables" / "convert_matmul.yaml", trusted=True)
    report = apply_table(graph, table, reg, dst="amanda/tensorflow/1.13.1")
    assert report.rules[0].matches == 1
    assert graph.ops["dense/MatMul"].attrs == {"T": "float64"}


def test_the_installed_namespace_takes_the_seed_graph_by_range():
    from amanda_core.plugin import registry

    reg = registry().namespaces
    graph = load_graph(ROOT / "examples" / "seed" / "pytorch_single_layer.yaml")
    from amanda_core.namespace import validate

    ns = reg.resolve("amanda/pytorch")
    assert [p for p in validate(graph, reg, ns) if p.severity == "error"] == []
