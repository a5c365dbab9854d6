"""PyTorch <-> TensorFlow from the command line, in child processes (each imports the frameworks it needs):

* a torch CNN becomes a SavedModel whose convolutions run channels-last with no transpose left between them;
* ``--input-layout`` / ``--output-layout`` move the transposes at the model's boundary away (torch -> TF:
  channels-last; TF -> ONNX and TF -> torch: channels-first), the layouts are recorded, and ``--check`` /
  ``amanda check`` feed each side its own layout; an option no layout pass of the conversion takes is refused;
* a SavedModel becomes a ``.pt2`` and a ``.py`` torch program;
* a direct torch -> TF table (given here, none ships) is chosen over the chain through ONNX, and ``--explain``
  says why.

Keras -> torch with ``--input-layout channels-first`` runs with ``AMANDA_SLOW=1``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
AMANDA = [sys.executable, "-m", "amanda_core"]

if importlib.util.find_spec("tensorflow") is None or importlib.util.find_spec("torch") is None:
    pytest.skip("needs tensorflow and torch", allow_module_level=True)


def _path() -> str:
    return os.pathsep.join([str(ROOT), str(HERE)] + [p for p in [os.environ.get("PYTHONPATH")] if p])


def amanda(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=_path())
    return subprocess.run([*AMANDA, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def python(code: str, *args: str) -> str:
    env = dict(os.environ, PYTHONPATH=_path(), TF_CPP_MIN_LOG_LEVEL="3")
    r = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.strip().splitlines()[-1]


_TRANSPOSES = """
import json, sys
from amanda_core import load_model
graph = load_model(sys.argv[1])
CONV = {"Conv2D", "DepthwiseConv2dNative", "Conv"}
def reach(op, forward):
    seen, todo = set(), [op]
    while todo:
        o = todo.pop()
        ports = ([c.op for p in o.output_ports for c in p.consumers] if forward else
                 [p.source.op for p in o.input_ports if p.source is not None])
        for n in ports:
            if n is not None and n.name not in seen:
                seen.add(n.name)
                todo.append(n)
    return seen
ops = list(graph)
convs = {o.name for o in ops if o.type in CONV}
transposes = [o for o in ops if o.type == "Transpose"]
between = [t.name for t in transposes if reach(t, False) & convs and reach(t, True) & convs]
inputs = {p.name: [c.op.type for c in p.consumers if c.op is not None] for p in graph.input_ports}
print(json.dumps({"transposes": len(transposes), "between": between, "convs": len(convs),
                  "input_readers": inputs}))
