"""TensorFlow and Keras models as Amanda graphs in ``amanda/tensorflow/<installed version>``.

Sources: live Keras models, ``.keras`` files, ``tf.function``s (a concrete function, or a function with an input
signature from ``inputs=``), ``tf.Module``s with a ``__call__`` tf.function, SavedModel directories (one
signature, ``serving_default`` unless ``signature=`` says otherwise) and frozen GraphDef ``.pb`` files
(``inputs=``/``outputs=`` name the placeholders and the fetched tensors).  Everything but a frozen GraphDef goes
through a concrete function frozen as TensorFlow's ``convert_variables_to_constants_v2`` freezes it (variables
become ``Const`` ops; functional control flow is not lowered), except that the ``Const`` nodes TensorFlow sees
carry only dtype and shape: each one's value is the variable's own storage (a live model) or its bytes in the
SavedModel's checkpoint, mapped (:mod:`amanda_tf.checkpoint`), so the weights are never copied.  See
``docs/tensorflow.md`` for the representation.
"""

from __future__ import annotations

__all__ = ["load_model", "is_tf_program", "from_concrete_function", "from_graph_def"]

import os
import sys
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from amanda_core.errors import AmandaError, FormatError, first_line
from amanda_core.ir.graph import Graph
from amanda_core.ir.tensor import Tensor, resolve_dtype

from .dtypes import DTypeError, parse_dtype

FAMILY = "amanda/tensorflow"


def _tf() -> Any:
    from .framework import import_tensorflow

    return import_tensorflow()


def _namespace() -> str:
    tf = _tf()
    from .framework import normalize_version

    return f"{FAMILY}/{normalize_version(tf.__version__)}"


def is_tf_program(obj: Any) -> bool:
    """A Keras model or layer, a ``tf.Module``, a ``tf.function`` or a concrete function (imports nothing)."""
    keras = sys.modules.get("keras")
    if keras is not None and isinstance(obj, getattr(keras, "Layer", ())):
        return True
    if "tensorflow" not in sys.modules:
        return False
    tf = sys.modules["tensorflow"]
    from tensorflow.python.eager.polymorphic_function.concrete_function import ConcreteFunction

    return isinstance(obj, (tf.Module, ConcreteFunction)) or _is_tf_function(obj)


def _is_tf_function(obj: Any) -> bool:
    from tensorflow.python.types.core import PolymorphicFunction

    return isinstance(obj, PolymorphicFunction)


# --------------------------------------------------------------------------- input specs

def _spec_parts(spec: Any) -> tuple[str, str | None, tuple[int | None, ...] | None]:
    """``(name, dtype, shape)`` of an ``InputSpec``, a ``(name, dtype, shape)`` tuple or ``"x:float32[1,3]"``
    (symbolic dims are None; dtype names as TensorFlow prints them)."""
    if isinstance(spec, str):
        from amanda_core.plugin.types import parse_input_spec

        spec = parse_input_spec(spec)
    if isinstance(spec, (tuple, list)):
        name, dtype, shape = (list(spec) + [None, None])[:3]
    else:
        name, dtype, shape = spec.name, getattr(spec, "dtype", None), getattr(spec, "shape", None)
    if shape is not None:
        shape = tuple(d if isinstance(d, int) and d >= 0 else None for d in shape)
    if dtype is not None:
        from .dtypes import dtype_from_numpy

        try:
            dtype = parse_dtype(str(dtype)).name
        except DTypeError:
            try:
                from amanda_core.ir.tensor import resolve_dtype

                dtype = dtype_from_numpy(resolve_dtype(str(dtype)))
            except (DTypeError, TypeError, ValueError):
                raise AmandaError(f"--input {name}: unknown element type {dtype!r}") from None
    return str(name), dtype, shape


