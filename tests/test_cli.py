import json
import subprocess
import sys
from pathlib import Path

import pytest

from amanda_core import hookimpl
from amanda_core.cli.main import main
from amanda_core.namespace import StaticNamespaces, load_schema

from .test_validate import MiniTF

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "examples" / "schemas"

GRAPH = """\
graph:
  namespace: amanda/tensorflow/1.13.1
  input_ports:
    - x: float32
  output_ports:
    - y: float32
  ops:
    w:
      type: VariableV2
      attrs: {shape: [4, 2], dtype: float32, container: "", shared_name: ""}
      output_ports:
        - ref: float32_ref
    mm:
      type: MatMul
      attrs: {T: float32, transpose_a: false, transpose_b: false}
      input_ports: [a, b]
      output_ports: [product]
    relu:
      type: Relu
      attrs: {T: float32}
      input_ports: [features]
      output_ports: [activations]
  edges:
    - graph.x -> mm.a
    - w.ref -> mm.b
    - mm.product -> relu.features
    - relu.activations -> graph.y
"""


class SeedPlugin:
    @hookimpl
    def amanda_namespaces(self):
        return [StaticNamespaces([load_schema(SCHEMAS / "tensorflow-1.13.1.yaml")])]

    @hookimpl
    def amanda_type_systems(self):
        return [MiniTF()]


@pytest.fixture
def seeded(amanda_isolated):
    amanda_isolated(SeedPlugin(), "seed-schemas")


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_plugins_lists_name_version_hooks(capsys, seeded):
    rc, out, _ = run(capsys, "plugins")
    assert rc == 0
    assert "amanda-core: amanda-core" in out and "seed-schemas" in out
    rc, out, _ = run(capsys, "plugins", "--json")
    data = {p["name"]: p for p in json.loads(out)}
    assert data["seed-schemas"]["hooks"] == ["amanda_namespaces", "amanda_type_systems"]
    assert data["amanda-core"]["hooks"] == ["amanda_type_systems"]


def test_namespaces(capsys, seeded):
    rc, out, _ = run(capsys, "namespaces")
    assert rc == 0 and "amanda/tensorflow/1.13.1" in out and "seed-schemas" in out
    rc, out, _ = run(capsys, "namespaces", "--json")
    assert {"namespace": "amanda/tensorflow/1.13.1", "plugin": "seed-schemas"} in json.loads(out)


def test_schema_whole_and_one_op(capsys, seeded):
    rc, out, _ = run(capsys, "schema", "amanda/tensorflow/1.13.1")
    assert rc == 0 and out.startswith("namespace_schema:\n  namespace: amanda/tensorflow/1.13.1")
    rc, out, _ = run(capsys, "schema", "amanda/tensorflow", "MatMul")
    assert rc == 0 and out.startswith("type: MatMul\n") and "transpose_a: bool = false" in out
    rc, _, err = run(capsys, "schema", "amanda/tensorflow/1.13.1", "Matmul")
    assert rc == 2 and "no op type 'Matmul'" in err and "MatMul" in err
    rc, _, err = run(capsys, "schema", "amanda/nothing/1")
    assert rc == 2 and err.startswith("amanda: error: unknown namespace") and "\n" == err[-1] and err.count("\n") == 1


def test_inspect(tmp_path, capsys, seeded):
    f = tmp_path / "g.yaml"
    f.write_text(GRAPH)
    rc, out, _ = run(capsys, "inspect", str(f))
    assert rc == 0
    assert "namespace: amanda/tensorflow/1.13.1" in out
    assert "ops:       3 (3 types)" in out
    assert "inputs:    x: float32" in out and "outputs:   y: float32" in out
    rc, out, _ = run(capsys, "inspect", str(f), "--json")
    info = json.loads(out)
    assert info["op_types"] == {"MatMul": 1, "Relu": 1, "VariableV2": 1} and info["tensors"] == 0


def test_validate_valid_and_invalid(tmp_path, capsys, seeded):
    f = tmp_path / "g.yaml"
    f.write_text(GRAPH)
    rc, out, _ = run(capsys, "validate", str(f))
    assert rc == 0 and "valid against amanda/tensorflow/1.13.1" in out
    bad = tmp_path / "bad.yaml"
    bad.write_text(GRAPH.replace("transpose_b: false", "transpose_b: 3").replace("type: Relu", "type: Relu6"))
    rc, out, _ = run(capsys, "validate", str(bad))
    assert rc == 1
    assert "INVALID" in out and "2 problem(s)" in out
    assert "op 'mm' (MatMul): attribute 'transpose_b'" in out
    assert "op 'relu' (Relu6): unknown op type 'Relu6'" in out
    rc, out, _ = run(capsys, "validate", str(bad), "--json")
    assert rc == 1 and json.loads(out)["valid"] is False


def test_validate_namespace_errors(tmp_path, capsys, seeded):
    f = tmp_path / "g.yaml"
    f.write_text(GRAPH)
    rc, _, err = run(capsys, "validate", str(f), "--namespace", "amanda/tensorflow/2.0")
    assert rc == 2 and "1.13.1" in err


def test_missing_file_and_unknown_format(tmp_path, capsys):
    rc, _, err = run(capsys, "inspect", str(tmp_path / "nope.yaml"))
    assert rc == 2 and "no such file" in err
    other = tmp_path / "model.xyz"
    other.write_bytes(b"\0")
    rc, _, err = run(capsys, "inspect", str(other))
    assert rc == 2 and "no importer" in err


def test_debug_shows_traceback(tmp_path, capsys):
    rc, _, err = run(capsys, "--debug", "inspect", str(tmp_path / "nope.yaml"))
    assert rc == 2 and "Traceback" in err


def test_malformed_yaml_reports_file_and_line(tmp_path, capsys):
    f = tmp_path / "broken.yaml"
    f.write_text("graph:\n  ops:\n    a: {type: X\n")
    rc, _, err = run(capsys, "inspect", str(f))
    assert rc == 2 and f"{f}:" in err


def test_console_script_entry():
    out = subprocess.run([sys.executable, "-m", "amanda_core", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "namespaces" in out.stdout


def test_no_command_prints_help(capsys):
    rc, _, err = run(capsys)
    assert rc == 2 and "usage:" in err
