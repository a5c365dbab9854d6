"""Graphs of ``amanda/tensorflow/<version>`` to TensorFlow: a GraphDef, a frozen ``.pb`` or a SavedModel directory.

The GraphDef has one ``Placeholder`` per graph input and one ``Identity`` per graph output, each named after the
port, so a written ``.pb`` reads back with ``inputs=[<input names>]``, ``outputs=[<output names>]`` and a
SavedModel's ``serving_default`` signature has the graph's input and output names.  Function bodies held by
attributes become ``FunctionDef``s of the library.  See ``docs/tensorflow.md``.
"""

from __future__ import annotations

__all__ = ["save_model", "to_graph_def", "GraphDefParts"]

import contextlib
import hashlib
import os
import re
from typing import Any, Iterator

import attrs
import numpy as np

from amanda_core.errors import AmandaError, GraphError, first_line
from amanda_core.ir.graph import Graph, GraphInput, Op, OutputPort
from amanda_core.ir.tensor import Tensor, as_array, resolve_dtype

from .dtypes import DTypeError, dtype_enum, dtype_from_numpy, parse_dtype

FAMILY = "amanda/tensorflow"


@attrs.frozen
class GraphDefParts:
    """A GraphDef and its feeds and fetches: placeholder names (= input names) and ``Identity`` node names
    (= output names), in the graph's port order."""

    graph_def: Any
    inputs: list[str]
    outputs: list[str]
    input_dtypes: list[str]
    variables: list[tuple[str, Any]] = attrs.field(factory=list)
    """``(Placeholder node name, value)`` of the constants left out of the GraphDef (``to_graph_def(graph,
    variables=True)``): the SavedModel exporter feeds each placeholder from a variable holding the value."""


def _tf() -> Any:
    from .framework import import_tensorflow

    return import_tensorflow()


# --------------------------------------------------------------------------- attribute values

def _shape_proto(shape: Any, proto: Any) -> None:
    if shape is None:
        proto.unknown_rank = True
        return
    for d in shape:
        proto.dim.add().size = int(d)


def _tensor_proto(value: Any, dtype: str | None, out: Any) -> None:
    from tensorflow.python.framework import tensor_util

    array = as_array(value) if isinstance(value, Tensor) else np.asarray(value)
    if dtype is not None and dtype.startswith("q"):  # quantized types are held as their storage type
        proto = tensor_util.make_tensor_proto(array, dtype=dtype_enum(dtype))
    else:
        proto = tensor_util.make_tensor_proto(array)
    out.CopyFrom(proto)