def _fit(name: str, dtype: str | None, shape: tuple[int | None, ...] | None, want_dtype: str,
         want_shape: tuple[int | None, ...] | None) -> None:
    """Raise when an ``--input`` does not fit what the model says about that input."""
    if dtype is not None and dtype != want_dtype:
        raise AmandaError(f"--input {name}: the model's input {name!r} is {want_dtype}, not {dtype}")
    if shape is not None and want_shape is not None:
        fits = len(shape) == len(want_shape) and all(
            a is None or b is None or a == b for a, b in zip(shape, want_shape))
        if not fits:
            text = ",".join("?" if d is None else str(d) for d in want_shape)
            raise AmandaError(f"--input {name}: shape [{','.join('?' if d is None else str(d) for d in shape)}] "
                              f"does not fit the model's input {name!r} of shape [{text}]")


def _merged_shape(given: tuple[int | None, ...] | None, model: tuple[int | None, ...] | None
                  ) -> tuple[int | None, ...] | None:
    if given is None:
        return model
    if model is None:
        return given
    return tuple(a if a is not None else b for a, b in zip(given, model))


# --------------------------------------------------------------------------- concrete functions

def _output_names(structured: Any, flat_count: int, single: str | None = None) -> list[str]:
    _tf()
    from tensorflow.python.util import nest

    paths = nest.flatten_with_joined_string_paths(structured, expand_composites=True)
    if len(paths) != flat_count:
        return [f"output_{i}" for i in range(flat_count)]
    if len(paths) == 1 and paths[0][0] == "":
        return [single or "output_0"]
    names = []
    for i, (path, _) in enumerate(paths):
        if isinstance(structured, (list, tuple)) and path.isdigit():
            names.append(f"output_{path}")
        else:
            names.append(path.replace("/", "_") if path else f"output_{i}")
    return names


def _input_names(cf: Any, frozen: Any) -> list[str]:
    _tf()
    from tensorflow.python.util import nest

    paths = nest.flatten_with_tuple_paths(cf.structured_input_signature)
    placeholders = [t.op.name for t in frozen.inputs]
    names: list[str] = []
    for i, ph in enumerate(placeholders):
        name = ph
        if i < len(paths):
            path, spec = paths[i]
            if len(path) >= 2 and path[0] == 1 and isinstance(path[1], str):
                name = path[1]  # keyword argument (SavedModel signatures)
            elif getattr(spec, "name", None):
                name = spec.name
        names.append(name)
    return names


Weights = Callable[[Any], "np.ndarray | Tensor | None"]
"""Where the value of a variable a function reads comes from: the variable -> its value (an array or a lazy
:class:`Tensor`), or None to read the variable itself."""


def _live_value(var: Any) -> np.ndarray:
    """The variable's value as a read-only array sharing TensorFlow's storage (no copy; a later assignment to
    the variable gives it new storage and leaves this array as it was)."""
    array = np.asarray(var.read_value())
    if array.flags.writeable:
        array = array.view()
        array.flags.writeable = False
    return array


def _freeze(cf: Any, weights: Weights | None) -> tuple[Any, dict[str, Any]]:
    """The function frozen with ``lower_control_flow=False``, and ``{Const node name: value}`` of the variables
    it read.  Each variable's ``Const`` carries its dtype and shape but no data (TensorFlow's shape inference
    needs no more); its value is ``weights(var)`` or the variable's storage, never copied into a protobuf."""
    from tensorflow.python.framework import convert_to_constants as c2c
    from tensorflow.python.framework import tensor_shape
    from tensorflow.python.ops import resource_variable_ops

    values: dict[int, Any] = {}

    class _Data(c2c._FunctionConverterDataInEager):  # type: ignore[misc,name-defined]
        def _eval(self, tensor: Any) -> Any:
            if not isinstance(tensor, resource_variable_ops.BaseResourceVariable):
                return super()._eval(tensor)
            value = weights(tensor) if weights is not None else None
            if value is None:
                value = _live_value(tensor)
            values[id(tensor)] = value
            nd = value.dtype if isinstance(value, np.ndarray) else np.dtype(resolve_dtype(value.dtype))
            return np.broadcast_to(np.zeros((), nd), tuple(value.shape))  # dtype and shape only: no memory

    data = _Data(func=cf, lower_control_flow=False, aggressive_inlining=False)
    by_index = {}
    for idx, captured in enumerate(cf.captured_inputs):
        for var in cf.graph.variables:
            if var.handle is captured and id(var) in values:
                by_index[idx] = values[id(var)]
    graph = c2c._GraphDef(data.graph_def)
    consts: dict[str, Any] = {}
    for name, td in data.tensor_data.items():
        node = graph.nodes[name]
        if td.index not in by_index:
            node.convert_variable_to_constant(None, td)
            continue
        if not isinstance(node, c2c._VarHandle):
            raise TypeError(f"capture {name!r} is a {type(node).__name__}")
        # as _VarHandle.convert_variable_to_constant, the value's data left out
        out = node.converted_self().node
        out.Clear()
        out.name = node.node.name
        out.op = "Const"
        out.attr["dtype"].CopyFrom(td.dtype_attr)
        proto = out.attr["value"].tensor
        proto.dtype = td.dtype
        proto.tensor_shape.CopyFrom(tensor_shape.as_shape(td.numpy.shape).as_proto())
        for edge in node.outgoing_edges:
            edge.destination.convertible.convert_variable_to_constant(edge, td)
        consts[name] = by_index[td.index]
    converted = {td.index for td in data.tensor_data.values() if td.index is not None}
    frozen = c2c._construct_concrete_function(cf, graph.converted_self().graph_def, converted)
    return frozen, consts


