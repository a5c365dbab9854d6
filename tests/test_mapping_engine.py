import textwrap

import numpy as np
import pytest

from amanda_core import Graph
from amanda_core.mapping import (
    ConversionError,
    MappingError,
    apply_table,
    convert,
    expand,
    find_matches,
    fuse,
    interpret,
    load_table,
    plan,
    remove,
    replace,
    unfuse,
)
from amanda_core.mapping.match import MatchContext
from amanda_core.mapping.table import TableError
from amanda_core.namespace import validate
from amanda_core.serialization import dump_graph, load_graph

from .mapping_support import SEED, registry, toy_chain


def table(text, name="t.yaml"):
    return load_table(textwrap.dedent(text), filename=name, trusted=True)


def seed_graph():
    return load_graph(SEED / "pytorch_single_layer.yaml")


# --------------------------------------------------------------------------- the tables of examples/seed/tables


def test_seed_one_op_rule_makes_the_tensorflow_matmul():
    g = seed_graph()
    report = apply_table(g, load_table(SEED / "tables" / "convert_matmul.yaml", trusted=True), registry())
    assert report.rules[0].matches == 1
    assert "matmul" not in g.ops
    mm = g.ops["dense/MatMul"]
    assert mm.type == "MatMul" and mm.attrs == {"T": "float32"}
    assert mm.input_ports.names() == ["a", "b"] and mm.output_ports.names() == ["product"]
    assert mm.input_ports["a"].source is g.input_ports["in0"]
    assert mm.input_ports["b"].source is g.ops["t"].output_ports["out0"]
    assert g.ops["relu"].input_ports["in0"].source is mm.output_ports["product"]
    assert mm.namespace == "amanda/tensorflow/1.13.1"
    assert mm.provenance == ("convert_matmul", "convert_matmul")
    # the op it produced is valid in the TensorFlow namespace (defaults fill transpose_a/transpose_b)
    sub = Graph("amanda/tensorflow/1.13.1")
    sub.insert(g.ops["dense/MatMul"].__class__("x", "MatMul", dict(mm.attrs)))
    assert [p for p in validate(sub, registry()) if "missing required" in p.message] == []


def test_seed_subgraph_rule_as_written():
    t = load_table(SEED / "tables" / "convert_t_matmul.yaml", trusted=True)
    g = seed_graph()
    report = apply_table(g, t, registry())
    # t feeds in1 in examples/seed/pytorch_single_layer.yaml
    assert report.rules[0].matches == 0 and report.rules[0].skipped == 0
    assert "matmul" in g.ops and "t" in g.ops
    # where t feeds in0 it matches, but the rule does not say where matmul's readers go: containment skips it
    g2 = seed_graph()
    mm = g2.ops["matmul"]
    a, b = mm.input_ports["in0"].source, mm.input_ports["in1"].source
    g2.connect(b, mm.input_ports["in0"], replace=True)
    g2.connect(a, mm.input_ports["in1"], replace=True)
    before = dump_graph(g2)
    report = apply_table(g2, t, registry())
    assert report.rules[0].matches == 0 and report.rules[0].skipped == 1
    assert dump_graph(g2) == before


def test_seed_subgraph_rule_completed_with_boundary_edges():
    g = seed_graph()
    apply_table(g, load_table(SEED / "tables" / "convert_t_matmul_carried.yaml", trusted=True), registry())
    assert "t" not in g.ops and "matmul" not in g.ops
    mm = g.ops["dense/MatMul"]
    assert mm.attrs == {"transpose_a": False, "transpose_b": True, "T": "float32"}
    assert mm.input_ports["a"].source is g.input_ports["in0"]
    assert mm.input_ports["b"].source is g.ops["param"].output_ports["out0"]
    assert g.ops["relu"].input_ports["in0"].source is mm.output_ports["product"]
    assert g.verify() == []


# --------------------------------------------------------------------------- rules

TOY_TO_OTHER = """\
table:
  src: amanda/toy/1
  dst: amanda/other/1
  rules:
"""


def test_one_op_renames_carry_ports_by_position_and_keep_names_when_updated():
    t = table(TOY_TO_OTHER + """\
    relu:
      src: {ops: {$r: {type: Relu}}}
      dst: {ops: {$r: {type: ReLU}}}
    add:
      src: {ops: {$a: {type: Add}}}
      dst: {ops: {$a: {type: AddV2}}}
""")
    g = toy_chain()
    apply_table(g, t, registry())
    relu, add = g.ops["relu"], g.ops["add"]
    assert (relu.type, relu.input_ports.names(), relu.output_ports.names()) == ("ReLU", ["features"],
                                                                                ["activations"])
    assert (add.type, add.input_ports.names()) == ("AddV2", ["x", "y"])
    assert add.input_ports["x"].source is relu.output_ports["activations"]
    assert g.ops["c"].namespace == "amanda/toy/1"  # unconverted ops say where they still are


