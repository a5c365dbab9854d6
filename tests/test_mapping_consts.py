"""Constant inputs in mapping rules: ``consts:`` in matchers (read a constant op's value, or a port's schema default)
and in mappers (feed a port from a new constant op of the target family); constants left unread are swept."""

from __future__ import annotations

from typing import Any

import pytest

from amanda_core import Graph
from amanda_core.mapping import apply_table, table_from_dict
from amanda_core.namespace import NamespaceRegistry, load_schema
from amanda_core.namespace.registry import NOT_CONSTANT, ConstantOp, StaticNamespaces

from .mapping_support import OTHER, TOY, registry


class ToyNamespaces(StaticNamespaces):
    """The toy family: ``Const`` ops are constants."""

    def constant_value(self, op: Any) -> Any:
        return op.attrs.get("value") if op.type == "Const" else NOT_CONSTANT

    def make_constant(self, value: Any, version: str | None) -> ConstantOp:
        return ConstantOp("Const", {"value": value}, "y")


class OtherNamespaces(StaticNamespaces):
    """The other family: ``Constant`` ops are constants."""

    def constant_value(self, op: Any) -> Any:
        return op.attrs.get("value") if op.type == "Constant" else NOT_CONSTANT

    def make_constant(self, value: Any, version: str | None) -> ConstantOp:
        return ConstantOp("Constant", {"value": value}, "output")


def reg_with_constants() -> NamespaceRegistry:
    reg = registry()
    fresh = NamespaceRegistry(reg.type_systems)
    fresh.add(ToyNamespaces([load_schema(TOY.format(v=v)) for v in (1, 2)]))
    fresh.add(OtherNamespaces([load_schema(OTHER)]))
    return fresh


def table(rules: dict[str, Any], src: str = "amanda/toy/1", dst: str = "amanda/other/1") -> Any:
    return table_from_dict({"table": {"name": "t", "src": src, "dst": dst, "rules": rules}})


def graph_with_split(split: Any = "const") -> Graph:
    """x -> Split(x, split) -> two outputs, ``split`` fed by a Const (or by x itself, or absent)."""
    g = Graph("amanda/toy/1")
    x = g.add_input_port("x")
    inputs = ["x"] if split is None else ["x", "split"]
    s = g.add_op("Split", "s", inputs=inputs, outputs=["outputs_0", "outputs_1"], attrs={"axis": 1})
    g.connect(x, s.input_ports["x"])
    if split == "const":
        c = g.add_op("Const", "sizes", attrs={"value": [2, 3]}, outputs=["y"])
        g.connect(c.output_ports["y"], s.input_ports["split"])
    elif split == "input":
        g.connect(x, s.input_ports["split"])
    g.connect(s.output_ports["outputs_0"], g.add_output_port("a"))
    g.connect(s.output_ports["outputs_1"], g.add_output_port("b"))
    return g


def test_a_matcher_reads_a_constant_input_and_the_unread_constant_is_swept():
    g = Graph("amanda/toy/1")
    x = g.add_input_port("x")
    c = g.add_op("Const", "c", attrs={"value": 3}, outputs=["y"])
    add = g.add_op("Add", "add", inputs=["a", "b"], outputs=["y"])
    g.connect(x, add.input_ports["a"])
    g.connect(c.output_ports["y"], add.input_ports["b"])
    g.connect(add.output_ports["y"], g.add_output_port("out"))
    t = table({"add_const": {
        "src": {"ops": {"$add": {"type": "Add", "consts": {"b": "$k"}}}},
        "dst": {"ops": {"$add": {"type": "Permute", "attrs": {"dims": "${[k, k]}"}, "input_ports": ["input"]}}},
    }})
    report = apply_table(g, t, reg_with_constants())
    assert report.rules[0].matches == 1
    assert set(g.ops) == {"add"}
    assert g.ops["add"].type == "Permute" and g.ops["add"].attrs == {"dims": [3, 3]}
    assert g.ops["add"].input_ports.names() == ["input"]
    assert g.ops["add"].input_ports["input"].source is g.input_ports["x"]
    assert g.namespace == "amanda/other/1"
    assert report.rules[0].removed == 1  # the swept constant


def test_an_absent_port_reads_its_schema_default_and_a_port_fed_by_no_constant_does_not_match():
    rules = {"split": {
        "src": {"ops": {"$s": {"type": "Split", "consts": {"split": "$sizes"}}}},
        "dst": {"ops": {"$s": {"meta": {"sizes": "$sizes"}}}},
    }}
    reg = reg_with_constants()
    g = graph_with_split("const")
    assert apply_table(g, table(rules), reg).rules[0].matches == 1
    assert g.ops["s"].meta["sizes"] == [2, 3]
    assert "sizes" in g.ops  # the op keeps its type and its input: the constant is still read
    g = graph_with_split(None)
    assert apply_table(g, table(rules), reg).rules[0].matches == 1
    assert g.ops["s"].meta["sizes"] is None  # the schema gives `split?` no default
    g = graph_with_split("input")
    assert apply_table(g, table(rules), reg).rules[0].matches == 0
    assert g.ops["s"].type == "Split"


