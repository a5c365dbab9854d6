"""Functional control flow between TensorFlow and ONNX: the structure of ``If``/``Loop`` as code around the tables.

A TensorFlow ``StatelessIf``/``If`` passes every value its branches read as an input (``input_<i>``, the branch
functions' arguments); ``StatelessWhile``/``While`` carries every value its ``cond`` and ``body`` functions read as a
loop variable.  An ONNX ``If`` takes its condition only, its branches read values of the enclosing graph by name
(``OuterValue`` ops, ``docs/onnx.md``, "Subgraphs and outer scope"); an ONNX ``Loop`` has no condition function:
its body computes the next condition.  A mapping rule cannot move values across graph boundaries or inline a
function into another graph, so two graph passes do that, while the ``tf-to-onnx`` and ``onnx-to-tf`` tables
convert the ops inside the bodies as they convert any op (the engine visits every nested graph):

* :func:`tf_control_to_onnx` runs *after* ``tf-to-onnx``, once the ops in and around the bodies are ONNX ops:
  ``StatelessIf``/``If`` becomes ``If`` (each branch argument an ``OuterValue`` of the value fed to it; a numeric
  scalar condition is cast to bool, which is TF's truth of a scalar); ``StatelessWhile``/``While`` becomes
  ``Loop`` with no trip count, whose start condition is the ``cond`` function inlined before the loop and whose
  body is TF's body followed by ``cond`` inlined on its results.
* :func:`onnx_control_to_tf` runs *before* ``onnx-to-tf``: ``If`` becomes ``StatelessIf`` whose branches take the
  outer values they read as arguments; ``Loop`` becomes ``StatelessWhile`` over
  ``(iteration, trip count, condition, v..., scan lists..., outer values...)``, whose ``cond`` is ``condition and
  iteration < trip count`` and whose body is ONNX's body plus the counter's increment; each scan output is pushed to
  a ``TensorList`` per step, stacked after the loop (its element shape given when static, so that zero steps give
  an empty tensor of the right shape).  Sequence and optional values are ``variant`` (``amanda_tf.sequences``).
  The branches keep their ONNX ops for the table; :func:`settle_tf_bodies` (after the table) gives the function
  signatures TF element types.

A control-flow op a pass cannot take (TensorList or resource loop variables going to ONNX, a non-scalar
condition) is left as it is, so the conversion reports it as unconverted, and the pass's summary says why.
"""

from __future__ import annotations

__all__ = ["tf_control_to_onnx", "onnx_control_to_tf", "settle_tf_bodies", "ControlReport"]

from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from amanda_core import Graph
from amanda_core.ir.graph import Op, OutputPort
from amanda_onnx.names import fresh_name, names_in_use, value_name

ONNX_FAMILY = "amanda/onnx/"
TF_FAMILY = "amanda/tensorflow/"
TF_IF = ("StatelessIf", "If")
TF_WHILE = ("StatelessWhile", "While")


@dataclass
class ControlReport:
    """What a control-flow pass converted, and what it left with the reason."""

    converted: dict[str, int] = field(default_factory=dict)
    left: list[str] = field(default_factory=list)

    def summary(self) -> str:
        done = ", ".join(f"{n} {t}" for t, n in sorted(self.converted.items())) or "no control flow"
        kept = f"; left: {'; '.join(self.left)}" if self.left else ""
        return f"{done} converted{kept}"


# --------------------------------------------------------------------------- shared helpers

def _graph_attrs(op: Op) -> Iterator[Graph]:
    for value in op.attrs.values():
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, Graph):
                yield v


def _walk(graph: Graph) -> Iterator[Graph]:
    yield graph
    for op in graph:
        for g in _graph_attrs(op):
            yield from _walk(g)


def _ns(op: Op, inherited: str | None) -> str | None:
    if op.namespace is not None:
        return op.namespace
    g = op.graph
    return (g.namespace if g is not None else None) or inherited


def _family_ops(g: Graph, inherited: str | None, types: tuple[str, ...], family: str) -> Iterator[tuple[Op, str]]:
    """The ops of ``g`` itself (not of its bodies) of ``types`` in a namespace of ``family``, with that namespace,
    in topological order; an op removed meanwhile (the caller rewrites ``g``) is skipped."""
    for op in list(g.topological_order()):
        if op.graph is not g or op.type not in types:
            continue
        ns = _ns(op, inherited)
        if ns is not None and ns.startswith(family):
            yield op, ns


def _installed_tf_ns() -> str | None:
    """The namespace of the installed TensorFlow's ops; None without TensorFlow."""
    from .namespace import TensorFlowNamespaces

    found = TensorFlowNamespaces().installed()
    return None if found is None else f"{TF_FAMILY}{found[1]}"


def _family_ns(graph: Graph, family: str) -> str | None:
    for g in _walk(graph):
        if g.namespace is not None and g.namespace.startswith(family):
            return g.namespace
        for op in g:
            if op.namespace is not None and op.namespace.startswith(family):
                return op.namespace
    return None


