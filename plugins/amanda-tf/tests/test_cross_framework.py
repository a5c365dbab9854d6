"""PyTorch <-> TensorFlow through the planner (torch -> ONNX -> TF), from the command line, in a child process
each (the frameworks are imported by the command, not by this test process), checked on the same inputs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
AMANDA = [sys.executable, "-m", "amanda_core"]

pytest.importorskip("tensorflow")
pytest.importorskip("torch")


def amanda(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([*AMANDA, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_a_torch_model_becomes_a_saved_model_that_computes_the_same(tmp_path):
    out = tmp_path / "cnn.savedmodel"
    r = amanda("convert", "examples.torch.small_cnn:build", "--input", "x:float32[batch,3,32,32]",
               "--to", "amanda/tensorflow", "-o", str(out), "--check", "--dim", "batch=2", "--explain")
    assert r.returncode == 0, r.stderr
    assert "amanda/pytorch/" in r.stdout and "-> amanda/onnx/18 -> amanda/tensorflow/" in r.stdout
    assert "same outputs (torch / tensorflow" in r.stdout
    assert (out / "saved_model.pb").is_file()


def test_a_keras_model_becomes_a_torch_program_that_computes_the_same(tmp_path):
    """TF's SAME padding with stride 2 pads one side more than the other, which torch's convolution cannot say:
    the ONNX -> torch table pads first (constant_pad_nd), then convolves without padding."""
    out = tmp_path / "cnn.pt2"
    r = amanda("convert", "examples.tf.small_cnn:build", "--to", "amanda/pytorch", "-o", str(out), "--check",
               "--explain")
    assert r.returncode == 0, r.stderr
    assert "-> amanda/onnx/18 -> amanda/pytorch/" in r.stdout and "rule conv_padded: 1 match(es)" in r.stdout
    assert "same outputs (tensorflow / torch" in r.stdout
    assert "Warning" not in r.stderr


def test_a_flatten_with_a_symbolic_batch_becomes_a_reshape_that_keeps_it(tmp_path):
    """One unknown size in a reshape's output (the batch) is fixed by the element count: TF's -1 is exact."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 6])
    model = helper.make_model(helper.make_graph([helper.make_node("Flatten", ["x"], ["y"], axis=1)], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 18)])
    onnx.save(model, tmp_path / "f.onnx")
    out = tmp_path / "f.savedmodel"
    r = amanda("convert", str(tmp_path / "f.onnx"), "--to", "amanda/tensorflow", "-o", str(out), "--explain")
    assert r.returncode == 0, r.stderr
    assert "rule reshape_one_unknown: 1 match(es)" in r.stdout
    for batch in (1, 3):
        data = np.random.default_rng(batch).normal(size=(batch, 2, 3)).astype(np.float32)
        np.save(tmp_path / "x.npy", data)
        r = amanda("check", str(tmp_path / "f.onnx"), str(out), "--input-data", f"x={tmp_path / 'x.npy'}", "--exact")
        assert r.returncode == 0, r.stdout + r.stderr
