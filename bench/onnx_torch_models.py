"""ONNX -> torch on the section-5 models: Amanda against onnx2torch on the same ONNX files, in one run.

    .venv/bin/python bench/onnx_torch_models.py [--models resnet,vit] [--repeat 5] [--opset 17]
                                                [--source amanda|dynamo] [--phases] [--json]

For each model (transformers' ResNetModel, MobileNetV2Model, ViTModel, BertModel from small configs, and the small
CNN; random weights, ``plugins/amanda-torch/tests/models.py``) one ONNX file is written, and both converters read
that file:

* ``--source amanda`` (the default): Amanda's own torch -> ONNX export at ``--opset`` (default 17, the newest
  opset onnx2torch reads these models at: it has no converter for ReduceMean-18, whose axes are an input), with
  ONNX type inference after the table as ``amanda convert`` runs it, so the file types every value;
* ``--source dynamo``: ``torch.onnx.export(dynamo=True)`` at ``--opset`` (onnx2torch refuses its files: asked for
  opset 17 it writes ViT and BERT at 17 with Reshape ``allowzero = 1``, which onnx2torch does not implement, and
  leaves the small CNN, ResNet and MobileNetV2 at 18, with ReduceMean-18).

A node named like an attribute of ``torch.nn.Module`` (Amanda names a ``Cast`` from ``aten::to`` ``to``) is renamed
``<name>_node`` in the file: onnx2torch makes a submodule of each node's name and fails on ``to``.

Each converter runs in its own child process (spawned, one thread for torch), so each pays its own one-time costs,
reported apart: Amanda's loading of the registered tables, schemas and passes (``amanda_core.mapping.
registered_tables`` and the plugin registry) and its first conversion; onnx2torch's import and first conversion.
Then each file is converted ``--repeat`` times and the best wall time and the best CPU time are kept:

* Amanda: ``amanda_onnx.load_model(path)`` + ``amanda_onnx.infer_types`` + ``convert(graph, "amanda/pytorch",
  registered tables, passes=registered passes, copy=False)`` + ``amanda_torch.module.to_module`` (a
  ``torch.fx.GraphModule``): what ``amanda convert model.onnx model.pt2`` does before ``torch.export``;
* onnx2torch: ``onnx2torch.convert(path)`` (a ``torch.fx.GraphModule``).

Both modules are run on the model's example inputs and checked against onnxruntime on the same file and inputs
(max absolute difference relative to the largest reference value, at most 1e-4).  ``--phases`` also prints where
Amanda's time goes (import, type inference, the tables, lowering to calls, the GraphModule) and the floor torch.fx
sets on both sides: ``torch.fx.GraphModule(module, module.graph)`` for each converter's own result (copying the
attributes the graph reads and generating and compiling ``forward``), which either converter pays once; and the
floor of Amanda's path (``_amanda_floor``): reading the file into the IR, building the converted graph in the IR,
the tables' expressions of the rewrites that happen, and the parts of the ATen ``GraphModule`` torch itself does
(the weights under their FQNs, the fx nodes, generating and compiling ``forward``), against onnx2torch's whole
conversion, with what that leaves for matching and rewriting.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
MODELS = ["small_cnn", "resnet", "mobilenet_v2", "vit", "bert"]
TOL = 1e-4


def _best(fn: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """Best wall time, best CPU time, the last result."""
    wall = cpu = float("inf")
    out = None
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        cpu = min(cpu, time.process_time() - c)
        wall = min(wall, time.perf_counter() - w)
    return wall, cpu, out


def _outputs(out: Any) -> list[Any]:
    import torch

    if isinstance(out, torch.Tensor):
        out = [out]
    elif hasattr(out, "to_tuple"):
        out = list(out.to_tuple())
    return [o.detach().numpy() for o in out]


def _run(module: Any, inputs: list[Any]) -> list[Any]:
    import torch

    with torch.no_grad():
        return _outputs(module(*[torch.from_numpy(a) for a in inputs]))


def _fx_floor(module: Any, repeat: int) -> tuple[float, float]:
    """torch.fx's own cost of the module's GraphModule: copying what its graph reads from a root and generating and
    compiling ``forward`` (best wall, best CPU)."""
    import torch.fx

    wall, cpu, _ = _best(lambda: torch.fx.GraphModule(module, module.graph), repeat)
    return wall, cpu


# --------------------------------------------------------------------------- Amanda (child process)
def amanda_child(files: dict[str, str], inputs: dict[str, list[Any]], repeat: int, phases: bool) -> dict[str, Any]:
    warnings.filterwarnings("ignore")
    sys.path.insert(0, ROOT)
    t0, c0 = time.perf_counter(), time.process_time()
    import torch

    import amanda_onnx
    from amanda_core.mapping import convert, registered_tables
    from amanda_core.plugin import registry
    from amanda_core.plugin.passes import registered_passes
    from amanda_torch.module import build_module, to_module
    from amanda_torch.program import lower

    torch.set_num_threads(1)
    tables, namespaces, passes = registered_tables(), registry().namespaces, registered_passes()
    result: dict[str, Any] = {"load": {"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0}}

    def graph_of(path: str) -> Any:
        graph = amanda_onnx.load_model(path)
        amanda_onnx.infer_types(graph)
        return convert(graph, "amanda/pytorch", tables, namespaces, passes=passes, copy=False).graph

    def one(path: str) -> Any:
        return to_module(graph_of(path))

    for name, path in files.items():
        row: dict[str, Any] = {}
        try:
            w, c = time.perf_counter(), time.process_time()
            one(path)
            row["first"] = {"wall": time.perf_counter() - w, "cpu": time.process_time() - c}
            wall, cpu, module = _best(lambda p=path: one(p), repeat)
            row.update(wall=wall, cpu=cpu, outputs=_run(module, inputs[name]))
            if phases:
                row["phases"] = _amanda_phases(path, repeat, tables, namespaces, passes, lower, build_module)
                row["fx_floor"] = _fx_floor(module, repeat)
                row["fx_nodes"] = len(module.graph.nodes)
                row["floor"] = _amanda_floor(path, repeat, graph_of, lower, module)
        except Exception as e:  # noqa: BLE001 - a failing conversion is a result of the bench
            row = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"}
        result[name] = row
    return result


def _amanda_phases(path: str, repeat: int, tables: Any, namespaces: Any, passes: Any, lower: Any,
                   build_module: Any) -> dict[str, float]:
    """Best CPU time of each step of Amanda's path."""
    import amanda_onnx
    from amanda_core.mapping import convert

    best: dict[str, float] = {}
    for _ in range(repeat):
        marks = [time.process_time()]
        graph = amanda_onnx.load_model(path)
        marks.append(time.process_time())
        amanda_onnx.infer_types(graph)
        marks.append(time.process_time())
        out = convert(graph, "amanda/pytorch", tables, namespaces, passes=passes, copy=False).graph
        marks.append(time.process_time())
        program = lower(out)
        marks.append(time.process_time())
        build_module(program)
        marks.append(time.process_time())
        for k, a, b in zip(("import", "infer types", "tables", "lower", "GraphModule"), marks, marks[1:]):
            best[k] = min(best.get(k, float("inf")), b - a)
    return best