def test_captures_unify_and_expressions_see_variables():
    t = table(TOY_TO_OTHER + """\
    same_axis:
      src:
        ops:
          $a: {type: Softmax, attrs: {axis: $ax}}
          $b: {type: Softmax, attrs: {axis: $ax}}
        edges: [$a.y -> $b.x]
      dst:
        ops:
          $b: {type: SoftmaxNCHW, attrs: {dim: "${ax + 10}"}}
        edges:
          - $a.x -> $b.logits
""")
    def chain(ax1, ax2):
        g = Graph("amanda/toy/1")
        x = g.add_input_port("x")
        s1 = g.add_op("Softmax", "s1", attrs={"axis": ax1}, inputs=["x"], outputs=["y"])
        s2 = g.add_op("Softmax", "s2", attrs={"axis": ax2}, inputs=["x"], outputs=["y"])
        g.connect(x, s1.input_ports["x"])
        g.connect(s1.output_ports["y"], s2.input_ports["x"])
        g.connect(s2.output_ports["y"], g.add_output_port("y"))
        return g

    g = chain(1, 1)
    apply_table(g, t, registry())
    assert list(g.ops) == ["s2"] and g.ops["s2"].attrs == {"dim": 11}
    assert g.ops["s2"].input_ports["logits"].source is g.input_ports["x"]
    g = chain(1, 2)
    assert apply_table(g, t, registry()).matches == 0


def test_attribute_defaults_from_the_schema_take_part_in_matching():
    t = table(TOY_TO_OTHER + """\
    last_axis:
      src: {ops: {$s: {type: Softmax, attrs: {axis: -1}}}}
      dst: {ops: {$s: {type: SoftmaxNCHW, attrs: {dim: 1}}}}
""")
    g = Graph("amanda/toy/1")
    g.add_op("Softmax", "implicit", inputs=["x"], outputs=["y"])
    g.add_op("Softmax", "explicit", attrs={"axis": 0}, inputs=["x"], outputs=["y"])
    apply_table(g, t, registry())
    assert g.ops["implicit"].type == "SoftmaxNCHW" and g.ops["explicit"].type == "Softmax"


def test_commutative_inputs_match_in_either_order_only_when_asked():
    rule = """\
    mul_add:
      {comm}
      src:
        ops:
          $m: {{type: Mul}}
          $a: {{type: Add}}
        edges: [$m.y -> $a.a]
      dst:
        ops:
          $a: {{type: AddV2}}
          $m: {{type: Multiply}}
"""
    def graph():
        g = Graph("amanda/toy/1")
        x = g.add_input_port("x")
        m = g.add_op("Mul", "m", inputs=["a", "b"], outputs=["y"])
        a = g.add_op("Add", "a", inputs=["a", "b"], outputs=["y"])
        g.connect(x, m.input_ports["a"])
        g.connect(x, m.input_ports["b"])
        g.connect(x, a.input_ports["a"])
        g.connect(m.output_ports["y"], a.input_ports["b"])  # Mul feeds the *second* input
        return g

    strict = table(TOY_TO_OTHER + rule.format(comm=""))
    assert apply_table(graph(), strict, registry()).matches == 0
    loose = table(TOY_TO_OTHER + rule.format(comm="commutative: true"))
    g = graph()
    assert apply_table(g, loose, registry()).matches == 1
    assert g.ops["a"].type == "AddV2" and g.ops["m"].type == "Multiply"


def test_new_ops_constants_and_deterministic_names():
    t = table("""\
table:
  src: amanda/toy/1
  dst: amanda/toy/2
  rules:
    relu_to_add:
      src: {ops: {$r: {type: Relu}}}
      dst:
        ops:
          $zero: {type: Const, attrs: {value: "${ints_to_tensor([0], 'float32')}"}}
          $sum: {type: Add}
        edges:
          - $r.x -> $sum.a
          - $zero.y -> $sum.b
          - $sum.y -> $r.y
""")
    g1, g2 = toy_chain(), toy_chain()
    apply_table(g1, t, registry())
    apply_table(g2, t, registry())
    assert dump_graph(g1) == dump_graph(g2)
    assert "relu_zero" in g1.ops and "relu_sum" in g1.ops and "relu" not in g1.ops
    assert np.array_equal(g1.ops["relu_zero"].attrs["value"], np.zeros(1, np.float32))
    assert g1.ops["add"].input_ports["a"].source is g1.ops["relu_sum"].output_ports["y"]
    assert g1.ops["relu_sum"].input_ports["a"].source is g1.input_ports["x"]


