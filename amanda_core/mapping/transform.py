"""Graph transformations: remove, replace, expand, fuse into a meta-op, and back (``docs/mapping-tables.md``,
"Transformations").

Each is a function, and each is reachable from a mapping table:

=====================  ====================================================  ==================================
transformation         function                                              in a table's mapper
=====================  ====================================================  ==================================
remove and rewire      :func:`remove` (e.g. transposes that cancel)          ``dst: {remove: true}``
replace by one op      :func:`replace`                                       one mapper op (default edges)
expand into ops        :func:`expand`                                        several mapper ops with edges
fuse into a meta-op    :func:`fuse`                                          ``dst: {fuse: {type: ..., name: ...}}``
expand a meta-op back  :func:`unfuse`                                        ``dst: {inline: true}``
=====================  ====================================================  ==================================

A meta-op is an op with a body: matching sees it as one op and never looks inside it
(``docs/mapping-tables.md``, "Matchers" and "Transformations").
"""

from __future__ import annotations

__all__ = ["remove", "replace", "expand", "fuse", "unfuse", "apply_transform"]

from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from ..errors import GraphCycleError, GraphError
from ..ir.graph import Graph, InputPort, Op, OutputPort

if TYPE_CHECKING:
    from .match import Match
    from .rewrite import Rewrite, RewriteContext
    from .table import Rule


def _ordered(graph: Graph, ops: Iterable[Op]) -> list[Op]:
    members = set(ops)
    try:
        order = graph.topological_order()
    except GraphCycleError:
        order = tuple(graph)
    return [o for o in order if o in members]


def remove(graph: Graph, ops: Iterable[Op | str]) -> list[str]:
    """Remove ``ops`` and let everything that read a value leaving them read the value that entered them.

    The value entering is the one feeding the first input port of the first op (in topological order); other
    values entering the set are simply no longer read (their producers stay).  Control edges through the set are
    joined up.  Returns the names of the removed ops.
    """
    chosen = _ordered(graph, [graph.get_op(o) if isinstance(o, str) else o for o in ops])
    if not chosen:
        return []
    members = set(chosen)
    first = chosen[0]
    entering = next((p.source for p in first.input_ports if p.source is not None), None)
    leaving = [(q, [c for c in q.consumers if c.op not in members]) for op in chosen for q in op.output_ports]
    if entering is None and any(readers for _, readers in leaving):
        raise GraphError(f"cannot remove {', '.join(o.name for o in chosen)}: values leave them but no value "
                         "enters the first of them")
    ctrl_in = [o for op in chosen for o in op.control_inputs if o not in members]
    ctrl_out = [o for op in chosen for o in op.control_outputs if o not in members]
    for _q, readers in leaving:
        for c in readers:
            graph.connect(entering, c, replace=True)  # type: ignore[arg-type]
    for op in chosen:
        for q in op.output_ports:
            for c in list(q.consumers):
                graph.disconnect(c)
    names = []
    for op in chosen:
        names.append(op.name)
        graph.remove_op(op)
    for a in dict.fromkeys(ctrl_in):
        for b in dict.fromkeys(ctrl_out):
            if a is not b and b not in a.control_outputs:
                graph.connect_control(a, b)
    return names


def _boundary(graph: Graph, ops: Sequence[Op]) -> tuple[list[tuple[OutputPort, list[InputPort]]],
                                                         list[tuple[OutputPort, list[InputPort]]]]:
    """Values entering the set (with the ports reading them) and values leaving it (with their outside readers),
    each in order of first appearance."""
    members = set(ops)
    entering: dict[OutputPort, list[InputPort]] = {}
    leaving: dict[OutputPort, list[InputPort]] = {}
    for op in ops:
        for p in op.input_ports:
            s = p.source
            if s is not None and s.op not in members:
                entering.setdefault(s, []).append(p)
        for q in op.output_ports:
            outside = [c for c in q.consumers if c.op not in members]
            if outside:
                leaving[q] = outside
    return list(entering.items()), list(leaving.items())