_LOWERING = "_lower_using_switch_merge"
_BRANCHES = ("then_branch", "else_branch", "cond", "body")


def _restore_lowering(frozen: Any, source: Any) -> None:
    """Freezing with ``lower_control_flow=False`` marks every ``If``/``While`` with ``_lower_using_switch_merge``
    false.  That mark decides how TensorFlow runs the op: lowered to ``Switch``/``Merge`` and optimised with the
    graph around it, or called as a function whose body grappler optimises apart (it fuses other kernels there,
    and results differ in the last bits).  Give each such node, at the top level and in the function library,
    the mark it had in the source graph, so the graph runs as the source does.  A node is known by the functions
    it calls (its branches, or its condition and body), which freezing keeps, while it renames nodes it inlines."""
    def key(node: Any) -> tuple[str, ...]:
        return (node.op,) + tuple(node.attr[a].func.name for a in _BRANCHES if a in node.attr)

    def nodes(graph_def: Any) -> Iterator[Any]:
        yield from graph_def.node
        for f in graph_def.library.function:
            yield from f.node_def

    wanted = {key(n): n.attr[_LOWERING] for n in nodes(source) if _LOWERING in n.attr}
    for node in nodes(frozen):
        if _LOWERING in node.attr and key(node) in wanted:
            node.attr[_LOWERING].CopyFrom(wanted[key(node)])


def from_concrete_function(cf: Any, *, input_names: Sequence[str] | None = None,
                           output_names: Sequence[str] | None = None, single_output: str | None = None,
                           weights: Weights | None = None) -> Graph:
    """A concrete function, frozen (variables as ``Const``, control flow kept functional), as a graph.  The
    values of the variables it reads are ``weights(var)`` when that gives one, else the variables' own storage
    (shared, not copied)."""
    _tf()
    try:
        frozen, consts = _freeze(cf, weights)
    except Exception as e:  # TensorFlow raises many types here
        raise AmandaError(f"TensorFlow cannot freeze the function {getattr(cf, 'name', '')!r}: "
                          f"{first_line(e)}") from None
    graph_def = frozen.graph.as_graph_def(add_shapes=True)
    _restore_lowering(graph_def, cf.graph.as_graph_def())
    ins = list(input_names) if input_names is not None else _input_names(cf, frozen)
    outs = list(output_names) if output_names is not None else _output_names(
        cf.structured_outputs, len(frozen.outputs), single_output)
    if len(outs) != len(frozen.outputs):
        raise AmandaError(f"{len(outs)} output name(s) given for {len(frozen.outputs)} output(s)")
    inputs = []
    for t, name in zip(frozen.inputs, ins):
        shape = None if t.shape.rank is None else [-1 if d is None else d for d in t.shape.as_list()]
        dt = t.dtype.name + ("" if shape is None else "[" + ",".join("?" if d < 0 else str(d) for d in shape) + "]")
        inputs.append((t.op.name, name, dt))
    outputs = [(t.name, name) for t, name in zip(frozen.outputs, outs)]
    return from_graph_def(graph_def, inputs=inputs, outputs=outputs, const_values=consts)