def test_rule_that_only_changes_attributes_keeps_the_others():
    t = table("""\
table:
  src: amanda/toy/1
  dst: amanda/toy/1
  rules:
    halve:
      src: {ops: {$d: {type: Dropout, attrs: {ratio: $r}}}}
      dst: {ops: {$d: {attrs: {ratio: "${r / 2}"}}}}
""")
    g = Graph("amanda/toy/1")
    g.add_op("Dropout", "d", attrs={"ratio": 0.5, "seed": 3}, inputs=["x"], outputs=["y"])
    apply_table(g, t, registry())
    assert g.ops["d"].attrs == {"ratio": 0.25, "seed": 3}


def test_containment_a_removed_op_read_outside_makes_the_match_invalid():
    t = table(TOY_TO_OTHER + """\
    relu_add:
      src:
        ops: {$r: {type: Relu}, $a: {type: Add}}
        edges: [$r.y -> $a.a]
      dst:
        ops: {fused: {type: AddV2}}
        edges:
          - $r.x -> fused.x
          - $a.b -> fused.y
          - fused.z -> $a.y
""")
    g = toy_chain()
    g.connect(g.ops["relu"].output_ports["y"], g.add_output_port("relu_out"))  # relu read outside the match
    before = dump_graph(g)
    report = apply_table(g, t, registry())
    assert report.rules[0].skipped == 1 and dump_graph(g) == before
    g = toy_chain()
    apply_table(g, t, registry())
    assert list(g.ops) == ["c", "fused"]
    assert g.ops["fused"].input_ports["y"].source is g.ops["c"].output_ports["y"]


def test_variadic_groups_and_optional_ports():
    t = table(TOY_TO_OTHER + """\
    concat:
      src: {ops: {$c: {type: Concat, attrs: {axis: $ax}}}}
      dst:
        ops: {cat: {type: ConcatV2, attrs: {axis: $ax}}}
        edges:
          - $c.inputs* -> cat.values*
          - cat.output -> $c.y
    dropout:
      src: {ops: {$d: {type: Dropout, output_ports: [y, mask?]}}}
      dst:
        ops: {$d: {type: Identity}}
""")
    g = Graph("amanda/toy/1")
    xs = [g.add_input_port(f"x{i}") for i in range(3)]
    c = g.add_op("Concat", "c", attrs={"axis": 1}, inputs=[f"inputs_{i}" for i in range(3)], outputs=["y"])
    for x, p in zip(xs, c.input_ports):
        g.connect(x, p)
    d = g.add_op("Dropout", "d", inputs=["x"], outputs=["y"])
    g.connect(c.output_ports["y"], d.input_ports["x"])
    g.connect(d.output_ports["y"], g.add_output_port("y"))
    apply_table(g, t, registry())
    cat = g.ops["cat"]
    assert cat.input_ports.names() == ["values_0", "values_1", "values_2"]
    assert [p.source for p in cat.input_ports] == xs
    assert g.ops["d"].type == "Identity" and g.ops["d"].input_ports["input"].source is cat.output_ports["output"]


def test_edges_to_an_optional_port_the_op_lacks_carry_nothing():
    t = table(TOY_TO_OTHER + """\
    dropout:
      src: {ops: {$d: {type: Dropout, input_ports: [$x], output_ports: [$y, $m?]}}}
      dst:
        ops: {n: {type: Identity}, k: {type: Identity}}
        edges: [$d.$x -> n.input, n.output -> $d.$y, $d.$x -> k.input, k.output -> $d.$m]
""")
    for with_mask in (False, True):
        g = Graph("amanda/toy/1")
        x = g.add_input_port("x")
        d = g.add_op("Dropout", "d", inputs=["x"], outputs=["y", "mask"] if with_mask else ["y"])
        g.connect(x, d.input_ports["x"])
        g.connect(d.output_ports["y"], g.add_output_port("y"))
        if with_mask:
            g.connect(d.output_ports["mask"], g.add_output_port("mask"))
        apply_table(g, t, registry())
        assert "d" not in g.ops and g.output_ports["y"].source is g.ops["n"].output_ports["output"]
        if with_mask:
            assert g.output_ports["mask"].source is g.ops["k"].output_ports["output"]
        else:
            assert not g.ops["k"].output_ports["output"].consumers


