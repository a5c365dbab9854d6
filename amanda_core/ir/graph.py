"""The graph abstraction: ops, named ports, edges, control edges, subgraphs.

A graph prints like this (``print(graph)``)::

    graph namespace=amanda/pytorch/1.4.0 (in0: Float(1, 784)) -> (out0)
      param: prim::Param() -> (out0: Float(100, 784))
      t: aten::t(in0=param.out0) -> (out0: Float(784, 100))
      matmul: aten::matmul(in0=graph.in0, in1=t.out0) -> (out0: Float(1, 100))
      relu: aten::relu(in0=matmul.out0) -> (out0: Float(1, 100))
      return out0=relu.out0

Invariants, kept by every mutating method:

* Op names are unique within a graph; port names are unique within the input
  ports (and within the output ports) of one op or graph.
* An input port is fed by at most one data edge (:attr:`InputPort.source`);
  an output port feeds any number (:attr:`OutputPort.consumers`).  Both ends
  of an edge are kept in step, so producer and consumers are O(1) look-ups.
* Both ends of an edge belong to the same graph.  A graph's own input ports
  *produce* values inside it and its output ports *consume* them, so they are
  :class:`GraphInput` (an :class:`OutputPort`) and :class:`GraphOutput` (an
  :class:`InputPort`).
* Control edges (``a.^control -> b.^control``) run between ops of one graph
  and are stored apart from data edges.
* An op may contain a graph (:attr:`Op.body`).  The body's input and output
  ports carry the same names as the op's, and are kept in step with them.
* Iteration is deterministic: ops in insertion order, ports in declaration
  order, consumers in connection order.
"""

from __future__ import annotations

__all__ = [
    "CONTROL",
    "Port",
    "InputPort",
    "OutputPort",
    "GraphInput",
    "GraphOutput",
    "PortList",
    "Edge",
    "ControlEdge",
    "Op",
    "Graph",
    "default_op_name",
    "NestedGraph",
]

import difflib
import re
from operator import attrgetter
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple, Sequence, TypeVar, overload

from ..errors import GraphCycleError, GraphError

CONTROL = "^control"
"""Name of the built-in control port every op has (``op.^control``)."""

_NAME_TAIL = re.compile(r"[^A-Za-z0-9_]+")


def default_op_name(op_type: str | None) -> str:
    """The base of an automatic op name: ``aten::t`` -> ``t``, ``prim::Param`` -> ``param``."""
    if not op_type:
        return "op"
    base = op_type.rsplit("::", 1)[-1].rsplit("/", 1)[-1].rsplit(".", 1)[-1]
    base = _NAME_TAIL.sub("_", base).strip("_").lower()
    return base or "op"


# --------------------------------------------------------------------------- ports


class Port:
    """A named slot of an op or graph through which a value flows."""

    __slots__ = ("_name", "_dtype", "_owner")

    def __init__(self, name: str, dtype: Any = None, owner: Op | Graph | None = None) -> None:
        self._name = name
        self._dtype = dtype
        self._owner = owner

    dtype = property(attrgetter("_dtype"), doc="The port's type (a type system's text, or None).")

    @dtype.setter  # type: ignore[no-redef]  # a property made with attrgetter, then given a setter
    def dtype(self, value: Any) -> None:
        owner = self._owner
        g = owner._graph if owner.__class__ is Op else owner  # type: ignore[union-attr]
        if g.__class__ is Graph:
            if g._journal is not None:
                g._journal.append((setattr, self, "_dtype", self._dtype))
            g._version += 1
        self._dtype = value

    @property
    def name(self) -> str:
        return self._name

    @property
    def owner(self) -> Op | Graph | None:
        """The op or graph this port belongs to."""
        return self._owner

    @property
    def op(self) -> Op | None:
        """The op this port belongs to, or None for a graph's own port."""
        return self._owner if isinstance(self._owner, Op) else None

    @property
    def graph(self) -> Graph | None:
        """The graph in which this port's edges live."""
        owner = self._owner
        if isinstance(owner, Op):
            return owner._graph
        return owner

    @property
    def qualified_name(self) -> str:
        """``op.port`` for an op's port, ``graph.port`` for a graph's port."""
        owner = self._owner
        if isinstance(owner, Op):
            return f"{owner.name}.{self._name}"
        if owner is not None and owner._owner is not None:  # a body's port, named after its op
            return f"{owner._owner.name}.{self._name}"
        return f"graph.{self._name}"

    def __repr__(self) -> str:
        dtype = f": {self.dtype}" if self.dtype is not None else ""
        return f"<{type(self).__name__} {self.qualified_name}{dtype}>"


class InputPort(Port):
    """A port that consumes a value; fed by at most one data edge."""

    __slots__ = ("_source",)

    def __init__(self, name: str, dtype: Any = None, owner: Op | Graph | None = None) -> None:
        self._name = name
        self._dtype = dtype
        self._owner = owner
        self._source: OutputPort | None = None

    @property
    def source(self) -> OutputPort | None:
        """The output port feeding this one, or None."""
        return self._source

    producer = source


class OutputPort(Port):
    """A port that produces a value; feeds any number of input ports."""

    __slots__ = ("_consumers",)

    def __init__(self, name: str, dtype: Any = None, owner: Op | Graph | None = None) -> None:
        self._name = name
        self._dtype = dtype
        self._owner = owner
        self._consumers: dict[InputPort, None] = {}

    @property
    def consumers(self) -> tuple[InputPort, ...]:
        """The input ports this port feeds, in connection order."""
        return tuple(self._consumers)

    def has_consumers(self) -> bool:
        return bool(self._consumers)


class GraphInput(OutputPort):
    """A graph's input port: consumes from outside, *produces* inside the graph."""

    __slots__ = ()


class GraphOutput(InputPort):
    """A graph's output port: produces outside, *consumes* inside the graph."""

    __slots__ = ()


P = TypeVar("P", bound=Port)


