"""Renaming an op's ports by position (what a rule's rewrite does when a port's name is not the target schema's):
plain renames in one step, swaps and rotations of names through temporary names, and the graph's edges kept."""

from amanda_core.ir.graph import Graph
from amanda_core.mapping.rewrite import _rename_ports


def op_with_inputs(*names: str):
    g = Graph(namespace="test/1")
    src = g.add_op("Src", "src", outputs=list(names))
    op = g.add_op("Op", "op", inputs=list(names), outputs=["out"])
    for n in names:
        g.connect(src.output_ports[n], op.input_ports[n])
    return g, src, op


def test_renames_swaps_and_rotations_keep_each_port_and_its_edge():
    for names, new in [(["a", "b", "c"], ["x", "y", "z"]), (["a", "b"], ["b", "a"]), (["a", "b", "c"], ["b", "c", "a"]),
                       (["a", "b", "c"], ["a", "c", "b"]), (["a", "b"], ["a", "b"]), (["a", "b", "c"], ["b", "x"])]:
        g, src, op = op_with_inputs(*names)
        ports = list(op.input_ports)
        _rename_ports(op, "in", ports, new, [None] * len(new))
        want = new + names[len(new):]
        assert [p.name for p in op.input_ports] == want, (names, new)
        assert [p is q for p, q in zip(op.input_ports, ports)] == [True] * len(names)  # the same ports, in order
        assert [p.source.name for p in op.input_ports] == names  # each still fed by what fed it
        assert not g.verify()


def test_a_rename_undone_with_the_rest_of_a_failed_change():
    g, src, op = op_with_inputs("a", "b")
    try:
        with g.atomic():
            _rename_ports(op, "in", list(op.input_ports), ["b", "a"], [None, None])
            _rename_ports(op, "out", list(op.output_ports), ["y"], ["tensor(float)"])
            raise RuntimeError("later step fails")
    except RuntimeError:
        pass
    assert [p.name for p in op.input_ports] == ["a", "b"] and [p.name for p in op.output_ports] == ["out"]
    assert [p.source.name for p in op.input_ports] == ["a", "b"] and op.output_ports[0].dtype is None