def from_graph_def(graph_def: Any, *, inputs: Sequence[tuple[str, str, str | None]],
                   outputs: Sequence[tuple[str, str]], const_values: Mapping[str, Any] | None = None) -> Graph:
    """A GraphDef as a graph: ``inputs`` are ``(placeholder node, input name, dtype string or None)``,
    ``outputs`` ``(tensor name, output name)``; ``const_values`` the values of top-level ``Const`` nodes (by
    name) whose ``value`` attribute carries no data."""
    from .graphdef import GraphBuilder

    names = [n for _, n, _ in inputs] + [n for _, n in outputs]
    if len(set(n for _, n, _ in inputs)) != len(inputs) or len(set(n for _, n in outputs)) != len(outputs):
        raise AmandaError(f"input and output names must be unique, got {names}")
    builder = GraphBuilder(graph_def.library)
    return builder.build_graph_def(graph_def, _namespace(), inputs, outputs, const_values=const_values)


# --------------------------------------------------------------------------- sources

def _keras_specs(model: Any, inputs: Sequence[Any] | None) -> tuple[list[Any], list[str]]:
    tf = _tf()
    model_inputs = getattr(model, "inputs", None)
    if not model_inputs:
        raise AmandaError(f"the Keras model {getattr(model, 'name', '')!r} has no defined inputs; build it on an "
                          "Input (or call it once) before converting it")
    given = {}
    for spec in inputs or ():
        name, dtype, shape = _spec_parts(spec)
        given[name] = (dtype, shape)
    specs, names = [], []
    for t in model_inputs:
        name = _keras_input_name(t)
        want_dtype = tf.as_dtype(t.dtype).name
        want_shape = tuple(t.shape)
        dtype, shape = given.pop(name, (None, None))
        _fit(name, dtype, shape, want_dtype, want_shape)
        specs.append(tf.TensorSpec(_merged_shape(shape, want_shape), want_dtype, name=name))
        names.append(name)
    if given:
        raise AmandaError(f"--input {', '.join(given)}: the model has no such input (its inputs: "
                          f"{', '.join(names)})")
    return specs, names


def _keras_input_name(t: Any) -> str:
    """The name of the ``InputLayer`` that makes the Keras tensor ``t`` (``Input(name=...)``, else Keras's
    ``input_layer``, ``input_layer_1`` ...), or the tensor's own name."""
    history = getattr(t, "_keras_history", None)
    layer = getattr(history, "operation", None) if history is not None else None
    name = getattr(layer, "name", None)
    return str(name) if name else str(t.name)


def _keras_output_names(model: Any) -> list[str]:
    names = list(getattr(model, "output_names", None) or [])
    outputs = getattr(model, "outputs", None) or []
    if len(names) != len(outputs) or len(set(names)) != len(names):
        names = [f"output_{i}" for i in range(len(outputs))]
    return names


def from_keras(model: Any, inputs: Sequence[Any] | None = None) -> Graph:
    tf = _tf()
    specs, names = _keras_specs(model, inputs)

    if len(specs) == 1:
        def call(x: Any) -> Any:
            return model(x, training=False)
    else:
        def call(*xs: Any) -> Any:  # type: ignore[misc]
            return model(list(xs), training=False)
    cf = tf.function(call).get_concrete_function(*specs)
    outs = _keras_output_names(model)
    flat = tf.nest.flatten(cf.structured_outputs, expand_composites=True)
    if len(outs) != len(flat):
        outs = _output_names(cf.structured_outputs, len(flat))
    return from_concrete_function(cf, input_names=names, output_names=outs)


def _function_specs(inputs: Sequence[Any]) -> list[Any]:
    tf = _tf()
    specs = []
    for spec in inputs:
        name, dtype, shape = _spec_parts(spec)
        if dtype is None:
            raise AmandaError(f"--input {name}: a tf.function needs the element type of each input "
                              f"(write {name}:float32[...])")
        specs.append(tf.TensorSpec(shape, dtype, name=name))
    return specs