def _tf_to_onnx_dtype(dtype: Any) -> Any:
    """A TF port type text as ONNX's (``float32[?,4]`` -> ``tensor(float)[?,4]``); ONNX texts and None as they are."""
    if dtype is None or str(dtype).startswith(("tensor(", "seq(", "map(", "optional(", "sparse_tensor(")):
        return dtype
    from amanda_onnx.typesystem import OnnxTypeSystem

    from .types import TFTypeSystem

    tt = TFTypeSystem().tensor_type(dtype)
    return None if tt is None else OnnxTypeSystem().make_tensor_type(*tt)


def _onnx_to_tf_dtype(dtype: Any) -> Any:
    """An ONNX port type text as TF's (``tensor(float)[N,4]`` -> ``float32[?,4]``); else as it is."""
    if dtype is None or not str(dtype).startswith("tensor("):
        return dtype
    from amanda_onnx.typesystem import OnnxTypeSystem

    from .types import TFTypeSystem

    tt = OnnxTypeSystem().tensor_type(dtype)
    return None if tt is None else TFTypeSystem().make_tensor_type(*tt)


def _elem(dtype: Any) -> str | None:
    """The numpy element type name of a TF or ONNX port type text."""
    if dtype is None:
        return None
    from amanda_onnx.typesystem import OnnxTypeSystem

    from .types import TFTypeSystem

    for system in (OnnxTypeSystem(), TFTypeSystem()):
        tt = system.tensor_type(dtype)
        if tt is not None:
            return tt[0]
    return None


def _shape(dtype: Any) -> tuple[Any, ...] | None:
    if dtype is None:
        return None
    from amanda_onnx.typesystem import OnnxTypeSystem

    from .types import TFTypeSystem

    for system in (OnnxTypeSystem(), TFTypeSystem()):
        tt = system.tensor_type(dtype)
        if tt is not None:
            return tt[1]
    return None


def _replace_op(g: Graph, old: Op, new: Op, outs: list[OutputPort]) -> None:
    """Readers of ``old``'s outputs read ``outs`` (in order); ``old``'s control edges move to ``new``."""
    for q, r in zip(old.output_ports, outs):
        g.replace_all_uses(q, r)
    for c in old.control_inputs:
        if c is not new and c not in new.control_inputs:
            g.connect_control(c, new)
    for c in old.control_outputs:
        if c is not new:
            g.connect_control(new, c)
    g.remove_op(old)


def _control_edges(g: Graph, new: Op, sources: list[OutputPort | None]) -> None:
    for src in sources:
        if src is not None and src.op is not None and src.op.graph is g and src.op is not new \
                and src.op not in new.control_inputs:
            g.connect_control(src.op, new)


def _inline(target: Graph, body: Graph, sources: list[OutputPort], prefix: str,
            namespace: str | None) -> list[OutputPort]:
    """A copy of ``body``'s ops in ``target``, its inputs read from ``sources``; returns what its outputs are fed
    by, in ``target``."""
    body = body.copy()
    value: dict[Any, OutputPort] = {gi: s for gi, s in zip(body.input_ports, sources)}
    ops: dict[Op, Op] = {}
    for op in body.topological_order():
        srcs = [value.get(p.source) if p.source is not None else None for p in op.input_ports]
        new = target.add_op(op.type, target.unique_name(f"{prefix}/{op.name}"),
                            inputs=[(p.name, p.dtype) for p in op.input_ports],
                            outputs=[(q.name, q.dtype) for q in op.output_ports],
                            attrs=dict(op.attrs), namespace=op.namespace or namespace, sources=srcs)
        if op.meta:
            new.meta = {k: v for k, v in op.meta.items() if k != "outputs"}
        ops[op] = new
        for q, nq in zip(op.output_ports, new.output_ports):
            value[q] = nq
        for c in op.control_inputs:
            if c in ops:
                target.connect_control(ops[c], new)
    return [value[p.source] for p in body.output_ports]


def _settle(graph: Graph, family: str, ns: str) -> None:
    """When every op of the graph and its bodies is in ``family`` now, the graph says ``ns`` and its ops drop the
    namespace they were pinned to while it was mixed."""
    ops = [(g, op) for g in _walk(graph) for op in g]
    for g, op in ops:
        if op.namespace is None:
            if g is graph and graph.namespace is not None and not graph.namespace.startswith(family) \
                    and op.type not in ("Initializer", "OuterValue", "SparseInitializer"):
                return
            continue
        if not op.namespace.startswith(family):
            return
    graph.namespace = ns
    for _, op in ops:
        if op.namespace == ns:
            op.namespace = None


# --------------------------------------------------------------------------- TF -> ONNX (after the table)

