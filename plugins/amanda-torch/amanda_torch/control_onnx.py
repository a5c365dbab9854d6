"""Control flow between torch and ONNX: the structure of ``If`` and ``Loop``, as code around the tables.

torch's control-flow ops take every value their branches read as an input (``torch.cond``'s operands,
TorchScript's ``captured_<k>``); an ONNX ``If`` or ``Loop`` takes none, and its branches read values of the
enclosing graph by name (``OuterValue`` ops, ``docs/onnx.md``, "Subgraphs and outer scope"). A rule cannot say
that difference, so two graph passes do, while the tables convert the ops inside the branches as they convert
any op:

* :func:`onnx_control_to_torch` runs *before* ``onnx-to-torch``: each ONNX ``If`` becomes ``prim::If`` and each
  ``Loop`` without scan outputs ``prim::Loop``; an ``OuterValue`` becomes a captured input fed by the value of that
  name. The branches keep their ONNX ops (their graphs say the ONNX namespace), which the table then converts.
* :func:`torch_control_to_onnx` runs *after* ``torch-to-onnx``, when the branches' ops are ONNX ops and the values
  around them have ONNX producers: ``higher_order::cond`` and ``prim::If`` become ``If``,
  ``higher_order::while_loop`` and ``prim::Loop`` become ``Loop``; each branch input becomes an ``OuterValue`` of
  the outer value's ONNX name (recorded on its producer, so the exporter writes that name).

A control-flow op either pass cannot take (a ``Loop`` with scan outputs, an outer name no enclosing graph
produces) is left as it is and reported as unconverted, with the reason in the pass's summary.
"""

from __future__ import annotations

__all__ = ["onnx_control_to_torch", "torch_control_to_onnx", "ControlReport"]

from typing import Any, Iterator

import attrs

from amanda_core import Graph
from amanda_core.ir.graph import Op, OutputPort
from amanda_onnx.names import fresh_name, names_in_use, scope_names, value_name

ONNX_FAMILY = "amanda/onnx/"
TORCH_FAMILY = "amanda/pytorch/"
INT64_MAX = 2 ** 63 - 1


@attrs.define
class ControlReport:
    converted: dict[str, int] = attrs.field(factory=dict)
    left: list[str] = attrs.field(factory=list)

    def summary(self) -> str:
        done = ", ".join(f"{n} {t}" for t, n in sorted(self.converted.items())) or "no control flow"
        kept = f"; left: {'; '.join(self.left)}" if self.left else ""
        return f"{done} converted{kept}"


def _walk(graph: Graph, inherited: str | None) -> Iterator[tuple[Graph, str | None]]:
    yield graph, inherited
    for nested in graph.nested_graphs(inherited):
        yield nested.graph, nested.inherited


def _ns(op: Op, inherited: str | None) -> str | None:
    if op.namespace is not None:
        return op.namespace
    g = op.graph
    return (g.namespace if g is not None else None) or inherited


def _family_ns(graph: Graph, family: str) -> str | None:
    """The namespace of ``family`` the graph's ops are in (the table's target, for ops it pinned)."""
    if graph.namespace is not None and graph.namespace.startswith(family):
        return graph.namespace
    for g, _ in _walk(graph, None):
        if g.namespace is not None and g.namespace.startswith(family):
            return g.namespace
        for op in g:
            if op.namespace is not None and op.namespace.startswith(family):
                return op.namespace
    return None


# --------------------------------------------------------------------------- ONNX -> torch (before the table)


def onnx_control_to_torch(graph: Graph) -> ControlReport:
    """ONNX ``If``/``Loop`` as ``prim::If``/``prim::Loop`` whose blocks take the outer values they read as
    inputs; the blocks keep their ONNX ops for ``onnx-to-torch`` to convert."""
    from .schemas import installed_torch_version, namespace_version

    report = ControlReport()
    onnx_ns = graph.namespace if graph.namespace and graph.namespace.startswith(ONNX_FAMILY) else None
    version = installed_torch_version()
    if onnx_ns is None or version is None:
        return report
    torch_ns = TORCH_FAMILY + namespace_version(version)
    _to_torch(graph, onnx_ns, torch_ns, scope_names(graph), report)
    return report


