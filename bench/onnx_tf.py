"""ONNX -> TF: Amanda against onnx2tf on ONNX models made from the Keras models of the amanda-tf suites, in one run.

    .venv/bin/python bench/onnx_tf.py [mobilenet_v2 resnet50 inception_v3] [--onnx2tf PATH] [--keep DIR]

For each model (random weights and batch-norm statistics, nothing downloaded): the Keras model is converted to
ONNX by Amanda with channels-first inputs (``to_onnx(..., channels_first_inputs=True)``: an NCHW ONNX model without
a transpose, as an ONNX model exported from a channels-first framework is), written to a temporary folder, then
converted to a TensorFlow SavedModel twice, each as its own command:

* ``amanda convert m.onnx --to amanda/tensorflow -o amanda/`` (this environment's Python);
* ``onnx2tf -i m.onnx -o onnx2tf/ -n`` (onnx2tf pins other TensorFlow and protobuf versions, so it runs from its
  own environment: ``--onnx2tf`` names its command, by default ``/tmp/onnx2tf-venv/bin/onnx2tf``; set it up with
  ``python3.11 -m venv /tmp/onnx2tf-venv && /tmp/onnx2tf-venv/bin/pip install onnx2tf``).  Its time includes the
  TFLite files it writes after the SavedModel by default (no option turns them off), so the time at which each
  tool's ``saved_model.pb`` was written is reported too.

Each command's wall time and CPU time (user + system of the child, all threads) are reported; both include the
command's start (Python, TensorFlow's import).  Then each SavedModel is loaded here and the ``Transpose`` ops of
its serving function are counted (the function graph and every library function it calls, each once), and it is
run on the seeded input against the Keras model: onnx2tf makes the input channels-last, Amanda keeps the ONNX
model's channels-first input, so each is fed its own layout (read from the signature's input shape).  A tool
that cannot install or run is reported with its error instead of figures.  Never imports torch.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "plugins", "amanda-tf", "tests"))
ONNX2TF = "/tmp/onnx2tf-venv/bin/onnx2tf"


def _run(cmd: list[str], log: str) -> tuple[float, float, str | None]:
    """Run ``cmd`` (output to ``log``); returns wall time, the child's CPU time and the error (None when it
    succeeded)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    try:
        with open(log, "w") as out:
            proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False)
    except OSError as e:
        return 0.0, 0.0, f"{cmd[0]}: {e.strerror}"
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        with open(log) as f:
            lines = [ln.strip() for ln in f if ln.strip()]
        errors = [ln for ln in lines if "Error" in ln or "error" in ln] or lines
        return wall, cpu, f"exit {proc.returncode}: {errors[-1][:300] if errors else 'no output'}"
    return wall, cpu, None


def _function_names(node_defs: Any) -> list[str]:
    names = []
    for node in node_defs:
        for value in node.attr.values():
            if value.HasField("func"):
                names.append(value.func.name)
            elif value.HasField("list"):
                names.extend(f.name for f in value.list.func)
    return names


def _count_transposes(fn: Any) -> int:
    """``Transpose`` ops in a concrete function's graph and every library function reachable from it, once each."""
    gd = fn.graph.as_graph_def()
    library = {f.signature.name: f for f in gd.library.function}
    count = sum(1 for n in gd.node if n.op == "Transpose")
    todo, seen = _function_names(gd.node), set()
    while todo:
        name = todo.pop()
        if name in seen or name not in library:
            continue
        seen.add(name)
        body = library[name].node_def
        count += sum(1 for n in body if n.op == "Transpose")
        todo.extend(_function_names(body))
    return count


def _check(saved_model: str, x_nhwc: np.ndarray, ref: np.ndarray) -> tuple[int, str, float]:
    """Transposes of ``saved_model``'s serving function, the input layout it takes and its max abs difference
    to ``ref`` (relative to the largest reference value)."""
    import tensorflow as tf

    loaded = tf.saved_model.load(saved_model)
    fn = loaded.signatures["serving_default"]
    transposes = _count_transposes(fn)
    (name, spec), = fn.structured_input_signature[1].items()
    shape = list(spec.shape)
    nchw = len(shape) == 4 and shape[1] == x_nhwc.shape[3] and shape[3] != x_nhwc.shape[3]
    x = np.ascontiguousarray(x_nhwc.transpose(0, 3, 1, 2)) if nchw else x_nhwc
    outputs = fn(**{name: tf.constant(x)})
    (got,) = [v.numpy() for v in outputs.values()]
    if got.shape != ref.shape:
        raise ValueError(f"output shape {got.shape}, Keras {ref.shape}")
    diff = float(np.abs(got.astype(np.float64) - ref).max()) / max(float(np.abs(ref).max()), 1e-12)
    return transposes, "NCHW" if nchw else "NHWC", diff