def test_a_literal_or_a_condition_on_a_constant_input():
    reg = reg_with_constants()
    for cond, hits in (([2, 3], 1), ([3, 2], 0), ("${value[0] == 2}", 1), ("${len(value) > 2}", 0)):
        g = graph_with_split("const")
        t = table({"r": {"src": {"ops": {"$s": {"type": "Split", "consts": {"split": cond}}}},
                         "dst": {"ops": {"$s": {}}}}})
        assert apply_table(g, t, reg).rules[0].matches == hits, cond


def test_a_mapper_feeds_a_port_from_a_new_constant_of_the_target_family():
    g = Graph("amanda/toy/1")
    x = g.add_input_port("x")
    relu = g.add_op("Relu", "relu", inputs=["x"], outputs=["y"])
    g.connect(x, relu.input_ports["x"])
    g.connect(relu.output_ports["y"], g.add_output_port("out"))
    t = table({"relu_as_add": {
        "src": {"ops": {"$relu": {"type": "Relu"}}},
        "dst": {"ops": {"add": {"type": "AddV2", "consts": {"y": 0.5}}},
                "edges": ["$relu.x -> add.x", "add.z -> $relu.y"]},
    }})
    apply_table(g, t, reg_with_constants())
    add = g.ops["add"]
    assert add.input_ports.names() == ["x", "y"]
    const = add.input_ports["y"].source.op
    assert const.type == "Constant" and const.attrs == {"value": 0.5}
    assert const.provenance == ("t", "relu_as_add")
    assert g.namespace == "amanda/other/1"


def test_a_new_const_port_goes_to_its_schema_slot_and_none_leaves_it_unfed():
    reg = reg_with_constants()
    g = graph_with_split(None)
    t = table({"r": {"src": {"ops": {"$s": {"type": "Split"}}},
                     "dst": {"ops": {"$s": {"consts": {"split": [1, 4]}}}}}}, dst="amanda/toy/2")
    apply_table(g, t, reg)
    s = g.ops["s"]
    assert s.input_ports.names()[:2] == ["x", "split"]
    assert s.input_ports["split"].source.op.attrs == {"value": [1, 4]}
    g = graph_with_split("const")
    t = table({"r": {"src": {"ops": {"$s": {"type": "Split"}}},
                     "dst": {"ops": {"$s": {"consts": {"split": None}}}}}}, dst="amanda/toy/2")
    apply_table(g, t, reg)
    assert g.ops["s"].input_ports["split"].source is None
    assert "sizes" not in g.ops  # unread now: swept


def test_a_constant_that_others_still_read_is_not_swept():
    g = graph_with_split("const")
    relu = g.add_op("Relu", "r2", inputs=["x"], outputs=["y"])
    g.connect(g.ops["sizes"].output_ports["y"], relu.input_ports["x"])
    g.connect(relu.output_ports["y"], g.add_output_port("c"))
    t = table({"r": {"src": {"ops": {"$s": {"type": "Split", "consts": {"split": "$k"}}}},
                     "dst": {"ops": {"$s": {"consts": {"split": None}}}}}}, dst="amanda/toy/2")
    apply_table(g, t, reg_with_constants())
    assert g.ops["s"].input_ports["split"].source is None
    assert "sizes" in g.ops
    assert [c.op.name for c in g.ops["sizes"].output_ports["y"].consumers] == ["r2"]


def test_consts_are_refused_where_they_do_not_belong():
    from amanda_core.mapping import TableError

    with pytest.raises(TableError, match="consts must be a mapping"):
        table({"r": {"src": {"ops": {"$s": {"type": "Split", "consts": ["split"]}}}, "dst": {"remove": True}}})


THIRD = """
namespace_schema:
  namespace: amanda/third/1
  default_type_system: python
  op_schemas:
    - type: Split
      input_ports: [x]
      output_ports: [outputs+]
    - type: Const
      attrs: {value: Any}
      output_ports: [y]
"""


class ThirdNamespaces(ToyNamespaces):
    pass


def test_an_op_that_keeps_its_type_across_families_drops_what_the_target_lacks():
    """A Split of the toy family becomes the third family's Split, which has no `split` input and no `axis`
    attribute: the input read under consts goes (its constant is swept), and so do the source's attributes."""
    reg = reg_with_constants()
    reg.add(ThirdNamespaces([load_schema(THIRD)]))
    g = graph_with_split("const")
    t = table({"r": {"src": {"ops": {"$s": {"type": "Split", "consts": {"split": [2, 3]}}}},
                     "dst": {"ops": {"$s": {"type": "Split"}}}}}, dst="amanda/third/1")
    apply_table(g, t, reg)
    s = g.ops["s"]
    assert s.input_ports.names() == ["x"] and s.attrs == {}
    assert "sizes" not in g.ops
    g = graph_with_split("const")  # within a family the same rule keeps both
    t = table({"r": {"src": {"ops": {"$s": {"type": "Split", "consts": {"split": [2, 3]}}}},
                     "dst": {"ops": {"$s": {"type": "Split"}}}}}, dst="amanda/toy/2")
    apply_table(g, t, reg)
    assert g.ops["s"].input_ports.names() == ["x", "split"] and g.ops["s"].attrs == {"axis": 1}
