"""torch -> ONNX: Amanda against torch.onnx on the section-5 models, in one run.

For each model (transformers' ResNetModel, MobileNetV2Model, ViTModel, BertModel from small configs, and the
small CNN; random weights, no download) this times, best of ``--repeat`` runs:

* ``torch.onnx.export(dynamo=True)`` (torch.export inside too; its optimizer on, the default; at its default
  opset, 20 with torch 2.13);
* Amanda at the same opset: ``torch.export`` + import + the mapping tables (``torch-to-onnx`` to opset 18, then
  the opset tables) + the graph passes registered after them (``torch-onnx-fold``, ``torch-onnx-gelu``: batch
  norm and padding folded into Conv, constant subgraphs folded, constants as initializers, GELU as ``Gelu``) +
  ``amanda_onnx.to_model`` (a ModelProto, nothing written): the whole path from a live module, as
  ``amanda convert`` runs it;
* ``torch.onnx.export(dynamo=False)`` (the TorchScript tracer, opset 18);

and counts the nodes of each output (all nodes, and nodes that are not ``Constant``: a constant written as a node
by one exporter may be an initializer in another).  Every output is also run in onnxruntime against torch eager
(max absolute difference).  Targets: Amanda's time at most 0.5x the dynamo export's, and no more nodes.

    python bench/torch_onnx.py [--models resnet,vit] [--repeat 3] [--opset 18] [--json]

``--opset`` converts Amanda's side to that opset instead of the dynamo export's.

The ONNX -> torch half (against onnx2torch, on the same models) is bench/onnx_torch_models.py.
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


def _amanda(module: Any, args: tuple[Any, ...], opset: int) -> Any:
    import amanda_onnx
    from amanda_core.mapping import convert, registered_tables
    from amanda_core.plugin import registry
    from amanda_core.plugin.passes import registered_passes
    from amanda_torch.importer import load_model

    reg = registry()
    graph = load_model(module, example_inputs=args)
    graph = convert(graph, f"amanda/onnx/{opset}", registered_tables(), reg.namespaces,
                    passes=registered_passes(), infer=reg.infer_types).graph
    return amanda_onnx.to_model(graph)


def _opset(model: Any) -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


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
    ap.add_argument("--opset", type=int, default=None,
                    help="Amanda's target opset (default: the opset of torch.onnx's dynamo export)")
    ap.add_argument("--json", action="store_true")
    opts = ap.parse_args(argv)

    import models
    import torch

    torch.set_num_threads(1)
    rows = []
    for name in opts.models.split(","):
        module, args = models.FACTORIES[name]()
        row: dict[str, Any] = {"model": name}
        opset = [opts.opset or 18]
        for key, fn in (("dynamo", lambda m=module, a=args: _torch_onnx(m, a, True)),
                        ("amanda", lambda m=module, a=args, o=opset: _amanda(m, a, o[0])),
                        ("torchscript", lambda m=module, a=args: _torch_onnx(m, a, False))):
            try:
                seconds, model = _best(fn, opts.repeat)
                nodes, non_const = _nodes(model)
                row[key] = {"seconds": round(seconds, 4), "nodes": nodes, "non_constant_nodes": non_const,
                            "opset": _opset(model), "max_abs_diff": _max_diff(model, module, args)}
                if key == "dynamo" and opts.opset is None:
                    opset[0] = _opset(model)
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
        r = row.get(key, {"error": "not run"})
        if "error" in r:
            parts.append(f"{key}: FAILED ({r['error']})")
        else:
            parts.append(f"{key}: {r['seconds']:.3f}s {r['nodes']} nodes ({r['non_constant_nodes']} non-Constant) "
                         f"opset {r['opset']} diff {r['max_abs_diff']:.1e}")
    if "time_ratio_vs_dynamo" in row:
        parts.append(f"amanda/dynamo time {row['time_ratio_vs_dynamo']:.2f}x")
    if "nodes" in row["amanda"] and "nodes" in row["dynamo"]:
        parts.append(f"nodes {'<=' if row['amanda']['nodes'] <= row['dynamo']['nodes'] else '>'} dynamo's")
    print(" | ".join(parts), flush=True)


if __name__ == "__main__":
    sys.exit(main())