def _amanda_floor(path: str, repeat: int, graph_of: Callable[[str], Any], lower: Any, module: Any
                  ) -> dict[str, Any]:
    """The least a conversion of ``path`` costs that reads it into Amanda's IR, writes the converted graph in the
    IR, evaluates the tables' expressions of the rewrites that happen, and makes the ATen ``GraphModule`` Amanda
    writes (best CPU seconds of each part; see ``--phases`` in the module's docstring):

    * ``read``: ``amanda_onnx.load_model`` alone;
    * ``build``: the converted graph made again op by op through the IR's API (ops with their attributes, ports
      with their types, edges), nothing matched;
    * ``expressions``: the time inside ``Expression.evaluate`` for the conditions and arguments of the matches
      that are rewritten (an instrumented conversion, timed by ``perf_counter`` inside the calls: the process runs
      one thread, so that is its CPU time; the expressions of candidates that fail are apart, in
      ``expressions_failed``, and not in the floor);
    * ``tensors``: the weights installed in a module tree under their FQNs (Amanda's own shortest path,
      ``install_tensor``, which stores what the public calls would after their checks);
    * ``nodes``: the torch.fx graph of the module made again (``Graph.graph_copy``);
    * ``code``: generating and compiling ``forward`` (``GraphModule.recompile``).
    """
    import torch.fx

    import amanda_onnx
    from amanda_core import Graph
    from amanda_core.mapping import expr as expr_mod
    from amanda_core.mapping import match as match_mod
    from amanda_torch.module import install_tensor

    def cpu(fn: Callable[[], Any]) -> float:
        return _best(fn, repeat)[1]

    out: dict[str, Any] = {"read": cpu(lambda: amanda_onnx.load_model(path))}

    # expressions: the outermost Expression.evaluate calls, kept when the match they decide is found
    state = {"depth": 0, "in_at": 0, "pending": 0.0, "kept": 0.0, "failed": 0.0, "n_kept": 0, "n_pending": 0}
    evaluate, at = expr_mod.Expression.evaluate, match_mod.Matcher.at

    def timed_evaluate(self: Any, env: Any) -> Any:
        if state["depth"]:
            return evaluate(self, env)
        state["depth"] = 1
        t = time.perf_counter()
        try:
            return evaluate(self, env)
        finally:
            dt = time.perf_counter() - t
            state["depth"] = 0
            if state["in_at"]:
                state["pending"] += dt
                state["n_pending"] += 1
            else:
                state["kept"] += dt
                state["n_kept"] += 1

    def timed_at(self: Any, anchor: Any, *args: Any, **kwargs: Any) -> Any:
        if state["in_at"]:
            return at(self, anchor, *args, **kwargs)
        state["in_at"], state["pending"], state["n_pending"] = 1, 0.0, 0
        try:
            found = at(self, anchor, *args, **kwargs)
        finally:
            state["in_at"] = 0
        if found is not None:
            state["kept"] += state["pending"]
            state["n_kept"] += state["n_pending"]
        else:
            state["failed"] += state["pending"]
        return found

    best_kept = best_failed = float("inf")
    expr_mod.Expression.evaluate, match_mod.Matcher.at = timed_evaluate, timed_at  # type: ignore[method-assign]
    try:
        for _ in range(repeat):
            state.update(kept=0.0, failed=0.0, n_kept=0)
            converted = graph_of(path)
            best_kept, best_failed = min(best_kept, state["kept"]), min(best_failed, state["failed"])
    finally:
        expr_mod.Expression.evaluate, match_mod.Matcher.at = evaluate, at  # type: ignore[method-assign]
    out["expressions"], out["expressions_failed"], out["evaluations"] = best_kept, best_failed, state["n_kept"]

    def build() -> Any:
        g = Graph(converted.namespace, dict(converted.attrs))
        ports: dict[Any, Any] = {}
        for p in converted.input_ports:
            ports[p] = g.add_input_port(p.name, p.dtype)
        for op in converted.topological_order():
            new = g.add_op(op.type, op.name, inputs=[(p.name, p.dtype) for p in op.input_ports],
                           outputs=[(p.name, p.dtype) for p in op.output_ports], attrs=dict(op.attrs),
                           namespace=op.namespace,
                           sources=[ports.get(p.source) if p.source is not None else None for p in op.input_ports])
            for old, made in zip(op.output_ports, new.output_ports):
                ports[old] = made
        for p in converted.output_ports:
            g.connect(ports[p.source], g.add_output_port(p.name, p.dtype))
        return g

    out["build"] = cpu(build)
    out["build_ops"] = len(converted)
    attrs = lower(converted).attrs

    def tensors() -> None:
        root, parents = torch.nn.Module(), {}
        for attr in attrs:
            install_tensor(root, attr, functools.reduce(getattr, attr.target.split("."), module), parents)

    out["tensors"] = cpu(tensors)
    out["nodes"] = cpu(lambda: torch.fx.Graph().graph_copy(module.graph, {}))
    out["code"] = cpu(module.recompile)
    out["total"] = sum(out[k] for k in ("read", "build", "expressions", "tensors", "nodes", "code"))
    return out


