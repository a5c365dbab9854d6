"""Deep copy and structural comparison of graphs."""

from __future__ import annotations

__all__ = ["copy_graph", "diff_graphs", "values_equal", "copy_value"]

import copy
import math
from typing import Any

import numpy as np

from .graph import Graph, InputPort, Op, OutputPort
from .tensor import Tensor, is_tensor, tensors_equal


def copy_value(value: Any) -> Any:
    """Copy an attribute value: containers and graphs anew, tensors shared."""
    if isinstance(value, (str, int, float, bool, type(None), bytes)):
        return value
    if isinstance(value, (np.ndarray, Tensor)):
        return value
    if isinstance(value, Graph):
        return copy_graph(value)
    if isinstance(value, list):
        return [copy_value(v) for v in value]
    if isinstance(value, tuple):
        return tuple(copy_value(v) for v in value)
    if isinstance(value, dict):
        return {k: copy_value(v) for k, v in value.items()}
    return copy.deepcopy(value)


def copy_graph(graph: Graph) -> Graph:
    new = Graph(graph.namespace, {k: copy_value(v) for k, v in graph.attrs.items()})
    _copy_into(graph, new)
    return new


def _copy_into(graph: Graph, new: Graph) -> None:
    if graph._owner is None:
        for gi in graph._inputs:
            new._add_graph_input(gi.name, gi.dtype)
        for go in graph._outputs:
            new._add_graph_output(go.name, go.dtype)
    new._counters = dict(graph._counters)
    mapping: dict[int, Any] = {}
    for gi, ngi in zip(graph._inputs, new._inputs):
        mapping[id(gi)] = ngi
    for go, ngo in zip(graph._outputs, new._outputs):
        mapping[id(go)] = ngo
    ops: dict[Op, Op] = {}
    for op in graph._ops.values():
        o = new.add_op(op.type, op.name, attrs={k: copy_value(v) for k, v in op.attrs.items()},
                       namespace=op.namespace)
        o.provenance = op.provenance
        o.meta = {k: copy_value(v) for k, v in op.meta.items()}
        for ip in op._inputs:
            mapping[id(ip)] = o.add_input_port(ip.name, ip.dtype)
        for op_out in op._outputs:
            mapping[id(op_out)] = o.add_output_port(op_out.name, op_out.dtype)
        ops[op] = o
        if op._body is not None:
            body = Graph(op._body.namespace, {k: copy_value(v) for k, v in op._body.attrs.items()})
            o.set_body(body)
            for bp, nbp in zip(op._body._inputs, body._inputs):
                nbp.dtype = bp.dtype
            for bq, nbq in zip(op._body._outputs, body._outputs):
                nbq.dtype = bq.dtype
            _copy_into(op._body, body)
    for op, o in ops.items():
        for ip in op._inputs:
            if ip._source is not None:
                new.connect(mapping[id(ip._source)], mapping[id(ip)])
        for other in op._control_in:
            new.connect_control(ops[other], o)
    for go in graph._outputs:
        if go._source is not None:
            new.connect(mapping[id(go._source)], mapping[id(go)])


def values_equal(a: Any, b: Any) -> bool:
    """Equality for attribute values: tensors by content, NaN equal to NaN,
    graphs structurally, containers element-wise."""
    cls = a.__class__
    if cls is b.__class__ and (cls is str or cls is int or cls is bool):  # the common case, first
        return bool(a == b)
    if is_tensor(a) or is_tensor(b):
        return is_tensor(a) and is_tensor(b) and tensors_equal(a, b)
    if isinstance(a, Graph) or isinstance(b, Graph):
        return isinstance(a, Graph) and isinstance(b, Graph) and not diff_graphs(a, b)
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(values_equal(a[k], b[k]) for k in a)
    if type(a) is not type(b) and not (isinstance(a, str) and isinstance(b, str)):
        return False
    try:
        return bool(a == b)
    except Exception:
        return False


def _dt(port: InputPort | OutputPort) -> str | None:
    return None if port.dtype is None else str(port.dtype)


def _ports(ports: Any) -> list[tuple[str, str | None]]:
    return [(p.name, _dt(p)) for p in ports]


def diff_graphs(a: Graph, b: Graph, prefix: str = "") -> list[str]:
    out: list[str] = []
    at = f"{prefix}: " if prefix else ""
    if a.namespace != b.namespace:
        out.append(f"{at}namespace {a.namespace!r} != {b.namespace!r}")
    out.extend(_diff_attrs(a.attrs, b.attrs, f"{at}graph attr"))
    if _ports(a._inputs) != _ports(b._inputs):
        out.append(f"{at}graph inputs {_ports(a._inputs)} != {_ports(b._inputs)}")
    if _ports(a._outputs) != _ports(b._outputs):
        out.append(f"{at}graph outputs {_ports(a._outputs)} != {_ports(b._outputs)}")
    only_a = [n for n in a._ops if n not in b._ops]
    only_b = [n for n in b._ops if n not in a._ops]
    if only_a:
        out.append(f"{at}ops only in first: {only_a[:10]}{' ...' if len(only_a) > 10 else ''}")
    if only_b:
        out.append(f"{at}ops only in second: {only_b[:10]}{' ...' if len(only_b) > 10 else ''}")
    for name, x in a._ops.items():
        y = b._ops.get(name)
        if y is None:
            continue
        where = f"{at}op {name!r}"
        if x.type != y.type:
            out.append(f"{where}: type {x.type!r} != {y.type!r}")
        if x.namespace != y.namespace:
            out.append(f"{where}: namespace {x.namespace!r} != {y.namespace!r}")
        out.extend(_diff_attrs(x.attrs, y.attrs, f"{where}: attr"))
        out.extend(_diff_attrs(x.meta, y.meta, f"{where}: meta"))
        if _ports(x._inputs) != _ports(y._inputs):
            out.append(f"{where}: input ports {_ports(x._inputs)} != {_ports(y._inputs)}")
        if _ports(x._outputs) != _ports(y._outputs):
            out.append(f"{where}: output ports {_ports(x._outputs)} != {_ports(y._outputs)}")
        if (x._body is None) != (y._body is None):
            out.append(f"{where}: one has a body, the other not")
        elif x._body is not None and y._body is not None:
            out.extend(diff_graphs(x._body, y._body, f"{prefix}/{name}" if prefix else name))
    ea = {str(e) for e in a.edges()}
    eb = {str(e) for e in b.edges()}
    for e in sorted(ea - eb)[:20]:
        out.append(f"{at}edge only in first: {e}")
    for e in sorted(eb - ea)[:20]:
        out.append(f"{at}edge only in second: {e}")
    ca = {str(e) for e in a.control_edges()}
    cb = {str(e) for e in b.control_edges()}
    for e in sorted(ca ^ cb):
        out.append(f"{at}control edge only in {'first' if e in ca else 'second'}: {e}")
    return out


def _diff_attrs(x: dict[str, Any], y: dict[str, Any], label: str) -> list[str]:
    out = []
    for k in sorted(set(x) | set(y)):
        if k not in x or k not in y:
            out.append(f"{label} {k!r} only in {'first' if k in x else 'second'}")
        elif not values_equal(x[k], y[k]):
            out.append(f"{label} {k!r}: {x[k]!r} != {y[k]!r}"[:300])
    return out
