"""ONNX round trip through Amanda at 1k, 10k and 100k nodes, against protobuf's floor and onnx_ir.

    .venv/bin/python bench/onnx_roundtrip.py [--sizes 1000,10000,100000] [--repeat 3] [--no-memory] [--clock wall|cpu]

Each model is a chain of blocks ``Mul(x, w) -> Add(., b) -> Relu -> Add(., x)``: every block reads two small
initializers (16 floats each) and its input twice (fan-out), all nodes and values named as exporters name them.
For every size, on the same file, in the same run (best of ``--repeat``):

* floor:   ``onnx.load(path)`` + ``onnx.save(model, out)``
* onnx_ir: ``onnx_ir.load(path)`` + ``onnx_ir.save(model, out)``
* amanda:  ``amanda_onnx.load_model(path)`` (import) + ``amanda_onnx.save_model(graph, out)`` (export)
* core IR: building the same graph (same ops, ports and edges) with ``Graph.add_op`` and ``Graph.connect``
  inside ``bulk_build`` and nothing else: what any importer that goes through the IR's public API pays
* lean:    a reference, not a bound (:func:`lean_round_trip`): a minimal round trip through the IR written for
  these models only: load, one ``add_op`` per initializer and node, one NodeProto per op, save; nothing checked,
  only these models' fields (a cleverer minimal round trip could be faster)

and prints the times, the ratios amanda/floor and amanda/onnx_ir, the scaling exponent (slope of log time over
log nodes), and peak memory: each round trip runs in a fresh interpreter whose peak resident set size is
compared with the model's size in bytes plus that interpreter's baseline (its RSS after the imports; the peak
is the kernel's high-water mark ``VmHWM``, Linux only).
The exported model is checked to equal the original (deterministic serialization) once per size.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

TARGET_FLOOR_RATIO = 3.0
TARGET_EXPONENT = 1.05
TARGET_MEMORY_RATIO = 1.5

clock = time.perf_counter  # --clock cpu: time.process_time


def make_model(n_nodes: int):
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    g = onnx.GraphProto(name="chain")
    rng = np.random.default_rng(0)
    prev = "x"
    k = 0
    while 4 * k < n_nodes:
        w, b = f"blk{k}.weight", f"blk{k}.bias"
        g.initializer.append(numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), w))
        g.initializer.append(numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), b))
        mul, add, relu, res = (f"/blk{k}/{s}_output_0" for s in ("Mul", "Add", "Relu", "Add_1"))
        g.node.append(helper.make_node("Mul", [prev, w], [mul], name=f"/blk{k}/Mul"))
        g.node.append(helper.make_node("Add", [mul, b], [add], name=f"/blk{k}/Add"))
        g.node.append(helper.make_node("Relu", [add], [relu], name=f"/blk{k}/Relu"))
        g.node.append(helper.make_node("Add", [relu, prev], [res], name=f"/blk{k}/Add_1"))
        prev = res
        k += 1
    g.input.append(helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 16]))
    g.output.append(helper.make_tensor_value_info(prev, onnx.TensorProto.FLOAT, ["N", 16]))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="bench")


def best(fn, repeat: int, holder: dict | None = None, key: str = "") -> float:
    """The best time of ``repeat`` calls.  Before each call, outside the timing, the previous result (held in
    ``holder[key]``) is dropped and the garbage collector run, so no run pays for collecting another's objects
    (graphs are cyclic: only the collector frees them)."""
    import gc

    times = []
    for _ in range(repeat):
        if holder is not None:
            holder.pop(key, None)
        gc.collect()
        t = clock()
        fn()
        times.append(clock() - t)
    return min(times)


def time_size(path: str, out_dir: str, repeat: int) -> dict[str, float]:
    import onnx
    import onnx_ir

    import amanda_onnx
    from amanda_core.ir import Graph, bulk_build

    r: dict[str, float] = {}
    out = os.path.join(out_dir, "out.onnx")
    holder: dict[str, object] = {}

    def floor_load() -> None:
        holder["m"] = onnx.load(path)

    r["floor_load"] = best(floor_load, repeat, holder, "m")
    r["floor_save"] = best(lambda: onnx.save(holder["m"], out), repeat)

    def ir_load() -> None:
        holder["ir"] = onnx_ir.load(path)

    r["onnx_ir_load"] = best(ir_load, repeat, holder, "ir")
    r["onnx_ir_save"] = best(lambda: onnx_ir.save(holder["ir"], out), repeat)
    holder.pop("ir")

    def am_import() -> None:
        holder["g"] = amanda_onnx.load_model(path)

    r["amanda_import"] = best(am_import, repeat, holder, "g")
    r["amanda_export"] = best(lambda: amanda_onnx.save_model(holder["g"], out), repeat)
    exported = onnx.load(out)
    if exported.SerializeToString(deterministic=True) != holder["m"].SerializeToString(deterministic=True):
        raise SystemExit(f"{path}: the exported model differs from the original")

    # the same ops, ports and edges through the IR's public API alone
    g = holder["g"]
    spec = [(op.type, op.name, op.input_ports.names(), op.output_ports.names()) for op in g]
    edges = [(e.src.op.name if e.src.op else None, e.src.name, e.dst.op.name if e.dst.op else None, e.dst.name)
             for e in g.edges()]
    holder.pop("g")

    def core_ir() -> None:
        with bulk_build():
            c = Graph("amanda/onnx/17")
            c.add_input_port("x")
            add_op = c.add_op
            ops = {name: add_op(t, name, inputs=ins, outputs=outs) for t, name, ins, outs in spec}
            c.add_output_port("y")
            for so, sp, do, dp in edges:
                src = ops[so].output_ports[sp] if so is not None else c.input_ports[sp]
                dst = ops[do].input_ports[dp] if do is not None else c.output_ports["y"]
                c.connect(src, dst)
            holder["c"] = c

    r["core_ir"] = best(core_ir, repeat, holder, "c")
    holder.clear()

    r["lean"] = best(lambda: lean_round_trip(path, out), repeat)
    if onnx.load(out).SerializeToString(deterministic=True) != onnx.load(path).SerializeToString(deterministic=True):
        raise SystemExit(f"{path}: the lean round trip changed the model")
    return r


def lean_round_trip(path: str, out: str) -> None:
    """A reference for these chain models, not a bound: ``onnx.load``, one ``add_op`` (already wired through
    ``sources``) per initializer and node, then a walk that makes one NodeProto per op, and ``onnx.save``.  It
    checks nothing, keeps only the fields these models have and knows their element type and port names; a
    cleverer minimal round trip could be faster, so Amanda's importer and exporter are set beside it, not held
    under it.  It is not a converter."""
    import numpy as np
    import onnx

    from amanda_core.ir import Graph, bulk_build

    m = onnx.load(path)
    gp = m.graph
    with bulk_build():
        g = Graph("amanda/onnx/17")
        values = {vi.name: g.add_input_port(vi.name) for vi in gp.input}
        add_op = g.add_op
        for t in gp.initializer:
            op = add_op("Initializer", t.name, outputs=["output"])
            op.attrs["value"] = np.frombuffer(t.raw_data, np.float32).reshape(tuple(t.dims))
            values[t.name] = op.output_ports[0]
        ports = {1: ["X"], 2: ["A", "B"]}
        for n in gp.node:
            ins, (y,) = n.input[:], n.output[:]
            op = add_op(n.op_type, n.name, inputs=ports[len(ins)], outputs=["Y" if len(ins) == 1 else "C"],
                        sources=[values[v] for v in ins])
            op.meta = {"outputs": {op.output_ports[0].name: y}}
            values[y] = op.output_ports[0]
        for vi in gp.output:
            g.connect(values[vi.name], g.add_output_port(vi.name))
    header = (m.ir_version, m.producer_name, gp.name)
    del m, gp, values
    m = onnx.ModelProto(ir_version=header[0], producer_name=header[1],
                        opset_import=[onnx.helper.make_opsetid("", 17)])
    gp = m.graph
    gp.name = header[2]
    names = {p: p.name for p in g.input_ports}
    add, add_init = gp.node.add, gp.initializer.add
    for op in g:
        if op.type == "Initializer":
            q = op.output_ports[0]
            names[q] = op.name
            value = op.attrs["value"]
            add_init(name=op.name, dims=value.shape, data_type=1, raw_data=value.tobytes())
            continue
        q = op.output_ports[0]
        y = names[q] = op.meta["outputs"][q.name]
        add(op_type=op.type, name=op.name, input=[names[s] for s in op.input_ports.sources()], output=[y])
    for vi, p in ((gp.input.add(), g.input_ports[0]), (gp.output.add(), g.output_ports[0])):
        vi.CopyFrom(onnx.helper.make_tensor_value_info(p.name, onnx.TensorProto.FLOAT, ["N", 16]))
    onnx.save(m, out)


_MEMORY_CHILD = r"""
import gc, json, os, sys
which, path, out = sys.argv[1:4]
import numpy, onnx, onnx_ir, amanda_onnx
import amanda_onnx.importer, amanda_onnx.exporter, amanda_onnx.tensors
from amanda_core.serialization import atomic_write
amanda_onnx.schemas.namespace_providers()[0].schema(17)
gc.collect()
def status(key):  # VmHWM, not ru_maxrss: the latter keeps the parent's high-water mark across exec
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
base = status("VmRSS")
if which == "amanda":
    g = amanda_onnx.load_model(path)
    amanda_onnx.save_model(g, out)
