"""Ops a conversion leaves in another framework's family (``--allow-partial``), kept in the written model.

No table converts them, so they are still in their source namespace (``aten::special_bessel_j0.default`` in
``amanda/pytorch/2.13.0`` inside a graph now in ``amanda/onnx/18``).  An exporter that can hold such ops declares
``keep_foreign`` (:class:`amanda_core.plugin.types.Exporter`): a function that rewrites one op, in place, into
something its format says (ONNX: a node of a custom domain named after the op's framework; torch: a call that
raises an error naming the op when it runs).  :func:`keep_foreign_ops` finds the ops, writes their ports' value
types in the target's type system, records what each op was in ``meta["amanda.foreign"]`` and calls the hook.
The core knows nothing of any framework here: which ops are foreign is a question of namespace families only.
"""

from __future__ import annotations

__all__ = ["FOREIGN_KEY", "ForeignOp", "foreign_ops", "keep_foreign_ops"]

from typing import Any, Callable

import attrs

from .errors import AmandaError, NamespaceError
from .ir.graph import Graph, Op
from .mapping.engine import Converter, graphs_in, op_namespace
from .namespace.names import is_within, parse_namespace

FOREIGN_KEY = "amanda.foreign"
"""``op.meta`` key of a kept op: ``{"namespace": ..., "type": ..., "name": ...}``, what it was before."""


@attrs.frozen
class ForeignOp:
    """One op kept as it was: its path in the graph, the namespace and type it has in its own framework."""

    path: str
    namespace: str
    type: str

    @property
    def family(self) -> str:
        """The op's namespace family (``amanda/pytorch``)."""
        try:
            return parse_namespace(self.namespace).family
        except NamespaceError:
            return self.namespace

    def __str__(self) -> str:
        return f"{self.path} ({self.type}, {self.namespace})"


def foreign_ops(graph: Graph, target: str) -> list[tuple[Op, str]]:
    """Each op of ``graph`` (nested graphs too) whose namespace lies outside ``target``'s family, with that
    namespace; in the order of the graph."""
    family = parse_namespace(target).family
    out = []
    for g, inherited in graphs_in(graph, None):
        for op in g:
            ns = op_namespace(op, inherited)
            if ns is not None and not is_within(ns, family):
                out.append((op, ns))
    return out


def keep_foreign_ops(graph: Graph, target: str, registry: Any, keep: Callable[[Op, ForeignOp], Any]
                     ) -> list[ForeignOp]:
    """Hand each op of ``graph`` outside ``target``'s family to ``keep(op, ForeignOp)``, which rewrites it in
    place into an op of the target's family (an exporter's ``keep_foreign``).  Before that, each port's value
    type is written in the target's type system where both systems can say it (else None), and the op's
    ``meta["amanda.foreign"]`` records what it was.  ``registry``: the namespace registry (schemas, type
    systems).  Returns the ops kept; a hook that fails raises AmandaError naming the op."""
    found = foreign_ops(graph, target)
    if not found:
        return []
    converter = Converter(registry)
    systems = registry.type_systems
    dst_name = converter._namespace_dtype_system(target)
    dst_ts = systems.get(dst_name) if dst_name else None
    family = parse_namespace(target).family
    # a graph left in the source family moves with its ops; its ports may still be typed in the source's system
    first_name = converter._namespace_dtype_system(found[0][1])
    first_ts = systems.get(first_name) if first_name else None
    for g, _inherited in list(graphs_in(graph, None)):
        src_ts = first_ts
        if g.namespace is not None and not is_within(g.namespace, family):
            src_name = converter._namespace_dtype_system(g.namespace)
            src_ts = systems.get(src_name) if src_name else first_ts
            g.namespace = target
        if dst_ts is not None and src_ts is not dst_ts:
            for gp in list(g.input_ports) + list(g.output_ports):
                gp.dtype = _translate(gp.dtype, src_ts, dst_ts)
    kept = []
    for op, ns in found:
        info = ForeignOp(op.path, ns, op.type or "")
        src_name = converter._namespace_dtype_system(ns)
        src_ts = systems.get(src_name) if src_name else None
        if dst_ts is not None and src_ts is not dst_ts:
            for p in list(op.input_ports) + list(op.output_ports):
                p.dtype = _translate(p.dtype, src_ts, dst_ts)
        op.meta = {**op.meta, FOREIGN_KEY: {"namespace": ns, "type": info.type, "name": op.name}}
        try:
            keep(op, info)
        except AmandaError:
            raise
        except Exception as e:  # a plugin's hook failing is a bug there; say which op it failed on
            raise AmandaError(f"op {info}: could not be kept unconverted: {type(e).__name__}: {e}") from e
        kept.append(info)
    return kept


def _translate(text: Any, src_ts: Any, dst_ts: Any) -> Any:
    if text is None or not isinstance(text, str):
        return text
    if dst_ts.tensor_type(text) is not None:
        return text
    t = src_ts.tensor_type(text) if src_ts is not None else None
    return dst_ts.make_tensor_type(*t) if t is not None else None