"""


def transposes(model: Path) -> dict:
    """Transpose ops of a converted model's top-level graph, those on a path from one convolution to another, and
    the op types reading each graph input (TF for a SavedModel, onnx for an ONNX file)."""
    return json.loads(python(_TRANSPOSES, str(model)))


def test_a_torch_cnn_becomes_a_saved_model_with_no_transpose_between_its_convolutions(tmp_path):
    out = tmp_path / "cnn.savedmodel"
    r = amanda("convert", "examples.torch.small_cnn:build", "--input", "x:float32[batch,3,32,32]", "--to",
               "amanda/tensorflow", "-o", str(out), "--explain", "--check", "--dim", "batch=2")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "then pass tf-layout-nhwc: layout: transposes 6 -> 1" in r.stdout
    found = transposes(out)
    assert found["convs"] == 2 and found["between"] == [] and found["transposes"] == 1  # NCHW -> NHWC at the input


def test_channels_last_inputs_and_outputs_of_a_torch_cnn_leave_no_transpose_and_check_feeds_each_side(tmp_path):
    out = tmp_path / "features.savedmodel"
    spec = "x:float32[batch,3,12,12]"
    r = amanda("convert", "cross_models:torch_feature_cnn", "--input", spec, "--to", "amanda/tensorflow",
               "-o", str(out), "--explain", "--check", "--dim", "batch=2",
               "--input-layout", "channels-last", "--output-layout", "channels-last")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "inputs made channels-last 1" in r.stdout and "outputs left channels-last 1" in r.stdout
    assert "layout: input x takes the source model's data transposed by 0,2,3,1" in r.stdout
    assert "layout: candidate" in r.stdout and "input 'x' transposed by 0,2,3,1" in r.stdout
    assert "output 'output' (transposed back) transposed by 0,3,1,2" in r.stdout
    assert "same outputs (torch / tensorflow" in r.stdout
    found = transposes(out)
    assert found["transposes"] == 0 and found["convs"] == 2
    assert found["input_readers"]["x"] and "Transpose" not in found["input_readers"]["x"]
    # the layouts travel with the SavedModel (its provenance): a later check reads them there
    r = amanda("check", "cross_models:torch_feature_cnn", str(out), "--input", spec, "--dim", "batch=3", "--json")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    report = json.loads(r.stdout)
    assert report["match"] and report["inputs"] == {"x": [3, 3, 12, 12]}
    assert any("transposed by 0,2,3,1" in note for note in report["layouts"])
    assert report["outputs"][0]["shape"] == [3, 8, 12, 12]
    # without --input: the code is traced on inputs like the SavedModel's, in the layout the code reads
    r = amanda("check", "cross_models:torch_feature_cnn", str(out), "--dim", "batch=3", "--json")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    report = json.loads(r.stdout)
    assert report["match"] and report["inputs"] == {"x": [3, 3, 12, 12]}
    r = amanda("inspect", str(out), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    record = json.loads(r.stdout)["provenance"]
    assert record["input_layout"] == {"x": "0,2,3,1"} and record["output_layout"] == {"output": "0,3,1,2"}
    r = amanda("inspect", str(out))
    assert "  layout: input x takes the source's data transposed by 0,2,3,1" in r.stdout, r.stdout[-2000:]
    assert "  layout: output output transposed by 0,3,1,2 is the source's output" in r.stdout


def test_a_keras_model_becomes_onnx_with_channels_first_inputs_and_outputs(tmp_path):
    out = tmp_path / "features.onnx"
    r = amanda("convert", "cross_models:keras_features", "--to", "amanda/onnx/18", "-o", str(out), "--explain",
               "--check", "--input-layout", "channels-first", "--output-layout", "channels-first")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "layout: input image takes the source model's data transposed by 0,3,1,2" in r.stdout
    assert "layout: output features transposed by 0,2,3,1 is the source model's output" in r.stdout
    assert "same outputs (tensorflow / onnxruntime" in r.stdout
    found = transposes(out)
    assert found["transposes"] == 0 and found["convs"] == 2
    meta = json.loads(python("import json, sys, onnx; m = onnx.load(sys.argv[1]); "
                             "print(json.dumps({p.key: p.value for p in m.metadata_props}))", str(out)))
    assert meta["amanda.input_layout.image"] == "0,3,1,2" and meta["amanda.output_layout.features"] == "0,2,3,1"
    # the ONNX file alone: the check reads the layouts from its metadata
    r = amanda("check", "cross_models:keras_features", str(out))
    assert r.returncode == 0 and "same outputs" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("AMANDA_SLOW"), reason="slow: set AMANDA_SLOW=1 (the same pass and option "
                                                              "as Keras -> ONNX, then the ONNX -> torch table)")
def test_a_keras_model_becomes_a_torch_program_taking_channels_first_data(tmp_path):
    out = tmp_path / "cnn.pt2"
    r = amanda("convert", "examples.tf.small_cnn:build", "--to", "amanda/pytorch", "-o", str(out), "--check",
               "--input-layout", "channels-first")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "layout: input image takes the source model's data transposed by 0,3,1,2" in r.stdout
    assert "same outputs (tensorflow / torch" in r.stdout
    shape = python("import sys, torch; p = torch.export.load(sys.argv[1]); names = set(p.graph_signature.user_inputs);"
                   " import json; print(json.dumps([[str(d) for d in n.meta['val'].shape] for n in p.graph.nodes"
                   " if n.name in names][0]))", str(out))
    assert json.loads(shape)[1:] == ["3", "32", "32"]  # (the batch stays symbolic)


def test_a_layout_option_no_pass_of_the_conversion_takes_is_refused(tmp_path):
    out = tmp_path / "relu.onnx"
    r = amanda("convert", "cross_models:torch_relu", "--input", "x:float32[2,3,4,4]", "--to", "amanda/onnx/18",
               "-o", str(out), "--input-layout", "channels-last")
    assert r.returncode == 2
    assert ("--input-layout channels-last: no graph pass of this conversion (torch-to-onnx) moves the layout of "
            "the model's inputs; nothing was written (passes that do: tf-layout (after tf-to-onnx), "
            "tf-layout-nhwc (after onnx-to-tf))") in r.stderr
    assert not out.exists()


def test_a_saved_model_becomes_a_pt2_and_a_py_torch_program(tmp_path):
    saved = tmp_path / "cnn.savedmodel"
    r = amanda("convert", "examples.tf.small_cnn:build", "-o", str(saved))
    assert r.returncode == 0, r.stderr[-2000:]
    pt2 = tmp_path / "cnn.pt2"
    r = amanda("convert", str(saved), "--to", "amanda/pytorch", "-o", str(pt2), "--check", "--explain")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "-> amanda/onnx/18 -> amanda/pytorch/" in r.stdout and "same outputs (tensorflow / torch" in r.stdout
    py = tmp_path / "cnn.py"
    r = amanda("convert", str(saved), "--to", "amanda/pytorch", "-o", str(py))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert py.is_file() and (tmp_path / "cnn.safetensors").is_file()
    # the module file computes what the checked .pt2 computes
    diff = python("""
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("cnn_module", sys.argv[1])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
cls = [v for v in vars(mod).values() if isinstance(v, type) and issubclass(v, torch.nn.Module)
       and v.__module__ == "cnn_module"][0]
