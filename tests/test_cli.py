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
    assert rc == 2 and "no installed importer reads .xyz files" in err


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


# --------------------------------------------------------------------------- convert, tables

from .mapping_support import SEED, SeedTFTypes, SeedTorchTypes  # noqa: E402

SEED_CARRIED = str(SEED / "tables" / "convert_t_matmul_carried.yaml")


class SeedBothPlugin:
    @hookimpl
    def amanda_namespaces(self):
        return [StaticNamespaces([load_schema(SCHEMAS / "tensorflow-1.13.1.yaml")]),
                StaticNamespaces([load_schema(SCHEMAS / "pytorch-1.4.0.yaml")])]

    @hookimpl
    def amanda_type_systems(self):
        return [SeedTorchTypes(), SeedTFTypes()]


class SeedTablePlugin:
    @hookimpl
    def amanda_mapping_tables(self):
        return [SEED / "tables" / "convert_matmul.yaml"]


@pytest.fixture
def seed_both(amanda_isolated):
    amanda_isolated(SeedBothPlugin(), "seed-both")


def test_convert_with_a_table_file(tmp_path, capsys, seed_both):
    out = tmp_path / "tf.yaml"
    args = ["convert", str(SEED / "pytorch_single_layer.yaml"), "--to", "amanda/tensorflow/1.13.1", "-o", str(out),
            "--table", SEED_CARRIED]
    rc, _, err = run(capsys, *args)
    assert rc == 2 and "--trust-expressions" in err and not out.exists()
    rc, _, err = run(capsys, *args, "--trust-expressions")
    assert rc == 2 and "2 op(s) of 2 type(s) were not converted" in err and "1 x prim::Param" in err
    assert not out.exists()
    rc, stdout, err = run(capsys, *args, "--trust-expressions", "--allow-partial", "--explain")
    assert rc == 0, err
    assert "rule convert_t_matmul: 1 match(es) -> produced 1 MatMul (dense/MatMul); removed 2 op(s)" in stdout
    assert "--allow-partial: 2 op(s) were left unconverted" in err
    text = out.read_text()
    assert "type: MatMul" in text and "transpose_b: true" in text and "- graph.in0 -> dense/MatMul.a" in text


def test_convert_refuses_a_table_that_does_not_fit_the_schemas(tmp_path, capsys, seed_both):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "table:\n  src: amanda/pytorch/1.4.0\n  dst: amanda/tensorflow/1.13.1\n  rules:\n"
        "    r:\n      src: {ops: {$m: {type: aten::matmull}}}\n      dst: {ops: {$m: {type: MatMul}}}\n")
    rc, _, err = run(capsys, "convert", str(SEED / "pytorch_single_layer.yaml"), "--to", "amanda/tensorflow/1.13.1",
                     "-o", str(tmp_path / "o.yaml"), "--table", str(bad))
    assert rc == 2 and f"{bad}:6: table 'bad', rule 'r': matcher op '$m'" in err
    assert "no op type 'aten::matmull' (did you mean 'aten::matmul'?)" in err


def test_convert_without_to_re_exports(tmp_path, capsys, seed_both):
    out = tmp_path / "same.yaml"
    rc, stdout, _ = run(capsys, "convert", str(SEED / "tf_single_layer.yaml"), "-o", str(out))
    assert rc == 0 and "amanda/tensorflow/1.13.1: 4 ops" in stdout
    from amanda_core.serialization import load_graph

    assert load_graph(out) == load_graph(SEED / "tf_single_layer.yaml")


def test_convert_checks_the_result_against_the_target_schema(tmp_path, capsys, seed_both):
    table = tmp_path / "wrong.yaml"
    table.write_text(
        "table:\n  src: amanda/pytorch/1.4.0\n  dst: amanda/tensorflow/1.13.1\n  rules:\n"
        "    r:\n      src: {ops: {$m: {type: aten::relu}}}\n      dst: {ops: {$m: {type: Relu}}}\n")
    out = tmp_path / "o.yaml"
    rc, _, err = run(capsys, "convert", str(SEED / "pytorch_single_layer.yaml"), "--to", "amanda/tensorflow/1.13.1",
                     "-o", str(out), "--table", str(table), "--allow-partial")
    assert rc == 2 and "breaks the schema of amanda/tensorflow/1.13.1" in err
    assert "op 'relu' (Relu): missing required attribute 'T' (tf.DType) [made by table 'wrong', rule 'r']" in err
    assert not out.exists()


def test_tables_lists_plugin_tables(capsys, seed_both, amanda_isolated):
    amanda_isolated(SeedTablePlugin(), "seed-tables")
    rc, out, _ = run(capsys, "tables")
    assert rc == 0
    assert "convert_matmul: amanda/pytorch/1.4.0 -> amanda/tensorflow/1.13.1  (1 rule(s), plugin seed-tables)" in out
    rc, out, _ = run(capsys, "tables", "--json", "--check")
    data = json.loads(out)
    assert rc == 0 and data["tables"][0]["rules"] == 1 and data["problems"] == []


# --------------------------------------------------------------------------- check

from amanda_core import Runner  # noqa: E402


def _scale_run(graph, inputs):
    """Evaluates the toy graphs below: a chain of Scale ops (y = x * k)."""
    import numpy as np

    values = {p.name: np.asarray(inputs[p.name]) for p in graph.input_ports}
    for op in graph.topological_order():
        src = op.input_ports["x"].source
        x = values[src.name] if src.op is None else values[f"{src.op.name}.{src.name}"]
        values[f"{op.name}.y"] = (x * op.attrs["k"]).astype(x.dtype)
    out = {}
    for p in graph.output_ports:
        s = p.source
        out[p.name] = values[f"{s.op.name}.{s.name}"]
    return out


def _scale_inputs(graph, seed=0, dims=None):
    import numpy as np

    rng = np.random.default_rng(seed)
    return {p.name: rng.standard_normal((2, 3)).astype(np.float32) for p in graph.input_ports}


class ScalePlugin:
    @hookimpl
    def amanda_runners(self):
        return [Runner("scale", "amanda/scale", _scale_run, _scale_inputs)]


def scale_model(path, k):
    path.write_text("graph:\n  namespace: amanda/scale/1\n  input_ports: [x]\n  output_ports: [y]\n  ops:\n"
                    f"    s: {{type: Scale, attrs: {{k: {k}}}, input_ports: [x], output_ports: [y]}}\n"
                    "  edges: [graph.x -> s.x, s.y -> graph.y]\n")
    return str(path)


def test_check_runs_both_models_and_compares(tmp_path, capsys, amanda_isolated):
    amanda_isolated(ScalePlugin(), "scale")
    a, b, c = scale_model(tmp_path / "a.yaml", 2.0), scale_model(tmp_path / "b.yaml", 2.0), \
        scale_model(tmp_path / "c.yaml", 2.00001)
    rc, out, _ = run(capsys, "check", a, b, "--exact")
    assert rc == 0 and "y: float32[2, 3] bit-identical -> ok" in out and "same outputs" in out
    rc, out, _ = run(capsys, "check", a, c)
    assert rc == 0 and "max abs diff" in out  # within rtol 1e-5
    rc, out, _ = run(capsys, "check", a, c, "--exact", "--json")
    data = json.loads(out)
    assert rc == 1 and data["match"] is False and data["outputs"][0]["bit_identical"] is False
    rc, _, err = run(capsys, "check", a, str(SEED / "tf_single_layer.yaml"))
    assert rc == 2 and "no installed plugin runs graphs of amanda/tensorflow/1.13.1" in err