class PortList(list[P]):
    """Ordered ports, addressable by position or by name.

    A read-only list: iterating, ``len`` and indexing by position cost what they cost on a list; indexing by a
    string looks the port up by name.  Ports are added and removed only through their op or graph
    (``add_input_port``, ``remove_output_port`` ...); the list's own mutating methods refuse.

    Most ops have a handful of ports, so names are looked up by scanning the list; a list that grows past
    ``_INDEXED`` ports (a variadic ``Concat``, say) keeps a dict by name instead.  This keeps a graph of many
    small ops lighter and quicker to build."""

    __slots__ = ("_by_name",)
    _INDEXED = 8

    def __init__(self, ports: Iterable[P] = ()) -> None:
        list.__init__(self, ports)
        self._by_name: dict[str, P] | None = None

    def _find(self, name: str) -> P | None:
        if self._by_name is not None:
            return self._by_name.get(name)
        for p in self:
            if p._name == name:
                return p
        return None

    @overload  # type: ignore[override]
    def __getitem__(self, key: int) -> P: ...
    @overload
    def __getitem__(self, key: str) -> P: ...
    def __getitem__(self, key: int | str) -> P:
        if isinstance(key, str):
            p = self._find(key)
            if p is None:
                names = ", ".join(self.names()) or "none"
                raise KeyError(f"no port {key!r} (ports: {names})")
            return p
        return list.__getitem__(self, key)  # type: ignore[no-any-return]

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            return self._find(key) is not None
        return isinstance(key, Port) and self._find(key._name) is key

    # identity, as for any other IR object: two ops' empty port lists are not "equal"
    __eq__ = object.__eq__  # type: ignore[assignment]
    __ne__ = object.__ne__  # type: ignore[assignment]
    __hash__ = object.__hash__  # type: ignore[assignment]

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a PortList is read-only: add, remove and rename ports through their op or graph")

    append = extend = insert = remove = pop = clear = sort = reverse = _refuse  # type: ignore[assignment]
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse  # type: ignore[assignment]

    def copy(self) -> list[P]:  # type: ignore[override]
        """The ports as a plain list."""
        return list(self)

    def __reduce__(self) -> Any:  # pickling and copying: rebuilt whole, not appended to item by item
        return (_rebuilt_port_list, (list(self), self._by_name))

    def get(self, name: str, default: P | None = None) -> P | None:
        p = self._find(name)
        return default if p is None else p

    def names(self) -> list[str]:
        return [p._name for p in self]

    def sources(self) -> list[OutputPort | None]:
        """For input ports: the port feeding each one (None where unfed), in order."""
        return [p._source for p in self]  # type: ignore[attr-defined]

    def index(self, port: P | str, *args: Any) -> int:  # type: ignore[override]
        name = port if isinstance(port, str) else port.name
        for i, p in enumerate(self):
            if p._name == name:
                return i
        raise KeyError(name)

    def _has_duplicates(self) -> bool:
        return len(self) > 1 and len({p._name for p in self}) != len(self)

    def _append(self, port: P, index: int | None = None) -> None:
        name = port._name
        if self._find(name) is not None:
            raise GraphError(f"duplicate port name {name!r}")
        if index is None:
            list.append(self, port)
        else:
            list.insert(self, index, port)
        if self._by_name is not None:
            self._by_name[name] = port
        elif len(self) > self._INDEXED:
            self._by_name = {p._name: p for p in self}

    def _remove(self, port: P) -> None:
        for i, p in enumerate(self):  # by identity: ports have no notion of equality
            if p is port:
                list.__delitem__(self, i)
                break
        else:
            raise ValueError(f"{port!r} is not in this port list")
        if self._by_name is not None:
            del self._by_name[port._name]

    def _rename(self, port: P, new: str) -> None:
        if self._find(new) is not None:
            raise GraphError(f"duplicate port name {new!r}")
        if self._by_name is not None:
            del self._by_name[port._name]
            self._by_name[new] = port
        port._name = new

    def __repr__(self) -> str:
        return f"PortList({self.names()})"


def _rebuilt_port_list(ports: list[Any], by_name: dict[str, Any] | None) -> PortList[Any]:
    made: PortList[Any] = PortList(ports)
    made._by_name = by_name
    return made


class Edge(NamedTuple):
    """A data edge from an output port to an input port."""

    src: OutputPort
    dst: InputPort

    def __str__(self) -> str:
        return f"{self.src.qualified_name} -> {self.dst.qualified_name}"


class ControlEdge(NamedTuple):
    """A control edge: ``src`` runs before ``dst``."""

    src: Op
    dst: Op

    def __str__(self) -> str:
        return f"{self.src.name}.{CONTROL} -> {self.dst.name}.{CONTROL}"


# --------------------------------------------------------------------------- op


