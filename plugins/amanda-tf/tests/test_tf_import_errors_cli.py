"""Bad TensorFlow input through ``amanda convert``: each a one-line error naming what is wrong, a non-zero exit, and
no output file left (the command runs in this process: ``amanda_core.cli.main.main``)."""

from __future__ import annotations

import os

import pytest

tf = pytest.importorskip("tensorflow")

from amanda_core.cli.main import main  # noqa: E402


def _fails(capsys, tmp_path, *argv: str) -> str:
    """Run ``amanda convert ARGV -o out.onnx``; assert a non-zero exit, one error line and no output; return it."""
    out = tmp_path / "out.onnx"
    code = main(["convert", *argv, "--to", "amanda/onnx/18", "-o", str(out), "--quiet"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("amanda:")]
    assert code != 0
    assert len(err) == 1, err
    assert not out.exists() and not any(p.name.startswith("out") for p in tmp_path.iterdir())
    return err[0]


def test_folder_that_is_not_a_savedmodel(capsys, tmp_path):
    folder = tmp_path / "notsaved"
    folder.mkdir()
    (folder / "variables.txt").write_text("x")
    line = _fails(capsys, tmp_path, str(folder))
    assert str(folder) in line and "is a folder" in line and "tensorflow" in line


def test_savedmodel_without_the_default_signature(capsys, tmp_path):
    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([2], tf.float32, name="x")])
        def __call__(self, x):
            return x * 2.0

    m = M()
    saved = tmp_path / "sm"
    tf.saved_model.save(m, str(saved), signatures={"predict": m.__call__, "score": m.__call__})
    line = _fails(capsys, tmp_path, str(saved))
    assert "no signature 'serving_default'" in line and "(signatures: predict, score; --signature" in line


def test_signature_chooses_one_of_a_savedmodel(capsys, tmp_path):
    import numpy as np

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([2], tf.float32, name="x")])
        def double(self, x):
            return {"y": x * 2.0}

        @tf.function(input_signature=[tf.TensorSpec([2], tf.float32, name="x")])
        def negate(self, x):
            return {"y": -x}

    m = M()
    saved = tmp_path / "sm"
    tf.saved_model.save(m, str(saved), signatures={"double": m.double, "negate": m.negate})
    x = np.array([1.5, -2.0], np.float32)
    for name, want in (("double", x * 2.0), ("negate", -x)):
        out = tmp_path / f"{name}.onnx"
        assert main(["convert", str(saved), "--signature", name, "--to", "amanda/onnx/18", "-o", str(out),
                     "--quiet"]) == 0
        import onnxruntime as ort

        (got,) = ort.InferenceSession(str(out)).run(None, {"x": x})
        np.testing.assert_array_equal(got, want)
        # the check reads the same signature of the SavedModel, and ignores the option for the ONNX file
        assert main(["check", str(saved), str(out), "--signature", name, "--quiet"]) == 0
    line = _fails(capsys, tmp_path, str(saved), "--signature", "nope")
    assert "no signature 'nope'" in line and "double, negate" in line


def test_signature_of_a_model_without_signatures(capsys, tmp_path):
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]))
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    line = _fails(capsys, tmp_path, str(path), "--signature", "serving_default")
    assert str(path) in line and "no signatures to choose from" in line
    keras = pytest.importorskip("keras")
    k = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    kpath = tmp_path / "k.keras"
    k.save(str(kpath))
    line = _fails(capsys, tmp_path, str(kpath), "--signature", "serving_default")
    assert "k.keras" in line and "only a SavedModel directory has signatures" in line


def test_pb_that_does_not_parse(capsys, tmp_path):
    bad = tmp_path / "broken.pb"
    bad.write_bytes(b"\x0a\xff\xff\xff not a graph at all")
    line = _fails(capsys, tmp_path, str(bad))
    assert "broken.pb" in line and "not a GraphDef" in line


def test_op_from_an_unloaded_library(capsys, tmp_path):
    from tensorflow.core.framework import graph_pb2

    gd = graph_pb2.GraphDef()
    ph = gd.node.add(name="x", op="Placeholder")
    ph.attr["dtype"].type = 1
    node = gd.node.add(name="fancy", op="ZeroOutCustom")
    node.input.append("x")
    pb = tmp_path / "custom.pb"
    pb.write_bytes(gd.SerializeToString())
    line = _fails(capsys, tmp_path, str(pb), "--input", "x:float32[2]", "--output", "fancy")
    assert "'ZeroOutCustom'" in line and "node 'fancy'" in line and "tf.load_op_library" in line


def _frozen_pb(tmp_path) -> str:
    from amanda_tf.exporter import save_model
    from amanda_tf.importer import load_model

    f = tf.function(lambda x: x * x, input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    path = str(tmp_path / "square.pb")
    save_model(load_model(f), path)
    return path


@pytest.mark.parametrize("spec,words", [
    ("x:float32[2,5]", "does not fit"),
    ("x:float32[2,4,1]", "does not fit"),
    ("x:int32[2,4]", "int32"),
    ("nothere:float32[2,4]", "no placeholder 'nothere'"),
])
def test_input_that_does_not_fit(capsys, tmp_path, spec, words):
    pb = _frozen_pb(tmp_path)
    line = _fails(capsys, tmp_path, pb, "--input", spec, "--output", "output_0")
    assert words in line, line
    os.remove(pb)


def test_output_that_names_nothing(capsys, tmp_path):
    pb = _frozen_pb(tmp_path)
    line = _fails(capsys, tmp_path, pb, "--input", "x:float32[2,4]", "--output", "nowhere")
    assert "nowhere" in line, line


def test_a_fitting_input_converts(capsys, tmp_path):
    """The same command with an --input that fits writes the model (so the failures above are the inputs')."""
    pb = _frozen_pb(tmp_path)
    out = tmp_path / "ok.onnx"
    assert main(["convert", pb, "--input", "x:float32[2,4]", "--output", "output_0", "--to", "amanda/onnx/18",
                 "-o", str(out), "--quiet"]) == 0
    assert out.exists()
