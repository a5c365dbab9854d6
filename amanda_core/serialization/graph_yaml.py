"""The YAML text format of graphs (the design's "Full Specification").

A file holds one graph::

    graph:
      namespace: amanda/pytorch/2.13.0       # optional
      attrs: {versions: {producer: 27}}      # optional
      input_ports: [- name | - name: dtype]  # optional
      output_ports: [...]                    # optional
      ops:
        name:
          type: aten::matmul
          namespace: ...                     # optional: the op's own namespace, mid-conversion
          attrs: {...}
          input_ports: [...]
          output_ports: [...]
          ops: {...}                         # optional: the op contains a graph
          edges: [...]
      edges:
        - op.port -> op.port                 # data edge; ``graph.port`` names the graph's own ports
        - a.^control -> b.^control           # control edge
      tensor_data: model.tensors             # written by the dumper when tensors live in a sidecar file

or one op (a document whose only key is the op's name), as the design's ``fc`` and ``h`` examples are written.

Inside an op's body the op's own ports are named after the op (``h.hx -> f.x``), or ``graph.hx``.  Edge ends are
split at their last ``.``: op names may contain dots, port names may not.

Attribute values are plain YAML, plus these tags:

* ``!tensor {dtype: float32, shape: [2, 2], data: [...]}`` - a small tensor, inline (``data`` flat, row-major;
  ``base64`` instead of ``data`` when a list of numbers could not give the exact bits back);
* ``!tensor {dtype: float32, shape: [784, 100], offset: 0}`` - a tensor in the sidecar file named by
  ``tensor_data``: raw little-endian C-order bytes, each tensor 64-byte aligned, mapped into memory and read
  lazily (never pickle);
* ``!graph {...}`` - a graph held by an attribute (ONNX ``If`` branches, ``Loop`` bodies);
* ``!tuple [...]``, ``!scalar {dtype: float32, value: 1.5}`` (a numpy scalar), and YAML's ``!!binary`` for bytes;
* tags that plugins register with :func:`register_value_type` for their own value classes.

Where the design's own examples stray from the grammar, the loader reads what they obviously mean and says so
in ``warnings`` (see ``docs/yaml-format.md``); anything it cannot read is a :class:`FormatError` with file and
line.
"""

from __future__ import annotations

__all__ = [
    "load_graph",
    "load_op",
    "dump_graph",
    "save_graph",
    "register_value_type",
    "add_tag_source",
    "sidecar_path",
    "iter_tensors",
    "load_values",
    "dump_values",
    "INLINE_LIMIT",
]

import base64
import mmap
import os
import re
from typing import Any, Callable, Iterator

import numpy as np
import yaml

from ..errors import FormatError, GraphError, Location
from ..ir.bulk import bulk_build
from ..ir.graph import CONTROL, Graph, Op
from ..ir.tensor import Tensor, as_array, is_tensor, resolve_dtype
from .files import atomic_write_many
from .yamlio import Dumper, Loader, dump_yaml, locate, read_yaml_text, safe_load

INLINE_LIMIT = 64
"""Tensors of at most this many bytes are written inline; larger ones go to the sidecar file."""

_ALIGN = 64
_NAN = float("nan")
_GRAPH_KEYS = ("namespace", "attrs", "input_ports", "output_ports", "ops", "edges", "tensor_data")
_OP_KEYS = ("type", "namespace", "attrs", "meta", "input_ports", "output_ports", "ops", "edges")


# --------------------------------------------------------------------------- YAML tags


class _Tagged:
    """A tagged node read from YAML, turned into a value once the whole file is read."""

    __slots__ = ("tag", "value", "line")

    def __init__(self, tag: str, value: Any, line: int) -> None:
        self.tag = tag
        self.value = value
        self.line = line