# --------------------------------------------------------------------------- onnx2torch (child process)
def onnx2torch_child(files: dict[str, str], inputs: dict[str, list[Any]], repeat: int, phases: bool
                     ) -> dict[str, Any]:
    import types

    warnings.filterwarnings("ignore")
    # onnx2torch imports torchvision, which cannot be installed beside the CPU torch pinned here: an empty stand-in
    # (only its NonMaxSuppression and RoiAlign converters need it, and these models have neither)
    stub = types.ModuleType("torchvision")
    stub.ops = types.ModuleType("torchvision.ops")  # type: ignore[attr-defined]
    stub.ops.roi_align = None  # type: ignore[attr-defined]
    sys.modules.setdefault("torchvision", stub)
    sys.modules.setdefault("torchvision.ops", stub.ops)  # type: ignore[attr-defined]
    t0, c0 = time.perf_counter(), time.process_time()
    import torch
    from onnx2torch import convert

    torch.set_num_threads(1)
    result: dict[str, Any] = {"load": {"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0}}
    for name, path in files.items():
        row: dict[str, Any] = {}
        try:
            w, c = time.perf_counter(), time.process_time()
            convert(path)
            row["first"] = {"wall": time.perf_counter() - w, "cpu": time.process_time() - c}
            wall, cpu, module = _best(lambda p=path: convert(p), repeat)
            row.update(wall=wall, cpu=cpu, outputs=_run(module, inputs[name]))
            if phases:
                row["fx_floor"] = _fx_floor(module, repeat)
                row["fx_nodes"] = len(module.graph.nodes)
        except Exception as e:  # noqa: BLE001
            row = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"}
        result[name] = row
    return result


# --------------------------------------------------------------------------- the files
def write_file(name: str, source: str, opset: int, folder: str) -> tuple[str, list[Any], int]:
    """The model's ONNX file, its example inputs as numpy arrays, and its node count."""
    import onnx
    import torch

    sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.join(ROOT, "plugins", "amanda-torch", "tests"))
    import models

    module, args = models.FACTORIES[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if source == "dynamo":
            model = torch.onnx.export(module, args, dynamo=True, opset_version=opset, verbose=False).model_proto
        else:
            import amanda_onnx
            from amanda_core.mapping import convert, registered_tables
            from amanda_core.plugin import registry
            from amanda_core.plugin.passes import registered_passes
            from amanda_torch.importer import load_model

            reg = registry()
            graph = load_model(module, example_inputs=args)
            graph = convert(graph, f"amanda/onnx/{opset}", registered_tables(), reg.namespaces,
                            passes=registered_passes(), infer=reg.infer_types).graph
            model = amanda_onnx.to_model(graph)
    for node in model.graph.node:
        if hasattr(torch.nn.Module, node.name):
            node.name = f"{node.name}_node"
    path = os.path.join(folder, f"{name}.onnx")
    onnx.save(model, path)
    return path, [a.numpy() for a in args], len(model.graph.node)


def _ort(path: str, inputs: list[Any]) -> list[Any]:
    import onnxruntime as ort

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), inputs)})


