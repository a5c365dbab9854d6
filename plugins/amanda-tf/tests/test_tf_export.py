"""TF -> Amanda -> TF round trips: frozen .pb and SavedModel give the same outputs bit for bit."""

from __future__ import annotations

import os

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import tf_models as models  # noqa: E402 - the factories beside this file (tf_models: a name no other test folder uses)

from amanda_core.errors import AmandaError  # noqa: E402
from amanda_core.ir.graph import Graph  # noqa: E402
from amanda_tf.exporter import save_model  # noqa: E402
from amanda_tf.importer import load_model  # noqa: E402
from amanda_tf.runner import run  # noqa: E402

SLOW = pytest.mark.skipif(not os.environ.get("AMANDA_TF_SLOW"), reason="large Keras model: set AMANDA_TF_SLOW=1")


def _round_trip(graph, inputs, tmp_path):
    want = run(graph, inputs)
    pb = tmp_path / "model.pb"
    save_model(graph, str(pb))
    g1 = load_model(str(pb), inputs=graph.input_ports.names(), outputs=graph.output_ports.names())
    saved = tmp_path / "model.savedmodel"
    save_model(graph, str(saved))
    assert (saved / "saved_model.pb").exists()
    g2 = load_model(str(saved))
    for g in (g1, g2):
        assert sorted(g.input_ports.names()) == sorted(graph.input_ports.names())
        assert g.output_ports.names() == graph.output_ports.names()
        assert {p.name: p.dtype for p in g.input_ports} == {p.name: p.dtype for p in graph.input_ports}
        got = run(g, inputs)
        for name, value in want.items():
            assert got[name].dtype == value.dtype and got[name].shape == value.shape
            np.testing.assert_array_equal(got[name], value)  # bit for bit
    assert len(g1) == len(graph)
    return want


@pytest.mark.parametrize("positive", [True, False])
def test_cond_round_trip(tmp_path, positive):
    fn, inputs = models.cond_function(positive=positive)
    want = _round_trip(load_model(fn), inputs, tmp_path)
    np.testing.assert_array_equal(want["output_0"], fn(**inputs).numpy())


def test_while_round_trip(tmp_path):
    fn, inputs = models.while_function(steps=3)
    want = _round_trip(load_model(fn), inputs, tmp_path)
    np.testing.assert_array_equal(want["output_0"], fn(**inputs).numpy())


def test_text_model_round_trip(tmp_path):
    model, inputs = models.text_model(batch=3)
    want = _round_trip(load_model(model), inputs, tmp_path)
    np.testing.assert_array_equal(want["probs"], model(inputs["tokens"], training=False).numpy())


def test_mobilenet_v2_round_trip(tmp_path):
    model, inputs = models.mobilenet_v2(size=96, batch=2)
    want = _round_trip(load_model(model), inputs, tmp_path)
    ref = model(next(iter(inputs.values())), training=False).numpy()
    np.testing.assert_allclose(want["predictions"], ref, rtol=1e-4, atol=1e-6)


@pytest.mark.slow
@SLOW
@pytest.mark.parametrize("factory", ["resnet50", "mobilenet_v2", "inception_v3"])
def test_keras_applications_round_trip(tmp_path, factory):
    model, inputs = getattr(models, factory)()
    want = _round_trip(load_model(model), inputs, tmp_path)
    ref = model(next(iter(inputs.values())), training=False).numpy()
    np.testing.assert_allclose(want["predictions"], ref, rtol=1e-4, atol=1e-6)


def test_export_refuses_other_namespaces_and_leaves_nothing(tmp_path):
    g = Graph("amanda/onnx/18")
    with pytest.raises(AmandaError, match="amanda/tensorflow"):
        save_model(g, str(tmp_path / "x.pb"))
    fn, inputs = models.cond_function()
    graph = load_model(fn)
    op = next(o for o in graph if o.type == "Sum")
    graph.disconnect(op.input_ports[0])  # an unfed input: refused before anything is written
    for target in ("bad.pb", "bad.savedmodel"):
        with pytest.raises(AmandaError, match="not fed"):
            save_model(graph, str(tmp_path / target))
    assert sorted(os.listdir(tmp_path)) == []


def test_function_bodies_become_library_functions():
    fn, _ = models.while_function()
    graph = load_model(fn)
    gd = save_model(graph)
    names = {f.signature.name for f in gd.library.function}
    assert len(names) == len(gd.library.function) >= 4
    assert {n.name for n in gd.node if n.op == "Placeholder"} == {"x", "n"}
    assert [n.name for n in gd.node if n.op == "Identity"] == ["output_0"]


def test_a_saved_model_records_what_made_it(tmp_path):
    """The conversion's provenance goes into an asset file of the SavedModel, and the importer reads it back."""
    fn, _inputs = models.cond_function()
    graph = load_model(fn)
    record = {"amanda": "0.1.0", "source": "amanda/onnx/18", "tables": [{"name": "onnx-to-tf", "hash": "sha256:00"}]}
    graph.attrs["amanda_provenance"] = dict(record)
    save_model(graph, str(tmp_path / "m.savedmodel"))
    assert (tmp_path / "m.savedmodel" / "assets" / "amanda_provenance.json").is_file()
    assert load_model(str(tmp_path / "m.savedmodel")).attrs["amanda_provenance"] == record
    del graph.attrs["amanda_provenance"]
    save_model(graph, str(tmp_path / "plain.savedmodel"))
    assert "amanda_provenance" not in load_model(str(tmp_path / "plain.savedmodel")).attrs


def test_a_new_path_without_an_extension_is_a_saved_model_folder(tmp_path, capsys):
    """``-o model`` writes a SavedModel folder, as ``tf.saved_model.save`` takes such a path; a format of another
    namespace given such a path is told to name a file of its own kind, and nothing is written."""
    from amanda_core import io as amanda_io
    from amanda_core.cli.main import main

    fn, inputs = models.cond_function()
    graph = load_model(fn)
    assert amanda_io.save_model(graph, str(tmp_path / "exported")) == [str(tmp_path / "exported")]
    assert (tmp_path / "exported" / "saved_model.pb").is_file()
    back = load_model(str(tmp_path / "exported"))
    for name, value in run(graph, inputs).items():
        np.testing.assert_array_equal(run(back, inputs)[name], value)

    src = tmp_path / "m.yaml"
    assert main(["convert", str(tmp_path / "exported"), "-o", str(src), "--quiet"]) == 0
    assert main(["convert", str(src), "--to", "amanda/onnx/18", "-o", str(tmp_path / "plain"), "--quiet"]) != 0
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("amanda:")]
    assert len(err) == 1 and "plain: " in err[0] and "a new path without an extension" in err[0], err
    assert "name a .onnx file" in err[0], err
    assert not (tmp_path / "plain").exists()
    (tmp_path / "afile").write_text("not a model")  # an existing file without an extension is no folder
    with pytest.raises(AmandaError, match="files without an extension"):
        amanda_io.save_model(graph, str(tmp_path / "afile"))
    assert (tmp_path / "afile").read_text() == "not a model"
