"""Conversions between families: tables written in parts (``part_of``) merge into one table, and port types move
to the target family's type system when ops change family."""

from __future__ import annotations

import re
from typing import Any

import pytest

from amanda_core import Graph
from amanda_core.mapping import TableError, apply_table, load_table, merge_parts, table_from_dict
from amanda_core.namespace import NamespaceRegistry, PythonTypeSystem, TypeSystem, TypeSystemRegistry, load_schema

from .mapping_support import OTHER, TOY


class Bracket(TypeSystem):
    """Types written ``f32[2,N]`` (the toy family's)."""

    name = "bracket"

    def tensor_type(self, dtype: Any) -> Any:
        m = re.fullmatch(r"(f32|i64)\[(.*)\]", str(dtype))
        if m is None:
            return None
        dims = tuple(int(d) if d.isdigit() else (None if d == "?" else d) for d in m.group(2).split(",") if d)
        return {"f32": "float32", "i64": "int64"}[m.group(1)], dims

    def make_tensor_type(self, elem: str, shape: Any) -> Any:
        code = {"float32": "f32", "int64": "i64"}.get(elem)
        if code is None or shape is None:
            return None
        return f"{code}[{','.join('?' if d is None else str(d) for d in shape)}]"


class Paren(TypeSystem):
    """Types written ``Float(2, N)`` (the other family's)."""

    name = "paren"

    def tensor_type(self, dtype: Any) -> Any:
        m = re.fullmatch(r"(Float|Long)\((.*)\)", str(dtype))
        if m is None:
            return None
        dims = tuple(int(d) if d.strip().isdigit() else d.strip() for d in m.group(2).split(",") if d.strip())
        return {"Float": "float32", "Long": "int64"}[m.group(1)], dims

    def make_tensor_type(self, elem: str, shape: Any) -> Any:
        code = {"float32": "Float", "int64": "Long"}.get(elem)
        if code is None or shape is None:
            return None
        return f"{code}({', '.join('*' if d is None else str(d) for d in shape)})"


def reg() -> NamespaceRegistry:
    r = NamespaceRegistry(TypeSystemRegistry([PythonTypeSystem(), Bracket(), Paren()]))
    toy = load_schema(TOY.format(v=1))
    toy.meta["dtype_type_system"] = "bracket"
    other = load_schema(OTHER)
    other.meta["dtype_type_system"] = "paren"
    r.add_schema(toy)
    r.add_schema(other)
    return r


RELU = {"relu": {"src": {"ops": {"$r": {"type": "Relu"}}}, "dst": {"ops": {"$r": {"type": "ReLU"}}}}}


def relu_graph() -> Graph:
    g = Graph("amanda/toy/1")
    x = g.add_input_port("x", "f32[N,3]")
    r = g.add_op("Relu", "r", inputs=["x"], outputs=[("y", "f32[N,3]")])
    g.connect(x, r.input_ports["x"])
    g.connect(r.output_ports["y"], g.add_output_port("out", "f32[N,3]"))
    return g


def test_port_types_move_to_the_target_family_with_their_shapes():
    g = relu_graph()
    t = table_from_dict({"table": {"name": "t", "src": "amanda/toy/1", "dst": "amanda/other/1", "rules": RELU}})
    apply_table(g, t, reg())
    assert g.namespace == "amanda/other/1"
    assert g.input_ports["x"].dtype == "Float(N, 3)"
    assert g.ops["r"].output_ports[0].dtype == "Float(N, 3)"
    assert g.output_ports["out"].dtype == "Float(N, 3)"


def test_a_type_the_target_cannot_say_is_dropped_and_one_it_reads_is_kept():
    g = relu_graph()
    g.ops["r"].output_ports[0].dtype = "f32[?,3]"  # unknown dim: None both ways
    g.input_ports["x"].dtype = "Float(2, 3)"  # already the target's
    g.output_ports["out"].dtype = "opaque-thing"
    t = table_from_dict({"table": {"name": "t", "src": "amanda/toy/1", "dst": "amanda/other/1", "rules": RELU}})
    apply_table(g, t, reg())
    assert g.ops["r"].output_ports[0].dtype == "Float(*, 3)"
    assert g.input_ports["x"].dtype == "Float(2, 3)"
    assert g.output_ports["out"].dtype is None


def test_port_types_stay_within_a_family():
    g = relu_graph()
    toy2 = table_from_dict({"table": {"name": "t", "src": "amanda/toy/1", "dst": "amanda/toy/1", "rules": {
        "relu": {"src": {"ops": {"$r": {"type": "Relu"}}}, "dst": {"ops": {"$r": {"attrs": {}}}}}}}})
    apply_table(g, toy2, reg())
    assert g.ops["r"].output_ports[0].dtype == "f32[N,3]"


