"""Element types and shapes of a TorchScript graph's tensors, from example inputs (``docs/torch.md``, "Control
flow").

TorchScript types a value ``Tensor`` whatever it holds, so the graph :mod:`.torchscript` imports says nothing a
rule could check exactness with (``x * 2.0`` is a float32 product only when ``x`` is float32).  Given example
inputs, :func:`type_script_graph` writes each graph input's type (``Float(2, 8)``) and runs every op that yields a
tensor on *meta* tensors of its inputs' types (``torch.ops.aten...`` with ``device="meta"``: no data, no
arithmetic), so each tensor port gets the type torch itself computes.

* Python scalars computed at run time (an ``int`` loop counter, a ``float`` read from a tensor) stand in as 1, 1.0
  or True: an element type never depends on a scalar's value.  A shape may (``reshape(x, [n, -1])``), so an op
  that reads one through an argument that is not a ``Scalar`` gets the rank torch computes and unknown sizes
  (``Float(*, *)``); so does an op reading a tensor of unknown sizes.
* ``prim::If``: both blocks are typed; an output is the two blocks' type where they agree (element type kept,
  differing sizes unknown).  ``prim::Loop``: the body is typed from the carried values' initial types, then again
  from their join with what the body returns, until nothing changes.
* An op torch cannot run on meta tensors (a data-dependent size) leaves its outputs ``Tensor``, and what reads
  them stays untyped: the rules that need a type do not match it.
"""

from __future__ import annotations

__all__ = ["type_script_graph"]

from dataclasses import dataclass
from typing import Any, Sequence

from amanda_core.errors import AmandaError
from amanda_core.ir import Graph, OutputPort

_MAX_LOOP_PASSES = 8


@dataclass(frozen=True, eq=False)
class _Tensor:
    """A tensor of a known element type: ``meta`` holds it (sizes of unknown dims are stand-ins);
    ``exact`` says whether the sizes are known, ``ranked`` whether the rank is."""

    meta: Any
    exact: bool
    ranked: bool = True

    def key(self) -> tuple[Any, ...]:
        return (self.meta.dtype, tuple(self.meta.shape) if self.ranked else None, self.exact, self.ranked)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Tensor) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())


@dataclass(frozen=True)
class _Const:
    """A literal (a ``prim::Constant`` that is not a tensor)."""

    value: Any


@dataclass(frozen=True)
class _Scalar:
    """A Python number computed at run time: ``int``, ``float`` or ``bool``."""

    kind: str


@dataclass(frozen=True)
class _List:
    items: tuple[Any, ...]


_STAND_IN = {"int": 1, "float": 1.0, "bool": True}


def type_script_graph(graph: Graph, example_inputs: Sequence[Any]) -> None:
    """Type ``graph`` (imported from TorchScript) from ``example_inputs``, one per graph input, in order: a
    tensor types its input (element type and sizes); anything else leaves it as it is."""
    import torch

    inputs = list(graph.input_ports)
    if len(example_inputs) != len(inputs):
        raise AmandaError(f"torch import: {len(example_inputs)} example input(s) for a TorchScript graph with "
                          f"{len(inputs)} input(s) ({', '.join(p.name for p in inputs)})")
    env: dict[OutputPort, Any] = {}
    for port, value in zip(inputs, example_inputs):
        if isinstance(value, torch.Tensor):
            env[port] = _Tensor(torch.empty(tuple(value.shape), dtype=value.dtype, device="meta"), True)
            port.dtype = _text(env[port])
        else:
            env[port] = _from_type_text(port.dtype)
    _Typer(env).graph(graph)


def _from_type_text(text: Any) -> Any:
    t = str(text) if text is not None else ""
    return _Scalar(t) if t in _STAND_IN else None


def _text(v: Any) -> str | None:
    if not isinstance(v, _Tensor):
        return None
    from .importer import _scalar_script_name

    name = _scalar_script_name(v.meta.dtype)
    if name == "Tensor":
        return None
    if not v.ranked:
        return name
    dims = ", ".join(str(int(d)) if v.exact else "*" for d in v.meta.shape)
    return f"{name}({dims})"


