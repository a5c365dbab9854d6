"""ONNX model -> Amanda graph, losslessly (see ``docs/onnx.md`` for the whole mapping).

Entry point: :func:`load_model`.  The graph is built inside :func:`amanda_core.ir.bulk_build`.  Every ONNX
message is read once through ``ListFields`` (one call gives every present field, so a field explicitly set to
its default is told apart from an absent one, and a field this reader does not know is noticed).
"""

from __future__ import annotations

__all__ = ["load_model", "is_model_proto"]

import math
import os
from typing import Any

import onnx
from google.protobuf.message import DecodeError

from amanda_core import progress
from amanda_core.errors import FormatError, GraphError, Location
from amanda_core.ir import Graph, Op, OutputPort, bulk_build, default_op_name
from amanda_core.ir.tensor import MappedFile

from .common import KIND_NAMES, KIND_NUMBERS, PLANS, Plan, domain_component, infer_kind, is_model_proto, namespace_for
from .dtypes import dtype_from_tensor_type_bytes, dtype_from_type_proto, type_proto_from_dtype
from .plain import entries_to_plain, message_to_plain
from .structural import INITIALIZER, OUTER_VALUE, SPARSE_INITIALIZER, STRUCTURAL_TYPES
from .tensors import TensorReader, plain_layout
from .typesystem import SparseTensor
from .wire import TensorInfo, WireError, placeholder, rewrite


def _fields(msg_type: Any, *names: str) -> tuple[Any, ...]:
    by_name = msg_type.DESCRIPTOR.fields_by_name
    return tuple(by_name[n] for n in names)


# The descriptors of the protobuf fields the reader takes out of ``dict(message.ListFields())``, each named
# <MESSAGE>_<FIELD> after its message and field (MODEL_PRODUCER_NAME is ModelProto.producer_name).
(
    MODEL_IR_VERSION, MODEL_OPSET_IMPORT, MODEL_PRODUCER_NAME, MODEL_PRODUCER_VERSION, MODEL_DOMAIN,
    MODEL_MODEL_VERSION, MODEL_DOC_STRING, MODEL_GRAPH, MODEL_METADATA_PROPS, MODEL_TRAINING_INFO,
    MODEL_FUNCTIONS, MODEL_CONFIGURATION,
) = _fields(
    onnx.ModelProto, "ir_version", "opset_import", "producer_name", "producer_version", "domain",
    "model_version", "doc_string", "graph", "metadata_props", "training_info", "functions", "configuration"
)
(
    GRAPH_NODE, GRAPH_NAME, GRAPH_INITIALIZER, GRAPH_SPARSE_INITIALIZER, GRAPH_DOC_STRING, GRAPH_INPUT,
    GRAPH_OUTPUT, GRAPH_VALUE_INFO, GRAPH_QUANTIZATION_ANNOTATION, GRAPH_METADATA_PROPS,
) = _fields(
    onnx.GraphProto, "node", "name", "initializer", "sparse_initializer", "doc_string", "input", "output",
    "value_info", "quantization_annotation", "metadata_props"
)
(
    NODE_INPUT, NODE_OUTPUT, NODE_NAME, NODE_OP_TYPE, NODE_DOMAIN, NODE_OVERLOAD, NODE_ATTRIBUTE,
    NODE_DOC_STRING, NODE_METADATA_PROPS, NODE_DEVICE_CONFIGURATIONS,
) = _fields(
    onnx.NodeProto, "input", "output", "name", "op_type", "domain", "overload", "attribute", "doc_string",
    "metadata_props", "device_configurations"
)
(
    ATTR_NAME, ATTR_REF_ATTR_NAME, ATTR_DOC_STRING, ATTR_TYPE,
) = _fields(
    onnx.AttributeProto, "name", "ref_attr_name", "doc_string", "type"
)
_A_VALUE = {fd: fd.name for fd in _fields(onnx.AttributeProto, "f", "i", "s", "t", "g", "sparse_tensor", "tp",
                                          "floats", "ints", "strings", "tensors", "graphs", "sparse_tensors",
                                          "type_protos")}
_VALUE_FIELD = {"FLOAT": "f", "INT": "i", "STRING": "s", "TENSOR": "t", "GRAPH": "g", "SPARSE_TENSOR": "sparse_tensor",
                "TYPE_PROTO": "tp", "FLOATS": "floats", "INTS": "ints", "STRINGS": "strings", "TENSORS": "tensors",
                "GRAPHS": "graphs", "SPARSE_TENSORS": "sparse_tensors", "TYPE_PROTOS": "type_protos"}
_FIELD_KIND = {v: k for k, v in _VALUE_FIELD.items()}
# the value fields of the attribute kinds whose value is read as it is: field -> (type number, kind)
_SIMPLE = {fd: (KIND_NUMBERS[_FIELD_KIND[name]], _FIELD_KIND[name]) for fd, name in _A_VALUE.items()
           if name in ("f", "i", "s", "floats", "ints", "strings")}
