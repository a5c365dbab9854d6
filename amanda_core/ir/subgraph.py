"""Moving ops into and out of subgraph ops (``Graph.make_subgraph`` / ``Graph.inline``)."""

from __future__ import annotations

__all__ = ["make_subgraph", "inline"]

from typing import Any

from ..errors import GraphError
from .graph import Graph, GraphInput, InputPort, Op, OutputPort


def _reaches_back(ops: set[Op]) -> bool:
    """True if a path leaves ``ops`` and re-enters it (the set is not convex)."""
    frontier = [s for op in ops for s in list(op.successors()) + list(op._control_out) if s not in ops]
    seen: set[Op] = set()
    while frontier:
        o = frontier.pop()
        if o in seen:
            continue
        seen.add(o)
        for s in list(o.successors()) + list(o._control_out):
            if s in ops:
                return True
            frontier.append(s)
    return False


def _detach(graph: Graph, op: Op) -> None:
    del graph._ops[op._name]
    op._graph = None


def make_subgraph(graph: Graph, ops: list[Op], name: str, type: str | None, attrs: dict[str, Any] | None) -> Op:
    if not ops:
        raise GraphError("make_subgraph needs at least one op")
    if name in graph._ops and graph._ops[name] not in ops:
        raise GraphError(f"an op named {name!r} already exists")
    members = set(ops)
    if _reaches_back(members):
        raise GraphError("cannot fuse ops " + ", ".join(o.name for o in ops)
                         + ": a path leaves the set and comes back, so the fused op would be in a cycle")
    ordered = [o for o in graph.topological_order() if o in members]

    # boundary in: one port per distinct outside source
    in_sources: dict[OutputPort, list[InputPort]] = {}
    for op in ordered:
        for p in op._inputs:
            s = p._source
            if s is not None and s.op not in members:
                in_sources.setdefault(s, []).append(p)
    # boundary out: one port per inner producer with consumers outside
    out_ports: dict[OutputPort, list[InputPort]] = {}
    for op in ordered:
        for q in op._outputs:
            outside = [c for c in q._consumers if c.op not in members]
            if outside:
                out_ports[q] = outside
    ctrl_in = {o for op in ordered for o in op._control_in if o not in members}
    ctrl_out = {o for op in ordered for o in op._control_out if o not in members}

    # cut boundary edges
    for consumers in in_sources.values():
        for c in consumers:
            graph.disconnect(c)
    for consumers in out_ports.values():
        for c in consumers:
            graph.disconnect(c)
    for op in ordered:
        for o in [x for x in op._control_in if x not in members]:
            graph.disconnect_control(o, op)
        for o in [x for x in op._control_out if x not in members]:
            graph.disconnect_control(op, o)

    for op in ordered:
        _detach(graph, op)
    fused = graph.add_op(type, name, attrs=attrs,
                         inputs=len(in_sources), outputs=len(out_ports))
    body = Graph()
    fused.set_body(body)
    for op in ordered:
        op._graph = body
        body._ops[op._name] = op
    body._touch()
    graph._touch()

    for (src, consumers), in_port, inner_in in zip(in_sources.items(), fused._inputs, body._inputs):
        in_port.dtype = inner_in.dtype = src.dtype
        graph.connect(src, in_port)
        for c in consumers:
            body.connect(inner_in, c)
    for (q, consumers), out_port, inner_out in zip(out_ports.items(), fused._outputs, body._outputs):
        out_port.dtype = inner_out.dtype = q.dtype
        body.connect(q, inner_out)
        for c in consumers:
            graph.connect(out_port, c)
    for o in sorted(ctrl_in, key=lambda x: x.name):
        graph.connect_control(o, fused)
    for o in sorted(ctrl_out, key=lambda x: x.name):
        graph.connect_control(fused, o)
    return fused


def inline(graph: Graph, op: Op) -> list[Op]:
    body = op._body
    if body is None:
        raise GraphError(f"op {op.name!r} has no body to inline")
    inner_ops = list(body._ops.values())
    # sources feeding the op from outside, by port name
    outer_src = {p.name: p._source for p in op._inputs}
    # where each body output gets its value inside
    inner_src = {g.name: g._source for g in body._outputs}
    outer_consumers = {q.name: list(q._consumers) for q in op._outputs}
    inner_consumers = {g.name: list(g._consumers) for g in body._inputs}
    ctrl_in = list(op._control_in)
    ctrl_out = list(op._control_out)

    # cut the body's boundary edges and the op's outer edges
    for bi in body._inputs:
        for c in list(bi._consumers):
            body.disconnect(c)
    for bo in body._outputs:
        if bo._source is not None:
            body.disconnect(bo)
    for q in op._outputs:
        for c in list(q._consumers):
            graph.disconnect(c)
    op.set_body(None)
    graph.remove_op(op)

    # move the ops, renaming on clashes
    for o in inner_ops:
        del body._ops[o._name]
        if o._name in graph._ops:
            o._name = graph.unique_name(o._name)
        o._graph = graph
        graph._ops[o._name] = o
    graph._touch()

    for name, consumers in inner_consumers.items():
        s = outer_src.get(name)
        if s is not None:
            for c in consumers:
                graph.connect(s, c)
    for name, consumers in outer_consumers.items():
        src = inner_src.get(name)
        if src is None:
            continue
        if isinstance(src, GraphInput):  # body passes an input straight through
            src = outer_src.get(src.name)
            if src is None:
                continue
        for c in consumers:
            graph.connect(src, c)
    moved = set(inner_ops)
    roots = [o for o in inner_ops if not any(p in moved for p in o.predecessors())]
    sinks = [o for o in inner_ops if not any(s in moved for s in o.successors())]
    for before in ctrl_in:
        for o in roots:
            graph.connect_control(before, o)
    for after in ctrl_out:
        for o in sinks:
            graph.connect_control(o, after)
    return inner_ops
