"""Writing graph files: :class:`Graph` -> deterministic YAML text, with tensors over a size inline or in the
sidecar file beside it.  The format is described in :mod:`amanda_core.serialization.graph_yaml`."""

from __future__ import annotations

import os
from typing import Any, Iterator

import numpy as np

from ..errors import FormatError
from ..ir.bulk import bulk_build
from ..ir.edges import ARROW, CONTROL, edge_text, split_graph_end
from ..ir.graph import Graph, Op
from ..ir.tensor import Tensor, as_array, is_tensor
from .files import atomic_write_many
from .tensor_data import ALIGN, INLINE_LIMIT, dtype_text, inline_tensor, sidecar_path, write_chunks
from .value_tags import VALUE_TAGS, VALUE_TYPES, Flow, GraphDumper, Out
from .yamlio import dump_yaml

__all__ = ["dump_graph", "dump_values", "iter_tensors", "save_graph"]


class _Writer:
    def __init__(self, inline_limit: int | None, sidecar_name: str | None) -> None:
        self.inline_limit = inline_limit
        self.sidecar_name = sidecar_name
        self.chunks: list[tuple[int, Any]] = []  # (offset, array)
        self.size = 0
        self.seen: dict[int, int] = {}
        self.keep: list[Any] = []  # keep arrays alive so their ids stay unique

    def graph(self, g: Graph, boundary: str) -> dict[str, Any]:
        d: dict[str, Any] = {}
        if g.owner is None:
            if g.namespace is not None:
                d["namespace"] = g.namespace
            if g.attrs:
                d["attrs"] = self.attrs(g.attrs)
            if len(g.input_ports):
                d["input_ports"] = _ports_out(g.input_ports)
            if len(g.output_ports):
                d["output_ports"] = _ports_out(g.output_ports)
        names = set(g.ops)
        if boundary in names:
            if g.owner is not None and "graph" not in names:
                boundary = "graph"
            else:
                raise FormatError(f"cannot write {g._describe()}: an op inside it is named {boundary!r}, the name "
                                  "its edges use for the graph's own ports")
        ops: dict[str, Any] = {}
        for op in g.ops.values():
            ops[op.name] = self.op(op)
        if ops or g.owner is None:
            d["ops"] = ops
        edges = self.edges(g, boundary)
        if edges:
            d["edges"] = edges
        return d

    def op(self, op: Op) -> dict[str, Any]:
        if ARROW in op.name or not op.name:
            raise FormatError(f"op name {op.name!r} cannot be written in the edge syntax")
        d: dict[str, Any] = {}
        if op.type is not None or "type" in op.attrs:  # an attribute named type needs the op's own type: key
            d["type"] = op.type
        if op.namespace is not None:
            d["namespace"] = op.namespace
        if op.attrs:
            d["attrs"] = self.attrs(op.attrs)
        if op.meta:
            d["meta"] = self.attrs(op.meta)
        if len(op.input_ports):
            d["input_ports"] = _ports_out(op.input_ports)
        if len(op.output_ports):
            d["output_ports"] = _ports_out(op.output_ports)
        if op.body is not None:
            body = self.graph(op.body, op.name)
            d["ops"] = body.get("ops", {})
            if "edges" in body:
                d["edges"] = body["edges"]
        return d

    def edges(self, g: Graph, boundary: str) -> list[str]:
        def name(port: Any) -> str:
            owner = port.op
            return f"{owner.name if owner is not None else boundary}.{port.name}"

        out = []
        for e in g.edges():
            left, right = name(e.src), name(e.dst)
            for end, source in ((left, True), (right, False)):
                if end.count(".") > 1:
                    split_graph_end(g, end, boundary, source)  # raises when the names allow two readings
            out.append(f"{left} {ARROW} {right}")
        out.extend(edge_text(c.src.name, CONTROL, c.dst.name, CONTROL) for c in g.control_edges())
        return out

    def attrs(self, attrs: dict[str, Any]) -> dict[str, Any]:
        return {str(k): self.value(v) for k, v in attrs.items()}

    def value(self, v: Any) -> Any:
        if v is None or isinstance(v, (bool, int, float, str, bytes)):
            return v
        if is_tensor(v):
            return self.tensor(v)
        if isinstance(v, Graph):
            return Out("graph", self.graph(v, "graph"), flow=False)
        if isinstance(v, np.generic):
            return Out("scalar", {"dtype": v.dtype.name, "value": v.item()})
        if isinstance(v, list):
            items = [self.value(x) for x in v]
            simple = all(x is None or isinstance(x, (bool, int, float, str)) for x in items)
            return Flow(items) if simple else items
        if isinstance(v, tuple):
            return Out("tuple", [self.value(x) for x in v])
        if isinstance(v, dict):
            return {k: self.value(x) for k, x in v.items()}
        tag = VALUE_TAGS.get(type(v))
        if tag is not None:
            return Out(tag, self.value(VALUE_TYPES[tag][1](v)), flow=False)
        raise FormatError(f"cannot write an attribute value of type {type(v).__module__}.{type(v).__qualname__}: "
                          "no plugin registered a YAML form for it")

    def tensor(self, t: Any) -> Out:
        key = id(t)
        dtype_name = t.dtype if isinstance(t, Tensor) else dtype_text(t.dtype)
        shape = [int(d) for d in t.shape]
        if key in self.seen:
            return Out("tensor", {"dtype": dtype_name, "shape": Flow(shape), "offset": self.seen[key]})
        arr = as_array(t)
        if arr.dtype.kind == "O" or arr.dtype.kind in "SU" or self.sidecar_name is None or (
                self.inline_limit is not None and arr.nbytes <= self.inline_limit):
            return Out("tensor", inline_tensor(arr, dtype_name, shape))
        offset = (self.size + ALIGN - 1) // ALIGN * ALIGN
        self.chunks.append((offset, arr))
        self.size = offset + arr.nbytes
        self.seen[key] = offset
        self.keep.append(t)
        return Out("tensor", {"dtype": dtype_name, "shape": Flow(shape), "offset": offset})


