"""Read-only views of ops, ports and graphs, as mapping expressions see them.

Expressions must not change the graph they look at, and must not reach Python internals through it, so they get
these views instead of the IR objects: every field is public data, every way back to the IR object is private
(names starting with ``_`` are refused in expressions).

``port.dtype`` is the dtype parsed by the type system of the op's namespace (the torch type system turns
``Float(1, 784)`` into an object with ``scalarType()``), or the dtype string when no type system parses it.
"""

from __future__ import annotations

__all__ = ["OpView", "PortView", "GraphView", "DtypeParser", "view_value"]

from types import MappingProxyType
from typing import Any, Callable, Iterator, Mapping

from ..ir.graph import Graph, InputPort, Op, OutputPort, Port

DtypeParser = Callable[[Port], Any]
"""Turns a port's dtype string into the object its type system parses it into."""


def _no_parse(port: Port) -> Any:
    return port.dtype


def view_value(value: Any, parse: DtypeParser = _no_parse) -> Any:
    """A value as expressions see it: graphs as views, containers copied (so they cannot be changed)."""
    if isinstance(value, Graph):
        return GraphView(value, parse)
    if isinstance(value, list):
        return [view_value(v, parse) for v in value]
    if isinstance(value, dict):
        return {k: view_value(v, parse) for k, v in value.items()}
    return value


class PortView:
    """A port: ``name``, ``dtype``, ``index``, ``op`` (None for a graph's own port), ``source`` (input ports) and
    ``consumers`` (output ports)."""

    __slots__ = ("_port", "_parse")

    def __init__(self, port: Port, parse: DtypeParser = _no_parse) -> None:
        self._port = port
        self._parse = parse

    @property
    def name(self) -> str:
        return self._port.name

    @property
    def dtype(self) -> Any:
        return self._parse(self._port) if self._port.dtype is not None else None

    @property
    def dtype_text(self) -> str | None:
        """The dtype exactly as written in the graph."""
        return None if self._port.dtype is None else str(self._port.dtype)

    @property
    def is_input(self) -> bool:
        return isinstance(self._port, InputPort)

    @property
    def index(self) -> int:
        owner = self._port.owner
        if owner is None:
            return -1
        ports = owner.input_ports if isinstance(self._port, InputPort) else owner.output_ports
        return ports.index(self._port.name)  # type: ignore[arg-type]

    @property
    def op(self) -> OpView | None:
        op = self._port.op
        return OpView(op, self._parse) if op is not None else None

    @property
    def source(self) -> PortView | None:
        """For an input port: the output port feeding it (or None)."""
        if isinstance(self._port, InputPort) and self._port.source is not None:
            return PortView(self._port.source, self._parse)
        return None

    @property
    def producer(self) -> OpView | None:
        """For an input port: the op feeding it (None if unfed or fed by a graph input)."""
        src = self.source
        return src.op if src is not None else None

    @property
    def consumers(self) -> list[PortView]:
        if isinstance(self._port, OutputPort):
            return [PortView(c, self._parse) for c in self._port.consumers]
        return []

    @property
    def fed(self) -> bool:
        """For an input port: whether something feeds it."""
        return isinstance(self._port, InputPort) and self._port.source is not None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PortView) and other._port is self._port

    def __hash__(self) -> int:
        return id(self._port)

    def __repr__(self) -> str:
        return f"<port {self._port.qualified_name}>"


class _Ports(Mapping[Any, PortView]):
    """Ports by name or position (``op.input_ports["X"]``, ``op.input_ports[0]``)."""

    __slots__ = ("_ports", "_parse")

    def __init__(self, ports: Any, parse: DtypeParser) -> None:
        self._ports = ports
        self._parse = parse

    def __getitem__(self, key: Any) -> PortView:
        try:
            return PortView(self._ports[key], self._parse)
        except IndexError:
            raise KeyError(key) from None

    def __iter__(self) -> Iterator[Any]:
        return iter(self._ports.names())

    def __len__(self) -> int:
        return len(self._ports)

    def names(self) -> list[str]:
        return list(self._ports.names())

    def list(self) -> list[PortView]:
        return [PortView(p, self._parse) for p in self._ports]


class OpView:
    """An op: ``name``, ``type``, ``namespace``, ``attrs`` (read-only), ``meta``, ``input_ports``,
    ``output_ports``, ``inputs`` / ``outputs`` (port lists in order), ``predecessors``, ``successors``,
    ``body`` (a graph view or None)."""

    __slots__ = ("_op", "_parse")

    def __init__(self, op: Op, parse: DtypeParser = _no_parse) -> None:
        self._op = op
        self._parse = parse

    @property
    def name(self) -> str:
        return self._op.name

    @property
    def path(self) -> str:
        return self._op.path

    @property
    def type(self) -> str | None:
        return self._op.type

    @property
    def namespace(self) -> str | None:
        return self._op.effective_namespace

    @property
    def attrs(self) -> Mapping[str, Any]:
        return MappingProxyType({k: view_value(v, self._parse) for k, v in self._op.attrs.items()})

    @property
    def meta(self) -> Mapping[str, Any]:
        return MappingProxyType({k: view_value(v, self._parse) for k, v in self._op.meta.items()})

    def attr(self, name: str, default: Any = None) -> Any:
        return view_value(self._op.attrs.get(name, default), self._parse)

    @property
    def input_ports(self) -> _Ports:
        return _Ports(self._op.input_ports, self._parse)

    @property
    def output_ports(self) -> _Ports:
        return _Ports(self._op.output_ports, self._parse)

    @property
    def inputs(self) -> list[PortView]:
        return [PortView(p, self._parse) for p in self._op.input_ports]

    @property
    def outputs(self) -> list[PortView]:
        return [PortView(p, self._parse) for p in self._op.output_ports]

    @property
    def predecessors(self) -> list[OpView]:
        return [OpView(o, self._parse) for o in self._op.predecessors()]

    @property
    def successors(self) -> list[OpView]:
        return [OpView(o, self._parse) for o in self._op.successors()]

    @property
    def body(self) -> GraphView | None:
        return GraphView(self._op.body, self._parse) if self._op.body is not None else None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OpView) and other._op is self._op

    def __hash__(self) -> int:
        return id(self._op)

    def __repr__(self) -> str:
        return f"<op {self._op.name}: {self._op.type}>"


class GraphView:
    """A graph: ``namespace``, ``attrs``, ``ops`` (by name), ``input_ports``, ``output_ports``."""

    __slots__ = ("_graph", "_parse")

    def __init__(self, graph: Graph, parse: DtypeParser = _no_parse) -> None:
        self._graph = graph
        self._parse = parse

    @property
    def namespace(self) -> str | None:
        return self._graph.namespace

    @property
    def attrs(self) -> Mapping[str, Any]:
        return MappingProxyType({k: view_value(v, self._parse) for k, v in self._graph.attrs.items()})

    @property
    def ops(self) -> Mapping[str, OpView]:
        return MappingProxyType({n: OpView(o, self._parse) for n, o in self._graph.ops.items()})

    def op(self, name: str) -> OpView | None:
        o = self._graph.ops.get(name)
        return OpView(o, self._parse) if o is not None else None

    @property
    def input_ports(self) -> _Ports:
        return _Ports(self._graph.input_ports, self._parse)

    @property
    def output_ports(self) -> _Ports:
        return _Ports(self._graph.output_ports, self._parse)

    def __len__(self) -> int:
        return len(self._graph)

    def __repr__(self) -> str:
        return f"<graph {self._graph.namespace or ''} ({len(self._graph)} ops)>"
