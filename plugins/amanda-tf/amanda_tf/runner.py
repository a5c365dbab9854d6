"""Running ``amanda/tensorflow`` graphs with TensorFlow on the CPU, for ``amanda check`` (the
``amanda_runners`` hook).

The graph is written as a GraphDef (:func:`amanda_tf.exporter.to_graph_def`), imported into a function with
``tf.compat.v1.wrap_function`` and pruned to the graph's inputs and outputs; it runs eagerly on the given arrays.
"""

from __future__ import annotations

__all__ = ["run", "run_each", "example_inputs", "Runnable"]

from typing import Any, Callable, Collection, Mapping

import numpy as np

from amanda_core import Graph
from amanda_core.errors import AmandaError, first_line

from .dtypes import DTypeError, parse_dtype


class Runnable:
    """A graph made ready to run once, then called on many inputs."""

    def __init__(self, graph: Graph) -> None:
        from .exporter import concrete_function

        self.function, self.parts = concrete_function(graph)
        self.dtypes = [parse_dtype(d) for d in self.parts.input_dtypes]
        self.variants = dict(graph.attrs.get("variant_values") or {})  # sequences and optionals (sequences.py)

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        from .framework import import_tensorflow

        tf = import_tensorflow()
        missing = [n for n in self.parts.inputs if n not in inputs]
        if missing:
            raise AmandaError(f"no value given for graph input(s) {', '.join(missing)}")
        args = []
        for name, t in zip(self.parts.inputs, self.dtypes):
            if name in self.variants:
                from .sequences import to_variant

                args.append(to_variant(tf, inputs[name], self.variants[name]))
                continue
            value = np.asarray(inputs[name])
            if t.shape is not None and (value.ndim != len(t.shape) or any(
                    d is not None and d != s for d, s in zip(t.shape, value.shape))):
                raise AmandaError(f"input {name!r}: an array of shape {list(value.shape)} does not fit {t}")
            try:
                args.append(tf.constant(value, dtype=t.name))
            except (TypeError, ValueError) as e:
                raise AmandaError(f"input {name!r}: {e}") from None
        try:
            values = self.function(*args)
        except (tf.errors.OpError, ValueError, TypeError) as e:
            raise AmandaError(f"TensorFlow failed to run the graph: {first_line(e)}") from None
        if self.variants:
            from .sequences import from_variant

            return {n: from_variant(tf, v, self.variants[n]) if n in self.variants else v.numpy()
                    for n, v in zip(self.parts.outputs, values)}
        return {n: v.numpy() for n, v in zip(self.parts.outputs, values)}


def run(graph: Graph, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The graph's outputs (by output name, in order) for ``inputs`` (by input name), computed by TensorFlow."""
    return Runnable(graph)(inputs)


EACH_BATCH = 16
"""How many ops' values :func:`run_each` fetches per run (each batch is one run of a pruned function)."""


def run_each(graph: Graph, inputs: Mapping[str, np.ndarray], callback: Callable[[str, dict[str, Any]], Any],
             wanted: Collection[str] | None = None) -> None:
    """Run the graph and call ``callback(op_name, {output_port_name: array})`` for each top-level op (in
    topological order; ``wanted``: only these op names) with the values TensorFlow computes for its outputs.

    The GraphDef is imported once; each run fetches the tensors of :data:`EACH_BATCH` ops (a function pruned to
    them), so no more than one batch of values is held at once.  The callback returning True stops the run."""
    from .exporter import _port_index, to_graph_def
    from .framework import import_tensorflow

    tf = import_tensorflow()
    parts = to_graph_def(graph)

    def body() -> None:
        tf.graph_util.import_graph_def(parts.graph_def, name="")

    try:
        wrapped = tf.compat.v1.wrap_function(body, [])
    except (ValueError, TypeError, tf.errors.OpError) as e:
        raise AmandaError(f"TensorFlow refuses the graph: {str(e).strip().splitlines()[0]}") from None
    g = wrapped.graph
    feeds = [g.get_tensor_by_name(f"{n}:0") for n in parts.inputs]
    missing = [n for n in parts.inputs if n not in inputs]
    if missing:
        raise AmandaError(f"no value given for graph input(s) {', '.join(missing)}")
    args = [tf.constant(np.asarray(inputs[n]), dtype=parse_dtype(d).name)
            for n, d in zip(parts.inputs, parts.input_dtypes)]
    order: list[tuple[str, list[tuple[str, Any]]]] = []
    for op in graph.topological_order():
        if wanted is not None and op.name not in wanted:
            continue
        listed = []
        for q in op.output_ports:
            try:
                listed.append((q.name, g.get_tensor_by_name(f"{op.name}:{_port_index(q)}")))
            except (KeyError, ValueError):
                continue
        if listed:
            order.append((op.name, listed))
    for start in range(0, len(order), EACH_BATCH):
        batch = order[start:start + EACH_BATCH]
        fetches = [t for _, listed in batch for _, t in listed]
        try:
            values = wrapped.prune(feeds, fetches)(*args)
        except (tf.errors.OpError, ValueError, TypeError) as e:
            raise AmandaError(f"TensorFlow failed to run the graph: {first_line(e)}") from None
        values = list(values)
        i = 0
        for op_name, listed in batch:
            got = {pname: values[i + k].numpy() for k, (pname, _) in enumerate(listed)}
            for k in range(len(listed)):
                values[i + k] = None
            i += len(listed)
            if callback(op_name, got) is True:
                return
        del values


def _dim(dims: Mapping[str, int], port: str, axis: int) -> int:
    for key in (f"{port}:{axis}", f"{port}.{axis}", "?", *(("batch", "N") if axis == 0 else ())):
        if key in dims:
            return int(dims[key])
    return 1


def example_inputs(graph: Graph, seed: int = 0, dims: Mapping[str, int] | None = None) -> dict[str, np.ndarray]:
    """Seeded random inputs that fit the graph's input ports: floats from a standard normal, integers in [0, 3)
    (safe as token ids, indices and counts), booleans at random.  An unknown dimension (``?``) at axis ``i`` of
    input ``x`` is ``dims["x:i"]``, else ``dims["?"]``, else (axis 0) ``dims["batch"]`` or ``dims["N"]``,
    else 1."""
    rng = np.random.default_rng(seed)
    dims = dict(dims or {})
    out: dict[str, np.ndarray] = {}
    for port in graph.input_ports:
        if port.dtype is None:
            raise AmandaError(f"graph input {port.name!r} has no type, so no example value can be made for it")
        try:
            t = parse_dtype(str(port.dtype))
        except DTypeError as e:
            raise AmandaError(f"graph input {port.name!r}: {e}") from None
        if t.shape is None:
            raise AmandaError(f"graph input {port.name!r} has no known rank ({t}); give its value instead")
        shape = [d if d is not None else _dim(dims, port.name, i) for i, d in enumerate(t.shape)]
        dtype = t.numpy_dtype
        if dtype is None:
            raise AmandaError(f"graph input {port.name!r}: cannot make up values of {t}")
        if dtype.kind == "f" or dtype.name in ("bfloat16", "float16"):
            value = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind in "iu":
            value = rng.integers(0, 3, size=shape).astype(dtype)
        elif dtype.kind == "b":
            value = rng.integers(0, 2, size=shape).astype(bool)
        elif dtype.kind == "c":
            value = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
        else:
            raise AmandaError(f"graph input {port.name!r}: cannot make up values of {t}")
        out[port.name] = value
    return out