def dump_values(data: Any) -> str:
    """YAML text of plain data whose leaves may be tensors (written inline), tuples, numpy scalars or plugin value
    types; the counterpart of :func:`load_values`."""
    return dump_yaml(_Writer(None, None).value(data), dumper=GraphDumper)


def _ports_out(ports: Any) -> list[Any]:
    out: list[Any] = []
    for p in ports:
        if ARROW in p.name or not p.name:
            raise FormatError(f"port name {p.qualified_name!r} cannot be written in the edge syntax")
        out.append(p.name if p.dtype is None else {p.name: str(p.dtype)})
    return out


def _document(graph: Graph, writer: _Writer) -> dict[str, Any]:
    body = writer.graph(graph, "graph")
    if writer.chunks:
        body["tensor_data"] = writer.sidecar_name
    return {"graph": body}


def dump_graph(graph: Graph) -> str:
    """The YAML text of ``graph`` with every tensor inline (for files with tensors, use :func:`save_graph`)."""
    writer = _Writer(None, None)
    with bulk_build():
        return dump_yaml(_document(graph, writer), dumper=GraphDumper)


def save_graph(graph: Graph, path: str | os.PathLike[str], *, inline_limit: int = INLINE_LIMIT) -> list[str]:
    """Write ``graph`` to ``path``, tensors over ``inline_limit`` bytes to the sidecar file beside it.

    Both files appear together or not at all; the same graph always gives the same bytes.  Returns the paths
    written.
    """
    target = os.fspath(path)
    side = sidecar_path(target)
    writer = _Writer(inline_limit, os.path.basename(side))
    with bulk_build():
        text = dump_yaml(_document(graph, writer), dumper=GraphDumper)
    paths = [target] + ([side] if writer.chunks else [])
    with atomic_write_many(paths, "wb") as handles:
        handles[0].write(text.encode("utf-8"))
        if writer.chunks:
            write_chunks(handles[1], writer.chunks)
    return paths


def iter_tensors(graph: Graph) -> Iterator[Any]:
    """Every tensor held by an attribute of ``graph`` or of a nested graph (each object once)."""
    seen: set[int] = set()

    def visit(v: Any) -> Iterator[Any]:
        if is_tensor(v):
            if id(v) not in seen:
                seen.add(id(v))
                yield v
        elif isinstance(v, (list, tuple)):
            for x in v:
                yield from visit(x)
        elif isinstance(v, dict):
            for x in v.values():
                yield from visit(x)

    for g in [graph] + [n.graph for n in graph.nested_graphs()]:
        for v in g.attrs.values():
            yield from visit(v)
        for op in g:
            for v in op.attrs.values():
                yield from visit(v)
