"""What a new user trips over (issue 13), one test or more per item, on ONNX models (the amanda-onnx plugin alone,
so that the tests do not depend on the other plugins being importable)."""

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from amanda_core import Importer, hookimpl  # noqa: E402
from amanda_core.cli.main import main  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "examples" / "onnx" / "small_cnn_opset11.onnx"
PYTHON = sys.executable


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def onnx_only(amanda_isolated):
    from amanda_onnx import plugin

    amanda_isolated(plugin, "amanda-onnx")


def matmul_model(path, *, external, batch="N", opset=17, ir=None):
    """y = x @ W (W 16x8, big enough for external data), x: float[batch, 16]."""
    w = numpy_helper.from_array(np.arange(128, dtype=np.float32).reshape(16, 8) / 100, "W")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 8])], [w])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    if ir is not None:
        model.ir_version = ir
    if external:
        onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                        location=path.name + ".data", size_threshold=0)
    else:
        onnx.save_model(model, str(path))
    return path


# ---------------------------------------------------------------------------- 1. external data, any folder


def test_1_check_finds_external_data_beside_each_model(tmp_path, capsys, onnx_only, monkeypatch):
    models = tmp_path / "models"
    models.mkdir()
    m = matmul_model(models / "m.onnx", external=True)
    assert (models / "m.onnx.data").exists()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    rc, out, err = run(capsys, "check", m, m, "--exact")
    assert rc == 0, err
    assert "bit-identical" in out
    # Amanda's own output keeps the external data (out.onnx.data) and is checked from anywhere too
    out_model = models / "out.onnx"
    rc, _, err = run(capsys, "convert", m, "--to", "amanda/onnx/18", "-o", out_model)
    assert rc == 0, err
    assert (models / "out.onnx.data").exists()
    rc, out, err = run(capsys, "check", m, out_model)
    assert rc == 0, err


# ---------------------------------------------------------------------------- 2. file modes


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_2_outputs_get_the_mode_open_gives(tmp_path, capsys, onnx_only, umask, mode):
    m = matmul_model(tmp_path / "m.onnx", external=True)
    old = os.umask(umask)
    try:
        assert run(capsys, "convert", m, "-o", tmp_path / "o.onnx")[0] == 0
        assert run(capsys, "convert", MODEL, "-o", tmp_path / "o.yaml")[0] == 0
    finally:
        os.umask(old)
    written = ["o.onnx", "o.onnx.data", "o.yaml", "o.tensors"]
    assert all((tmp_path / f).exists() for f in written)
    assert {f: oct(stat.S_IMODE(os.stat(tmp_path / f).st_mode)) for f in written} == {f: oct(mode) for f in written}


# ---------------------------------------------------------------------------- 3. output folders


def test_3_missing_output_folder_is_named(tmp_path, capsys, onnx_only):
    rc, _, err = run(capsys, "convert", MODEL, "-o", tmp_path / "no" / "such" / "m.onnx")
    assert rc == 2 and err.count("\n") == 1
    assert f"the folder {tmp_path / 'no' / 'such'} does not exist" in err and ".tmp" not in err
    assert "internal error" not in err


def test_3_output_that_is_a_folder(tmp_path, capsys, onnx_only):
    rc, _, err = run(capsys, "convert", MODEL, "-o", tmp_path)
    assert rc == 2 and "is a folder, and no installed exporter writes folders" in err
    assert f"e.g. {tmp_path / 'model.onnx'}" in err
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------------------- 4. Ctrl-C

_INTERRUPT = """
import importlib.abc, os, signal, sys
TARGET = sys.argv[1]
class Interrupt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == TARGET:
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, Interrupt())
sys.argv = [os.path.join(os.path.dirname(sys.executable), "amanda"), "tables"]
from amanda_core.cli.main import main
sys.exit(main())
"""


@pytest.mark.parametrize("when", [
    "amanda_core.ir.graph",  # while the command line is still importing itself
    "amanda_core.mapping",  # while the command runs
])
def test_4_ctrl_c_prints_one_line_from_the_start(when):
    env = {**os.environ, "AMANDA_DISABLE_PLUGIN_AUTOLOAD": "1"}
    p = subprocess.run([PYTHON, "-c", _INTERRUPT, when], capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=120)
    assert p.stderr == "amanda: interrupted\n" and p.returncode == 130


