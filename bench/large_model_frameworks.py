"""Large models across frameworks: time and memory of ``amanda convert`` torch -> ONNX, ONNX -> torch ``.py`` +
``.safetensors``, and a TensorFlow SavedModel re-export and conversion to ONNX, against ``cp`` of the same bytes.

    .venv/bin/python bench/large_model_frameworks.py                   # torch 0.4 and 1.6 GB, TF 0.5 GB
    .venv/bin/python bench/large_model_frameworks.py --sizes 0.4 --tf-gb 0   # torch 0.4 GB only
    .venv/bin/python bench/large_model_frameworks.py --sizes "" --tf-gb 0.5,3  # TF only, two sizes

Models:

* torch: ``L`` ``Linear(4096, 4096, bias=False)`` layers (64 MiB of float32 each) in an ``nn.Sequential``, saved
  with ``torch.export.save`` as ``m.pt2``;
* ONNX -> torch: the ``bench/large_model.py`` model (``L`` MatMul layers of 4096x4096 float32, inline weights);
* TF: a Keras ``Sequential`` of ``Dense(4096)`` layers saved as a SavedModel (``tf.saved_model.save``).

Commands (each in its own process, through the command line, progress off):

* ``torch -> onnx``: ``amanda convert m.pt2 --to amanda/onnx -o t.onnx``;
* ``onnx -> torch``: ``amanda convert m.onnx --to amanda/pytorch -o m.py`` (weights in ``m.safetensors``);
* ``tf re-export``: ``amanda convert saved/ -o out/`` (SavedModel -> SavedModel);
* ``tf -> onnx``: ``amanda convert saved/ --to amanda/onnx -o m.onnx`` (external data over 2 GB).

TensorFlow's own fixed cost is measured beside them: ``import tensorflow``, and loading and saving an empty
SavedModel (a ``tf.Module`` without variables), each in its own process.

Floors: ``cp`` of the source and ``cp + sync`` (the copy fsynced, as Amanda's atomic writes are). Peak resident
memory (``VmHWM``) and peak anonymous memory (``RssAnon``, sampled every 10 ms) of each process. For torch the
importer maps the ``.pt2``'s weight entries (the bound is a fixed cost); ONNX -> torch reads the mapped ONNX file
and streams each tensor into the ``.safetensors`` (the bound is a fixed cost). The TensorFlow importer maps the
SavedModel's checkpoint and the exporter writes the weights as variables tensor by tensor (the bound is
TensorFlow's fixed cost plus a small one). Outputs are checked: the same bytes for every weight (as multisets of
tensors, names differ between frameworks), for the smallest torch size the converted model's outputs, and for TF
the outputs of the re-exported SavedModel and of the ONNX model against the source SavedModel's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, ROOT)

from large_model import measure  # noqa: E402

PY = sys.executable
N = 4096  # --n changes it (a quick smoke run)

_MAKE_TORCH = """
import sys, torch
path, layers, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.manual_seed(0)
with torch.no_grad():
    model = torch.nn.Sequential(*[torch.nn.Linear(n, n, bias=False) for _ in range(layers)])
    for m in model:
        m.weight.mul_(0.5)
program = torch.export.export(model, (torch.randn(2, n),))
torch.export.save(program, path)
"""

_MAKE_TF = """
import sys, numpy as np, tensorflow as tf, keras
path, layers, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
keras.utils.set_random_seed(0)
inp = keras.Input((n,), name="x")
h = inp
for i in range(layers):
    h = keras.layers.Dense(n, name=f"dense{i}")(h)
model = keras.Model(inp, h)
tf.saved_model.save(model, path)
"""

# the weights of a model file as a sorted list of sha256 digests (dtype, shape, bytes), in a child process
_DIGESTS = """
import sys, json, hashlib, numpy as np
kind, path = sys.argv[1], sys.argv[2]
def digest(a):
    a = np.ascontiguousarray(a)
    h = hashlib.sha256(f"{a.dtype.name}{a.shape}".encode())
    flat = a.reshape(-1).view(np.uint8)
    for i in range(0, flat.size, 1 << 26):
        h.update(memoryview(flat[i:i + (1 << 26)]))
    return h.hexdigest()
out = []
if kind == "onnx":
    import amanda_onnx
    g = amanda_onnx.load_model(path)
    out = [digest(np.asarray(op.attrs["value"])) for op in g if op.type == "Initializer" and
           int(np.prod(op.attrs["value"].shape)) >= 1024]
