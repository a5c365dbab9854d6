"""Ops of another framework that a partial conversion (``--allow-partial``) leaves, written as ONNX nodes of a
custom domain named after that framework.

``aten::special_bessel_j0.default`` of ``amanda/pytorch/2.13.0`` becomes a node of domain ``amanda.pytorch``
(opset 1, listed in the model's ``opset_import``), op type ``aten_special_bessel_j0_default`` (the source type with
every character an identifier cannot hold made ``_``), inputs and outputs in port order.  Its attributes are kept
as ONNX attributes where ONNX can say them (numbers, strings, tensors, non-empty lists of one of these); the
others (None, nested lists, dtypes ...) are listed by name in ``amanda_dropped_attributes``.  Attributes
``amanda_op_type`` and ``amanda_namespace`` say what the op was, ``amanda_inputs`` / ``amanda_outputs`` its port
names.  onnx.checker accepts such a model (custom domains are not checked); onnxruntime refuses to run it, naming
the node's domain and type.
"""

from __future__ import annotations

__all__ = ["keep_foreign", "custom_domain", "op_type_identifier"]

import re
from typing import Any

import numpy as np

from amanda_core.ir import Graph

from .common import FAMILY, infer_kind

DOMAIN_VERSION = 1
_NOT_IDENT = re.compile(r"[^0-9A-Za-z_]+")


def custom_domain(family: str) -> str:
    """The ONNX domain of a namespace family: ``amanda/pytorch`` -> ``amanda.pytorch``."""
    return ".".join(part for part in family.strip("/").split("/") if part)


def op_type_identifier(op_type: str) -> str:
    """``aten::special_bessel_j0.default`` -> ``aten_special_bessel_j0_default``: a legal identifier."""
    ident = _NOT_IDENT.sub("_", op_type).strip("_") or "op"
    return ident if not ident[0].isdigit() else f"op_{ident}"


def _representable(value: Any) -> bool:
    if isinstance(value, Graph):
        return False  # a framework's subgraph is not an ONNX graph
    if isinstance(value, (list, tuple)):
        if not value:
            return False
        kinds = {infer_kind(v) for v in value}
        return len(kinds) == 1 and None not in kinds and all(not isinstance(v, (list, tuple)) for v in value) \
            and infer_kind(value) is not None
    if isinstance(value, np.ndarray):
        return value.dtype != object
    return infer_kind(value) is not None


def keep_foreign(op: Any, foreign: Any) -> None:
    """Rewrite ``op`` (``foreign``: an :class:`amanda_core.foreign.ForeignOp`) in place into a node of the custom
    domain named after its family (the exporter's ``keep_foreign``)."""
    domain = custom_domain(foreign.family)
    attrs: dict[str, Any] = {}
    dropped = []
    for name, value in op.attrs.items():
        if _representable(value):
            attrs[name] = list(value) if isinstance(value, tuple) else value
        else:
            dropped.append(name)
    attrs["amanda_op_type"] = foreign.type
    attrs["amanda_namespace"] = foreign.namespace
    in_names = list(op.input_ports.names())
    out_names = list(op.output_ports.names())
    if in_names:
        attrs["amanda_inputs"] = in_names
    if out_names:
        attrs["amanda_outputs"] = out_names
    if dropped:
        attrs["amanda_dropped_attributes"] = dropped
    meta = {k: v for k, v in op.meta.items() if k not in ("attrs", "attr_order", "domain", "outputs")}
    outputs = op.meta.get("outputs")
    for i, name in enumerate(in_names):
        if name != f"in{i}":
            op.rename_input_port(name, f"amanda_kept_in{i}")
    for i, name in enumerate(out_names):
        if name != f"out{i}":
            op.rename_output_port(name, f"amanda_kept_out{i}")
    for i, p in enumerate(list(op.input_ports)):
        if p.name != f"in{i}":
            op.rename_input_port(p.name, f"in{i}")
    for i, q in enumerate(list(op.output_ports)):
        if q.name != f"out{i}":
            op.rename_output_port(q.name, f"out{i}")
    if isinstance(outputs, dict):  # the ONNX value names an imported op recorded, by its new port names
        meta["outputs"] = {f"out{i}": outputs[n] for i, n in enumerate(out_names) if n in outputs}
    meta["domain"] = domain
    op.namespace = f"{FAMILY}/{domain}/{DOMAIN_VERSION}"
    op.type = op_type_identifier(foreign.type)
    op.attrs = attrs
    op.meta = meta