# ---------------------------------------------------------------------------- 5. check's messages and inputs


def test_5_check_errors_name_the_model_and_suggest_dim(tmp_path, capsys, onnx_only):
    ref = matmul_model(tmp_path / "ref.onnx", external=False, batch="N")
    cand = matmul_model(tmp_path / "cand.onnx", external=False, batch=2)
    rc, _, err = run(capsys, "check", ref, cand)
    assert rc == 2 and err.count("\n") == 1
    assert f"candidate {cand}: onnxruntime failed to run the model" in err and "--dim NAME=SIZE" in err
    rc, out, err = run(capsys, "check", ref, cand, "--dim", "N=2")
    assert rc == 0, err
    # a --dim that names no symbolic dimension (a typo) would leave N at 1: it is an error naming those there are
    rc, out, err = run(capsys, "check", ref, cand, "--dim", "M=2")
    assert rc == 2 and err.count("\n") == 1
    assert "--dim M: no input of reference" in err and "(their symbolic dimensions: N)" in err


def test_5_made_up_indices_out_of_range_say_so(tmp_path, capsys, onnx_only):
    """A model that fails on the made-up integers (token ids beyond a table of 2 rows) says which integers it was
    fed and how to give others."""
    table = numpy_helper.from_array(np.ones((2, 3), np.float32), "table")
    g = helper.make_graph([helper.make_node("Gather", ["table", "ids"], ["y"])], "g",
                          [helper.make_tensor_value_info("ids", TensorProto.INT64, [8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 3])], [table])
    path = tmp_path / "lookup.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    rc, _, err = run(capsys, "check", str(path), str(path))
    assert rc == 2 and err.count("\n") == 1
    assert re.search(r"integer inputs fed: ids in \[0, [0-9]+\]; give values the model takes with --input-data", err)


