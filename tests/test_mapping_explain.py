"""Why a rule did not match: Matcher.why_not, Converter(explain_rules=...) and ``amanda convert --explain-rule``."""

import textwrap

import pytest

from amanda_core import Graph
from amanda_core.mapping import load_table
from amanda_core.mapping.engine import Converter, explaining_rules
from amanda_core.mapping.match import MatchContext, Matcher, MissReason, anchor_candidates, type_index
from amanda_core.namespace.registry import NOT_CONSTANT

from .mapping_support import registry


def table(rules: str):
    return load_table("table:\n  src: amanda/toy/1\n  dst: amanda/other/1\n  rules:\n"
                      + textwrap.indent(textwrap.dedent(rules), "    "), filename="t.yaml", trusted=True)


def why(g: Graph, rules: str, anchor: str, ctx: MatchContext | None = None) -> MissReason | None:
    rule = next(iter(table(rules).rules.values()))
    index = type_index(g)
    assert g.ops[anchor] in anchor_candidates(g, rule.src, index)
    if ctx is None:
        schemas = registry().schema("amanda/toy/1")
        ctx = MatchContext(schema_of=lambda op: schemas.get(op.type))
    return Matcher(g, rule.src, ctx, rule, index).why_not(g.ops[anchor])


def softmax_relu(axis=1, *, relu_type="Relu"):
    g = Graph("amanda/toy/1")
    x = g.add_input_port("x")
    s = g.add_op("Softmax", "s", attrs={"axis": axis}, inputs=["x"], outputs=["y"])
    r = g.add_op(relu_type, "r", inputs=["x"], outputs=["y"])
    g.connect(x, s.input_ports["x"])
    g.connect(s.output_ports["y"], r.input_ports["x"])
    g.connect(r.output_ports["y"], g.add_output_port("y"))
    return g


PAIR = """\
pair:
  src:
    ops:
      $s: {type: Softmax, attrs: {axis: 1}}
      $r: {type: Relu}
    edges: [$s.y -> $r.x]
  dst: {ops: {$s: {type: SoftmaxNCHW, attrs: {dim: 1}}, $r: {type: ReLU}}}
"""


def test_a_match_has_no_reason():
    assert why(softmax_relu(), PAIR, "s") is None


def test_attribute_on_the_anchor():
    r = why(softmax_relu(axis=0), PAIR, "s")
    assert (r.kind, r.pattern_op, r.op, r.bound) == ("attribute", "$s", "s", 0)
    assert r.message == "$s: attribute axis of s is 0, not 1"


def test_type_of_an_op_reached_along_an_edge():
    r = why(softmax_relu(relu_type="Transpose"), PAIR, "s")
    assert (r.kind, r.pattern_op, r.op, r.bound) == ("type", "$r", "r", 1)
    assert "r is a Transpose, not 'Relu'" in r.message


def test_edge_and_no_op_along_it():
    g = softmax_relu()
    g.disconnect(g.ops["r"].input_ports["x"])
    g.connect(g.input_ports["x"], g.ops["r"].input_ports["x"])
    r = why(g, PAIR, "s")
    assert r.kind == "edge" and "nothing is joined to the match along $s.y -> $r.x" in r.message


def test_the_furthest_failure_wins_over_an_earlier_one():
    # two Relu readers: the first fails on an attribute-free check further on (where), the reason is the where
    g = softmax_relu()
    r2 = g.add_op("Relu", "r2", inputs=["x"], outputs=["y"])
    g.connect(g.ops["s"].output_ports["y"], r2.input_ports["x"])
    rules = PAIR.replace("  dst:", "    where: \"${r.name == 'nobody'}\"\n  dst:")
    r = why(g, rules, "s")
    assert r.kind == "where" and "where \"${r.name == 'nobody'}\" is false for $s=s, $r=" in r.message


def test_captured_value_mismatch_names_the_capture():
    rules = """\
    same:
      src:
        ops:
          $a: {type: Softmax, attrs: {axis: $ax}}
          $b: {type: Softmax, attrs: {axis: $ax}}
        edges: [$a.y -> $b.x]
      dst: {ops: {$b: {type: SoftmaxNCHW, attrs: {dim: 1}}}}
    """
    g = softmax_relu(axis=1, relu_type="Softmax")
    g.ops["r"].attrs = {"axis": 2}
    r = why(g, rules, "s")
    assert r.kind == "attribute" and "attribute axis of r is 2, not 1 (captured by $ax before)" in r.message