class _Encoder:
    """Attribute values back to ``AttrValue``s; function bodies to ``FunctionDef``s of one library."""

    def __init__(self) -> None:
        self.functions: dict[str, Any] = {}  # name -> FunctionDef
        self._graphs: dict[str, Graph] = {}

    def attr(self, value: Any, attr_type: str | None, out: Any, dtype: str | None = None) -> None:
        if attr_type is None:
            attr_type = _guess_type(value)
        if attr_type.startswith("list("):
            base = attr_type[5:-1]
            out.list.SetInParent()
            for item in value:
                self._item(item, base, out.list, dtype)
            return
        if value is None and attr_type != "shape":
            return
        self._single(value, attr_type, out, dtype)

    def _single(self, value: Any, kind: str, out: Any, dtype: str | None) -> None:
        if kind == "string":
            out.s = value if isinstance(value, bytes) else str(value).encode("utf-8")
        elif kind == "int":
            out.i = int(value)
        elif kind == "float":
            out.f = float(value)
        elif kind == "bool":
            out.b = bool(value)
        elif kind == "type":
            out.type = dtype_enum(value)
        elif kind == "shape":
            _shape_proto(value, out.shape)
        elif kind == "tensor":
            _tensor_proto(value, dtype, out.tensor)
        elif kind == "func":
            self.func(value, out.func)
        elif kind == "placeholder":
            out.placeholder = value["placeholder"]
        else:
            raise GraphError(f"unknown attribute type {kind!r}")

    def _item(self, item: Any, kind: str, lv: Any, dtype: str | None) -> None:
        if kind == "string":
            lv.s.append(item if isinstance(item, bytes) else str(item).encode("utf-8"))
        elif kind == "int":
            lv.i.append(int(item))
        elif kind == "float":
            lv.f.append(float(item))
        elif kind == "bool":
            lv.b.append(bool(item))
        elif kind == "type":
            lv.type.append(dtype_enum(item))
        elif kind == "shape":
            _shape_proto(item, lv.shape.add())
        elif kind == "tensor":
            _tensor_proto(item, dtype, lv.tensor.add())
        elif kind == "func":
            self.func(item, lv.func.add())
        else:
            raise GraphError(f"unknown attribute type list({kind})")

    def func(self, value: Any, out: Any) -> None:
        if isinstance(value, Graph):
            out.name = self.function(value)
            for k, v in (value.attrs.get("func_attr") or {}).items():
                self.attr(v, None, out.attr[k])
        elif isinstance(value, dict):
            out.name = value["name"]
            for k, v in (value.get("attr") or {}).items():
                self.attr(v, None, out.attr[k])
        else:
            out.name = str(value)

    def function(self, g: Graph) -> str:
        """Add the body ``g`` to the library; its function name: the name it was read with, its ``_<8 hex>``
        suffix replaced by a digest of the definition, so that distinct bodies never share a name (TensorFlow
        refuses a second, different definition of a name it has seen in the process) and equal ones do."""
        for name, seen in self._graphs.items():
            if seen is g:
                return name
        base = _HASHED.sub("", str(g.attrs.get("function") or "function"))
        fdef = _function_def(g, base, self)
        digest = hashlib.sha256(fdef.SerializeToString(deterministic=True)).hexdigest()[:8]
        name = f"{base}_{digest}"
        fdef.signature.name = name
        self._graphs[name] = g
        self.functions[name] = fdef
        return name


_HASHED = re.compile(r"_[0-9a-f]{8}$")


def _guess_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, (str, bytes)):
        return "string"
    if isinstance(value, (np.ndarray, Tensor)):
        return "tensor"
    if isinstance(value, Graph) or (isinstance(value, dict) and "name" in value):
        return "func"
    if isinstance(value, dict) and "placeholder" in value:
        return "placeholder"
    if isinstance(value, (list, tuple)):
        return f"list({_guess_type(value[0]) if value else 'int'})"
    raise GraphError(f"cannot tell the TensorFlow attribute type of {type(value).__name__} {value!r}")


# --------------------------------------------------------------------------- nodes

class _Names:
    def __init__(self, reserved: Any = ()) -> None:
        self.used: set[str] = set(reserved)
        self.by_op: dict[Op, str] = {}

    def take(self, name: str) -> str:
        out, n = name, 0
        while out in self.used:
            n += 1
            out = f"{name}_{n}"
        self.used.add(out)
        return out


def _node(op: Op, name: str, encoder: _Encoder, ref: Any, names: _Names) -> Any:
    from tensorflow.core.framework import node_def_pb2

    from .graphdef import input_layout, op_def

    if op.type is None:
        raise GraphError(f"op {op.path!r} has no type")
    d = op_def(op.type, f"op {op.path!r}: ")
    node = node_def_pb2.NodeDef(name=name, op=op.type)
    types = {a.name: a.type for a in d.attr}
    dtype = op.attrs.get("dtype") if isinstance(op.attrs.get("dtype"), str) else None
    for key, value in op.attrs.items():
        if key not in types:
            raise GraphError(f"op {op.path!r}: {op.type} has no attribute {key!r}")
        try:
            encoder.attr(value, types[key], node.attr[key], dtype)
        except (TypeError, ValueError, DTypeError) as e:
            raise GraphError(f"op {op.path!r}: attribute {key!r} = {value!r}: {e}") from None
    for key, value in (op.meta.get("attrs") or {}).items():
        encoder.attr(value, None, node.attr[key])
    if op.meta.get("device"):
        node.device = op.meta["device"]
    wanted = [p[0] for p in input_layout(d, op.attrs)]
    have = op.input_ports.names()
    if have != wanted:
        raise GraphError(f"op {op.path!r} ({op.type}) has input ports {have}; its op type and attributes take "
                         f"{wanted}")
    for port in op.input_ports:
        src = port.source
        if src is None:
            raise GraphError(f"input {port.name!r} of op {op.path!r} ({op.type}) is not fed")
        node.input.append(ref(src))
    for pred in op.control_inputs:
        node.input.append("^" + names.by_op[pred])
    return node


