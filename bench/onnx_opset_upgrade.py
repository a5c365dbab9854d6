"""Opset upgrade of real models: Amanda's opset tables against onnx's version converter.

The models are the ``light`` models the onnx package ships (``onnx/backend/test/data/light/*.onnx``: AlexNet,
DenseNet-121, Inception v1/v2, ResNet-50, ShuffleNet, SqueezeNet, VGG-19, ZFNet-512, all at opset 9, their weights
replaced by ConstantOfShape nodes).  ``onnx.backend.test.loader.load_model_tests(kind="light")`` finds no case in
onnx 1.23.2 (it lists directories, and these models are plain files), so the files are read directly.

Every ConstantOfShape of those files fills its weight with 0.02, so most of the models give the same value for
every class whatever the input, and comparing outputs would show little.  The bench gives them seeded random
weights first (:func:`with_seeded_weights`): each ConstantOfShape with a constant shape becomes an initializer of
that shape, He-scaled normal values for weights of two or more axes and values in [0.5, 1.5) for vectors (which
keeps batch-norm variances positive).  A weight of more than ``FULL_LIMIT`` values (AlexNet's and VGG's large
layers) becomes ``Mul(a, b)`` of two seeded random factors, ``a`` one value per output channel and ``b`` the rest
of the shape, so the files stay light.  The bench checks that the original model's outputs are not uniform.

Each model is upgraded to the target opset (default: the newest opset both onnx and onnxruntime know):

* by Amanda: import (``amanda_onnx.load_model``), convert (``amanda_core.mapping.convert`` with
  ``amanda_onnx.opset.tables()``), export (``amanda_onnx.to_model``), timed in total and per stage;
* by ``onnx.version_converter.convert_version``;

each timed as the best of ``--repeat`` runs in the same process.  Both results run in onnxruntime on the same
deterministic random input, with onnxruntime's graph optimizations off, and their outputs are compared with the
original model's, run the same way.  Deep networks with random weights amplify rounding: onnxruntime's optimized
kernels, which it picks by the model's IR version among other things, change ResNet-50's output by 0.3 % of its
largest value.  So the comparison measures the conversion, not the optimizer, and its bar is the model's own
rounding noise: the largest difference between the original run with and without optimizations, relative to the
largest output value (at least ``--rtol``).  The table prints both relative differences.

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


FULL_LIMIT = 1 << 20
"""Weights of at most this many values are stored whole; larger ones as the product of two factors."""


def with_seeded_weights(model: Any, seed: int = 0) -> Any:
    """A copy of ``model`` whose ConstantOfShape nodes with a constant shape are initializers of seeded random
    values (see the module's doc); shape initializers no node reads any more are dropped."""
    import onnx
    from onnx import numpy_helper

    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    inits = {t.name: t for t in g.initializer}
    rng = np.random.default_rng(seed)
    kept = []
    added = []
    for node in g.node:
        if node.op_type != "ConstantOfShape" or node.input[0] not in inits:
            kept.append(node)
            continue
        shape = [int(d) for d in numpy_helper.to_array(inits[node.input[0]])]
        name = node.output[0]
        if len(shape) < 2:
            added.append(numpy_helper.from_array(rng.uniform(0.5, 1.5, shape).astype(np.float32), name))
            continue
        scale = np.sqrt(2.0 / (int(np.prod(shape[1:])) or 1))
        if int(np.prod(shape)) <= FULL_LIMIT:
            added.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
            continue
        a = rng.uniform(0.5, 1.5, [shape[0]] + [1] * (len(shape) - 1)).astype(np.float32)
        b = (rng.standard_normal([1] + shape[1:]) * scale).astype(np.float32)
        added += [numpy_helper.from_array(a, name + "/seeded_a"), numpy_helper.from_array(b, name + "/seeded_b")]
        kept.append(onnx.helper.make_node("Mul", [name + "/seeded_a", name + "/seeded_b"], [name],
                                          name=name + "/seeded"))
    del g.node[:]
    g.node.extend(kept)
    read = {name for node in g.node for name in node.input}
    outputs = {o.name for o in g.output}
    unread = {name for name in inits if name not in read and name not in outputs}
    kept_inits = [t for t in g.initializer if t.name not in unread]
    del g.initializer[:]
    g.initializer.extend(kept_inits + added)
    if out.ir_version < 4:  # initializers are graph inputs too
        kept_inputs = [vi for vi in g.input if vi.name not in unread]
        del g.input[:]
        g.input.extend(kept_inputs)
        for t in added:
            g.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    onnx.checker.check_model(out)
    return out


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


def run(model: Any, feeds: dict[str, np.ndarray], optimize: bool = False) -> list[Any]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
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


def relative_diff(ref: list[Any], got: list[Any]) -> float:
    """The largest difference between ``got`` and ``ref`` over the largest magnitude in ``ref``."""
    worst = 0.0
    for r, g in zip(ref, got):
        r, g = np.asarray(r, dtype=np.float64), np.asarray(g, dtype=np.float64)
        if r.size:
            worst = max(worst, float(np.max(np.abs(g - r))) / max(float(np.max(np.abs(r))), 1e-30))
    return worst


def compare(ref: list[Any], got: list[Any], bar: float) -> str:
    if len(ref) != len(got):
        return f"{len(got)} outputs, expected {len(ref)}"
    for r, g in zip(ref, got):
        r, g = np.asarray(r), np.asarray(g)
        if r.shape != g.shape or r.dtype != g.dtype:
            return f"output {g.dtype}{list(g.shape)}, expected {r.dtype}{list(r.shape)}"
    diff = relative_diff(ref, got)
    return f"{'ok' if diff <= bar else 'WRONG'} (rel diff {diff:.2g})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", type=int, default=None, help="opset to upgrade to (default: newest onnx and "
                        "onnxruntime both know)")
    parser.add_argument("--repeat", type=int, default=3, help="timing runs per model (best is kept)")
    parser.add_argument("--models", default="", help="comma-separated model names (default: every light model)")
    parser.add_argument("--rtol", type=float, default=1e-5, help="the least bar for the relative difference "
                        "(the bar is the model's own rounding noise when that is larger)")
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
              f"{'ratio':>6}  {'noise':>7}  {'amanda result':<22} {'converter result':<22}")
    print(header)
    print("-" * len(header))
    totals = {"amanda": 0.0, "converter": 0.0}
    correct = {"amanda": 0, "converter": 0}
    for path in paths:
        name = os.path.basename(path)[len("light_"):-len(".onnx")]
        model = with_seeded_weights(onnx.load(path))
        opset_in = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
        feeds = feeds_for(model)
        reference = run(model, feeds)
        if all(np.ptp(np.asarray(r)) == 0 for r in reference):
            raise SystemExit(f"{name}: the original model's output is uniform; the comparison would show nothing")
        noise = relative_diff(reference, run(model, feeds, optimize=True))
        bar = max(args.rtol, noise)
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
                results[who] = compare(reference, run(m, feeds), bar)
            except Exception as e:  # noqa: BLE001
                results[who] = f"run failed: {type(e).__name__}: {str(e)[:60]}"
            if results[who].startswith("ok"):
                correct[who] += 1
        totals["amanda"] += a_s
        totals["converter"] += c_s if c_s == c_s else 0.0
        split = f"{stages['import']:.3f}/{stages['convert']:.3f}/{stages['export']:.3f}"
        ratio = a_s / c_s if c_s == c_s and c_s > 0 else float("nan")
        print(f"{name:<14} {opset_in:>5} {len(model.graph.node):>6}  {a_s:>9.3f} {split:>20} {c_s:>11.3f} "
              f"{ratio:>6.2f}  {noise:>7.1g}  {results['amanda'][:22]:<22} {results['converter'][:22]:<22}")
    print("-" * len(header))
    ratio = totals["amanda"] / totals["converter"] if totals["converter"] else float("nan")
    print(f"{'total':<14} {'':>5} {'':>6}  {totals['amanda']:>9.3f} {'':>20} {totals['converter']:>11.3f} "
          f"{ratio:>6.2f}  {'':>7}  {correct['amanda']}/{len(paths)} correct{'':<11} {correct['converter']}/"
          f"{len(paths)} correct")
    print("ratio = Amanda's time / the version converter's (import + convert + export against convert_version); "
          "noise = the original's rounding noise (optimized against unoptimized onnxruntime), relative to its largest "
          "output; rel diff = the converted model's largest difference from the original, relative the same way "
          "(ok when at most the noise, or --rtol)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