def tf_control_to_onnx(graph: Graph) -> ControlReport:
    """``StatelessIf``/``If`` as ONNX ``If`` and ``StatelessWhile``/``While`` as ``Loop``, after ``tf-to-onnx``
    converted the ops around and inside them."""
    report = ControlReport()
    onnx_ns = _family_ns(graph, ONNX_FAMILY)
    if onnx_ns is None:
        return report
    taken = names_in_use(graph)
    _to_onnx(graph, graph.namespace, onnx_ns, taken, report)
    if report.converted:
        _settle(graph, ONNX_FAMILY, onnx_ns)
        if graph.namespace == onnx_ns:  # the engine typed what it converted; the rest is typed here
            _retype(graph, _tf_to_onnx_dtype)
    return report


def _retype(graph: Graph, convert: Any) -> None:
    for g in _walk(graph):
        ports = list(g.input_ports) + list(g.output_ports)
        for op in g:
            ports += list(op.input_ports) + list(op.output_ports)
        for p in ports:
            if p.dtype is not None:
                p.dtype = convert(p.dtype)


def _to_onnx(g: Graph, inherited: str | None, onnx_ns: str, taken: set[str], report: ControlReport) -> None:
    for op, _ in _family_ops(g, inherited, TF_IF + TF_WHILE, TF_FAMILY):
        try:
            if op.type in TF_IF:
                _if_to_onnx(g, op, onnx_ns, taken)
            else:
                _while_to_onnx(g, op, onnx_ns, taken)
        except _Refused as e:
            report.left.append(f"{op.type} {op.name!r}: {e}")
        else:
            report.converted[op.type] = report.converted.get(op.type, 0) + 1
    for op in list(g):
        for body in _graph_attrs(op):
            _to_onnx(body, inherited, onnx_ns, taken, report)


class _Refused(Exception):
    pass


def _check_values(op: Op, ports: list[Any]) -> None:
    for p in ports:
        elem = _elem(p.dtype)
        text = str(p.dtype)
        if "variant" in text or "resource" in text:
            raise _Refused(f"{p.name} is a {text} (TensorList or resource), which ONNX has no value for")
        if elem is None and p.dtype is not None:
            raise _Refused(f"{p.name} has type {text}, not a tensor")


def _branch_to_onnx(body: Graph, sources: list[OutputPort], taken: set[str], prefix: str) -> None:
    """Each argument of ``body`` read through an ``OuterValue`` of the value fed to it; outputs named apart."""
    for gi, src in zip(list(body.input_ports), sources):
        if gi.has_consumers():
            name = value_name(src, taken)
            ov = body.add_op("OuterValue", body.unique_name(f"outer_{name}"), attrs={"name": name},
                             outputs=[("output", _tf_to_onnx_dtype(src.dtype))])
            body.replace_all_uses(gi, ov.output_ports[0])
        body.remove_input_port(gi)
    _outputs_to_onnx(body, prefix, taken)


def _outputs_to_onnx(body: Graph, prefix: str, taken: set[str]) -> None:
    for i, go in enumerate(list(body.output_ports)):
        go.dtype = _tf_to_onnx_dtype(go.dtype)
        body.rename_output_port(go, fresh_name(f"{prefix}_{i}", taken))
    _onnx_graph_attrs(body, prefix)


def _onnx_graph_attrs(body: Graph, name: str) -> None:
    """An ONNX subgraph's attributes: its name (ONNX wants one); the TF function's own attributes go."""
    function = body.attrs.get("function")
    body.attrs = {"name": str(function or name)}
    body.namespace = None


def _bool_cond(g: Graph, src: OutputPort, onnx_ns: str, name: str) -> OutputPort:
    """``src`` as ONNX's bool condition: as it is when bool, else cast (TF's truth of a numeric scalar)."""
    elem = _elem(src.dtype)
    shape = _shape(src.dtype)
    if shape is not None and len(shape) > 0 and any(d != 1 for d in shape):
        raise _Refused(f"its condition has shape {list(shape)}; TF takes a non-scalar as 'not empty', ONNX not")
    if elem == "bool":
        return src
    if elem is None:
        raise _Refused("the element type of its condition is unknown")
    cast = g.add_op("Cast", g.unique_name(name), namespace=onnx_ns, inputs=["input"],
                    outputs=[("output", "tensor(bool)[]")], attrs={"to": 9}, sources=[src])
    return cast.output_ports[0]