def _port_index(port: OutputPort) -> int:
    op = port.owner
    assert isinstance(op, Op)
    return op.output_ports.index(port)


def _base_dtype(port: Any, what: str) -> str:
    if port.dtype is None:
        raise GraphError(f"{what} has no dtype; TensorFlow needs the element type of every graph input and output")
    try:
        return parse_dtype(str(port.dtype)).name
    except DTypeError as e:
        raise GraphError(f"{what}: {e}") from None


def _order(g: Graph) -> tuple[Op, ...]:
    return g.topological_order()


VARIABLE_BYTES = 1024
"""A SavedModel holds a top-level ``Const`` of at least this many bytes (of a numeric type) as a variable."""


def _as_variable(op: Op) -> Any:
    """The value of ``op`` when it is a ``Const`` the SavedModel exporter writes as a variable, else None."""
    if op.type != "Const" or op.control_inputs or op.control_outputs:
        return None
    value = op.attrs.get("value")
    if not isinstance(value, (np.ndarray, Tensor)) or int(value.nbytes) < VARIABLE_BYTES:
        return None
    try:
        name = dtype_from_numpy(value.dtype if isinstance(value, np.ndarray) else resolve_dtype(value.dtype))
    except (DTypeError, TypeError):
        return None
    if name in ("string", "resource", "variant") or op.attrs.get("dtype") != name:
        return None
    return value


def to_graph_def(graph: Graph, *, variables: bool = False) -> GraphDefParts:
    """The graph as a ``GraphDef`` (imports TensorFlow).  With ``variables=True`` every top-level ``Const``
    of at least :data:`VARIABLE_BYTES` becomes a ``Placeholder`` of its dtype and shape, its value listed in
    ``GraphDefParts.variables`` (not copied into the GraphDef)."""
    tf = _tf()
    from tensorflow.core.framework import graph_pb2, node_def_pb2

    ns = graph.namespace or ""
    if not (ns == FAMILY or ns.startswith(FAMILY + "/")):
        raise GraphError(f"the TensorFlow exporter writes graphs of {FAMILY}, not {ns or 'a graph without namespace'}"
                         "; convert it first (amanda convert --to amanda/tensorflow)")
    encoder = _Encoder()
    reserved = [*graph.input_ports.names(), *graph.output_ports.names()]
    names = _Names(reserved)
    gd = graph_pb2.GraphDef()
    versions = graph.attrs.get("versions") or {}
    from tensorflow.python.framework import versions as tf_versions

    gd.versions.producer = int(versions.get("producer", tf_versions.GRAPH_DEF_VERSION))
    gd.versions.min_consumer = int(versions.get("min_consumer", tf_versions.GRAPH_DEF_VERSION_MIN_CONSUMER))
    input_dtypes = []
    for port in graph.input_ports:
        t = parse_dtype(str(port.dtype)) if port.dtype is not None else None
        if t is None:
            raise GraphError(f"graph input {port.name!r} has no dtype")
        node = gd.node.add(name=port.name, op="Placeholder")
        node.attr["dtype"].type = dtype_enum(t.name)
        _shape_proto(t.shape_list(), node.attr["shape"].shape)
        input_dtypes.append(str(port.dtype))
    ops = _order(graph)
    for op in ops:
        names.by_op[op] = names.take(op.name) if op.name in names.used else op.name
        names.used.add(names.by_op[op])

    def ref(src: OutputPort) -> str:
        if isinstance(src, GraphInput):
            return src.name
        k = _port_index(src)
        node_name = names.by_op[src.owner]  # type: ignore[index]
        return node_name if k == 0 else f"{node_name}:{k}"

    held: list[tuple[str, Any]] = []
    for op in ops:
        value = _as_variable(op) if variables else None
        if value is not None:
            node = gd.node.add(name=names.by_op[op], op="Placeholder")
            node.attr["dtype"].type = dtype_enum(op.attrs["dtype"])
            _shape_proto(list(value.shape), node.attr["shape"].shape)
            held.append((node.name, value))
            continue
        gd.node.append(_node(op, names.by_op[op], encoder, ref, names))
    for port in graph.output_ports:
        src = port.source
        if src is None:
            raise GraphError(f"graph output {port.name!r} is not fed")
        node = node_def_pb2.NodeDef(name=port.name, op="Identity")
        node.input.append(ref(src))
        typed = src if src.dtype is not None else port  # a value a conversion made: the output says its type
        node.attr["T"].type = dtype_enum(_base_dtype(typed, f"the value of graph output {port.name!r}"))
        gd.node.append(node)
    for fdef in encoder.functions.values():
        gd.library.function.append(fdef)
    del tf
    return GraphDefParts(gd, graph.input_ports.names(), graph.output_ports.names(), input_dtypes, held)


