"""GraphDef and FunctionDef protocol buffers <-> Amanda graphs in ``amanda/tensorflow/<version>``.

This module needs TensorFlow loaded (its callers import it): it reads op definitions from the running
TensorFlow's op registry.  :mod:`amanda_tf.importer` and :mod:`amanda_tf.exporter` are the entry points; the
representation is described in ``docs/tensorflow.md``.
"""

from __future__ import annotations

__all__ = ["GraphBuilder", "op_def", "output_layout", "input_layout", "PRIVATE_ATTRS_META", "FUNC_ATTR_KEYS"]

from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from amanda_core.errors import FormatError, GraphError
from amanda_core.ir.bulk import bulk_build
from amanda_core.ir.graph import Graph, Op, OutputPort

from .attrs import decode_attr_value, decode_shape
from .dtypes import dtype_from_enum, numpy_dtype

PRIVATE_ATTRS_META = "attrs"
"""``op.meta`` key of the node attributes TensorFlow's runtime adds (names starting with ``_``)."""

FUNC_ATTR_KEYS = ("function", "func_attr", "attr", "arg_attr", "control_ret", "description", "is_stateful",
                  "resource_arg_unique_id")
"""``graph.attrs`` keys of a graph read from a ``FunctionDef``."""

_DROPPED_PRIVATE = ("_output_shapes",)
"""Private node attributes not kept: ``_output_shapes`` becomes the shapes of the output port dtypes."""

PLUMBING = ("Identity", "NoOp")
"""Op types dropped by the importer (see ``docs/tensorflow.md``)."""


class UnknownOpError(FormatError):
    """A node's op type is not registered in the running TensorFlow."""


_OP_DEFS: dict[str, Any] = {}


def op_def(op_type: str, where: str = "") -> Any:
    """The ``OpDef`` of ``op_type`` in the running TensorFlow; :class:`UnknownOpError` if it is not registered."""
    d = _OP_DEFS.get(op_type)
    if d is None:
        from tensorflow.python.framework import op_def_registry

        d = op_def_registry.get(op_type)
        if d is None:
            import tensorflow as tf

            raise UnknownOpError(
                f"{where}op type {op_type!r} is not in the op registry of TensorFlow {tf.__version__}: it is a "
                "custom op; load the library that defines it (tf.load_op_library) before importing")
        _OP_DEFS[op_type] = d
    return d


def _arg_count(arg: Any, attrs: Mapping[str, Any]) -> int | None:
    """How many tensors ``arg`` stands for; None when it is a single (not variadic) tensor."""
    if arg.number_attr:
        n = attrs.get(arg.number_attr)
        return int(n) if isinstance(n, int) else 0
    if arg.type_list_attr:
        types = attrs.get(arg.type_list_attr)
        return len(types) if isinstance(types, list) else 0
    return None


def _arg_dtypes(arg: Any, attrs: Mapping[str, Any], defaults: Mapping[str, Any]) -> list[str | None]:
    count = _arg_count(arg, attrs)
    ref = "_ref" if arg.is_ref else ""
    if arg.type_list_attr:
        types = attrs.get(arg.type_list_attr, defaults.get(arg.type_list_attr)) or []
        return [f"{t}{ref}" for t in types]
    if arg.type_attr:
        t = attrs.get(arg.type_attr, defaults.get(arg.type_attr))
        base = f"{t}{ref}" if isinstance(t, str) else None
    else:
        base = dtype_from_enum(int(arg.type)) + ref
    return [base] * (1 if count is None else count)


def _layout(args: Iterable[Any], attrs: Mapping[str, Any], defaults: Mapping[str, Any]
            ) -> list[tuple[str, str, int, str | None]]:
    """``(port name, arg name, index in arg, dtype)`` for every tensor of ``args``, in order."""
    out: list[tuple[str, str, int, str | None]] = []
    for arg in args:
        variadic = bool(arg.number_attr or arg.type_list_attr)
        for i, dt in enumerate(_arg_dtypes(arg, attrs, defaults)):
            out.append((f"{arg.name}_{i}" if variadic else arg.name, arg.name, i, dt))
    return out


