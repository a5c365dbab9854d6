"""Structural checks of a graph (``Graph.verify``): every problem, all at once."""

from __future__ import annotations

__all__ = ["verify_graph", "find_cycles"]

from typing import Iterable

from ..errors import GraphCycleError
from .graph import CONTROL, Graph, InputPort, Op, OutputPort, op_graphs


def verify_graph(graph: Graph, prefix: str = "") -> list[str]:
    problems: list[str] = []
    where = f"in body of {prefix}: " if prefix else ""

    def report(msg: str) -> None:
        problems.append(where + msg)

    # Each edge is stored at both ends; an input port can name one source only, so "fed twice" means two
    # output ports list the same consumer.  Seen consumers are counted to find those.
    fed_by: dict[InputPort, OutputPort] = {}
    twice: dict[InputPort, list[OutputPort]] = {}

    def check_output(q: OutputPort) -> None:
        for c in q._consumers:
            first = fed_by.setdefault(c, q)
            if first is not q:
                twice.setdefault(c, [first]).append(q)
            owner = c._owner
            if (owner._graph if type(owner) is Op else owner) is not graph and c.graph is not graph:
                report(f"dangling edge {q.qualified_name} -> {c.qualified_name}: the target is not in this graph")
            elif c._source is not q:
                src = c._source.qualified_name if c._source is not None else "nothing"
                report(f"edge {q.qualified_name} -> {c.qualified_name} is recorded only at its source "
                       f"(the target says it is fed by {src})")

    def check_input(p: InputPort) -> None:
        s = p._source
        if s is None:
            return
        owner = s._owner
        if (owner._graph if type(owner) is Op else owner) is not graph and s.graph is not graph:
            report(f"dangling edge {s.qualified_name} -> {p.qualified_name}: the source is not in this graph")
        elif p not in s._consumers:
            report(f"edge {s.qualified_name} -> {p.qualified_name} is recorded only at its target")

    for key, op in graph._ops.items():
        if op._name != key:
            report(f"op registered as {key!r} is named {op._name!r}")
        if op._graph is not graph:
            report(f"op {key!r} does not record this graph as its graph")
        for plist, kind in ((op._inputs, "input"), (op._outputs, "output")):
            if plist._has_duplicates():
                names = [p.name for p in plist]
                dups = sorted({n for n in names if names.count(n) > 1})
                report(f"op {key!r} has duplicate {kind} port names {dups}")
        for p in op._inputs:
            if p._source is not None:
                check_input(p)
        for q in op._outputs:
            if q._consumers:
                check_output(q)
        if op._control_in:
            for other in op._control_in:
                if other._graph is not graph:
                    report(f"dangling control edge {other.name}.{CONTROL} -> {key}.{CONTROL}")
                elif op not in other._control_out:
                    report(f"control edge {other.name}.{CONTROL} -> {key}.{CONTROL} is recorded only at its target")
        if op._control_out:
            for other in op._control_out:
                if other._graph is not graph:
                    report(f"dangling control edge {key}.{CONTROL} -> {other.name}.{CONTROL}")
        if op._body is not None:
            body = op._body
            if body._owner is not op:
                report(f"body of op {key!r} does not record the op as its owner")
            if body._inputs.names() != op._inputs.names() or body._outputs.names() != op._outputs.names():
                report(f"body of op {key!r} has ports {body._inputs.names()} -> {body._outputs.names()}, "
                       f"the op has {op._inputs.names()} -> {op._outputs.names()}")
        if op._body is not None or op._attrs:
            for nested in op_graphs(op, prefix):
                problems.extend(verify_graph(nested.graph, nested.path))
    for g in graph._inputs:
        check_output(g)
    for o in graph._outputs:
        check_input(o)
    for port, sources in twice.items():
        report(f"input port {port.qualified_name} is fed twice: by " + ", ".join(s.qualified_name for s in sources))
    # The (cached) topological sort finds out whether there is a cycle at all; only then are they all listed.
    try:
        graph.topological_order()
    except GraphCycleError:
        for cycle in find_cycles(graph._ops.values()):
            report("cycle through ops: " + " -> ".join(o.name for o in cycle + [cycle[0]]))
    return problems


def find_cycles(ops: Iterable[Op]) -> list[list[Op]]:
    """Strongly connected components that form cycles (Tarjan, iterative)."""
    ops = list(ops)
    members = set(ops)
    index: dict[Op, int] = {}
    low: dict[Op, int] = {}
    on_stack: set[Op] = set()
    stack: list[Op] = []
    result: list[list[Op]] = []
    counter = 0

    def succs(op: Op) -> list[Op]:
        out = [s for s in op.successors() if s in members]
        out.extend(o for o in op._control_out if o in members)
        return out

    for root in ops:
        if root in index:
            continue
        work: list[tuple[Op, list[Op], int]] = [(root, succs(root), 0)]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            op, nexts, i = work[-1]
            if i < len(nexts):
                work[-1] = (op, nexts, i + 1)
                nxt = nexts[i]
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, succs(nxt), 0))
                elif nxt in on_stack:
                    low[op] = min(low[op], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[op])
            if low[op] == index[op]:
                comp: list[Op] = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w is op:
                        break
                if len(comp) > 1 or op in succs(op):
                    comp.reverse()
                    result.append(comp)
    return result