def _if_to_onnx(g: Graph, op: Op, onnx_ns: str, taken: set[str]) -> None:
    then_b, else_b = op.attrs.get("then_branch"), op.attrs.get("else_branch")
    if not isinstance(then_b, Graph) or not isinstance(else_b, Graph):
        raise _Refused("a branch is not a function of the graph's library")
    data = [p for p in op.input_ports if p.name != "cond"]
    _check_values(op, data + list(op.output_ports))
    sources = [p.source for p in data]
    if any(s is None for s in sources) or op.input_ports["cond"].source is None:
        raise _Refused("an input is fed by nothing")
    for b in (then_b, else_b):
        if len(b.input_ports) != len(sources) or len(b.output_ports) != len(op.output_ports):
            raise _Refused("a branch's signature does not fit the op's inputs and outputs")
    cond = _bool_cond(g, op.input_ports["cond"].source, onnx_ns, op.name + "/cond_bool")
    for b, side in ((then_b, "then"), (else_b, "else")):
        _branch_to_onnx(b, sources, taken, f"{op.name}_{side}")  # type: ignore[arg-type]
    new = g.add_op("If", g.unique_name(op.name + "/if"), namespace=onnx_ns, inputs=[("cond", cond.dtype)],
                   outputs=[(f"outputs_{i}", _tf_to_onnx_dtype(q.dtype)) for i, q in enumerate(op.output_ports)],
                   attrs={"then_branch": then_b, "else_branch": else_b}, sources=[cond])
    name = op.name
    _replace_op(g, op, new, list(new.output_ports))
    g.rename_op(new, name)
    _control_edges(g, new, sources)  # type: ignore[arg-type]


def _while_to_onnx(g: Graph, op: Op, onnx_ns: str, taken: set[str]) -> None:
    cond_g, body = op.attrs.get("cond"), op.attrs.get("body")
    if not isinstance(cond_g, Graph) or not isinstance(body, Graph):
        raise _Refused("its cond or body is not a function of the graph's library")
    carried = list(op.input_ports)
    _check_values(op, carried + list(op.output_ports))
    sources = [p.source for p in carried]
    n = len(carried)
    if any(s is None for s in sources):
        raise _Refused("a loop variable is fed by nothing")
    if len(body.input_ports) != n or len(body.output_ports) != n or len(cond_g.input_ports) != n \
            or len(cond_g.output_ports) != 1:
        raise _Refused("its cond or body signature does not fit the loop variables")
    # the start condition: cond on the initial values, before the loop
    (c0,) = _inline(g, cond_g, sources, f"{op.name}/cond_start", onnx_ns)  # type: ignore[arg-type]
    c0 = _bool_cond(g, c0, onnx_ns, op.name + "/cond_start_bool")
    # the body: (iter_num, cond_in, v...) -> (cond_out, v'...), cond inlined on v'
    old_in = list(body.input_ports)
    fresh_in = [body.add_input_port(fresh_name(f"{op.name}_iter", taken), "tensor(int64)[]"),
                body.add_input_port(fresh_name(f"{op.name}_cond_in", taken), "tensor(bool)[]")]
    for o in old_in:
        port = body.add_input_port(fresh_name(o.name, taken), _tf_to_onnx_dtype(o.dtype))
        body.replace_all_uses(o, port)
        body.remove_input_port(o)
    results = [go.source for go in body.output_ports]
    if any(r is None for r in results):
        raise _Refused("a body output is fed by nothing")
    out_dtypes = [go.dtype for go in body.output_ports]
    for go in list(body.output_ports):
        body.remove_output_port(go)
    (c_next,) = _inline(body, cond_g, results, f"{op.name}/cond", onnx_ns)  # type: ignore[arg-type]
    c_next = _bool_cond(body, c_next, onnx_ns, op.name + "/cond_bool")
    body.connect(c_next, body.add_output_port(fresh_name(f"{op.name}_cond_out", taken), "tensor(bool)[]"))
    for i, (r, dt) in enumerate(zip(results, out_dtypes)):
        body.connect(r, body.add_output_port(fresh_name(f"{op.name}_out_{i}", taken), _tf_to_onnx_dtype(dt)))  # type: ignore[arg-type]
    _onnx_graph_attrs(body, f"{op.name}_body")
    del fresh_in
    new = g.add_op("Loop", g.unique_name(op.name + "/loop"), namespace=onnx_ns,
                   inputs=[("M", "tensor(int64)[]"), ("cond", "tensor(bool)[]")]
                   + [(f"v_initial_{i}", _tf_to_onnx_dtype(s.dtype)) for i, s in enumerate(sources)],  # type: ignore
                   outputs=[(f"v_final_and_scan_outputs_{i}", _tf_to_onnx_dtype(q.dtype))
                            for i, q in enumerate(op.output_ports)],
                   attrs={"body": body}, sources=[None, c0] + sources)
    name = op.name
    _replace_op(g, op, new, list(new.output_ports))
    g.rename_op(new, name)


# --------------------------------------------------------------------------- ONNX -> TF (before the table)

def onnx_control_to_tf(graph: Graph) -> ControlReport:
    """ONNX ``If``/``Loop`` as ``StatelessIf``/``StatelessWhile`` whose functions take the outer values they read
    as arguments; the functions keep their ONNX ops for ``onnx-to-tf`` to convert."""
    report = ControlReport()
    tf_ns = _installed_tf_ns()
    if tf_ns is None:
        return report
    if any(op.type in ("If", "Loop") for g in _walk(graph) for op in g):
        _type_subgraphs(graph)
    _to_tf(graph, graph.namespace, tf_ns, report)
    return report