def _to_torch(g: Graph, onnx_ns: str, torch_ns: str, names: dict[str, OutputPort], report: ControlReport) -> None:
    inner: dict[int, dict[str, OutputPort]] = {}  # id(block) -> ONNX names of the values its inputs stand for
    for op in list(g):
        if op.graph is not g or _ns(op, onnx_ns) != onnx_ns or op.type not in ("If", "Loop"):
            continue
        why = _if_to_torch(g, op, names, torch_ns, onnx_ns, inner) if op.type == "If" else \
            _loop_to_torch(g, op, names, torch_ns, onnx_ns, inner)
        if why:
            report.left.append(f"{op.type} {op.path}: {why}")
        else:
            report.converted[op.type] = report.converted.get(op.type, 0) + 1
    for op in list(g):  # nested control flow, now that the outer level's names are inputs of its blocks
        for value in list(op.attrs.values()):
            if isinstance(value, Graph):
                _to_torch(value, onnx_ns, torch_ns, {**scope_names(value), **inner.get(id(value), {})},
                          report)


def _outer_names(branches: list[Graph]) -> list[str]:
    """The outer names the branches read, in first-seen order."""
    seen: list[str] = []
    for b in branches:
        for op in b:
            if op.type == "OuterValue" and op.namespace is None:
                name = op.attrs.get("name")
                if isinstance(name, str) and name not in seen:
                    seen.append(name)
    return seen


def _capture(block: Graph, names: list[str], onnx_ns: str) -> dict[str, OutputPort]:
    """``OuterValue`` ops of ``block`` become its inputs ``captured_<k>``; returns name -> that input."""
    ports = {name: block.add_input_port(f"captured_{k}") for k, name in enumerate(names)}
    for op in list(block):
        if op.type == "OuterValue" and op.namespace is None:
            q = op.output_ports[0]
            port = ports[op.attrs["name"]]
            port.dtype = q.dtype
            block.replace_all_uses(q, port)
            block.remove_op(op)
    block.namespace = onnx_ns  # its ops are ONNX ops until the table converts them
    return ports


def _replace(g: Graph, op: Op) -> tuple[str, dict[str, Any], list[tuple[OutputPort, list[Any]]]]:
    """Remove ``op`` (its consumers remembered, to be fed by its replacement)."""
    outs = [(q, list(q.consumers)) for q in op.output_ports]
    name, meta = op.name, dict(op.meta)
    g.remove_op(op, rewire={q.name: None for q in op.output_ports})
    return name, meta, outs


def _if_to_torch(g: Graph, op: Op, names: dict[str, OutputPort], torch_ns: str, onnx_ns: str,
                 inner: dict[int, dict[str, OutputPort]]) -> str | None:
    then_b, else_b = op.attrs.get("then_branch"), op.attrs.get("else_branch")
    if not isinstance(then_b, Graph) or not isinstance(else_b, Graph):
        return "a branch is not a graph"
    outer = _outer_names([then_b, else_b])
    missing = [n for n in outer if n not in names]
    if missing:
        return f"no enclosing graph produces {', '.join(missing)}"
    if len(then_b.output_ports) != len(op.output_ports) or len(else_b.output_ports) != len(op.output_ports):
        return "its branches and outputs differ in number"
    cond = op.input_ports["cond"].source
    if cond is None:
        return "its condition is fed by nothing"
    for b in (then_b, else_b):
        inner[id(b)] = _capture(b, outer, onnx_ns)
        for i, go in enumerate(list(b.output_ports)):
            b.rename_output_port(go, f"outputs_{i}")
    name, meta, outs = _replace(g, op)
    cond = _scalar(g, cond, "aten::Bool.Tensor", f"{name}_cond", "bool", torch_ns)
    new = g.add_op("prim::If", name, namespace=torch_ns,
                   inputs=[("cond", cond.dtype)] + [(f"captured_{k}", names[n].dtype)
                                                                       for k, n in enumerate(outer)],
                   outputs=[(f"outputs_{i}", q.dtype) for i, (q, _) in enumerate(outs)],
                   attrs={"then_block": then_b, "else_block": else_b},
                   sources=[cond] + [names[n] for n in outer])
    new.meta = {k: v for k, v in meta.items() if k != "outputs"}
    _reconnect(g, new, outs, names)
    return None