def test_control_edges_are_carried_to_the_new_ops():
    t = table(TOY_TO_OTHER + """\
    relu:
      src: {ops: {$r: {type: Relu}}}
      dst: {ops: {new_relu: {type: ReLU}}}
""")
    g = toy_chain()
    before = g.add_op("Input", "first", outputs=["y"])
    after = g.add_op("Input", "last", outputs=["y"])
    g.connect_control(before, g.ops["relu"])
    g.connect_control(g.ops["relu"], after)
    apply_table(g, t, registry())
    assert g.ops["new_relu"].control_inputs == (before,) and g.ops["new_relu"].control_outputs == (after,)


def test_apply_after_order_and_repeat():
    t = table("""\
table:
  src: amanda/toy/1
  dst: amanda/toy/1
  rules:
    mark:
      apply_after: [cancel]
      src: {ops: {$t: {type: Transpose}}}
      dst: {ops: {$t: {attrs: {left: true}}}}
    cancel:
      repeat: true
      src:
        ops:
          $a: {type: Transpose, attrs: {perm: $p}}
          $b: {type: Transpose, attrs: {perm: $q}}
        edges: [$a.y -> $b.x]
        where: ${is_identity_perm(compose_perms(p, q))}
      dst: {remove: true}
""")
    g = Graph("amanda/toy/1")
    prev = g.add_input_port("x")
    for i in range(5):
        op = g.add_op("Transpose", f"t{i}", attrs={"perm": [1, 0]}, inputs=["x"], outputs=["y"])
        g.connect(prev, op.input_ports["x"])
        prev = op.output_ports["y"]
    g.connect(prev, g.add_output_port("y"))
    report = apply_table(g, t, registry())
    assert [r.rule for r in report.rules] == ["cancel", "mark"]
    assert list(g.ops) == ["t4"] and g.ops["t4"].attrs == {"perm": [1, 0], "left": True}
    assert g.ops["t4"].input_ports["x"].source is g.input_ports["x"]


def test_tags_include_and_exclude():
    t = table(TOY_TO_OTHER + """\
    relu:
      src: {ops: {$r: {type: Relu}}}
      dst: {ops: {$r: {type: ReLU}}}
    add_fast:
      tags: [fast]
      src: {ops: {$a: {type: Add}}}
      dst: {ops: {$a: {type: AddV2}}}
""")
    g = toy_chain()
    apply_table(g, t, registry(), exclude_tags=["fast"])
    assert g.ops["relu"].type == "ReLU" and g.ops["add"].type == "Add"
    g = toy_chain()
    apply_table(g, t, registry(), include_tags=["slow"])
    assert g.ops["relu"].type == "ReLU" and g.ops["add"].type == "Add"
    g = toy_chain()
    apply_table(g, t, registry(), include_tags=["fast"])
    assert g.ops["add"].type == "AddV2"


def test_version_ranges_and_carry_unchanged():
    t = table("""\
table:
  src: amanda/toy/>=1,<2
  dst: amanda/toy/>=2
  carry: unchanged
  rules:
    block:
      src: {ops: {$b: {type: Block}}}
      dst: {ops: {$b: {type: Relu}}}
""")
    g = toy_chain()
    g.add_op("Block", "blk", inputs=["x"], outputs=["y"])
    report = apply_table(g, t, registry())
    assert report.dst == "amanda/toy/2" and report.carried == 3
    assert g.namespace == "amanda/toy/2" and all(op.namespace is None for op in g)
    assert g.ops["blk"].type == "Relu"


def test_nested_graphs_are_converted_too():
    t = table(TOY_TO_OTHER + """\
    relu:
      src: {ops: {$r: {type: Relu}}}
      dst: {ops: {$r: {type: ReLU}}}
""")
    g = Graph("amanda/toy/1")
    outer = g.add_op("Block", "blk", inputs=["x"], outputs=["y"])
    body = Graph()
    outer.set_body(body)
    r = body.add_op("Relu", "inner", inputs=["x"], outputs=["y"])
    body.connect(body.input_ports["x"], r.input_ports["x"])
    body.connect(r.output_ports["y"], body.output_ports["y"])
    branch = Graph()
    br = branch.add_op("Relu", "in_attr", inputs=["x"], outputs=["y"])
    g.add_op("Block", "holder", attrs={"branch": branch})
    apply_table(g, t, registry())
    assert body.ops["inner"].type == "ReLU" and br.type == "ReLU"