def _diff(got: list[Any], ref: list[Any]) -> float:
    """Largest absolute difference over all outputs, relative to the largest reference value (inf when the
    outputs do not line up)."""
    import numpy as np

    if len(got) != len(ref):
        return float("inf")
    worst = 0.0
    for g, r in zip(got, ref):
        if g.shape != r.shape:
            return float("inf")
        scale = max(float(np.abs(r).max()), 1e-30) if r.size else 1.0
        worst = max(worst, float(np.abs(g.astype(np.float64) - r.astype(np.float64)).max(initial=0.0)) / scale)
    return worst


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--source", choices=("amanda", "dynamo"), default="amanda")
    ap.add_argument("--phases", action="store_true", help="Amanda's time per step, and torch.fx's floor")
    ap.add_argument("--json", action="store_true")
    opts = ap.parse_args(argv)
    names = opts.models.split(",")
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")

    with tempfile.TemporaryDirectory() as folder:
        files: dict[str, str] = {}
        inputs: dict[str, list[Any]] = {}
        nodes: dict[str, int] = {}
        refs: dict[str, Any] = {}
        for name in names:
            try:
                files[name], inputs[name], nodes[name] = write_file(name, opts.source, opts.opset, folder)
                refs[name] = _ort(files[name], inputs[name])
            except Exception as e:  # noqa: BLE001
                print(f"{name}: no ONNX file ({type(e).__name__}: {str(e).splitlines()[0][:160]})", flush=True)
                files.pop(name, None)
        ctx = get_context("spawn")
        with ProcessPoolExecutor(1, mp_context=ctx) as pool:
            amanda = pool.submit(amanda_child, files, inputs, opts.repeat, opts.phases).result()
        with ProcessPoolExecutor(1, mp_context=ctx) as pool:
            o2t = pool.submit(onnx2torch_child, files, inputs, opts.repeat, opts.phases).result()

    rows = []
    for name in files:
        row: dict[str, Any] = {"model": name, "nodes": nodes[name], "source": opts.source, "opset": opts.opset}
        for who, res in (("amanda", amanda), ("onnx2torch", o2t)):
            r = dict(res[name])
            if "outputs" in r:
                r["rel_diff_vs_onnxruntime"] = _diff(r.pop("outputs"), refs[name])
                r["ok"] = r["rel_diff_vs_onnxruntime"] <= TOL
            row[who] = r
        a, o = row["amanda"], row["onnx2torch"]
        if "wall" in a and "wall" in o:
            row["ratio_wall"] = a["wall"] / o["wall"]
            row["ratio_cpu"] = a["cpu"] / o["cpu"]
        rows.append(row)
    if opts.json:
        print(json.dumps({"load": {"amanda": amanda["load"], "onnx2torch": o2t["load"]}, "models": rows},
                         indent=2, default=float))
        return 0
    print(f"one-time: Amanda's tables, schemas and passes {amanda['load']['wall']:.2f} s wall "
          f"({amanda['load']['cpu']:.2f} s CPU); onnx2torch's import {o2t['load']['wall']:.2f} s wall "
          f"({o2t['load']['cpu']:.2f} s CPU)")
    print(f"ONNX files: {opts.source} export at opset {opts.opset}; best of {opts.repeat}, milliseconds")
    print(f"{'model':>13} {'nodes':>5} | {'Amanda wall':>11} {'CPU':>7} {'first':>7} | {'onnx2torch wall':>15} "
          f"{'CPU':>7} {'first':>7} | {'ratio wall':>10} {'CPU':>6} | diff vs onnxruntime (Amanda, onnx2torch)")
    for row in rows:
        print(_line(row), flush=True)
        if opts.phases and "phases" in row["amanda"]:
            ph = row["amanda"]["phases"]
            fa, fo = row["amanda"].get("fx_floor"), row["onnx2torch"].get("fx_floor")
            floor = f"; torch.fx GraphModule alone: Amanda's {fa[1] * 1e3:.1f} ({row['amanda']['fx_nodes']} nodes)"
            if fo:
                floor += f", onnx2torch's {fo[1] * 1e3:.1f} ({row['onnx2torch']['fx_nodes']} nodes)"
            print(f"{'':>13}   Amanda CPU by step: " + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in ph.items())
                  + floor)
            fl = row["amanda"].get("floor")
            if fl and "cpu" in row["onnx2torch"]:
                o2t = row["onnx2torch"]["cpu"]
                print(f"{'':>13}   Amanda's floor {fl['total'] * 1e3:.1f} = {fl['total'] / o2t:.2f}x onnx2torch: "
                      f"read {fl['read'] * 1e3:.1f}, build {fl['build'] * 1e3:.1f} ({fl['build_ops']} ops), "
                      f"expressions {fl['expressions'] * 1e3:.1f} ({fl['evaluations']}; failed candidates' "
                      f"{fl['expressions_failed'] * 1e3:.1f} apart), tensors {fl['tensors'] * 1e3:.1f}, "
                      f"fx nodes {fl['nodes'] * 1e3:.1f}, code {fl['code'] * 1e3:.1f}; left for matching and "
                      f"rewriting {max(o2t - fl['total'], 0.0) * 1e3:.1f}")
    ok = all(r[w].get("ok", True) for r in rows for w in ("amanda",))
    return 0 if ok else 1


def _line(row: dict[str, Any]) -> str:
    def side(r: dict[str, Any], width: int) -> str:
        if "error" in r:
            return f"{'FAILED':>{width}} {'':>7} {'':>7}"
        return f"{r['wall'] * 1e3:>{width}.1f} {r['cpu'] * 1e3:>7.1f} {r['first']['wall'] * 1e3:>7.1f}"

    def diff(r: dict[str, Any]) -> str:
        if "error" in r:
            return r["error"][:70]
        return f"{r['rel_diff_vs_onnxruntime']:.1e}{'' if r['ok'] else ' WRONG'}"

    a, o = row["amanda"], row["onnx2torch"]
    ratio = f"{row['ratio_wall']:>9.2f}x {row['ratio_cpu']:>5.2f}x" if "ratio_wall" in row else f"{'-':>10} {'-':>6}"
    return (f"{row['model']:>13} {row['nodes']:>5} | {side(a, 11)} | {side(o, 15)} | {ratio} | "
            f"{diff(a)}, {diff(o)}")


if __name__ == "__main__":
    sys.exit(main())