def _defaults(d: Any) -> dict[str, Any]:
    return {a.name: decode_attr_value(a.default_value, a.type) for a in d.attr if a.HasField("default_value")}


def input_layout(d: Any, attrs: Mapping[str, Any]) -> list[tuple[str, str, int, str | None]]:
    return _layout(d.input_arg, attrs, _defaults(d))


def output_layout(d: Any, attrs: Mapping[str, Any]) -> list[tuple[str, str, int, str | None]]:
    return _layout(d.output_arg, attrs, _defaults(d))


def decode_const_tensor(proto: Any) -> Any:
    """A ``TensorProto`` as a read-only numpy array: a view of ``tensor_content`` when the values are stored
    there (the bytes protobuf hands out are the only copy), else TensorFlow's ``MakeNdarray``."""
    content = proto.tensor_content
    if content:
        name = dtype_from_enum(int(proto.dtype))
        nd = numpy_dtype(name) if name not in ("string", "resource", "variant") else None
        if nd is not None and not name.startswith("q"):
            shape = [int(d.size) for d in proto.tensor_shape.dim]
            array = np.frombuffer(content, dtype=nd)
            if array.size == int(np.prod(shape, dtype=np.int64)):
                return array.reshape(shape)
    from tensorflow.python.framework import tensor_util

    array = tensor_util.MakeNdarray(proto)
    if array.dtype.fields:
        (storage, _), = array.dtype.fields.values()
        array = array.view(storage)
    array.flags.writeable = False
    return array


def _shape_text(shape: list[int] | None) -> str:
    if shape is None:
        return ""
    return "[" + ",".join("?" if d < 0 else str(d) for d in shape) + "]"


def _with_shape(dtype: str | None, shape: list[int] | None) -> str | None:
    if dtype is None:
        return None
    return dtype + _shape_text(shape)