PART_A = """
table:
  name: a
  part_of: toy-to-other
  src: amanda/toy/1
  dst: amanda/other/1
  rules:
    relu:
      src: {ops: {$r: {type: Relu}}}
      dst: {ops: {$r: {type: ReLU}}}
"""

PART_B = """
table:
  name: b
  part_of: toy-to-other
  src: amanda/toy/1
  dst: amanda/other/1
  rules:
    add:
      apply_after: [relu]
      src: {ops: {$a: {type: Add}}}
      dst: {ops: {$a: {type: AddV2}}}
"""


def test_parts_merge_into_one_table_whose_rules_may_order_across_parts(tmp_path):
    (tmp_path / "a.yaml").write_text(PART_A)
    (tmp_path / "b.yaml").write_text(PART_B)
    lone = table_from_dict({"table": {"name": "lone", "src": "amanda/toy/1", "dst": "amanda/toy/1", "rules": {
        "relu": {"src": {"ops": {"$r": {"type": "Relu"}}}, "dst": {"ops": {"$r": {}}}}}}})
    parts = [load_table(tmp_path / "a.yaml"), lone, load_table(tmp_path / "b.yaml")]
    merged = merge_parts(parts)
    assert [t.name for t in merged] == ["toy-to-other", "lone"]
    assert list(merged[0].rules) == ["relu", "add"]
    assert [r.name for r in merged[0].ordered_rules()] == ["relu", "add"]
    g = relu_graph()
    add = g.add_op("Add", "add", inputs=["a", "b"], outputs=["y"])
    g.connect(g.ops["r"].output_ports[0], add.input_ports["a"])
    g.connect(g.input_ports["x"], add.input_ports["b"])
    g.connect(add.output_ports["y"], g.add_output_port("sum"))
    report = apply_table(g, merged[0], reg())
    assert [(r.rule, r.matches) for r in report.rules] == [("relu", 1), ("add", 1)]
    assert g.ops["add"].provenance == ("toy-to-other", "add")


def test_parts_that_disagree_or_repeat_a_rule_are_refused(tmp_path):
    (tmp_path / "a.yaml").write_text(PART_A)
    (tmp_path / "c.yaml").write_text(PART_A.replace("name: a", "name: c"))
    (tmp_path / "d.yaml").write_text(PART_B.replace("amanda/other/1", "amanda/toy/1"))
    a = load_table(tmp_path / "a.yaml")
    with pytest.raises(TableError, match="rule 'relu' is also in another part"):
        merge_parts([a, load_table(tmp_path / "c.yaml")])
    with pytest.raises(TableError, match="whose other parts say dst"):
        merge_parts([a, load_table(tmp_path / "d.yaml")])
    with pytest.raises(TableError, match="apply_after names 'relu'"):
        merge_parts([load_table(tmp_path / "d.yaml")])


def test_graph_passes_run_after_the_tables_they_name_and_explain_says_what_they_did():
    from amanda_core.mapping import ConversionError, convert
    from amanda_core.plugin.types import GraphPass

    t = table_from_dict({"table": {"name": "toy-to-other", "src": "amanda/toy/1", "dst": "amanda/other/1",
                                   "rules": RELU}})
    seen = []

    def count(graph: Graph) -> str:
        seen.append((graph.namespace, [op.type for op in graph]))
        return f"{len(graph)} op(s) looked at"

    passes = [GraphPass("count", ("toy-to-other",), count), GraphPass("other", ("no-such-table",), count)]
    result = convert(relu_graph(), "amanda/other/1", [t], reg(), passes=passes)
    assert seen == [("amanda/other/1", ["ReLU"])]  # after its table only, once
    assert result.passes == [(0, "count", "1 op(s) looked at")]
    assert "  then pass count: 1 op(s) looked at" in result.explain()

    def broken(graph: Graph) -> str:
        raise ValueError("bad layout")

    with pytest.raises(ConversionError, match="graph pass 'broken' .after table 'toy-to-other'. failed: ValueError"):
        convert(relu_graph(), "amanda/other/1", [t], reg(), passes=[GraphPass("broken", ("toy-to-other",), broken)])


def test_a_new_op_that_takes_over_a_value_takes_its_type_too():
    """A new op whose output replaces a matched op's (by position, or by a mapper edge) carries the same value, so
    it gets that value's type, written in the target family's system."""
    for dst in ({"ops": {"r2": {"type": "ReLU"}}},
                {"ops": {"r2": {"type": "ReLU"}}, "edges": ["$r.x -> r2.features", "r2.activations -> $r.y"]}):
        g = relu_graph()
        t = table_from_dict({"table": {"name": "t", "src": "amanda/toy/1", "dst": "amanda/other/1", "rules": {
            "relu": {"src": {"ops": {"$r": {"type": "Relu"}}}, "dst": dst}}}})
        apply_table(g, t, reg())
        assert g.ops["r2"].output_ports[0].dtype == "Float(N, 3)", dst