def test_expression_condition():
    rules = """\
    big:
      src: {ops: {$s: {type: Softmax, attrs: {axis: "${value > 3}"}}}}
      dst: {ops: {$s: {type: SoftmaxNCHW, attrs: {dim: 1}}}}
    """
    r = why(softmax_relu(axis=1), rules, "s")
    assert r.kind == "expression" and r.message == "$s: ${value > 3} is false for s (value 1)"


def test_missing_port_and_port_type():
    g = softmax_relu()
    r = why(g, """\
    p:
      src: {ops: {$s: {type: Softmax, input_ports: [x, bias]}}}
      dst: {ops: {$s: {type: SoftmaxNCHW, attrs: {dim: 1}}}}
    """, "s")
    assert r.kind == "port" and r.message == "$s: s has no input port bias"
    g.ops["s"].input_ports["x"].dtype = "int64"
    r = why(g, """\
    p:
      src: {ops: {$s: {type: Softmax, input_ports: [x: float32]}}}
      dst: {ops: {$s: {type: SoftmaxNCHW, attrs: {dim: 1}}}}
    """, "s")
    assert r.kind == "port type" and r.message == "$s: port x of s is int64, not float32"


def add_fed_by(first: bool) -> Graph:
    g = Graph("amanda/toy/1")
    x = g.add_input_port("x")
    m = g.add_op("Mul", "m", inputs=["a", "b"], outputs=["y"])
    a = g.add_op("Add", "a", inputs=["a", "b"], outputs=["y"])
    g.connect(x, m.input_ports["a"])
    g.connect(x, m.input_ports["b"])
    g.connect(x, a.input_ports["b" if first else "a"])
    g.connect(m.output_ports["y"], a.input_ports["a" if first else "b"])
    return g


def test_edge_and_commutative_order():
    rule = """\
    mul_add:
      {comm}
      src:
        ops:
          $m: {{type: Mul}}
          $a: {{type: Add}}
        edges: [$m.y -> $a.a, $m.y -> $a.b]
      dst: {{ops: {{$a: {{type: AddV2}}}}}}
    """
    strict = why(add_fed_by(True), textwrap.dedent(rule).format(comm=""), "m")
    assert strict.kind == "edge" and strict.message == "$m.y -> $a.b: input b of a is fed by the graph.x, not by m.y"
    loose = why(add_fed_by(True), textwrap.dedent(rule).format(comm="commutative: true"), "m")
    assert loose.kind == "commutative order"
    assert loose.message == ("$m.y -> $a.b: tried the commutative inputs a, b of a in any order; the one it feeds "
                             "is already matched by another edge")


def test_constant_inputs():
    rules = """\
    c:
      src: {ops: {$s: {type: Split, consts: {split: [2, 2]}}}}
      dst: {ops: {$s: {type: Identity}}}
    """
    g = Graph("amanda/toy/1")
    x = g.add_input_port("x")
    c = g.add_op("Const", "c", attrs={"value": [1, 3]}, outputs=["y"])
    s = g.add_op("Split", "s", inputs=["x", "split"], outputs=["outputs_0"])
    g.connect(x, s.input_ports["x"])
    g.connect(c.output_ports["y"], s.input_ports["split"])
    schemas = registry().schema("amanda/toy/1")
    ctx = MatchContext(schema_of=lambda op: schemas.get(op.type),
                       constant_of=lambda op: op.attrs["value"] if op.type == "Const" else NOT_CONSTANT)
    r = why(g, rules, "s", ctx)
    assert r.kind == "const" and r.message == "$s: constant input split of s is [1, 3], not [2, 2]"
    g.connect(x, s.input_ports["split"], replace=True)
    r = why(g, rules, "s", ctx)
    assert r.kind == "const" and r.message == "$s: input split of s is not fed by a constant"


def test_containment_of_a_nested_pattern():
    rules = """\
    blk:
      src:
        ops:
          $b:
            type: Block
            ops: {$i: {type: Relu}}
      dst: {ops: {$b: {type: Identity}}}
    """
    g = Graph("amanda/toy/1")
    b = g.add_op("Block", "b", inputs=["x"], outputs=["y"])
    r = why(g, rules, "b")
    assert r.kind == "containment" and r.message == "$b: b holds no body"
    body = Graph("amanda/toy/1")
    body.add_op("Softmax", "inner", inputs=["x"], outputs=["y"])
    b.set_body(body)
    r = why(g, rules, "b")
    assert r.kind == "containment" and "the nested pattern does not match in the body of b" in r.message