elif kind == "pt2":
    import torch
    p = torch.export.load(path)
    out = [digest(t.detach().numpy()) for t in p.state_dict.values()]
elif kind == "safetensors":
    from safetensors.numpy import load_file
    out = [digest(v) for v in load_file(path).values() if v.size >= 1024]
elif kind == "savedmodel":  # variables of the checkpoint and Const nodes of the graphs (a frozen export has no
    import os                   # variables), as a set: a constant may appear in several functions
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2
    prefix = os.path.join(path, "variables", "variables")
    if os.path.exists(prefix + ".index"):
        reader = tf.train.load_checkpoint(prefix)
        for k in reader.get_variable_to_shape_map():
            v = reader.get_tensor(k)
            if isinstance(v, np.ndarray) and v.dtype.kind in "fiub" and v.size >= 1024:
                out.append(digest(v))
    sm = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        sm.ParseFromString(f.read())
    for mg in sm.meta_graphs:
        nodes = list(mg.graph_def.node) + [n for fn in mg.graph_def.library.function for n in fn.node_def]
        for n in nodes:
            if n.op == "Const":
                v = tf.make_ndarray(n.attr["value"].tensor)
                if v.dtype.kind in "fiub" and v.size >= 1024:
                    out.append(digest(v))
    out = sorted(set(out))
print(json.dumps(sorted(out)))
"""

_TORCH_VS_ORT = """
import sys, numpy as np, torch, onnxruntime as ort
pt2, onnx_path = sys.argv[1], sys.argv[2]
x = np.random.default_rng(1).standard_normal((2, int(sys.argv[3])), dtype=np.float32)
ref = torch.export.load(pt2).module()(torch.from_numpy(x)).detach().numpy()
s = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
got = s.run(None, {s.get_inputs()[0].name: x})[0]
print(float(np.max(np.abs(ref - got)) / (np.max(np.abs(ref)) + 1e-30)))
"""

_ORT_VS_TORCH_PY = """
import sys, importlib.util, numpy as np, torch, onnxruntime as ort
onnx_path, py = sys.argv[1], sys.argv[2]
x = np.random.default_rng(1).standard_normal((2, int(sys.argv[3])), dtype=np.float32)
s = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
ref = s.run(None, {"x": x})[0]
spec = importlib.util.spec_from_file_location("generated", py)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
cls = [v for v in vars(mod).values() if isinstance(v, type) and issubclass(v, torch.nn.Module)
       and v.__module__ == "generated"][0]
