"""How the graph abstraction scales: build, verify, toposort, YAML dump and load.

The graph is a long chain plus fan-out: op i reads op i-1, and every tenth op also feeds the op five places
later, so consumers lists and edges are more than a simple list.  Each step is timed at 1k, 10k and 100k ops
(best of a few runs), and the scaling exponent between the two largest sizes is printed (1.0 = linear).

    python bench/graph_scale.py [--sizes 1000,10000,100000] [--repeat 3] [--clock wall|cpu]

Target: 100k ops built, verified and toposorted in under 1 s in total.  Building is timed twice: as a plain loop
of ``add_op``/``connect`` calls, and inside ``amanda_core.ir.bulk_build()`` (the garbage collector paused), which
is how Amanda's loaders and importers build graphs.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import sys
import tempfile
import time
from typing import Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from amanda_core import Graph  # noqa: E402
from amanda_core.ir import bulk_build  # noqa: E402
from amanda_core.serialization import dump_graph, load_graph  # noqa: E402

clock = time.perf_counter  # --clock cpu: time.process_time


def build(n: int) -> Graph:
    g = Graph("amanda/bench/1")
    prev = g.add_input_port("x", "float32")
    outs = []
    for i in range(n):
        op = g.add_op("Add" if i % 2 else "Relu", f"op{i}", inputs=["a", "b"], outputs=[("y", "float32")],
                      attrs={"index": i})
        g.connect(prev, op.input_ports["a"])
        if i >= 5 and (i - 5) % 10 == 0:
            g.connect(outs[i - 5], op.input_ports["b"])
        prev = op.output_ports["y"]
        outs.append(prev)
    g.connect(prev, g.add_output_port("y"))
    return g


def best(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        result = None
        gc.collect()  # free the previous run's graph outside the timed region
        t0 = clock()
        result = fn()
        times.append(clock() - t0)
    return min(times), result


def best_on_copies(fn: Callable[[Graph], object], g: Graph, repeat: int) -> tuple[float, object]:
    """Best time of ``fn`` on fresh copies of ``g`` (made outside the timed region): a copy has no cached
    topological order, so every run pays for the sort it times."""
    times, result = [], None
    for _ in range(repeat):
        result = None
        fresh = g.copy()
        gc.collect()
        t0 = clock()
        result = fn(fresh)
        times.append(clock() - t0)
    return min(times), result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall (default) or cpu: the process's CPU time, steadier than wall time on a loaded machine")
    args = ap.parse_args()
    global clock
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    sizes = [int(s) for s in args.sizes.split(",")]
    import yaml

    print(f"YAML: {'libyaml (C) loader and dumper' if hasattr(yaml, 'CSafeLoader') else 'pure-Python PyYAML'}")
    rows: dict[str, list[float]] = {k: [] for k in ("build", "build_bulk", "verify", "toposort", "dump", "load")}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            t_build, g = best(lambda n=n: build(n), args.repeat)

            def build_bulk(n: int = n) -> Graph:
                with bulk_build():
                    return build(n)

            t_bulk, g = best(build_bulk, args.repeat)
            assert isinstance(g, Graph)
            # verify sorts the graph to look for cycles; both steps are timed on copies without a cached order
            t_verify, problems = best_on_copies(Graph.verify, g, args.repeat)
            assert problems == [], problems[:3]  # type: ignore[index]
            t_topo, order = best_on_copies(Graph.topological_order, g, args.repeat)
            assert len(order) == n  # type: ignore[arg-type]
            t_dump, text = best(lambda g=g: dump_graph(g), 1)
            path = os.path.join(tmp, f"g{n}.yaml")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)  # type: ignore[arg-type]
            t_load, g2 = best(lambda path=path: load_graph(path), 1)
            assert len(g2) == n  # type: ignore[arg-type]
            for k, v in zip(rows, (t_build, t_bulk, t_verify, t_topo, t_dump, t_load)):
                rows[k].append(v)
            print(f"{n:>7} ops: build {t_build*1e3:7.1f} ms (in bulk_build {t_bulk*1e3:7.1f} ms)  verify "
                  f"{t_verify*1e3:7.1f} ms  toposort {t_topo*1e3:6.1f} ms  | YAML dump {t_dump:6.2f} s  load "
                  f"{t_load:6.2f} s  ({len(text)/1e6:.1f} MB)")  # type: ignore[arg-type]
    if len(sizes) >= 2:
        a, b = sizes[-2], sizes[-1]
        print(f"scaling exponent between {a} and {b} ops (1.0 = linear):")
        for k, v in rows.items():
            print(f"  {k:<9} {math.log(v[-1] / v[-2]) / math.log(b / a):5.2f}")
    for label, key in (("plain loop", "build"), ("inside bulk_build()", "build_bulk")):
        total = rows[key][-1] + rows["verify"][-1] + rows["toposort"][-1]
        print(f"build ({label}) + verify + toposort at {sizes[-1]} ops: {total:.3f} s "
              f"(target < 1 s: {'met' if total < 1 else 'missed'})")


if __name__ == "__main__":
    main()