def _function_def(g: Graph, name: str, encoder: _Encoder) -> Any:
    from tensorflow.core.framework import function_pb2

    from .graphdef import op_def, output_layout

    fdef = function_pb2.FunctionDef()
    sig = fdef.signature
    sig.name = name
    if g.attrs.get("description"):
        sig.description = g.attrs["description"]
    if g.attrs.get("is_stateful"):
        sig.is_stateful = True
    where = f"function {name!r}"
    arg_attr = g.attrs.get("arg_attr") or []
    for i, port in enumerate(g.input_ports):
        t = parse_dtype(str(port.dtype)) if port.dtype is not None else None
        if t is None:
            raise GraphError(f"{where}: input {port.name!r} has no dtype")
        arg = sig.input_arg.add(name=port.name, type=dtype_enum(t.name))
        if t.is_ref:
            arg.is_ref = True
        extra = arg_attr[i] if i < len(arg_attr) else {}
        if t.shape is not None:
            _shape_proto(t.shape_list(), fdef.arg_attr[i].attr["_output_shapes"].list.shape.add())
        for k, v in extra.items():
            encoder.attr(v, None, fdef.arg_attr[i].attr[k])
    for k, v in (g.attrs.get("attr") or {}).items():
        encoder.attr(v, None, fdef.attr[k])
    names = _Names([p.name for p in g.input_ports])
    ops = _order(g)
    for op in ops:
        names.by_op[op] = names.take(op.name)
    layouts: dict[Op, dict[str, tuple[str, int]]] = {}

    def ref(src: OutputPort) -> str:
        if isinstance(src, GraphInput):
            return src.name
        op = src.owner
        assert isinstance(op, Op)
        lay = layouts.get(op)
        if lay is None:
            lay = {p: (arg, k) for p, arg, k, _ in output_layout(op_def(str(op.type)), op.attrs)}
            layouts[op] = lay
        arg, k = lay[src.name]
        return f"{names.by_op[op]}:{arg}:{k}"

    for op in ops:
        fdef.node_def.append(_node(op, names.by_op[op], encoder, ref, names))
    for port in g.output_ports:
        src = port.source
        if src is None:
            raise GraphError(f"{where}: output {port.name!r} is not fed")
        dt = port.dtype if port.dtype is not None else src.dtype
        base = _base_dtype(_Typed(dt), f"{where}: output {port.name!r}")
        sig.output_arg.add(name=port.name, type=dtype_enum(base))
        fdef.ret[port.name] = ref(src)
    for ret_name, op_name in (g.attrs.get("control_ret") or {}).items():
        sig.control_output.append(ret_name)
        op = g.ops.get(op_name)
        fdef.control_ret[ret_name] = names.by_op[op] if op is not None else op_name
    for k, v in (g.attrs.get("resource_arg_unique_id") or {}).items():
        fdef.resource_arg_unique_id[int(k)] = int(v)
    return fdef


@attrs.frozen
class _Typed:
    dtype: Any


# --------------------------------------------------------------------------- runnable functions

