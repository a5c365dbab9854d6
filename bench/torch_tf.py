"""PyTorch -> TensorFlow: Amanda (through the planner, torch -> ONNX -> TF) beside nobuco (torch -> Keras), on
transformers' ResNet, MobileNetV2 and BERT small configs (``plugins/amanda-torch/tests/models.py``), in one run.

For each model: the max abs difference of each converter's TF model from torch eager on the factory's own inputs
(and relative to the largest reference value; both computed here, the same way for both), the conversion time
(``process s``: the converting child process, start and framework imports included; ``convert s``: nobuco's
``pytorch_to_keras`` call alone), and, for Amanda, the ``Transpose`` ops left in the SavedModel's graph.  Every
framework runs in its own child process (torch and TensorFlow never share one), except nobuco, which needs both
and runs in its own environment (``--nobuco-python``: nobuco supports Keras 2 only, so it runs in a separate venv
with ``tensorflow-cpu==2.15.1``; docs/checking.md says how it was made).

    .venv/bin/python bench/torch_tf.py [--models resnet,mobilenet_v2,bert] \
        [--nobuco-python /tmp/nobuco-venv/bin/python]

Also: ``bert_base`` (a factory: transformers' BertModel at BERT-base size from a config, random weights) and
``--sizes torch_tf:bert_base`` (with ``bench`` on ``PYTHONPATH``), which prints a model's weight bytes and the
bytes of all its intermediate values (from ``torch.export``'s fake tensors: nothing is run), for the per-op
check's memory figure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "plugins" / "amanda-torch" / "tests"
BENCH = ROOT / "bench"
TOL = 1e-4


def bert_base(seed: int = 0, batch: int = 4, seq: int = 128) -> Any:
    """transformers' ``BertModel`` at BERT-base size (12 layers, hidden 768, 12 heads, vocabulary 30522; 109 M
    parameters, 418 MiB float32) from a config, seeded random weights; int64 ``input_ids`` and
    ``attention_mask`` of ``[batch, seq]``."""
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    config = BertConfig(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertModel(config).eval()
    g = torch.Generator()
    g.manual_seed(seed + 1)
    ids = torch.randint(0, config.vocab_size, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    return model, (ids, mask)


def sizes(ref: str) -> dict[str, int]:
    """Weight bytes and the bytes of every intermediate value (each node of the exported program's graph, once)
    of the model a factory makes."""
    import importlib

    import torch

    module_name, _, attr = ref.partition(":")
    model, args = getattr(importlib.import_module(module_name), attr)()
    weights = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    program = torch.export.export(model, tuple(args))
    total = values = 0
    for node in program.graph.nodes:
        if node.op != "call_function":
            continue
        val = node.meta.get("val")
        for v in (val if isinstance(val, (list, tuple)) else [val]):
            if isinstance(v, torch.Tensor):
                total += v.numel() * v.element_size()
                values += 1
    return {"weight_bytes": weights, "intermediate_bytes": total, "intermediate_values": values}


# --------------------------------------------------------------------------- the comparison


def _child(code: str, *args: str, python: str = sys.executable, timeout: int = 3600) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(MODELS), str(BENCH)]))
    return subprocess.run([python, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


_REFERENCE = """
import sys, inspect, numpy as np, torch, models
model, args = getattr(models, sys.argv[1])()
with torch.no_grad():
    out = model(*args)
outs = [out[k] for k in ("last_hidden_state", "pooler_output") if out.get(k) is not None]
names = list(inspect.signature(model.forward).parameters)[:len(args)]  # the graph's input names
np.savez(sys.argv[2], **{n: a.numpy() for n, a in zip(names, args)})
np.savez(sys.argv[3], *[o.numpy() for o in outs])
"""

_RUN_TF = """
import sys, json, numpy as np, tensorflow as tf
loaded = tf.saved_model.load(sys.argv[1])
fn = loaded.signatures["serving_default"]
graph = fn.graph.as_graph_def()
count = sum(1 for n in graph.node if n.op == "Transpose")
for f in graph.library.function:
    count += sum(1 for n in f.node_def if n.op == "Transpose")
data = np.load(sys.argv[2])
args = {k: tf.constant(data[k]) for k in data.files}
out = fn(**{k: v for k, v in args.items() if k in fn.structured_input_signature[1]})
wanted = ["last_hidden_state", "pooler_output"]
names = [n for n in wanted if n in out] if all(n in out for n in wanted[:1]) else sorted(out)
np.savez(sys.argv[3], *[out[n].numpy() for n in names])
print(json.dumps({"transposes": count, "outputs": names}))
"""

_NOBUCO = """
import sys, time, json, numpy as np, torch, models
try:  # nobuco reads torch.ops.torchvision.nms, which a torchvision without its C++ ops does not define
    torch.ops.torchvision.nms
except (AttributeError, RuntimeError):
    _vision = torch.library.Library("torchvision", "DEF")
    _vision.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
import nobuco
from nobuco import ChannelOrder
import tensorflow as tf

class Plain(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner
    def forward(self, *args):
        out = self.inner(*args)
        return tuple(out[k] for k in ("last_hidden_state", "pooler_output") if out.get(k) is not None)

model, args = getattr(models, sys.argv[1])()
wrapped = Plain(model).eval()
start = time.perf_counter()
keras_model = nobuco.pytorch_to_keras(wrapped, args=list(args), inputs_channel_order=ChannelOrder.PYTORCH,
                                      outputs_channel_order=ChannelOrder.PYTORCH)
seconds = time.perf_counter() - start
outs = keras_model([tf.constant(a.numpy()) for a in args])
outs = outs if isinstance(outs, (list, tuple)) else [outs]
np.savez(sys.argv[2], *[np.asarray(o) for o in outs])
print(json.dumps({"seconds": seconds}))
"""


def _diff(reference: Any, got: Any) -> tuple[float, float]:
    import numpy as np

    worst_abs = worst_rel = 0.0
    for key in reference.files:
        r, g = reference[key].astype(np.float64), np.asarray(got[key], dtype=np.float64)
        if r.shape != g.shape:
            return float("inf"), float("inf")
        a = float(np.max(np.abs(r - g))) if r.size else 0.0
        scale = float(np.max(np.abs(r))) if r.size else 1.0
        worst_abs = max(worst_abs, a)
        worst_rel = max(worst_rel, a / scale if scale else a)
    return worst_abs, worst_rel


def run_amanda(name: str, inputs: Path, reference: Path, work: Path) -> dict[str, Any]:
    """``amanda convert models:NAME --to amanda/tensorflow`` (timed, in a child process: its start, torch's
    import and TensorFlow's are in the time), then the SavedModel runs in a TF child on the same inputs."""
    import numpy as np

    out = work / f"{name}.savedmodel"
    start = time.perf_counter()
    r = _child("import sys; from amanda_core.cli.main import main; sys.exit(main(sys.argv[1:]))",
               "convert", f"models:{name}", "--to", "amanda/tensorflow", "-o", f"{out}/")
    seconds = time.perf_counter() - start
    if r.returncode != 0:
        return {"ok": False, "error": (r.stderr.strip().splitlines() or ["?"])[-1][:300]}
    got = work / f"{name}.amanda.npz"
    t = _child(_RUN_TF, str(out), str(inputs), str(got))
    if t.returncode != 0:
        return {"ok": False, "seconds_process": round(seconds, 1),
                "error": (t.stderr.strip().splitlines() or ["?"])[-1][:300]}
    a, rel = _diff(np.load(reference), np.load(got))
    return {"ok": a <= TOL and rel <= TOL, "seconds_process": round(seconds, 1), "max_abs_diff": a,
            "max_rel_diff": rel, "transposes_left": json.loads(t.stdout.strip().splitlines()[-1])["transposes"]}


def run_nobuco(name: str, python: str, reference: Path, work: Path) -> dict[str, Any]:
    import numpy as np

    got = work / f"{name}.nobuco.npz"
    start = time.perf_counter()
    r = _child(_NOBUCO, name, str(got), python=python)
    wall = time.perf_counter() - start
    if r.returncode != 0:
        return {"ok": False, "error": (r.stderr.strip().splitlines() or ["?"])[-1][:300]}
    seconds = json.loads(r.stdout.strip().splitlines()[-1])["seconds"]
    a, rel = _diff(np.load(reference), np.load(got))
    return {"ok": a <= TOL and rel <= TOL, "seconds": round(seconds, 1), "seconds_process": round(wall, 1),
            "max_abs_diff": a, "max_rel_diff": rel}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="resnet,mobilenet_v2,bert")
    p.add_argument("--nobuco-python", default="/tmp/nobuco-venv/bin/python",
                   help="a Python with nobuco, Keras 2 (tensorflow-cpu 2.15) and torch")
    p.add_argument("--sizes", metavar="MODULE:FACTORY", help="print weight and intermediate bytes, then stop")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.sizes:
        print(json.dumps(sizes(args.sizes)))
        return 0
    nobuco_ok = Path(args.nobuco_python).exists()
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name in args.models.split(","):
            inputs, reference = work / f"{name}.inputs.npz", work / f"{name}.torch.npz"
            r = _child(_REFERENCE, name, str(inputs), str(reference))
            if r.returncode != 0:
                rows[name] = {"error": r.stderr.strip().splitlines()[-1]}
                continue
            row = {"amanda": run_amanda(name, inputs, reference, work)}
            row["nobuco"] = run_nobuco(name, args.nobuco_python, reference, work) if nobuco_ok else \
                {"ok": False, "error": f"no nobuco environment at {args.nobuco_python}"}
            rows[name] = row
            print(json.dumps({name: row}), flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"{'model':<14}{'converter':<9}{'max abs':>11}{'rel':>11}{'process s':>11}{'convert s':>11}"
              f"{'transposes':>12}  note")
        for name, row in rows.items():
            for conv in ("amanda", "nobuco"):
                c = row.get(conv, {})
                print(f"{name:<14}{conv:<9}{_fmt(c.get('max_abs_diff')):>11}{_fmt(c.get('max_rel_diff')):>11}"
                      f"{_fmt(c.get('seconds_process')):>11}{_fmt(c.get('seconds')):>11}"
                      f"{_fmt(c.get('transposes_left')):>12}  {c.get('error', '')}")
    return 0


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


if __name__ == "__main__":
    sys.exit(main())