(
    VALUE_INFO_NAME, VALUE_INFO_TYPE, VALUE_INFO_DOC_STRING, VALUE_INFO_METADATA_PROPS,
) = _fields(
    onnx.ValueInfoProto, "name", "type", "doc_string", "metadata_props"
)
(
    SPARSE_VALUES, SPARSE_INDICES, SPARSE_DIMS,
) = _fields(
    onnx.SparseTensorProto, "values", "indices", "dims"
)
(
    FUNCTION_NAME, FUNCTION_INPUT, FUNCTION_OUTPUT, FUNCTION_ATTRIBUTE, FUNCTION_ATTRIBUTE_PROTO, FUNCTION_NODE,
    FUNCTION_DOC_STRING, FUNCTION_OPSET_IMPORT, FUNCTION_DOMAIN, FUNCTION_OVERLOAD, FUNCTION_VALUE_INFO,
    FUNCTION_METADATA_PROPS,
) = _fields(
    onnx.FunctionProto, "name", "input", "output", "attribute", "attribute_proto", "node", "doc_string",
    "opset_import", "domain", "overload", "value_info", "metadata_props"
)
(
    TRAINING_INITIALIZATION, TRAINING_ALGORITHM, TRAINING_INITIALIZATION_BINDING, TRAINING_UPDATE_BINDING,
) = _fields(
    onnx.TrainingInfoProto, "initialization", "algorithm", "initialization_binding", "update_binding"
)

_PENDING = object()  # placeholder of a GRAPH attribute until the enclosing graph is complete


# --------------------------------------------------------------------------- reading the file


LAZY_MIN_BYTES = 1024
"""Inline tensors (``raw_data`` in the model file) of at least this many bytes are not copied out of the file:
the model is parsed without them and each becomes a lazy :class:`amanda_core.ir.tensor.FileTensor` on its
byte range of the (memory-mapped) file."""

_Inline = tuple[MappedFile, list[tuple[int, int]]]


def _parse(source: Any, base_dir: str | None) -> tuple[Any, str | None, str | None, _Inline | None]:
    """``(model, file name, base directory, inline tensor ranges)`` of a path, bytes, file object or
    ModelProto."""
    if is_model_proto(source):
        return source, None, base_dir, None
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _from_bytes(source, None), None, base_dir, None
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        try:
            file = MappedFile(path)
            if file.size() == 0:
                raise FormatError("empty file: not an ONNX model", Location(path))
            mm = file.map()
            assert mm is not None
            with progress.task(f"reading {os.path.basename(path)}", total=None):
                model, inline = _weightless(mm, file, path)
        except OSError as e:
            raise FormatError(f"cannot read file: {e.strerror or e}", Location(path)) from None
        return model, path, base_dir if base_dir is not None else os.path.dirname(os.path.abspath(path)), inline
    if hasattr(source, "read"):
        name = getattr(source, "name", None)
        fname = name if isinstance(name, str) else None
        model = _from_bytes(source.read(), fname)
        if base_dir is None and fname is not None:
            base_dir = os.path.dirname(os.path.abspath(fname))
        return model, fname, base_dir, None
    raise TypeError(f"load_model takes a path, bytes, a binary file or an onnx.ModelProto, got {type(source).__name__}")


def _weightless(mm: Any, file: MappedFile, path: str) -> tuple[Any, _Inline | None]:
    """The model in the mapped file, parsed without the ``raw_data`` of its large plain tensors (each replaced
    by a reference to its byte range, see :mod:`amanda_onnx.wire`)."""
    ranges: list[tuple[int, int]] = []

    def on_tensor(buf: Any, info: TensorInfo) -> tuple[list[Any], int] | None:
        assert info.raw is not None
        _, start, length = info.raw
        if length < LAZY_MIN_BYTES or not info.fields <= _PLAIN_FIELDS:
            return None
        plain = plain_layout(info.data_type)
        if plain is None or length != math.prod(info.dims) * plain:
            return None
        ref = placeholder(len(ranges))
        ranges.append((start, length))
        return [ref], len(ref)

    with memoryview(mm) as view:
        try:
            pieces, _ = rewrite(view, on_tensor, lambda start, end: end - start >= LAZY_MIN_BYTES)
        except WireError:
            pieces = [view]  # malformed: protobuf's own parse says what is wrong
            ranges = []
        if not ranges:
            return _from_bytes(view, path), None
        data = b"".join(pieces)
    return _from_bytes(data, path), (file, ranges)


_PLAIN_FIELDS = frozenset({1, 2, 8, 9})  # dims, data_type, name, raw_data


def _from_bytes(data: Any, path: str | None) -> Any:
    where = Location(path) if path else None
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as e:
        raise FormatError(f"not an ONNX model: the protobuf data is malformed or truncated ({e})", where) from None
    if not model.HasField("graph") or not model.ir_version:
        missing = "graph" if not model.HasField("graph") else "ir_version"
        raise FormatError(f"not an ONNX model: no {missing} (a truncated file, or not a model at all)", where)
    return model


# --------------------------------------------------------------------------- scopes


class _Scope:
    """One graph being built: its ONNX value names, the enclosing scope, the op holding it."""

    __slots__ = ("graph", "values", "parent", "holder", "opsets", "where", "reserved")

    def __init__(self, graph: Graph, parent: _Scope | None, holder: Op | None, opsets: dict[str, int],
                 where: str) -> None:
        self.graph = graph
        self.values: dict[str, OutputPort] = {}
        self.parent = parent
        self.holder = holder
        self.opsets = opsets
        self.where = where
        self.reserved: set[str] = set()  # node names of the model, kept free for their nodes

    def free_name(self, base: str) -> str:
        """``base``, else ``base_1``, ``base_2`` ..., avoiding op names given and node names to come."""
        name = base
        k = 0
        ops = self.graph.ops
        while name in ops or name in self.reserved:
            k += 1
            name = f"{base}_{k}"
        return name

    def outer(self, name: str) -> OutputPort | None:
        """The port standing for ``name`` from an enclosing graph: an ``OuterValue`` op made on first use (and
        in every graph between), with control edges from the producer to the ops holding the subgraphs."""
        if self.parent is None:
            return None
        src = self.parent.values.get(name)
        if src is None:
            src = self.parent.outer(name)
            if src is None:
                return None
        g = self.graph
        op = g.add_op(OUTER_VALUE, self.free_name(_op_base(name)), outputs=["output"])
        op.attrs["name"] = name
        port = op.output_ports[0]
        self.values[name] = port
        holder = self.holder
        producer = src.op
        if holder is not None and producer is not None:
            self.parent.graph.connect_control(producer, holder)
        return port


