"""Per-op suite: torch's OpInfo database, each op exported alone, converted to ONNX by Amanda and by torch.onnx.

    .venv/bin/python bench/torch_opinfo.py [--samples 1] [--jobs 2] [--timeout 120] [--ops add,mul] [--json out.jsonl]
                                           [--gaps] [--report out.jsonl]

For every OpInfo of ``torch.testing._internal.common_methods_invocations.op_db`` that supports float32 on the CPU,
the first ``--samples`` float32 CPU samples (seeded) each become a small module that calls the op on the sample's
tensors (literal arguments stay literals); the module is run eagerly twice (an op whose two runs differ is random
and left out, as is a sample whose output holds no tensor or whose inputs or outputs are complex), exported with
``torch.export``, and then, in the same run, on the same sample:

* **amanda**: the ExportedProgram imported (``amanda_torch.importer.load_model``), converted to ``amanda/onnx/18``
  with the registered tables and graph passes (as ``amanda convert`` does), written (``amanda_onnx.to_model``),
  checked by ``onnx.checker`` and run in onnxruntime;
* **torch.onnx**: ``torch.onnx.export(module, args, dynamo=True)`` on the same module and inputs, run in
  onnxruntime.

Each result is compared with eager (same shape, same element type, equal NaN/inf positions,
``|got - want| <= 1e-4 + 1e-4 |want|``).  Outcomes: ``pass``; ``refused`` (the converter raised: for Amanda, no
rule matched, so nothing was written); ``export`` (torch.export failed: neither converter gets a program);
``invalid`` (the converter wrote a model that onnx.checker or onnxruntime rejects); ``wrong`` (a model that runs
and gives other numbers); ``timeout``/``crash``.  Converted-but-wrong (``wrong`` and ``invalid``) is what a
converter must never do.

Ops run in worker processes (``--jobs``); a worker that crashes or passes ``--timeout`` seconds on one op is
replaced and that op's remaining samples are recorded as ``crash``/``timeout``.  Prints both pass counts, per
sample and per op (an op passes when all its samples pass), Amanda's converted-but-wrong list, refused ops by
count, and the time each converter took.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import multiprocessing as mp
import os
import queue
import sys
import time
from typing import Any

RTOL = 1e-4
ATOL = 1e-4

# ops whose outputs are random or undefined (empty memory) whatever the seed: not comparable
RANDOM_OPS = {"bernoulli", "normal", "normal.number_mean", "rand_like", "randint_like", "randn_like", "randint",
              "multinomial", "uniform", "empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided",
              "empty_permuted", "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
              "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout", "nn.functional.rrelu",
              "cauchy", "exponential", "geometric", "log_normal", "randn", "rand",
              "torch.ops.aten._efficientzerotensor"}


# ----------------------------------------------------------------------------------------------- samples


def float32_ops(names: set[str] | None = None) -> list[Any]:
    """The OpInfos that support float32 on the CPU (``names``: only those, by ``name`` or ``name.variant``)."""
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    out = []
    for info in op_db:
        full = info.name + (f".{info.variant_test_name}" if info.variant_test_name else "")
        if names is not None and full not in names and info.name not in names:
            continue
        if torch.float32 not in info.supported_dtypes("cpu"):
            continue
        out.append(info)
    return out


def op_label(info: Any) -> str:
    return info.name + (f".{info.variant_test_name}" if info.variant_test_name else "")


class OpModule:
    """Builds the ``nn.Module`` that calls one OpInfo on one sample: tensors of the sample are its inputs (in
    pytree order), everything else is a literal; it returns the tensor leaves of the op's result as a tuple."""

    def __init__(self, info: Any, sample: Any) -> None:
        import torch
        from torch.utils import _pytree as pytree

        leaves, self.spec = pytree.tree_flatten((sample.input, tuple(sample.args), dict(sample.kwargs)))
        self.is_tensor = [isinstance(v, torch.Tensor) for v in leaves]
        self.literals = [None if t else v for v, t in zip(leaves, self.is_tensor)]
        self.tensors = tuple(v.detach().clone() for v, t in zip(leaves, self.is_tensor) if t)
        self.fn = info.op
        self.out_mask: list[bool] | None = None

    def call(self, *tensors: Any) -> Any:
        from torch.utils import _pytree as pytree

        it = iter(tensors)
        leaves = [next(it) if t else v for v, t in zip(self.literals, self.is_tensor)]
        inp, args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        return self.fn(inp, *args, **kwargs)

    def module(self) -> Any:
        import torch
        from torch.utils import _pytree as pytree

        owner = self

        class Op(torch.nn.Module):
            def forward(self, *args: Any) -> Any:
                out = pytree.tree_leaves(owner.call(*args))
                return tuple(o for o, keep in zip(out, owner.out_mask or []) if keep)

        return Op().eval()


