import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amanda_core import CONTROL, FormatError, Graph
from amanda_core.ir import Tensor
from amanda_core.serialization import dump_graph, load_graph, load_op, save_graph, sidecar_path

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "examples" / "seed"


def roundtrip(g: Graph) -> Graph:
    text = dump_graph(g)
    g2 = load_graph(text, filename="<dumped>")
    assert g.diff(g2) == []
    assert dump_graph(g2) == text
    return g2


@pytest.mark.parametrize("name", sorted(p.name for p in SEED.glob("*.yaml")))
def test_every_seed_example_loads_and_round_trips(name):
    warnings: list[str] = []
    g = load_graph(SEED / name, warnings=warnings)
    assert g.verify() == []
    roundtrip(g)


def test_seed_pytorch_graph_structure_and_mapping_ports_warning():
    warnings: list[str] = []
    g = load_graph(SEED / "pytorch_single_layer.yaml", warnings=warnings)
    assert g.namespace == "amanda/pytorch/1.4.0"
    assert list(g.ops) == ["param", "t", "matmul", "relu"]
    assert g.ops["param"].output_ports["out0"].dtype == "Float(100, 784)"
    assert g.ops["matmul"].input_ports["in1"].source is g.ops["t"].output_ports["out0"]
    assert g.input_ports["in0"].consumers == (g.ops["matmul"].input_ports["in0"],)
    assert g.output_ports["out0"].source is g.ops["relu"].output_ports["out0"]
    assert len(warnings) == 1 and "pytorch_single_layer.yaml:12:" in warnings[0]
    assert "written as a mapping" in warnings[0]


def test_seed_fc_edge_from_an_input_port_is_read_as_the_only_output_with_a_warning():
    warnings: list[str] = []
    op = load_op(SEED / "tf_fc_subgraph.yaml", warnings=warnings)
    assert op.name == "fc" and op.type == "Dense" and op.attrs["units"] == 10
    body = op.body
    assert body is not None and list(body.ops) == ["dense/kernel", "dense/MatMul", "dense/Relu"]
    assert body.output_ports["logits"].source is body.ops["dense/Relu"].output_ports["activations"]
    assert body.input_ports["input"].consumers == (body.ops["dense/MatMul"].input_ports["a"],)
    assert len(warnings) == 1 and "dense/Relu.features" in warnings[0] and "activations" in warnings[0]


def test_seed_h_subgraph_op_boundary_ports_named_after_the_op():
    op = load_op(SEED / "op_h.yaml")
    assert op.input_ports.names() == ["hx", "hy"] and op.output_ports.names() == ["hk"]
    body = op.body
    assert body.input_ports["hx"].consumers == (body.ops["f"].input_ports["x"],)
    assert body.output_ports["hk"].source is body.ops["g"].output_ports["k"]
    text = dump_graph(load_graph(SEED / "op_h.yaml"))
    assert "- h.hx -> f.x" in text and "- g.k -> h.hk" in text


def test_type_written_under_attrs_is_the_op_type():
    g = load_graph(SEED / "op_g_attrs.yaml")
    assert g.ops["g"].type == "Relu" and g.ops["g"].attrs == {}
    both = load_graph("g:\n  type: Optional\n  attrs: {type: Relu}\n", filename="t.yaml")
    assert both.ops["g"].type == "Optional" and both.ops["g"].attrs == {"type": "Relu"}  # then it is an attribute


def test_ports_are_created_from_edges_when_an_op_declares_none():
    g = load_graph("graph:\n  ops:\n    a: {type: X}\n    b: {type: Y}\n  edges:\n    - a.out -> b.in\n"
                   "    - a.out -> b.other\n    - b.r -> graph.result\n", filename="t.yaml")
    assert g.ops["a"].output_ports.names() == ["out"]
    assert g.ops["b"].input_ports.names() == ["in", "other"]
    assert g.output_ports.names() == ["result"]