def test_a_rule_that_makes_a_cycle_fails_with_its_name():
    t = table("""\
table:
  src: amanda/toy/1
  dst: amanda/toy/1
  rules:
    loop:
      src: {ops: {$r: {type: Relu}}}
      dst:
        ops: {$r: {}}
        edges: [$r.y -> $r.x]
""")
    g = toy_chain()
    with pytest.raises(MappingError, match=r"table 't', rule 'loop' .*made a cycle: relu -> relu"):
        apply_table(g, t, registry())


def test_mapper_errors_name_the_rule_and_ops():
    t = table(TOY_TO_OTHER + """\
    relu:
      src: {ops: {$r: {type: Relu}}}
      dst: {ops: {$r: {type: ReLU, attrs: {x: "${1 / 0}"}}}}
""")
    with pytest.raises(MappingError, match=r"rule 'relu' \(ops relu\): t.yaml:\d+:\d+: expression .* failed: "
                                           r"ZeroDivisionError"):
        apply_table(toy_chain(), t, registry())


# --------------------------------------------------------------------------- planning

def test_planner_finds_the_shortest_chain_and_lists_what_is_left():
    up = table("""\
table:
  name: up
  src: amanda/toy/1
  dst: amanda/toy/2
  carry: unchanged
  rules: {}
""", "up.yaml")
    across = table("""\
table:
  name: across
  src: amanda/toy/2
  dst: amanda/other/1
  rules:
    relu:
      src: {ops: {$r: {type: Relu}}}
      dst: {ops: {$r: {type: ReLU}}}
    add:
      src: {ops: {$a: {type: Add}}}
      dst: {ops: {$a: {type: AddV2}}}
""", "across.yaml")
    reg = registry()
    steps = plan("amanda/toy/1", "amanda/other/1", [across, up], reg)
    assert [str(s) for s in steps] == ["amanda/toy/1 -> amanda/toy/2 (up)", "amanda/toy/2 -> amanda/other/1 (across)"]
    g = toy_chain()
    with pytest.raises(ConversionError) as info:
        convert(g, "amanda/other/1", [up, across], reg)
    assert "1 op(s) of 1 type(s) were not converted to amanda/other/1" in str(info.value)
    assert "1 x Const (amanda/toy/2), e.g. c" in str(info.value)
    assert g.ops["relu"].type == "Relu"  # the input graph is left as it was
    result = convert(g, "amanda/other/1", [up, across], reg, allow_partial=True)
    assert result.unconverted == [("Const", "amanda/toy/2", 1, ["c"])]
    text = result.explain()
    assert "rule relu: 1 match(es) -> produced 1 ReLU (relu)" in text and "carried unchanged: 3 op(s)" in text
    with pytest.raises(ConversionError, match="no chain of mapping tables leads from amanda/other/1 to amanda/toy/1"):
        plan("amanda/other/1", "amanda/toy/1", [up, across], reg)


def test_interpret_one_op():
    t = table(TOY_TO_OTHER + """\
    softmax:
      src: {ops: {$s: {type: Softmax, attrs: {axis: $a}}}}
      dst: {ops: {$s: {type: SoftmaxNCHW, attrs: {dim: "${nhwc_to_nchw_axis(a, 4)}"}}}}
""")
    g = Graph("amanda/toy/1")
    s = g.add_op("Softmax", "s", attrs={"axis": -1}, inputs=["x"], outputs=["y"])
    out = interpret(s, "amanda/other/1", [t], registry())
    (op,) = out
    assert (op.type, op.attrs, out.namespace) == ("SoftmaxNCHW", {"dim": 1}, "amanda/other/1")
    assert s.type == "Softmax"


# --------------------------------------------------------------------------- transformations

def chain_graph(types):
    g = Graph("amanda/toy/1")
    prev = g.add_input_port("x")
    for i, t in enumerate(types):
        op = g.add_op(t, f"{t.lower()}{i}", inputs=["x"], outputs=["y"], attrs={"perm": [1, 0]} if t == "Transpose"
                      else None)
        g.connect(prev, op.input_ports["x"])
        prev = op.output_ports["y"]
    g.connect(prev, g.add_output_port("y"))
    return g