def replace(graph: Graph, ops: Iterable[Op | str], op_type: str, name: str | None = None,
            attrs: Mapping[str, Any] | None = None, inputs: Sequence[str] | None = None,
            outputs: Sequence[str] | None = None, namespace: str | None = None) -> Op:
    """Replace ``ops`` by one op of type ``op_type``: each value entering the set feeds one input port (in order
    of first use), each value leaving it comes from one output port."""
    chosen = _ordered(graph, [graph.get_op(o) if isinstance(o, str) else o for o in ops])
    if not chosen:
        raise GraphError("replace needs at least one op")
    entering, leaving = _boundary(graph, chosen)
    in_names = list(inputs) if inputs is not None else [f"in{i}" for i in range(len(entering))]
    out_names = list(outputs) if outputs is not None else [f"out{i}" for i in range(len(leaving))]
    if len(in_names) != len(entering) or len(out_names) != len(leaving):
        raise GraphError(f"replace: {len(entering)} value(s) enter and {len(leaving)} leave, but "
                         f"{len(in_names)} input and {len(out_names)} output port name(s) were given")
    ctrl_in = [o for op in chosen for o in op.control_inputs if o not in set(chosen)]
    ctrl_out = [o for op in chosen for o in op.control_outputs if o not in set(chosen)]
    members = set(chosen)
    for op in chosen:
        for q in op.output_ports:
            for c in list(q.consumers):
                if c.op in members:
                    graph.disconnect(c)
    for (_, readers) in leaving:
        for c in readers:
            graph.disconnect(c)
    new_name = name if name is not None and name not in graph.ops else None
    for op in chosen:
        graph.remove_op(op)
    new = graph.add_op(op_type, new_name or graph.unique_name(name or chosen[0].name), attrs=dict(attrs or {}),
                       inputs=in_names, outputs=out_names, namespace=namespace)
    for (src, _), p in zip(entering, new.input_ports):
        graph.connect(src, p)
    for (_, readers), q in zip(leaving, new.output_ports):
        for c in readers:
            graph.connect(q, c)
    for a in dict.fromkeys(ctrl_in):
        graph.connect_control(a, new)
    for b in dict.fromkeys(ctrl_out):
        graph.connect_control(new, b)
    return new


def expand(graph: Graph, op: Op | str, body: Graph, prefix: str | None = None) -> list[Op]:
    """Replace one op by the ops of ``body``, a graph whose input and output ports are named as the op's ports
    (the body is copied; its ops are named ``<prefix>/<name>``, prefix defaulting to the op's name)."""
    target = graph.get_op(op) if isinstance(op, str) else op
    holder = target
    copy = body.copy()
    if copy.input_ports.names() != holder.input_ports.names() or \
            copy.output_ports.names() != holder.output_ports.names():
        raise GraphError(f"expand: the body has ports {copy.input_ports.names()} -> {copy.output_ports.names()}, "
                         f"op {holder.name!r} has {holder.input_ports.names()} -> {holder.output_ports.names()}")
    base = prefix if prefix is not None else holder.name
    for inner in list(copy):
        copy.rename_op(inner, f"{base}/{inner.name}")
    if holder.body is not None:  # a meta-op: its old body gives way to the new one
        holder.set_body(None)
    holder.set_body(copy)
    return graph.inline(holder)


def fuse(graph: Graph, ops: Iterable[Op | str], op_type: str, name: str | None = None,
         attrs: Mapping[str, Any] | None = None) -> Op:
    """Move ``ops`` into the body of a new meta-op; matching treats it as one op."""
    chosen = _ordered(graph, [graph.get_op(o) if isinstance(o, str) else o for o in ops])
    if not chosen:
        raise GraphError("fuse needs at least one op")
    meta_name = name if name is not None else graph.unique_name(f"{chosen[0].name}_fused")
    return graph.make_subgraph(chosen, meta_name, op_type, dict(attrs or {}))


def unfuse(graph: Graph, op: Op | str) -> list[Op]:
    """Put the ops of a meta-op's body back in its place."""
    target = graph.get_op(op) if isinstance(op, str) else op
    if target.body is None:
        raise GraphError(f"op {target.name!r} has no body to expand")
    return graph.inline(target)


def apply_transform(graph: Graph, match: Match, rule: Rule, ctx: RewriteContext) -> Rewrite | None:
    """A rule whose mapper is ``remove``, ``fuse`` or ``inline``."""
    from .rewrite import MappingError, Rewrite, _eval

    ops = match.all_ops
    kind = rule.dst.transform
    try:
        if kind == "remove":
            return Rewrite(removed=remove(graph, ops))
        if kind == "inline":
            if len(ops) != 1:
                raise MappingError("'inline' needs a matcher of exactly one op", ctx.table, rule.name,
                                   [o.name for o in ops])
            names = [ops[0].name]
            moved = unfuse(graph, ops[0])
            return Rewrite(updated=moved, removed=names)
        env = ctx.match_ctx.env(graph, match, rule.src)
        args = {k: _eval(v, env, rule, match) for k, v in rule.dst.transform_args.items()}
        if "type" not in args:
            raise MappingError("'fuse' needs a 'type' for the meta-op", ctx.table, rule.name)
        name = args.get("name")
        meta = fuse(graph, ops, str(args["type"]), graph.unique_name(str(name)) if name else None,
                    args.get("attrs") or {})
        meta.provenance = (ctx.table, rule.name)
        return Rewrite(created=[meta])
    except GraphError as e:
        raise MappingError(str(e), ctx.table, rule.name, [o.name for o in ops]) from None