x = torch.randn(3, 32, 32, 3, generator=torch.Generator().manual_seed(0))
a = cls()(x)
b = torch.export.load(sys.argv[2]).module()(x)
a, b = (a[0] if isinstance(a, (tuple, list)) else a), (b[0] if isinstance(b, (tuple, list)) else b)
print(float((a - b).abs().max()))
""", str(py), str(pt2))
    assert float(diff) <= 1e-6


_DIRECT = """\
table:
  name: torch-to-tf-direct
  description: a direct PyTorch -> TensorFlow table (for this test only)
  src: amanda/pytorch/>=2.1
  dst: amanda/tensorflow/>=2.15
  rules:
    relu:
      src: {ops: {$o: {type: aten::relu.default, input_ports: [$x]}}}
      dst: {ops: {$o: {type: Relu, attrs: {T: float32}}}}
"""


def test_a_direct_torch_to_tf_table_is_chosen_over_the_chain_through_onnx(tmp_path):
    table = tmp_path / "direct.yaml"
    table.write_text(_DIRECT)
    args = ["cross_models:torch_relu", "--input", "x:float32[2,5]", "--to", "amanda/tensorflow", "--explain"]
    r = amanda("convert", *args, "-o", str(tmp_path / "direct.savedmodel"), "--table", str(table), "--check")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "table torch-to-tf-direct: amanda/pytorch/" in r.stdout
    assert ("chosen (given with --table) over the chain torch-to-onnx -> onnx-to-tf (2 tables between the same "
            "namespaces): one table is fewer") in r.stdout
    assert "table torch-to-onnx" not in r.stdout and "table onnx-to-tf" not in r.stdout
    assert "same outputs (torch / tensorflow" in r.stdout
    r = amanda("convert", *args, "-o", str(tmp_path / "chain.savedmodel"), "--table", str(table),
               "--exclude-table", "torch-to-tf-direct")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "table torch-to-onnx" in r.stdout and "table torch-to-tf-direct" not in r.stdout