class GraphLoader(Loader):
    """Safe loader for graph files: Amanda's tags, duplicate mapping keys refused."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._resolved: dict[tuple[str, bool], str] = {}

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        # Graph files repeat the same scalars (keys, port names, dtypes) many times; resolving a plain scalar's
        # tag runs regular expressions, so remember each answer for the length of one load.
        if kind is yaml.ScalarNode and implicit[0]:
            key = (value, implicit[1])
            tag = self._resolved.get(key)
            if tag is None:
                tag = self._resolved[key] = super().resolve(kind, value, implicit)
            return tag
        return super().resolve(kind, value, implicit)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        self.flatten_mapping(node)
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key = key_node.value
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        "while reading a mapping", node.start_mark, f"found duplicate key {key!r}",
                        key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]


def _construct_tagged(loader: GraphLoader, suffix: str, node: yaml.Node) -> _Tagged:
    if isinstance(node, yaml.MappingNode):
        value: Any = loader.construct_mapping(node, deep=True)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_scalar(node)  # type: ignore[arg-type]
    return _Tagged(suffix, value, node.start_mark.line + 1)


GraphLoader.add_multi_constructor("!", _construct_tagged)


class _Out:
    """A tagged value to write."""

    __slots__ = ("tag", "value", "flow")

    def __init__(self, tag: str, value: Any, flow: bool = True) -> None:
        self.tag = tag
        self.value = value
        self.flow = flow


class GraphDumper(Dumper):
    """Deterministic dumper for graph files."""


def _represent_out(dumper: GraphDumper, data: _Out) -> yaml.Node:
    if isinstance(data.value, dict):
        return dumper.represent_mapping("!" + data.tag, data.value, flow_style=data.flow)
    return dumper.represent_sequence("!" + data.tag, data.value, flow_style=data.flow)


class _Flow(list):  # type: ignore[type-arg]
    """A list written in flow style (``[1, 2]``)."""


class _FlowDict(dict):  # type: ignore[type-arg]
    """A mapping written in flow style (``{a: 1}``)."""


GraphDumper.add_representer(_Out, _represent_out)
GraphDumper.add_representer(_Flow, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))
GraphDumper.add_representer(_FlowDict, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v,
                                                                        flow_style=True))


# --------------------------------------------------------------------------- plugin value types

_VALUE_TYPES: dict[str, tuple[type, Callable[[Any], Any], Callable[[Any], Any]]] = {}
_VALUE_TAGS: dict[type, str] = {}


def register_value_type(tag: str, cls: type, encode: Callable[[Any], Any], decode: Callable[[Any], Any]) -> None:
    """Let attribute values of class ``cls`` be written as ``!tag``.

    ``encode(value)`` returns plain attribute values (dicts, lists, tensors, graphs ...) and ``decode`` builds
    the object back from them.  Plugins call this when their module is imported.
    """
    if tag in ("tensor", "graph", "tuple", "scalar"):
        raise ValueError(f"tag !{tag} is Amanda's own")
    if not re.match(r"^[A-Za-z][A-Za-z0-9_.\-]*$", tag):
        raise ValueError(f"malformed tag {tag!r}")
    _VALUE_TYPES[tag] = (cls, encode, decode)
    _VALUE_TAGS[cls] = tag


_TAG_SOURCES: list[Callable[[], None]] = []


def add_tag_source(load: Callable[[], None]) -> None:
    """Register a function that may define more value types (by loading plugins) when a reader meets a tag no one
    registered.  The plugin manager registers its ``load`` when it is imported, so serialization never imports the
    layer above it."""
    if load not in _TAG_SOURCES:
        _TAG_SOURCES.append(load)


# --------------------------------------------------------------------------- loading


class _Reader:
    """Builds graphs from parsed YAML, with file and line for every complaint."""

    def __init__(self, text: str, filename: str | None, warnings: list[str] | None) -> None:
        self.text = text
        self.filename = filename
        self.warnings = warnings if warnings is not None else []
        self.sidecar: _Sidecar | None = None

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
        self.sidecar = _Sidecar(os.path.join(base, name), self.error(f"tensor data file {name!r}", path))

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
        if owner is None and "namespace" in attrs:  # the design calls namespace a built-in graph attribute
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
        if "type" in attrs and "type" not in spec:  # the design calls type a built-in attribute, under attrs
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
            if not name or "->" in name:
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
            if not isinstance(text, str) or text.count("->") != 1:
                raise self.error(f"an edge is written 'op.port -> op.port', got {text!r}", where)
            left, right = (s.strip() for s in text.split("->"))
            try:
                a_op, a_port = _split_end(g, left, boundary, "out")
                b_op, b_port = _split_end(g, right, boundary, "in")
            except FormatError as e:
                raise self.error(e.reason, where) from None
            if not a_op or not b_op or not a_port or not b_port:
                raise self.error(f"an edge end is written 'op.port', got {text!r}", where)
            if a_port == CONTROL or b_port == CONTROL:
                if a_port != b_port:
                    raise self.error(f"a control edge joins two '{CONTROL}' ports, got {text!r}", where)
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
        if isinstance(v, _Tagged):
            return self.tagged(v, path)
        if isinstance(v, list):
            return [self.value(x, path + (i,)) for i, x in enumerate(v)]
        if isinstance(v, dict):
            return {k: self.value(x, path + (k,)) for k, x in v.items()}
        return v

    def tagged(self, t: _Tagged, path: tuple[Any, ...]) -> Any:
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
        entry = _VALUE_TYPES.get(t.tag)
        if entry is None:
            for load_more in list(_TAG_SOURCES):  # the plugin manager: plugins register their tags as they load
                load_more()  # a plugin that fails to load says so (PluginError), it is not passed over
                entry = _VALUE_TYPES.get(t.tag)
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

    def tensor(self, t: _Tagged) -> Any:
        spec = t.value
        if not isinstance(spec, dict) or "dtype" not in spec or "shape" not in spec:
            raise self.error("!tensor needs 'dtype' and 'shape'", (), t.line)
        extra = set(spec) - {"dtype", "shape", "data", "base64", "offset"}
        if extra:
            raise self.error(f"!tensor has unknown keys {sorted(extra)}", (), t.line)
        shape = spec["shape"]
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise self.error(f"!tensor shape must be a list of non-negative ints, got {shape!r}", (), t.line)
        dtype_name = str(spec["dtype"])
        try:
            dtype = _dtype(dtype_name)
        except TypeError as e:
            raise self.error(str(e), (), t.line) from None
        count = int(np.prod(shape, dtype=np.int64))
        if "offset" in spec:
            if self.sidecar is None:
                raise self.error("!tensor refers to the tensor data file but the graph names none "
                                 "('tensor_data')", (), t.line)
            offset = spec["offset"]
            if not isinstance(offset, int) or offset < 0:
                raise self.error(f"!tensor offset must be a non-negative int, got {offset!r}", (), t.line)
            nbytes = count * dtype.itemsize
            self.sidecar.check(offset, nbytes, self.error(
                f"!tensor at offset {offset} ({nbytes} bytes) lies beyond the end of the tensor data file", (),
                t.line))
            key = (offset, dtype_name, tuple(shape))
            shared = self.sidecar.tensors.get(key)  # one object per stored tensor keeps sharing as it was
            if shared is None:
                shared = Tensor(dtype=dtype_name, shape=tuple(shape), loader=self.sidecar.loader(offset, dtype, shape))
                self.sidecar.tensors[key] = shared
            return shared
        try:
            if "base64" in spec:
                raw = base64.b64decode(spec["base64"], validate=True)
                if len(raw) != count * dtype.itemsize:
                    raise ValueError(f"{len(raw)} bytes for {count} elements of {dtype_name}")
                arr = np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(dtype, copy=False)
            else:
                data = spec.get("data", [])
                if not isinstance(data, list):
                    data = [data]
                if len(data) != count:
                    raise ValueError(f"{len(data)} values for shape {shape}")
                arr = _array_from_list(data, dtype)
            return arr.reshape(shape)
        except (ValueError, TypeError, OverflowError) as e:
            raise self.error(f"bad !tensor data: {e}", (), t.line) from None


class _Sidecar:
    """The tensor data file beside a YAML file, mapped into memory once."""

    def __init__(self, path: str, err: FormatError) -> None:
        self.path = path
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                self.map: mmap.mmap | None = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        except OSError as e:
            raise FormatError(f"{err.reason}: cannot open {path}: {e.strerror}", err.location) from None
        self.size = size
        self.tensors: dict[tuple[int, str, tuple[int, ...]], Tensor] = {}

    def check(self, offset: int, nbytes: int, err: FormatError) -> None:
        if offset + nbytes > self.size:
            raise err

    def loader(self, offset: int, dtype: np.dtype[Any], shape: list[int]) -> Callable[[], np.ndarray]:
        def load() -> np.ndarray:
            count = int(np.prod(shape, dtype=np.int64))
            if count == 0 or self.map is None:
                return np.zeros(shape, dtype=dtype)
            arr = np.frombuffer(self.map, dtype=dtype.newbyteorder("<"), count=count, offset=offset)
            if arr.dtype != dtype:  # a big-endian machine: convert once
                arr = arr.astype(dtype)
            return arr.reshape(shape)

        return load


def _kind(v: Any) -> str:
    kinds: dict[type, str] = {dict: "a mapping", list: "a list", str: "a string"}
    return kinds.get(type(v), type(v).__name__)


def _dtype(name: str) -> np.dtype[Any]:
    if name in ("object", "str", "bytes"):
        return np.dtype(object)
    return resolve_dtype(name)


def _array_from_list(data: list[Any], dtype: np.dtype[Any]) -> np.ndarray:
    if dtype.kind == "O":
        arr = np.empty(len(data), dtype=object)
        for i, x in enumerate(data):
            if not isinstance(x, (bytes, str)):
                raise ValueError(f"element {i} of an object tensor must be bytes or str, got {type(x).__name__}")
            arr[i] = x
        return arr
    if dtype.kind == "f" or dtype.name in _FLOATISH:
        return np.array([_float(x) for x in data], dtype=np.float64).astype(dtype)
    return np.array(data, dtype=dtype)


_FLOATISH = {"bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
             "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn", "float8_e4m3b11fnuz", "float8_e3m4", "float8_e4m3"}


def _float(x: Any) -> Any:
    if isinstance(x, str):  # YAML writes .nan / .inf, but accept the spellings numpy prints too
        x = float(x.replace(".inf", "inf").replace(".nan", "nan"))
    if x != x:  # PyYAML reads .nan as a NaN with the sign bit set; use the canonical quiet NaN
        return _NAN
    return x


# --------------------------------------------------------------------------- public loading API


def _parse(source: str | os.PathLike[str], filename: str | None) -> tuple[Any, _Reader]:
    text, fname = read_yaml_text(source, filename)
    return safe_load(text, fname, GraphLoader), _Reader(text, fname, None)


def load_values(source: str | os.PathLike[str], *, filename: str | None = None) -> Any:
    """Parse a YAML document that may hold Amanda's value tags (``!tensor`` inline, ``!tuple``, ...), safely;
    tagged values come back as Python values.  Used by the other YAML formats (schemas, tables)."""
    data, reader = _parse(source, filename)
    return reader.value(data, ())


def dump_values(data: Any) -> str:
    """YAML text of plain data whose leaves may be tensors (written inline), tuples, numpy scalars or plugin value
    types; the counterpart of :func:`load_values`."""
    return dump_yaml(_Writer(None, None).value(data), dumper=GraphDumper)


def load_graph(source: str | os.PathLike[str], *, filename: str | None = None,
               warnings: list[str] | None = None) -> Graph:
    """Read a graph from a YAML file (a path) or from YAML text.

    A document holding one op (the design's ``fc`` example) gives a graph with that op alone.  Deviations from
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


# --------------------------------------------------------------------------- dumping


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
        if "->" in op.name or not op.name:
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
            for end, kind in ((left, "out"), (right, "in")):
                if end.count(".") > 1:
                    _split_end(g, end, boundary, kind)  # raises when the names allow two readings
            out.append(f"{left} -> {right}")
        out.extend(f"{c.src.name}.{CONTROL} -> {c.dst.name}.{CONTROL}" for c in g.control_edges())
        return out

    def attrs(self, attrs: dict[str, Any]) -> dict[str, Any]:
        return {str(k): self.value(v) for k, v in attrs.items()}

    def value(self, v: Any) -> Any:
        if v is None or isinstance(v, (bool, int, float, str, bytes)):
            return v
        if is_tensor(v):
            return self.tensor(v)
        if isinstance(v, Graph):
            return _Out("graph", self.graph(v, "graph"), flow=False)
        if isinstance(v, np.generic):
            return _Out("scalar", {"dtype": v.dtype.name, "value": v.item()})
        if isinstance(v, list):
            items = [self.value(x) for x in v]
            simple = all(x is None or isinstance(x, (bool, int, float, str)) for x in items)
            return _Flow(items) if simple else items
        if isinstance(v, tuple):
            return _Out("tuple", [self.value(x) for x in v])
        if isinstance(v, dict):
            return {k: self.value(x) for k, x in v.items()}
        tag = _VALUE_TAGS.get(type(v))
        if tag is not None:
            return _Out(tag, self.value(_VALUE_TYPES[tag][1](v)), flow=False)
        raise FormatError(f"cannot write an attribute value of type {type(v).__module__}.{type(v).__qualname__}: "
                          "no plugin registered a YAML form for it")

    def tensor(self, t: Any) -> _Out:
        key = id(t)
        dtype_name = t.dtype if isinstance(t, Tensor) else _dtype_name(t.dtype)
        shape = [int(d) for d in t.shape]
        if key in self.seen:
            return _Out("tensor", {"dtype": dtype_name, "shape": _Flow(shape), "offset": self.seen[key]})
        arr = as_array(t)
        if arr.dtype.kind == "O" or arr.dtype.kind in "SU" or self.sidecar_name is None or (
                self.inline_limit is not None and arr.nbytes <= self.inline_limit):
            return _Out("tensor", self.inline(arr, dtype_name, shape))
        offset = (self.size + _ALIGN - 1) // _ALIGN * _ALIGN
        self.chunks.append((offset, arr))
        self.size = offset + arr.nbytes
        self.seen[key] = offset
        self.keep.append(t)
        return _Out("tensor", {"dtype": dtype_name, "shape": _Flow(shape), "offset": offset})

    def inline(self, arr: np.ndarray, dtype_name: str, shape: list[int]) -> dict[str, Any]:
        d: dict[str, Any] = {"dtype": dtype_name, "shape": _Flow(shape)}
        flat = arr.reshape(-1)
        if arr.dtype.kind == "O":
            for x in flat:
                if not isinstance(x, (bytes, str)):
                    raise FormatError(f"cannot write an object tensor holding {type(x).__name__}")
            d["data"] = list(flat)
            return d
        if arr.dtype.kind in "SU":
            d["data"] = [x.item() for x in flat]
            return d
        if arr.dtype.kind in "biu":
            d["data"] = _Flow(flat.tolist())
            return d
        # what YAML gives back: every NaN becomes the canonical NaN
        as_list = [x if x == x else _NAN for x in flat.astype(np.float64).tolist()] if arr.dtype.kind != "c" else None
        if as_list is not None and _array_from_list(list(as_list), arr.dtype).tobytes() == flat.tobytes():
            d["data"] = _Flow(as_list)
        else:
            le = np.ascontiguousarray(flat).astype(arr.dtype.newbyteorder("<"), copy=False)
            d["base64"] = base64.b64encode(le.tobytes()).decode("ascii")
        return d

    def write_sidecar(self, f: Any) -> None:
        pos = 0
        for offset, arr in self.chunks:
            if offset > pos:
                f.write(b"\0" * (offset - pos))
            le = np.ascontiguousarray(arr)
            if le.dtype.byteorder == ">":
                le = le.astype(le.dtype.newbyteorder("<"))
            f.write(le.reshape(-1).view(np.uint8).data if le.size else b"")
            pos = offset + arr.nbytes


def _dtype_name(dtype: np.dtype[Any]) -> str:
    if dtype.kind in "SU":
        return str(dtype.str)
    return "object" if dtype.kind == "O" else str(dtype.name)


def _ports_out(ports: Any) -> list[Any]:
    out: list[Any] = []
    for p in ports:
        if "->" in p.name or not p.name:
            raise FormatError(f"port name {p.qualified_name!r} cannot be written in the edge syntax")
        out.append(p.name if p.dtype is None else {p.name: str(p.dtype)})
    return out


def _split_end(g: Graph, end: str, boundary: str, kind: str) -> tuple[str, str]:
    """Split an edge end ``op.port`` where op and port names may both contain dots.

    Every split whose op exists and has such a port (``kind`` "out": an output port, or a graph input; "in":
    an input port, or a graph output) is a reading; one reading is taken, none falls back to the last dot
    (ports may still be created from edges), more than one is an error.
    """
    if end.count(".") <= 1:
        head, _, tail = end.rpartition(".")
        return head, tail
    readings = []
    for i in range(len(end) - 1, 0, -1):
        if end[i] != ".":
            continue
        op_name, port = end[:i], end[i + 1:]
        op = g.ops.get(op_name)
        if op is not None:
            ports = op.output_ports if kind == "out" else op.input_ports
            if port in ports or port == CONTROL:
                readings.append((op_name, port))
                continue
        if op_name in (boundary, "graph") and port in (g.input_ports if kind == "out" else g.output_ports):
            readings.append((op_name, port))
    if len(readings) > 1:
        raise FormatError(f"edge end {end!r} can be read as " + " or ".join(f"{o!r} port {p!r}" for o, p in readings)
                          + "; rename an op or a port")
    if readings:
        return readings[0]
    head, _, tail = end.rpartition(".")
    return head, tail


def sidecar_path(path: str | os.PathLike[str]) -> str:
    """The tensor data file written beside a YAML file: ``model.yaml`` -> ``model.tensors``."""
    p = os.fspath(path)
    root, ext = os.path.splitext(p)
    return (root if ext.lower() in (".yaml", ".yml") else p) + ".tensors"


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
            writer.write_sidecar(handles[1])
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

    for v in graph.attrs.values():
        yield from visit(v)
    for op in graph.walk():
        for v in op.attrs.values():
            yield from visit(v)
