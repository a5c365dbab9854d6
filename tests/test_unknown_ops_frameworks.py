"""Ops no table converts, from TensorFlow and to torch: a TF op kept by ``--allow-partial`` as an ONNX node of the
``amanda.tensorflow`` domain (listed by ``--explain`` and ``amanda coverage``), and ``amanda coverage`` of an
ONNX custom-domain node on the way to torch.  TensorFlow runs only in child processes."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")

from amanda_core.cli.main import main  # noqa: E402

from .test_unknown_ops import _custom_model  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def amanda(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, "-m", "amanda_core", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="tensorflow is not installed")
def test_a_tf_op_no_rule_maps_is_a_custom_domain_node_in_onnx_and_coverage_lists_it(tmp_path):
    out = tmp_path / "lgamma.onnx"
    r = amanda("convert", "tests.perop_models:tf_lgamma", "--to", "amanda/onnx/18", "-o", str(out),
               "--allow-partial", "--explain")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "left unconverted:\n  1 x Lgamma (amanda/tensorflow/" in r.stdout
    assert "kept unconverted (--allow-partial):\n  Lgamma: Lgamma (amanda/tensorflow/" in r.stdout
    assert "kept as Lgamma (amanda/onnx/amanda.tensorflow/1)" in r.stdout
    model = onnx.load(str(out))
    onnx.checker.check_model(model)
    (node,) = [n for n in model.graph.node if n.domain]
    assert (node.domain, node.op_type) == ("amanda.tensorflow", "Lgamma")
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["amanda_op_type"] == b"Lgamma" and attrs["amanda_namespace"].startswith(b"amanda/tensorflow/")
    assert "amanda.tensorflow" in {o.domain for o in model.opset_import}
    r = amanda("coverage", "tests.perop_models:tf_lgamma", "--to", "amanda/onnx/18", "--json")
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    rows = {row["op_type"]: row for row in json.loads(r.stdout)["op_types"]}
    assert not rows["Lgamma"]["covered"] and rows["Relu"]["covered"]


def test_coverage_of_an_onnx_custom_domain_node_on_the_way_to_torch(tmp_path, capsys):
    pytest.importorskip("torch")
    src = tmp_path / "custom.onnx"
    _custom_model(src)
    assert main(["coverage", str(src), "--to", "amanda/pytorch"]) == 1
    text = capsys.readouterr().out
    assert "MatrixLogarithm" in text and "NOT COVERED" in text and "logm" in text