def test_between_families_the_new_family_types_the_values_before_the_next_table_and_in_the_result():
    from amanda_core.mapping import convert

    r = reg()
    r.add_schema(load_schema(TOY.format(v=2)))
    there = table_from_dict({"table": {"name": "there", "src": "amanda/toy/1", "dst": "amanda/other/1",
                                       "rules": RELU}})
    back = table_from_dict({"table": {"name": "back", "src": "amanda/other/1", "dst": "amanda/toy/2", "rules": {
        "relu": {"src": {"ops": {"$r": {"type": "ReLU"}}}, "dst": {"ops": {"$r": {"type": "Relu"}}}}}}})
    calls = []

    def infer(graph: Graph, namespace: str) -> int:
        calls.append((namespace, graph.ops["r"].type))
        return 1

    result = convert(relu_graph(), "amanda/toy/2", [there, back], r, infer=infer)
    # after each table that lands in another family: the last one's types are the result's (a written model
    # states them)
    assert calls == [("amanda/other/1", "ReLU"), ("amanda/toy/2", "Relu")]
    assert (0, "type inference", "1 value type(s) inferred") in result.passes
    assert (1, "type inference", "1 value type(s) inferred") in result.passes
    calls.clear()
    convert(relu_graph(), "amanda/other/1", [there, back], r, infer=infer)
    assert calls == [("amanda/other/1", "ReLU")]


def test_values_a_table_of_the_graphs_own_family_made_are_typed_before_a_table_leaves_the_family():
    """An opset table's decomposition makes values its rules leave untyped: the family's own inference types them
    before the table that leaves the family reads them; a table of the family that rewrote nothing does not."""
    from amanda_core.mapping import convert

    r = reg()
    r.add_schema(load_schema(TOY.format(v=2)))
    up = {"relu": {"src": {"ops": {"$r": {"type": "Relu"}}},
                   "dst": {"ops": {"m": {"type": "Mul"}}, "edges": ["$r.x -> m.a", "$r.x -> m.b", "m.y -> $r.y"]}}}
    newer = table_from_dict({"table": {"name": "newer", "src": "amanda/toy/1", "dst": "amanda/toy/2",
                                       "carry": "unchanged", "rules": up}})
    there = table_from_dict({"table": {"name": "there", "src": "amanda/toy/2", "dst": "amanda/other/1",
                                       "carry": "unchanged", "rules": {}}})
    calls = []

    def infer(graph: Graph, namespace: str) -> int:
        calls.append((namespace, sorted(op.type for op in graph)))
        return 0

    convert(relu_graph(), "amanda/other/1", [newer, there], r, infer=infer, allow_partial=True)
    assert calls == [("amanda/toy/2", ["Mul"]), ("amanda/other/1", ["Mul"])]
    calls.clear()
    g = relu_graph()
    g.ops["r"].type = "Add"  # nothing for the first table to rewrite
    convert(g, "amanda/other/1", [newer, there], r, infer=infer, allow_partial=True)
    assert calls == [("amanda/other/1", ["Add"])]


def _with_swish(v: int) -> Any:
    """The toy namespace at version ``v`` with one op more, ``Swish``, that no older version has."""
    text = TOY.format(v=v).replace("  op_schemas:\n", "  op_schemas:\n    - type: Swish\n      input_ports: [x]\n"
                                   "      output_ports: [y]\n", 1)
    schema = load_schema(text)
    schema.meta["dtype_type_system"] = "bracket"
    return schema