def test_remove_replace_expand_fuse_unfuse_functions():
    g = chain_graph(["Relu", "Transpose", "Transpose", "Relu"])
    assert remove(g, ["transpose1", "transpose2"]) == ["transpose1", "transpose2"]
    assert g.ops["relu3"].input_ports["x"].source is g.ops["relu0"].output_ports["y"]

    g = chain_graph(["Relu", "Transpose", "Relu"])
    new = replace(g, ["relu0", "transpose1"], "Block", "blk", inputs=["x"], outputs=["y"])
    assert new.input_ports["x"].source is g.input_ports["x"]
    assert g.ops["relu2"].input_ports["x"].source is new.output_ports["y"]

    body = chain_graph(["Relu", "Relu"])
    body.namespace = None
    g = chain_graph(["Block", "Relu"])
    g.ops["block0"].input_ports  # ports x -> y match the body's
    moved = expand(g, "block0", body)
    assert [o.name for o in moved] == ["block0/relu0", "block0/relu1"]
    assert g.ops["relu1"].input_ports["x"].source is g.ops["block0/relu1"].output_ports["y"]

    g = chain_graph(["Relu", "Transpose", "Relu"])
    meta = fuse(g, ["relu0", "transpose1"], "ReluTranspose", "rt")
    assert sorted(g.ops) == ["relu2", "rt"] and list(meta.body.ops) == ["relu0", "transpose1"]
    assert find_matches(g, table(TOY_TO_OTHER + "    r:\n      src: {ops: {$r: {type: Relu}}}\n"
                                 "      dst: {ops: {$r: {type: ReLU}}}\n").rules["r"].src) != []
    unfuse(g, "rt")
    assert sorted(g.ops) == ["relu0", "relu2", "transpose1"] and g.verify() == []


def test_meta_ops_are_opaque_to_matching():
    g = chain_graph(["Relu", "Transpose", "Relu"])
    fuse(g, ["relu0", "transpose1"], "ReluTranspose", "rt")
    rule = table(TOY_TO_OTHER + "    r:\n      src: {ops: {$r: {type: Relu}}}\n      dst: {ops: {$r: {type: ReLU}}}\n"
                 ).rules["r"]
    matches = find_matches(g, rule.src, MatchContext())
    assert [m.ops["$r"].name for m in matches] == ["relu2"]


def test_transformations_from_tables():
    t = table("""\
table:
  src: amanda/toy/1
  dst: amanda/toy/1
  rules:
    fuse_pairs:
      src:
        ops: {$r: {type: Relu}, $t: {type: Transpose}}
        edges: [$r.y -> $t.x]
      dst: {fuse: {type: ReluTranspose, name: "${r.name + '_rt'}"}}
""")
    g = chain_graph(["Relu", "Transpose", "Relu", "Transpose"])
    report = apply_table(g, t, registry())
    assert report.rules[0].matches == 2 and list(g.ops) == ["relu0_rt", "relu2_rt"]
    assert g.ops["relu0_rt"].provenance == ("t", "fuse_pairs")
    back = table("""\
table:
  src: amanda/toy/1
  dst: amanda/toy/1
  rules:
    expand_back:
      src: {ops: {$m: {type: ReluTranspose}}}
      dst: {inline: true}
""")
    apply_table(g, back, registry())
    assert sorted(g.ops) == ["relu0", "relu2", "transpose1", "transpose3"] and g.verify() == []


def test_conversion_is_deterministic():
    t = load_table(SEED / "tables" / "convert_t_matmul_carried.yaml", trusted=True)
    outs = {dump_graph(convert(seed_graph(), "amanda/tensorflow/1.13.1", [t], registry(),
                               allow_partial=True).graph) for _ in range(3)}
    assert len(outs) == 1


def test_removing_an_op_that_feeds_a_kept_op_needs_a_new_feed():
    t = table("""\
table:
  src: amanda/toy/1
  dst: amanda/other/1
  rules:
    drop_relu:
      src:
        ops: {$r: {type: Relu}, $a: {type: Add}}
        edges: [$r.y -> $a.a]
      dst: {ops: {$a: {type: AddV2}}}
""")
    with pytest.raises(MappingError, match=r"input add.x was fed by an op the rule removes, and the mapper does not "
                                           r"feed it again"):
        apply_table(toy_chain(), t, registry())


