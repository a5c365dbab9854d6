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