def _type_subgraphs(graph: Graph) -> None:
    """Types of the values inside ``If``/``Loop`` bodies from onnx's shape inference (Amanda's ONNX inference
    types the main graph's values only; the table's rules read element types and ranks).  Values are matched by
    their ONNX names, recorded on their producers."""
    import onnx

    import amanda_onnx
    from amanda_onnx.dtypes import dtype_from_type_proto

    try:
        model = onnx.shape_inference.infer_shapes(amanda_onnx.to_model(graph))
    except Exception:  # inference is a help: the rules then see fewer types
        return

    def walk(gp: Any, g: Graph) -> None:
        types = {vi.name: vi.type for vi in list(gp.value_info) + list(gp.output)}
        by_name = {str((op.meta or {}).get("name", op.name)): op for op in g}
        if gp is not model.graph:
            for op in g:
                recorded = (op.meta or {}).get("outputs") or {}
                for q in op.output_ports:
                    tp = types.get(recorded.get(q.name, ""))
                    if q.dtype is None and tp is not None:
                        q.dtype = dtype_from_type_proto(tp)
        for node in gp.node:
            op = by_name.get(node.name)
            if op is None:
                continue
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH and isinstance(op.attrs.get(a.name), Graph):
                    walk(a.g, op.attrs[a.name])

    walk(model.graph, graph)


def _scope_values(g: Graph) -> dict[str, OutputPort]:
    """The values of ``g`` by their ONNX names: inputs, recorded op outputs, ``OuterValue`` ops."""
    names: dict[str, OutputPort] = {p.name: p for p in g.input_ports}
    for op in g:
        if op.type == "OuterValue":
            names[str(op.attrs.get("name"))] = op.output_ports[0]
            continue
        recorded = op.meta.get("outputs") if op.meta else None
        for q in op.output_ports:
            n = (recorded or {}).get(q.name)
            if n:
                names[n] = q
    return names


def _outer_values(body: Graph) -> list[str]:
    seen: list[str] = []
    for op in body:
        if op.type == "OuterValue" and str(op.attrs.get("name")) not in seen:
            seen.append(str(op.attrs.get("name")))
    return seen


def _to_tf(g: Graph, inherited: str | None, tf_ns: str, report: ControlReport, nested: bool = False) -> None:
    """Innermost first: a body's control flow takes the values it reads from the body (its inputs, its ops, or
    the body's own reads of the graph around it, added when missing), before the body's op is converted."""
    for op in list(g):
        for body in _graph_attrs(op):
            _to_tf(body, inherited, tf_ns, report, nested=True)
    for op, ns in _family_ops(g, inherited, ("If", "Loop"), ONNX_FAMILY):
        try:
            if op.type == "If":
                _if_to_tf(g, op, tf_ns, ns, nested)
            else:
                _loop_to_tf(g, op, tf_ns, ns, nested)
        except _Refused as e:
            report.left.append(f"{op.type} {op.name!r}: {e}")
        else:
            report.converted[op.type] = report.converted.get(op.type, 0) + 1


def _carry_names(old: Op, outs: list[OutputPort]) -> None:
    """The ops making ``outs`` (in ``old``'s graph) record the ONNX names of the values ``old`` made, so that a
    body converted later still finds them by name (``_scope_values``); a value that has a name keeps it."""
    recorded = (old.meta or {}).get("outputs") or {}
    for q, r in zip(old.output_ports, outs):
        producer = r.op
        if q.name not in recorded or producer is None or producer.graph is not old.graph:
            continue
        names = (producer.meta or {}).get("outputs") or {}
        if r.name not in names:
            producer.meta = {**(producer.meta or {}), "outputs": {**names, r.name: recorded[q.name]}}


def _resolve(g: Graph, names: list[str], what: str, nested: bool, bodies: tuple[Graph, ...]) -> list[OutputPort]:
    """The values ``names`` in ``g``; in a nested graph, a name it does not make is read from the graph around it
    through an ``OuterValue`` (typed as the ``bodies`` read it), which that graph's own op then captures."""
    scope = _scope_values(g)
    missing = [n for n in names if n not in scope]
    if missing and not nested:
        raise _Refused(f"{what} reads {missing[0]!r}, which the enclosing graph does not produce")
    for n in missing:
        dtype = next((o.output_ports[0].dtype for b in bodies for o in b
                      if o.type == "OuterValue" and str(o.attrs.get("name")) == n and o.output_ports[0].dtype), None)
        ov = g.add_op("OuterValue", g.unique_name(f"outer_{n}"), attrs={"name": n}, outputs=[("output", dtype)])
        scope[n] = ov.output_ports[0]
    return [scope[n] for n in names]