def test_a_table_that_goes_ahead_converts_newer_ops_where_they_stand_and_the_chain_does_the_rest():
    from amanda_core.mapping import ConversionError, convert, plan

    r = reg()
    r.add_schema(_with_swish(2))
    down = table_from_dict({"table": {"name": "down", "src": "amanda/toy/2", "dst": "amanda/toy/1",
                                      "carry": "unchanged", "rules": {}}})
    main = table_from_dict({"table": {"name": "toy-to-other", "src": "amanda/toy/1", "dst": "amanda/other/1",
                                      "rules": RELU}})
    newer = table_from_dict({"table": {"name": "toy-newer-to-other", "src": "amanda/toy/>=2",
                                       "dst": "amanda/other/1", "ahead": True, "rules": {
                                           "swish": {"src": {"ops": {"$s": {"type": "Swish"}}},
                                                     "dst": {"ops": {"$s": {"type": "ReLU"}}}}}}})
    assert newer.ahead and table_from_dict(dump_table_dict(newer)).ahead  # its YAML form keeps it

    def graph() -> Graph:
        g = Graph("amanda/toy/2")
        x = g.add_input_port("x", "f32[N,3]")
        s = g.add_op("Swish", "s", inputs=["x"], outputs=[("y", "f32[N,3]")])
        rl = g.add_op("Relu", "r", inputs=["x"], outputs=[("y", "f32[N,3]")])
        g.connect(x, s.input_ports["x"])
        g.connect(s.output_ports["y"], rl.input_ports["x"])
        g.connect(rl.output_ports["y"], g.add_output_port("out", "f32[N,3]"))
        return g

    # never a chain by itself, though it alone leads from toy/2 to other/1
    assert [s.table.name for s in plan("amanda/toy/2", "amanda/other/1", [newer, down, main], r)] == \
        ["down", "toy-to-other"]
    with pytest.raises(ConversionError, match=r"(?s)1 op\(s\) of 1 type\(s\).*Swish"):
        convert(graph(), "amanda/other/1", [down, main], r)  # without it, Swish has no way down to toy/1
    result = convert(graph(), "amanda/other/1", [down, main, newer], r)
    assert [(s.table.name, s.ahead) for s in result.steps] == \
        [("toy-newer-to-other", True), ("down", False), ("toy-to-other", False)]
    out = result.graph
    assert out.namespace == "amanda/other/1" and all(op.namespace is None for op in out)
    assert sorted(op.type for op in out) == ["ReLU", "ReLU"]
    assert out.ops["s"].output_ports[0].dtype == "Float(N, 3)"  # typed in the target family at once
    assert "table toy-newer-to-other: amanda/toy/2 -> amanda/other/1 (ahead of the chain" in result.explain()
    # a graph at toy/1 is outside the table's src: it does not run
    g1 = relu_graph()
    assert [s.table.name for s in convert(g1, "amanda/other/1", [down, main, newer], r).steps] == ["toy-to-other"]


def test_a_table_that_goes_ahead_says_so_when_something_is_left_and_is_refused_bidirectional():
    from amanda_core.mapping import ConversionError, convert

    r = reg()
    r.add_schema(_with_swish(2))
    down = table_from_dict({"table": {"name": "down", "src": "amanda/toy/2", "dst": "amanda/toy/1",
                                      "carry": "unchanged", "rules": {}}})
    empty_main = table_from_dict({"table": {"name": "toy-to-other", "src": "amanda/toy/1", "dst": "amanda/other/1",
                                            "rules": {}}})
    newer = table_from_dict({"table": {"name": "newer", "src": "amanda/toy/>=2", "dst": "amanda/other/1",
                                       "ahead": True, "rules": {}}})
    g = Graph("amanda/toy/2")
    x = g.add_input_port("x", "f32[N,3]")
    s = g.add_op("Swish", "s", inputs=["x"], outputs=[("y", "f32[N,3]")])
    g.connect(x, s.input_ports["x"])
    g.connect(s.output_ports["y"], g.add_output_port("out", "f32[N,3]"))
    with pytest.raises(ConversionError, match=r"chain: amanda/toy/2 -> amanda/toy/1 -> amanda/other/1; ahead of it: "
                                              r"newer\)"):
        convert(g, "amanda/other/1", [down, empty_main, newer], r)
    with pytest.raises(TableError, match="cannot be bidirectional"):
        table_from_dict({"table": {"name": "b", "src": "amanda/toy/>=2", "dst": "amanda/other/1", "ahead": True,
                                   "bidirectional": True, "rules": {}}})
    with pytest.raises(TableError, match="'ahead' is true or false"):
        table_from_dict({"table": {"name": "b", "src": "amanda/toy/>=2", "dst": "amanda/other/1", "ahead": "yes",
                                   "rules": {}}})


def dump_table_dict(table: Any) -> Any:
    from amanda_core.mapping.table import table_to_dict

    return table_to_dict(table)


def test_a_pass_marked_before_runs_before_its_table_and_explain_says_so():
    from amanda_core.mapping import convert
    from amanda_core.plugin.types import GraphPass

    t = table_from_dict({"table": {"name": "toy-to-other", "src": "amanda/toy/1", "dst": "amanda/other/1",
                                   "rules": RELU}})
    seen = []

    def look(graph: Graph) -> str:
        seen.append([op.type for op in graph])
        return "looked"

    result = convert(relu_graph(), "amanda/other/1", [t], reg(),
                     passes=[GraphPass("early", ("toy-to-other",), look, before=True),
                             GraphPass("late", ("toy-to-other",), look)])
    assert seen == [["Relu"], ["ReLU"]]  # the graph before the table, then after it
    assert result.passes_before == [(0, "early", "looked")] and result.passes == [(0, "late", "looked")]
    lines = result.explain().splitlines()
    assert lines[0] == "pass early, before table toy-to-other: looked"
    assert lines[1].startswith("table toy-to-other:") and "  then pass late: looked" in lines
