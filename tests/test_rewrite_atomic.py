"""A rewrite that fails at any stage leaves the graph as it was (plan, then commit inside Graph.atomic)."""

import textwrap

import pytest

from amanda_core.errors import GraphError
from amanda_core.mapping import MappingError, apply_table, load_table

from .mapping_support import registry, toy_chain


def table(rules: str, dst: str = "amanda/other/1"):
    text = f"table:\n  src: amanda/toy/1\n  dst: {dst}\n  rules:\n" + textwrap.indent(textwrap.dedent(rules), "    ")
    return load_table(text, filename="t.yaml", trusted=True)


def fails_and_leaves_graph(rules: str, match: str, dst: str = "amanda/other/1") -> None:
    g = toy_chain()
    before = g.copy()
    version = g.version
    with pytest.raises(MappingError, match=match):
        apply_table(g, table(rules, dst), registry())
    assert g == before, g.diff(before)
    assert not g.verify()
    assert g.version >= version


def test_plan_stage_expression_error_changes_nothing():
    fails_and_leaves_graph("""\
r:
  src: {ops: {$r: {type: Relu}}}
  dst: {ops: {$r: {type: ReLU, attrs: {k: "${no_such_name + 1}"}}}}
""", "no_such_name")


def test_plan_stage_new_op_without_type_changes_nothing():
    fails_and_leaves_graph("""\
r:
  src: {ops: {$r: {type: Relu}}}
  dst:
    ops: {n: {attrs: {a: 1}}}
    edges: [$r.x -> n.features, n.activations -> $r.y]
""", "needs a 'type'")


def test_plan_stage_bad_name_expression_changes_nothing():
    fails_and_leaves_graph("""\
r:
  src: {ops: {$r: {type: Relu}}}
  dst: {ops: {$r: {type: ReLU, name: "${''}"}}}
""", "not a non-empty string")


def test_commit_stage_positional_carry_without_room_changes_nothing():
    # the new op is created and fed before the rewrite finds add.b has nowhere to go
    fails_and_leaves_graph("""\
r:
  src: {ops: {$a: {type: Add}}}
  dst: {ops: {n: {type: ReLU}}}
""", r"add.b is fed, but the new op")


def test_commit_stage_unfed_required_input_changes_nothing():
    # the kept op's type, attributes and port names change before the check finds add.x unfed
    fails_and_leaves_graph("""\
drop_relu:
  src:
    ops: {$r: {type: Relu}, $a: {type: Add}}
    edges: [$r.y -> $a.a]
  dst: {ops: {$a: {type: AddV2, attrs: {t: 1}, meta: {note: x}}}}
""", r"input add.x was fed by an op the rule removes")


def test_commit_stage_edge_from_a_removed_output_changes_nothing():
    fails_and_leaves_graph("""\
r:
  src:
    ops: {$r: {type: Relu}, $a: {type: Add}}
    edges: [$r.y -> $a.a]
  dst:
    ops: {n: {type: ConcatV2, attrs: {axis: 0}}}
    edges: [$a.a -> n.values_0, $a.b -> n.values_1, n.output -> $a.y, $r.y -> $a.y]
""", r"edge end \$r.y: relu.y is an output of an op the rule removes")


def test_graph_atomic_undoes_every_kind_of_change():
    g = toy_chain()
    before = g.copy()
    relu, add, c = g.ops["relu"], g.ops["add"], g.ops["c"]
    with pytest.raises(RuntimeError):
        with g.atomic():
            n = g.add_op("Mul", "mul", inputs=["a", "b"], outputs=["y"], sources=[relu.output_ports["y"]])
            g.connect(c.output_ports["y"], n.input_ports["b"])
            g.replace_all_uses(add.output_ports["y"], n.output_ports["y"])
            g.disconnect(add.input_ports["b"])
            g.connect_control(relu, add)
            relu.type = "Block"
            add.attrs = {"k": 1}
            add.set_attr("j", 2)
            c.namespace = "amanda/toy/2"
            c.meta = {"m": 1}
            relu.provenance = ("t", "r")
            add.rename_input_port("a", "first")
            add.add_input_port("extra", "float")
            add.output_ports["y"].dtype = "int"
            g.rename_op(add, "sum")
            g.remove_op(c, rewire={"y": None})
            raise RuntimeError("stop")
    assert g == before, g.diff(before)
    assert not g.verify()
    assert g.ops["add"].input_ports.names() == ["a", "b"] and g.ops["relu"].provenance is None


def test_graph_atomic_keeps_changes_of_a_block_that_ends_well():
    g = toy_chain()
    with g.atomic():
        g.ops["relu"].type = "Block"
    assert g.ops["relu"].type == "Block"
    with pytest.raises(GraphError):
        with g.atomic():
            g.ops["relu"].type = "Relu"
            g.add_op("Relu", "relu")  # a name in use: refused, and the type change before it is undone
    assert g.ops["relu"].type == "Block"


def test_plan_stage_port_type_expression_error_changes_nothing():
    fails_and_leaves_graph("""\
r:
  src: {ops: {$r: {type: Relu}}}
  dst: {ops: {$r: {type: ReLU, input_ports: [{features: "${no_such_dtype}"}]}}}
""", "no_such_dtype")


def test_plan_stage_meta_expression_error_changes_nothing():
    fails_and_leaves_graph("""\
r:
  src: {ops: {$r: {type: Relu}}}
  dst: {ops: {$r: {type: ReLU, meta: {note: "${[][1]}"}}}}
""", "IndexError")


def test_commit_stage_edge_to_a_missing_port_changes_nothing():
    # the new op is created before the edge end naming a port relu does not have is resolved
    fails_and_leaves_graph("""\
r:
  src: {ops: {$r: {type: Relu}}}
  dst:
    ops: {n: {type: ReLU}}
    edges: [$r.nothing -> n.features, n.activations -> $r.y]
""", r"op 'relu' has no port 'nothing'")


def test_a_rewrite_that_makes_a_cycle_changes_nothing():
    # the rewrite itself succeeds; the sort after the rule's pass finds the cycle and the rule is undone
    fails_and_leaves_graph("""\
loop:
  src: {ops: {$r: {type: Relu}}}
  dst:
    ops: {$r: {}}
    edges: [$r.y -> $r.x]
""", r"made a cycle: relu -> relu", dst="amanda/toy/1")


def test_a_rule_that_fails_at_its_second_match_undoes_the_first():
    g = toy_chain()
    second = g.add_op("Relu", "relu2", inputs=["x"], outputs=["y"], sources=[g.ops["add"].output_ports["y"]])
    g.connect(second.output_ports["y"], g.add_output_port("out2"))
    before = g.copy()
    rules = """\
r:
  src: {ops: {$r: {type: Relu}}}
  dst: {ops: {$r: {type: ReLU, attrs: {k: "${1 // (0 if r.name == 'relu2' else 1)}"}}}}
"""
    with pytest.raises(MappingError, match=r"ops relu2\).*ZeroDivisionError"):
        apply_table(g, table(rules), registry())
    assert g == before, g.diff(before)
    assert g.ops["relu"].type == "Relu" and g.ops["relu"].namespace is None
