"""Running ``amanda/pytorch`` graphs in torch eager mode on the CPU, for ``amanda check`` (the ``amanda_runners``
hook): the graph becomes a ``GraphModule`` (:func:`amanda_torch.module.to_module`) that is called on the inputs.
"""

from __future__ import annotations

__all__ = ["run", "run_each", "example_inputs", "INTEGER_RANGE"]

from typing import Any, Callable, Collection, Mapping

import numpy as np

from amanda_core import Graph
from amanda_core.errors import AmandaError, first_line
from amanda_core.ir.tensor import resolve_dtype

from .scalar_types import lookup_scalar_type
from .valuetypes import NamedValueType, TensorValueType, parse_value_type

INTEGER_RANGE = (0, 16)
"""Integer inputs (token ids, indices) are drawn from ``[0, 16)``: small enough to index any embedding table or
dimension a test model has, large enough to differ from each other."""


def _arguments(program: Any, inputs: Mapping[str, Any]) -> list[Any]:
    from .tensors import to_torch

    missing = [name for name, _, _ in program.inputs if name not in inputs]
    if missing:
        raise AmandaError(f"no value given for graph input(s) {', '.join(missing)}")
    args = []
    for name, _, dtype in program.inputs:
        value = inputs[name]
        if isinstance(dtype, TensorValueType) or isinstance(value, np.ndarray) and dtype is None:
            args.append(to_torch(np.asarray(value) if not hasattr(value, "numpy") else value))
        else:  # a number, bool or list input of a TorchScript graph
            args.append(value.item() if isinstance(value, np.ndarray) and value.ndim == 0 else value)
    return args


def run(graph: Graph, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The graph's outputs (by output name, in order) for ``inputs`` (by input name), computed by torch."""
    import torch

    from .module import build_module
    from .program import lower

    program = lower(graph)
    module = build_module(program)
    args = _arguments(program, inputs)
    try:
        with torch.no_grad():
            result = module(*args)
    except Exception as e:  # torch raises many kinds; the message says what failed
        raise AmandaError(f"torch failed to run the graph: {first_line(e)}") from None
    values = [result] if len(program.outputs) == 1 else list(result)
    return {name: _output(v) for (name, _, _), v in zip(program.outputs, values)}


class _Stop(Exception):
    pass


def run_each(graph: Graph, inputs: Mapping[str, np.ndarray], callback: Callable[[str, dict[str, Any]], Any],
             wanted: Collection[str] | None = None) -> None:
    """Run the graph and call ``callback(op_name, {output_port_name: array})`` for each top-level op that torch
    computes (in topological order; ``wanted``: only these op names), as it is computed.

    The graph runs as its ``GraphModule`` under a ``torch.fx.Interpreter``, which sees each node's value and
    frees it after its last use; a value is turned into an array only for the callback, so memory stays that of
    a plain run plus one op's outputs.  The callback returning True stops the run."""
    import operator

    import torch
    import torch.fx

    from .module import build_module
    from .program import _overload, lower

    program = lower(graph)
    module = build_module(program)
    args = _arguments(program, inputs)
    by_path = {op.path: op for op in graph.ops.values()}
    report: dict[str, tuple[str, dict[str, int] | None]] = {}  # fx node name -> (op name, {port: index} or None)
    for call in program.calls:
        op = by_path.get(call.op)
        if op is None or call.fn is operator.getitem or (wanted is not None and op.name not in wanted):
            continue
        ports = [q.name for q in op.output_ports]
        try:
            out_ports = _overload(call.fn).out_ports
        except Exception:
            out_ports = {}
        multi = len(out_ports) > 1
        report[call.ref.name] = (op.name, {p: out_ports[p] for p in ports if p in out_ports} if multi else
                                 {p: -1 for p in ports})

    class Each(torch.fx.Interpreter):
        def run_node(self, n: Any) -> Any:
            result = super().run_node(n)
            entry = report.get(n.name)
            if entry is not None:
                op_name, ports = entry
                values = {}
                for p, i in ports.items():
                    v = result if i < 0 else result[i]
                    values[p] = _output(v) if isinstance(v, (torch.Tensor, list, tuple)) else np.asarray(v)
                if callback(op_name, values) is True:
                    raise _Stop
            return result

    try:
        with torch.no_grad():
            Each(module).run(*args)
    except _Stop:
        return
    except AmandaError:
        raise
    except Exception as e:
        raise AmandaError(f"torch failed to run the graph: {first_line(e)}") from None


def _output(value: Any) -> Any:
    from .tensors import to_numpy

    if isinstance(value, (list, tuple)):
        return [_output(v) for v in value]
    return to_numpy(value)


def _numpy_dtype(scalar: str | None, port: str) -> np.dtype[Any]:
    info = lookup_scalar_type(scalar) if scalar else None
    if info is None or info.numpy_name is None:
        raise AmandaError(f"graph input {port!r}: cannot make up values of element type {scalar or 'unknown'}")
    return resolve_dtype(info.numpy_name)


def _random(rng: np.random.Generator, dtype: np.dtype[Any], shape: list[int]) -> np.ndarray:
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.kind in "iu":
        return rng.integers(*INTEGER_RANGE, size=shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def example_inputs(graph: Graph, seed: int = 0, dims: Mapping[str, int] | None = None) -> dict[str, np.ndarray]:
    """Seeded random inputs that fit the graph's input ports: floats from a standard normal, integers (token
    ids, indices) in ``[0, 16)`` (:data:`INTEGER_RANGE`), booleans at random; a symbolic dimension is
    ``dims[name]`` or 1, an unknown one (``*``) 1.  ``int``, ``float`` and ``bool`` inputs of TorchScript graphs
    get 0-dimensional arrays."""
    rng = np.random.default_rng(seed)
    dims = dict(dims or {})
    out: dict[str, np.ndarray] = {}
    for port in graph.input_ports:
        if port.dtype is None:
            raise AmandaError(f"graph input {port.name!r} has no type, so no example value can be made for it")
        t = parse_value_type(str(port.dtype))
        if isinstance(t, TensorValueType):
            sizes = t.symbolic_sizes()
            if sizes is None:
                raise AmandaError(f"graph input {port.name!r} has no known rank ({t}); give its value instead")
            shape = [d if isinstance(d, int) else int(dims.get(str(d), 1)) if d is not None else 1 for d in sizes]
            out[port.name] = _random(rng, _numpy_dtype(t.scalarType(), port.name), shape)
        elif isinstance(t, NamedValueType) and t.text in ("int", "float", "bool"):
            out[port.name] = _random(rng, np.dtype({"int": "int64", "float": "float64", "bool": "bool"}[t.text]),
                                     [])
        else:
            raise AmandaError(f"graph input {port.name!r} is {t}; only tensors and numbers can be made up")
    return out