class GraphBuilder:
    """Builds Amanda graphs from a GraphDef and the functions of its library (each function body imported
    afresh where an attribute names it, to any depth)."""

    def __init__(self, library: Any = None, *, drop_plumbing: bool = True) -> None:
        self.functions: dict[str, Any] = {}
        self.gradients: dict[str, str] = {}
        if library is not None:
            for f in library.function:
                self.functions[f.signature.name] = f
            for g in library.gradient:
                self.gradients[g.function_name] = g.gradient_func
        self.drop_plumbing = drop_plumbing
        self._stack: list[str] = []

    # ------------------------------------------------------------------ attributes
    def decode_attrs(self, node: Any, d: Any, where: str, value: Any = None
                     ) -> tuple[dict[str, Any], dict[str, Any], list[list[int] | None] | None]:
        """The node's attributes, private attributes and output shapes; ``value``, when given, is the
        ``value`` attribute's tensor (a ``Const`` whose proto carries no data)."""
        types = {a.name: a.type for a in d.attr}
        attrs: dict[str, Any] = {}
        private: dict[str, Any] = {}
        shapes: list[list[int] | None] | None = None
        given = value
        for key in sorted(node.attr):
            value = node.attr[key]
            if key.startswith("_"):
                if key == "_output_shapes":
                    shapes = [decode_shape(s) for s in value.list.shape]
                elif key not in _DROPPED_PRIVATE:
                    private[key] = decode_attr_value(value)
                continue
            kind = value.WhichOneof("value")
            if kind == "tensor" and key == "value" and given is not None:
                attrs[key] = given
            elif kind == "tensor":
                attrs[key] = decode_const_tensor(value.tensor)
            elif kind == "func":
                attrs[key] = self.function_graph(value.func, where)
            elif kind == "list" and value.list.func:
                attrs[key] = [self.function_graph(f, where) for f in value.list.func]
            else:
                attrs[key] = decode_attr_value(value, types.get(key))
        return attrs, private, shapes

    # ------------------------------------------------------------------ functions
    def function_graph(self, func: Any, where: str) -> Any:
        """The body of the function ``func`` (a ``NameAttrList``) as a graph; a name the library does not
        define (a primitive op given as a function, as ``MapDataset`` may) stays ``{"name", "attr"}``."""
        fdef = self.functions.get(func.name)
        attr = {k: decode_attr_value(func.attr[k]) for k in sorted(func.attr)}
        if fdef is None:
            return {"name": func.name, "attr": attr}
        if func.name in self._stack:
            raise FormatError(f"{where}function {func.name!r} calls itself (through {' -> '.join(self._stack)})")
        self._stack.append(func.name)
        try:
            g = self.build_function(fdef)
        finally:
            self._stack.pop()
        if attr:
            g.attrs["func_attr"] = attr
        return g

    def build_function(self, fdef: Any) -> Graph:
        sig = fdef.signature
        g = Graph(None)
        g.attrs["function"] = sig.name
        if sig.description:
            g.attrs["description"] = sig.description
        if sig.is_stateful:
            g.attrs["is_stateful"] = True
        if fdef.attr:
            g.attrs["attr"] = {k: decode_attr_value(fdef.attr[k]) for k in sorted(fdef.attr)}
        arg_attr: list[dict[str, Any]] = [{} for _ in sig.input_arg]
        in_shapes: dict[int, list[int] | None] = {}
        for i in sorted(fdef.arg_attr):
            entries = fdef.arg_attr[i].attr
            kept = {}
            for k in sorted(entries):
                if k == "_output_shapes" and entries[k].list.shape:
                    in_shapes[i] = decode_shape(entries[k].list.shape[0])
                else:
                    kept[k] = decode_attr_value(entries[k])
            if kept and i < len(arg_attr):
                arg_attr[i] = kept
        if any(arg_attr):
            g.attrs["arg_attr"] = arg_attr
        if fdef.resource_arg_unique_id:
            g.attrs["resource_arg_unique_id"] = dict(fdef.resource_arg_unique_id)
        where = f"function {sig.name!r}: "
        inputs: dict[str, OutputPort] = {}
        for i, arg in enumerate(sig.input_arg):
            dt = _function_arg_dtype(arg, where)
            inputs[arg.name] = g.add_input_port(arg.name, _with_shape(dt, in_shapes.get(i)))
        producers: dict[str, tuple[Op, dict[tuple[str, int], OutputPort]]] = {}
        pending: list[tuple[Op, Any]] = []
        with bulk_build():
            for node in fdef.node_def:
                op, ports = self._make_op(g, node, where)
                producers[node.name] = (op, ports)
                pending.append((op, node))

            def resolve(ref: str, user: str) -> OutputPort:
                parts = ref.split(":")
                if len(parts) == 1:
                    port = inputs.get(ref)
                    if port is None:
                        raise FormatError(f"{where}node {user!r} reads {ref!r}, which is no input of the function")
                    return port
                if len(parts) != 3 or parts[0] not in producers:
                    raise FormatError(f"{where}node {user!r} reads {ref!r}, which no node of the function produces")
                op, ports = producers[parts[0]]
                port = ports.get((parts[1], int(parts[2])))
                if port is None:
                    raise FormatError(f"{where}node {user!r} reads {ref!r}: {op.type} has no output {parts[1]}"
                                      f":{parts[2]}")
                return port

            self._connect(g, pending, resolve, producers)
            for arg in sig.output_arg:
                ref = fdef.ret.get(arg.name)
                if ref is None:
                    raise FormatError(f"{where}output {arg.name!r} is returned by no node")
                src = resolve(ref, f"<output {arg.name}>")
                g.add_output_port(arg.name, _function_arg_dtype(arg, where))
                g.connect(src, g.output_ports[arg.name])
            control_ret = {name: fdef.control_ret[name] for name in sig.control_output if name in fdef.control_ret}
            if control_ret:
                g.attrs["control_ret"] = control_ret
            self._drop_plumbing(g, keep=set(control_ret.values()))
        return g

    # ------------------------------------------------------------------ nodes
    def _make_op(self, g: Graph, node: Any, where: str, value: Any = None
                 ) -> tuple[Op, dict[tuple[str, int], OutputPort]]:
        d = op_def(node.op, f"{where}node {node.name!r}: ")
        attrs, private, shapes = self.decode_attrs(node, d, f"{where}node {node.name!r}: ", value)
        outs = output_layout(d, attrs)
        ins = input_layout(d, attrs)
        out_specs = []
        for i, (name, _, _, dt) in enumerate(outs):
            shape = shapes[i] if shapes is not None and i < len(shapes) else None
            out_specs.append((name, _with_shape(dt, shape)))
        if node.name in g.ops:
            raise FormatError(f"{where}two nodes are named {node.name!r}")
        op = g.add_op(node.op, node.name, inputs=[p[0] for p in ins], outputs=out_specs, attrs=attrs)
        if private:
            op.meta[PRIVATE_ATTRS_META] = private
        if node.device:
            op.meta["device"] = node.device
        ports = {(arg, i): op.output_ports[k] for k, (_, arg, i, _) in enumerate(outs)}
        for k in range(len(outs)):
            ports[("", k)] = op.output_ports[k]  # flat index, as GraphDef references name them
        return op, ports

    def _connect(self, g: Graph, pending: Sequence[tuple[Op, Any]], resolve: Any,
                 producers: Mapping[str, tuple[Op, Any]]) -> None:
        for op, node in pending:
            k = 0
            for ref in node.input:
                if ref.startswith("^"):
                    src = producers.get(ref[1:])
                    if src is None:
                        raise FormatError(f"node {node.name!r} waits on {ref[1:]!r}, which is no node")
                    if src[0] is not op:
                        g.connect_control(src[0], op)
                    continue
                if k >= len(op.input_ports):
                    raise FormatError(f"node {node.name!r} ({node.op}) has more inputs than its op type takes "
                                      f"({len(op.input_ports)})")
                g.connect(resolve(ref, node.name), op.input_ports[k])
                k += 1
            if k != len(op.input_ports):
                raise FormatError(f"node {node.name!r} ({node.op}) has {k} input(s); its op type and attributes "
                                  f"take {len(op.input_ports)}")

    # ------------------------------------------------------------------ top level
    def build_graph_def(self, graph_def: Any, namespace: str, inputs: Sequence[tuple[str, str, str | None]],
                        outputs: Sequence[tuple[str, str]], const_values: Mapping[str, Any] | None = None) -> Graph:
        """A GraphDef as a graph.  ``inputs``: ``(placeholder node, graph input name, dtype or None)``;
        ``outputs``: ``(tensor name "node:i", graph output name)``; ``const_values``: the values of ``Const``
        nodes (by name) whose protos carry dtype and shape only (variables frozen without their data)."""
        const_values = const_values or {}
        g = Graph(namespace)
        versions = graph_def.versions
        g.attrs["versions"] = {"producer": int(versions.producer), "min_consumer": int(versions.min_consumer)}
        feeds = {node: (name, dt) for node, name, dt in inputs}
        producers: dict[str, tuple[Op | None, dict[tuple[str, int], OutputPort]]] = {}
        pending: list[tuple[Op, Any]] = []
        with bulk_build():
            for node in graph_def.node:
                if node.name in feeds:
                    name, dt = feeds[node.name]
                    if node.op != "Placeholder" and node.op != "PlaceholderWithDefault":
                        raise FormatError(f"input {node.name!r} is a {node.op} node, not a Placeholder")
                    if dt is None:
                        dt = dtype_from_enum(int(node.attr["dtype"].type))
                        if "shape" in node.attr:
                            dt += _shape_text(decode_shape(node.attr["shape"].shape))
                    port = g.add_input_port(name, dt)
                    producers[node.name] = (None, {("", 0): port})
                    continue
                if node.name in producers:
                    raise FormatError(f"two nodes are named {node.name!r}")
                given = const_values.get(node.name) if node.op == "Const" else None
                op, ports = self._make_op(g, node, "", given)
                producers[node.name] = (op, ports)
                pending.append((op, node))
            missing = [n for n in feeds if n not in producers]
            if missing:
                raise FormatError(f"no node named {', '.join(map(repr, missing))} in the graph "
                                  f"(placeholders: {', '.join(_placeholders(graph_def)) or 'none'})")

            def resolve(ref: str, user: str) -> OutputPort:
                node, _, index = ref.partition(":")
                entry = producers.get(node)
                if entry is None:
                    raise FormatError(f"node {user!r} reads {ref!r}, which no node produces")
                port = entry[1].get(("", int(index or 0)))
                if port is None:
                    raise FormatError(f"node {user!r} reads {ref!r}, an output its producer does not have")
                return port

            control = {k: v for k, v in producers.items() if v[0] is not None}
            self._connect(g, pending, resolve, control)
            for ref, name in outputs:
                src = resolve(ref, f"<output {name}>")
                g.add_output_port(name, src.dtype)
                g.connect(src, g.output_ports[name])
            self._drop_plumbing(g)
        return g

    # ------------------------------------------------------------------ Identity / NoOp
    def _drop_plumbing(self, g: Graph, keep: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        """Remove ``Identity`` and ``NoOp`` ops (not those named in ``keep``), preserving the order they
        imposed: an op that waited on a dropped op waits on what the dropped op waited on and read."""
        if not self.drop_plumbing:
            return
        for op in list(g.ops.values()):
            if op.type not in PLUMBING or op.name in keep or op.meta.get(PRIVATE_ATTRS_META, {}).get("_class"):
                continue
            if op.type == "Identity" and op.input_ports[0].source is None:
                continue
            ctrl_in = list(op.control_inputs)
            waited = list(ctrl_in)
            if op.type == "Identity":
                producer = op.input_ports[0].source
                assert producer is not None
                if isinstance(producer.owner, Op):
                    waited.append(producer.owner)
            followers = list(op.control_outputs)
            data_followers = []
            if op.type == "Identity":
                data_followers = [p.owner for p in op.output_ports[0].consumers if isinstance(p.owner, Op)]
            for f in followers:
                g.disconnect_control(op, f)
            for w in list(op.control_inputs):
                g.disconnect_control(w, op)
            for f in followers:
                for w in waited:
                    if w is not f and w not in f.control_inputs and w not in f.predecessors():
                        g.connect_control(w, f)
            # data consumers already wait for the producer; they must also wait for what the Identity waited on
            for f in data_followers:
                for w in ctrl_in:
                    if w is not f and w not in f.control_inputs:
                        g.connect_control(w, f)
            if op.type == "Identity":
                producer = op.input_ports[0].source
                assert producer is not None
                g.replace_all_uses(op.output_ports[0], producer)
            g.remove_op(op)


def _function_arg_dtype(arg: Any, where: str) -> str | None:
    if arg.type_attr or arg.type_list_attr or arg.number_attr:
        raise GraphError(f"{where}argument {arg.name!r} has a polymorphic type ({arg.type_attr or arg.type_list_attr}"
                         "); only instantiated functions can be imported")
    return dtype_from_enum(int(arg.type)) + ("_ref" if arg.is_ref else "")


def _placeholders(graph_def: Any) -> list[str]:
    return [n.name for n in graph_def.node if n.op == "Placeholder"]