class Op:
    """A computation that consumes values through input ports and produces values
    through output ports.  Create ops with :meth:`Graph.add_op`.

    ``Op(type, name, ...)`` and ``Graph.add_op(type, name, ...)`` take their arguments in the same order: the
    op's type first, then its name (docs/architecture.md, "The graph")."""

    __slots__ = (
        "_name",
        "_type",
        "_attrs",
        "_namespace",
        "_inputs",
        "_outputs",
        "_graph",
        "_body",
        "_control_in",
        "_control_out",
        "_provenance",
        "_meta",
        "__weakref__",
    )

    def __init__(self, type: str | None, name: str, attrs: dict[str, Any] | None = None,
                 namespace: str | None = None, *, inputs: Iterable[str | tuple[str, Any]] | int = (),
                 outputs: Iterable[str | tuple[str, Any]] | int = ()) -> None:
        self._name = name
        self._type = type
        self._attrs: dict[str, Any] = dict(attrs) if attrs else {}
        self._namespace = namespace
        # ports as Graph.add_op takes them: names, (name, dtype) pairs or a count
        self._inputs: PortList[InputPort] = _new_ports(self, InputPort, "in", inputs)
        self._outputs: PortList[OutputPort] = _new_ports(self, OutputPort, "out", outputs)
        self._graph: Graph | None = None
        self._body: Graph | None = None
        # control edges, in insertion order; an empty tuple until the first one (most ops never have any)
        self._control_in: dict[Op, None] | tuple[()] = ()
        self._control_out: dict[Op, None] | tuple[()] = ()
        self._provenance: tuple[str, str] | None = None
        self._meta: dict[str, Any] = {}

    # -- fields: read at slot speed; set through the IR, so the graph's version (and an open
    # :meth:`Graph.atomic` block) knows.  Change attributes by assigning a new dict or with :meth:`set_attr`.
    type = property(attrgetter("_type"), doc="The op's type in its namespace (``aten::matmul``, ``Conv``).")
    attrs = property(attrgetter("_attrs"), doc="Attribute values by name (replace with a new dict or set_attr).")
    namespace = property(attrgetter("_namespace"),
                         doc="Namespace of this op when it differs from its graph's (mid-conversion).")
    provenance = property(attrgetter("_provenance"),
                          doc="``(table, rule)`` of the mapping rule that created this op, if any.")
    meta = property(attrgetter("_meta"), doc="Annotations that are not attributes of the op's type (doc strings, "
                    "a framework's value names, source locations): kept, copied, compared and written like "
                    "attributes, but never validated against a schema.")

    def _set(self, slot: str, value: Any) -> None:
        g = self._graph
        if g is not None:
            if g._journal is not None:
                g._journal.append((setattr, self, slot, getattr(self, slot)))
            g._version += 1
        setattr(self, slot, value)

    @type.setter  # type: ignore[no-redef]  # a property made with attrgetter, then given a setter
    def type(self, value: str | None) -> None:
        self._set("_type", value)

    @attrs.setter  # type: ignore[no-redef]  # a property made with attrgetter, then given a setter
    def attrs(self, value: dict[str, Any]) -> None:
        self._set("_attrs", value)

    @namespace.setter  # type: ignore[no-redef]  # a property made with attrgetter, then given a setter
    def namespace(self, value: str | None) -> None:
        self._set("_namespace", value)

    @provenance.setter  # type: ignore[no-redef]  # a property made with attrgetter, then given a setter
    def provenance(self, value: tuple[str, str] | None) -> None:
        self._set("_provenance", value)

    @meta.setter  # type: ignore[no-redef]  # a property made with attrgetter, then given a setter
    def meta(self, value: dict[str, Any]) -> None:
        self._set("_meta", value)

    def retarget(self, type: str | None, attrs: dict[str, Any], namespace: str | None,
                 provenance: tuple[str, str] | None) -> None:
        """Set the type, attributes, namespace and provenance together, as a rewrite moving an op to another
        namespace does: one change (one undo record in an open :meth:`Graph.atomic` block, one step of the
        graph's version) instead of four."""
        g = self._graph
        if g is not None:
            if g._journal is not None:
                g._journal.append((_restore_fields, self, self._type, self._attrs, self._namespace,
                                   self._provenance))
            g._version += 1
        self._type = type
        self._attrs = attrs
        self._namespace = namespace
        self._provenance = provenance

    def set_attr(self, name: str, value: Any) -> None:
        """Set one attribute (the graph's version moves on)."""
        attrs = dict(self._attrs)
        attrs[name] = value
        self._set("_attrs", attrs)

    def del_attr(self, name: str) -> None:
        """Remove one attribute, if present."""
        if name in self._attrs:
            self._set("_attrs", {k: v for k, v in self._attrs.items() if k != name})

    def _log(self, undo: Callable[..., Any], *args: Any) -> None:
        """Record a change for an open :meth:`Graph.atomic` block, and move the graph's version on."""
        g = self._graph
        if g is not None:
            if g._journal is not None:
                g._journal.append((undo, *args))
            g._version += 1

    # -- identity
    @property
    def name(self) -> str:
        return self._name

    @property
    def graph(self) -> Graph | None:
        """The graph this op is in."""
        return self._graph

    @property
    def path(self) -> str:
        """The op's name prefixed by the names of the ops whose bodies contain it."""
        parts = [self._name]
        g = self._graph
        while g is not None and g._owner is not None:
            parts.append(g._owner._name)
            g = g._owner._graph
        return "/".join(reversed(parts)) if len(parts) > 1 else self._name

    @property
    def effective_namespace(self) -> str | None:
        """This op's namespace, or else that of the nearest enclosing graph."""
        if self.namespace is not None:
            return self.namespace
        g = self._graph
        while g is not None:
            if g.namespace is not None:
                return g.namespace
            g = g._owner._graph if g._owner is not None else None
        return None

    # -- ports
    @property
    def input_ports(self) -> PortList[InputPort]:
        return self._inputs

    @property
    def output_ports(self) -> PortList[OutputPort]:
        return self._outputs

    def add_input_port(self, name: str | None = None, dtype: Any = None, *, index: int | None = None) -> InputPort:
        """Add an input port; an anonymous one is named ``in<position>``."""
        name = name if name is not None else _free_port_name("in", self._inputs)
        port = InputPort(name, dtype, self)
        self._inputs._append(port, index)
        if self._body is not None:
            self._body._add_graph_input(name, dtype, index)
        if self._graph is not None:
            self._log(_unadd_port, self, port, "in")
        return port

    def add_output_port(self, name: str | None = None, dtype: Any = None, *, index: int | None = None) -> OutputPort:
        """Add an output port; an anonymous one is named ``out<position>``."""
        name = name if name is not None else _free_port_name("out", self._outputs)
        port = OutputPort(name, dtype, self)
        self._outputs._append(port, index)
        if self._body is not None:
            self._body._add_graph_output(name, dtype, index)
        if self._graph is not None:
            self._log(_unadd_port, self, port, "out")
        return port

    def remove_input_port(self, port: InputPort | str) -> None:
        """Remove an input port; it must not be fed (disconnect it first)."""
        p = self._inputs[port] if isinstance(port, str) else port
        if p._source is not None:
            raise GraphError(f"input port {p.qualified_name} is fed by {p._source.qualified_name}; disconnect it first")
        index = self._inputs.index(p)
        inner = None
        if self._body is not None:
            inner = self._body._inputs[p.name]
            if inner._consumers:
                raise GraphError(f"input port {p.qualified_name} still feeds {_names(inner._consumers)} "
                                 "inside the op's body")
            self._body._inputs._remove(inner)
            self._body._touch()
        self._inputs._remove(p)
        self._log(_unremove_port, self, p, "in", index, inner)

    def remove_output_port(self, port: OutputPort | str) -> None:
        """Remove an output port; it must have no consumers."""
        p = self._outputs[port] if isinstance(port, str) else port
        if p._consumers:
            raise GraphError(f"output port {p.qualified_name} still feeds {_names(p._consumers)}")
        index = self._outputs.index(p)
        inner_out = None
        if self._body is not None:
            inner_out = self._body._outputs[p.name]
            if inner_out._source is not None:
                if self._graph is not None and self._graph._journal is not None:
                    self._graph._journal.append((_reconnect, inner_out, inner_out._source))
                self._body.disconnect(inner_out)
            self._body._outputs._remove(inner_out)
        self._outputs._remove(p)
        self._log(_unremove_port, self, p, "out", index, inner_out)

    def rename_input_port(self, port: InputPort | str, new: str) -> None:
        p = self._inputs[port] if isinstance(port, str) else port
        old = p._name
        if self._body is not None:
            self._body._inputs._rename(self._body._inputs[p.name], new)
        self._inputs._rename(p, new)
        self._log(Op.rename_input_port, self, p, old)

    def rename_output_port(self, port: OutputPort | str, new: str) -> None:
        p = self._outputs[port] if isinstance(port, str) else port
        old = p._name
        if self._body is not None:
            self._body._outputs._rename(self._body._outputs[p.name], new)
        self._outputs._rename(p, new)
        self._log(Op.rename_output_port, self, p, old)

    # -- control
    @property
    def control_inputs(self) -> tuple[Op, ...]:
        """Ops that must run before this one (sources of control edges into it)."""
        return tuple(self._control_in)

    @property
    def control_outputs(self) -> tuple[Op, ...]:
        return tuple(self._control_out)

    def has_control_inputs(self) -> bool:
        """Whether a control edge comes into this op (cheaper than building :attr:`control_inputs`)."""
        return bool(self._control_in)

    # -- neighbourhood
    def predecessors(self) -> list[Op]:
        """Ops feeding this one by data edges, in input-port order, without repeats."""
        seen: dict[Op, None] = {}
        for p in self._inputs:
            src = p._source
            if src is not None and isinstance(src._owner, Op):
                seen[src._owner] = None
        return list(seen)

    def successors(self) -> list[Op]:
        """Ops fed by this one's outputs, in output-port then connection order."""
        seen: dict[Op, None] = {}
        for p in self._outputs:
            for c in p._consumers:
                if isinstance(c._owner, Op):
                    seen[c._owner] = None
        return list(seen)

    def has_consumers(self) -> bool:
        return any(p._consumers for p in self._outputs)

    # -- body
    @property
    def body(self) -> Graph | None:
        """The graph this op contains, or None."""
        return self._body

    def set_body(self, body: Graph | None) -> None:
        """Make ``body`` the graph this op contains.

        A body without boundary ports gets ports mirroring the op's; otherwise
        its input and output port names must equal the op's.
        """
        self._log(_restore_body, self, self._body)
        if body is None:
            if self._body is not None:
                self._body._owner = None
            self._body = None
            return
        if body._owner is not None and body._owner is not self:
            raise GraphError(f"graph is already the body of op {body._owner.name!r}")
        if not len(body._inputs) and not len(body._outputs):
            for p in self._inputs:
                body._add_graph_input(p.name, p.dtype)
            for q in self._outputs:
                body._add_graph_output(q.name, q.dtype)
        elif body._inputs.names() != self._inputs.names() or body._outputs.names() != self._outputs.names():
            raise GraphError(
                f"body of op {self._name!r} has ports {body._inputs.names()} -> {body._outputs.names()}, "
                f"but the op has {self._inputs.names()} -> {self._outputs.names()}"
            )
        body._owner = self
        self._body = body

    def __repr__(self) -> str:
        return f"<Op {self._name}: {self.type}>"

    def format(self) -> str:
        """One line: ``name: type(in=src, ...) -> (out: dtype, ...) {attrs}``."""
        ins = []
        for p in self._inputs:
            src = p._source.qualified_name if p._source is not None else "_"
            ins.append(f"{p.name}={src}")
        outs = [f"{q.name}: {q.dtype}" if q.dtype is not None else q.name for q in self._outputs]
        text = f"{self._name}: {self.type}({', '.join(ins)}) -> ({', '.join(outs)})"
        if self.namespace:
            text += f" [{self.namespace}]"
        if self.attrs:
            text += " {" + ", ".join(f"{k}={_short(v)}" for k, v in self.attrs.items()) + "}"
        if self._control_in:
            text += " after " + ", ".join(o._name for o in self._control_in)
        return text


