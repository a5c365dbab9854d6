"""TorchScript control flow (``prim::If``, ``prim::Loop``) as Python calls a ``GraphModule`` can make.

In eager mode both are plain Python control flow, so a converted TorchScript module computes what the original
did.  While ``torch.export`` or ``torch.compile`` traces, ``run_if`` on a tensor condition (the operand of
TorchScript's ``aten::Bool``) becomes ``torch.cond``; a loop whose trip count depends on the data cannot be
traced (torch.export needs ``while_loop`` for that, which TorchScript graphs do not say).
"""

from __future__ import annotations

__all__ = ["run_if", "run_loop"]

from typing import Any, Callable, Sequence


def run_if(cond: Any, then_fn: Callable[..., Any], else_fn: Callable[..., Any], captured: Sequence[Any]) -> Any:
    """``then_fn(*captured)`` if ``cond`` else ``else_fn(*captured)`` (each returns a tuple)."""
    import torch

    if isinstance(cond, torch.Tensor) and torch.compiler.is_compiling():
        return torch.cond(cond, then_fn, else_fn, tuple(captured))
    return then_fn(*captured) if bool(cond) else else_fn(*captured)


def run_loop(max_trip_count: int, start_condition: Any, body: Callable[..., Any], carried: Sequence[Any],
             captured: Sequence[Any]) -> tuple[Any, ...]:
    """TorchScript's loop: while the condition holds and fewer than ``max_trip_count`` iterations ran,
    ``condition, *carried = body(iteration, *carried, *captured)``; returns the carried values."""
    values = tuple(carried)
    condition = bool(start_condition)
    iteration = 0
    while condition and iteration < max_trip_count:
        condition, *rest = body(iteration, *values, *captured)
        values = tuple(rest)
        condition = bool(condition)
        iteration += 1
    return values