def _from_function(fn: Any, inputs: Sequence[Any] | None) -> Graph:
    if getattr(fn, "input_signature", None) is not None:  # its own signature; inputs= must fit it
        return _from_concrete(fn.get_concrete_function(), inputs)
    if inputs:
        try:
            cf = fn.get_concrete_function(*_function_specs(inputs))
        except (TypeError, ValueError) as e:
            raise AmandaError(f"--input: the inputs do not fit the function: {first_line(e)}") from None
    else:
        try:
            cf = fn.get_concrete_function()
        except (TypeError, ValueError) as e:
            raise AmandaError(f"the tf.function {getattr(fn, '__name__', '')!r} has no input signature; give its "
                              f"inputs (inputs=[...] or --input NAME:DTYPE[DIMS]): {e}") from None
    return _from_concrete(cf, inputs)


def _from_concrete(cf: Any, inputs: Sequence[Any] | None, weights: Weights | None = None) -> Graph:
    tf = _tf()
    graph = from_concrete_function(cf, weights=weights)
    for spec in inputs or ():
        name, dtype, shape = _spec_parts(spec)
        port = graph.input_ports.get(name)
        if port is None:
            raise AmandaError(f"--input {name}: the function has no such input (its inputs: "
                              f"{', '.join(graph.input_ports.names())})")
        t = parse_dtype(str(port.dtype))
        _fit(name, dtype, shape, t.name, t.shape)
    del tf
    return graph


def _checkpoint_weights(path: str, signature: str, cf: Any) -> Weights | None:
    """The values of the variables the signature function ``cf`` reads, as tensors of the SavedModel's
    checkpoint (mapped, read lazily): the function's captures are the variables the SavedModel's object graph
    binds to it (``bound_inputs``, node ids), and the checkpoint's object graph gives each node id's key.  None
    when the SavedModel does not say (a TensorFlow 1 SavedModel, no object graph, a bundle this reader does not
    map): the caller then restores the variables."""
    from tensorflow.core.protobuf import saved_model_pb2

    from .checkpoint import Bundle, UnsupportedBundle

    pb = os.path.join(path, "saved_model.pb")
    prefix = os.path.join(path, "variables", "variables")
    if not os.path.isfile(pb):
        return None
    if not os.path.isfile(prefix + ".index"):
        return None if cf.captured_inputs else (lambda var: None)
    saved = saved_model_pb2.SavedModel()
    with open(pb, "rb") as f:
        saved.ParseFromString(f.read())
    if len(saved.meta_graphs) != 1:
        return None
    objects = saved.meta_graphs[0].object_graph_def
    if not objects.nodes:
        return None

    def child(node_id: int, name: str) -> int | None:
        for ref in objects.nodes[node_id].children:
            if ref.local_name == name:
                return int(ref.node_id)
        return None

    sigs = child(0, "signatures")
    node = child(sigs, signature) if sigs is not None else None
    if node is None or objects.nodes[node].WhichOneof("kind") != "bare_concrete_function":
        return None
    fn = objects.concrete_functions.get(objects.nodes[node].bare_concrete_function.concrete_function_name)
    if fn is None or len(fn.bound_inputs) != len(cf.captured_inputs):
        return None
    try:
        bundle = Bundle(prefix)
        checkpoint = bundle.object_graph()
    except UnsupportedBundle:
        return None
    if checkpoint is None:
        return None
    node_of = {id(t): int(n) for t, n in zip(cf.captured_inputs, fn.bound_inputs)}

    def weights(var: Any) -> Any:
        node_id = node_of.get(id(var.handle))
        if node_id is None or node_id >= len(checkpoint.nodes):
            return None
        keys = [a.checkpoint_key for a in checkpoint.nodes[node_id].attributes if a.name == "VARIABLE_VALUE"]
        if not keys:
            raise FormatError(f"{path}: the checkpoint has no value for the variable {var.name!r}")
        value = bundle.tensor(keys[0])
        want = var.dtype.as_numpy_dtype
        got = value.dtype if isinstance(value, np.ndarray) else resolve_dtype(value.dtype)
        shape_fits = var.shape.rank is None or (
            len(var.shape) == len(value.shape)
            and all(d is None or d == v for d, v in zip(var.shape.as_list(), value.shape)))
        if np.dtype(got) != np.dtype(want) or not shape_fits:
            raise FormatError(f"{path}: the checkpoint's {keys[0]!r} is {np.dtype(got).name}{list(value.shape)}, "
                              f"the variable {var.name!r} it restores is {np.dtype(want).name}{var.shape}")
        return value

    return weights


