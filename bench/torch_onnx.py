"""torch -> ONNX: Amanda against torch.onnx on the section-5 models, in one run.

For each model (transformers' ResNetModel, MobileNetV2Model, ViTModel, BertModel from small configs, and the
small CNN; random weights, no download) this times, best of ``--repeat`` runs:

* Amanda: ``torch.export`` + import + the mapping tables + ``amanda_onnx.to_model`` (a ModelProto, nothing
  written), the whole path from a live module;
* ``torch.onnx.export(dynamo=True)`` (torch.export inside too; its optimizer on, the default);
* ``torch.onnx.export(dynamo=False)`` (the TorchScript tracer);

and counts the nodes of each output (all nodes, and nodes that are not ``Constant``: a constant written as a node
by one exporter may be an initializer in another).  Every output is also run in onnxruntime against torch eager
(max absolute difference).  Targets: Amanda's time at most 0.5x the dynamo export's, and no more nodes.

    python bench/torch_onnx.py [--models resnet,vit] [--repeat 3] [--json]

The ONNX -> torch half (against onnx2torch) is a separate bench.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
import warnings
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "plugins", "amanda-torch", "tests"))

MODELS = ["small_cnn", "resnet", "mobilenet_v2", "vit", "bert"]


def _best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def _amanda(module: Any, args: tuple[Any, ...]) -> Any:
    import amanda_onnx
    from amanda_core.mapping import convert, registered_tables
    from amanda_core.plugin import registry
    from amanda_torch.importer import load_model

    graph = load_model(module, example_inputs=args)
    graph = convert(graph, "amanda/onnx/18", registered_tables(), registry().namespaces).graph
    return amanda_onnx.to_model(graph)


def _torch_onnx(module: Any, args: tuple[Any, ...], dynamo: bool) -> Any:
    import onnx
    import torch

    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dynamo:
            prog = torch.onnx.export(module, args, dynamo=True, verbose=False)
            return prog.model_proto
        torch.onnx.export(module, args, buf, dynamo=False, opset_version=18)
    return onnx.load_from_string(buf.getvalue())


def _max_diff(model: Any, module: Any, args: tuple[Any, ...]) -> float:
    import numpy as np
    import onnxruntime as ort
    import torch

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {i.name: a.numpy() for i, a in zip(sess.get_inputs(), args)}
    got = sess.run(None, feeds)
    with torch.no_grad():
        ref = module(*args)
    ref = [ref] if isinstance(ref, torch.Tensor) else list(ref.to_tuple() if hasattr(ref, "to_tuple") else ref)
    return max(float(np.abs(g - r.numpy()).max()) for g, r in zip(got, ref))


def _nodes(model: Any) -> tuple[int, int]:
    nodes = list(model.graph.node)
    return len(nodes), sum(1 for n in nodes if n.op_type != "Constant")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    opts = ap.parse_args(argv)

    import models
    import torch

    torch.set_num_threads(1)
    rows = []
    for name in opts.models.split(","):
        module, args = models.FACTORIES[name]()
        row: dict[str, Any] = {"model": name}
        for key, fn in (("amanda", lambda m=module, a=args: _amanda(m, a)),
                        ("dynamo", lambda m=module, a=args: _torch_onnx(m, a, True)),
                        ("torchscript", lambda m=module, a=args: _torch_onnx(m, a, False))):
            try:
                seconds, model = _best(fn, opts.repeat)
                nodes, non_const = _nodes(model)
                row[key] = {"seconds": round(seconds, 4), "nodes": nodes, "non_constant_nodes": non_const,
                            "max_abs_diff": _max_diff(model, module, args)}
            except Exception as e:  # noqa: BLE001 - a failing exporter is a result of the bench
                row[key] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"}
        if "seconds" in row["amanda"] and "seconds" in row["dynamo"]:
            row["time_ratio_vs_dynamo"] = round(row["amanda"]["seconds"] / row["dynamo"]["seconds"], 3)
        rows.append(row)
        if not opts.json:
            _print(row)
    if opts.json:
        print(json.dumps(rows, indent=2))
    return 0


def _print(row: dict[str, Any]) -> None:
    parts = [f"{row['model']:>13}"]
    for key in ("amanda", "dynamo", "torchscript"):
        r = row[key]
        if "error" in r:
            parts.append(f"{key}: FAILED ({r['error']})")
        else:
            parts.append(f"{key}: {r['seconds']:.3f}s {r['nodes']} nodes ({r['non_constant_nodes']} non-Constant) "
                         f"diff {r['max_abs_diff']:.1e}")
    if "time_ratio_vs_dynamo" in row:
        parts.append(f"amanda/dynamo time {row['time_ratio_vs_dynamo']:.2f}x")
    print(" | ".join(parts), flush=True)


if __name__ == "__main__":
    sys.exit(main())