def _join(a: Any, b: Any) -> Any:
    """The abstract value of something that is ``a`` on one path and ``b`` on another."""
    if isinstance(a, _Tensor) and isinstance(b, _Tensor):
        if a.meta.dtype != b.meta.dtype:
            return None
        if a.ranked and b.ranked and a.meta.dim() == b.meta.dim():
            same = a.exact and b.exact and tuple(a.meta.shape) == tuple(b.meta.shape)
            return a if same else _Tensor(a.meta, False)
        return _Tensor(a.meta, False, False)
    if isinstance(a, _Const) and isinstance(b, _Const) and type(a.value) is type(b.value) and a.value == b.value:
        return a
    ka, kb = _kind(a), _kind(b)
    return _Scalar(ka) if ka is not None and ka == kb else None


def _kind(v: Any) -> str | None:
    if isinstance(v, _Scalar):
        return v.kind
    if isinstance(v, _Const):
        x = v.value
        return "bool" if isinstance(x, bool) else "int" if isinstance(x, int) else \
            "float" if isinstance(x, float) else None
    return None


class _Typer:
    def __init__(self, env: dict[OutputPort, Any]) -> None:
        self.env = env

    def graph(self, g: Graph) -> None:
        for op in g.topological_order():
            if op.graph is not g:
                continue
            try:
                outs = self.op(op)
            except AmandaError:
                raise
            except Exception:  # noqa: BLE001 - torch refuses meta tensors in many ways; the op stays untyped
                outs = [None] * len(op.output_ports)
            for q, v in zip(op.output_ports, outs):
                self.env[q] = v
                text = _text(v)
                if text is not None:
                    q.dtype = text
        for go in g.output_ports:
            if go.source is not None:
                text = _text(self.env.get(go.source))
                if text is not None:
                    go.dtype = text

    def value(self, port: Any) -> Any:
        src = port.source
        return None if src is None else self.env.get(src)

    # ------------------------------------------------------------------ ops

    def op(self, op: Any) -> list[Any]:
        t = op.type or ""
        if t == "prim::Constant":
            return [self.constant(op)]
        if t == "prim::ListConstruct":
            return [_List(tuple(self.value(p) for p in op.input_ports))]
        if t == "prim::ListUnpack":
            lst = self.value(op.input_ports[0]) if len(op.input_ports) else None
            if isinstance(lst, _List) and len(lst.items) == len(op.output_ports):
                return list(lst.items)
            return [_from_type_text(q.dtype) for q in op.output_ports]
        if t == "prim::If":
            return self.if_op(op)
        if t == "prim::Loop":
            return self.loop_op(op)
        return self.call(op)

    def constant(self, op: Any) -> Any:
        import numpy as np
        import torch

        v = op.attrs.get("value")
        if isinstance(v, np.ndarray):
            try:
                dtype = torch.from_numpy(np.empty((0,), dtype=v.dtype)).dtype
            except TypeError:  # bfloat16/float8 arrays (ml_dtypes): the element type is not needed here
                return None
            return _Tensor(torch.empty(v.shape, dtype=dtype, device="meta"), True)
        return _Const(v)

    def block_outputs(self, block: Graph, bound: dict[str, Any]) -> list[Any]:
        for p in block.input_ports:
            v = bound.get(p.name)
            self.env[p] = v
            text = _text(v)
            if text is not None:
                p.dtype = text
        self.graph(block)
        return [self.env.get(go.source) if go.source is not None else None for go in block.output_ports]

    def if_op(self, op: Any) -> list[Any]:
        bound = {p.name: self.value(p) for p in op.input_ports if p.name.startswith("captured_")}
        results = []
        for key in ("then_block", "else_block"):
            block = op.attrs.get(key)
            results.append(self.block_outputs(block, bound) if isinstance(block, Graph)
                           else [None] * len(op.output_ports))
        return [_join(a, b) for a, b in zip(*results)]

    def loop_op(self, op: Any) -> list[Any]:
        body = op.attrs.get("body")
        carried = [self.value(p) for p in op.input_ports if p.name.startswith("carried_")]
        if not isinstance(body, Graph):
            return [None] * len(op.output_ports)
        captured = {p.name: self.value(p) for p in op.input_ports if p.name.startswith("captured_")}
        state = list(carried)
        for _ in range(_MAX_LOOP_PASSES):
            bound = {"iteration": _Scalar("int"), **captured,
                     **{f"carried_{i}": v for i, v in enumerate(state)}}
            outs = self.block_outputs(body, bound)
            new = [_join(s, outs[i + 1] if i + 1 < len(outs) else None) for i, s in enumerate(state)]
            if new == state:
                return state
            state = new
        # no fixed point (sizes that keep changing are already unknown): nothing is claimed
        state = [None] * len(state)
        self.block_outputs(body, {"iteration": _Scalar("int"), **captured,
                                  **{f"carried_{i}": v for i, v in enumerate(state)}})
        return state

    def call(self, op: Any) -> list[Any]:
        """Run the op's overload on meta tensors, when it returns tensors; a Python number otherwise."""
        from .program import _overload, convert_literal, resolve_overload

        if not any(_is_tensor_output(q.dtype) for q in op.output_ports):
            return [_from_type_text(q.dtype) for q in op.output_ports]
        fns = resolve_overload(op.type or "")
        if len(fns) != 1:
            return [None] * len(op.output_ports)
        ov = _overload(fns[0])
        kwargs: dict[str, Any] = {}
        exact = True
        for p in op.input_ports:
            i = ov.in_ports.get(p.name)
            if i is None or p.source is None:
                return [None] * len(op.output_ports)
            arg = ov.schema.args[i]
            v = self.value(p)
            stand_in, ok = self.stand_in(v, arg.type)
            if stand_in is _UNKNOWN:
                return [None] * len(op.output_ports)
            exact = exact and ok
            kwargs[arg.name or p.name] = convert_literal(stand_in, arg.type, op.path) \
                if isinstance(v, _Const) else stand_in
        if "squeeze" in (op.type or "") and not exact:
            ranked = False  # which sizes are 1 is not known
        else:
            ranked = True
        result = ov.fn(**kwargs)
        results = list(result) if isinstance(result, (tuple, list)) and len(ov.schema.returns) != 1 else [result]
        out: list[Any] = []
        for q in op.output_ports:
            j = ov.out_ports.get(q.name)
            r = results[j] if j is not None and j < len(results) else None
            out.append(self.abstract(r, exact, ranked))
        return out

    def abstract(self, r: Any, exact: bool, ranked: bool) -> Any:
        import torch

        if isinstance(r, torch.Tensor):
            meta = r if r.device.type == "meta" else torch.empty(tuple(r.shape), dtype=r.dtype, device="meta")
            return _Tensor(meta, exact and ranked, ranked)
        if isinstance(r, bool):
            return _Scalar("bool")
        if isinstance(r, int):
            return _Scalar("int")
        if isinstance(r, float):
            return _Scalar("float")
        return None

    def stand_in(self, v: Any, arg_type: str) -> tuple[Any, bool]:
        """What the op runs on for abstract value ``v`` and whether the result's sizes stay exact."""
        if isinstance(v, _Tensor):
            meta = v.meta if v.exact else _resized(v.meta)
            return meta, v.exact and v.ranked
        if isinstance(v, _Const):
            return v.value, True
        if isinstance(v, _Scalar):
            return _STAND_IN[v.kind], arg_type.rstrip("?") == "Scalar"
        if isinstance(v, _List):
            items, exact = [], True
            for x in v.items:
                s, ok = self.stand_in(x, arg_type)
                if s is _UNKNOWN:
                    return _UNKNOWN, False
                items.append(s)
                exact = exact and ok
            return items, exact
        return _UNKNOWN, False


_UNKNOWN = object()


def _resized(meta: Any) -> Any:
    """A meta tensor of the same element type and rank whose sizes are 1 (broadcast with anything)."""
    import torch

    return torch.empty((1,) * meta.dim(), dtype=meta.dtype, device="meta")


def _is_tensor_output(dtype: Any) -> bool:
    t = str(dtype) if dtype is not None else "Tensor"
    return t == "Tensor" or t.startswith(("Tensor", "Float", "Double", "Half", "BFloat16", "Long", "Int", "Short",
                                          "Char", "Byte", "Bool", "ComplexFloat", "ComplexDouble"))
