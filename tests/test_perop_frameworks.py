"""The per-op check and repro across frameworks, on conversions made wrong on purpose: a test table that goes
ahead of the plugin's (``ahead: true``) with a rule whose constant is wrong (a leaky relu's slope 0.2 where the
model's is 0.1).  The reference is a torch model, then a Keras one, converted to ONNX in memory; both commands
must name that rule's op.  Each command runs in a child process (it imports the framework, not this process)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

BAD_TORCH = """\
table:
  name: bad-torch-to-onnx
  src: amanda/pytorch/>=2.1
  dst: amanda/onnx/18
  ahead: true
  rules:
    leaky_relu_wrong_slope:
      src:
        ops:
          $x: {type: aten::leaky_relu.default, consts: {negative_slope: 0.1}}
      dst:
        ops:
          $x: {type: LeakyRelu, attrs: {alpha: 0.2}}
"""

BAD_TF = """\
table:
  name: bad-tf-to-onnx
  src: amanda/tensorflow/>=2.15,<3
  dst: amanda/onnx/18
  ahead: true
  rules:
    leaky_relu_wrong_alpha:
      src:
        ops:
          $x: {type: LeakyRelu}
      dst:
        ops:
          $x: {type: LeakyRelu, attrs: {alpha: 0.2}}
"""


def amanda(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, "-m", "amanda_core", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)


def _needs(module: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(importlib.util.find_spec(module) is None, reason=f"{module} is not installed")


def _per_op_and_repro(tmp_path: Path, model: list[str], table_text: str, rule: str, op_type: str,
                      source_type: str, model_file: str) -> None:
    table = tmp_path / "bad.yaml"
    table.write_text(table_text)
    conv = ["--to", "amanda/onnx/18", "--table", str(table)]
    r = amanda("check", "--per-op", *model, *conv, "--json")
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    d = json.loads(r.stdout)["divergence"]
    name = table_text.split("name: ")[1].split()[0]
    assert (d["table"], d["rule"], d["op_type"]) == (name, rule, op_type)
    assert len(d["reference_ops"]) == 1 and d["max_abs_diff"] > 1e-3
    folder = tmp_path / "repro"
    r = amanda("repro", *model, *conv, "-o", str(folder))
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    info = json.loads((folder / "divergence.json").read_text())
    assert info["rule"] == rule and info["still_diverges"] is True
    assert info["reference_ops"] == d["reference_ops"]
    assert (folder / model_file).exists() and (folder / "inputs.npz").is_file()
    readme = (folder / "README.md").read_text()
    assert rule in readme and "--to amanda/onnx/18" in readme
    # the cut model is the diverging op alone, in the source framework, fed the reference's own values
    r = amanda("inspect", str(folder / "model.yaml"), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    counts = json.loads(r.stdout)["op_types"]
    assert counts.get(source_type) == 1
    assert all(t in (source_type, "prim::Constant", "Const") for t in counts), counts  # and the constants it reads


@_needs("torch")
def test_per_op_and_repro_name_the_wrong_rules_op_of_a_torch_model(tmp_path):
    model = ["tests.perop_models:torch_leaky", "--input", "x:float32[4,8]"]
    _per_op_and_repro(tmp_path, model, BAD_TORCH, "leaky_relu_wrong_slope", "LeakyRelu",
                      "aten::leaky_relu.default", "model.pt2")
    r = amanda("check", "--per-op", *model, "--to", "amanda/onnx/18")  # the plugin's own rule: no divergence
    assert r.returncode == 0 and "no op diverges" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]


@_needs("tensorflow")
def test_per_op_and_repro_name_the_wrong_rules_op_of_a_keras_model(tmp_path):
    _per_op_and_repro(tmp_path, ["tests.perop_models:keras_leaky"], BAD_TF, "leaky_relu_wrong_alpha",
                      "LeakyRelu", "LeakyRelu", "model.pb")


@_needs("torch")
@pytest.mark.parametrize("target", ["amanda/onnx/18", "amanda/tensorflow"])
def test_per_op_lines_up_what_the_graph_passes_rewrote(target):
    """A torch CNN with the plugins' own tables: the ONNX pass that folds each batch norm into its convolution,
    and, to TF, the layout pass's transposes (a 16-channel 16x16 map is [2, 16, 16, 16] in both layouts) leave
    nothing the per-op check mistakes for a divergence."""
    if target == "amanda/tensorflow" and importlib.util.find_spec("tensorflow") is None:
        pytest.skip("tensorflow is not installed")
    r = amanda("check", "--per-op", "examples.torch.small_cnn:build", "--input", "x:float32[2,3,32,32]",
               "--to", target)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "no op diverges: 8 value(s)" in r.stdout