def _saved_model(path: str, signature: str | None, inputs: Sequence[Any] | None) -> Graph:
    tf = _tf()
    if not os.path.isdir(path):
        raise FormatError(f"{path}: not a directory")
    if not (os.path.exists(os.path.join(path, "saved_model.pb"))
            or os.path.exists(os.path.join(path, "saved_model.pbtxt"))):
        raise FormatError(f"{path}: not a SavedModel directory (no saved_model.pb in it)")
    name = signature or "serving_default"

    def signature_of(loaded: Any) -> Any:
        sigs = dict(loaded.signatures)
        if name not in sigs:
            raise FormatError(f"{path}: no signature {name!r} in the SavedModel (signatures: "
                              f"{', '.join(sorted(sigs)) or 'none'}; --signature NAME chooses one)")
        return sigs[name]

    # the graph without its weights (variables left unrestored), then the weights from the mapped checkpoint
    try:
        loaded = tf.saved_model.load(path, options=tf.saved_model.LoadOptions(experimental_skip_checkpoint=True))
    except Exception as e:
        raise FormatError(f"{path}: TensorFlow cannot load the SavedModel: {first_line(e)}") from None
    cf = signature_of(loaded)
    weights = _checkpoint_weights(path, name, cf)
    if weights is None:  # not mappable: restored by TensorFlow, the values shared with its variables
        try:
            loaded = tf.saved_model.load(path)
        except Exception as e:
            raise FormatError(f"{path}: TensorFlow cannot load the SavedModel: {first_line(e)}") from None
        cf = signature_of(loaded)
    graph = _from_concrete(cf, inputs, weights)
    record = os.path.join(path, "assets", "amanda_provenance.json")
    if os.path.isfile(record):  # written by Amanda's exporter: what made this SavedModel
        import json

        try:
            with open(record, encoding="utf-8") as f:
                graph.attrs["amanda_provenance"] = json.load(f)
        except (OSError, ValueError):
            pass  # not a record Amanda can read: leave it
    return graph


def _frozen_pb(path: str, inputs: Sequence[Any] | None, outputs: Sequence[str] | None) -> Graph:
    _tf()
    from google.protobuf.message import DecodeError
    from tensorflow.core.framework import graph_pb2

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise FormatError(f"{path}: cannot read: {e.strerror}") from None
    graph_def = graph_pb2.GraphDef()
    try:
        graph_def.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as e:
        raise FormatError(f"{path}: not a GraphDef: {first_line(e)}") from None
    if not graph_def.node:
        raise FormatError(f"{path}: not a GraphDef (no nodes)")
    nodes = {n.name: n for n in graph_def.node}
    feeds: list[tuple[str, str, str | None]] = []
    if inputs:
        for spec in inputs:
            name, dtype, shape = _spec_parts(spec)
            node_name = name[:-2] if name.endswith(":0") else name
            node = nodes.get(node_name)
            if node is None or node.op not in ("Placeholder", "PlaceholderWithDefault"):
                raise AmandaError(f"--input {name}: {path} has no placeholder {node_name!r} (placeholders: "
                                  f"{', '.join(n for n in nodes if nodes[n].op == 'Placeholder') or 'none'})")
            want_dtype, want_shape = _placeholder_type(node)
            _fit(name, dtype, shape, want_dtype, want_shape)
            merged = _merged_shape(shape, want_shape)
            dt = want_dtype + ("" if merged is None else "[" + ",".join("?" if d is None else str(d)
                                                                           for d in merged) + "]")
            feeds.append((node_name, node_name, dt))
    else:
        feeds = [(n.name, n.name, None) for n in graph_def.node if n.op == "Placeholder"]
    if outputs:
        fetches = []
        for out in outputs:
            node_name, _, index = out.partition(":")
            if node_name not in nodes:
                raise AmandaError(f"--output {out}: {path} has no node {node_name!r}")
            fetches.append((f"{node_name}:{index or 0}", out if not out.endswith(":0") else node_name))
    else:
        fetches = _sinks(graph_def)
        if not fetches:
            raise AmandaError(f"{path}: cannot tell the outputs of the graph; name them (--output NAME)")
    return from_graph_def(graph_def, inputs=feeds, outputs=fetches)