def eager_outputs(op: OpModule) -> list[Any] | str:
    """The op's tensor outputs as numpy arrays, or why the sample is left out."""
    import numpy as np
    import torch
    from torch.utils import _pytree as pytree

    if any(t.is_complex() for t in op.tensors):
        return "complex input"
    with torch.no_grad():
        runs = []
        for _ in range(2):
            out = pytree.tree_leaves(op.call(*[t.clone() for t in op.tensors]))
            runs.append(out)
    op.out_mask = [isinstance(o, torch.Tensor) for o in runs[0]]
    first = [o for o in runs[0] if isinstance(o, torch.Tensor)]
    second = [o for o in runs[1] if isinstance(o, torch.Tensor)]
    if not first:
        return "no tensor output"
    if any(o.is_complex() or o.dtype in (torch.bfloat16, torch.float16) or o.layout != torch.strided
           for o in first):
        return "complex, half or sparse output"
    arrays = [o.detach().contiguous().numpy().copy() for o in first]
    again = [o.detach().contiguous().numpy() for o in second]
    for a, b in zip(arrays, again):
        if a.shape != b.shape or not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
            return "random output"
    return arrays


def compare(got: list[Any], want: list[Any]) -> str | None:
    """None when ``got`` matches ``want``; otherwise what differs."""
    import numpy as np

    if len(got) != len(want):
        return f"{len(got)} outputs, eager has {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        if g.shape != w.shape:
            return f"output {i}: shape {list(g.shape)}, eager {list(w.shape)}"
        if g.dtype != w.dtype:
            return f"output {i}: dtype {g.dtype}, eager {w.dtype}"
        if w.dtype.kind in "biu":
            if not np.array_equal(g, w):
                return f"output {i}: {int((g != w).sum())} of {w.size} values differ"
            continue
        gf, wf = g.astype(np.float64), w.astype(np.float64)
        if not np.array_equal(np.isnan(gf), np.isnan(wf)):
            return f"output {i}: NaN at other places"
        fin = np.isfinite(wf)
        if not np.array_equal(gf[~fin & ~np.isnan(wf)], wf[~fin & ~np.isnan(wf)]):
            return f"output {i}: inf at other places"
        if not np.array_equal(np.isfinite(gf), fin):
            return f"output {i}: inf at other places"
        if fin.any():
            err = np.abs(gf[fin] - wf[fin])
            bad = err > ATOL + RTOL * np.abs(wf[fin])
            if bad.any():
                return f"output {i}: max abs diff {float(err.max()):.3g}"
    return None


