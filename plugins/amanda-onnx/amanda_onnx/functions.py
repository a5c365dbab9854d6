"""Ops newer than opset 18 that ONNX defines by a function body, expanded into that body ahead of the opset chain.

``LinearAttention`` (opset 27) has no op in the backends and no exact way down the opset chain; ONNX defines it by a
function (context dependent: built for the node's attributes and input types), a ``Scan`` over the sequence of
ordinary ops.  :func:`expand_functions` is an ONNX -> ONNX pass that a backend runs before its table for the newest
opsets (``onnx-newest-to-torch``, ``onnx-newest-to-tf``), so before the opset chain, which then brings the body's ops
down to 18: onnx builds the function for the node, inlines it (``onnx.inliner``), and the resulting ops are imported
and spliced between the op's inputs and readers.  :func:`amanda_onnx.unroll.unroll_onnx` then unrolls the ``Scan``
when its length is known at conversion, and the backend's tables convert the rest.  An op whose inputs' types are
not known, or whose body's value names would collide with the graph's, is left as it is (and refused), with the
reason in the summary.
"""
from __future__ import annotations

__all__ = ["expand_functions"]

import copy

from amanda_core import Graph
from amanda_core.ir.graph import Op

from .dtypes import parse_dtype, type_proto_from_dtype
from .unroll import ONNX_FAMILY, _inline, _replace_outputs

EXPAND = ("LinearAttention",)


def expand_functions(graph: Graph) -> str:
    ns = graph.namespace or ""
    if not ns.startswith(ONNX_FAMILY):
        return "not an ONNX graph: nothing to do"
    try:
        opset = int(ns[len(ONNX_FAMILY):])
    except ValueError:
        return f"opset of {ns} unknown"
    done, left = 0, []
    for op in list(graph):
        if op.type in EXPAND and op.namespace is None:
            why = _expand(graph, op, opset)
            if why:
                left.append(f"{op.type} {op.name}: {why}")
            else:
                done += 1
    return f"{done} expanded into their function bodies" + (f"; left: {'; '.join(left)}" if left else "")


def _expand(g: Graph, op: Op, opset: int) -> str | None:
    import onnx
    import onnx.inliner

    from . import infer_types, load_model
    from .names import names_in_use, scope_names

    try:
        schema = onnx.defs.get_schema(op.type, opset, "")
    except onnx.defs.SchemaError:
        return "no schema at this opset"
    if not schema.has_context_dependent_function and not schema.has_function:
        return "no function body"
    ins = [(p.name, p.source) for p in op.input_ports]
    names = [f"in_{i}" if src is not None else "" for i, (_, src) in enumerate(ins)]
    types = []
    for (_, src), name in zip(ins, names):
        if src is None:
            continue
        t = parse_dtype(src.dtype) if src.dtype is not None else None
        if t is None or t.kind != "tensor" or t.shape is None:
            return "an input's type is not known"
        types.append(onnx.helper.make_value_info(name, type_proto_from_dtype(t)))
    while names and names[-1] == "":
        names.pop()
    outs = [f"out_{i}" for i in range(len(op.output_ports))]
    attrs = {k: v for k, v in op.attrs.items() if v is not None}
    node = onnx.helper.make_node(op.type, names, outs, **attrs)
    type_of = {vi.name: vi.type for vi in types}
    if schema.has_context_dependent_function:
        body = schema.get_context_dependent_function(
            node.SerializeToString(), [type_of[n].SerializeToString() if n else onnx.TypeProto().SerializeToString()
                                       for n in names])
        function = onnx.FunctionProto.FromString(body)
    else:
        function = copy.deepcopy(schema.function_body)
    function.domain, function.name = "amanda.expand", op.type
    del function.opset_import[:]
    function.opset_import.extend([onnx.helper.make_opsetid("", opset)])
    local = onnx.helper.make_node(op.type, names, outs, domain="amanda.expand", **attrs)
    model = onnx.helper.make_model(
        onnx.helper.make_graph([local], "expand", types, [onnx.helper.make_value_info(o, onnx.TypeProto())
                                                          for o in outs]),
        opset_imports=[onnx.helper.make_opsetid("", opset), onnx.helper.make_opsetid("amanda.expand", 1)],
        functions=[function])
    model = onnx.inliner.inline_local_functions(model)
    sub = load_model(model)
    infer_types(sub)
    taken = names_in_use(g)
    inner = scope_names(sub)
    clash = [n for n in inner if n in taken and n not in names]
    if clash:
        return f"its body's names {', '.join(clash[:3])} are taken"
    fed = dict(zip(names, [src for _, src in ins]))
    outs = _inline(g, sub, sub.topological_order(), [fed[gi.name] for gi in sub.input_ports], {}, op.name,
                   keep_names=True)
    for q, src in zip(op.output_ports, outs):
        if src.dtype is None:
            src.dtype = q.dtype
    _replace_outputs(g, op, {q.name: src for q, src in zip(op.output_ports, outs)})
    return None