def _short(value: Any) -> str:
    from .tensor import is_tensor

    if is_tensor(value):
        return f"tensor<{getattr(value, 'dtype', '?')}{list(value.shape)}>"
    if isinstance(value, Graph):
        return f"graph<{len(value)} ops>"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _names(ports: Iterable[Port]) -> str:
    return ", ".join(p.qualified_name for p in ports)


def _new_ports(op: Op, cls: type, prefix: str, specs: Iterable[str | tuple[str, Any]] | int) -> PortList[Any]:
    """The port list of one side of a new op (no body yet): names, ``(name, dtype)`` pairs, or a count of
    anonymous ports.  A short list of names is the hot path of every importer."""
    if not specs:
        return PortList()
    if specs.__class__ is int:
        ports: PortList[Any] = PortList()
        for _ in range(specs):  # type: ignore[arg-type]
            ports._append(cls(_free_port_name(prefix, ports), None, op))
        return ports
    ports = PortList([cls(s, None, op) if s.__class__ is str else _port_from_pair(cls, s, op)
                      for s in specs])  # type: ignore[union-attr]
    if len(ports) > 1 and (len(ports) > 2 or ports[0]._name == ports[1]._name):
        _check_new_ports(ports, ports)
    return ports


def _check_new_ports(made: list[Any], ports: PortList[Any]) -> None:
    """Refuse duplicate names among the ports of a new op; index a long port list by name."""
    n = len(made)
    if len({p._name for p in made}) != n:
        names = [p._name for p in made]
        dup = next(x for x in names if names.count(x) > 1)
        raise GraphError(f"duplicate port name {dup!r}")
    if n > ports._INDEXED:
        ports._by_name = {p._name: p for p in made}


def _port_from_pair(cls: type, spec: Any, op: Op) -> Any:
    if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], str):
        return cls(spec[0], spec[1], op)
    raise GraphError(f"a port is a name or a (name, dtype) pair, got {spec!r}")


def _free_port_name(prefix: str, ports: PortList[Any]) -> str:
    i = len(ports)
    while f"{prefix}{i}" in ports:
        i += 1
    return f"{prefix}{i}"


# --------------------------------------------------------------------------- graph