def test_the_engine_reports_every_candidate_of_a_traced_rule_only():
    g = softmax_relu(axis=1)
    s2 = g.add_op("Softmax", "s2", attrs={"axis": 0}, inputs=["x"], outputs=["y"])
    g.connect(g.input_ports["x"], s2.input_ports["x"])
    t = table(PAIR + PAIR.replace("pair:", "other:"))
    report = Converter(registry(), explain_rules=["pair"]).apply(g.copy(), t)
    pair, other = report.rules
    assert other.candidates is None
    assert [(c.op, c.outcome) for c in pair.candidates] == [("s", "rewritten"), ("s2", "no match")]
    assert pair.candidates[1].reason.kind == "attribute" and pair.candidates[0].reason is None
    with explaining_rules(["t:other"]):  # table:rule, through the context (as amanda convert uses it)
        report = Converter(registry()).apply(g.copy(), t)
    assert report.rules[0].candidates is None
    assert [(c.op, c.outcome) for c in report.rules[1].candidates] == [("s2", "no match")]
    assert report.rules[1].candidates[0].reason.kind == "attribute"
    assert Converter(registry()).explain_rules == frozenset()  # the context ended


def test_tracing_does_not_change_the_result():
    t = table(PAIR)
    a, b = softmax_relu(), softmax_relu()
    Converter(registry()).apply(a, t)
    Converter(registry(), explain_rules=["pair"]).apply(b, t)
    assert a == b


# --------------------------------------------------------------------------- the command


onnx = pytest.importorskip("onnx")


@pytest.fixture
def onnx_only(amanda_isolated):
    from amanda_onnx import plugin

    amanda_isolated(plugin, "amanda-onnx")


LEAKY = """\
table:
  src: amanda/onnx/13
  dst: amanda/onnx/14
  carry: unchanged
  rules:
    half_leak:
      src: {ops: {$l: {type: LeakyRelu, attrs: {alpha: 0.5}}}}
      dst: {ops: {$l: {type: LeakyRelu, attrs: {alpha: 0.5}}}}
    tagged:
      tags: [special]
      src: {ops: {$l: {type: LeakyRelu}}}
      dst: {ops: {$l: {type: LeakyRelu}}}
"""


def test_explain_rule_on_the_command_line(tmp_path, capsys, onnx_only):
    from onnx import TensorProto, helper

    from amanda_core.cli.main import main

    nodes = [helper.make_node("LeakyRelu", ["x"], ["h"], name="half", alpha=0.5),
             helper.make_node("LeakyRelu", ["h"], ["y"], name="tenth", alpha=0.1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    src = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(src))
    tbl = tmp_path / "t.yaml"
    tbl.write_text(LEAKY)
    out = tmp_path / "o.onnx"
    base = ["convert", str(src), "--to", "amanda/onnx/14", "-o", str(out), "--table", str(tbl),
            "--no-plugin-tables"]
    rc = main(base + ["--exclude-tag", "special", "--explain-rule", "half_leak", "--explain-rule", "tagged"])
    stdout, err = capsys.readouterr()
    assert rc == 0, err
    lines = stdout.splitlines()
    assert lines[0] == "rule t:half_leak (amanda/onnx/13 -> amanda/onnx/14): 2 candidate(s), 1 rewritten"
    assert lines[1] == "  half (LeakyRelu): rewritten"
    assert lines[2].startswith("  tenth (LeakyRelu): no match: attribute: $l: attribute alpha of tenth is 0.1")
    assert lines[2].endswith(", not 0.5")
    assert lines[3].startswith("rule t:tagged: not run: its tags left it out of this conversion (tags: special;")
    assert "; wrote " in lines[4] and len(lines) == 5
    out.unlink()
    rc = main(base + ["--explain-rule", "half_leek"])
    _, err = capsys.readouterr()
    assert rc == 2 and "--explain-rule half_leek: no table of this conversion has a rule 'half_leek'" in err
    assert "(similar: half_leak)" in err and not out.exists()