def test_query_rules_honour_where_and_refuse_ops_beside_a_query():
    t = table("""\
table:
  src: amanda/toy/1
  dst: amanda/toy/1
  rules:
    drop_pairs:
      src: {query: "Transpose#a -> Transpose#b", where: "${a.attrs['perm'] == [0, 1]}"}
      dst: {remove: true}
""")
    g = chain_graph(["Relu", "Transpose", "Transpose", "Relu"])
    assert apply_table(g, t, registry()).matches == 0 and len(g) == 4
    # the same rule with a condition that holds: the pair goes, the Relus are joined
    t_true = table("""\
table:
  src: amanda/toy/1
  dst: amanda/toy/1
  rules:
    drop_pairs:
      src: {query: "Transpose#a -> Transpose#b", where: "${a.attrs['perm'] == [1, 0]}"}
      dst: {remove: true}
""")
    assert apply_table(g, t_true, registry()).matches == 1
    assert list(g.ops) == ["relu0", "relu3"]
    assert g.ops["relu3"].input_ports["x"].source is g.ops["relu0"].output_ports["y"]
    with pytest.raises(TableError, match="either 'ops' and 'edges' or a 'query'"):
        table("""\
table:
  src: amanda/toy/1
  dst: amanda/toy/1
  rules:
    r:
      src: {query: "Relu", ops: {$r: {type: Relu}}}
      dst: {remove: true}
""")


def test_a_later_rule_sees_types_an_earlier_rule_changed_in_place():
    t = table("""\
table:
  src: amanda/toy/1
  dst: amanda/toy/1
  rules:
    to_block:
      src: {ops: {$r: {type: Relu}}}
      dst: {ops: {$r: {type: Block}}}
    mark_block:
      apply_after: [to_block]
      src: {ops: {$b: {type: Block}}}
      dst: {ops: {$b: {meta: {seen: true}}}}
""")
    g = toy_chain()
    report = apply_table(g, t, registry())
    assert [r.matches for r in report.rules] == [1, 1]
    assert g.ops["relu"].type == "Block" and g.ops["relu"].meta == {"seen": True}


def test_matchers_and_mappers_with_subgraphs():
    t = table("""\
table:
  src: amanda/toy/1
  dst: amanda/toy/2
  rules:
    block_of_relu:
      src:
        ops:
          $b:
            type: Block
            ops:
              $inner: {type: Relu}
      dst:
        ops:
          wrapped:
            type: Block
            name: "${b.name + '_' + inner.name}"
            ops:
              first: {type: Relu}
              second: {type: Relu}
            edges:
              - graph.x -> first.x
              - first.y -> second.x
              - second.y -> graph.y
""")
    g = Graph("amanda/toy/1")
    x = g.add_input_port("x")
    for name, inner_type in (("with_relu", "Relu"), ("with_softmax", "Softmax")):
        blk = g.add_op("Block", name, inputs=["x"], outputs=["y"])
        g.connect(x, blk.input_ports["x"])
        body = Graph()
        blk.set_body(body)
        op = body.add_op(inner_type, "inner_op", inputs=["x"], outputs=["y"])
        body.connect(body.input_ports["x"], op.input_ports["x"])
        body.connect(op.output_ports["y"], body.output_ports["y"])
    g.connect(g.ops["with_relu"].output_ports["y"], g.add_output_port("y"))
    report = apply_table(g, t, registry())
    assert report.rules[0].matches == 1  # only the block whose body holds a Relu
    new = g.ops["with_relu_inner_op"]
    assert new.input_ports["x"].source is x and g.output_ports["y"].source is new.output_ports["y"]
    assert list(new.body.ops) == ["first", "second"] and new.body.verify() == []
    assert new.body.output_ports["y"].source is new.body.ops["second"].output_ports["y"]
    assert "with_softmax" in g.ops


def test_type_and_name_literals_match_exactly_and_as_alternatives():
    t = table("""\
table:
  src: amanda/toy/1
  dst: amanda/toy/1
  rules:
    tag:
      src: {ops: {$o: {type: [Relu, Softmax, "1"]}}}
      dst: {ops: {$o: {meta: {seen: "yes"}}}}
    by_name:
      src: {ops: {$o: {type: Dropout, name: drop_b}}}
      dst: {ops: {$o: {attrs: {ratio: 0.1}}}}
""")
    g = Graph("amanda/toy/1")
    for name, op_type in (("r", "Relu"), ("s", "Softmax"), ("c", "Concat"), ("relu_like", "Relu6"),
                          ("drop_a", "Dropout"), ("drop_b", "Dropout"), ("one", "1")):
        g.add_op(op_type, name, inputs=["x"], outputs=["y"])
    report = apply_table(g, t, registry())
    assert sorted(op.name for op in g if op.meta.get("seen") == "yes") == ["one", "r", "s"]
    assert g.ops["drop_b"].attrs == {"ratio": 0.1} and g.ops["drop_a"].attrs == {}
    assert [r.matches for r in report.rules] == [3, 1]