def _captures_as_inputs(body: Graph, names: list[str], dtypes: list[Any]) -> None:
    """Each ``OuterValue`` of ``body`` becomes an input port named after its value (one per name, in order)."""
    ports = {n: body.add_input_port(n, dt) for n, dt in zip(names, dtypes)}
    for op in list(body):
        if op.type == "OuterValue" and str(op.attrs.get("name")) in ports:
            body.replace_all_uses(op.output_ports[0], ports[str(op.attrs["name"])])
            body.remove_op(op)


def _tf_types(ports: list[Any]) -> list[str]:
    out = []
    for p in ports:
        if str(p.dtype).startswith(("seq(", "optional(")):  # a TensorList or Optional (amanda_tf.sequences)
            out.append("variant")
            continue
        elem = _elem(p.dtype)
        if elem is None:
            raise _Refused(f"the element type of {p.name!r} is unknown (type the graph first)")
        from .dtypes import parse_dtype

        out.append(parse_dtype(elem).name if elem != "string" else "string")
    return out


def _tf_shapes(ports: list[Any]) -> list[Any]:
    shapes = []
    for p in ports:
        s = _shape(p.dtype)
        shapes.append(None if s is None else [d if isinstance(d, int) else -1 for d in s])
    return shapes


def _if_to_tf(g: Graph, op: Op, tf_ns: str, onnx_ns: str, nested: bool) -> None:
    then_b, else_b = op.attrs.get("then_branch"), op.attrs.get("else_branch")
    if not isinstance(then_b, Graph) or not isinstance(else_b, Graph):
        raise _Refused("a branch is not a graph")
    cond = op.input_ports["cond"].source
    if cond is None:
        raise _Refused("its condition is fed by nothing")
    names = _outer_values(then_b) + [n for n in _outer_values(else_b) if n not in _outer_values(then_b)]
    sources = _resolve(g, names, "a branch", nested, (then_b, else_b))
    tin = _tf_types(sources)
    for i, q in enumerate(op.output_ports):  # an output nobody typed: what the branches return says it
        for b in (then_b, else_b):
            if q.dtype is None and i < len(b.output_ports):
                go = b.output_ports[i]
                q.dtype = go.dtype if go.dtype is not None else (go.source.dtype if go.source is not None else None)
    tout = _tf_types(list(op.output_ports))
    for b in (then_b, else_b):
        if len(b.output_ports) != len(op.output_ports):
            raise _Refused("a branch's outputs do not fit the op's")
        _captures_as_inputs(b, names, [s.dtype for s in sources])
    attrs: dict[str, Any] = {"Tcond": "bool", "Tin": tin, "Tout": tout, "then_branch": then_b,
                             "else_branch": else_b, "output_shapes": _tf_shapes(list(op.output_ports))}
    attrs["output_shapes"] = [s if s is not None else None for s in attrs["output_shapes"]]
    if any(s is None for s in attrs["output_shapes"]):
        del attrs["output_shapes"]
    for b in (then_b, else_b):
        _tf_function_attrs(b, onnx_ns)
    new = g.add_op("StatelessIf", g.unique_name(op.name + "/if"), namespace=tf_ns,
                   inputs=[("cond", cond.dtype)] + [(f"input_{i}", s.dtype) for i, s in enumerate(sources)],
                   outputs=[(f"output_{i}", q.dtype) for i, q in enumerate(op.output_ports)],
                   attrs=attrs, sources=[cond] + sources)
    name = op.name
    _carry_names(op, list(new.output_ports))
    _replace_op(g, op, new, list(new.output_ports))
    g.rename_op(new, name)


