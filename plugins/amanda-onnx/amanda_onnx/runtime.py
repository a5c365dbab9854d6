"""Running ONNX graphs with onnxruntime, for ``amanda check`` (the ``amanda_runners`` hook).

onnxruntime is an optional dependency (``pip install amanda-onnx[runtime]``); it is imported only here, when a
graph is run.
"""

from __future__ import annotations

__all__ = ["run", "example_inputs"]

from typing import Any, Mapping

import numpy as np

from amanda_core import Graph
from amanda_core.errors import AmandaError

from .dtypes import parse_dtype


def _session(graph: Graph) -> Any:
    try:
        import onnxruntime as ort
    except ImportError:
        raise AmandaError("running ONNX graphs needs onnxruntime: pip install 'amanda-onnx[runtime]'") from None
    from .exporter import to_model

    model = to_model(graph)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    try:
        return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own exception types
        raise AmandaError(f"onnxruntime cannot load the model: {e}") from None


def run(graph: Graph, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The graph's outputs (by output name) for ``inputs`` (by input name), computed by onnxruntime."""
    session = _session(graph)
    wanted = [i.name for i in session.get_inputs()]
    missing = [n for n in wanted if n not in inputs]
    if missing:
        raise AmandaError(f"no value given for graph input(s) {', '.join(missing)}")
    try:
        values = session.run(None, {n: inputs[n] for n in wanted})
    except Exception as e:
        raise AmandaError(f"onnxruntime failed to run the model: {e}") from None
    return {o.name: v for o, v in zip(session.get_outputs(), values)}


def example_inputs(graph: Graph, seed: int = 0, dims: Mapping[str, int] | None = None) -> dict[str, np.ndarray]:
    """Random inputs that fit the graph's input ports: floats from a standard normal, integers in [0, 3),
    booleans at random; a symbolic or unknown dimension is ``dims[name]`` or 1."""
    rng = np.random.default_rng(seed)
    dims = dict(dims or {})
    out: dict[str, np.ndarray] = {}
    for port in graph.input_ports:
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
            raise AmandaError(f"graph input {port.name!r}: cannot make up values of {t.text}")
        out[port.name] = value
    return out