def _loop_to_torch(g: Graph, op: Op, names: dict[str, OutputPort], torch_ns: str, onnx_ns: str,
                   inner: dict[int, dict[str, OutputPort]]) -> str | None:
    body = op.attrs.get("body")
    if not isinstance(body, Graph):
        return "its body is not a graph"
    carried_in = [p for p in op.input_ports if p.name.startswith("v_initial")]
    n = len(carried_in)
    if len(body.output_ports) > n + 1:
        return "it has scan outputs (torch's prim::Loop carries values only)"
    if len(body.input_ports) != n + 2 or len(body.output_ports) != n + 1:
        return "its body's ports do not fit its inputs"
    outer = _outer_names([body])
    missing = [m for m in outer if m not in names]
    if missing:
        return f"no enclosing graph produces {', '.join(missing)}"
    m_src, c_src = op.input_ports["M"].source, op.input_ports["cond"].source
    sources = [p.source for p in carried_in]
    # the body (iter_num, cond_in, v...) -> (cond_out, v...) becomes (iteration, carried_<i>..., captured_<k>...)
    # -> (condition, carried_<i>...)
    it_port, cond_in = body.input_ports[0], body.input_ports[1]
    known = {p.name: p for p in list(body.input_ports)[2:]}
    known.update(_capture(body, outer, onnx_ns))
    inner[id(body)] = known
    for i, p in enumerate(list(body.input_ports)[2:2 + n]):
        body.rename_input_port(p, f"carried_{i}")
    for i, go in enumerate(list(body.output_ports)):
        body.rename_output_port(go, "condition" if i == 0 else f"carried_{i - 1}")
    if cond_in.has_consumers():  # the body runs only while the condition holds: it reads true
        true = body.add_op("Constant", body.unique_name(f"{op.name}_cond_in"),
                           attrs={"value": _bool_array(True)}, outputs=[("output", "tensor(bool)[]")])
        body.replace_all_uses(cond_in, true.output_ports[0])
    body.remove_input_port(cond_in)
    readers = list(it_port.consumers)
    body.rename_input_port(it_port, "iteration")
    if readers:  # a Python int in torch; the ONNX ops read an int64 tensor
        # (typed as ONNX: the table's rules read that type, and the engine rewrites it in torch's after)
        as_tensor = body.add_op("prim::NumToTensor.Scalar", body.unique_name(f"{op.name}_iteration"),
                                namespace=torch_ns, inputs=[("a", None)], outputs=[("out0", "tensor(int64)[]")],
                                sources=[it_port])
        for c in readers:
            body.connect(as_tensor.output_ports[0], c, replace=True)
    name, meta, outs = _replace(g, op)
    if m_src is None:
        m_src = _torch_constant(g, f"{name}_max_trip_count", INT64_MAX, torch_ns)
    else:
        m_src = _scalar(g, m_src, "aten::Int.Tensor", f"{name}_max_trip_count", "int", torch_ns)
    if c_src is None:
        c_src = _torch_constant(g, f"{name}_start_condition", True, torch_ns)
    else:
        c_src = _scalar(g, c_src, "aten::Bool.Tensor", f"{name}_start_condition", "bool", torch_ns)
    new = g.add_op("prim::Loop", name, namespace=torch_ns,
                   inputs=[("max_trip_count", m_src.dtype), ("start_condition", c_src.dtype)]
                   + [(f"carried_{i}", s.dtype if s else None) for i, s in enumerate(sources)]
                   + [(f"captured_{k}", names[m].dtype) for k, m in enumerate(outer)],
                   outputs=[(f"carried_{i}", q.dtype) for i, (q, _) in enumerate(outs)],
                   attrs={"body": body}, sources=[m_src, c_src] + sources + [names[m] for m in outer])
    new.meta = {k: v for k, v in meta.items() if k != "outputs"}
    _reconnect(g, new, outs, names)
    return None


def _scalar(g: Graph, src: OutputPort, kind: str, name: str, dtype: str, torch_ns: str) -> OutputPort:
    """The Python scalar of a one-element tensor (``aten::Bool.Tensor``, ``aten::Int.Tensor``): what torch's
    control flow takes (the exporter traces ``Bool`` of a tensor into ``torch.cond``)."""
    op = g.add_op(kind, g.unique_name(name), namespace=torch_ns, inputs=[("a", src.dtype)],
                  outputs=[("out0", None)], sources=[src])  # (a Python scalar: the ONNX types cannot say it)
    return op.output_ports[0]


def _bool_array(v: bool) -> Any:
    import numpy as np

    return np.array(v, dtype=np.bool_)


