"""The per-op check, repro and coverage on an ONNX opset conversion made wrong on purpose: a test table whose
Softmax rule keeps ``axis`` as it is from opset 12 to 13, where it changes meaning on a non-last axis."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

from amanda_core.cli.main import main  # noqa: E402

BAD_TABLE = """
table:
  name: bad-opset-12-to-13
  src: amanda/onnx/12
  dst: amanda/onnx/13
  carry: unchanged
  rules:
    softmax_axis_as_is:
      src:
        ops:
          $s: {type: Softmax, attrs: {axis: $axis}}
      dst:
        ops:
          $s: {attrs: {axis: $axis}}
    same_meaning:
      src:
        ops:
          $o: {type: [Relu, Add]}
      dst:
        ops:
          $o: {}
"""


def _model(path: str, custom: bool = False) -> str:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4])
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("Softmax", ["a"], ["b"], name="soft", axis=1),
             helper.make_node("Add", ["b", "x"], ["y"], name="add")]
    opsets = [helper.make_opsetid("", 12)]
    if custom:
        nodes[2] = helper.make_node("Frob", ["b", "x"], ["y"], name="frob", domain="my.ops", gain=2.0)
        opsets.append(helper.make_opsetid("my.ops", 1))
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=opsets)
    onnx.save(model, path)
    return path


@pytest.fixture()
def files(tmp_path):
    table = tmp_path / "bad.yaml"
    table.write_text(BAD_TABLE)
    return _model(str(tmp_path / "m.onnx")), str(table)


def test_per_op_names_the_wrong_rules_op(files, capsys):
    model, table = files
    code = main(["check", "--per-op", model, "--to", "amanda/onnx/13", "--table", table, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    d = out["divergence"]
    assert (d["op"], d["table"], d["rule"]) == ("soft", "bad-opset-12-to-13", "softmax_axis_as_is")
    assert d["reference_ops"] == ["soft"] and d["max_abs_diff"] > 1e-3
    assert out["compared"] == 2  # relu matched, then soft; the run stopped at the first divergence


def test_per_op_passes_with_the_plugin_tables(files, capsys):
    model, _ = files
    code = main(["check", "--per-op", model, "--to", "amanda/onnx/13"])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "no op diverges: 3 value(s)" in text  # relu, the Flatten/Softmax/Reshape group, add


def test_repro_writes_the_cut_model(files, tmp_path, capsys):
    model, table = files
    folder = str(tmp_path / "repro")
    code = main(["repro", model, "--to", "amanda/onnx/13", "--table", table, "-o", folder])
    text = capsys.readouterr().out
    assert code == 1, text
    info = json.load(open(os.path.join(folder, "divergence.json")))
    assert info["rule"] == "softmax_axis_as_is" and info["still_diverges"] is True
    cut = onnx.load(os.path.join(folder, "model.onnx"))
    assert [n.op_type for n in cut.graph.node if n.op_type != "Identity"] == ["Softmax"]  # the op alone
    data = np.load(os.path.join(folder, "inputs.npz"))
    assert list(data.files) == [cut.graph.input[0].name] and (data[data.files[0]] >= 0).all()  # relu's output
    assert "softmax_axis_as_is" in open(os.path.join(folder, "README.md")).read()


def test_repro_refuses_a_non_empty_folder(files, tmp_path, capsys):
    model, table = files
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    assert main(["repro", model, "--to", "amanda/onnx/13", "--table", table, "-o", str(tmp_path / "full")]) == 2
    assert "not an empty folder" in capsys.readouterr().err


def test_coverage_covered_and_not(files, tmp_path, capsys):
    model, _ = files
    assert main(["coverage", model, "--to", "amanda/onnx/13", "--json"]) == 0
    rows = {r["op_type"]: r for r in json.loads(capsys.readouterr().out)["op_types"]}
    assert rows["Softmax"]["rules"] == [{"table": "onnx-opset-12-to-13", "rule": "softmax_coerced_2d"}]
    assert rows["Relu"]["covered"] and rows["Add"]["covered"]
    custom = _model(str(tmp_path / "c.onnx"), custom=True)
    assert main(["coverage", custom, "--to", "amanda/onnx/13"]) == 1
    text = capsys.readouterr().out
    assert "NOT COVERED" in text and "frob" in text
