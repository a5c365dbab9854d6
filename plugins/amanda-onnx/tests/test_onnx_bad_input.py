"""Bad ONNX input: each case gives a clear amanda_core error naming the file, node or tensor at fault."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import amanda_onnx
from amanda_core import AmandaError, FormatError, GraphCycleError
from amanda_core.cli.main import main


def fvi(name, shape=None):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def model_of(nodes, inputs, outputs, initializers=(), opsets=None):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(g, opset_imports=opsets or [helper.make_opsetid("", 17)])


def good_model():
    w = numpy_helper.from_array(np.arange(64, dtype=np.float32), "w")
    return model_of([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [fvi("x", [64])], [fvi("y", [64])],
                    [w])


@pytest.mark.parametrize("keep", [0.5, 0.9, -1])
def test_truncated_file(tmp_path, keep):
    data = good_model().SerializeToString()
    cut = len(data) - 1 if keep == -1 else int(len(data) * keep)
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[:cut])
    with pytest.raises(FormatError) as e:
        amanda_onnx.load_model(path)
    assert str(path) in str(e.value) and "not an ONNX model" in str(e.value)


@pytest.mark.parametrize("content", [b"\xff" * 100, b"hello, this is not a model\n", bytes(range(256)) * 4])
def test_garbage_file(tmp_path, content):
    path = tmp_path / "garbage.onnx"
    path.write_bytes(content)
    with pytest.raises(FormatError, match=f"{path}.*not an ONNX model"):
        amanda_onnx.load_model(path)


def test_empty_and_missing_files(tmp_path):
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(FormatError, match=f"{empty}.*empty file"):
        amanda_onnx.load_model(empty)
    with pytest.raises(FormatError, match="missing.onnx.*cannot read file"):
        amanda_onnx.load_model(tmp_path / "missing.onnx")


def test_garbage_bytes_in_memory():
    with pytest.raises(FormatError, match="not an ONNX model"):
        amanda_onnx.load_model(b"\x08\x07\x12\x03abc")


def test_missing_external_data_file(tmp_path):
    m = good_model()
    onnx.save(m, tmp_path / "m.onnx", save_as_external_data=True, location="weights.bin", size_threshold=0)
    (tmp_path / "weights.bin").unlink()
    with pytest.raises(FormatError) as e:
        amanda_onnx.load_model(tmp_path / "m.onnx")
    msg = str(e.value)
    assert "m.onnx" in msg and "'w'" in msg and "weights.bin" in msg and "not found" in msg


def test_external_data_file_too_short(tmp_path):
    m = good_model()
    onnx.save(m, tmp_path / "m.onnx", save_as_external_data=True, location="weights.bin", size_threshold=0)
    (tmp_path / "weights.bin").write_bytes(b"\0" * 10)
    with pytest.raises(FormatError, match="'w'.*weights.bin has 10 bytes"):
        amanda_onnx.load_model(tmp_path / "m.onnx")


def test_external_data_outside_the_model_directory(tmp_path):
    m = good_model()
    t = m.graph.initializer[0]
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    e = t.external_data.add()
    e.key, e.value = "location", "../elsewhere.bin"
    with pytest.raises(FormatError, match="'w'.*must be a relative path inside"):
        amanda_onnx.load_model(m, base_dir=tmp_path)


def test_external_data_needs_a_directory_when_not_read_from_a_file(tmp_path):
    m = good_model()
    onnx.save(m, tmp_path / "m.onnx", save_as_external_data=True, location="w.bin", size_threshold=0)
    proto = onnx.load(tmp_path / "m.onnx", load_external_data=False)
    with pytest.raises(FormatError, match="base_dir"):
        amanda_onnx.load_model(proto)
    g = amanda_onnx.load_model(proto, base_dir=tmp_path)
    assert g.ops["w"].attrs["value"].numpy().tolist() == list(range(64))


def test_a_node_reading_a_value_nobody_produces():
    m = model_of([helper.make_node("Relu", ["nowhere"], ["y"], name="lost")], [fvi("x")], [fvi("y")])
    with pytest.raises(FormatError, match="node 'lost' \\(Relu\\) reads the value 'nowhere', which no node"):
        amanda_onnx.load_model(m)


def test_a_graph_output_nobody_produces():
    m = model_of([helper.make_node("Relu", ["x"], ["y"], name="r")], [fvi("x")], [fvi("z")])
    with pytest.raises(FormatError, match="graph output 'z' is produced by no node"):
        amanda_onnx.load_model(m)


def test_duplicate_output_names():
    m = model_of([helper.make_node("Relu", ["x"], ["y"], name="first"),
                  helper.make_node("Neg", ["x"], ["y"], name="second")], [fvi("x")], [fvi("y")])
    with pytest.raises(FormatError, match="'y' is produced twice, by 'first' \\(Relu\\) and by 'second' \\(Neg\\)"):
        amanda_onnx.load_model(m)


def test_a_node_output_named_like_a_graph_input():
    m = model_of([helper.make_node("Relu", ["x"], ["x"], name="loop")], [fvi("x")], [fvi("x")])
    with pytest.raises(FormatError, match="'x' is produced twice, by a graph input and by 'loop'"):
        amanda_onnx.load_model(m)


def test_duplicate_graph_inputs():
    m = model_of([helper.make_node("Relu", ["x"], ["y"], name="r")], [fvi("x"), fvi("x")], [fvi("y")])
    with pytest.raises(FormatError, match="graph input 'x' is listed twice"):
        amanda_onnx.load_model(m)


def test_a_graph_cycle():
    m = model_of([helper.make_node("Relu", ["b"], ["a"], name="na"),
                  helper.make_node("Neg", ["a"], ["b"], name="nb")], [fvi("x")], [fvi("b")])
    with pytest.raises(GraphCycleError) as e:
        amanda_onnx.load_model(m)
    assert set(e.value.ops) == {"na", "nb"} and "na" in str(e.value) and "nb" in str(e.value)


def test_a_node_list_out_of_order_is_not_a_cycle():
    m = model_of([helper.make_node("Neg", ["a"], ["y"], name="second"),
                  helper.make_node("Relu", ["x"], ["a"], name="first")], [fvi("x", [1])], [fvi("y", [1])])
    g = amanda_onnx.load_model(m)
    assert [op.name for op in g.topological_order()] == ["first", "second"]
    exported = amanda_onnx.to_model(g)  # written in an order ONNX accepts
    assert [n.name for n in exported.graph.node] == ["first", "second"]
    onnx.checker.check_model(exported)


def test_an_unknown_domain_is_imported_and_exported_as_is():
    m = model_of([helper.make_node("Mystery", ["x"], ["y"], domain="org.nobody", name="m", level=3)], [fvi("x")],
                 [fvi("y")], opsets=[helper.make_opsetid("", 17), helper.make_opsetid("org.nobody", 5)])
    g = amanda_onnx.load_model(m)
    op = g.ops["m"]
    assert op.namespace == "amanda/onnx/org.nobody/5" and op.input_ports.names() == ["in0"]
    assert amanda_onnx.to_model(g).SerializeToString(deterministic=True) == m.SerializeToString(deterministic=True)


def test_node_without_an_op_type():
    m = model_of([helper.make_node("Relu", ["x"], ["y"], name="r")], [fvi("x")], [fvi("y")])
    m.graph.node[0].ClearField("op_type")
    with pytest.raises(FormatError, match="node 'r' has no op_type"):
        amanda_onnx.load_model(m)


def test_tensor_data_that_does_not_fit_its_shape():
    m = good_model()
    m.graph.initializer[0].raw_data = b"\0" * 12
    with pytest.raises(FormatError, match="initializer.*'w'.*raw_data has 12 bytes, shape \\[64\\] needs 256"):
        amanda_onnx.load_model(m)


def test_an_attribute_given_twice():
    node = helper.make_node("Concat", ["x", "x"], ["y"], name="cat", axis=0)
    node.attribute.append(helper.make_attribute("axis", 1))
    m = model_of([node], [fvi("x", [1])], [fvi("y", [2])])
    with pytest.raises(FormatError, match="node 'cat' \\(Concat\\) has the attribute 'axis' twice"):
        amanda_onnx.load_model(m)


def test_not_a_model_object():
    with pytest.raises(TypeError, match="path, bytes"):
        amanda_onnx.load_model(12)


def test_errors_are_amanda_errors(tmp_path, capsys):
    # what bad input raises is an AmandaError, which the command line prints as one line (a plain Exception
    # would be reported as an internal error)
    path = tmp_path / "cut.onnx"
    path.write_bytes(good_model().SerializeToString()[:20])
    cycle = model_of([helper.make_node("Relu", ["b"], ["a"], name="na"),
                      helper.make_node("Neg", ["a"], ["b"], name="nb")], [fvi("x")], [fvi("b")])
    for bad, kind in ((path, FormatError), (cycle, GraphCycleError)):
        with pytest.raises(AmandaError) as e:
            amanda_onnx.load_model(bad)
        assert type(e.value) is kind
    cycle_path = tmp_path / "cycle.onnx"
    cycle_path.write_bytes(cycle.SerializeToString())
    for bad, where in ((path, str(path)), (cycle_path, "na -> nb -> na")):  # one line with what and where
        for command in (["inspect", str(bad)], ["convert", str(bad), "--to", "amanda/onnx/21", "-o",
                                                  str(tmp_path / "out.onnx")]):
            assert main(command) != 0
            err = capsys.readouterr().err
            assert len(err.strip().splitlines()) == 1 and where in err and "Traceback" not in err, err
            assert str(bad) in err, err  # the model it is about, a cycle's too
            assert err.startswith("amanda: error: ") and "internal error" not in err.lower(), err
            assert not (tmp_path / "out.onnx").exists()
