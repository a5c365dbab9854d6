"""Keras LSTM end to end: the keras-lstm pass writes one ONNX LSTM, onnxruntime matches Keras at batch 1 and 3, the
ONNX graph goes back to TensorFlow (BlockLSTMV2) and matches again, and Keras -> torch (.pt2) from the command line
(torch runs in a child process: this process imports TensorFlow).  Models: ``lstm_models.py``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import lstm_models
import numpy as np
import pytest

pytest.importorskip("tensorflow")

TOL = 1e-4
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


@pytest.fixture(scope="module")
def plugins() -> Any:
    import amanda_onnx.plugin
    import amanda_tf.plugin
    from amanda_core.plugin import PluginManager

    pm = PluginManager(autoload=False)
    pm.register(amanda_tf.plugin, "amanda-tf")
    pm.register(amanda_onnx.plugin, "amanda-onnx")
    return pm


def _tables(pm: Any, names: tuple[str, ...]) -> list[Any]:
    """The registered tables of the given names (other parts in progress elsewhere stay out of the way)."""
    from amanda_core.mapping import registered_tables

    return [t for t in registered_tables(pm.registry()) if t.name in names]


def _to_onnx(model: Any, pm: Any) -> Any:
    from amanda_core.mapping import convert
    from amanda_core.plugin.passes import registered_passes
    from amanda_tf.importer import load_model

    tables = _tables(pm, ("tf-to-onnx",))
    return convert(load_model(model), "amanda/onnx/18", tables, pm.registry().namespaces,
                   passes=registered_passes(pm))


def _close(got: np.ndarray, ref: np.ndarray) -> float:
    assert got.shape == ref.shape, (got.shape, ref.shape)
    diff = float(np.abs(got.astype(np.float64) - ref.astype(np.float64)).max())
    scale = max(float(np.abs(ref).max()), 1e-12)
    assert diff <= TOL or diff / scale <= TOL, f"max abs diff {diff}, relative {diff / scale}"
    return diff


def _ids(batch: int) -> np.ndarray:
    return np.random.default_rng(batch).integers(0, lstm_models.VOCAB, (batch, lstm_models.STEPS)).astype(np.int32)


def _refs(model: Any, ids: np.ndarray) -> list[np.ndarray]:
    out = model(ids)
    return [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]


@pytest.mark.parametrize("factory", ["text_lstm", "text_lstm_sequences", "text_lstm_states", "text_lstm_no_bias",
                                     "text_lstm_backwards"])
def test_keras_lstm_becomes_one_onnx_lstm_and_runs_at_batch_1_and_3(factory, plugins):
    import onnx
    import onnxruntime as ort

    import amanda_onnx

    model = getattr(lstm_models, factory)()
    conv = _to_onnx(model, plugins)
    types = [op.type for op in conv.graph]
    assert types.count("LSTM") == 1 and "Loop" not in types, types
    assert not any(t.startswith("TensorList") or t in ("While", "StatelessWhile") for t in types)
    assert "1 Keras LSTM loop(s) -> ONNX LSTM" in conv.explain()
    proto = amanda_onnx.to_model(conv.graph)
    onnx.checker.check_model(proto)
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 0  # the batch is still symbolic
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    for batch in (1, 3):
        ids = _ids(batch)
        got = sess.run(None, {"tokens": ids})
        refs = _refs(model, ids)
        assert len(got) == len(refs)
        for g, r in zip(got, refs):
            _close(g, r)


def test_onnx_lstm_goes_back_to_a_saved_model_that_matches_keras(plugins, tmp_path):
    from amanda_core.mapping import convert
    from amanda_tf.exporter import save_model
    from amanda_tf.runner import run

    model = lstm_models.text_lstm_states()
    onnx_graph = _to_onnx(model, plugins).graph
    back = convert(onnx_graph, "amanda/tensorflow", _tables(plugins, ("onnx-to-tf",)), plugins.registry().namespaces)
    assert [op.type for op in back.graph].count("BlockLSTMV2") == 1
    save_model(back.graph, str(tmp_path / "lstm.savedmodel"))
    for batch in (1, 3):
        ids = _ids(batch)
        got = list(run(back.graph, {"tokens": ids}).values())
        for g, r in zip(got, _refs(model, ids)):
            _close(g, r)


def test_a_loop_that_is_not_a_default_lstm_is_left_and_named(plugins):
    """activation="relu" (ONNX's LSTM defaults are sigmoid/tanh): the pass leaves the loop, saying why, and the
    conversion fails instead of writing something else."""
    from amanda_core.errors import AmandaError
    from amanda_tf.importer import load_model
    from amanda_tf.rnn import fuse_keras_lstms

    model = lstm_models.text_lstm_relu()
    graph = load_model(model)
    report = fuse_keras_lstms(graph)
    assert report.fused == [] and len(report.left) == 1
    assert "Relu" in report.left[0][1] and "While" in [op.type for op in graph]
    with pytest.raises(AmandaError):
        _to_onnx(model, plugins)


def test_keras_lstm_becomes_a_torch_program_from_the_command_line(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE)]))
    out = tmp_path / "text.pt2"
    r = subprocess.run([sys.executable, "-m", "amanda_core", "convert", "lstm_models:text_lstm", "--to",
                        "amanda/pytorch", "-o", str(out), "--check", "--explain"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "pass keras-lstm, before table tf-to-onnx: 1 Keras LSTM loop(s) -> ONNX LSTM" in r.stdout
    assert "rule lstm_zero_state: 1 match(es)" in r.stdout
    assert "same outputs (tensorflow / torch" in r.stdout
    assert out.is_file()
