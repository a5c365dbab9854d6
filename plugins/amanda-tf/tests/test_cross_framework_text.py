"""PyTorch -> TensorFlow for text models, through the planner (torch -> ONNX -> TF), from the command line in
child processes (each imports one framework), checked on the same inputs; and the gathers text models need
(``onnx_to_tf_text.yaml``) on negative indices, checked against onnxruntime."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]
MODELS = ROOT / "plugins" / "amanda-torch" / "tests"
AMANDA = [sys.executable, "-m", "amanda_core"]

if importlib.util.find_spec("tensorflow") is None:  # not imported here: torch runs in the same suite
    pytest.skip("tensorflow is not installed", allow_module_level=True)


def amanda(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(MODELS)]))
    return subprocess.run([*AMANDA, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def _diffs(report: str) -> list[tuple[str, float, float]]:
    """(output, max abs diff, diff relative to the largest reference value) per line of a check report."""
    found = re.findall(r"^\s+(\S+): [^\n]*? max abs diff (\S+), (\S+) of the largest reference value", report, re.M)
    return [(name, float(a), float(r)) for name, a, r in found]


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers is not installed")
def test_bert_becomes_a_saved_model_that_computes_the_same(tmp_path):
    """transformers' BertModel (2 layers, hidden 64; the second sequence padded) to a SavedModel, within 1e-4 of
    torch on the factory's own inputs, absolute and relative to the largest reference value."""
    data = tmp_path / "inputs.npz"
    made = subprocess.run(
        [sys.executable, "-c", "import sys, numpy as np, models; _m, (ids, mask) = models.bert(); "
         "np.savez(sys.argv[1], input_ids=ids.numpy(), attention_mask=mask.numpy())", str(data)],
        cwd=MODELS, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    out = tmp_path / "bert.savedmodel"
    r = amanda("convert", "models:bert", "--to", "amanda/tensorflow", "-o", str(out), "--check", "--explain",
               "--input-data", str(data), "--atol", "1e-4", "--rtol", "0")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "-> amanda/onnx/18 -> amanda/tensorflow/" in r.stdout
    assert "rule gather_nd: 1 match(es)" in r.stdout  # the attention mask read through advanced indexing
    diffs = _diffs(r.stdout)
    assert {name for name, _, _ in diffs} == {"last_hidden_state", "pooler_output"}, r.stdout[-2000:]
    for name, absolute, relative in diffs:
        assert absolute <= 1e-4 and relative <= 1e-4, (name, absolute, relative)
    assert (out / "saved_model.pb").is_file()


def test_gathers_with_negative_indices_compute_what_onnxruntime_does(tmp_path):
    """GatherElements (on a middle axis) and GatherND with negative indices fed at run time: TF's kernels refuse
    negative indices, the rules wrap them; the SavedModel computes exactly what onnxruntime does."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    i = helper.make_tensor_value_info("i", TensorProto.INT64, [2, 2, 4])
    m = helper.make_tensor_value_info("m", TensorProto.FLOAT, [3, 4])
    j = helper.make_tensor_value_info("j", TensorProto.INT64, [5, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2, 4])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [5])
    nodes = [helper.make_node("GatherElements", ["x", "i"], ["y"], axis=-2),
             helper.make_node("GatherND", ["m", "j"], ["z"])]
    model = helper.make_model(helper.make_graph(nodes, "g", [x, i, m, j], [y, z]),
                              opset_imports=[helper.make_opsetid("", 18)])
    onnx.save(model, tmp_path / "g.onnx")
    out = tmp_path / "g.savedmodel"
    r = amanda("convert", str(tmp_path / "g.onnx"), "--to", "amanda/tensorflow", "-o", str(out), "--explain")
    assert r.returncode == 0, r.stderr
    assert "rule gather_elements: 1 match(es)" in r.stdout and "rule gather_nd: 1 match(es)" in r.stdout
    rng = np.random.default_rng(0)
    feeds = {"x": rng.normal(size=(2, 3, 4)).astype(np.float32), "i": rng.integers(-3, 3, size=(2, 2, 4)),
             "m": rng.normal(size=(3, 4)).astype(np.float32),
             "j": np.stack([rng.integers(-3, 3, size=5), rng.integers(-4, 4, size=5)], axis=-1)}
    assert (feeds["i"] < 0).any() and (feeds["j"] < 0).any()
    for name, value in feeds.items():
        np.save(tmp_path / f"{name}.npy", value)
    args = [a for name in feeds for a in ("--input-data", f"{name}={tmp_path / f'{name}.npy'}")]
    r = amanda("check", str(tmp_path / "g.onnx"), str(out), *args, "--exact")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "same outputs" in r.stdout
