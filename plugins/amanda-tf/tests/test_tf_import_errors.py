"""Bad input to the TensorFlow importer: one-line AmandaErrors that say what and where."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from amanda_core.errors import AmandaError  # noqa: E402
from amanda_tf.importer import load_model  # noqa: E402


def _one_line(excinfo):
    text = str(excinfo.value)
    assert "\n" not in text
    return text


def test_directory_that_is_not_a_savedmodel(tmp_path):
    (tmp_path / "junk.txt").write_text("x")
    with pytest.raises(AmandaError) as e:
        load_model(str(tmp_path))
    assert "not a SavedModel directory" in _one_line(e) and str(tmp_path) in str(e.value)


def test_missing_signature_lists_the_ones_there(tmp_path):
    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([2], tf.float32, name="x")])
        def __call__(self, x):
            return x + 1

    m = M()
    tf.saved_model.save(m, str(tmp_path / "sm"), signatures={"serving_default": m.__call__, "other": m.__call__})
    with pytest.raises(AmandaError) as e:
        load_model(str(tmp_path / "sm"), signature="predict")
    assert "no signature 'predict'" in _one_line(e) and "other, serving_default" in str(e.value)
    g = load_model(str(tmp_path / "sm"), signature="other")
    assert g.input_ports.names() == ["x"]


def test_pb_that_does_not_parse(tmp_path):
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"\xff\xfe not a graph \x00\x01")
    with pytest.raises(AmandaError) as e:
        load_model(str(bad))
    assert "bad.pb" in _one_line(e) and "GraphDef" in str(e.value)


def _graph_def_with(op_type):
    from tensorflow.core.framework import graph_pb2

    gd = graph_pb2.GraphDef()
    ph = gd.node.add(name="x", op="Placeholder")
    ph.attr["dtype"].type = 1
    node = gd.node.add(name="custom", op=op_type)
    node.input.append("x")
    return gd


def test_op_not_in_the_registry(tmp_path):
    pb = tmp_path / "custom.pb"
    pb.write_bytes(_graph_def_with("MyFancyCustomOp").SerializeToString())
    with pytest.raises(AmandaError) as e:
        load_model(str(pb), outputs=["custom"])
    text = _one_line(e)
    assert "'MyFancyCustomOp'" in text and "'custom'" in text and "tf.load_op_library" in text


@tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
def _square(x):
    return x * x


def test_inputs_that_do_not_fit(tmp_path):
    for spec, words in [("x:float32[2,5]", "does not fit"), ("x:int32[2,4]", "is float32, not int32"),
                        ("x:float32[2,4,1]", "does not fit"), ("y:float32[2,4]", "no such input")]:
        with pytest.raises(AmandaError) as e:
            load_model(_square, inputs=[spec])
        assert words in _one_line(e), (spec, str(e.value))
    keras = pytest.importorskip("keras")
    inp = keras.Input((3,), name="features")
    model = keras.Model(inp, keras.layers.Dense(2)(inp))
    with pytest.raises(AmandaError, match="does not fit"):
        load_model(model, inputs=["features:float32[1,4]"])
    g = load_model(model, inputs=["features:float32[1,3]"])
    assert g.input_ports[0].dtype == "float32[1,3]"
    from amanda_tf.exporter import save_model

    save_model(load_model(_square), str(tmp_path / "sq.pb"))
    with pytest.raises(AmandaError, match="does not fit"):
        load_model(str(tmp_path / "sq.pb"), inputs=["x:float32[2,3]"], outputs=["output_0"])
    with pytest.raises(AmandaError, match="no placeholder 'z'"):
        load_model(str(tmp_path / "sq.pb"), inputs=["z:float32[2,4]"], outputs=["output_0"])
    g = load_model(str(tmp_path / "sq.pb"), inputs=["x:float32[2,4]"], outputs=["output_0"])
    assert g.input_ports[0].dtype == "float32[2,4]"
    assert np.array_equal(
        __import__("amanda_tf.runner", fromlist=["run"]).run(g, {"x": np.ones((2, 4), np.float32)})["output_0"],
        np.ones((2, 4), np.float32))