def _torch_constant(g: Graph, name: str, value: Any, torch_ns: str) -> OutputPort:
    c = g.add_op("prim::Constant", g.unique_name(name), namespace=torch_ns, attrs={"value": value},
                 outputs=[("output", None)])
    return c.output_ports[0]


def _reconnect(g: Graph, new: Op, outs: list[tuple[OutputPort, list[Any]]],
               names: dict[str, OutputPort] | None = None) -> None:
    """The consumers of the old op's outputs read the new op's, in order; graph outputs too; and the ONNX names
    of the old outputs (which a later If or Loop may read) stand for the new op's."""
    for (old_q, consumers), new_q in zip(outs, new.output_ports):
        for c in consumers:
            g.connect(new_q, c, replace=True)
        if names is not None:
            for n, q in list(names.items()):
                if q is old_q:
                    names[n] = new_q


# --------------------------------------------------------------------------- torch -> ONNX (after the table)


def torch_control_to_onnx(graph: Graph) -> ControlReport:
    """``higher_order::cond``/``prim::If`` as ONNX ``If`` and ``higher_order::while_loop``/``prim::Loop`` as
    ``Loop``, after ``torch-to-onnx`` converted the ops around and inside them."""
    report = ControlReport()
    onnx_ns = _family_ns(graph, ONNX_FAMILY)
    if onnx_ns is None:
        return report
    taken = names_in_use(graph)
    types = _Types("torch", "onnx")
    _to_onnx(graph, graph.namespace, onnx_ns, taken, report, types)
    if report.converted and _settle(graph, onnx_ns):
        types.graph_ports(graph)  # the graph's own ports follow it into the ONNX family
    return report


TORCH_CONTROL = ("higher_order::cond", "prim::If", "higher_order::while_loop", "prim::Loop")
SCRIPT_NUMBERS = {"int": "tensor(int64)[]", "float": "tensor(double)[]", "bool": "tensor(bool)[]"}
"""TorchScript's Python numbers as ONNX values (``tables/torch_to_onnx_script.yaml``): 0-d int64, float64, bool."""


class _Types:
    """Port types moved between the families' type systems (``Float(2, N)`` <-> ``tensor(float)[2,N]``), as
    the engine moves those of the ops a table converts; what the target cannot say is dropped."""

    def __init__(self, src: str, dst: str) -> None:
        from amanda_core.plugin import registry

        systems = registry().namespaces.type_systems
        self.src, self.dst = systems.get(src), systems.get(dst)
        self.dst_family = dst

    def __call__(self, text: Any) -> Any:
        if text is None or self.dst is None:
            return None
        if self.dst_family == "onnx" and str(text) in SCRIPT_NUMBERS:
            return SCRIPT_NUMBERS[str(text)]  # a TorchScript number: the 0-d tensor the tables make of it
        try:
            if self.dst.tensor_type(text) is not None:
                return text
        except Exception:
            pass
        try:
            t = self.src.tensor_type(text) if self.src is not None else None
        except Exception:
            t = None
        return self.dst.make_tensor_type(*t) if t is not None else None

    def graph_ports(self, g: Graph) -> None:
        for p in list(g.input_ports) + list(g.output_ports):
            p.dtype = self(p.dtype)


def _to_onnx(g: Graph, inherited: str | None, onnx_ns: str, taken: set[str], report: ControlReport,
             types: _Types) -> None:
    for op in list(g.topological_order()):
        if op.graph is not g or op.type not in TORCH_CONTROL:
            continue
        ns = _ns(op, inherited)
        if ns is None or not ns.startswith(TORCH_FAMILY):
            continue
        if op.type in ("higher_order::cond", "prim::If"):
            why = _if_to_onnx(g, op, onnx_ns, taken, types)
        else:
            why = _loop_to_onnx(g, op, onnx_ns, taken, types)
        if why:
            report.left.append(f"{op.type} {op.path}: {why}")
        else:
            report.converted[op.type] = report.converted.get(op.type, 0) + 1
    for op in list(g):
        for value in list(op.attrs.values()):
            if isinstance(value, Graph):
                _to_onnx(value, inherited, onnx_ns, taken, report, types)


