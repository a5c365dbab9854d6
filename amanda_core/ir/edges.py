"""The edge syntax ``op.port -> op.port``, read the same way by graph files and mapping tables.

An edge is two ends joined by ``->`` (written once); an end is an op name and a port name joined by a ``.``.
Op names may contain dots, so an end is split at its last dot unless the caller knows which ops and ports exist
(graph files do): then every split naming an existing port is a reading, one reading is taken, two are an
error (:func:`split_end`).  ``^control`` as a port on both ends is a control edge.  The rule is stated in
``docs/yaml-format.md`` (graphs) and ``docs/mapping-tables.md`` (tables).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ..errors import FormatError
from .graph import CONTROL

if TYPE_CHECKING:
    from .graph import Graph

ARROW = "->"

__all__ = ["ARROW", "CONTROL", "edge_text", "is_control", "split_edge", "split_end", "split_graph_end"]


def split_edge(text: object) -> tuple[str, str]:
    """The two ends of ``"a.y -> b.x"``, stripped; :class:`FormatError` (no location: the caller adds it) when the
    text is not a string with exactly one ``->``."""
    if not isinstance(text, str) or text.count(ARROW) != 1:
        raise FormatError(f"an edge is written 'op.port -> op.port', got {text!r}")
    left, right = text.split(ARROW)
    return left.strip(), right.strip()


def split_end(end: str, is_port: Callable[[str, str], bool] | None = None, edge: str | None = None
              ) -> tuple[str, str]:
    """``"op.port"`` -> ``("op", "port")``.

    Without ``is_port`` (or with at most one dot) the end is split at its last dot.  With ``is_port(op, port)``,
    which says whether a split names an existing port, every split it accepts is a reading: one reading is taken,
    none falls back to the last dot, more than one is a :class:`FormatError` naming them.  An end without a dot,
    or with an empty op or port, is a :class:`FormatError` (naming the whole ``edge`` when given).
    """
    if is_port is not None and end.count(".") > 1:
        readings = []
        for i in range(len(end) - 1, 0, -1):
            if end[i] == "." and is_port(end[:i], end[i + 1:]):
                readings.append((end[:i], end[i + 1:]))
        if len(readings) > 1:
            raise FormatError(f"edge end {end!r} can be read as "
                              + " or ".join(f"{o!r} port {p!r}" for o, p in readings) + "; rename an op or a port")
        if readings:
            return readings[0]
    op, dot, port = end.rpartition(".")
    if not dot or not op or not port:
        raise FormatError(f"an edge end is written 'op.port', got {end!r}" + (f" in {edge!r}" if edge else ""))
    return op, port


def is_control(src_port: str, dst_port: str, text: str) -> bool:
    """Whether an edge with these port names is a control edge (``^control`` on both ends); one ``^control`` end
    alone is a :class:`FormatError`."""
    if src_port == CONTROL or dst_port == CONTROL:
        if src_port != dst_port:
            raise FormatError(f"a control edge joins two '{CONTROL}' ports, got {text!r}")
        return True
    return False


def edge_text(src_op: str, src_port: str, dst_op: str, dst_port: str) -> str:
    """The edge written in the syntax: ``"a.y -> b.x"``."""
    return f"{src_op}.{src_port} {ARROW} {dst_op}.{dst_port}"


def split_graph_end(g: Graph, end: str, boundary: str, source: bool, edge: str | None = None) -> tuple[str, str]:
    """:func:`split_end` for an end of an edge of ``g``: a split is a reading when it names an op of ``g`` with
    such a port (``source``: an output port, else an input port; or ``^control``), or the graph itself
    (``boundary`` or ``graph``) with such a port (``source``: a graph input, which produces inside the graph, else
    a graph output)."""
    if end.count(".") <= 1:  # one way to read it (the common case): no look-ups
        return split_end(end, None, edge)

    def is_port(op_name: str, port: str) -> bool:
        op = g.ops.get(op_name)
        if op is not None and (port == CONTROL or port in (op.output_ports if source else op.input_ports)):
            return True
        return op_name in (boundary, "graph") and port in (g.input_ports if source else g.output_ports)

    return split_end(end, is_port, edge)