def test_5_inputs_an_initializer_gives_are_not_fed(tmp_path, capsys, onnx_only):
    w = numpy_helper.from_array(np.ones((3,), np.float32), "b")
    g = helper.make_graph([helper.make_node("Add", ["x", "b"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 9)])
    m.ir_version = 3
    path = tmp_path / "ir3.onnx"
    onnx.save(m, str(path))
    rc, out, err = run(capsys, "check", path, path, "--json")
    assert rc == 0, err
    assert json.loads(out)["inputs"] == {"x": [3]}


def test_5_given_inputs_make_string_models_checkable(tmp_path, capsys, onnx_only):
    g = helper.make_graph([helper.make_node("Identity", ["s"], ["t"])], "g",
                          [helper.make_tensor_value_info("s", TensorProto.STRING, [4])],
                          [helper.make_tensor_value_info("t", TensorProto.STRING, [4])])
    path = tmp_path / "str.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    rc, _, err = run(capsys, "check", path, path)
    assert rc == 2 and "cannot make up values of tensor(string)[4]" in err and "--input-data s=FILE.npy" in err
    np.save(tmp_path / "s.npy", np.array(["a", "bc", "d", "ef"]))
    rc, out, err = run(capsys, "check", path, path, "--input-data", f"s={tmp_path / 's.npy'}")
    assert rc == 0, err
    assert "given: s" in out and "same outputs" in out


# ---------------------------------------------------------------------------- 6. opsets that do not exist


def test_6_an_opset_that_does_not_exist(tmp_path, capsys, onnx_only):
    rc, _, err = run(capsys, "convert", MODEL, "--to", "amanda/onnx/99", "-o", tmp_path / "x.onnx")
    newest = onnx.defs.onnx_opset_version()
    assert rc == 2 and f"opset 99 of amanda/onnx does not exist; the newest is {newest}" in err


def test_6_reachable_namespaces_are_listed_in_version_order_and_whole(tmp_path, capsys, onnx_only):
    # the tables cannot leave amanda/onnx: ask for a family they do not reach
    from amanda_core.namespace import StaticNamespaces
    from amanda_core.namespace.schema import NamespaceSchema

    class Other:
        @hookimpl
        def amanda_namespaces(self):
            return [StaticNamespaces([NamespaceSchema("amanda/other/1")])]

    from amanda_core.plugin import get_manager

    get_manager().register(Other(), "other")
    rc, _, err = run(capsys, "convert", MODEL, "--to", "amanda/other/1", "-o", tmp_path / "x.yaml")
    assert rc == 2 and "no chain of mapping tables leads from amanda/onnx/11 to amanda/other/1" in err
    newest = onnx.defs.onnx_opset_version()
    assert f"the tables reach amanda/onnx/{{1-10, 12-{newest}}}" in err


# ---------------------------------------------------------------------------- 7. a plugin that cannot read a file


class FakeTorch:
    @hookimpl
    def amanda_importers(self):
        return [Importer("torch", "amanda/pytorch", (".pt2",), lambda s, **o: None, framework="torch")]


def test_7_an_installed_plugin_says_what_it_reads(tmp_path, capsys, onnx_only, amanda_isolated):
    f = tmp_path / "m.h5"
    f.write_bytes(b"\0")
    rc, _, err = run(capsys, "inspect", f)
    assert rc == 2 and "a TensorFlow (Keras) model; no installed plugin reads .h5 files (install amanda-tf" in err
    amanda_isolated(FakeTorch(), "amanda-torch")
    f = tmp_path / "m.pth"
    f.write_bytes(b"\0")
    rc, _, err = run(capsys, "inspect", f)
    assert rc == 2 and "PyTorch .pth files are not read by the installed amanda-torch plugin, which reads torch " \
                       "(.pt2)" in err
    assert "is the plugin" not in err
    rc, out, _ = run(capsys, "plugins")
    assert "reads: onnx: .onnx" in out and "writes: onnx: .onnx from amanda/onnx" in out


# ---------------------------------------------------------------------------- 8. --debug anywhere


def test_8_debug_after_the_command(tmp_path, capsys, onnx_only):
    rc, _, err = run(capsys, "inspect", tmp_path / "missing.onnx", "--debug")
    assert rc == 2 and "Traceback" in err and "no such file" in err
    rc, _, err = run(capsys, "--debug", "inspect", tmp_path / "missing.onnx")
    assert rc == 2 and "Traceback" in err


# ---------------------------------------------------------------------------- 9. schema's hint


def test_9_schema_hint_is_a_schema_command(capsys, onnx_only):
    rc, _, err = run(capsys, "schema", "amanda/onnx/99", "Relu")
    assert rc == 2 and "--namespace" not in err
    assert f"e.g. amanda schema amanda/onnx/{onnx.defs.onnx_opset_version()} Relu" in err


# ---------------------------------------------------------------------------- 10. tables --check


def test_10_tables_check_says_what_was_checked(capsys, onnx_only):
    rc, listing, _ = run(capsys, "tables")
    rc2, out, _ = run(capsys, "tables", "--check")
    assert rc == rc2 == 0 and out != listing
    last = out.strip().splitlines()[-1]
    assert re.match(r"checked \d+ table\(s\), \d+ rule\(s\) against the schemas of their namespaces .*: no problems",
                    last)


# ---------------------------------------------------------------------------- 11. match names ops as the file does


def test_11_match_shows_how_to_find_unnamed_ops(tmp_path, capsys, onnx_only):
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"]),
                           helper.make_node("Relu", ["y"], ["z"], name="named_relu")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    rc, out, err = run(capsys, "match", path, "Relu -> Neg")
    assert rc == 0, err
    assert out.strip() == "_0=Relu (unnamed in the file; writes 'r'), _1=Neg (unnamed in the file; writes 'y')"
    rc, out, _ = run(capsys, "match", path, "Neg -> Relu")
    assert out.strip().endswith("_1=named_relu (Relu)")
    rc, out, _ = run(capsys, "match", path, "Relu -> Neg", "--json")
    assert json.loads(out)[0]["ops"][0]["in_file"] == {"name": None, "outputs": ["r"], "index": 0}


# ---------------------------------------------------------------------------- 13. opset_import follows --to


def test_13_yaml_opset_import_follows_the_namespace(tmp_path, capsys, onnx_only):
    out = tmp_path / "m18.yaml"
    rc, _, err = run(capsys, "convert", MODEL, "--to", "amanda/onnx/18", "-o", out)
    assert rc == 0, err
    text = out.read_text()
    assert "namespace: amanda/onnx/18" in text
    assert re.search(r"opset_import:\n\s*- domain: ''\n\s*version: 18\n", text)