def _outer(block: Graph, sources: dict[str, OutputPort], taken: set[str], types: _Types,
           skip: tuple[str, ...] = ()) -> None:
    """Each input of ``block`` (but ``skip``) read through an ``OuterValue`` of the outer value's ONNX name."""
    for gi in list(block.input_ports):
        if gi.name in skip:
            continue
        src = sources.get(gi.name)
        if src is None:
            raise ValueError(f"input {gi.name!r} of a branch is fed by nothing outside")
        name = value_name(src, taken)
        if gi.has_consumers():
            ov = block.add_op("OuterValue", block.unique_name(f"outer_{name}"), attrs={"name": name},
                              outputs=[("output", types(src.dtype))])
            block.replace_all_uses(gi, ov.output_ports[0])
        block.remove_input_port(gi)


def _control_edges(g: Graph, new: Op, sources: list[OutputPort]) -> None:
    for src in sources:
        if src.op is not None and src.op.graph is g and src.op is not new and src.op not in new.control_inputs:
            g.connect_control(src.op, new)


def _if_to_onnx(g: Graph, op: Op, onnx_ns: str, taken: set[str], types: _Types) -> str | None:
    cond_key = "pred" if op.type == "higher_order::cond" else "cond"
    keys = ("true_graph", "false_graph") if op.type == "higher_order::cond" else ("then_block", "else_block")
    then_b, else_b = op.attrs.get(keys[0]), op.attrs.get(keys[1])
    if not isinstance(then_b, Graph) or not isinstance(else_b, Graph):
        return "a branch is not a graph"
    cond = op.input_ports[cond_key].source
    sources = {p.name: p.source for p in op.input_ports if p.name != cond_key and p.source is not None}
    for b, side in ((then_b, "then"), (else_b, "else")):
        _outer(b, sources, taken, types)  # type: ignore[arg-type]
        _own_output_names(b, f"{op.name}_{side}", taken)
        types.graph_ports(b)
        b.namespace = None
        b.attrs.setdefault("name", f"{op.name}_{side}")  # ONNX graphs have names
    name, meta, outs = _replace(g, op)
    new = g.add_op("If", name, namespace=onnx_ns, inputs=[("cond", types(cond.dtype) if cond else None)],
                   outputs=[(f"outputs_{i}", types(q.dtype)) for i, (q, _) in enumerate(outs)],
                   attrs={"then_branch": then_b, "else_branch": else_b}, sources=[cond])
    new.meta = {k: v for k, v in meta.items() if k in ("stack", "target", "role")}
    _reconnect(g, new, outs)
    _control_edges(g, new, list(sources.values()))  # type: ignore[arg-type]
    return None


def _own_output_names(block: Graph, prefix: str, taken: set[str]) -> None:
    """Branch outputs named apart from every other value (ONNX names are unique across a model's scopes)."""
    for i, go in enumerate(list(block.output_ports)):
        block.rename_output_port(go, fresh_name(f"{prefix}_{i}", taken))