def test_control_edges_and_op_namespace_round_trip():
    g = Graph("amanda/onnx/13")
    a = g.add_op("A", outputs=["y"])
    b = g.add_op("B", inputs=["x"], namespace="amanda/onnx/ai.onnx.ml/3")
    g.connect(a.output_ports["y"], b.input_ports["x"])
    g.connect_control(a, b)
    text = dump_graph(g)
    assert f"- a.{CONTROL} -> b.{CONTROL}" in text
    g2 = roundtrip(g)
    assert g2.ops["b"].control_inputs == (g2.ops["a"],)
    assert g2.ops["b"].namespace == "amanda/onnx/ai.onnx.ml/3"


def test_nested_bodies_to_any_depth():
    g = Graph("ns/x")
    x = g.add_input_port("x")
    outer = g.add_op("Outer", "outer", inputs=["i"], outputs=["o"])
    g.connect(x, outer.input_ports["i"])
    level = outer
    for depth in range(4):
        body = Graph()
        level.set_body(body)
        inner = body.add_op("Inner", f"inner{depth}", inputs=["i"], outputs=["o"])
        body.connect(body.input_ports["i"], inner.input_ports["i"])
        body.connect(inner.output_ports["o"], body.output_ports["o"])
        level = inner
    g2 = roundtrip(g)
    deepest = g2.ops["outer"].body.ops["inner0"].body.ops["inner1"].body.ops["inner2"].body.ops["inner3"]
    assert deepest.path == "outer/inner0/inner1/inner2/inner3"


def test_attribute_values_of_every_kind_round_trip():
    sub = Graph()
    sub.add_input_port("x", "tensor(float)")
    r = sub.add_op("Relu", inputs=["X"], outputs=["Y"])
    sub.connect(sub.input_ports["x"], r.input_ports["X"])
    g = Graph("amanda/onnx/13", {"producer": "test", "opset": {"": 13}})
    g.add_op("Any", "v", attrs={
        "i": 3, "f": 0.1, "b": False, "s": "text", "none": None, "bytes": b"\x00\xff",
        "ints": [1, 2, 3], "nested": {"a": [1, {"b": 2}]}, "tuple": (1, "a"), "empty": [],
        "np_scalar": np.float32(2.5), "np_int": np.int64(7),
        "graph": sub, "graphs": [sub.copy(), sub.copy()],
        "f16": np.array([1.0, 65504.0, -0.0], np.float16),
        "nan": np.array([np.nan, np.inf, -np.inf], np.float64),
        "i8": np.array([[-128, 127]], np.int8), "u64": np.array([2**64 - 1], np.uint64),
        "bools": np.array([True, False]), "c64": np.array([1 + 2j], np.complex64),
        "scalar0d": np.array(5, np.int32), "empty_t": np.zeros((0, 3), np.float32),
        "strs": np.array([b"a", b"\xfe\xff"], dtype=object), "ustr": np.array(["ab", "c"]),
    })
    g2 = roundtrip(g)
    assert g2.ops["v"].attrs["tuple"] == (1, "a")
    assert isinstance(g2.ops["v"].attrs["np_scalar"], np.float32)
    assert str(g2.ops["v"].attrs["f16"].dtype) == "float16"


def test_inexact_float_lists_fall_back_to_exact_bytes():
    weird = np.frombuffer(np.array([0x7FC00001], np.uint32).tobytes(), np.float32)  # a NaN with a payload
    g = Graph()
    g.add_op("C", "c", attrs={"v": weird})
    text = dump_graph(g)
    assert "base64:" in text
    back = load_graph(text, filename="t.yaml").ops["c"].attrs["v"]
    assert back.tobytes() == weird.tobytes()


def test_bfloat16_and_float8_tensors_round_trip():
    import ml_dtypes
    g = Graph()
    g.add_op("C", "c", attrs={"bf": np.array([1.5, -2.0, 3.0e38], ml_dtypes.bfloat16),
                              "f8": np.array([0.5, 448.0], ml_dtypes.float8_e4m3fn)})
    g2 = roundtrip(g)
    assert str(g2.ops["c"].attrs["bf"].dtype) == "bfloat16"


