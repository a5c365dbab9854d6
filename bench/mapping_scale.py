"""How applying a mapping table scales with the graph.

A chain of 1k, 10k and 100k ops alternating Relu and Add (each Add also reads the op five places back) is
converted by a table with a one-op rename (Relu), a two-op subgraph rule (Mul feeding Add, commutative) and a
rule that never matches; each size is timed (best of a few runs, the graph copied outside the timed region) and
compared with the floor of walking the same graph once in topological order and reading every op's type.  The
scaling exponent between the two largest sizes should be close to 1 (linear).

    python bench/mapping_scale.py [--sizes 1000,10000,100000] [--repeat 3] [--clock wall|cpu]
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from amanda_core import Graph  # noqa: E402
from amanda_core.ir import bulk_build  # noqa: E402
from amanda_core.mapping import apply_table, table_from_dict  # noqa: E402
from amanda_core.namespace import NamespaceRegistry, load_schema  # noqa: E402

SCHEMA = """
namespace_schema:
  namespace: amanda/bench/{v}
  op_schemas:
    - {{type: Relu, input_ports: [x], output_ports: [y]}}
    - {{type: Add, commutative: [a, b], input_ports: [a, b], output_ports: [y]}}
    - {{type: Mul, commutative: [a, b], input_ports: [a, b], output_ports: [y]}}
    - {{type: MulAdd, input_ports: [a, b, c], output_ports: [y]}}
    - {{type: Rare, input_ports: [x], output_ports: [y]}}
"""

TABLE = {"table": {"name": "bench", "src": "amanda/bench/1", "dst": "amanda/bench/2", "carry": "unchanged",
                   "rules": {
                       "relu": {"src": {"ops": {"$r": {"type": "Relu"}}}, "dst": {"ops": {"$r": {}}}},
                       "mul_add": {"commutative": True,
                                   "src": {"ops": {"$m": {"type": "Mul"}, "$a": {"type": "Add"}},
                                           "edges": ["$m.y -> $a.a"]},
                                   "dst": {"ops": {"$a": {"type": "MulAdd"}},
                                           "edges": ["$m.a -> $a.a", "$m.b -> $a.c"]}},
                       "never": {"src": {"ops": {"$x": {"type": "Rare"}, "$y": {"type": "Rare"}},
                                         "edges": ["$x.y -> $y.x"]},
                                 "dst": {"remove": True}},
                   }}}

clock = time.perf_counter  # --clock cpu: time.process_time


def build(n: int) -> Graph:
    with bulk_build():
        g = Graph("amanda/bench/1")
        prev = g.add_input_port("x")
        outs = []
        for i in range(n):
            kind = ("Relu", "Mul", "Add")[i % 3]
            op = g.add_op(kind, f"op{i}", inputs=["x"] if kind == "Relu" else ["a", "b"], outputs=["y"])
            ins = list(op.input_ports)
            g.connect(prev, ins[0])
            if len(ins) > 1:
                g.connect(outs[i - 5] if i >= 5 else g.input_ports["x"], ins[1])
            prev = op.output_ports["y"]
            outs.append(prev)
        g.connect(prev, g.add_output_port("y"))
    return g


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
    reg = NamespaceRegistry()
    for v in (1, 2):
        reg.add_schema(load_schema(SCHEMA.format(v=v)))
    table = table_from_dict(TABLE)
    times, floors = [], []
    for n in sizes:
        base = build(n)
        best, floor = math.inf, math.inf
        for _ in range(args.repeat):
            g = base.copy()
            gc.collect()
            t0 = clock()
            walked = sum(1 for op in g.topological_order() if op.type)
            floor = min(floor, clock() - t0)
            g = base.copy()  # without the order the walk cached: the table pays for its own sort
            gc.collect()
            t0 = clock()
            report = apply_table(g, table, reg)
            best = min(best, clock() - t0)
        assert walked == n and g.namespace == "amanda/bench/2", report
        times.append(best)
        floors.append(floor)
        per = {r.rule: r.matches for r in report.rules}
        print(f"{n:>7} ops: apply {best:7.3f} s ({best / n * 1e6:5.1f} us/op), topological walk {floor:6.3f} s, "
              f"ratio {best / floor:6.1f}x; matches {per}, carried {report.carried}")
    if len(sizes) >= 2:
        a, b = sizes[-2], sizes[-1]
        print(f"scaling exponent between {a} and {b} ops: {math.log(times[-1] / times[-2]) / math.log(b / a):.2f} "
              "(1.0 = linear)")


if __name__ == "__main__":
    main()