def _loop_to_onnx(g: Graph, op: Op, onnx_ns: str, taken: set[str], types: _Types) -> str | None:
    import numpy as np

    if op.type != "prim::Loop":
        return "torch.export's while_loop has no ONNX rule yet (its condition is a graph of its own)"
    body = op.attrs.get("body")
    if not isinstance(body, Graph):
        return "its body is not a graph"
    m_src = op.input_ports["max_trip_count"].source
    c_src = op.input_ports["start_condition"].source
    carried = [p.source for p in op.input_ports if p.name.startswith("carried_")]
    captured = {p.name: p.source for p in op.input_ports if p.name.startswith("captured_")}
    n = len(carried)
    if any(s is None for s in carried) or c_src is None:
        return "a carried value or its start condition is fed by nothing"
    m_const = _constant_of(m_src)
    if m_const is None and not _runtime_int(m_src, onnx_ns):
        return "its trip count is computed by an op no rule converted"
    c_const = _constant_of(c_src)
    _outer(body, captured, taken, types,  # type: ignore[arg-type]
           skip=("iteration",) + tuple(f"carried_{i}" for i in range(n)))
    # body inputs (iteration, carried_<i>...) -> ONNX's (iter_num, cond_in, v...), named apart
    old = [body.input_ports["iteration"]] + [body.input_ports[f"carried_{i}"] for i in range(n)]
    fresh = []
    for label, dtype in [("iter", "tensor(int64)[]"), ("cond_in", "tensor(bool)[]")] + \
            [(f"carried_{i}", types(old[1 + i].dtype)) for i in range(n)]:
        fresh.append(body.add_input_port(fresh_name(f"{op.name}_{label}", taken), dtype))
    for o, f in zip(old, [fresh[0]] + fresh[2:]):
        body.replace_all_uses(o, f)
        body.remove_input_port(o)
    _own_output_names(body, f"{op.name}_out", taken)
    types.graph_ports(body)
    body.namespace = None
    body.attrs.setdefault("name", f"{op.name}_body")
    name, meta, outs = _replace(g, op)
    _drop_if_unread(g, m_src)
    if m_const is None:
        m_in: OutputPort | None = m_src  # computed at run time (range(n)): an int64 0-d tensor, as ONNX wants
    elif isinstance(m_const, bool) or int(m_const) >= INT64_MAX:
        m_in = None
    else:
        m_in = _onnx_constant(g, f"{name}_M", np.array(int(m_const), np.int64), onnx_ns)
    if c_const is not None:
        _drop_if_unread(g, c_src)
        c_in: OutputPort | None = _onnx_constant(g, f"{name}_cond", np.array(bool(c_const), np.bool_), onnx_ns)
    else:
        c_in = c_src
    new = g.add_op("Loop", name, namespace=onnx_ns,
                   inputs=[("M", "tensor(int64)[]"), ("cond", "tensor(bool)[]")]
                   + [(f"v_initial_{i}", types(s.dtype)) for i, s in enumerate(carried)],  # type: ignore
                   outputs=[(f"v_final_and_scan_outputs_{i}", types(q.dtype)) for i, (q, _) in enumerate(outs)],
                   attrs={"body": body}, sources=[m_in, c_in] + carried)
    new.meta = {k: v for k, v in meta.items() if k in ("stack", "target", "role")}
    _reconnect(g, new, outs)
    _control_edges(g, new, [s for s in captured.values() if s is not None])
    return None


def _runtime_int(src: OutputPort | None, onnx_ns: str) -> bool:
    """Whether ``src`` is a Python int computed at run time that is an ONNX value now (a 0-d int64 tensor,
    ``tables/torch_to_onnx_script.yaml``): made by an ONNX op, or an input of the graph or block."""
    if src is None:
        return False
    text = str(src.dtype) if src.dtype is not None else ""
    if src.op is None:
        return text in ("int", SCRIPT_NUMBERS["int"])
    ns = src.op.namespace or ""
    return (ns == onnx_ns or ns.startswith(ONNX_FAMILY)) and text == SCRIPT_NUMBERS["int"]


def _drop_if_unread(g: Graph, src: OutputPort | None) -> None:
    """A torch constant that fed only the replaced op goes with it."""
    if src is not None and src.op is not None and src.op.graph is g and src.op.type == "prim::Constant" \
            and not any(q.has_consumers() for q in src.op.output_ports):
        g.remove_op(src.op)


def _constant_of(src: OutputPort | None) -> Any:
    if src is None or src.op is None:
        return None
    op = src.op
    if op.type == "prim::Constant":
        return op.attrs.get("value")
    if op.type in ("Constant", "Initializer") and not op.attrs.get("graph_input"):
        v = op.attrs.get("value")
        try:
            return v.item() if getattr(v, "size", 0) == 1 else None
        except Exception:
            return None
    return None


def _onnx_constant(g: Graph, name: str, value: Any, onnx_ns: str) -> OutputPort:
    c = g.add_op("Constant", g.unique_name(name), namespace=onnx_ns, attrs={"value": value},
                 outputs=[("output", f"tensor({'bool' if value.dtype == bool else 'int64'})[]")])
    return c.output_ports[0]


def _settle(graph: Graph, onnx_ns: str) -> bool:
    """When every op of the graph and its branches is an ONNX op now, the graph says the ONNX namespace and its
    ops drop the namespace they were pinned to while it was mixed."""
    ops = [(g, op) for g, _ in _walk(graph, graph.namespace) for op in g]
    for g, op in ops:
        ns = op.namespace
        if ns is None:
            if g is graph and graph.namespace is not None and not graph.namespace.startswith(ONNX_FAMILY) \
                    and op.type not in ("Initializer", "OuterValue", "SparseInitializer"):
                return False
            continue
        if ns != onnx_ns and not ns.startswith(ONNX_FAMILY):
            return False
    graph.namespace = onnx_ns
    for _, op in ops:
        if op.namespace == onnx_ns:
            op.namespace = None
    return True