elif which == "core":  # the same ops, ports and edges through the IR alone (nothing read, nothing written)
    from amanda_core.ir import Graph, bulk_build
    n = int(out)
    with bulk_build():
        c = Graph("amanda/onnx/17")
        prev = c.add_input_port("x")
        for k in range((n + 3) // 4):
            w = c.add_op("Initializer", f"blk{k}.weight", outputs=["output"])
            b = c.add_op("Initializer", f"blk{k}.bias", outputs=["output"])
            ops = [c.add_op(t, f"/blk{k}/{t}{i}", inputs=ins, outputs=["C" if t != "Relu" else "Y"])
                   for i, (t, ins) in enumerate((("Mul", ["A", "B"]), ("Add", ["A", "B"]), ("Relu", ["X"]),
                                                 ("Add", ["A", "B"])))]
            for op in ops:
                op.meta = {"outputs": {op.output_ports[0].name: f"/blk{k}/{op.type}_output_0"}}
                op.attrs = {}
            pairs = [(prev, ops[0], 0), (w.output_ports[0], ops[0], 1), (ops[0].output_ports[0], ops[1], 0),
                     (b.output_ports[0], ops[1], 1), (ops[1].output_ports[0], ops[2], 0),
                     (ops[2].output_ports[0], ops[3], 0), (prev, ops[3], 1)]
            for src, dst, i in pairs:
                c.connect(src, dst.input_ports[i])
            prev = ops[3].output_ports[0]
elif which == "floor":
    m = onnx.load(path)
    onnx.save(m, out)
else:
    m = onnx_ir.load(path)
    onnx_ir.save(m, out)
peak = status("VmHWM")
print(json.dumps({"baseline": base, "peak": peak}))
"""


def memory(which: str, path: str, out_dir: str, nodes: int) -> dict[str, int]:
    out = os.path.join(out_dir, f"mem-{which}.onnx") if which != "core" else str(nodes)
    proc = subprocess.run([sys.executable, "-c", _MEMORY_CHILD, which, path, out], capture_output=True, text=True,
                          check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def exponent(sizes: list[int], times: list[float]) -> float:
    """Least-squares slope of log(time) over log(size)."""
    xs = [math.log(s) for s in sizes]
    ys = [math.log(t) for t in times]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000", help="node counts (comma-separated)")
    ap.add_argument("--repeat", type=int, default=3, help="timings are the best of this many runs")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall (default) or cpu: the process's CPU time, steadier than wall time on a loaded machine")
    ap.add_argument("--no-memory", action="store_true", help="skip the peak memory measurements")
    args = ap.parse_args(argv)
    global clock
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    sizes = [int(s) for s in args.sizes.split(",")]
    import onnx

    import amanda_onnx

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        amanda_onnx.load_model(make_model(8))  # warm the schema cache and imports
        for n in sizes:
            path = os.path.join(tmp, f"chain{n}.onnx")
            model = make_model(n)
            onnx.save(model, path)
            nodes = len(model.graph.node)
            del model
            size = os.path.getsize(path)
            r = time_size(path, tmp, args.repeat)
            r.update(nodes=nodes, bytes=size)
            if not args.no_memory:
                for which in ("floor", "onnx_ir", "amanda", "core"):
                    m = memory(which, path, tmp, nodes)
                    r[f"{which}_rss_peak"] = m["peak"]
                    r[f"{which}_rss_base"] = m["baseline"]
            results.append(r)

    print(f"ONNX round trip (python {sys.version.split()[0]}, onnx {onnx.__version__}, best of {args.repeat})")
    print(f"{'nodes':>8} {'bytes':>11} | {'floor':>7} {'onnx_ir':>8} {'import':>7} {'export':>7} {'amanda':>7} "
          f"{'core IR':>8} {'lean':>7} | {'am/floor':>8} {'am/onnx_ir':>10} {'coreIR/floor':>12} {'lean/floor':>10}")
    for r in results:
        floor = r["floor_load"] + r["floor_save"]
        ir = r["onnx_ir_load"] + r["onnx_ir_save"]
        am = r["amanda_import"] + r["amanda_export"]
        r.update(floor=floor, onnx_ir=ir, amanda=am)
        print(f"{r['nodes']:>8} {r['bytes']:>11} | {floor:7.3f} {ir:8.3f} {r['amanda_import']:7.3f} "
              f"{r['amanda_export']:7.3f} {am:7.3f} {r['core_ir']:8.3f} {r['lean']:7.3f} | {am / floor:8.2f} "
              f"{am / ir:10.2f} {r['core_ir'] / floor:12.2f} {r['lean'] / floor:10.2f}")
    print("(seconds; floor = onnx.load + onnx.save; onnx_ir = onnx_ir.load + onnx_ir.save; amanda = import + "
          "export; core IR = add_op + connect for the same graph; lean = a reference minimal round trip through "
          "the IR for these models: load, one add_op per op, one NodeProto per op, save, nothing checked)")
    if len(results) > 1:
        ns = [r["nodes"] for r in results]
        print(f"scaling exponent (slope of log time over log nodes, all sizes): amanda "
              f"{exponent(ns, [r['amanda'] for r in results]):.3f}, floor "
              f"{exponent(ns, [r['floor'] for r in results]):.3f}, onnx_ir "
              f"{exponent(ns, [r['onnx_ir'] for r in results]):.3f}, core IR alone "
              f"{exponent(ns, [r['core_ir'] for r in results]):.3f}")
        last2 = results[-2:]
        n2 = [r["nodes"] for r in last2]
        print(f"scaling exponent between the two largest sizes: amanda "
              f"{exponent(n2, [r['amanda'] for r in last2]):.3f}, core IR alone "
              f"{exponent(n2, [r['core_ir'] for r in last2]):.3f}")
    if not args.no_memory:
        print("peak memory (fresh interpreter per run; RSS, MiB): baseline after imports, peak, peak - baseline, "
              "and (peak - baseline) / model bytes; 'core' builds the same graph with the IR alone")
        for r in results:
            parts = []
            for which in ("floor", "onnx_ir", "amanda", "core"):
                base, peak = r[f"{which}_rss_base"], r[f"{which}_rss_peak"]
                parts.append(f"{which} {base / 2**20:.0f}/{peak / 2**20:.0f}/+{(peak - base) / 2**20:.0f} "
                             f"({(peak - base) / r['bytes']:.1f}x)")
            print(f"{r['nodes']:>8} nodes, {r['bytes'] / 2**20:.1f} MiB model: " + "; ".join(parts))
    big = results[-1]
    print(f"targets at {big['nodes']} nodes: amanda/floor {big['amanda'] / big['floor']:.2f} "
          f"(target <= {TARGET_FLOOR_RATIO}), amanda/onnx_ir {big['amanda'] / big['onnx_ir']:.2f} (target < 1)"
          + (f", memory {(big['amanda_rss_peak'] - big['amanda_rss_base']) / big['bytes']:.1f}x model size "
             f"(target <= {TARGET_MEMORY_RATIO})" if not args.no_memory else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