def run_onnx(model: Any, args: tuple[Any, ...]) -> list[Any]:
    """Runs a ModelProto in onnxruntime; inputs named ``args_<i>`` take argument i, others go by position."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 4
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    feeds = {}
    for pos, inp in enumerate(sess.get_inputs()):
        idx = int(inp.name[5:]) if inp.name.startswith("args_") and inp.name[5:].isdigit() else pos
        feeds[inp.name] = args[idx].detach().contiguous().numpy()
    return sess.run(None, feeds)


def amanda_onnx_model(program: Any) -> Any:
    """Amanda's conversion of an ExportedProgram to an ONNX ModelProto (raises when no rule converts an op)."""
    import amanda_onnx
    from amanda_core.mapping import convert, registered_tables
    from amanda_core.plugin import registry
    from amanda_core.plugin.passes import registered_passes
    from amanda_torch.importer import load_model

    graph = load_model(program)
    reg = registry()
    converted = convert(graph, "amanda/onnx/18", registered_tables(reg), reg.namespaces,
                        passes=registered_passes()).graph
    return amanda_onnx.to_model(converted)


def torch_onnx_model(module: Any, args: tuple[Any, ...]) -> Any:
    import torch

    with torch.no_grad():
        program = torch.onnx.export(module, args, dynamo=True, verbose=False, optimize=True)
    return program.model_proto


def outcome(make: Any, args: tuple[Any, ...], want: list[Any]) -> tuple[str, str, float]:
    """Converts with ``make()``, checks and runs the model: (outcome, detail, conversion seconds)."""
    import onnx

    t0 = time.perf_counter()
    try:
        model = make()
    except Exception as e:  # noqa: BLE001 - any failure to convert is a refusal
        left = getattr(e, "unconverted", None)
        # the op types left unconverted, the ATen overloads first (a literal prim::Constant is left over only
        # because the op reading it was)
        types = sorted((t for t, _, _, _ in left or ()), key=lambda t: (t.startswith("prim::"), t))
        detail = "no rule: " + ", ".join(types) if types else _one_line(e)
        return "refused", detail, time.perf_counter() - t0
    seconds = time.perf_counter() - t0
    try:
        onnx.checker.check_model(model)
        got = run_onnx(model, args)
    except Exception as e:  # noqa: BLE001 - a written model that does not load or run
        return "invalid", _one_line(e), seconds
    diff = compare(got, want)
    return ("pass", "", seconds) if diff is None else ("wrong", diff, seconds)


def _one_line(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}".strip().splitlines()
    return text[0][:300] if text else type(e).__name__


def samples_of(info: Any, count: int) -> list[Any]:
    import torch

    torch.manual_seed(0)
    out = []
    gen = None
    try:
        gen = iter(info.sample_inputs("cpu", torch.float32, requires_grad=False))
        for s in gen:
            out.append(s)
            if len(out) >= count:
                break
    except Exception:  # noqa: BLE001 - an OpInfo whose sample generator fails here has no samples
        pass
    finally:
        close = getattr(gen, "close", None)
        if close is not None:
            close()  # now, not while torch.export traces (its grad-mode context would be traced)
        del gen
        gc.collect()  # generators the sample generator nested are closed here too
    return out


def run_op(info: Any, count: int, which: tuple[str, ...] = ("amanda", "torch.onnx"),
           emit: Any = None) -> list[dict[str, Any]]:
    """Every result of one op's first ``count`` samples (one record per sample and converter)."""
    import torch

    results = []

    def put(rec: dict[str, Any]) -> None:
        results.append(rec)
        if emit is not None:
            emit(rec)

    label = op_label(info)
    for k, sample in enumerate(samples_of(info, count)):
        base = {"op": label, "sample": k}
        op = OpModule(info, sample)
        want = eager_outputs(op)
        if isinstance(want, str):
            put({**base, "converter": "-", "outcome": "skip", "detail": want})
            continue
        module, args = op.module(), op.tensors
        program = None
        t0 = time.perf_counter()
        try:
            with torch.no_grad():
                program = torch.export.export(module, args)
            export_detail = ""
        except Exception as e:  # noqa: BLE001
            export_detail = _one_line(e)
        export_seconds = time.perf_counter() - t0
        for conv in which:
            if conv == "amanda":
                if program is None:
                    rec = {**base, "converter": conv, "outcome": "export", "detail": export_detail, "seconds": 0.0}
                else:
                    res, detail, sec = outcome(lambda p=program: amanda_onnx_model(p), args, want)
                    rec = {**base, "converter": conv, "outcome": res, "detail": detail,
                           "seconds": sec + export_seconds}
            else:
                res, detail, sec = outcome(lambda m=module, a=args: torch_onnx_model(m, a), args, want)
                rec = {**base, "converter": conv, "outcome": res, "detail": detail, "seconds": sec}
            put(rec)
    return results


