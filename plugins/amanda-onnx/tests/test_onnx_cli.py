"""The command line on ONNX models: the README's main job (upgrade the bundled opset-11 model to the newest opset
and check it against the original with onnxruntime), and what a user sees when a conversion cannot be done."""

import json
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from amanda_core.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
MODEL = ROOT / "examples" / "onnx" / "small_cnn_opset11.onnx"


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_bundled_model_is_what_its_script_builds():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_small_cnn", ROOT / "examples" / "onnx" / "make_small_cnn.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.build().SerializeToString(deterministic=True) == \
        onnx.load(MODEL).SerializeToString(deterministic=True)


def test_main_job_upgrades_and_checks(tmp_path, capsys):
    out = tmp_path / "upgraded.onnx"
    rc, stdout, err = run(capsys, "convert", MODEL, "--to", "amanda/onnx", "-o", out, "--explain")
    assert rc == 0, err
    newest = max(int(v) for v in [onnx.defs.onnx_opset_version()])
    assert f"amanda/onnx/11 -> amanda/onnx/{newest} ({newest - 11} tables)" in stdout
    assert "rule squeeze_axes: 1 match(es)" in stdout and "rule reduce_axes: 1 match(es)" in stdout
    model = onnx.load(out)
    onnx.checker.check_model(model, full_check=True)
    assert [o.version for o in model.opset_import] == [newest]
    assert {n.op_type for n in model.graph.node} >= {"Squeeze", "Unsqueeze", "ReduceSum", "ReduceMean", "Constant"}
    rc, stdout, _ = run(capsys, "check", MODEL, out, "--dim", "batch=3", "--exact", "--json")
    data = json.loads(stdout)
    assert rc == 0 and data["match"] and data["inputs"] == {"image": [3, 3, 16, 16]}
    assert data["outputs"][0]["bit_identical"]


def test_re_export_without_to_is_byte_identical(tmp_path, capsys):
    out = tmp_path / "same.onnx"
    rc, _, _ = run(capsys, "convert", MODEL, "-o", out)
    assert rc == 0
    assert onnx.load(out).SerializeToString(deterministic=True) == onnx.load(MODEL).SerializeToString(
        deterministic=True)


def test_onnx_to_yaml_and_back(tmp_path, capsys):
    yml, back = tmp_path / "m.yaml", tmp_path / "back.onnx"
    assert run(capsys, "convert", MODEL, "-o", yml)[0] == 0
    assert (tmp_path / "m.tensors").exists()
    assert run(capsys, "convert", yml, "-o", back)[0] == 0
    assert onnx.load(back).SerializeToString(deterministic=True) == onnx.load(MODEL).SerializeToString(
        deterministic=True)


def test_unknown_domain_is_refused_naming_it_and_nothing_is_written(tmp_path, capsys):
    node = helper.make_node("Frobnicate", ["x"], ["y"], name="frob", domain="com.example")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.example", 1)])
    src = tmp_path / "custom.onnx"
    onnx.save(model, src)
    out = tmp_path / "out.onnx"
    rc, _, err = run(capsys, "convert", src, "--to", "amanda/onnx/18", "-o", out)
    assert rc == 2 and not out.exists()
    assert "1 x Frobnicate (amanda/onnx/com.example/1), e.g. frob" in err and "--allow-partial" in err
    rc, _, err = run(capsys, "convert", src, "--to", "amanda/onnx/18", "-o", out, "--allow-partial")
    assert rc == 0 and "left unconverted" in err and "Frobnicate" in err
    model = onnx.load(out)
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 18), ("com.example", 1)]
    assert model.graph.node[0].domain == "com.example"
    out.unlink()
    rc, _, err = run(capsys, "validate", src)
    assert rc == 1 and "frob" in err + _ and "com.example" in err + _
    rc, _, _ = run(capsys, "convert", src, "-o", out)  # re-export keeps it as it is
    assert rc == 0 and onnx.load(out).graph.node[0].domain == "com.example"


@pytest.mark.parametrize("data", [b"", b"\x08\x07garbage\xff\xff"])
def test_broken_files_give_one_clear_line(tmp_path, capsys, data):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(data)
    rc, _, err = run(capsys, "inspect", bad)
    assert rc == 2 and str(bad) in err and err.count("\n") == 1