def test_large_tensors_go_to_a_lazily_mapped_sidecar(tmp_path):
    w = np.random.default_rng(0).standard_normal((300, 200)).astype(np.float32)
    g = Graph("amanda/x/1")
    c = g.add_op("Const", "w", attrs={"value": w, "again": w, "tiny": np.array([1, 2], np.int64)},
                 outputs=["y"])
    g.add_op("Const", "w2", attrs={"value": w})  # the same array object is written once
    path = tmp_path / "model.yaml"
    written = save_graph(g, path)
    assert written == [str(path), sidecar_path(path)] and sidecar_path(path).endswith("model.tensors")
    assert os.path.getsize(sidecar_path(path)) == w.nbytes
    text = path.read_text()
    assert "tensor_data: model.tensors" in text and "offset: 0" in text and "data: [1, 2]" in text
    g2 = load_graph(path)
    t = g2.ops["w"].attrs["value"]
    assert isinstance(t, Tensor) and not t.is_loaded
    arr = t.numpy()
    assert np.array_equal(arr, w) and not arr.flags.owndata and not arr.flags.writeable
    assert g2 == g
    assert c.attrs["tiny"].dtype == np.int64
    save_graph(g2, tmp_path / "again.yaml")
    assert (tmp_path / "again.yaml").read_text().replace("again.tensors", "model.tensors") == text
    assert (tmp_path / "again.tensors").read_bytes() == Path(sidecar_path(path)).read_bytes()


def test_resaving_over_the_file_a_lazy_tensor_came_from(tmp_path):
    g = Graph()
    g.add_op("Const", "a", attrs={"value": np.arange(1000, dtype=np.int32)})
    path = tmp_path / "m.yaml"
    save_graph(g, path)
    g2 = load_graph(path)
    g2.add_op("Const", "b", attrs={"value": np.arange(500, dtype=np.float64)})
    save_graph(g2, path)
    g3 = load_graph(path)
    assert np.array_equal(g3.ops["a"].attrs["value"].numpy(), np.arange(1000, dtype=np.int32))
    assert np.array_equal(g3.ops["b"].attrs["value"].numpy(), np.arange(500, dtype=np.float64))


def test_sidecar_problems_are_reported(tmp_path):
    g = Graph()
    g.add_op("Const", "a", attrs={"value": np.arange(1000, dtype=np.int32)})
    path = tmp_path / "m.yaml"
    save_graph(g, path)
    side = Path(sidecar_path(path))
    side.write_bytes(side.read_bytes()[:100])
    with pytest.raises(FormatError, match=r"m\.yaml:\d+: !tensor at offset 0 \(4000 bytes\) lies beyond"):
        load_graph(path)
    side.unlink()
    with pytest.raises(FormatError, match=r"tensor data file 'm.tensors': cannot open"):
        load_graph(path)


