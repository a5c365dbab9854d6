"""Opset upgrade of real models: Amanda's opset tables against onnx's version converter.

The models are the ``light`` models the onnx package ships (``onnx/backend/test/data/light/*.onnx``: AlexNet,
DenseNet-121, Inception v1/v2, ResNet-50, ShuffleNet, SqueezeNet, VGG-19, ZFNet-512, all at opset 9, their weights
replaced by ConstantOfShape nodes).  ``onnx.backend.test.loader.load_model_tests(kind="light")`` finds no case in
onnx 1.23.2 (it lists directories, and these models are plain files), so the files are read directly.

Each model is upgraded to the target opset (default: the newest opset both onnx and onnxruntime know):

* by Amanda: import (``amanda_onnx.load_model``), convert (``amanda_core.mapping.convert`` with
  ``amanda_onnx.opset.tables()``), export (``amanda_onnx.to_model``), timed in total and per stage;
* by ``onnx.version_converter.convert_version``;

each timed as the best of ``--repeat`` runs in the same process.  Both results run in onnxruntime on the same
deterministic random input, and their outputs are compared with the original model's (``--rtol``/``--atol``).

    python bench/onnx_opset_upgrade.py [--target 28] [--repeat 3] [--models resnet50,vgg19]
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time
import warnings
from functools import partial
from typing import Any, Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402


def target_opset() -> int:
    import onnx
    from onnxruntime.capi import _pybind_state as capi

    newest = max(int(k.version_range[0]) for k in capi.get_all_opkernel_def()
                 if k.domain in ("", "ai.onnx") and k.provider == "CPUExecutionProvider")
    return min(newest, int(onnx.defs.onnx_opset_version()))


def light_models() -> list[str]:
    import onnx

    folder = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    return sorted(glob.glob(os.path.join(folder, "light_*.onnx")))


def feeds_for(model: Any, seed: int = 0) -> dict[str, np.ndarray]:
    """A deterministic random value for every graph input that is not an initializer."""
    from onnx import helper

    inits = {t.name for t in model.graph.initializer}
    rng = np.random.default_rng(seed)
    out = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        out[vi.name] = rng.standard_normal(shape).astype(dtype)
    return out


def run(model: Any, feeds: dict[str, np.ndarray]) -> list[Any]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def amanda_stages(model: Any, target: int, tables: list[Any], namespaces: Any) -> tuple[Any, dict[str, float]]:
    import amanda_onnx
    from amanda_core.mapping import convert

    t0 = time.perf_counter()
    graph = amanda_onnx.load_model(model)
    t1 = time.perf_counter()
    result = convert(graph, f"amanda/onnx/{target}", tables, namespaces, copy=False)
    t2 = time.perf_counter()
    out = amanda_onnx.to_model(result.graph)
    t3 = time.perf_counter()
    return out, {"import": t1 - t0, "convert": t2 - t1, "export": t3 - t2}


def amanda_best(stages: dict[str, float], model: Any, target: int, tables: list[Any], namespaces: Any) -> Any:
    """One Amanda upgrade; ``stages`` keeps the per-stage times of the fastest run so far."""
    out, times = amanda_stages(model, target, tables, namespaces)
    if not stages or sum(times.values()) < sum(stages.values()):
        stages.update(times)
    return out


def compare(ref: list[Any], got: list[Any], rtol: float, atol: float) -> str:
    if len(ref) != len(got):
        return f"{len(got)} outputs, expected {len(ref)}"
    worst = 0.0
    for r, g in zip(ref, got):
        r, g = np.asarray(r), np.asarray(g)
        if r.shape != g.shape or r.dtype != g.dtype:
            return f"output {g.dtype}{list(g.shape)}, expected {r.dtype}{list(r.shape)}"
        if not np.allclose(g, r, rtol=rtol, atol=atol):
            return f"max abs diff {float(np.max(np.abs(g.astype(np.float64) - r))):.3g}"
        if r.size:
            worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - r))))
    return f"ok (max abs diff {worst:.2g})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", type=int, default=None, help="opset to upgrade to (default: newest onnx and "
                        "onnxruntime both know)")
    parser.add_argument("--repeat", type=int, default=3, help="timing runs per model (best is kept)")
    parser.add_argument("--models", default="", help="comma-separated model names (default: every light model)")
    parser.add_argument("--rtol", type=float, default=1e-3)
    parser.add_argument("--atol", type=float, default=1e-5)
    args = parser.parse_args(argv)

    import onnx
    from onnx import version_converter

    from amanda_core.plugin.manager import registry
    from amanda_onnx import opset

    warnings.simplefilter("ignore")
    target = args.target or target_opset()
    start = time.perf_counter()
    tables = opset.tables()
    tables_s = time.perf_counter() - start
    namespaces = registry().namespaces
    paths = light_models()
    if args.models:
        wanted = {m.strip() for m in args.models.split(",") if m.strip()}
        paths = [p for p in paths if os.path.basename(p)[len("light_"):-len(".onnx")] in wanted]
    print(f"onnx {onnx.__version__}, onnxruntime {__import__('onnxruntime').__version__}; target opset {target}; "
          f"{len(paths)} models; best of {args.repeat}; opset tables built in {tables_s:.2f} s")
    header = (f"{'model':<14} {'opset':>5} {'nodes':>6}  {'amanda s':>9} {'(imp/conv/exp)':>20} {'converter s':>11} "
              f"{'ratio':>6}  {'amanda result':<28} {'converter result':<28}")
    print(header)
    print("-" * len(header))
    totals = {"amanda": 0.0, "converter": 0.0}
    correct = {"amanda": 0, "converter": 0}
    for path in paths:
        name = os.path.basename(path)[len("light_"):-len(".onnx")]
        model = onnx.load(path)
        opset_in = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
        feeds = feeds_for(model)
        reference = run(model, feeds)
        stages: dict[str, float] = {}
        a_s, a_model = best_of(args.repeat, partial(amanda_best, stages, model, target, tables, namespaces))
        try:
            c_s, c_model = best_of(args.repeat, partial(version_converter.convert_version, model, target))
        except Exception as e:  # noqa: BLE001 - reported as the converter's result
            c_s, c_model = float("nan"), None
            c_result = f"conversion failed: {type(e).__name__}"
        results = {}
        for who, m in (("amanda", a_model), ("converter", c_model)):
            if m is None:
                results[who] = c_result
                continue
            try:
                results[who] = compare(reference, run(m, feeds), args.rtol, args.atol)
            except Exception as e:  # noqa: BLE001
                results[who] = f"run failed: {type(e).__name__}: {str(e)[:60]}"
            if results[who].startswith("ok"):
                correct[who] += 1
        totals["amanda"] += a_s
        totals["converter"] += c_s if c_s == c_s else 0.0
        split = f"{stages['import']:.3f}/{stages['convert']:.3f}/{stages['export']:.3f}"
        ratio = a_s / c_s if c_s == c_s and c_s > 0 else float("nan")
        print(f"{name:<14} {opset_in:>5} {len(model.graph.node):>6}  {a_s:>9.3f} {split:>20} {c_s:>11.3f} "
              f"{ratio:>6.2f}  {results['amanda'][:28]:<28} {results['converter'][:28]:<28}")
    print("-" * len(header))
    ratio = totals["amanda"] / totals["converter"] if totals["converter"] else float("nan")
    print(f"{'total':<14} {'':>5} {'':>6}  {totals['amanda']:>9.3f} {'':>20} {totals['converter']:>11.3f} "
          f"{ratio:>6.2f}  {correct['amanda']}/{len(paths)} correct{'':<17} {correct['converter']}/{len(paths)} "
          "correct")
    print("ratio = Amanda's time / the version converter's (import + convert + export against convert_version)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