def _loop_to_tf(g: Graph, op: Op, tf_ns: str, onnx_ns: str, nested: bool) -> None:
    body = op.attrs.get("body")
    if not isinstance(body, Graph):
        raise _Refused("its body is not a graph")
    carried = [p for p in op.input_ports if p.name.startswith("v_initial")]
    n = len(carried)
    scans = len(body.output_ports) - 1 - n  # scan outputs: one TensorList each, stacked after the loop
    if scans < 0 or len(op.output_ports) != n + scans or len(body.input_ports) != n + 2:
        raise _Refused("its body's signature does not fit its inputs and outputs")
    scan_types = _tf_types(list(op.output_ports)[n:])
    if "variant" in scan_types:
        raise _Refused("a scan output is not a tensor")
    m_src = op.input_ports["M"].source if "M" in op.input_ports else None
    c_src = op.input_ports["cond"].source if "cond" in op.input_ports else None
    sources = [p.source for p in carried]
    if any(s is None for s in sources):
        raise _Refused("a loop variable is fed by nothing")
    names = _outer_values(body)
    captured = _resolve(g, names, "its body", nested, (body,))
    tout = _tf_types(sources) if sources else []  # type: ignore[arg-type]
    tcap = _tf_types(captured)

    def const(value: np.ndarray, base: str) -> OutputPort:
        from amanda_onnx.typesystem import OnnxTypeSystem

        c = g.add_op("Constant", g.unique_name(f"{op.name}/{base}"), namespace=onnx_ns, attrs={"value": value},
                     outputs=[("output", OnnxTypeSystem().make_tensor_type(value.dtype.name, value.shape))])
        return c.output_ports[0]

    i0 = const(np.array(0, np.int64), "iteration")
    m_in = m_src if m_src is not None else const(np.array(2**63 - 1, np.int64), "no_trip_count")
    c_in = c_src if c_src is not None else const(np.array(True), "no_condition")
    # loop variables: (i, M, c, v..., captured...)
    it_in, cond_in = body.input_ports[0], body.input_ports[1]
    v_in = list(body.input_ports)[2:]
    c_out = body.output_ports[0].source
    v_out = [go.source for go in list(body.output_ports)[1:1 + n]]
    returned = [go.dtype if go.dtype is not None else (go.source.dtype if go.source is not None else None)
                for go in list(body.output_ports)[1:1 + n]]
    s_out = [go.source for go in list(body.output_ports)[1 + n:]]
    if c_out is None or any(v is None for v in v_out + s_out):
        raise _Refused("a body output is fed by nothing")
    for go in list(body.output_ports):
        body.remove_output_port(go)
    # rebuild the body's inputs in TF's order, each named apart
    b_i = body.add_input_port("iteration", "tensor(int64)[]")
    b_m = body.add_input_port("trip_count", "tensor(int64)[]")
    b_c = body.add_input_port("condition", "tensor(bool)[]")
    body.replace_all_uses(it_in, b_i)
    body.replace_all_uses(cond_in, b_c)
    b_v = []
    for k, p in enumerate(v_in):
        q = body.add_input_port(f"v_{k}", p.dtype if p.dtype is not None else sources[k].dtype)  # type: ignore
        body.replace_all_uses(p, q)
        b_v.append(q)
    for p in [it_in, cond_in] + v_in:
        body.remove_input_port(p)
    unwrap = []  # an optional loop variable the body returns as its value: kept optional through the loop
    for k, (p, t) in enumerate(zip(b_v, returned)):
        if str(p.dtype).startswith("optional(") and t is not None and not str(t).startswith("optional(") \
                and v_out[k] is not None:
            wrap = body.add_op("Optional", body.unique_name(f"v_{k}_optional"), namespace=onnx_ns,
                               inputs=["input"], outputs=[("output", p.dtype)], sources=[v_out[k]])
            v_out[k] = wrap.output_ports[0]
            unwrap.append(k)
    b_s = [body.add_input_port(f"scan_{k}", "variant") for k in range(scans)]
    s_pushed = [body.add_op("TensorListPushBack", body.unique_name(f"scan_{k}_push"), namespace=tf_ns,
                            inputs=["input_handle", "tensor"], outputs=[("output_handle", "variant")],
                            attrs={"element_dtype": t}, sources=[lst, v]).output_ports[0]
                for k, (lst, v, t) in enumerate(zip(b_s, s_out, scan_types))]
    cap_ports = [body.add_input_port(f"captured_{k}", s.dtype) for k, s in enumerate(captured)]
    for k, nm in enumerate(names):
        for ov in [o for o in body if o.type == "OuterValue" and str(o.attrs.get("name")) == nm]:
            body.replace_all_uses(ov.output_ports[0], cap_ports[k])
            body.remove_op(ov)
    one = body.add_op("Constant", body.unique_name("one"), namespace=onnx_ns, attrs={"value": np.array(1, np.int64)},
                      outputs=[("output", "tensor(int64)[]")])
    inc = body.add_op("Add", body.unique_name("next_iteration"), namespace=onnx_ns, inputs=["A", "B"],
                      outputs=[("C", "tensor(int64)[]")], sources=[b_i, one.output_ports[0]])
    outs = [inc.output_ports[0], b_m, c_out] + v_out + s_pushed + cap_ports
    in_types = [p.dtype for p in body.input_ports]  # TF's body returns what it takes, type for type
    for k, (src, dt) in enumerate(zip(outs, in_types)):
        body.connect(src, body.add_output_port(f"output_{k}", dt))  # type: ignore[arg-type]
    # cond: (i, M, c, v..., captured...) -> c and i < M
    cond_g = Graph(attrs={})
    ci = cond_g.add_input_port("iteration", "tensor(int64)[]")
    cm = cond_g.add_input_port("trip_count", "tensor(int64)[]")
    cc = cond_g.add_input_port("condition", "tensor(bool)[]")
    for k, p in enumerate(b_v):
        cond_g.add_input_port(f"v_{k}", p.dtype)
    for k in range(scans):
        cond_g.add_input_port(f"scan_{k}", "variant")
    for k, p in enumerate(cap_ports):
        cond_g.add_input_port(f"captured_{k}", p.dtype)
    less = cond_g.add_op("Less", "below_trip_count", namespace=onnx_ns, inputs=["A", "B"],
                         outputs=[("C", "tensor(bool)[]")], sources=[ci, cm])
    both = cond_g.add_op("And", "go_on", namespace=onnx_ns, inputs=["A", "B"], outputs=[("C", "tensor(bool)[]")],
                         sources=[cc, less.output_ports[0]])
    cond_g.connect(both.output_ports[0], cond_g.add_output_port("go_on", "tensor(bool)[]"))
    _tf_function_attrs(body, onnx_ns)
    _tf_function_attrs(cond_g, onnx_ns)
    shapes = [_shape(q.dtype) for q in list(op.output_ports)[n:]]
    elements = [np.array(list(s[1:]), np.int32) if s is not None and all(isinstance(d, int) for d in s[1:])
                else np.array(-1, np.int32) for s in shapes]  # a static element shape stacks zero steps too
    lists = []
    for k, (t, shape) in enumerate(zip(scan_types, elements)):
        empty = g.add_op("EmptyTensorList", g.unique_name(f"{op.name}/scan_{k}"), namespace=tf_ns,
                         inputs=["element_shape", "max_num_elements"], outputs=[("handle", "variant")],
                         attrs={"element_dtype": t, "shape_type": "int32"},
                         sources=[const(shape, f"scan_{k}_shape"), const(np.array(-1, np.int32), "no_limit")])
        lists.append(empty.output_ports[0])
    types = ["int64", "int64", "bool"] + tout + ["variant"] * scans + tcap
    loop_in = [i0, m_in, c_in] + sources + lists + captured
    new = g.add_op("StatelessWhile", g.unique_name(op.name + "/while"), namespace=tf_ns,
                   inputs=[(f"input_{k}", s.dtype) for k, s in enumerate(loop_in)],  # type: ignore[union-attr]
                   outputs=[(f"output_{k}", s.dtype) for k, s in enumerate(loop_in)],  # type: ignore[union-attr]
                   attrs={"T": types, "cond": cond_g, "body": body, "parallel_iterations": 10},
                   sources=loop_in)
    stacked = []
    for k, (t, shape) in enumerate(zip(scan_types, elements)):
        stack = g.add_op("TensorListStack", g.unique_name(f"{op.name}/scan_{k}_stack"), namespace=tf_ns,
                         inputs=["input_handle", "element_shape"], outputs=[("tensor", op.output_ports[n + k].dtype)],
                         attrs={"element_dtype": t, "num_elements": -1},
                         sources=[new.output_ports[3 + n + k], const(shape, f"scan_{k}_element_shape")])
        stacked.append(stack.output_ports[0])
    finals = list(new.output_ports)[3:3 + n]
    for k in unwrap:  # the Loop's output is the value
        get = g.add_op("OptionalGetElement", g.unique_name(f"{op.name}/v_{k}_value"), namespace=onnx_ns,
                       inputs=["input"], outputs=[("output", op.output_ports[k].dtype)], sources=[finals[k]])
        finals[k] = get.output_ports[0]
    name = op.name
    _carry_names(op, finals + stacked)
    _replace_op(g, op, new, finals + stacked)
    g.rename_op(new, name)