def test_failed_save_leaves_no_file(tmp_path):
    g = Graph()
    g.add_op("Const", "a", attrs={"value": np.arange(1000, dtype=np.int32), "bad": object()})
    with pytest.raises(FormatError, match="cannot write an attribute value of type builtins.object"):
        save_graph(g, tmp_path / "m.yaml")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("text, message, line", [
    ("graph:\n  ops:\n    a: {type: X\n", "expected ',' or '}'", 4),
    ("graph:\n  ops:\n    a: {type: X}\n    a: {type: Y}\n", "duplicate key 'a'", 4),
    ("graph:\n  ops:\n    a: {type: X, outputs: [y]}\n", "unknown key 'outputs' in op 'a'", 3),
    ("graph:\n  ops:\n    a: {type: X, output_ports: [y]}\n  edges:\n    - a.y -> b.x\n",
     "names op 'b', which is not in this graph", 5),
    ("graph:\n  ops:\n    a: {type: X, output_ports: [y]}\n    b: {type: Y, input_ports: [x]}\n"
     "  edges:\n    - a.z -> b.x\n", "op 'a' has no output port 'z'", 6),
    ("graph:\n  ops:\n    a: {type: X, output_ports: [y, z]}\n    b: {type: Y, input_ports: [x]}\n"
     "  edges:\n    - a.y -> b.x\n    - a.z -> b.x\n", "already fed by a.y", 7),
    ("graph:\n  ops:\n    a: {type: X}\n  edges:\n    - a.y => b.x\n", "an edge is written", 5),
    ("graph:\n  ops:\n    a: {type: X}\n    b: {type: X}\n  edges:\n    - a.^control -> b.x\n",
     "a control edge joins two", 6),
    ("graph:\n  ops:\n    a: {type: X, attrs: {v: !tensor {dtype: float32, shape: [2], data: [1]}}}\n",
     "bad !tensor data: 1 values for shape", 3),
    ("graph:\n  ops:\n    a: {type: X, attrs: {v: !nosuchtag 1}}\n", "unknown tag !nosuchtag", 3),
    ("graph:\n  ops:\n    a: {type: X, attrs: {v: !!python/object:os.system {}}}\n",
     "could not determine a constructor", 3),
    ("graph:\n  input_ports: {x: 1}\n  ops: [a, b]\n", "'ops' is a mapping", 3),
    ("graph: [1, 2]\n", "a graph is a mapping", 1),
    ("nothing: here\nelse: 1\n", "expected the key 'graph'", 1),
])
def test_malformed_input_says_file_line_and_what(text, message, line):
    with pytest.raises(FormatError) as info:
        load_graph(text, filename="bad.yaml")
    assert message in str(info.value)
    assert info.value.location.file == "bad.yaml"
    assert info.value.location.line == line


def test_cycles_load_and_are_reported_by_verify():
    g = load_graph("graph:\n  ops:\n    a: {type: X, input_ports: [i], output_ports: [o]}\n"
                   "    b: {type: X, input_ports: [i], output_ports: [o]}\n"
                   "  edges:\n    - a.o -> b.i\n    - b.o -> a.i\n", filename="c.yaml")
    assert any("cycle through ops: a -> b -> a" in p for p in g.verify())


# --------------------------------------------------------------------------- property: random graphs round trip

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_/:0123456789", min_size=1, max_size=8).filter(
    lambda s: s != "graph")
values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.floats(allow_nan=True) | st.text(max_size=10)
    | st.binary(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8)
arrays = st.sampled_from(["float32", "int64", "uint8", "float64", "bool"]).flatmap(
    lambda dt: st.lists(st.integers(0, 3), min_size=0, max_size=3).map(
        lambda shape: np.arange(int(np.prod(shape)) if shape else 1).astype(dt).reshape(shape)))


@st.composite
def graphs(draw):
    g = Graph(draw(st.none() | st.just("amanda/test/1")))
    n_in = draw(st.integers(0, 2))
    for i in range(n_in):
        g.add_input_port(f"in{i}", draw(st.none() | st.sampled_from(["float32", "Float(1, 2)", "tensor(int64)"])))
    producers = list(g.input_ports)
    ops = []
    for _ in range(draw(st.integers(0, 8))):
        name = g.unique_name(draw(names))
        attrs = draw(st.dictionaries(st.text(min_size=1, max_size=6), values | arrays, max_size=3))
        op = g.add_op(draw(st.none() | names), name, attrs=attrs,
                      inputs=draw(st.integers(0, 3)), outputs=draw(st.integers(0, 2)))
        for p in op.input_ports:
            if producers and draw(st.booleans()):
                g.connect(draw(st.sampled_from(producers)), p)
        if ops and draw(st.booleans()):
            g.connect_control(draw(st.sampled_from(ops)), op)
        producers.extend(op.output_ports)
        ops.append(op)
    for i in range(draw(st.integers(0, 2))):
        o = g.add_output_port(f"out{i}")
        if producers:
            g.connect(draw(st.sampled_from(producers)), o)
    return g


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_random_graphs_round_trip(g):
    assert g.verify() == []
    roundtrip(g)


