"""The names the ONNX exporter writes for values, for code that must refer to a value by name before export.

ONNX refers to values by name, Amanda by port: a branch of an ``If`` or the body of a ``Loop`` reads a value of the
enclosing graph through an ``OuterValue`` op holding its ONNX name (docs/onnx.md, "Subgraphs and outer scope").
A pass that makes such branches (torch's or TF's control flow becoming ONNX's) must name the outer values the
way the exporter will: a graph input by its port name, an initializer by its own name, an ``OuterValue`` by the
name it holds, a node output by the name recorded on its producer (``meta["outputs"]``), which
:func:`value_name` records when there is none yet.
"""

from __future__ import annotations

__all__ = ["names_in_use", "fresh_name", "value_name", "scope_names"]

from amanda_core import Graph
from amanda_core.ir.graph import OutputPort

from .structural import INITIALIZER, OUTER_VALUE, SPARSE_INITIALIZER


def names_in_use(graph: Graph) -> set[str]:
    """Every name the graph and the graphs in it already use or will be exported with (ports, recorded node
    outputs, outer values, op names, which generated value names start from)."""
    taken: set[str] = set()
    for g in [graph] + [n.graph for n in graph.nested_graphs()]:
        taken.update(g.input_ports.names())
        taken.update(g.output_ports.names())
        for op in g:
            recorded = op.meta.get("outputs") if op.meta else None
            if recorded:
                taken.update(v for v in recorded.values() if v)
            if op.type == OUTER_VALUE:
                taken.add(str(op.attrs.get("name")))
            taken.add(op.name)
    return taken


def fresh_name(base: str, taken: set[str]) -> str:
    """``base``, else ``base_1``, ``base_2`` ...: the first not in ``taken`` (which it joins)."""
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


def value_name(q: OutputPort, taken: set[str]) -> str:
    """The ONNX name the exporter will write for value ``q``; for a node output with none recorded, a fresh one,
    recorded on its producer."""
    op = q.op
    if op is None:
        return q.name
    if op.type == OUTER_VALUE and (op.namespace is None or op.namespace.startswith("amanda/onnx/")):
        return str(op.attrs["name"])
    if op.type in (INITIALIZER, SPARSE_INITIALIZER) and (op.namespace is None or
                                                          op.namespace.startswith("amanda/onnx/")):
        return str(op.meta.get("name", op.name)) if op.meta else op.name
    recorded = dict(op.meta.get("outputs") or {}) if op.meta else {}
    name = recorded.get(q.name)
    if name:
        return str(name)
    name = fresh_name(f"{op.name}_{q.name}", taken)
    recorded[q.name] = name
    op.meta = {**op.meta, "outputs": recorded}
    return name


def scope_names(graph: Graph) -> dict[str, OutputPort]:
    """ONNX value name -> the port of ``graph`` producing it (graph inputs, recorded node output names,
    initializers): what a graph nested in it reads by name."""
    names: dict[str, OutputPort] = {}
    for gi in graph.input_ports:
        names[gi.name] = gi
    for op in graph:
        recorded = op.meta.get("outputs") if op.meta else None
        if recorded:
            for q in op.output_ports:
                n = recorded.get(q.name)
                if n:
                    names[n] = q
        if op.type in (INITIALIZER, SPARSE_INITIALIZER) and op.namespace is None:
            names[str(op.meta.get("name", op.name)) if op.meta else op.name] = op.output_ports[0]
    return names