def concrete_function(graph: Graph) -> tuple[Any, GraphDefParts]:
    """A concrete function computing the graph (the GraphDef imported by ``wrap_function``, pruned to the
    graph's inputs and outputs): takes the inputs in order, returns the outputs in order."""
    tf = _tf()
    parts = to_graph_def(graph)

    def body() -> None:
        tf.graph_util.import_graph_def(parts.graph_def, name="")

    try:
        wrapped = tf.compat.v1.wrap_function(body, [])
        g = wrapped.graph
        feeds = [g.get_tensor_by_name(f"{n}:0") for n in parts.inputs]
        fetches = [g.get_tensor_by_name(f"{n}:0") for n in parts.outputs]
        fn = wrapped.prune(feeds, fetches)
    except (ValueError, TypeError, tf.errors.OpError) as e:
        raise AmandaError(f"TensorFlow refuses the graph: {first_line(e)}") from None
    return fn, parts



# --------------------------------------------------------------------------- files

@contextlib.contextmanager
def _atomic_directory(path: str) -> Iterator[str]:
    """A fresh temporary directory beside ``path``, moved to ``path`` when the block succeeds; removed on failure
    (:func:`amanda_core.serialization.files.atomic_directory`)."""
    from amanda_core.serialization.files import atomic_directory

    with atomic_directory(path) as tmp:
        yield os.fspath(tmp)


def _is_directory_target(path: str) -> bool:
    """A SavedModel folder: a path ending in ``/`` or ``.savedmodel``, a folder, or a new path without an
    extension (as ``tf.saved_model.save`` takes it)."""
    if path.endswith(("/", os.sep)) or path.lower().endswith(".savedmodel") or os.path.isdir(path):
        return True
    return "." not in os.path.basename(path) and not os.path.lexists(path)


def serving_function(graph: Graph, variables: list[Any] | None = None) -> tuple[Any, GraphDefParts]:
    """A ``tf.function`` with the graph's input signature (names, dtypes, shapes with unknown dims) whose body
    is the graph's GraphDef imported in place; it returns ``{output name: tensor}``.  With a list as
    ``variables``, the large constants become variables (``to_graph_def(graph, variables=True)``): the list
    receives one uninitialized variable per entry of ``GraphDefParts.variables``, in order, and the function
    reads them."""
    tf = _tf()
    parts = to_graph_def(graph, variables=variables is not None)
    specs = []
    for name, dt in zip(parts.inputs, parts.input_dtypes):
        t = parse_dtype(dt)
        specs.append(tf.TensorSpec(None if t.shape is None else list(t.shape), t.name, name=name))
    fetches = [f"{n}:0" for n in parts.outputs]
    out_names = list(parts.outputs)
    if variables is not None:
        from tensorflow.python.ops.resource_variable_ops import UninitializedVariable

        with tf.init_scope():
            for name, value in parts.variables:  # no storage until the checkpoint is restored
                variables.append(UninitializedVariable(shape=list(value.shape), dtype=dtype_of(value), name=name))
    held = [f"{n}:0" for n, _ in parts.variables]

    @tf.function(input_signature=specs, autograph=False)
    def serve(*args: Any) -> dict[str, Any]:
        feeds = dict(zip(parts.inputs, args))
        for key, var in zip(held, variables or ()):
            feeds[key] = var.read_value()
        values = tf.graph_util.import_graph_def(parts.graph_def, input_map=feeds, return_elements=fetches, name="")
        return {n: tf.identity(v, name=n) for n, v in zip(out_names, values)}

    try:
        serve.get_concrete_function()
    except (ValueError, TypeError, tf.errors.OpError) as e:
        raise AmandaError(f"TensorFlow refuses the graph: {first_line(e)}") from None
    return serve, parts


def dtype_of(value: Any) -> Any:
    return value.dtype if isinstance(value, np.ndarray) else resolve_dtype(value.dtype)