def _randomize_batch_norms(model: Any, seed: int = 0) -> None:
    """Random batch-norm statistics: with Keras' initial ones a random MobileNetV2's logits vanish and its softmax
    is uniform, which any converter matches exactly."""
    import keras

    rng = np.random.default_rng(seed)
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            (c,) = {w.shape for w in layer.get_weights()}
            weights = [rng.uniform(0.5, 1.5, c)] if layer.scale else []
            weights += [rng.normal(0, 0.5, c)] if layer.center else []
            layer.set_weights(weights + [rng.normal(0, 0.1, c), rng.uniform(0.5, 1.5, c)])


def bench(name: str, onnx2tf: str, work: str) -> dict[str, Any]:
    import tf_models as models  # plugins/amanda-tf/tests/tf_models.py

    import amanda_onnx
    from amanda_tf.importer import load_model
    from amanda_tf.layout import count_transposes, to_onnx

    model, inputs = models.KERAS_MODELS[name](batch=1)
    _randomize_batch_norms(model)
    (x,) = inputs.values()
    ref = np.asarray(model(x)).astype(np.float64)
    onnx_graph, _ = to_onnx(load_model(model), channels_first_inputs=True)
    folder = os.path.join(work, name)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "m.onnx")
    amanda_onnx.save_model(onnx_graph, path)
    row: dict[str, Any] = {"model": name, "onnx_transposes": count_transposes(onnx_graph)}
    tools = {"amanda": [sys.executable, "-m", "amanda_core", "convert", "--quiet", path, "--to", "amanda/tensorflow",
                        "-o", os.path.join(folder, "amanda") + os.sep],
             "onnx2tf": [onnx2tf, "-i", os.path.join(folder, "m_onnx2tf.onnx"), "-o", os.path.join(folder, "onnx2tf"),
                         "-n"]}
    shutil.copyfile(path, os.path.join(folder, "m_onnx2tf.onnx"))  # onnx2tf writes its simplified model over its input
    for tool, cmd in tools.items():
        start = time.time()
        wall, cpu, error = _run(cmd, os.path.join(folder, f"{tool}.log"))
        row[tool] = {"wall": wall, "cpu": cpu, "error": error}
        written = os.path.join(folder, tool, "saved_model.pb")
        if os.path.exists(written):  # onnx2tf goes on to write TFLite files after its SavedModel
            row[tool]["saved_model_at"] = os.path.getmtime(written) - start
        if error is None:
            try:
                row[tool]["transposes"], row[tool]["layout"], row[tool]["diff"] = _check(
                    os.path.join(folder, tool), x, ref)
            except Exception as e:  # noqa: BLE001 - reported in the table, the other tool's figures still count
                row[tool]["error"] = f"its SavedModel does not run here: {type(e).__name__}: {str(e)[:200]}"
    return row


def _cell(r: dict[str, Any]) -> str:
    if r.get("error"):
        return f"failed ({r['wall']:.1f}s): {r['error']}"
    return (f"{r['wall']:6.1f}s wall {r['cpu']:6.1f}s cpu (SavedModel written at {r['saved_model_at']:.1f}s)  "
            f"transposes {r['transposes']:>3}  input {r['layout']}  max rel diff {r['diff']:.1e}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=["mobilenet_v2", "resnet50", "inception_v3"])
    ap.add_argument("--onnx2tf", default=ONNX2TF, help=f"the onnx2tf command (default {ONNX2TF})")
    ap.add_argument("--keep", metavar="DIR", help="write the ONNX files, SavedModels and logs here and keep them")
    args = ap.parse_args(argv)
    work = args.keep or tempfile.mkdtemp(prefix="amanda-onnx-tf-")
    failed = False
    try:
        for name in args.models:
            try:
                r = bench(name, args.onnx2tf, work)
            except Exception as e:  # one model failing does not hide the others' figures
                print(f"{name:14} failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
                failed = True
                continue
            print(f"{r['model']:14} ONNX (channels-first input, {r['onnx_transposes']} transposes)")
            for tool in ("amanda", "onnx2tf"):
                print(f"{'':4}{tool:10} {_cell(r[tool])}")
                failed = failed or (tool == "amanda" and bool(r[tool].get("error")))
            a, o = r["amanda"], r["onnx2tf"]
            if not a.get("error") and not o.get("error"):
                print(f"{'':4}Amanda / onnx2tf: wall {a['wall'] / o['wall']:.3f}, cpu {a['cpu'] / o['cpu']:.3f}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("times: each tool as a command, start-up and TensorFlow's import included; diff: max |got - Keras| / "
          "max |Keras|")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
