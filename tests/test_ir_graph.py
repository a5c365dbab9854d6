import numpy as np
import pytest

from amanda_core import CONTROL, Graph, GraphCycleError, GraphError, GraphInput, GraphOutput
from amanda_core.ir import Tensor, default_op_name


def seed_torch_graph() -> Graph:
    g = Graph("amanda/pytorch/1.4.0")
    i = g.add_input_port("in0", "Float(1, 784)")
    o = g.add_output_port("out0")
    p = g.add_op("prim::Param", outputs=[("out0", "Float(100, 784)")])
    t = g.add_op("aten::t", inputs=1, outputs=[("out0", "Float(784, 100)")])
    m = g.add_op("aten::matmul", inputs=2, outputs=[("out0", "Float(1, 100)")])
    r = g.add_op("aten::relu", inputs=1, outputs=[("out0", "Float(1, 100)")])
    g.connect(i, m.input_ports["in0"])
    g.connect(p.output_ports["out0"], t.input_ports["in0"])
    g.connect(t.output_ports["out0"], m.input_ports["in1"])
    g.connect(m.output_ports["out0"], r.input_ports["in0"])
    g.connect(r.output_ports["out0"], o)
    return g


def test_automatic_names_follow_type_and_order():
    g = seed_torch_graph()
    assert list(g.ops) == ["param", "t", "matmul", "relu"]
    assert g.ops["matmul"].input_ports.names() == ["in0", "in1"]
    t2 = g.add_op("aten::t")
    t3 = g.add_op("aten::t")
    assert (t2.name, t3.name) == ("t_1", "t_2")
    assert default_op_name("prim::Param") == "param"
    assert default_op_name("Conv") == "conv"
    assert default_op_name(None) == "op"


def test_duplicate_names_refused():
    g = seed_torch_graph()
    with pytest.raises(GraphError, match="already exists"):
        g.add_op("aten::t", "t")
    with pytest.raises(GraphError, match="duplicate port"):
        g.ops["t"].add_input_port("in0")


def test_producer_and_consumers_are_linked_both_ways():
    g = seed_torch_graph()
    t, m = g.ops["t"], g.ops["matmul"]
    assert m.input_ports["in1"].source is t.output_ports["out0"]
    assert t.output_ports["out0"].consumers == (m.input_ports["in1"],)
    gi = g.input_ports["in0"]
    assert isinstance(gi, GraphInput) and gi.consumers == (m.input_ports["in0"],)
    assert isinstance(g.output_ports["out0"], GraphOutput)
    assert g.output_ports["out0"].source is g.ops["relu"].output_ports["out0"]
    assert m.predecessors() == [t]
    assert t.successors() == [m]


def test_input_port_fed_once():
    g = seed_torch_graph()
    m = g.ops["matmul"]
    with pytest.raises(GraphError, match="already fed"):
        g.connect(g.ops["param"].output_ports[0], m.input_ports["in1"])
    g.connect(g.ops["param"].output_ports[0], m.input_ports["in1"], replace=True)
    assert g.ops["t"].output_ports[0].consumers == ()


def test_edges_must_stay_in_one_graph():
    a, b = seed_torch_graph(), seed_torch_graph()
    with pytest.raises(GraphError, match="not in this graph"):
        a.connect(b.ops["t"].output_ports[0], a.ops["relu"].input_ports[0], replace=True)


def test_control_edges_kept_apart_from_data():
    g = seed_torch_graph()
    g.connect_control(g.ops["param"], g.ops["relu"])
    assert [str(e) for e in g.control_edges()] == [f"param.{CONTROL} -> relu.{CONTROL}"]
    assert all("^control" not in str(e) for e in g.edges())
    assert g.ops["relu"].control_inputs == (g.ops["param"],)
    with pytest.raises(GraphError):
        g.connect_control(g.ops["t"], g.ops["t"])
    g.disconnect_control(g.ops["param"], g.ops["relu"])
    assert g.control_edges() == []


