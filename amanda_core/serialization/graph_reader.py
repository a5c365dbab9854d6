"""Reading graph files: YAML text -> :class:`Graph`, with file and line for every complaint.

The format is described in :mod:`amanda_core.serialization.graph_yaml`.  Where a file strays from the grammar in
a way with one obvious meaning (ports written as a mapping, ``type`` or ``namespace`` under ``attrs``, an edge
end naming the wrong kind of port of an op with one port of the right kind), the reader takes that meaning and
says so in ``warnings`` (the lenient paths, listed in ``docs/yaml-format.md``); anything it cannot read is a
:class:`FormatError`.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from ..errors import FormatError, GraphError, Location
from ..ir.bulk import bulk_build
from ..ir.edges import ARROW, is_control, split_edge, split_graph_end
from ..ir.graph import Graph, Op
from ..ir.tensor import resolve_dtype
from .tensor_data import Sidecar, read_tensor
from .value_tags import TAG_SOURCES, VALUE_TYPES, GraphLoader, Tagged
from .yamlio import locate, read_yaml_text, safe_load

__all__ = ["load_graph", "load_op", "load_values"]

_GRAPH_KEYS = ("namespace", "attrs", "input_ports", "output_ports", "ops", "edges", "tensor_data")
_OP_KEYS = ("type", "namespace", "attrs", "meta", "input_ports", "output_ports", "ops", "edges")


class _Reader:
    """Builds graphs from parsed YAML, with file and line for every complaint."""

    def __init__(self, text: str, filename: str | None, warnings: list[str] | None) -> None:
        self.text = text
        self.filename = filename
        self.warnings = warnings if warnings is not None else []
        self.sidecar: Sidecar | None = None

    # -- errors
    def error(self, message: str, path: tuple[Any, ...], line: int | None = None) -> FormatError:
        if line is not None:
            return FormatError(message, Location(self.filename, line))
        return FormatError(message, locate(self.text, path, self.filename))

    def warn(self, message: str, path: tuple[Any, ...]) -> None:
        self.warnings.append(f"{locate(self.text, path, self.filename)}: {message}")

    # -- documents
    def document(self, data: Any) -> tuple[str, Any]:
        if not isinstance(data, dict) or not data:
            raise self.error("expected a mapping with the key 'graph' (or one op)", ())
        if "graph" in data:
            extra = [k for k in data if k != "graph"]
            if extra:
                raise self.error(f"unexpected top-level key {extra[0]!r} beside 'graph'", (extra[0],))
            return "graph", data["graph"]
        if len(data) == 1:
            ((name, spec),) = data.items()
            if isinstance(spec, dict) and set(spec) <= set(_OP_KEYS):
                return "op", (str(name), spec)
        raise self.error("expected the key 'graph' at the top (or a single op definition)", (next(iter(data)),))

    def open_sidecar(self, name: Any, path: tuple[Any, ...]) -> None:
        if not isinstance(name, str) or not name or os.path.basename(name) != name:
            raise self.error(f"'tensor_data' must be a file name beside the YAML file, got {name!r}", path)
        base = os.path.dirname(os.path.abspath(self.filename)) if self.filename else os.getcwd()
        self.sidecar = Sidecar(os.path.join(base, name), self.error(f"tensor data file {name!r}", path))

    # -- graphs
    def graph(self, spec: Any, path: tuple[Any, ...], owner: Op | None = None, body: Graph | None = None) -> Graph:
        if spec is None:
            spec = {}
        if not isinstance(spec, dict):
            raise self.error(f"a graph is a mapping, got {_kind(spec)}", path)
        allowed = _OP_KEYS if owner is not None else _GRAPH_KEYS
        for key in spec:
            if key not in allowed:
                raise self.error(f"unknown key {key!r} in {'op' if owner else 'graph'}; expected one of: "
                                 + ", ".join(allowed), path + (key,))
        if owner is None and "tensor_data" in spec:
            self.open_sidecar(spec["tensor_data"], path + ("tensor_data",))
        attrs = self.attrs(spec.get("attrs"), path + ("attrs",))
        namespace = spec.get("namespace")
        if owner is None and "namespace" in attrs:  # attrs.namespace: docs/yaml-format.md, "Names and edges"
            ns_attr = attrs.pop("namespace")
            if namespace is not None and namespace != ns_attr:
                raise self.error(f"namespace given twice: {namespace!r} and attrs.namespace {ns_attr!r}",
                                 path + ("attrs", "namespace"))
            namespace = ns_attr
        if namespace is not None and not isinstance(namespace, str):
            raise self.error(f"namespace must be a string, got {_kind(namespace)}", path + ("namespace",))
        if body is None:
            g = Graph(namespace if owner is None else None, attrs if owner is None else None)
        else:
            g = body
        implicit_in = implicit_out = False
        if owner is None:
            for name, dtype in self.ports(spec.get("input_ports"), path + ("input_ports",)):
                self.add_port(g.add_input_port, name, dtype, path + ("input_ports",))
            for name, dtype in self.ports(spec.get("output_ports"), path + ("output_ports",)):
                self.add_port(g.add_output_port, name, dtype, path + ("output_ports",))
            implicit_in = "input_ports" not in spec
            implicit_out = "output_ports" not in spec
        ops_spec = spec.get("ops") or {}
        if not isinstance(ops_spec, dict):
            raise self.error(f"'ops' is a mapping from op name to op, got {_kind(ops_spec)}", path + ("ops",))
        implicit: dict[Op, tuple[bool, bool]] = {}
        for name, op_spec in ops_spec.items():
            op, imp = self.op(g, str(name), op_spec, path + ("ops", name))
            implicit[op] = imp
        boundary = "graph" if owner is None else owner.name
        self.edges(g, spec.get("edges"), path + ("edges",), boundary, implicit, (implicit_in, implicit_out))
        return g

    def op(self, g: Graph, name: str, spec: Any, path: tuple[Any, ...]) -> tuple[Op, tuple[bool, bool]]:
        if spec is None:
            spec = {}
        if not isinstance(spec, dict):
            raise self.error(f"op {name!r} must be a mapping, got {_kind(spec)}", path)
        for key in spec:
            if key not in _OP_KEYS:
                raise self.error(f"unknown key {key!r} in op {name!r}; expected one of: " + ", ".join(_OP_KEYS),
                                 path + (key,))
        attrs = self.attrs(spec.get("attrs"), path + ("attrs",))
        op_type = spec.get("type")
        if "type" in attrs and "type" not in spec:  # attrs.type: docs/yaml-format.md, "Names and edges"
            attr_type = attrs.pop("type")
            if op_type is not None and op_type != attr_type:
                raise self.error(f"op {name!r} has type {op_type!r} and attrs.type {attr_type!r}",
                                 path + ("attrs", "type"))
            op_type = attr_type
        if op_type is not None and not isinstance(op_type, str):
            raise self.error(f"op {name!r}: type must be a string, got {_kind(op_type)}", path + ("type",))
        namespace = spec.get("namespace")
        if namespace is not None and not isinstance(namespace, str):
            raise self.error(f"op {name!r}: namespace must be a string", path + ("namespace",))
        try:
            op = g.add_op(op_type, name, attrs=attrs, namespace=namespace)
        except GraphError as e:
            raise self.error(str(e), path) from None
        if "meta" in spec:
            op.meta = self.attrs(spec["meta"], path + ("meta",))
        for pname, dtype in self.ports(spec.get("input_ports"), path + ("input_ports",)):
            self.add_port(op.add_input_port, pname, dtype, path + ("input_ports",))
        for pname, dtype in self.ports(spec.get("output_ports"), path + ("output_ports",)):
            self.add_port(op.add_output_port, pname, dtype, path + ("output_ports",))
        implicit = ("input_ports" not in spec, "output_ports" not in spec)
        if "ops" in spec or "edges" in spec:
            body = Graph()
            op.set_body(body)
            self.graph(spec, path, owner=op, body=body)
        return op, implicit

    def add_port(self, add: Callable[..., Any], name: str, dtype: Any, path: tuple[Any, ...]) -> None:
        try:
            add(name, dtype)
        except GraphError as e:
            raise self.error(str(e), path) from None

    def ports(self, spec: Any, path: tuple[Any, ...]) -> list[tuple[str, str | None]]:
        if spec is None:
            return []
        out: list[tuple[str, str | None]] = []
        if isinstance(spec, dict):
            self.warn("ports are written as a mapping; the grammar lists them ('- name' or '- name: dtype')",
                      path)
            items: list[Any] = [{k: v} for k, v in spec.items()]
        elif isinstance(spec, list):
            items = spec
        else:
            raise self.error(f"ports are a list of '- name' or '- name: dtype', got {_kind(spec)}", path)
        for i, item in enumerate(items):
            if isinstance(item, str):
                name, dtype = item, None
            elif isinstance(item, dict) and len(item) == 1:
                ((name, dtype),) = item.items()
                name = str(name)
            else:
                raise self.error(f"a port is '- name' or '- name: dtype', got {item!r}", path + (i,))
            if dtype is not None and not isinstance(dtype, str):
                if isinstance(dtype, (int, float, bool)):
                    dtype = str(dtype)
                else:
                    raise self.error(f"port {name!r}: dtype must be a string, got {_kind(dtype)}", path + (i,))
            if not name or ARROW in name:
                raise self.error(f"port name {name!r} is empty or contains '->'", path + (i,))
            out.append((name, dtype))
        return out

    # -- edges
    def edges(self, g: Graph, spec: Any, path: tuple[Any, ...], boundary: str,
              implicit: dict[Op, tuple[bool, bool]], graph_implicit: tuple[bool, bool]) -> None:
        if spec is None:
            return
        if not isinstance(spec, list):
            raise self.error(f"'edges' is a list of 'op.port -> op.port', got {_kind(spec)}", path)
        for i, text in enumerate(spec):
            where = path + (i,)
            try:
                left, right = split_edge(text)
                a_op, a_port = split_graph_end(g, left, boundary, True, text)
                b_op, b_port = split_graph_end(g, right, boundary, False, text)
                control = is_control(a_port, b_port, text)
            except FormatError as e:
                raise self.error(e.reason, where) from None
            if control:
                src_op = self.find_op(g, a_op, boundary, where, text)
                dst_op = self.find_op(g, b_op, boundary, where, text)
                try:
                    g.connect_control(src_op, dst_op)
                except GraphError as e:
                    raise self.error(str(e), where) from None
                continue
            src = self.end(g, a_op, a_port, boundary, implicit, graph_implicit[0], where, text, True)
            dst = self.end(g, b_op, b_port, boundary, implicit, graph_implicit[1], where, text, False)
            try:
                g.connect(src, dst)
            except GraphError as e:
                raise self.error(f"edge {text!r}: {e}", where) from None

    def find_op(self, g: Graph, name: str, boundary: str, where: tuple[Any, ...], text: str) -> Op:
        op = g.ops.get(name)
        if op is None:
            raise self.error(f"edge {text!r} names op {name!r}, which is not in this graph", where)
        return op

    def end(self, g: Graph, op_name: str, port: str, boundary: str, implicit: dict[Op, tuple[bool, bool]],
            graph_implicit: bool, where: tuple[Any, ...], text: str, source: bool) -> Any:
        """The port an edge end names: as a source (an op's output, or a graph input, which produces inside the
        graph) or as a target (an op's input, or a graph output).  Ports are created from edges where a
        declaration left them out; an end naming the wrong kind of port of an op that has a single port of the
        right kind is read as that port, with a warning."""
        kind, other = ("output", "input") if source else ("input", "output")
        side = 1 if source else 0  # which flag of ``implicit`` covers the op's ports of this kind
        op = g.ops.get(op_name)
        own = g.input_ports if source else g.output_ports
        if op_name in (boundary, "graph") and (op is None or port in own):
            gp = own.get(port)
            if gp is not None:
                return gp
            owner = g.owner
            if graph_implicit or (owner is not None and implicit.get(owner, (False, False))[1 - side]):
                return g.add_input_port(port) if source else g.add_output_port(port)
            if op is None:
                raise self.error(f"edge {text!r}: the graph has no {other} port {port!r} ({other}s: "
                                 f"{', '.join(own.names()) or 'none'})", where)
        if op is None:
            raise self.error(f"edge {text!r} names op {op_name!r}, which is not in this graph", where)
        ports, others = (op.output_ports, op.input_ports) if source else (op.input_ports, op.output_ports)
        found = ports.get(port)
        if found is not None:
            return found
        if implicit.get(op, (False, False))[side]:
            return op.add_output_port(port) if source else op.add_input_port(port)
        if port in others and len(ports) == 1:
            only = ports[0]
            verb = "reads from" if source else "writes to"
            self.warn(f"edge {text!r} {verb} {op_name}.{port}, an {other} port; taken to mean its only {kind} "
                      f"port {op_name}.{only.name}", where)
            return only
        raise self.error(f"edge {text!r}: op {op_name!r} has no {kind} port {port!r} ({kind}s: "
                         f"{', '.join(ports.names()) or 'none'})", where)

    # -- attribute values
    def attrs(self, spec: Any, path: tuple[Any, ...]) -> dict[str, Any]:
        if spec is None:
            return {}
        if not isinstance(spec, dict):
            raise self.error(f"'attrs' is a mapping, got {_kind(spec)}", path)
        return {str(k): self.value(v, path + (k,)) for k, v in spec.items()}

    def value(self, v: Any, path: tuple[Any, ...]) -> Any:
        if isinstance(v, Tagged):
            return self.tagged(v, path)
        if isinstance(v, list):
            return [self.value(x, path + (i,)) for i, x in enumerate(v)]
        if isinstance(v, dict):
            return {k: self.value(x, path + (k,)) for k, x in v.items()}
        return v

    def tagged(self, t: Tagged, path: tuple[Any, ...]) -> Any:
        if t.tag == "tensor":
            return self.tensor(t)
        if t.tag == "graph":
            return self.graph(t.value, path)
        if t.tag == "tuple":
            if not isinstance(t.value, list):
                raise self.error("!tuple takes a list", path, t.line)
            return tuple(self.value(x, path + (i,)) for i, x in enumerate(t.value))
        if t.tag == "scalar":
            if not isinstance(t.value, dict) or set(t.value) != {"dtype", "value"}:
                raise self.error("!scalar takes {dtype, value}", path, t.line)
            try:
                return resolve_dtype(str(t.value["dtype"])).type(t.value["value"])
            except (TypeError, ValueError) as e:
                raise self.error(f"bad !scalar: {e}", path, t.line) from None
        entry = VALUE_TYPES.get(t.tag)
        if entry is None:
            for load_more in list(TAG_SOURCES):  # the plugin manager: plugins register their tags as they load
                load_more()  # a plugin that fails to load says so (PluginError), it is not passed over
                entry = VALUE_TYPES.get(t.tag)
                if entry is not None:
                    break
        if entry is None:
            raise self.error(f"unknown tag !{t.tag} (no installed plugin defines it)", path, t.line)
        try:
            return entry[2](self.value(t.value, path))
        except FormatError:
            raise
        except Exception as e:
            raise self.error(f"bad !{t.tag} value: {type(e).__name__}: {e}", path, t.line) from None

    def tensor(self, t: Tagged) -> Any:
        return read_tensor(t.value, self.sidecar, lambda message: self.error(message, (), t.line))


def _kind(v: Any) -> str:
    kinds: dict[type, str] = {dict: "a mapping", list: "a list", str: "a string"}
    return kinds.get(type(v), type(v).__name__)


def _parse(source: str | os.PathLike[str], filename: str | None, positions: bool = False) -> tuple[Any, _Reader]:
    text, fname = read_yaml_text(source, filename)
    return safe_load(text, fname, GraphLoader, positions=positions), _Reader(text, fname, None)


def load_values(source: str | os.PathLike[str], *, filename: str | None = None, positions: bool = False) -> Any:
    """Parse a YAML document that may hold Amanda's value tags (``!tensor`` inline, ``!tuple``, ...), safely;
    tagged values come back as Python values.  Used by the other YAML formats (schemas, tables).  ``positions``:
    :func:`~amanda_core.serialization.yamlio.locate` will be asked for many places in the text."""
    data, reader = _parse(source, filename, positions)
    return reader.value(data, ())


def load_graph(source: str | os.PathLike[str], *, filename: str | None = None,
               warnings: list[str] | None = None) -> Graph:
    """Read a graph from a YAML file (a path) or from YAML text.

    A document holding one op gives a graph with that op alone (``docs/yaml-format.md``).  Deviations from
    the grammar that have one obvious meaning are read that way and described in ``warnings``; every other
    problem raises :class:`FormatError` with file and line.
    """
    with bulk_build():
        data, reader = _parse(source, filename)
        reader.warnings = warnings if warnings is not None else []
        kind, spec = reader.document(data)
        if kind == "graph":
            return reader.graph(spec, ("graph",))
        name, op_spec = spec
        g = Graph()
        reader.op(g, name, op_spec, (name,))
        return g


def load_op(source: str | os.PathLike[str], *, filename: str | None = None,
            warnings: list[str] | None = None) -> Op:
    """Read a document that defines one op (``name: {type: ..., ops: ..., edges: ...}``); returns it detached."""
    data, reader = _parse(source, filename)
    reader.warnings = warnings if warnings is not None else []
    kind, spec = reader.document(data)
    if kind != "op":
        raise FormatError("expected a single op definition, found a graph", Location(reader.filename, 1))
    name, op_spec = spec
    g = Graph()
    op, _ = reader.op(g, name, op_spec, (name,))
    g.remove_op(op)
    return op
