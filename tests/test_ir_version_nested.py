"""Graph.version moves with every change made through the IR; Graph.nested_graphs is the one walk."""

import pytest

from amanda_core import Graph
from amanda_core.errors import GraphError
from amanda_core.mapping import load_table

from .mapping_support import registry, toy_chain


def test_every_change_through_the_ir_moves_the_version():
    g = toy_chain()
    relu = g.ops["relu"]
    changes = [
        lambda: setattr(relu, "type", "Block"),
        lambda: setattr(relu, "attrs", {"k": 1}),
        lambda: relu.set_attr("j", 2),
        lambda: relu.del_attr("j"),
        lambda: setattr(relu, "namespace", "amanda/toy/2"),
        lambda: setattr(relu, "meta", {"doc": "x"}),
        lambda: relu.add_input_port("extra"),
        lambda: relu.rename_input_port("extra", "other"),
        lambda: relu.remove_input_port("other"),
        lambda: setattr(relu.output_ports["y"], "dtype", "float"),
        lambda: g.rename_op(relu, "r"),
        lambda: g.disconnect(g.ops["add"].input_ports["b"]),
    ]
    for change in changes:
        v = g.version
        change()
        assert g.version > v


def test_an_index_keyed_on_the_version_sees_a_type_changed_in_place():
    # a later rule sees the type an earlier change gave, without anyone touching private state
    t = load_table("""\
table:
  src: amanda/toy/1
  dst: amanda/toy/1
  rules:
    blocks:
      src: {ops: {$b: {type: Block}}}
      dst: {ops: {$b: {meta: {seen: true}}}}
""", filename="t.yaml", trusted=True)
    from amanda_core.mapping.engine import Converter

    conv = Converter(registry())
    g = toy_chain()
    assert conv.apply(g, t).matches == 0  # indexes the graph by type
    g.ops["relu"].type = "Block"
    assert conv.apply(g, t).matches == 1


def _nested_graph() -> Graph:
    g = Graph("amanda/toy/1")
    a = g.add_op("Block", "a", inputs=["x"], outputs=["y"])
    body = Graph()
    a.set_body(body)
    inner = body.add_op("Block", "inner", inputs=["x"], outputs=["y"], namespace="amanda/toy/2")
    inner.set_body(Graph())
    then = Graph("amanda/other/1")
    then.add_op("Relu", "t0")
    els = Graph()
    g.add_op("If", "cond", attrs={"branches": [then, els], "n": 3, "g": Graph()})
    return g


def test_nested_graphs_yields_every_graph_with_owner_path_and_namespace():
    g = _nested_graph()
    seen = [(n.path, n.owner.name, n.attr, n.index, n.inherited) for n in g.nested_graphs()]
    assert seen == [
        ("a", "a", None, None, "amanda/toy/1"),
        ("a/inner", "inner", None, None, "amanda/toy/2"),
        ("cond.branches[0]", "cond", "branches", 0, "amanda/toy/1"),
        ("cond.branches[1]", "cond", "branches", 1, "amanda/toy/1"),
        ("cond.g", "cond", "g", None, "amanda/toy/1"),
    ]
    assert [n.graph for n in g.nested_graphs()][2] is g.ops["cond"].attrs["branches"][0]
    assert sorted(op.name for op in g.walk()) == ["a", "cond", "inner", "t0"]


def test_verify_reaches_a_broken_graph_in_a_list_attribute():
    g = _nested_graph()
    els = g.ops["cond"].attrs["branches"][1]
    x = els.add_op("Relu", "x", inputs=["i"], outputs=["o"])
    els.connect(x.output_ports["o"], x.input_ports["i"])
    assert g.verify() == ["in body of cond.branches[1]: cycle through ops: x -> x"]


def test_get_op_names_similar_ops():
    g = toy_chain()
    with pytest.raises(GraphError, match=r"no op named 'reul' in graph; did you mean 'relu'\?"):
        g.get_op("reul")
    with pytest.raises(GraphError, match=r"no op named 'zzz' in graph$"):
        g.get_op("zzz")