class Graph:
    """A computation made of ops and the edges between them."""

    __slots__ = (
        "_ops",
        "_inputs",
        "_outputs",
        "namespace",
        "attrs",
        "_owner",
        "_version",
        "_topo",
        "_counters",
        "_journal",
        "__weakref__",
    )

    def __init__(self, namespace: str | None = None, attrs: dict[str, Any] | None = None) -> None:
        self._ops: dict[str, Op] = {}
        self._inputs: PortList[GraphInput] = PortList()
        self._outputs: PortList[GraphOutput] = PortList()
        self.namespace = namespace
        self.attrs: dict[str, Any] = dict(attrs) if attrs else {}
        self._owner: Op | None = None
        self._version = 0
        self._topo: tuple[Op, ...] | None = None
        self._counters: dict[str, int] = {}
        self._journal: list[tuple[Any, ...]] | None = None

    # -- basic queries
    @property
    def ops(self) -> Mapping[str, Op]:
        """Ops by name, in insertion order (a read-only view)."""
        return _OpsView(self._ops)

    def __iter__(self) -> Iterator[Op]:
        return iter(list(self._ops.values()))

    def __len__(self) -> int:
        return len(self._ops)

    def __contains__(self, item: object) -> bool:
        if isinstance(item, str):
            return item in self._ops
        return isinstance(item, Op) and item._graph is self

    def get_op(self, name: str) -> Op:
        """The op called ``name``; a GraphError naming similar ops if there is none."""
        try:
            return self._ops[name]
        except KeyError:
            close = difflib.get_close_matches(name, list(self._ops), n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise GraphError(f"no op named {name!r} in {self._describe()}{hint}") from None

    @property
    def version(self) -> int:
        """A number that grows with every change made through the IR (ops, ports, edges, an op's type,
        attributes, namespace, port types): a cache keyed on it stays true without being told."""
        return self._version

    def atomic(self) -> _Atomic:
        """Changes made to this graph (and to its ops and their ports) inside the block are undone if it raises:
        the graph is then equal to what it was before.  Nested blocks join the outermost one.  Changes inside a
        nested graph that existed before the block are not recorded; new ops, with what they hold, go whole."""
        return _Atomic(self)

    @property
    def owner(self) -> Op | None:
        """The op whose body this graph is, or None for a top-level graph."""
        return self._owner

    @property
    def input_ports(self) -> PortList[GraphInput]:
        return self._inputs

    @property
    def output_ports(self) -> PortList[GraphOutput]:
        return self._outputs

    def _describe(self) -> str:
        return f"body of op {self._owner.path!r}" if self._owner is not None else "graph"

    def _touch(self) -> None:
        self._version += 1
        self._topo = None

    # -- boundary ports
    def add_input_port(self, name: str | None = None, dtype: Any = None) -> GraphInput:
        """Add a graph input port (a producer inside the graph)."""
        if self._owner is not None:
            added = self._owner.add_input_port(name, dtype)
            return self._inputs[added.name]
        name = name if name is not None else _free_port_name("in", self._inputs)
        return self._add_graph_input(name, dtype)

    def add_output_port(self, name: str | None = None, dtype: Any = None) -> GraphOutput:
        """Add a graph output port (a consumer inside the graph)."""
        if self._owner is not None:
            added_out = self._owner.add_output_port(name, dtype)
            return self._outputs[added_out.name]
        name = name if name is not None else _free_port_name("out", self._outputs)
        return self._add_graph_output(name, dtype)

    def _add_graph_input(self, name: str, dtype: Any, index: int | None = None) -> GraphInput:
        port = GraphInput(name, dtype, self)
        self._inputs._append(port, index)
        return port

    def _add_graph_output(self, name: str, dtype: Any, index: int | None = None) -> GraphOutput:
        port = GraphOutput(name, dtype, self)
        self._outputs._append(port, index)
        return port

    def remove_input_port(self, port: GraphInput | str) -> None:
        p = self._inputs[port] if isinstance(port, str) else port
        if p._consumers:
            raise GraphError(f"graph input {p.name!r} still feeds {_names(p._consumers)}")
        self._inputs._remove(p)
        if self._owner is not None and p.name in self._owner._inputs:
            op_port = self._owner._inputs[p.name]
            if op_port._source is not None:
                raise GraphError(f"input port {op_port.qualified_name} is fed; disconnect it first")
            self._owner._inputs._remove(op_port)

    def rename_input_port(self, port: GraphInput | str, new: str) -> None:
        """Rename one of the graph's inputs (the owner's port too, for an op's body)."""
        p = self._inputs[port] if isinstance(port, str) else port
        if self._owner is not None and p.name in self._owner._inputs:
            self._owner.rename_input_port(p.name, new)
            return
        old = p._name
        self._inputs._rename(p, new)
        if self._journal is not None:
            self._journal.append((self._inputs._rename, p, old))

    def rename_output_port(self, port: GraphOutput | str, new: str) -> None:
        """Rename one of the graph's outputs (the owner's port too, for an op's body)."""
        p = self._outputs[port] if isinstance(port, str) else port
        if self._owner is not None and p.name in self._owner._outputs:
            self._owner.rename_output_port(p.name, new)
            return
        old = p._name
        self._outputs._rename(p, new)
        if self._journal is not None:
            self._journal.append((self._outputs._rename, p, old))

    def remove_output_port(self, port: GraphOutput | str) -> None:
        p = self._outputs[port] if isinstance(port, str) else port
        if p._source is not None:
            self.disconnect(p)
        self._outputs._remove(p)
        if self._owner is not None and p.name in self._owner._outputs:
            op_port = self._owner._outputs[p.name]
            if op_port._consumers:
                raise GraphError(f"output port {op_port.qualified_name} still feeds {_names(op_port._consumers)}")
            self._owner._outputs._remove(op_port)

    # -- ops
    def unique_name(self, base: str) -> str:
        """A name not yet used in this graph: ``base``, else ``base_1``, ``base_2`` ..."""
        if base not in self._ops:
            return base
        n = self._counters.get(base, 0)
        while True:
            n += 1
            candidate = f"{base}_{n}"
            if candidate not in self._ops:
                self._counters[base] = n
                return candidate

    def add_op(
        self,
        type: str | None = None,
        name: str | None = None,
        *,
        inputs: Iterable[str | tuple[str, Any]] | int = (),
        outputs: Iterable[str | tuple[str, Any]] | int = (),
        attrs: dict[str, Any] | None = None,
        namespace: str | None = None,
        sources: Sequence[OutputPort | None] | None = None,
    ) -> Op:
        """Create an op in this graph and return it.

        ``inputs``/``outputs`` are port names, ``(name, dtype)`` pairs, or a
        count of anonymous ports (``in0``, ``in1``, ...).  Without a name the op
        is named after its type (``aten::t`` -> ``t``, ``t_1``, ...).

        ``sources`` connects the new input ports as they are made: the port
        feeding each input, in order (None leaves that input unfed; a shorter
        list leaves the rest unfed).  It is what :meth:`connect` would do for
        each, without the call per edge.
        """
        if name is None:
            name = self.unique_name(default_op_name(type))
        elif name in self._ops:
            raise GraphError(f"an op named {name!r} already exists in {self._describe()}")
        op = Op(type, name, attrs, namespace, inputs=inputs, outputs=outputs)
        ins = op._inputs
        if sources:
            ports = ins
            if len(sources) > len(ports):
                raise GraphError(f"op {name!r} has {len(ports)} input port(s), but {len(sources)} sources are given")
            for src in sources:  # checked before anything is connected or the op is added
                if src is not None:
                    if not isinstance(src, OutputPort):
                        raise GraphError(f"a source of op {name!r} is not a producing port: {src!r}")
                    owner = src._owner
                    if (owner._graph if owner.__class__ is Op else owner) is not self:  # type: ignore[union-attr]
                        self._check_endpoint(src, f"source of op {name!r}")
            for dst, src in zip(ports, sources):
                if src is not None:
                    dst._source = src
                    src._consumers[dst] = None
        op._graph = self
        self._ops[name] = op
        self._version += 1
        self._topo = None
        if self._journal is not None:
            self._journal.append((_unadd_op, self, op))
        return op

    def insert(self, op: Op) -> Op:
        """Add a detached op (one removed from a graph, or made by ``Op(...)``)."""
        if op._graph is not None:
            raise GraphError(f"op {op.name!r} is already in a graph")
        if op._name in self._ops:
            raise GraphError(f"an op named {op._name!r} already exists in {self._describe()}")
        if any(p._source is not None for p in op._inputs) or any(q._consumers for q in op._outputs):
            raise GraphError(f"op {op.name!r} still has edges; a detached op must have none")
        op._graph = self
        self._ops[op._name] = op
        self._touch()
        if self._journal is not None:
            self._journal.append((_unadd_op, self, op))
        return op

    def rename_op(self, op: Op | str, new: str) -> None:
        o = self._own(op)
        if new == o._name:
            return
        if new in self._ops:
            raise GraphError(f"an op named {new!r} already exists in {self._describe()}")
        # keep insertion order: rebuild the dict around the renamed key
        self._ops = {(new if k == o._name else k): v for k, v in self._ops.items()}
        if self._journal is not None:
            self._journal.append((self.rename_op, o, o._name))
        o._name = new
        self._version += 1

    def remove_op(self, op: Op | str, *, rewire: bool | Mapping[str, OutputPort | None] = False) -> None:
        """Remove an op and its incoming edges.

        If its outputs still have consumers the call is refused, unless
        ``rewire`` says where they go: ``True`` feeds the consumers of output
        *i* from the source of input *i* (a pass-through op); a mapping
        ``{output name: new source}`` gives each output's replacement (``None``
        disconnects its consumers).
        """
        o = self._own(op)
        used = [q for q in o._outputs if q._consumers]
        if used:
            if rewire is False:
                consumers = [c for q in used for c in q._consumers]
                raise GraphError(
                    f"cannot remove op {o.path!r}: its outputs still feed {_names(consumers)} "
                    f"(pass rewire= to reconnect them)"
                )
            for i, q in enumerate(o._outputs):
                if not q._consumers:
                    continue
                if rewire is True:
                    if i >= len(o._inputs) or o._inputs[i]._source is None:
                        raise GraphError(
                            f"cannot rewire output {q.qualified_name}: op has no fed input port at position {i}"
                        )
                    new_src: OutputPort | None = o._inputs[i]._source
                else:
                    assert isinstance(rewire, Mapping)
                    if q.name not in rewire:
                        raise GraphError(f"rewire gives no replacement for {q.qualified_name}")
                    new_src = rewire[q.name]
                if new_src is None:
                    for c in list(q._consumers):
                        self.disconnect(c)
                else:
                    self.replace_all_uses(q, new_src)
        for p in o._inputs:
            if p._source is not None:
                self.disconnect(p)
        if self._journal is not None:
            self._journal.append((_unremove_op, self, o, tuple(o._control_in), tuple(o._control_out)))
        for other in list(o._control_in):
            del other._control_out[o]  # type: ignore[union-attr]
        for other in list(o._control_out):
            del other._control_in[o]  # type: ignore[union-attr]
        o._control_in = ()
        o._control_out = ()
        del self._ops[o._name]
        o._graph = None
        self._touch()

    def _own(self, op: Op | str) -> Op:
        o = self.get_op(op) if isinstance(op, str) else op
        if o._graph is not self:
            raise GraphError(f"op {o.name!r} is not in this {self._describe()}")
        return o

    # -- edges
    def _check_endpoint(self, port: Port, role: str) -> None:
        if port.graph is not self:
            where = port.graph._describe() if port.graph is not None else "no graph"
            raise GraphError(f"{role} {port.qualified_name} is in {where}, not in this {self._describe()}")

    def connect(self, src: OutputPort, dst: InputPort, *, replace: bool = False) -> Edge:
        """Add the data edge ``src -> dst``.

        ``dst`` must not be fed yet unless ``replace`` is true.
        """
        if not isinstance(src, OutputPort):
            raise GraphError(f"edge source {src.qualified_name} is not a producing port")
        if not isinstance(dst, InputPort):
            raise GraphError(f"edge target {dst.qualified_name} is not a consuming port")
        owner = src._owner
        if (owner._graph if type(owner) is Op else owner) is not self:  # type: ignore[union-attr]
            self._check_endpoint(src, "edge source")
        owner = dst._owner
        if (owner._graph if type(owner) is Op else owner) is not self:  # type: ignore[union-attr]
            self._check_endpoint(dst, "edge target")
        if dst._source is not None:
            if dst._source is src:
                return Edge(src, dst)
            if not replace:
                raise GraphError(
                    f"input port {dst.qualified_name} is already fed by {dst._source.qualified_name}"
                )
        if self._journal is not None:
            self._journal.append((_reconnect, dst, dst._source))
        if dst._source is not None:
            del dst._source._consumers[dst]
        dst._source = src
        src._consumers[dst] = None
        self._version += 1
        self._topo = None
        return Edge(src, dst)

    def disconnect(self, dst: InputPort) -> OutputPort | None:
        """Remove the data edge feeding ``dst``; returns its former source."""
        self._check_endpoint(dst, "edge target")
        src = dst._source
        if src is not None:
            if self._journal is not None:
                self._journal.append((_reconnect, dst, src))
            del src._consumers[dst]
            dst._source = None
            self._touch()
        return src

    def replace_all_uses(self, old: OutputPort, new: OutputPort) -> int:
        """Feed every consumer of ``old`` from ``new`` instead; returns how many moved."""
        self._check_endpoint(old, "port")
        self._check_endpoint(new, "port")
        if old is new:
            return 0
        moved = list(old._consumers)
        if moved and self._journal is not None:
            self._journal.append((_unreplace, old, moved))
        for c in moved:
            c._source = new
            new._consumers[c] = None
        old._consumers.clear()
        if moved:
            self._touch()
        return len(moved)

    def connect_control(self, before: Op, after: Op) -> ControlEdge:
        """Add the control edge ``before.^control -> after.^control``."""
        self._own(before)
        self._own(after)
        if before is after:
            raise GraphError(f"control edge from op {before.name!r} to itself")
        if self._journal is not None and after not in before._control_out:
            self._journal.append((self.disconnect_control, before, after))
        if not before._control_out:
            before._control_out = {}
        if not after._control_in:
            after._control_in = {}
        before._control_out[after] = None  # type: ignore[index]
        after._control_in[before] = None  # type: ignore[index]
        self._touch()
        return ControlEdge(before, after)

    def disconnect_control(self, before: Op, after: Op) -> None:
        if after not in before._control_out:
            raise GraphError(f"no control edge {before.name}.{CONTROL} -> {after.name}.{CONTROL}")
        del before._control_out[after]  # type: ignore[union-attr]
        del after._control_in[before]  # type: ignore[union-attr]
        if self._journal is not None:
            self._journal.append((self.connect_control, before, after))
        self._touch()

    def edges(self) -> list[Edge]:
        """All data edges, ordered by consuming op (insertion order) then port,
        graph outputs last."""
        out: list[Edge] = []
        for op in self._ops.values():
            for p in op._inputs:
                if p._source is not None:
                    out.append(Edge(p._source, p))
        for g in self._outputs:
            if g._source is not None:
                out.append(Edge(g._source, g))
        return out

    def control_edges(self) -> list[ControlEdge]:
        return [ControlEdge(src, op) for op in self._ops.values() for src in op._control_in]

    # -- order
    def topological_order(self) -> tuple[Op, ...]:
        """Ops ordered so that every op comes after the ops feeding it (by data or
        control edges).  Cached until the graph changes; an op list already in
        topological order is returned as inserted.  Raises GraphCycleError."""
        if self._topo is not None:  # every change of ops or edges drops it
            return self._topo
        order = self._toposort()
        self._topo = order
        return order

    def _toposort(self) -> tuple[Op, ...]:
        # Iterative depth-first search visiting predecessors first.
        state: dict[Op, int] = {}  # 1 = on stack, 2 = done
        order: list[Op] = []
        for root in self._ops.values():
            if root in state:
                continue
            stack: list[tuple[Op, Iterator[Op]]] = [(root, _preds(root))]
            state[root] = 1
            while stack:
                op, it = stack[-1]
                for pred in it:
                    s = state.get(pred)
                    if s is None:
                        state[pred] = 1
                        stack.append((pred, _preds(pred)))
                        break
                    if s == 1:
                        cycle = [o.name for o, _ in stack]
                        cycle = cycle[cycle.index(pred.name):]
                        raise GraphCycleError(
                            f"{self._describe()} has a cycle through ops: {' -> '.join(cycle + [pred.name])}",
                            cycle,
                        )
                else:
                    stack.pop()
                    state[op] = 2
                    order.append(op)
        return tuple(order)

    # -- checks
    def verify(self) -> list[str]:
        """Every structural problem, as messages; empty when the graph is sound.

        Reports dangling edges (an end outside this graph, or ends that
        disagree), duplicate names, input ports fed twice, ops whose recorded
        graph is wrong, and data/control cycles; recurses into bodies.
        """
        from .verify import verify_graph

        return verify_graph(self)

    def check(self) -> None:
        """Raise GraphError listing every problem :meth:`verify` finds."""
        problems = self.verify()
        if problems:
            raise GraphError(f"{len(problems)} structural problem(s):\n  " + "\n  ".join(problems))

    # -- subgraphs
    def make_subgraph(self, ops: Iterable[Op | str], name: str, type: str | None = None,
                      attrs: dict[str, Any] | None = None) -> Op:
        """Move ``ops`` into the body of a new op called ``name``.

        Edges entering the set become input ports of the new op (one per
        distinct source), edges leaving it become output ports (one per
        distinct inner producer).  Control edges crossing the boundary move to
        the new op.
        """
        from .subgraph import make_subgraph

        return make_subgraph(self, [self._own(o) for o in ops], name, type, attrs)

    def inline(self, op: Op | str) -> list[Op]:
        """Replace a subgraph op by the ops of its body; returns the moved ops."""
        from .subgraph import inline

        return inline(self, self._own(op))

    # -- copy, equality, printing
    def copy(self) -> Graph:
        """A deep copy: new ops, ports and edges; attribute containers copied,
        tensors shared."""
        from .compare import copy_graph

        return copy_graph(self)

    def __copy__(self) -> Graph:
        return self.copy()

    def __deepcopy__(self, memo: dict[int, Any]) -> Graph:
        return self.copy()

    def diff(self, other: Graph) -> list[str]:
        """Structural differences from ``other`` (empty when equal)."""
        from .compare import diff_graphs

        return diff_graphs(self, other)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Graph):
            return NotImplemented
        return not self.diff(other)

    __hash__ = None  # type: ignore[assignment]

    def format(self, indent: str = "") -> str:
        ins = ", ".join(f"{p.name}: {p.dtype}" if p.dtype is not None else p.name for p in self._inputs)
        outs = ", ".join(f"{p.name}: {p.dtype}" if p.dtype is not None else p.name for p in self._outputs)
        head = "graph"
        if self.namespace:
            head += f" namespace={self.namespace}"
        lines = [f"{indent}{head} ({ins}) -> ({outs})"]
        if self.attrs:
            lines.append(f"{indent}  attrs {{" + ", ".join(f"{k}={_short(v)}" for k, v in self.attrs.items()) + "}")
        for op in self._ops.values():
            lines.append(f"{indent}  {op.format()}")
            if op._body is not None:
                lines.append(op._body.format(indent + "    "))
        rets = [f"{g.name}={g._source.qualified_name if g._source else '_'}" for g in self._outputs]
        if rets:
            lines.append(f"{indent}  return " + ", ".join(rets))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()

    def __repr__(self) -> str:
        ns = f" {self.namespace}" if self.namespace else ""
        return f"<Graph{ns}: {len(self._ops)} ops, {len(self._inputs)} inputs, {len(self._outputs)} outputs>"

    def walk(self) -> Iterator[Op]:
        """Every op of this graph and of all nested graphs (bodies, graph-valued attributes), depth first."""
        for op in list(self._ops.values()):
            yield op
            if op._body is not None or op._attrs:
                for nested in op_graphs(op):
                    yield from nested.graph.walk()

    def nested_graphs(self, namespace: str | None = None) -> Iterator[NestedGraph]:
        """Every graph nested in this one, at any depth, depth first and in op order: op bodies and graphs held
        by attributes (ONNX ``If`` branches, ``Loop`` bodies, TorchScript blocks), each with its owner op, where
        it sits (``attr``/``index``; both None for a body), its path (``op/op.attr[1]``) and the namespace it
        inherits (its owner op's, else that of the graph around it; ``namespace`` is what this graph inherits).
        The one walk over nested graphs: verify, validate, the mapping engine, serialization use it."""
        yield from _nested(self, namespace, "")


