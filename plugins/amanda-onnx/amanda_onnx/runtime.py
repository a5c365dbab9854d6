"""Running ONNX graphs with onnxruntime, for ``amanda check`` (the ``amanda_runners`` hook).

onnxruntime is an optional dependency (``pip install amanda-onnx[runtime]``); it is imported only here, when a
graph is run.
"""

from __future__ import annotations

__all__ = ["run", "run_each", "example_inputs", "initializer_inputs"]

import os
from typing import Any, Callable, Collection, Mapping, Sequence

import numpy as np

from amanda_core import Graph
from amanda_core.errors import AmandaError

from .dtypes import parse_dtype
from .structural import INITIALIZER, STRUCTURAL_TYPES


def _session(graph: Graph, extra_outputs: Sequence[str] = ()) -> Any:
    try:
        import onnxruntime as ort
    except ImportError:
        raise AmandaError("running ONNX graphs needs onnxruntime: pip install 'amanda-onnx[runtime]'") from None
    from amanda_core.errors import GraphError

    from .exporter import save_model, to_model

    options = ort.SessionOptions()
    options.log_severity_level = 3
    try:
        # every tensor embedded: the session does not depend on the current folder to find external data files
        model = to_model(graph, external_data=False)
        _expose(model, extra_outputs)
    except GraphError:  # over protobuf's 2 GB: written with its external data to a folder of its own
        import tempfile

        with tempfile.TemporaryDirectory(prefix="amanda-ort-") as tmp:
            path = os.path.join(tmp, "model.onnx")
            save_model(graph, path, external_data=True)
            if extra_outputs:
                import onnx

                big = onnx.load(path, load_external_data=False)
                _expose(big, extra_outputs)
                onnx.save(big, path)
            try:
                return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
            except Exception as e:
                raise AmandaError(f"onnxruntime cannot load the model: {_first_line(e)}") from None
    try:
        return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own exception types
        raise AmandaError(f"onnxruntime cannot load the model: {_first_line(e)}") from None


def _expose(model: Any, names: Sequence[str]) -> None:
    """Make each value in ``names`` a graph output too (untyped: onnxruntime takes the type it infers)."""
    if not names:
        return
    import onnx

    have = {o.name for o in model.graph.output}
    model.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names if n not in have)


def _first_line(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    return "; ".join(lines) if lines else type(e).__name__


def initializer_inputs(graph: Graph) -> set[str]:
    """Graph inputs that an initializer also gives (IR < 4 models): they have a value, and nothing needs to feed
    them."""
    out = set()
    for op in graph.ops.values():
        if op.attrs.get("graph_input") and op.type == INITIALIZER:
            meta = op.meta if isinstance(op.meta, dict) else {}
            out.add(meta.get("name") or op.name)
    return out


def run(graph: Graph, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The graph's outputs (by output name) for ``inputs`` (by input name), computed by onnxruntime."""
    session = _session(graph)
    optional = initializer_inputs(graph)
    wanted = [i.name for i in session.get_inputs() if i.name in inputs or i.name not in optional]
    missing = [n for n in wanted if n not in inputs]
    if missing:
        raise AmandaError(f"no value given for graph input(s) {', '.join(missing)}")
    try:
        values = session.run(None, {n: inputs[n] for n in wanted})
    except Exception as e:
        raise AmandaError(f"onnxruntime failed to run the model: {_first_line(e)}") from None
    return {o.name: v for o, v in zip(session.get_outputs(), values)}


EACH_BATCH = 16
"""How many ops' values :func:`run_each` asks onnxruntime for at a time (each batch is one run of the session)."""


def run_each(graph: Graph, inputs: Mapping[str, np.ndarray], callback: Callable[[str, dict[str, Any]], Any],
             wanted: Collection[str] | None = None) -> None:
    """Run the graph and call ``callback(op_name, {output_port_name: array})`` for each top-level op (in
    topological order; ``wanted``: only these op names) as onnxruntime computes it.

    Every op output becomes an output of one session (named ``<op>:<port>``); the session is run for
    :data:`EACH_BATCH` ops' values at a time, so no more than one batch of values is held at once (onnxruntime
    computes what a run asks for and frees its intermediates).  The callback returning True stops the run."""
    work = graph.copy()
    order: list[tuple[str, list[tuple[str, str]]]] = []
    for op in work.topological_order():
        if op.namespace is None and op.type in STRUCTURAL_TYPES:
            continue
        outs: dict[str, str] = {}
        listed: list[tuple[str, str]] = []
        for q in op.output_ports:
            value = f"{op.name}:{q.name}"
            outs[q.name] = value
            if wanted is None or op.name in wanted:
                listed.append((q.name, value))
        op.meta = {**op.meta, "name": op.name, "outputs": outs}
        if listed:
            order.append((op.name, listed))
    session = _session(work, extra_outputs=[v for _, listed in order for _, v in listed])
    optional = initializer_inputs(graph)
    names = [i.name for i in session.get_inputs() if i.name in inputs or i.name not in optional]
    missing = [n for n in names if n not in inputs]
    if missing:
        raise AmandaError(f"no value given for graph input(s) {', '.join(missing)}")
    feeds = {n: inputs[n] for n in names}
    for start in range(0, len(order), EACH_BATCH):
        batch = order[start:start + EACH_BATCH]
        fetch = [v for _, listed in batch for _, v in listed]
        try:
            values = session.run(fetch, feeds)
        except Exception as e:
            raise AmandaError(f"onnxruntime failed to run the model: {_first_line(e)}") from None
        got = dict(zip(fetch, values))
        del values
        for op_name, listed in batch:
            stop = callback(op_name, {pname: got.pop(v) for pname, v in listed})
            if stop is True:
                return
        del got


def example_inputs(graph: Graph, seed: int = 0, dims: Mapping[str, int] | None = None) -> dict[str, np.ndarray]:
    """Random inputs that fit the graph's input ports: floats from a standard normal, integers in [0, 3),
    booleans at random; a symbolic or unknown dimension is ``dims[name]`` or 1.  Inputs an initializer gives a
    value (IR < 4) are left out."""
    rng = np.random.default_rng(seed)
    dims = dict(dims or {})
    out: dict[str, np.ndarray] = {}
    skip = initializer_inputs(graph)
    for port in graph.input_ports:
        if port.name in skip:  # an initializer gives its value
            continue
        if port.dtype is None:
            raise AmandaError(f"graph input {port.name!r} has no type, so no example value can be made for it")
        t = parse_dtype(str(port.dtype))
        if not t.is_tensor:
            raise AmandaError(f"graph input {port.name!r} is {t.text}; only tensor inputs can be made up")
        if t.shape is None:
            raise AmandaError(f"graph input {port.name!r} has no known rank ({t.text}); give its value instead")
        shape = [d if isinstance(d, int) else int(dims.get(str(d), 1)) for d in t.shape]
        dtype = t.numpy_dtype
        if dtype.kind == "f" or dtype.name in ("bfloat16", "float16"):
            value = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind in "iu":
            value = rng.integers(0, 3, size=shape).astype(dtype)
        elif dtype.kind == "b":
            value = rng.integers(0, 2, size=shape).astype(bool)
        else:
            raise AmandaError(f"graph input {port.name!r}: cannot make up values of {t.text}; give them with "
                              f"--input-data {port.name}=FILE.npy")
        out[port.name] = value
    return out
