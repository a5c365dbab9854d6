"""Ops of another framework that a partial conversion (``--allow-partial``) leaves, written as a call that raises.

torch has no op for them, so the module keeps their place: the op becomes ``amanda::unconverted`` (a pseudo-op
of this plugin, never a torch operator), which the module calls as :func:`unconverted` (in a generated ``.py``
file, a function ``_unconverted`` defined in the file itself).  The module is built, saved as ``.py`` and its
weights load; running it raises :class:`NotImplementedError` naming the op, its type in its own framework and
why.  A ``.pt2`` file cannot be written (``torch.export`` runs the module, which raises at that op).
"""

from __future__ import annotations

__all__ = ["UNCONVERTED", "keep_foreign", "unconverted", "unconverted_message"]

from typing import Any, NoReturn

UNCONVERTED = "amanda::unconverted"
"""The op type of a kept foreign op in a torch graph (attrs ``op_name``, ``op_type``, ``namespace``)."""


def unconverted_message(op_name: str, op_type: str, namespace: str, stands_for: str = "") -> str:
    """What running a kept op says."""
    also = f"; it stands for {stands_for}" if stands_for else ""
    return (f"op {op_name!r} ({op_type} of {namespace}{also}) was not converted to PyTorch: no mapping table "
            "converts it, and the conversion kept it in place (--allow-partial); add a rule for it and convert "
            "again")


def unconverted(message: str, *inputs: Any) -> NoReturn:
    """What a kept op calls: raises NotImplementedError with ``message`` (``inputs``: the op's input values,
    passed so that the call keeps its place after them)."""
    raise NotImplementedError(message)


def keep_foreign(op: Any, foreign: Any) -> None:
    """Rewrite ``op`` (``foreign``: an :class:`amanda_core.foreign.ForeignOp`) in place into ``amanda::unconverted``
    in the graph's namespace (the exporter's ``keep_foreign``).  An ONNX node that itself kept an op of another
    framework (attributes ``amanda_op_type``, ``amanda_namespace``) names that op too."""
    stands_for = ""
    original = _text(op.attrs.get("amanda_op_type"))
    if original:
        where = _text(op.attrs.get("amanda_namespace"))
        stands_for = original + (f" of {where}" if where else "")
    op.namespace = None
    op.type = UNCONVERTED
    op.attrs = {"op_name": foreign.path, "op_type": foreign.type, "namespace": foreign.namespace,
                "stands_for": stands_for}


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else ""