def _op_base(name: str) -> str:
    base = name.replace("->", "_").strip()
    return base or "value"


# --------------------------------------------------------------------------- the importer


class _Importer:
    def __init__(self, model: Any, path: str | None, base_dir: str | None, inline: _Inline | None = None) -> None:
        self.model = model
        self.path = path
        self.tensors = TensorReader(base_dir, path, inline)
        self.types: dict[bytes, tuple[str | None, dict[str, Any] | None]] = {}
        self.default_ns = "amanda/onnx"

    def error(self, message: str) -> FormatError:
        return FormatError(message, Location(self.path) if self.path else None)

    # -- model
    def run(self) -> Graph:
        d = dict(self.model.ListFields())
        attrs: dict[str, Any] = {}
        if MODEL_IR_VERSION in d:
            attrs["ir_version"] = d.pop(MODEL_IR_VERSION)
        opset_entries = d.pop(MODEL_OPSET_IMPORT, ())
        opsets = self.opsets(opset_entries, "the model")
        attrs["opset_import"] = entries_to_plain(opset_entries)
        for fd, key in ((MODEL_PRODUCER_NAME, "producer_name"), (MODEL_PRODUCER_VERSION, "producer_version"),
                        (MODEL_DOMAIN, "model_domain"), (MODEL_MODEL_VERSION, "model_version"),
                        (MODEL_DOC_STRING, "model_doc_string")):
            if fd in d:
                attrs[key] = d.pop(fd)
        if MODEL_METADATA_PROPS in d:
            attrs["model_metadata_props"] = entries_to_plain(d.pop(MODEL_METADATA_PROPS))
        self.default_ns = namespace_for("", opsets)
        g = Graph(self.default_ns, attrs)
        gp = d.pop(MODEL_GRAPH)
        funcs = d.pop(MODEL_FUNCTIONS, ())
        training = d.pop(MODEL_TRAINING_INFO, ())
        conf = d.pop(MODEL_CONFIGURATION, None)
        if d:
            raise self.error(f"the model has fields this importer does not handle: {', '.join(f.name for f in d)}")
        scope = _Scope(g, None, None, opsets, "graph")
        self.graph(gp, scope)
        if funcs:
            g.attrs["functions"] = [self.function(f) for f in funcs]
        if training:
            g.attrs["training_info"] = [self.training(t, scope, i) for i, t in enumerate(training)]
        if conf is not None:
            g.attrs["configuration"] = entries_to_plain(conf)
        return g

    def opsets(self, entries: Any, where: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for e in entries:
            domain = e.domain
            key = "" if domain in ("", "ai.onnx") else domain
            if key in out:
                continue
            out[key] = int(e.version)
        return out

    # -- graphs
    def graph(self, gp: Any, scope: _Scope) -> None:
        d = dict(gp.ListFields())
        g = scope.graph
        attrs = g.attrs
        if GRAPH_NAME in d:
            attrs["name"] = d.pop(GRAPH_NAME)
        if GRAPH_DOC_STRING in d:
            attrs["doc_string"] = d.pop(GRAPH_DOC_STRING)
        if GRAPH_METADATA_PROPS in d:
            attrs["metadata_props"] = entries_to_plain(d.pop(GRAPH_METADATA_PROPS))
        values = scope.values
        port_info: dict[str, dict[str, Any]] = {}
        input_names: set[str] = set()
        for vi in d.pop(GRAPH_INPUT, ()):
            name, dtype, extra = self.value_info(vi, scope.where + " input")
            try:
                port = g.add_input_port(name, dtype)
            except GraphError:
                raise self.error(f"{scope.where}: graph input {name!r} is listed twice") from None
            values[name] = port
            input_names.add(name)
            if extra:
                port_info.setdefault("inputs", {})[name] = extra
        nodes = d.pop(GRAPH_NODE, ())
        scope.reserved = {n.name for n in nodes}
        inits = d.pop(GRAPH_INITIALIZER, None)
        if inits:
            self.initializers(inits, scope, input_names)
        for sp in d.pop(GRAPH_SPARSE_INITIALIZER, ()):
            self.sparse_initializer(sp, scope, input_names)
        deferred: list[tuple[Op, int, str]] = []
        pending: list[tuple[Op, str, Any, int | None]] = []
        if nodes:
            self.nodes(nodes, scope, deferred, pending)
        outputs = d.pop(GRAPH_OUTPUT, ())
        value_info = d.pop(GRAPH_VALUE_INFO, ())
        qa = d.pop(GRAPH_QUANTIZATION_ANNOTATION, None)
        if d:
            raise self.error(f"{scope.where} has fields this importer does not handle: "
                             f"{', '.join(f.name for f in d)}")
        for op, attr, sub, index in pending:  # subgraphs, now that every outer value of this graph is known
            self.subgraph(op, attr, sub, index, scope)
        for op, i, name in deferred:  # inputs produced later in the node list (or by nobody)
            src = values.get(name)
            if src is None:
                raise self.error(f"{scope.where}: node {_node_label(op)} reads the value {name!r}, which no node, "
                                 "initializer or graph input produces")
            g.connect(src, op.input_ports[i])
        for vi in outputs:
            name, dtype, extra = self.value_info(vi, scope.where + " output")
            try:
                port = g.add_output_port(name, dtype)
            except GraphError:
                raise self.error(f"{scope.where}: graph output {name!r} is listed twice") from None
            src = values.get(name)
            if src is None:
                src = scope.outer(name)
                if src is None:
                    raise self.error(f"{scope.where}: graph output {name!r} is produced by no node, initializer or "
                                     "graph input")
            g.connect(src, port)
            if extra:
                port_info.setdefault("outputs", {})[name] = extra
        if value_info:
            attrs["value_info"] = self.value_infos(value_info, scope)
        if qa is not None:
            attrs["quantization_annotation"] = entries_to_plain(qa)
        if port_info:
            attrs["port_info"] = port_info
        if deferred:
            g.topological_order()  # a node list that is not in order may hide a cycle: GraphCycleError names it

    def value_info(self, vi: Any, where: str) -> tuple[str, str | None, dict[str, Any] | None]:
        name = tp = d = None
        for fd, v in vi.ListFields():
            if fd is VALUE_INFO_NAME:
                name = v
            elif fd is VALUE_INFO_TYPE:
                tp = v
            else:
                if d is None:
                    d = {}
                d[fd] = v
        if not name:
            raise self.error(f"{where} has no name")
        dtype = None
        extra: dict[str, Any] | None = None
        if tp is not None:
            dtype, plain = self.dtype(tp)
            if plain is not None:
                extra = {"type": plain, "dtype": dtype}
        if d:
            extra = extra or {}
            if VALUE_INFO_DOC_STRING in d:
                extra["doc_string"] = d.pop(VALUE_INFO_DOC_STRING)
            if VALUE_INFO_METADATA_PROPS in d:
                extra["metadata_props"] = entries_to_plain(d.pop(VALUE_INFO_METADATA_PROPS))
            if d:
                raise self.error(f"{where} {name!r} has fields this importer does not handle: "
                                 f"{', '.join(f.name for f in d)}")
        return name, dtype, extra

    def dtype(self, tp: Any) -> tuple[str | None, dict[str, Any] | None]:
        """The dtype string of a TypeProto, and the TypeProto as plain data when the string cannot say all of it
        (denotations, an unknown element type, an empty type)."""
        key = tp.SerializeToString(deterministic=True)
        found = self.types.get(key)
        if found is None:
            dtype = dtype_from_tensor_type_bytes(key)  # a plain tensor type, as a rule: the string says all of it
            if dtype is not None:
                found = self.types[key] = (dtype, None)
                return found
            dtype = dtype_from_type_proto(tp)
            lossless = dtype is not None and type_proto_from_dtype(dtype).SerializeToString(deterministic=True) == key
            found = self.types[key] = (dtype, None if lossless else message_to_plain(tp))
        return found

    def value_infos(self, entries: Any, scope: _Scope) -> list[Any]:
        out: list[Any] = []
        typed: set[int] = set()
        where = scope.where + " value_info"
        values = scope.values
        value_info = self.value_info
        for vi in entries:
            name, dtype, extra = value_info(vi, where)
            port = values.get(name)
            op = port.op if port is not None else None
            if (extra is None and dtype is not None and op is not None and op.type not in STRUCTURAL_TYPES
                    and id(port) not in typed and port.dtype is None):
                port.dtype = dtype
                typed.add(id(port))
                out.append(name)
            else:
                out.append(message_to_plain(vi))
        return out

    # -- initializers
    def initializers(self, tensors: Any, scope: _Scope, input_names: set[str]) -> None:
        read = self.tensors.read
        where = f"initializer in {scope.where}"
        add_op = scope.graph.add_op
        values = scope.values
        outputs = ["output"]
        for t in tensors:
            value, extras, name = read(t, where)
            if name:
                try:
                    op = add_op(INITIALIZER, name, outputs=outputs)
                    meta = None
                except GraphError:  # a name an initializer already has
                    op = add_op(INITIALIZER, scope.free_name(name), outputs=outputs)
                    meta = {"name": name}
            else:
                op = add_op(INITIALIZER, scope.free_name("initializer"), outputs=outputs)
                meta = {"name": name}
            op.attrs["value"] = value
            if extras:
                meta = meta or {}
                meta["tensor"] = extras
            if meta:
                op.meta = meta
            if not name:
                continue
            if name in input_names:
                op.attrs["graph_input"] = True
            elif name in values:
                self.define(scope, name, op.output_ports[0], op)
            else:
                values[name] = op.output_ports[0]

    def sparse_initializer(self, sp: Any, scope: _Scope, input_names: set[str]) -> None:
        value, info, name = self.sparse(sp, f"sparse initializer in {scope.where}")
        op_name, meta = _structural_name(scope, name, "sparse_initializer")
        op = scope.graph.add_op(SPARSE_INITIALIZER, op_name, outputs=["output"])
        op.attrs["value"] = value
        if info:
            meta["sparse_tensor"] = info
        if meta:
            op.meta = meta
        if name and name in input_names:
            op.attrs["graph_input"] = True
            return
        if name:
            self.define(scope, name, op.output_ports[0], op)

    def sparse(self, sp: Any, where: str) -> tuple[SparseTensor, dict[str, Any], str | None]:
        """A SparseTensorProto: the value, its extras (``values``/``indices`` tensor extras; the values tensor's
        name is returned apart) and the values tensor's name."""
        d = dict(sp.ListFields())
        vt = d.get(SPARSE_VALUES)
        it = d.get(SPARSE_INDICES)
        if vt is None or it is None:
            raise self.error(f"{where}: a sparse tensor needs both values and indices")
        values, vx, name = self.tensors.read(vt, where + " values")
        indices, ix, iname = self.tensors.read(it, where + " indices")
        info: dict[str, Any] = {}
        if vx:
            info["values"] = vx
        ientry = dict(ix or {})
        if iname is not None:
            ientry["name"] = iname
        if ientry:
            info["indices"] = ientry
        try:
            value = SparseTensor(values, indices, list(d.get(SPARSE_DIMS, ())))
        except (TypeError, ValueError) as e:
            raise self.error(f"{where}{f' {name!r}' if name else ''}: {e}") from None
        return value, info, name

    def define(self, scope: _Scope, name: str, port: OutputPort, op: Op) -> None:
        old = scope.values.get(name)
        if old is not None:
            first = _node_label(old.op) if old.op is not None else "a graph input"
            raise self.error(f"{scope.where}: the value {name!r} is produced twice, by {first} and by "
                             f"{_node_label(op)}")
        scope.values[name] = port

    # -- nodes
    def nodes(self, nodes: Any, scope: _Scope, deferred: list[tuple[Op, int, str]],
              pending: list[tuple[Op, str, Any, int | None]]) -> None:
        """Pass over the node list: one op per node, its inputs connected when their producers are known
        (the rest are ``deferred``), GRAPH attributes left ``pending`` until the graph is complete."""
        g = scope.graph
        values = scope.values
        opsets = scope.opsets
        graph_ns = self.default_ns
        reserved = scope.reserved
        counters: dict[str, int] = {}
        plans: dict[Any, tuple[Plan, str | None, str | None]] = {}
        add_op = g.add_op
        outer = scope.outer
        for n in nodes:
            ins = outs = op_type = name = domain = attr_list = rest = None
            for fd, v in n.ListFields():
                if fd is NODE_INPUT:
                    ins = v[:]
                elif fd is NODE_OUTPUT:
                    outs = v[:]
                elif fd is NODE_NAME:
                    name = v
                elif fd is NODE_OP_TYPE:
                    op_type = v
                elif fd is NODE_ATTRIBUTE:
                    attr_list = v
                elif fd is NODE_DOMAIN:
                    domain = v
                else:
                    if rest is None:
                        rest = {}
                    rest[fd] = v
            entry = plans.get(op_type if domain is None else (domain, op_type))
            if entry is None:
                if op_type is None:
                    raise self.error(f"{scope.where}: node {name!r} has no op_type")
                entry = plans[op_type if domain is None else (domain, op_type)] = self.plan(domain, op_type, opsets,
                                                                                             graph_ns)
            plan, ns, domain_meta = entry
            n_in = len(ins) if ins is not None else 0
            n_out = len(outs) if outs is not None else 0
            in_names = plan._in_names.get(n_in) or plan.input_names(n_in)
            out_names = plan._out_names.get(n_out) or plan.output_names(n_out)
            # the producers of the inputs, where known: the op is made already connected to them
            srcs = missing = None
            if n_in:
                srcs = [values.get(v) for v in ins]  # type: ignore[union-attr]
                if None in srcs:
                    for i, v in enumerate(ins):  # type: ignore[arg-type]
                        if v and srcs[i] is None:
                            src = values.get(v) or outer(v)  # (an earlier input may have made it outer)
                            if src is None:  # produced later in the node list, or by nobody
                                if missing is None:
                                    missing = []
                                missing.append((i, v))
                            else:
                                srcs[i] = src
            op = None
            if name:
                try:
                    op = add_op(op_type, name, inputs=in_names, outputs=out_names, namespace=ns, sources=srcs)
                    meta: dict[str, Any] = {}
                except GraphError:  # another op (an initializer, an earlier node) already has this name
                    pass
            if op is None:
                base = name if name else default_op_name(op_type)
                k = counters.get(base, 0)
                op_name = base if k == 0 else f"{base}_{k}"
                ops = g.ops
                while op_name in ops or op_name in reserved:
                    k += 1
                    op_name = f"{base}_{k}"
                counters[base] = k
                op = add_op(op_type, op_name, inputs=in_names, outputs=out_names, namespace=ns, sources=srcs)
                meta = {"name": name}
            if missing is not None:
                for i, v in missing:
                    deferred.append((op, i, v))
            if n_out == 1:
                meta["outputs"] = {out_names[0]: outs[0]}  # type: ignore[index]
            elif n_out:
                meta["outputs"] = dict(zip(out_names, outs))  # type: ignore[arg-type]
            if domain is not None and (domain_meta is not None or domain in ("", "ai.onnx")):
                meta["domain"] = domain
            if rest is not None:
                self.node_extras(rest, meta, op.name, scope)
            if attr_list is not None:
                self.attributes(attr_list, op, plan, meta, pending, scope)
            op.meta = meta
            if n_out:
                for port, v in zip(op.output_ports, outs):  # type: ignore[arg-type]
                    if v:
                        if v in values:
                            self.define(scope, v, port, op)
                        values[v] = port

    def plan(self, domain: str | None, op_type: str, opsets: dict[str, int],
             graph_ns: str) -> tuple[Plan, str | None, str | None]:
        """``(plan, op namespace or None, domain string to record or None)`` for nodes of one domain and type."""
        dom = domain or ""
        if dom == "ai.onnx":
            dom = ""
        ns = namespace_for(dom, opsets)
        domain_meta = None
        if dom and domain_component(dom) != dom:
            domain_meta = dom
        version = opsets.get(dom)
        if dom == "" and op_type in STRUCTURAL_TYPES:  # an ONNX node that happens to carry a structural name
            return Plan(None), ns, domain_meta
        plan = PLANS.plan(dom, version, op_type)
        return plan, (None if ns == graph_ns else ns), domain_meta

    def node_extras(self, d: dict[Any, Any], meta: dict[str, Any], op_name: str, scope: _Scope) -> None:
        if NODE_OVERLOAD in d:
            meta["overload"] = d.pop(NODE_OVERLOAD)
        if NODE_DOC_STRING in d:
            meta["doc_string"] = d.pop(NODE_DOC_STRING)
        if NODE_METADATA_PROPS in d:
            meta["metadata_props"] = entries_to_plain(d.pop(NODE_METADATA_PROPS))
        if NODE_DEVICE_CONFIGURATIONS in d:
            meta["device_configurations"] = entries_to_plain(d.pop(NODE_DEVICE_CONFIGURATIONS))
        if d:
            raise self.error(f"{scope.where}: node {op_name!r} has fields this importer does not handle: "
                             f"{', '.join(f.name for f in d)}")

    # -- attributes
    def attributes(self, attr_list: Any, op: Op, plan: Plan, meta: dict[str, Any],
                   pending: list[tuple[Op, str, Any, int | None]], scope: _Scope) -> None:
        attrs = op.attrs
        infos: dict[str, Any] = {}
        order: list[str] = []
        has_refs = False
        attr_kinds = plan.attr_kinds
        for a in attr_list:
            fields = a.ListFields()
            simple = None
            if len(fields) == 3:  # name, value, type: an attribute of a plain kind holding its value, as a rule
                (f_name, name), (f_value, raw), (f_type, number) = fields
                simple = _SIMPLE.get(f_value)
                if simple is not None and (f_name is not ATTR_NAME or f_type is not ATTR_TYPE or simple[0] != number):
                    simple = None
            if simple is not None:
                kind = simple[1]
                if kind == "INT" or kind == "FLOAT":
                    value = raw
                elif kind == "INTS" or kind == "FLOATS":
                    value = raw[:]
                elif kind == "STRING":
                    value = _text(raw)
                else:
                    value = [_text(s) for s in raw]
                info = None
            else:
                name, value, kind, info = self.attribute(a, op, pending, scope, fields)
            if name in attrs or name in infos and "ref_attr_name" in infos[name]:
                raise self.error(f"{scope.where}: node {_node_label(op)} has the attribute {name!r} twice")
            order.append(name)
            ref = info is not None and "ref_attr_name" in info
            if ref:
                has_refs = True
            else:
                attrs[name] = value
                expected = attr_kinds.get(name)
                if expected is None:
                    if kind == "GRAPH" or (kind == "GRAPHS" and value):
                        expected = kind
                    else:
                        expected = infer_kind(value)
                if expected != kind:
                    info = info or {}
                    info["type"] = kind
            if info:
                infos[name] = info
        if infos:
            meta["attrs"] = infos
        if has_refs:
            meta["attr_order"] = order

    def attribute(self, a: Any, op: Op, pending: list[tuple[Op, str, Any, int | None]],
                  scope: _Scope, fields: Any = None) -> tuple[str, Any, str, dict[str, Any] | None]:
        """``(name, value, kind, info)`` of an AttributeProto (``fields``: its ``ListFields()``, when the caller
        has them)."""
        d = dict(fields if fields is not None else a.ListFields())
        name = d.pop(ATTR_NAME, None)
        if name is None:
            raise self.error(f"{scope.where}: node {_node_label(op)} has an attribute without a name")
        kind_number = d.pop(ATTR_TYPE, None)
        info: dict[str, Any] | None = None
        if ATTR_DOC_STRING in d or ATTR_REF_ATTR_NAME in d:
            info = {}
            if ATTR_DOC_STRING in d:
                info["doc_string"] = d.pop(ATTR_DOC_STRING)
            if ATTR_REF_ATTR_NAME in d:
                info["ref_attr_name"] = d.pop(ATTR_REF_ATTR_NAME)
        where = f"attribute {name!r} of node {_node_label(op)} in {scope.where}"
        present = [(fd, v) for fd, v in d.items() if fd in _A_VALUE]
        if len(present) != len(d):
            raise self.error(f"{where}: fields this importer does not handle")
        if kind_number is None:
            if len(present) != 1:
                raise self.error(f"{where}: the attribute has no type and {len(present)} value fields")
            kind = _FIELD_KIND[_A_VALUE[present[0][0]]]
            info = info or {}
            info["untyped"] = kind
        else:
            kind = KIND_NAMES.get(kind_number, "")
            if not kind:
                raise self.error(f"{where}: unknown attribute type {kind_number}")
        field = _VALUE_FIELD[kind]
        raw = None
        for fd, v in present:
            if _A_VALUE[fd] == field:
                raw = v
            else:
                raise self.error(f"{where}: a {kind} attribute holds a value in field {fd.name!r}")
        if info is not None and "ref_attr_name" in info:
            if raw is not None:
                raise self.error(f"{where}: an attribute referring to {info['ref_attr_name']!r} also has a value")
            info["type"] = kind
            return name, None, kind, info
        if raw is None:
            if kind in ("FLOATS", "INTS", "STRINGS", "TENSORS", "GRAPHS", "SPARSE_TENSORS", "TYPE_PROTOS"):
                return name, [], kind, info
            info = info or {}
            info["unset"] = True
            default: Any = {"FLOAT": 0.0, "INT": 0, "STRING": ""}.get(kind)
            return name, default, kind, info
        if kind == "INT" or kind == "FLOAT":
            return name, raw, kind, info
        if kind == "STRING":
            return name, _text(raw), kind, info
        if kind == "INTS" or kind == "FLOATS":
            return name, raw[:], kind, info
        if kind == "STRINGS":
            return name, [_text(s) for s in raw], kind, info
        if kind == "TENSOR":
            value, extras, tname = self.tensors.read(raw, where)
            tinfo = _tensor_info(extras, tname)
            if tinfo:
                info = info or {}
                info["tensor"] = tinfo
            return name, value, kind, info
        if kind == "TENSORS":
            items = []
            tinfos = []
            for t in raw:
                value, extras, tname = self.tensors.read(t, where)
                items.append(value)
                tinfos.append(_tensor_info(extras, tname))
            if any(tinfos):
                info = info or {}
                info["tensors"] = tinfos
            return name, items, kind, info
        if kind == "GRAPH":
            pending.append((op, name, raw, None))
            return name, _PENDING, kind, info
        if kind == "GRAPHS":
            items = []
            for i, sub in enumerate(raw):
                pending.append((op, name, sub, i))
                items.append(_PENDING)
            return name, items, kind, info
        if kind == "SPARSE_TENSOR":
            value, sinfo, vname = self.sparse(raw, where)
            sinfo = _sparse_info(sinfo, vname)
            if sinfo:
                info = info or {}
                info["sparse_tensor"] = sinfo
            return name, value, kind, info
        if kind == "SPARSE_TENSORS":
            items = []
            sinfos = []
            for sp in raw:
                value, sinfo, vname = self.sparse(sp, where)
                items.append(value)
                sinfos.append(_sparse_info(sinfo, vname))
            if any(sinfos):
                info = info or {}
                info["sparse_tensors"] = sinfos
            return name, items, kind, info
        if kind == "TYPE_PROTO":
            dtype, plain = self.dtype(raw)
            if plain is not None:
                info = info or {}
                info["type_proto"] = {"type": plain, "dtype": dtype}
            return name, dtype, kind, info
        # TYPE_PROTOS
        items = []
        plains = []
        for tp in raw:
            dtype, plain = self.dtype(tp)
            items.append(dtype)
            plains.append({"type": plain, "dtype": dtype} if plain is not None else None)
        if any(plains):
            info = info or {}
            info["type_protos"] = plains
        return name, items, kind, info

    def subgraph(self, op: Op, attr: str, gp: Any, index: int | None, scope: _Scope) -> None:
        where = f"{scope.where} / node {_node_label(op)} attribute {attr}" + (f"[{index}]" if index is not None else "")
        sub = Graph(self.default_ns if op.namespace is not None else None)
        child = _Scope(sub, scope, op, scope.opsets, where)
        self.graph(gp, child)
        if index is None:
            op.attrs[attr] = sub
        else:
            op.attrs[attr][index] = sub

    # -- functions and training
    def function(self, f: Any) -> Graph:
        d = dict(f.ListFields())
        attrs: dict[str, Any] = {}
        fname = d.get(FUNCTION_NAME, "")
        fdomain = d.get(FUNCTION_DOMAIN, "")
        where = f"function {fdomain + '.' if fdomain else ''}{fname}"
        for fd, key in ((FUNCTION_NAME, "name"), (FUNCTION_DOMAIN, "domain"), (FUNCTION_OVERLOAD, "overload"),
                        (FUNCTION_DOC_STRING, "doc_string")):
            if fd in d:
                attrs[key] = d.pop(fd)
        opset_entries = d.pop(FUNCTION_OPSET_IMPORT, ())
        opsets = self.opsets(opset_entries, where)
        attrs["opset_import"] = entries_to_plain(opset_entries)
        if FUNCTION_ATTRIBUTE in d:
            attrs["attribute"] = d.pop(FUNCTION_ATTRIBUTE)[:]
        if FUNCTION_METADATA_PROPS in d:
            attrs["metadata_props"] = entries_to_plain(d.pop(FUNCTION_METADATA_PROPS))
        ns = namespace_for("", opsets)
        g = Graph(ns, attrs)
        attrs = g.attrs  # the graph keeps a copy
        scope = _Scope(g, None, None, opsets, where)
        saved = self.default_ns
        self.default_ns = ns
        try:
            for name in d.pop(FUNCTION_INPUT, ()):
                try:
                    scope.values[name] = g.add_input_port(name)
                except GraphError:
                    raise self.error(f"{where}: input {name!r} is listed twice") from None
            if FUNCTION_ATTRIBUTE_PROTO in d:
                holder = Op("AttributeDefaults", "attribute_proto")
                pending: list[tuple[Op, str, Any, int | None]] = []
                values: dict[str, Any] = {}
                infos: dict[str, Any] = {}
                for a in d.pop(FUNCTION_ATTRIBUTE_PROTO):
                    name, value, kind, info = self.attribute(a, holder, pending, scope)
                    values[name] = value
                    info = dict(info or {})
                    info["type"] = kind
                    infos[name] = info
                if pending:
                    raise self.error(f"{where}: graph-valued attribute defaults are not supported")
                attrs["attribute_proto"] = values
                attrs["attribute_proto_info"] = infos
            nodes = d.pop(FUNCTION_NODE, ())
            scope.reserved = {n.name for n in nodes}
            deferred: list[tuple[Op, int, str]] = []
            pend: list[tuple[Op, str, Any, int | None]] = []
            if nodes:
                self.nodes(nodes, scope, deferred, pend)
            for op, attr, sub, index in pend:
                self.subgraph(op, attr, sub, index, scope)
            for op, i, name in deferred:
                src = scope.values.get(name)
                if src is None:
                    raise self.error(f"{where}: node {_node_label(op)} reads the value {name!r}, which nothing "
                                     "in the function produces")
                g.connect(src, op.input_ports[i])
            for name in d.pop(FUNCTION_OUTPUT, ()):
                try:
                    port = g.add_output_port(name)
                except GraphError:
                    raise self.error(f"{where}: output {name!r} is listed twice") from None
                src = scope.values.get(name)
                if src is None:
                    raise self.error(f"{where}: output {name!r} is produced by no node or input")
                g.connect(src, port)
            if FUNCTION_VALUE_INFO in d:
                attrs["value_info"] = self.value_infos(d.pop(FUNCTION_VALUE_INFO), scope)
            if d:
                raise self.error(f"{where} has fields this importer does not handle: "
                                 f"{', '.join(f.name for f in d)}")
            if deferred:
                g.topological_order()
        finally:
            self.default_ns = saved
        return g

    def training(self, t: Any, main: _Scope, index: int) -> dict[str, Any]:
        d = dict(t.ListFields())
        out: dict[str, Any] = {}
        for fd, key in ((TRAINING_INITIALIZATION, "initialization"), (TRAINING_ALGORITHM, "algorithm")):
            gp = d.pop(fd, None)
            if gp is not None:
                g = Graph(self.default_ns)
                self.graph(gp, _Scope(g, main, None, main.opsets, f"training_info[{index}].{key}"))
                out[key] = g
        if TRAINING_INITIALIZATION_BINDING in d:
            out["initialization_binding"] = entries_to_plain(d.pop(TRAINING_INITIALIZATION_BINDING))
        if TRAINING_UPDATE_BINDING in d:
            out["update_binding"] = entries_to_plain(d.pop(TRAINING_UPDATE_BINDING))
        if d:
            raise self.error(f"training_info[{index}] has fields this importer does not handle")
        return out


def _structural_name(scope: _Scope, name: str | None, fallback: str) -> tuple[str, dict[str, Any]]:
    """The op name of a sparse initializer (its tensor name when free) and the meta recording the tensor name when
    the op name differs from it (``None``: the tensor has no name field)."""
    if name and name not in scope.graph.ops:
        return name, {}
    return scope.free_name(name or fallback), {"name": name}


def _text(b: bytes) -> str | bytes:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return b


def _tensor_info(extras: dict[str, Any] | None, name: str | None) -> dict[str, Any] | None:
    if name is None:
        return extras
    info = dict(extras or {})
    info["name"] = name
    return info


def _sparse_info(info: dict[str, Any], values_name: str | None) -> dict[str, Any] | None:
    if values_name is None:
        return info or None
    out = dict(info)
    out["values"] = dict(out.get("values") or {})
    out["values"]["name"] = values_name
    return out


def _node_label(op: Op | None) -> str:
    if op is None:
        return "?"
    if op.type == INITIALIZER:
        return f"initializer {op.meta.get('name', op.name)!r}"
    if op.type == SPARSE_INITIALIZER:
        return f"sparse initializer {op.meta.get('name', op.name)!r}"
    original = op.meta.get("name", op.name)
    return f"{op.name!r} ({op.type})" if original == op.name else f"{op.name!r} ({op.type}, unnamed in the model)" \
        if original is None else f"{op.name!r} ({op.type}, named {original!r} in the model)"


def load_model(source: Any, *, base_dir: str | os.PathLike[str] | None = None) -> Graph:
    """Read an ONNX model into a graph of namespace ``amanda/onnx/<opset of the default domain>``.

    ``source``: a path, the bytes of a model, a binary file, or an ``onnx.ModelProto`` (not modified, not
    copied).  ``base_dir``: where external data files are, when ``source`` is not a path (default: the model
    file's directory).  Tensors in external files are read lazily (memory-mapped).

    Raises :class:`FormatError` (with the file) for malformed input, naming the node or tensor at fault, and
    :class:`amanda_core.GraphCycleError` for a node list with a cycle."""
    model, path, bdir, inline = _parse(source, os.fspath(base_dir) if base_dir is not None else None)
    with bulk_build():
        return _Importer(model, path, bdir, inline).run()