KEEP_V1 = """
namespace_schema:
  namespace: amanda/keep/1
  default_type_system: python
  op_schemas:
    - {type: Src, output_ports: [y]}
    - {type: Relu, input_ports: [x], output_ports: [y]}
    - {type: Scale, attrs: {k: float}, input_ports: [x], output_ports: [y]}
"""
KEEP_V2 = KEEP_V1.replace("keep/1", "keep/2").replace("{type: Relu, input_ports: [x]",
                                                       "{type: Relu, input_ports: [input]")


def test_a_rule_that_keeps_its_ops_moves_them_as_the_general_rewrite_would(monkeypatch):
    """Rules whose mapper is ``$op: {}`` (the version steps of an op whose schema changed but not its meaning) take
    a short path; it must leave exactly what the general rewrite leaves."""
    from amanda_core.ir.compare import diff_graphs
    from amanda_core.mapping import rewrite
    from amanda_core.namespace import NamespaceRegistry, PythonTypeSystem, TypeSystemRegistry, load_schema

    reg = NamespaceRegistry(TypeSystemRegistry([PythonTypeSystem()]))
    reg.add_schema(load_schema(KEEP_V1))
    reg.add_schema(load_schema(KEEP_V2))
    t = table("""\
table:
  src: amanda/keep/1
  dst: amanda/keep/2
  carry: unchanged
  rules:
    same_meaning:
      src: {ops: {$op: {type: [Relu, Scale]}}}
      dst: {ops: {$op: {}}}
""")
    assert rewrite.keeps_only(t.rules["same_meaning"] if isinstance(t.rules, dict) else t.rules[0])

    def build():
        g = Graph("amanda/keep/1")
        s = g.add_op("Src", "s", outputs=["y"])
        r = g.add_op("Relu", "r", inputs=["x"], outputs=["y"], sources=[s.output_ports[0]])
        k = g.add_op("Scale", "k", inputs=["x"], outputs=["y"], attrs={"k": 2.0}, sources=[r.output_ports[0]])
        g.connect_control(s, k)
        g.connect(k.output_ports[0], g.add_output_port("out"))
        return g

    fast = build()
    fast_report = apply_table(fast, t, reg)
    monkeypatch.setattr(rewrite, "keeps_only", lambda rule: False)
    general = build()
    general_report = apply_table(general, t, reg)
    assert diff_graphs(fast, general) == []
    assert fast.namespace == "amanda/keep/2" and fast.ops["r"].input_ports.names() == ["input"]
    assert fast.ops["k"].provenance == ("t", "same_meaning") == general.ops["k"].provenance
    assert [(r.matches, dict(r.produced)) for r in fast_report.rules] == \
        [(r.matches, dict(r.produced)) for r in general_report.rules] == [(2, {"Relu": 1, "Scale": 1})]
    assert validate(fast, reg) == []


def test_approximate_rules_apply_only_when_asked_for_by_name():
    """Rules tagged `approximate` are opt-in: a conversion uses them only with include_tags naming the tag, and
    naming it does not leave out other tagged rules."""
    from amanda_core.mapping.engine import _select
    from amanda_core.mapping.table import table_from_dict

    t = table_from_dict({"table": {"name": "t", "src": "amanda/toy/1", "dst": "amanda/toy/2", "rules": {
        "plain": {"src": {"ops": {"$r": {"type": "Relu"}}}, "dst": {"ops": {"$r": {}}}},
        "fast": {"tags": ["fast"], "src": {"ops": {"$r": {"type": "Relu"}}}, "dst": {"ops": {"$r": {}}}},
        "approx": {"tags": ["approximate"], "src": {"ops": {"$r": {"type": "Relu"}}}, "dst": {"ops": {"$r": {}}}},
    }}})
    rules = t.ordered_rules()
    assert [r.name for r in _select(rules, (), ())] == ["plain", "fast"]
    assert [r.name for r in _select(rules, ["approximate"], ())] == ["plain", "fast", "approx"]
    assert [r.name for r in _select(rules, ["fast"], ())] == ["plain", "fast"]
    assert [r.name for r in _select(rules, ["fast", "approximate"], ["fast"])] == ["plain", "approx"]