def test_dotted_op_and_port_names_round_trip():
    g = Graph("amanda/onnx/13")
    x = g.add_input_port("input.1", "tensor(float)[1,3]")
    a = g.add_op("Relu", "layer1.relu", inputs=["X"], outputs=["Y"])
    b = g.add_op("Custom", "b", inputs=["in.a"], outputs=["out.b"])
    g.connect(x, a.input_ports["X"])
    g.connect(a.output_ports["Y"], b.input_ports["in.a"])
    g.connect(b.output_ports["out.b"], g.add_output_port("logits.0"))
    text = dump_graph(g)
    assert "- graph.input.1 -> layer1.relu.X" in text and "- b.out.b -> graph.logits.0" in text
    roundtrip(g)


def test_an_edge_end_with_two_readings_is_refused():
    g = Graph()
    g.add_op("A", "a", outputs=["b.c"])
    g.add_op("A", "a.b", outputs=["c"])
    d = g.add_op("D", "d", inputs=["x", "y"])
    g.connect(g.ops["a"].output_ports["b.c"], d.input_ports["x"])
    with pytest.raises(FormatError, match="edge end 'a.b.c' can be read as"):
        dump_graph(g)
    text = ("graph:\n  ops:\n    a: {output_ports: [b.c]}\n    a.b: {output_ports: [c]}\n"
            "    d: {input_ports: [x]}\n  edges:\n    - a.b.c -> d.x\n")
    with pytest.raises(FormatError, match=r"bad.yaml:7:.*can be read as 'a.b' port 'c' or 'a' port 'b.c'"):
        load_graph(text, filename="bad.yaml")


def test_op_meta_round_trips_and_counts_in_equality():
    g = Graph()
    op = g.add_op("Conv", "c", attrs={"group": 1})
    op.meta["doc_string"] = "a convolution"
    op.meta["value_names"] = ["conv_out"]
    g2 = roundtrip(g)
    assert g2.ops["c"].meta == {"doc_string": "a convolution", "value_names": ["conv_out"]}
    g2.ops["c"].meta["doc_string"] = "changed"
    assert any("meta 'doc_string'" in d for d in g.diff(g2))
    assert g.copy().ops["c"].meta == op.meta


def test_an_attribute_named_type_beside_the_op_type():
    g = Graph()
    g.add_op("Optional", "o", attrs={"type": "tensor(float)"})
    g.add_op(None, "untyped", attrs={"type": "seq(tensor(int64))"})
    text = dump_graph(g)
    assert "type: null" in text
    g2 = roundtrip(g)
    assert g2.ops["o"].type == "Optional" and g2.ops["o"].attrs == {"type": "tensor(float)"}
    assert g2.ops["untyped"].type is None and g2.ops["untyped"].attrs == {"type": "seq(tensor(int64))"}


def test_iter_tensors_finds_tensors_of_nested_graphs_and_their_attributes():
    from amanda_core.serialization import iter_tensors

    top_w, op_w, body_w, branch_w, branch_op_w = (np.full(2, float(i), np.float32) for i in range(5))
    branch = Graph(attrs={"init": branch_w})
    branch.add_op("Const", "inner", attrs={"value": branch_op_w}, outputs=["y"])
    g = Graph("amanda/toy/1", {"w": top_w})
    g.add_op("If", "cond", attrs={"then_branch": branch, "value": op_w}, outputs=["y"])
    holder = g.add_op("Block", "holder", outputs=["y"])
    body = Graph(attrs={"w": body_w})
    holder.set_body(body)
    found = {id(t) for t in iter_tensors(g)}
    assert found == {id(top_w), id(op_w), id(body_w), id(branch_w), id(branch_op_w)}