def test_remove_op_refused_while_used_unless_rewired():
    g = seed_torch_graph()
    with pytest.raises(GraphError, match="still feed"):
        g.remove_op("t")
    g.remove_op("t", rewire=True)
    assert g.ops["matmul"].input_ports["in1"].source is g.ops["param"].output_ports["out0"]
    assert g.verify() == []
    g.remove_op("relu", rewire={"out0": g.ops["matmul"].output_ports["out0"]})
    assert g.output_ports["out0"].source is g.ops["matmul"].output_ports["out0"]
    assert "relu" not in g


def test_replace_all_uses():
    g = seed_torch_graph()
    new = g.add_op("aten::neg", inputs=1, outputs=1)
    g.connect(g.ops["matmul"].output_ports[0], new.input_ports[0])
    moved = g.replace_all_uses(g.ops["relu"].output_ports[0], new.output_ports[0])
    assert moved == 1 and g.output_ports["out0"].source is new.output_ports[0]


def test_topological_order_cached_and_invalidated():
    g = seed_torch_graph()
    order = g.topological_order()
    assert [o.name for o in order] == ["param", "t", "matmul", "relu"]
    assert g.topological_order() is order
    late = g.add_op("aten::neg", inputs=1, outputs=1)
    g.connect(late.output_ports[0], g.ops["t"].input_ports[0], replace=True)
    order2 = g.topological_order()
    assert order2 is not order
    names = [o.name for o in order2]
    assert names.index("neg") < names.index("t")


def test_control_edges_constrain_order():
    g = Graph()
    a, b = g.add_op("A"), g.add_op("B")
    g.connect_control(b, a)
    assert [o.name for o in g.topological_order()] == ["b", "a"]


def test_cycle_detected_and_reported():
    g = seed_torch_graph()
    g.connect(g.ops["relu"].output_ports[0], g.ops["t"].input_ports[0], replace=True)
    with pytest.raises(GraphCycleError) as exc:
        g.topological_order()
    assert set(exc.value.ops) == {"t", "matmul", "relu"}
    problems = g.verify()
    assert any("cycle" in p and "relu" in p for p in problems)


def test_verify_reports_every_problem_at_once():
    g = seed_torch_graph()
    g.connect(g.ops["relu"].output_ports[0], g.ops["t"].input_ports[0], replace=True)
    # corrupt internals on purpose: a dangling edge and an edge known only at one end
    other = seed_torch_graph()
    g.ops["param"].output_ports[0]._consumers[other.ops["t"].input_ports[0]] = None
    g.ops["matmul"].input_ports["in0"]._source = g.ops["param"].output_ports[0]
    problems = g.verify()
    text = "\n".join(problems)
    assert "cycle" in text
    assert "dangling edge" in text
    assert "recorded only at its target" in text
    assert len(problems) >= 3


def test_port_fed_twice_is_reported():
    g = seed_torch_graph()
    m = g.ops["matmul"]
    g.ops["param"].output_ports[0]._consumers[m.input_ports["in1"]] = None  # second source claims in1
    assert any("fed twice" in p for p in g.verify())


def test_copy_is_deep_and_equal_and_shares_tensors():
    g = seed_torch_graph()
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    g.ops["param"].attrs["value"] = w
    g.ops["param"].attrs["list"] = [1, [2, 3]]
    c = g.copy()
    assert c == g and c.diff(g) == []
    assert c.ops["param"] is not g.ops["param"]
    assert c.ops["param"].attrs["value"] is w  # tensors are shared, not copied
    c.ops["param"].attrs["list"][1].append(4)
    assert g.ops["param"].attrs["list"] == [1, [2, 3]]
    assert c != g
    c2 = g.copy()
    c2.ops["t"].output_ports[0].dtype = "Float(1, 1)"
    assert any("output ports" in d for d in c2.diff(g))


def test_equality_sees_attr_tensor_and_edge_changes():
    g = seed_torch_graph()
    g.ops["param"].attrs["value"] = np.array([1.0, np.nan], dtype=np.float32)
    c = g.copy()
    assert c == g  # NaN equals NaN in tensors
    c.ops["param"].attrs["value"] = Tensor(np.array([1.0, 2.0], dtype=np.float32))
    assert c != g
    d = g.copy()
    d.disconnect(d.ops["relu"].input_ports[0])
    assert any("edge only in first" in x for x in g.diff(d))


