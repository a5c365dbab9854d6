"""ONNX node test suite -> torch: Amanda's ONNX -> torch tables against onnxruntime and onnx2torch, in one run.

    .venv/bin/python bench/onnx_torch.py [--filter REGEX] [--limit N] [--json OUT] [--refusals]

Every case of ``onnx.backend.test.loader.load_model_tests(kind="node")`` (built in memory) is
* converted by Amanda (``amanda_onnx.load_model`` + ``infer_types`` -> ``convert(..., "amanda/pytorch")`` with the
  ONNX opset tables, the ONNX -> torch tables and the registered graph passes, as ``amanda convert`` runs them:
  ONNX If and Loop become prim::If and prim::Loop before the table) and run with the torch runner;
* run by onnxruntime;
* converted by onnx2torch and run, in a child process (onnx2torch imports torchvision, which is not installable
  beside the CPU torch pinned here: the child gives it an empty stand-in, so its NonMaxSuppression and RoiAlign
  converters are unavailable).
Outputs are compared with the expected outputs as onnx's backend tests compare them (shape, dtype, rtol/atol of
the case).  Amanda's outcomes: passed, refused (no rule converts an op), failed at run time, wrong (converted, ran
and gave different numbers: must be 0).  Conversion times are summed for Amanda and onnx2torch on the cases both
pass, in CPU time of each side's process, after one untimed conversion on each side (imports, schemas read on
first use): Amanda's is the conversion to a torch graph plus building its ``GraphModule`` (onnx2torch's
``convert`` returns a module too), the graph-only figure beside it.  ``--refusals`` lists every refused group (the
op types left unconverted, or the error), with its count, how many of them onnxruntime passes, and an example case.
The cases torch cannot express at all (:func:`beyond_torch`) are counted among those onnxruntime passes, giving the
ceiling of Amanda's pass count among them.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import re
import sys
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

_clock = time.process_time
"""Conversion times are CPU times of the converting process (each side's own): on a shared, loaded machine the wall
clock counts the time other processes run."""


def _arrays(values: Any) -> list[Any]:
    from onnx import numpy_helper

    return [numpy_helper.to_array(v) if hasattr(v, "dims") else v for v in values]


def same(expected: list[Any], got: list[Any], rtol: float, atol: float) -> str | None:
    """None when every output matches, else why not."""
    if len(got) != len(expected):
        return f"{len(got)} outputs, expected {len(expected)}"
    for ref, out in zip(expected, got):
        if isinstance(ref, list) or isinstance(out, list) or ref is None or out is None:
            return "not a tensor"
        ref, out = np.asarray(ref), np.asarray(out)
        if ref.shape != out.shape:
            return f"shape {out.shape}, expected {ref.shape}"
        if ref.dtype != out.dtype:
            return f"dtype {out.dtype}, expected {ref.dtype}"
        if ref.dtype == object:
            if not np.array_equal(ref, out):
                return "different strings"
            continue
        try:
            np.testing.assert_allclose(out.astype(np.float64) if out.dtype.name == "bfloat16" else out,
                                       ref.astype(np.float64) if ref.dtype.name == "bfloat16" else ref,
                                       rtol=rtol, atol=atol)
        except AssertionError as e:
            return " ".join(str(e).split())[:200]
    return None


# Element types no torch tensor holds values of: strings, and the sub-byte types (torch.int4, uint4, int2 and uint2
# are dtypes without kernels, not even copy_; float4_e2m1fn_x2 packs two values in a byte, where ONNX's FLOAT4E2M1
# tensors hold one per element).  The float8 types and float8_e8m0 are torch dtypes, so they are within reach.
NO_TORCH_ELEM = {"STRING", "INT4", "UINT4", "INT2", "UINT2", "FLOAT4E2M1"}
NO_TORCH_OPS = {"ImageDecoder": "image decoding"}


def beyond_torch(model: Any) -> str | None:
    """Why a torch module cannot compute this model at all (an element type torch has no tensors of, anywhere in the
    graph, its subgraphs or its inferred value types; or an op decoding images), else None."""
    import onnx
    from onnx import TensorProto

    try:
        model = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - the declared types are then all there is to read
        pass
    names = {getattr(TensorProto, n) for n in NO_TORCH_ELEM}

    def elem_types(tp: Any) -> list[int]:
        kind = tp.WhichOneof("value")
        if kind == "tensor_type":
            return [tp.tensor_type.elem_type]
        if kind == "sparse_tensor_type":
            return [tp.sparse_tensor_type.elem_type]
        if kind in ("sequence_type", "optional_type"):
            return elem_types(getattr(tp, kind).elem_type)
        return []

    def graph(g: Any) -> str | None:
        elems = [e for v in [*g.input, *g.output, *g.value_info] for e in elem_types(v.type)]
        elems += [t.data_type for t in g.initializer]
        for node in g.node:
            if node.op_type in NO_TORCH_OPS:
                return NO_TORCH_OPS[node.op_type]
            for a in node.attribute:
                if a.type == onnx.AttributeProto.TENSOR:
                    elems.append(a.t.data_type)
                elif a.name == "to" and a.type == onnx.AttributeProto.INT:
                    elems.append(a.i)
                for sub in [a.g, *a.graphs] if a.type in (onnx.AttributeProto.GRAPH,
                                                          onnx.AttributeProto.GRAPHS) else []:
                    why = graph(sub)
                    if why:
                        return why
        bad = sorted({TensorProto.DataType.Name(e) for e in elems if e in names})
        return f"{'/'.join(bad).lower()} tensors" if bad else None

    return graph(model.graph)


def onnx_to_torch_files() -> list[Any]:
    """The parts of the ``onnx-to-torch`` table (``amanda_torch/tables/onnx_to_torch_*.yaml``), in path order."""
    import amanda_torch

    return sorted((Path(amanda_torch.__file__).resolve().parent / "tables").glob("onnx_to_torch_*.yaml"))


def onnx_ahead_files() -> list[Any]:
    """Tables of amanda-torch that go ahead of the opset chain (``onnx_newest_to_torch*.yaml``: ops above opset 18)."""
    import amanda_torch

    return sorted((Path(amanda_torch.__file__).resolve().parent / "tables").glob("onnx_newest_to_torch*.yaml"))


def amanda_tables() -> list[Any]:
    """The ``onnx-to-torch`` table (its parts merged as the plugin registry merges them), the tables that go ahead of
    the chain, and the ONNX opset tables."""
    from amanda_core.mapping import load_table, merge_parts
    from amanda_onnx import opset

    merged = merge_parts([load_table(p, trusted=True) for p in onnx_to_torch_files()])
    assert [t.name for t in merged] == ["onnx-to-torch"], [t.name for t in merged]
    ahead = merge_parts([load_table(p, trusted=True) for p in onnx_ahead_files()])
    return [merged[0], *ahead, *opset.tables()]


def amanda_case(case: Any, tables: list[Any], registry: Any, times: dict[str, float] | None = None) \
        -> tuple[str, str, float]:
    """Amanda's outcome on one case, why, and its conversion time (graph and module); ``times["graph"]`` gets the
    graph-only part."""
    import amanda_onnx
    from amanda_core.mapping import ConversionError, convert
    from amanda_core.plugin.passes import registered_passes
    from amanda_torch.module import to_module
    from amanda_torch.runner import run

    t0 = _clock()
    try:
        graph = amanda_onnx.load_model(case.model)
        amanda_onnx.infer_types(graph)
        conv = convert(graph, "amanda/pytorch", tables, registry, passes=registered_passes())
    except ConversionError as e:
        kinds = ", ".join(f"{t}" for t, _, _, _ in e.unconverted) if e.unconverted else str(e).splitlines()[0]
        return "refused", kinds[:200], _clock() - t0
    except Exception as e:  # noqa: BLE001 - a rule that fails is refused too, with its message
        return "refused", f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}", \
            _clock() - t0
    graph_time = _clock() - t0
    try:
        to_module(conv.graph)
    except Exception as e:  # noqa: BLE001
        return "run failed", str(e).splitlines()[0][:200] if str(e) else type(e).__name__, graph_time
    elapsed = _clock() - t0
    if times is not None:
        times["graph"] = graph_time
    names = [p.name for p in conv.graph.input_ports]
    for inputs, expected in case.data_sets:
        try:
            out = run(conv.graph, dict(zip(names, _arrays(inputs))))
        except Exception as e:  # noqa: BLE001
            return "run failed", str(e).splitlines()[0][:200] if str(e) else type(e).__name__, elapsed
        why = same(_arrays(expected), list(out.values()), case.rtol, case.atol)
        if why is not None:
            return "wrong", why, elapsed
    return "passed", "", elapsed


def ort_case(case: Any) -> str:
    import onnxruntime as ort

    try:
        so = ort.SessionOptions()
        so.log_severity_level = 4
        sess = ort.InferenceSession(case.model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        for inputs, expected in case.data_sets:
            got = sess.run(None, dict(zip(names, _arrays(inputs))))
            if same(_arrays(expected), got, case.rtol, case.atol) is not None:
                return "wrong"
        return "passed"
    except Exception:  # noqa: BLE001
        return "failed"


def _o2t_worker(conn: Any) -> None:
    """Child process: converts and runs models with onnx2torch."""
    import types

    warnings.filterwarnings("ignore")
    stub = types.ModuleType("torchvision")
    stub.ops = types.ModuleType("torchvision.ops")  # type: ignore[attr-defined]
    stub.ops.roi_align = None  # type: ignore[attr-defined]
    sys.modules.setdefault("torchvision", stub)
    sys.modules.setdefault("torchvision.ops", stub.ops)  # type: ignore[attr-defined]
    import onnx
    import torch
    from onnx2torch import convert

    while True:
        msg = conn.recv()
        if msg is None:
            return
        model_bytes, data_sets = msg
        try:
            t0 = _clock()
            module = convert(onnx.load_from_string(model_bytes))
            elapsed = _clock() - t0
            results = []
            for inputs in data_sets:
                with torch.no_grad():
                    out = module(*[torch.from_numpy(np.array(v)) for v in inputs])
                outs = out if isinstance(out, (tuple, list)) else [out]
                results.append([o.numpy() if hasattr(o, "numpy") else o for o in outs])
            conn.send(("ok", results, elapsed))
        except Exception as e:  # noqa: BLE001
            conn.send(("error", f"{type(e).__name__}: {str(e)[:200]}", 0.0))


class Onnx2Torch:
    def __init__(self) -> None:
        self.ctx = mp.get_context("spawn")
        self.proc: Any = None

    def _start(self) -> None:
        self.conn, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_o2t_worker, args=(child,), daemon=True)
        self.proc.start()

    def case(self, case: Any) -> tuple[str, float]:
        if self.proc is None or not self.proc.is_alive():
            self._start()
        data = [_arrays(inputs) for inputs, _ in case.data_sets]
        self.conn.send((case.model.SerializeToString(), data))
        if not self.conn.poll(120):
            self.proc.kill()
            self.proc = None
            return "failed", 0.0
        try:
            status, results, elapsed = self.conn.recv()
        except EOFError:
            self.proc = None
            return "failed", 0.0
        if status != "ok":
            return "failed", 0.0
        for (_, expected), got in zip(case.data_sets, results):
            if same(_arrays(expected), got, case.rtol, case.atol) is not None:
                return "wrong", elapsed
        return "passed", elapsed

    def close(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.conn.send(None)
            self.proc.join(5)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--filter", default=None, help="only cases whose name matches this regular expression")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--json", default=None, help="write per-case outcomes here")
    ap.add_argument("--no-onnx2torch", action="store_true")
    ap.add_argument("--refusals", action="store_true", help="list every refused group with counts and an example")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    from onnx.backend.test.loader import load_model_tests

    from amanda_core.plugin.manager import registry

    tables = amanda_tables()
    reg = registry().namespaces
    cases = load_model_tests(kind="node")
    if args.filter:
        cases = [c for c in cases if re.search(args.filter, c.name)]
    cases = cases[: args.limit] if args.limit else cases
    o2t = None if args.no_onnx2torch else Onnx2Torch()
    if cases:  # one-time costs (imports, schemas read on first use) on neither side's clock
        amanda_case(cases[0], tables, reg)
        if o2t is not None:
            o2t.case(cases[0])
    counts: dict[str, Counter] = {"amanda": Counter(), "onnxruntime": Counter(), "onnx2torch": Counter()}
    both: Counter = Counter()
    rows = []
    times = {"amanda": 0.0, "amanda graph": 0.0, "onnx2torch": 0.0}
    for case in cases:
        one: dict[str, float] = {}
        a, why, ta = amanda_case(case, tables, reg, one)
        o = ort_case(case)
        t, tt = o2t.case(case) if o2t is not None else ("skipped", 0.0)
        counts["amanda"][a] += 1
        counts["onnxruntime"][o] += 1
        counts["onnx2torch"][t] += 1
        if o == "passed":
            both["amanda passes of onnxruntime's"] += a == "passed"
            both["onnx2torch passes of onnxruntime's"] += t == "passed"
        if a == "passed" and t == "passed":
            times["amanda"] += ta
            times["amanda graph"] += one.get("graph", ta)
            times["onnx2torch"] += tt
        beyond = beyond_torch(case.model) if o == "passed" else None
        both["out of torch's reach"] += beyond is not None
        rows.append({"case": case.name, "amanda": a, "why": why, "onnxruntime": o, "onnx2torch": t,
                     "beyond torch": beyond})
        if a == "wrong":
            print(f"WRONG {case.name}: {why}", flush=True)
    if o2t is not None:
        o2t.close()
    print(f"{len(cases)} node cases")
    for who, c in counts.items():
        print(f"  {who:12s} " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    ort_passed = counts["onnxruntime"]["passed"]
    for k, v in both.items():
        if k != "out of torch's reach":
            print(f"  {k}: {v} of {ort_passed}")
    reach = both["out of torch's reach"]
    reasons = Counter(r["beyond torch"] for r in rows if r["beyond torch"])
    print(f"  out of torch's reach: {reach} cases onnxruntime passes ("
          + ", ".join(f"{k} {v}" for k, v in reasons.most_common()) + ")")
    if ort_passed:
        ours = both["amanda passes of onnxruntime's"]
        print(f"  ceiling: {ort_passed - reach} of {ort_passed} ({(ort_passed - reach) / ort_passed:.1%}); amanda "
              f"{ours} ({ours / ort_passed:.1%})")
    if times["onnx2torch"]:
        print(f"  conversion time on the cases both pass: amanda {times['amanda']:.2f} s (graph and module; graph "
              f"alone {times['amanda graph']:.2f} s), onnx2torch {times['onnx2torch']:.2f} s "
              f"({times['amanda'] / times['onnx2torch']:.2f}x; graph alone "
              f"{times['amanda graph'] / times['onnx2torch']:.2f}x)")
    refused = Counter(r["why"] for r in rows if r["amanda"] == "refused")
    if args.refusals:
        ort_ok = Counter(r["why"] for r in rows if r["amanda"] == "refused" and r["onnxruntime"] == "passed")
        example = {}
        for r in rows:
            if r["amanda"] == "refused":
                example.setdefault(r["why"], r["case"])
        print("  refused groups (cases, of which onnxruntime passes, example):")
        for k, v in refused.most_common():
            print(f"    {v:4d} {ort_ok[k]:4d}  {k}  [{example[k]}]")
    else:
        print("  most refused: " + "; ".join(f"{k} ({v})" for k, v in refused.most_common(12)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 1 if counts["amanda"]["wrong"] else 0


if __name__ == "__main__":
    sys.exit(main())