# ----------------------------------------------------------------------------------------------- workers


def _worker(tasks: Any, results: Any, count: int, which: tuple[str, ...]) -> None:
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    import torch

    torch.set_num_threads(1)
    infos = {op_label(i): i for i in float32_ops()}
    warm_up(which)
    pid, parent = os.getpid(), os.getppid()
    while True:
        try:
            label = tasks.get(timeout=5)
        except queue.Empty:
            if os.getppid() != parent:  # the run was stopped
                return
            continue
        if label is None:
            return
        results.put(("start", pid, label, None))
        try:
            run_op(infos[label], count, which, emit=lambda rec, lab=label: results.put(("result", pid, lab, rec)))
        except Exception as e:  # noqa: BLE001
            results.put(("result", pid, label, {"op": label, "sample": -1, "converter": "-", "outcome": "skip",
                                                "detail": "harness: " + _one_line(e)}))
        results.put(("done", pid, label, None))


def warm_up(which: tuple[str, ...]) -> None:
    """Loads what every conversion needs once (Amanda's tables and schemas, torch.onnx's registry), so that the
    per-op timeout measures the op."""
    import torch

    class Neg(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return -x

    x = torch.ones(2)
    with torch.no_grad():
        program = torch.export.export(Neg(), (x,))
    if "amanda" in which:
        amanda_onnx_model(program)
    if "torch.onnx" in which:
        torch_onnx_model(Neg(), (x,))


def run_all(labels: list[str], count: int, jobs: int, timeout: float, which: tuple[str, ...],
            progress: bool = True, sink: Any = None) -> list[dict[str, Any]]:
    """Runs ``labels`` in ``jobs`` worker processes; an op whose worker dies or passes ``timeout`` seconds is
    recorded as ``crash``/``timeout`` for the samples it had not finished, and the worker is replaced."""
    ctx = mp.get_context("spawn")
    tasks: Any = ctx.Queue()
    results: Any = ctx.Queue()
    for label in labels:
        tasks.put(label)
    workers: dict[int, Any] = {}
    current: dict[int, tuple[str, float]] = {}   # worker pid -> (op, start time)
    seen: dict[str, set[tuple[int, str]]] = collections.defaultdict(set)
    records: list[dict[str, Any]] = []
    done: set[str] = set()

    def spawn() -> None:
        p = ctx.Process(target=_worker, args=(tasks, results, count, which), daemon=True)
        p.start()
        workers[p.pid] = p

    for _ in range(max(1, min(jobs, len(labels)))):
        spawn()
    while len(done) < len(labels):
        try:
            kind, pid, label, rec = results.get(timeout=1.0)
        except queue.Empty:
            kind = None
        if kind == "start":
            current[pid] = (label, time.monotonic())
        elif kind == "result":
            records.append(rec)
            if sink is not None:
                sink.write(json.dumps(rec) + "\n")
                sink.flush()
            seen[label].add((rec["sample"], rec["converter"]))
        elif kind == "done":
            done.add(label)
            current.pop(pid, None)
            if progress:
                print(f"[{len(done)}/{len(labels)}] {label}", file=sys.stderr, flush=True)
        if kind is not None:
            continue
        now = time.monotonic()
        for pid, p in list(workers.items()):
            busy = current.get(pid)
            late = busy is not None and now - busy[1] > timeout
            if p.is_alive() and not late:
                continue
            if late:
                p.kill()
            p.join(timeout=5)
            workers.pop(pid)
            current.pop(pid, None)
            if busy is not None:
                _lost(records, busy[0], "timeout" if late else "crash", seen, which)
                done.add(busy[0])
                if progress:
                    print(f"[{len(done)}/{len(labels)}] {busy[0]} ({'timeout' if late else 'crash'})",
                          file=sys.stderr, flush=True)
            if len(done) < len(labels):
                spawn()
    for _ in workers:
        tasks.put(None)
    for p in workers.values():
        p.join(timeout=10)
        if p.is_alive():
            p.kill()
    return records


def _lost(records: list[dict[str, Any]], label: str, why: str, seen: dict[str, set[tuple[int, str]]],
          which: tuple[str, ...]) -> None:
    have = seen.get(label, set())
    sample = max([s for s, _ in have], default=0)
    for conv in which:
        if (sample, conv) not in have:
            records.append({"op": label, "sample": sample, "converter": conv, "outcome": why, "detail": why})


# ----------------------------------------------------------------------------------------------- report


def summarize(records: list[dict[str, Any]], which: tuple[str, ...]) -> dict[str, Any]:
    by_conv: dict[str, Any] = {}
    for conv in which:
        recs = [r for r in records if r["converter"] == conv]
        counts = collections.Counter(r["outcome"] for r in recs)
        per_op: dict[str, bool] = {}
        for r in recs:
            per_op[r["op"]] = per_op.get(r["op"], True) and r["outcome"] == "pass"
        refused: collections.Counter[str] = collections.Counter()
        for r in recs:
            if r["outcome"] == "refused":
                refused[_refused_reason(r["detail"], r["op"])] += 1
        by_conv[conv] = {
            "samples": len(recs), "outcomes": dict(counts), "ops": len(per_op),
            "ops_passed": sum(per_op.values()),
            "wrong": [r for r in recs if r["outcome"] in ("wrong", "invalid")],
            "refused": refused, "seconds": sum(r.get("seconds", 0.0) for r in recs),
        }
    return by_conv


def _refused_reason(detail: str, op: str) -> str:
    return detail[:120]


def unmapped_overloads(detail: str) -> list[str]:
    """The framework op types (``aten::``, ``torch_nn::``; not ``prim::`` literals and lists, which are left over only
    because the op reading them was) a refusal's detail names as left without a rule."""
    if not detail.startswith("no rule: "):
        return []
    return [t for t in detail[len("no rule: "):].split(", ") if "::" in t and not t.startswith("prim::")]


def print_gaps(records: list[dict[str, Any]]) -> None:
    """Per op that torch.onnx passes and Amanda does not: Amanda's outcome and why (the unmapped ATen overloads
    for a refusal); then the unmapped overloads by the number of such ops they block, and every refused op's
    overloads."""
    amanda = {(r["op"], r["sample"]): r for r in records if r["converter"] == "amanda"}
    tonnx = {(r["op"], r["sample"]): r for r in records if r["converter"] == "torch.onnx"}
    gaps = sorted(k for k, r in tonnx.items() if r["outcome"] == "pass"
                  and k in amanda and amanda[k]["outcome"] != "pass")
    blocking: collections.Counter[str] = collections.Counter()
    print(f"gaps (torch.onnx passes, amanda does not): {len(gaps)}")
    for key in gaps:
        r = amanda[key]
        names = unmapped_overloads(r["detail"])
        blocking.update(names)
        print(f"  {key[0]}[{key[1]}] {r['outcome']}: {', '.join(names) if names else r['detail']}")
    print("unmapped ATen overloads behind the gaps (ops blocked):")
    for name, n in blocking.most_common():
        print(f"  {n:4d}  {name}")
    refused = collections.Counter()
    for r in amanda.values():
        refused.update(unmapped_overloads(r["detail"]) if r["outcome"] == "refused" else [])
    print("unmapped ATen overloads behind every amanda refusal (ops refused):")
    for name, n in refused.most_common():
        print(f"  {n:4d}  {name}")


def print_report(records: list[dict[str, Any]], which: tuple[str, ...], wall: float, gaps: bool = False) -> None:
    s = summarize(records, which)
    skipped = collections.Counter(r["detail"] for r in records if r["outcome"] == "skip")
    print(f"OpInfo per-op suite: {len({r['op'] for r in records})} ops, "
          f"{len({(r['op'], r['sample']) for r in records})} samples, {sum(skipped.values())} left out "
          f"({', '.join(f'{v} {k}' for k, v in skipped.most_common(5))}); wall {wall:.0f} s")
    for conv in which:
        c = s[conv]
        o = c["outcomes"]
        print(f"  {conv:10s} pass {o.get('pass', 0)}/{c['samples']} samples, {c['ops_passed']}/{c['ops']} ops"
              f" | refused {o.get('refused', 0)}, export {o.get('export', 0)}, wrong {o.get('wrong', 0)},"
              f" invalid {o.get('invalid', 0)}, timeout {o.get('timeout', 0)}, crash {o.get('crash', 0)}"
              f" | conversion time {c['seconds']:.1f} s")
    if "amanda" in s:
        wrong = s["amanda"]["wrong"]
        print(f"amanda converted-but-wrong: {len(wrong)}")
        for r in wrong:
            print(f"  {r['op']}[{r['sample']}] {r['outcome']}: {r['detail']}")
        print("amanda refused (op types without a rule, by samples):")
        for reason, n in s["amanda"]["refused"].most_common():
            print(f"  {n:4d}  {reason}")
    if "amanda" in s and "torch.onnx" in s:
        a = {(r["op"], r["sample"]) for r in records if r["converter"] == "amanda" and r["outcome"] == "pass"}
        t = {(r["op"], r["sample"]) for r in records if r["converter"] == "torch.onnx" and r["outcome"] == "pass"}
        only_t = sorted(t - a)
        print(f"passed by torch.onnx only: {len(only_t)}; by amanda only: {len(a - t)}")
        print("  " + " ".join(f"{op}[{k}]" for op, k in only_t))
    if gaps and "amanda" in s:
        print_gaps(records)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=1, help="samples per op (default 1)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per op before its worker is replaced")
    ap.add_argument("--ops", help="comma-separated OpInfo names (default: all)")
    ap.add_argument("--stride", type=int, default=1, help="every n-th op of op_db only (a quicker, even subset)")
    ap.add_argument("--only", choices=["amanda", "torch.onnx"], help="run one converter")
    ap.add_argument("--json", help="write every record here (JSON lines)")
    ap.add_argument("--gaps", action="store_true",
                    help="list, per op torch.onnx passes and Amanda does not, why Amanda refused (the unmapped ATen "
                         "overloads), and the unmapped overloads by how many ops they block")
    ap.add_argument("--report", metavar="JSONL",
                    help="print the report of a --json file of an earlier run instead of running")
    a = ap.parse_args(argv)
    if a.report:
        with open(a.report) as f:
            old = [json.loads(line) for line in f if line.strip()]
        convs = tuple(c for c in ("amanda", "torch.onnx") if any(r["converter"] == c for r in old))
        old.sort(key=lambda r: (r["op"], r["sample"], r["converter"]))
        print_report(old, convs, 0.0, gaps=a.gaps)
        return 0
    which = (a.only,) if a.only else ("amanda", "torch.onnx")
    names = set(a.ops.split(",")) if a.ops else None
    labels = [op_label(i) for i in float32_ops(names) if i.name not in RANDOM_OPS][::max(1, a.stride)]
    t0 = time.perf_counter()
    sink = open(a.json, "w") if a.json else None  # noqa: SIM115 - written record by record, closed below
    try:
        records = run_all(labels, a.samples, a.jobs, a.timeout, which, sink=sink)
    finally:
        if sink is not None:
            sink.close()
    wall = time.perf_counter() - t0
    records.sort(key=lambda r: (r["op"], r["sample"], r["converter"]))
    print_report(records, which, wall, gaps=a.gaps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