got = cls()(torch.from_numpy(x)).detach().numpy()
print(float(np.max(np.abs(ref - got)) / (np.max(np.abs(ref)) + 1e-30)))
"""


def digests(kind: str, path: str) -> list[str]:
    res = subprocess.run([PY, "-c", _DIGESTS, kind, path], capture_output=True, text=True)
    if res.returncode:
        raise SystemExit(f"reading the weights of {path} failed:\n{res.stderr}")
    return json.loads(res.stdout)


def size_of(path: str) -> int:
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
    return os.path.getsize(path)


def floors(src: str, d: str) -> tuple[dict[str, Any], dict[str, Any]]:
    dst = os.path.join(d, "cp_" + os.path.basename(src.rstrip("/")))
    flag = "-r " if os.path.isdir(src) else ""
    os.system("sync")
    cp = measure(["sh", "-c", f"cp {flag}'{src}' '{dst}'"])
    shutil.rmtree(dst, ignore_errors=True) if os.path.isdir(dst) else os.unlink(dst)
    os.system("sync")
    cps = measure(["sh", "-c", f"cp {flag}'{src}' '{dst}' && sync '{dst}'" +
                   (f" && find '{dst}' -type f -exec sync {{}} +" if flag else "")])
    shutil.rmtree(dst, ignore_errors=True) if os.path.isdir(dst) else os.unlink(dst)
    return cp, cps


def amanda(args: list[str]) -> dict[str, Any]:
    env = dict(os.environ, AMANDA_NO_PROGRESS="1")
    os.system("sync")
    return measure([PY, "-m", "amanda_core", "convert", "--quiet", *args], env=env)


def row(model: str, command: str, r: dict[str, Any], weights: int, cp: dict[str, Any], cps: dict[str, Any],
        **extra: Any) -> dict[str, Any]:
    r = {k: v for k, v in r.items() if k != "stderr"}
    return {"model": model, "command": command, **r, "weights_mb": weights / 2**20, "x_cp": r["time"] / cp["time"],
            "x_cp_sync": r["time"] / cps["time"], **extra}


def bench_torch(workdir: str, gb: float, check: bool) -> list[dict[str, Any]]:
    layers = max(1, round(gb * 1e9 / (N * N * 4)))
    weights = layers * N * N * 4
    d = os.path.join(workdir, f"torch_{gb}")
    os.makedirs(d, exist_ok=True)
    rows = []
    pt2 = os.path.join(d, "m.pt2")
    subprocess.run([PY, "-c", _MAKE_TORCH, pt2, str(layers), str(N)], check=True)
    cp, cps = floors(pt2, d)
    model = f"torch {gb} GB ({layers} Linear)"
    rows += [row(model, "cp", cp, weights, cp, cps), row(model, "cp + sync", cps, weights, cp, cps)]
    out = os.path.join(d, "t.onnx")
    r = amanda([pt2, "--to", "amanda/onnx", "-o", out])
    same = digests("pt2", pt2) == digests("onnx", out)
    extra: dict[str, Any] = {"weights_identical": same}
    if check:
        res = subprocess.run([PY, "-c", _TORCH_VS_ORT, pt2, out, str(N)], capture_output=True, text=True, check=True)
        extra["max_rel_diff"] = float(res.stdout.strip())
    rows.append(row(model, "torch -> onnx", r, weights, cp, cps, **extra))
    shutil.rmtree(d, ignore_errors=True)

    d = os.path.join(workdir, f"onnx_torch_{gb}")
    os.makedirs(d, exist_ok=True)
    src = os.path.join(d, "m.onnx")
    subprocess.run([PY, "-c", "import sys; sys.path.insert(0, sys.argv[1]); from large_model import make_model; "
                    "make_model(sys.argv[2], int(sys.argv[3]), False, n=int(sys.argv[4]))",
                    os.path.join(ROOT, "bench"), src, str(layers), str(N)], check=True)
    cp, cps = floors(src, d)
    model = f"onnx {gb} GB inline ({layers} MatMul)"
    rows += [row(model, "cp", cp, weights, cp, cps), row(model, "cp + sync", cps, weights, cp, cps)]
    py = os.path.join(d, "m.py")
    r = amanda([src, "--to", "amanda/pytorch", "-o", py])
    st = os.path.join(d, "m.safetensors")
    extra = {"weights_identical": digests("onnx", src) == digests("safetensors", st)}
    if check:
        res = subprocess.run([PY, "-c", _ORT_VS_TORCH_PY, src, py, str(N)], capture_output=True, text=True, check=True)
        extra["max_rel_diff"] = float(res.stdout.strip())
    rows.append(row(model, "onnx -> torch .py", r, weights, cp, cps, **extra))
    shutil.rmtree(d, ignore_errors=True)
    return rows


# the outputs of the SavedModel argv[1] and of argv[2] (a SavedModel or an ONNX file) on one input: max rel. diff
_TF_OUTPUTS = """
import sys, numpy as np, tensorflow as tf
src, other, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
x = np.random.default_rng(1).standard_normal((2, n), dtype=np.float32)
def served(path):
    fn = tf.saved_model.load(path).signatures["serving_default"]
    (name,) = fn.structured_input_signature[1]
    return list(fn(**{name: tf.constant(x)}).values())[0].numpy()
ref = served(src)
if other.endswith(".onnx"):
    import onnxruntime as ort
    s = ort.InferenceSession(other, providers=["CPUExecutionProvider"])
    got = s.run(None, {s.get_inputs()[0].name: x})[0]
else:
    got = served(other)