class NestedGraph(NamedTuple):
    """A graph nested in another (see :meth:`Graph.nested_graphs`)."""

    graph: Graph
    owner: Op
    attr: str | None
    """The attribute holding it; None for the owner's body."""
    index: int | None  # type: ignore[assignment]  # a field named like tuple.index, as NamedTuple allows
    """Its position when the attribute holds a list of graphs."""
    path: str
    inherited: str | None
    """The namespace it inherits from around it (its own ``namespace`` wins when set)."""


def op_graphs(op: Op, prefix: str = "", inherited: str | None = None) -> Iterator[NestedGraph]:
    """The graphs ``op`` holds directly: its body, then graph-valued attributes in order."""
    here = f"{prefix}/{op._name}" if prefix else op._name
    ns = op._namespace or inherited
    if op._body is not None:
        yield NestedGraph(op._body, op, None, None, here, ns)
    attrs = op._attrs
    if attrs:
        for key, value in attrs.items():
            if value.__class__ is Graph:
                yield NestedGraph(value, op, key, None, f"{here}.{key}", ns)
            elif value.__class__ is list:
                for i, item in enumerate(value):
                    if item.__class__ is Graph:
                        yield NestedGraph(item, op, key, i, f"{here}.{key}[{i}]", ns)


def _nested(graph: Graph, inherited: str | None, prefix: str) -> Iterator[NestedGraph]:
    ns = graph.namespace or inherited
    for op in list(graph._ops.values()):
        if op._body is None and not op._attrs:
            continue  # holds no graph (most ops): no generator made for it
        if op._graph is not graph:
            continue  # removed while the walk was paused
        for nested in op_graphs(op, prefix, ns):
            yield nested
            yield from _nested(nested.graph, nested.inherited, nested.path)