def _placeholder_type(node: Any) -> tuple[str, tuple[int | None, ...] | None]:
    from .attrs import decode_shape
    from .dtypes import dtype_from_enum

    dtype = dtype_from_enum(int(node.attr["dtype"].type))
    shape = decode_shape(node.attr["shape"].shape) if "shape" in node.attr else None
    return dtype, None if shape is None else tuple(None if d < 0 else d for d in shape)


def _sinks(graph_def: Any) -> list[tuple[str, str]]:
    """The first output of every node nobody reads (not Const, NoOp, Placeholder, Assert)."""
    read = set()
    for n in graph_def.node:
        for ref in n.input:
            read.add(ref.lstrip("^").split(":")[0])
    skip = {"Const", "NoOp", "Placeholder", "Assert", "SaveV2", "RestoreV2"}
    return [(f"{n.name}:0", n.name) for n in graph_def.node if n.name not in read and n.op not in skip]



def load_model(source: Any, *, inputs: Sequence[Any] | None = None, outputs: Sequence[str] | None = None,
               signature: str | None = None, **options: Any) -> Graph:
    """A TensorFlow program as a graph in ``amanda/tensorflow/<installed version>``.

    ``source``: a SavedModel directory, a ``.keras`` file, a frozen GraphDef ``.pb``, a Keras model, a
    ``tf.function`` (with ``inputs=`` when it has no input signature), a concrete function or a ``tf.Module``
    whose ``__call__`` is a tf.function.  ``inputs``: ``InputSpec``s (or ``"x:float32[1,3]"`` strings) that
    name and type the inputs (a ``.pb``'s placeholders) and may fix unknown dims; ``outputs``: tensor names to
    fetch from a ``.pb``; ``signature``: the SavedModel signature (default ``serving_default``)."""
    if options:
        raise AmandaError(f"the TensorFlow importer takes no option {', '.join(sorted(options))} "
                          "(it takes inputs, outputs, signature)")
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if os.path.isdir(path):
            return _saved_model(path, signature, inputs)
        if signature is not None:
            raise AmandaError(f"{path}: signature {signature!r} given, but only a SavedModel directory has "
                              "signatures to choose from")
        if not os.path.exists(path):
            raise FormatError(f"{path}: no such file or directory")
        if path.lower().endswith(".keras"):
            keras = _keras()
            try:
                model = keras.models.load_model(path, compile=False)
            except Exception as e:
                raise FormatError(f"{path}: Keras cannot load the model: {first_line(e)}") from None
            return from_keras(model, inputs)
        if path.lower().endswith(".pb"):
            return _frozen_pb(path, inputs, outputs)
        raise FormatError(f"{path}: not a TensorFlow model (a SavedModel directory, .keras or .pb file)")
    if outputs:
        raise AmandaError("outputs= names the tensors to fetch from a frozen GraphDef; a live model has its own")
    if signature is not None:
        raise AmandaError("signature= names one of a SavedModel's signatures; a live model has none")
    tf = _tf()
    from tensorflow.python.eager.polymorphic_function.concrete_function import ConcreteFunction

    keras = sys.modules.get("keras")
    if keras is not None and isinstance(source, keras.Model):
        return from_keras(source, inputs)
    if isinstance(source, ConcreteFunction):
        return _from_concrete(source, inputs)
    if _is_tf_function(source):
        return _from_function(source, inputs)
    call = type(source).__dict__.get("__call__") if isinstance(source, tf.Module) else None
    if call is not None and _is_tf_function(call):
        return _from_function(source.__call__, inputs)
    raise AmandaError(f"cannot import a {type(source).__name__} as a TensorFlow model: give a Keras model, a "
                      "tf.function, a concrete function, a tf.Module with a tf.function __call__, or a path")


def _keras() -> Any:
    _tf()
    import keras

    return keras
