"""The one parser of the edge syntax (``op.port -> op.port``), shared by graph files and mapping tables."""

import pytest

from amanda_core.errors import FormatError
from amanda_core.ir import Graph
from amanda_core.ir.edges import is_control, split_edge, split_end, split_graph_end
from amanda_core.mapping import table_from_dict
from amanda_core.mapping.table import TableError
from amanda_core.serialization import load_graph


def test_split_edge_and_end():
    assert split_edge(" a.y ->b.x ") == ("a.y", "b.x")
    assert split_end("a.b.y") == ("a.b", "y")
    for bad in ("a.y => b.x", "a.y -> b.x -> c.z", 3):
        with pytest.raises(FormatError, match="an edge is written 'op.port -> op.port'"):
            split_edge(bad)
    for bad in ("ay", ".y", "a."):
        with pytest.raises(FormatError, match=f"an edge end is written 'op.port', got {bad!r} in 'e'"):
            split_end(bad, edge="e")


def test_dotted_names_read_by_the_ports_that_exist():
    g = Graph()
    g.add_op("X", "a", outputs=["b.c"])
    g.add_op("X", "a.b", outputs=["c"])
    assert split_end("a.b.c") == ("a.b", "c")  # no graph: the last dot
    with pytest.raises(FormatError, match="'a.b' port 'c' or 'a' port 'b.c'"):
        split_graph_end(g, "a.b.c", "graph", True)
    g.remove_op(g.ops["a.b"])
    assert split_graph_end(g, "a.b.c", "graph", True) == ("a", "b.c")


def test_control_needs_both_ends():
    assert is_control("^control", "^control", "t") and not is_control("y", "x", "t")
    with pytest.raises(FormatError, match="a control edge joins two '\\^control' ports"):
        is_control("^control", "x", "t")


@pytest.mark.parametrize("edge, message", [
    ("a.y => b.x", "an edge is written 'op.port -> op.port'"),
    ("ay -> b.x", "an edge end is written 'op.port', got 'ay'"),
    ("a.^control -> b.x", "a control edge joins two"),
])
def test_graphs_and_tables_give_the_same_message(edge, message):
    with pytest.raises(FormatError, match=message) as graph_error:
        load_graph(f"graph:\n  ops:\n    a: {{type: X}}\n    b: {{type: X}}\n  edges:\n    - {edge}\n")
    assert graph_error.value.location.line == 6
    table = {"name": "t", "src": "amanda/a/1", "dst": "amanda/b/1", "rules": {"r": {
        "src": {"ops": {"a": {"type": "X"}, "b": {"type": "X"}}, "edges": [edge]},
        "dst": {"ops": {"c": {"type": "Y"}}}}}}
    with pytest.raises(TableError, match=message):
        table_from_dict(table)