# --------------------------------------------------------------------------- undo records for Graph.atomic


# Each record is (function, *arguments): calling the function with the arguments undoes one change.


def _reconnect(dst: InputPort, src: OutputPort | None) -> None:
    cur = dst._source
    if cur is not None:
        del cur._consumers[dst]
    dst._source = src
    if src is not None:
        src._consumers[dst] = None


def _unreplace(old: OutputPort, moved: list[InputPort]) -> None:
    for c in moved:
        _reconnect(c, old)


def _unadd_op(graph: Graph, op: Op) -> None:
    for p in op._inputs:
        if p._source is not None:
            _reconnect(p, None)
    del graph._ops[op._name]
    op._graph = None


class _Atomic:
    """The context manager of :meth:`Graph.atomic`.  A class rather than a generator: a mapping rule opens one
    block per rewrite (nested in the rule's own), and entering and leaving this costs a fraction of a
    generator-based one."""

    __slots__ = ("_graph", "_outer")

    def __init__(self, graph: Graph) -> None:
        self._graph = graph
        self._outer = False

    def __enter__(self) -> Graph:
        g = self._graph
        if g._journal is None:  # the outermost block keeps the journal; nested ones join it
            g._journal = []
            self._outer = True
        return g

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if not self._outer:
            return
        g = self._graph
        journal = g._journal
        g._journal = None
        if exc_type is not None and journal is not None:  # any exception, KeyboardInterrupt too: undo it all
            for undo in reversed(journal):
                undo[0](*undo[1:])
            g._touch()