def test_subgraph_op_ports_mirror_body_and_nest():
    g = seed_torch_graph()
    fc = g.make_subgraph([g.ops["t"], g.ops["matmul"]], "fc", "Dense")
    assert g.verify() == []
    assert fc.body is not None and fc.body.owner is fc
    assert fc.input_ports.names() == fc.body.input_ports.names()
    assert fc.output_ports.names() == fc.body.output_ports.names()
    assert [o.name for o in fc.body] == ["t", "matmul"]
    assert g.ops["relu"].input_ports[0].source is fc.output_ports[0]
    assert fc.body.ops["t"].path == "fc/t"
    # nest a second level
    inner = fc.body.make_subgraph([fc.body.ops["t"]], "tt", "T")
    assert inner.body.ops["t"].path == "fc/tt/t"
    assert g.verify() == []
    assert sorted(o.name for o in g.walk()) == ["fc", "matmul", "param", "relu", "t", "tt"]
    # adding a port to the op adds it to the body
    fc.add_input_port("extra")
    assert "extra" in fc.body.input_ports
    fc.remove_input_port("extra")
    assert "extra" not in fc.body.input_ports


def test_make_subgraph_then_inline_restores_graph():
    g = seed_torch_graph()
    ref = g.copy()
    g.make_subgraph(["t", "matmul"], "fc", "Dense")
    assert g != ref
    g.inline("fc")
    assert g == ref, g.diff(ref)


def test_make_subgraph_refuses_non_convex_sets():
    g = seed_torch_graph()
    with pytest.raises(GraphError, match="cycle"):
        g.make_subgraph(["t", "relu"], "bad")


def test_set_body_checks_ports():
    g = Graph()
    op = g.add_op("H", "h", inputs=["hx", "hy"], outputs=["hk"])
    body = Graph()
    body.add_input_port("x")
    with pytest.raises(GraphError, match="has ports"):
        op.set_body(body)
    ok = Graph()
    op.set_body(ok)
    assert ok.input_ports.names() == ["hx", "hy"] and ok.output_ports.names() == ["hk"]
    f = ok.add_op("F", "f", inputs=["x", "y"], outputs=["m", "n"])
    ok.connect(ok.input_ports["hx"], f.input_ports["x"])
    assert str(ok.edges()[0]) == "h.hx -> f.x"


def test_print_form_is_readable():
    g = seed_torch_graph()
    text = str(g)
    assert text.splitlines()[0] == "graph namespace=amanda/pytorch/1.4.0 (in0: Float(1, 784)) -> (out0)"
    assert "  matmul: aten::matmul(in0=graph.in0, in1=t.out0) -> (out0: Float(1, 100))" in text
    assert text.splitlines()[-1] == "  return out0=relu.out0"
    assert repr(g) == "<Graph amanda/pytorch/1.4.0: 4 ops, 1 inputs, 1 outputs>"


def test_rename_op_keeps_order_and_edges():
    g = seed_torch_graph()
    g.rename_op("t", "transpose")
    assert list(g.ops) == ["param", "transpose", "matmul", "relu"]
    assert g.ops["matmul"].input_ports["in1"].source.qualified_name == "transpose.out0"


def test_effective_namespace_mid_conversion():
    g = seed_torch_graph()
    op = g.ops["t"]
    assert op.effective_namespace == "amanda/pytorch/1.4.0"
    op.namespace = "amanda/tensorflow/2.21.0"
    assert op.effective_namespace == "amanda/tensorflow/2.21.0"


def test_lazy_tensor_loads_once():
    calls = []

    def load():
        calls.append(1)
        return np.zeros((2, 2), np.float32)

    t = Tensor(loader=load, dtype="float32", shape=(2, 2))
    assert not t.is_loaded and t.nbytes == 16
    a = t.numpy()
    assert t.numpy() is a and calls == [1]


def test_add_op_with_sources_connects_as_made():
    g = seed_torch_graph()
    m, t = g.ops["matmul"], g.ops["t"]
    add = g.add_op("aten::add", inputs=["self", "other", "alpha"], outputs=["out"],
                   sources=[m.output_ports[0], t.output_ports[0]])
    assert add.input_ports.sources() == [m.output_ports[0], t.output_ports[0], None]
    assert m.output_ports[0].consumers[-1] is add.input_ports["self"]
    assert g.verify() == []
    # the same source feeding two inputs is two edges
    sq = g.add_op("aten::mul", inputs=["a", "b"], outputs=["out"], sources=[add.output_ports[0]] * 2)
    assert add.output_ports[0].consumers == (sq.input_ports["a"], sq.input_ports["b"])