def _variable_keys(prefix: str, count: int) -> list[str]:
    """The checkpoint keys TensorFlow gave the variables of the module's ``weights`` list (from the object
    graph of the checkpoint it wrote at ``prefix``)."""
    from .checkpoint import object_graph

    objects = object_graph(prefix)

    def child(node: Any, name: str) -> Any:
        for ref in node.children:
            if ref.local_name == name:
                return objects.nodes[ref.node_id]
        raise AmandaError(f"{prefix}: the checkpoint TensorFlow wrote has no object {name!r}")

    listed = child(objects.nodes[0], "weights")
    keys = []
    for i in range(count):
        attrs_ = [a.checkpoint_key for a in child(listed, str(i)).attributes if a.name == "VARIABLE_VALUE"]
        if len(attrs_) != 1:
            raise AmandaError(f"{prefix}: the checkpoint TensorFlow wrote has no key for variable {i}")
        keys.append(attrs_[0])
    return keys


def _sync_tree(root: str) -> None:
    """fsync every file and folder under ``root`` (a folder moved into place after this is complete on disk)."""
    for folder, _, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def save_saved_model(graph: Graph, path: str) -> None:
    """A SavedModel directory whose ``serving_default`` signature takes the graph's inputs by name and returns
    its outputs by name.  Top-level constants of at least :data:`VARIABLE_BYTES` are variables of the
    SavedModel (in its ``variables/`` checkpoint, the function reading them), written tensor by tensor
    (:func:`amanda_tf.checkpoint.write_tensors`): no copy of the weights is built in memory."""
    tf = _tf()
    from .checkpoint import write_tensors

    weights: list[Any] = []
    serve, parts = serving_function(graph, weights)
    module = tf.Module()
    module.serve = serve
    module.weights = weights
    with _atomic_directory(path) as tmp:
        try:
            tf.saved_model.save(module, tmp, signatures={"serving_default": serve.get_concrete_function()})
            if parts.variables:  # TensorFlow saved the variables' keys but no values: the values go there
                prefix = os.path.join(tmp, "variables", "variables")
                keys = _variable_keys(prefix, len(parts.variables))
                write_tensors(prefix, [(k, v) for k, (_, v) in zip(keys, parts.variables)])
        except (ValueError, TypeError, tf.errors.OpError) as e:
            raise AmandaError(f"{path}: TensorFlow cannot save the SavedModel: {first_line(e)}") from None
        record = graph.attrs.get("amanda_provenance")
        if record is not None:  # what made it: an asset file of the SavedModel (the importer reads it back)
            import json

            os.makedirs(os.path.join(tmp, "assets"), exist_ok=True)
            text = record if isinstance(record, str) else json.dumps(record, sort_keys=True, separators=(",", ":"))
            with open(os.path.join(tmp, "assets", PROVENANCE_ASSET), "w", encoding="utf-8") as f:
                f.write(text)
        _sync_tree(tmp)


PROVENANCE_ASSET = "amanda_provenance.json"
"""The asset file of a SavedModel that records the conversion that wrote it (``amanda inspect`` shows it)."""


def save_frozen(graph: Graph, path: str) -> Any:
    from amanda_core.serialization.files import atomic_write

    parts = to_graph_def(graph)
    data = parts.graph_def.SerializeToString(deterministic=True)
    with atomic_write(path, "wb") as f:
        f.write(data)
    return parts.graph_def


def save_model(graph: Graph, target: Any = None, **options: Any) -> Any:
    """Write ``graph`` to ``target``: a SavedModel directory (a path ending in ``/`` or ``.savedmodel``, an
    existing directory, or a new path without an extension) or a frozen GraphDef (``.pb``).  Without a target,
    return the ``GraphDef``."""
    if options:
        raise AmandaError(f"the TensorFlow exporter takes no option {', '.join(sorted(options))}")
    if target is None:
        return to_graph_def(graph).graph_def
    path = os.fspath(target)
    if _is_directory_target(path):
        save_saved_model(graph, path.rstrip("/" + os.sep) or path)
        return None
    if path.lower().endswith(".pb"):
        return save_frozen(graph, path)
    raise AmandaError(f"{path}: the TensorFlow exporter writes a SavedModel directory (a path ending in / or "
                      ".savedmodel, or a new path without an extension) or a frozen GraphDef (.pb)")