def _tf_function_attrs(body: Graph, onnx_ns: str | None) -> None:
    """A body for a TF function: its ops still ONNX ops (the graph says so until the table converted them); the
    ONNX graph's own attributes (name, value_info ...) go.  Its constants are typed by their values (ONNX's type
    inference leaves subgraph values untyped, and the table's rules read ranks)."""
    from amanda_onnx.typesystem import OnnxTypeSystem

    body.attrs = {}
    body.namespace = onnx_ns
    types = OnnxTypeSystem()
    for op in body:
        value = op.attrs.get("value")
        if op.type in ("Constant", "Initializer") and isinstance(value, np.ndarray) and len(op.output_ports) == 1:
            typed = types.make_tensor_type(value.dtype.name, tuple(value.shape))
            if typed is not None:
                op.output_ports[0].dtype = typed


def settle_tf_bodies(graph: Graph) -> int:
    """After ``onnx-to-tf``: the signatures of function bodies in TF types (``tensor(float)[?,4]`` ->
    ``float32[?,4]``), so the exporter can write them; returns how many ports changed."""
    changed = 0
    for g in list(_walk(graph))[1:]:
        if g.namespace is not None and g.namespace.startswith(ONNX_FAMILY) and all(
                op.namespace is not None and op.namespace.startswith(TF_FAMILY) for op in g):
            for op in g:  # converted whole: the body is the enclosing graph's namespace again
                op.namespace = None
            g.namespace = None
        ports = list(g.input_ports) + list(g.output_ports)
        for op in g:
            ports += list(op.input_ports) + list(op.output_ports)
        for p in ports:
            new = _onnx_to_tf_dtype(p.dtype)
            if new != p.dtype:
                p.dtype = new
                changed += 1
    return changed