def test_add_op_sources_are_checked_before_anything_changes():
    g, other = seed_torch_graph(), seed_torch_graph()
    before = len(g)
    with pytest.raises(GraphError, match="source of op 'x'"):
        g.add_op("aten::neg", "x", inputs=["a"], sources=[other.ops["t"].output_ports[0]])
    with pytest.raises(GraphError, match="not a producing port"):
        g.add_op("aten::neg", "x", inputs=["a"], sources=[g.ops["t"].input_ports[0]])
    with pytest.raises(GraphError, match="1 input port"):
        g.add_op("aten::neg", "x", inputs=["a"], sources=[None, None])
    assert "x" not in g and len(g) == before and other.ops["t"].output_ports[0].consumers == (
        other.ops["matmul"].input_ports["in1"],)


def test_port_lists_read_like_lists_and_refuse_changes():
    g = seed_torch_graph()
    m = g.ops["matmul"]
    ports = m.input_ports
    assert len(ports) == 2 and ports[1] is ports["in1"] and list(ports) == [ports[0], ports[1]]
    assert ports.index("in1") == 1 and "in0" in ports and ports[0] in ports
    for change in (lambda: ports.append(ports[0]), lambda: ports.pop(), lambda: ports.clear(),
                   lambda: ports.__setitem__(0, ports[1]), lambda: ports.__delitem__(0), lambda: ports.sort(),
                   lambda: ports.extend([]), lambda: ports.insert(0, ports[0]), lambda: ports.remove(ports[0])):
        with pytest.raises(TypeError, match="read-only"):
            change()
    with pytest.raises(TypeError, match="read-only"):
        ports += []
    assert m.input_ports.names() == ["in0", "in1"]
    # identity, not list equality: two ops' empty output lists are not the same list
    a, b = g.add_op("x"), g.add_op("y")
    assert a.output_ports != b.output_ports and len({id(a.output_ports), id(b.output_ports)}) == 2
    with pytest.raises(KeyError, match=r"no port 'nope' \(ports: in0, in1\)"):
        ports["nope"]


def test_long_port_lists_stay_indexed_through_changes():
    g = Graph("ns")
    op = g.add_op("Concat", inputs=[f"inputs_{i}" for i in range(20)])
    assert op.input_ports["inputs_17"] is op.input_ports[17]
    op.remove_input_port("inputs_3")
    op.rename_input_port("inputs_4", "four")
    extra = op.add_input_port("late", index=0)
    assert op.input_ports[0] is extra and op.input_ports["four"].name == "four" and "inputs_3" not in op.input_ports
    assert "inputs_4" not in op.input_ports and len(op.input_ports) == 20
    with pytest.raises(GraphError, match="duplicate port"):
        g.add_op("Concat", inputs=["a", "b", "a"])


def test_control_edges_made_and_undone_on_ops_without_any():
    g = seed_torch_graph()
    p, t, r = g.ops["param"], g.ops["t"], g.ops["relu"]
    assert not r.has_control_inputs() and r.control_inputs == () and p.control_outputs == ()
    g.connect_control(p, r)
    g.connect_control(t, r)
    assert r.has_control_inputs() and r.control_inputs == (p, t) and p.control_outputs == (r,)
    g.disconnect_control(p, r)
    g.disconnect_control(t, r)
    assert not r.has_control_inputs() and g.control_edges() == []
    g.connect_control(p, r)  # again, after the set emptied
    g.remove_op("relu", rewire={"out0": g.ops["matmul"].output_ports[0]})
    assert p.control_outputs == () and r.control_inputs == ()
    assert g.verify() == []