print(float(np.max(np.abs(ref - got)) / (np.max(np.abs(ref)) + 1e-30)))
"""

_TF_FLOORS = {
    "tf floor: import tensorflow": "import tensorflow",
    "tf floor: load an empty SavedModel": "import sys, tensorflow as tf; tf.saved_model.load(sys.argv[1])",
    "tf floor: save an empty SavedModel": "import sys, tensorflow as tf; tf.saved_model.save(tf.Module(), sys.argv[2])",
}


def bench_tf(workdir: str, gb: float) -> list[dict[str, Any]]:
    layers = max(1, round(gb * 1e9 / (N * N * 4)))
    weights = layers * (N * N * 4 + 4 * N)
    d = os.path.join(workdir, f"tf_{gb}")
    os.makedirs(d, exist_ok=True)
    saved = os.path.join(d, "saved")
    subprocess.run([PY, "-c", _MAKE_TF, saved, str(layers), str(N)], check=True, capture_output=True)
    cp, cps = floors(saved, d)
    model = f"keras {gb} GB ({layers} Dense) SavedModel"
    rows = [row(model, "cp", cp, weights, cp, cps), row(model, "cp + sync", cps, weights, cp, cps)]
    empty = os.path.join(d, "empty")
    subprocess.run([PY, "-c", "import sys, tensorflow as tf; tf.saved_model.save(tf.Module(), sys.argv[1])", empty],
                   check=True, capture_output=True)
    for label, code in _TF_FLOORS.items():
        rows.append(row(model, label, measure([PY, "-c", code, empty, os.path.join(d, "empty2")]), weights, cp, cps))
        shutil.rmtree(os.path.join(d, "empty2"), ignore_errors=True)
    want = digests("savedmodel", saved)
    out = os.path.join(d, "out") + "/"
    r = amanda([saved + "/", "-o", out])
    diff = subprocess.run([PY, "-c", _TF_OUTPUTS, saved, out, str(N)], capture_output=True, text=True, check=True)
    rows.append(row(model, "tf re-export", r, weights, cp, cps, weights_identical=want == digests("savedmodel", out),
                    max_rel_diff=float(diff.stdout.strip()), out_mb=size_of(out) / 2**20))
    shutil.rmtree(out, ignore_errors=True)
    onnx_out = os.path.join(d, "m.onnx")
    r = amanda([saved + "/", "--to", "amanda/onnx", "-o", onnx_out])
    diff = subprocess.run([PY, "-c", _TF_OUTPUTS, saved, onnx_out, str(N)], capture_output=True, text=True,
                          check=True)
    # the ONNX model has the kernels and biases as initializers (compared as sets: Keras' zero biases are equal)
    rows.append(row(model, "tf -> onnx", r, weights, cp, cps,
                    weights_identical=sorted(want) == sorted(set(digests("onnx", onnx_out))),
                    max_rel_diff=float(diff.stdout.strip())))
    shutil.rmtree(d, ignore_errors=True)
    return rows


def main() -> None:
    global N
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="0.4,1.6", help="torch model sizes in GB (default 0.4,1.6)")
    ap.add_argument("--tf-gb", default="0.5", help="Keras model sizes in GB, comma-separated (0: no TF run)")
    ap.add_argument("--dir", default=os.path.join("/tmp", "amanda-large-frameworks-bench"))
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--n", type=int, default=N, help="layer width (default 4096; smaller for a quick run)")
    args = ap.parse_args()
    N = args.n
    os.makedirs(args.dir, exist_ok=True)
    sizes = [float(s) for s in args.sizes.split(",") if s]
    rows = []
    for gb in sizes:
        new = bench_torch(args.dir, gb, check=gb == min(sizes))
        rows += new
        print(json.dumps(new), file=sys.stderr, flush=True)
    for gb in (float(s) for s in args.tf_gb.split(",") if s):
        if gb <= 0:
            continue
        new = bench_tf(args.dir, gb)
        rows += new
        print(json.dumps(new), file=sys.stderr, flush=True)
    print("| model | command | time s | x cp | x (cp + sync) | peak RSS MB | peak RssAnon MB | weights MB "
          "| anon target MB | checked |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        checked = ""
        if "weights_identical" in r:
            checked = "same weight bytes" if r["weights_identical"] else "WEIGHTS DIFFER"
            if "max_rel_diff" in r:
                checked += f", outputs max rel. diff {r['max_rel_diff']:.1e}"
        target = f"{300 + 0.05 * r['weights_mb']:.0f}"
        print(f"| {r['model']} | {r['command']} | {r['time']:.2f} | {r['x_cp']:.2f} | {r['x_cp_sync']:.2f} | "
              f"{r['rss_mb']:.0f} | {r['anon_mb']:.0f} | {r['weights_mb']:.0f} | {target} | {checked} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