def _restore_fields(op: Op, type: str | None, attrs: dict[str, Any], namespace: str | None,
                    provenance: tuple[str, str] | None) -> None:
    """Undo :meth:`Op.retarget`."""
    op._type = type
    op._attrs = attrs
    op._namespace = namespace
    op._provenance = provenance


def _unremove_op(graph: Graph, op: Op, control_in: tuple[Op, ...], control_out: tuple[Op, ...]) -> None:
    graph._ops[op._name] = op  # at the end of the order: equality and verification do not depend on it
    op._graph = graph
    for other in control_in:
        graph.connect_control(other, op)
    for other in control_out:
        graph.connect_control(op, other)


def _unadd_port(op: Op, port: Port, kind: str) -> None:
    ports: PortList[Any] = op._inputs if kind == "in" else op._outputs
    ports._remove(port)
    if op._body is not None:
        inner: PortList[Any] = op._body._inputs if kind == "in" else op._body._outputs
        inner._remove(inner[port._name])


def _unremove_port(op: Op, port: Port, kind: str, index: int, inner: Port | None) -> None:
    ports: PortList[Any] = op._inputs if kind == "in" else op._outputs
    ports._append(port, index)
    if inner is not None and op._body is not None:
        inner_ports: PortList[Any] = op._body._inputs if kind == "in" else op._body._outputs
        inner_ports._append(inner, index)


def _restore_body(op: Op, body: Graph | None) -> None:
    if op._body is not None and op._body is not body:
        op._body._owner = None
    op._body = body
    if body is not None:
        body._owner = op


def _preds(op: Op) -> Iterator[Op]:
    for p in op._inputs:
        src = p._source
        if src is not None:
            owner = src._owner
            if isinstance(owner, Op):
                yield owner
    yield from op._control_in


class _OpsView(Mapping[str, Op]):
    __slots__ = ("_d",)

    def __init__(self, d: dict[str, Op]) -> None:
        self._d = d

    def __getitem__(self, key: str) -> Op:
        return self._d[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __contains__(self, key: object) -> bool:
        return key in self._d

    def __repr__(self) -> str:
        return f"ops({list(self._d)})"