def test_graphs_pickle_and_deep_copy_with_their_port_lists():
    import copy
    import pickle

    g = seed_torch_graph()
    g.add_op("Concat", "cat", inputs=[f"x{i}" for i in range(12)])  # an indexed port list
    for h in (pickle.loads(pickle.dumps(g)), copy.deepcopy(g)):
        assert h.diff(g) == [] and h == g
        m = h.ops["matmul"]
        assert m.input_ports.names() == ["in0", "in1"] and m.input_ports["in1"].source.op is h.ops["t"]
        assert h.ops["cat"].input_ports["x11"] is h.ops["cat"].input_ports[11]
        assert h.verify() == []


def test_a_detached_op_takes_its_ports_as_add_op_does():
    from amanda_core.ir import Op

    op = Op("aten::matmul", "mm", inputs=["a", ("b", "Float(2, 2)")], outputs=2)
    added = Graph().add_op("aten::matmul", "mm")  # the same order of type and name as add_op
    assert (op.type, op.name) == (added.type, added.name) == ("aten::matmul", "mm")
    assert op.input_ports.names() == ["a", "b"] and op.input_ports["b"].dtype == "Float(2, 2)"
    assert op.output_ports.names() == ["out0", "out1"] and op.output_ports[1].op is op
    g = seed_torch_graph()
    g.insert(op)
    g.connect(g.ops["t"].output_ports[0], op.input_ports["b"])
    assert op.input_ports.sources() == [None, g.ops["t"].output_ports[0]]
    with pytest.raises(GraphError, match="duplicate port name 'a'"):
        Op(None, "x", inputs=["a", "b", "a"])


def test_a_graph_renames_its_ports_and_a_body_renames_its_owners_too():
    from amanda_core import Graph

    g = Graph("amanda/toy/1")
    x = g.add_input_port("x")
    r = g.add_op("Relu", "r", inputs=["x"], outputs=["y"], sources=[x])
    g.connect(r.output_ports["y"], g.add_output_port("out"))
    g.rename_input_port("x", "features")
    g.rename_output_port(g.output_ports["out"], "activations")
    assert g.input_ports.names() == ["features"] and g.output_ports.names() == ["activations"]
    assert r.input_ports["x"].source is g.input_ports["features"]
    holder = Graph("amanda/toy/1")
    op = holder.add_op("Block", "b", inputs=["a"], outputs=["b"])
    op.set_body(Graph("amanda/toy/1"))
    body = op.body
    body.rename_input_port("a", "a2")
    assert op.input_ports.names() == ["a2"] and body.input_ports.names() == ["a2"]


def test_retarget_is_one_change_and_is_undone_whole():
    g = Graph("ns/1")
    op = g.add_op("Relu", "r", inputs=["x"], outputs=["y"], attrs={"a": 1})
    before = g.copy()
    v = g.version
    op.retarget("Gelu", {"b": 2}, "ns/2", ("t", "rule"))
    assert (op.type, op.attrs, op.namespace, op.provenance) == ("Gelu", {"b": 2}, "ns/2", ("t", "rule"))
    assert g.version > v
    op.retarget("Relu", {"a": 1}, None, None)
    assert g == before
    with pytest.raises(RuntimeError):
        with g.atomic():
            op.retarget("Gelu", {"b": 2}, "ns/2", ("t", "rule"))
            raise RuntimeError("fails after the change")
    assert g == before
    assert (op.type, op.attrs, op.namespace, op.provenance) == ("Relu", {"a": 1}, None, None)


def test_atomic_blocks_nest_and_undo_on_any_exception():
    g = Graph("ns/1")
    a = g.add_op("Relu", "a", inputs=["x"], outputs=["y"])
    before = g.copy()
    with pytest.raises(KeyboardInterrupt):
        with g.atomic() as outer:
            assert outer is g
            with g.atomic() as inner:  # joins the outer block: its changes are undone with the outer one's
                assert inner is g
                g.add_op("Relu", "b", inputs=["x"], outputs=["y"])
            a.set_attr("k", 1)
            raise KeyboardInterrupt
    assert g == before and "b" not in g.ops and a.attrs == {}
    with g.atomic():
        g.add_op("Relu", "c", inputs=["x"], outputs=["y"])
    assert "c" in g.ops  # a block that ends normally keeps its changes and closes its journal
    with pytest.raises(ValueError):
        with g.atomic():
            g.remove_op("c")
            raise ValueError
    assert "c" in g.ops
