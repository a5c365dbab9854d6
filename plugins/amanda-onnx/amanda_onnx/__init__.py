"""ONNX support for Amanda.

* :mod:`amanda_onnx.schemas` - namespaces ``amanda/onnx/<opset>`` and
  ``amanda/onnx/<domain>/<opset>``, generated from ``onnx.defs`` and cached;
* :mod:`amanda_onnx.typesystem` - the ``onnx`` type system and :class:`SparseTensor`;
* :mod:`amanda_onnx.dtypes` - element types and port dtype strings
  (``tensor(float)[1,3,N,?]``);
* :func:`load_model` / :func:`save_model` / :func:`to_model` - lossless import and
  export of ONNX models (:mod:`amanda_onnx.importer`, :mod:`amanda_onnx.exporter`).

Importing this package does not import ``onnx``; reading or writing a model does.
"""

from __future__ import annotations

import os
from typing import Any

from amanda_core.ir import Graph

from .dtypes import (
    ELEM_TYPES,
    ElemType,
    OnnxType,
    dtype_from_type_proto,
    elem_type_from_numpy,
    elem_type_name,
    elem_type_number,
    numpy_dtype,
    parse_dtype,
    type_proto_from_dtype,
)
from .schemas import COMMUTATIVE_OPS, FAMILY, OnnxNamespaces, namespace_providers
from .structural import INITIALIZER, OUTER_VALUE, SPARSE_INITIALIZER, STRUCTURAL_TYPES
from .typesystem import ATTR_KINDS, OnnxTypeSystem, SparseTensor

__version__ = "0.1.0"


def load_model(source: Any, **options: Any) -> Graph:
    """Read an ONNX model (a path, bytes, a binary file or an ``onnx.ModelProto``) into a graph of namespace
    ``amanda/onnx/<opset>``; see :func:`amanda_onnx.importer.load_model`."""
    from .importer import load_model as _load

    return _load(source, **options)


def save_model(graph: Graph, target: str | os.PathLike[str] | None = None, **options: Any) -> Any:
    """Write ``graph`` as an ONNX model, atomically when ``target`` is a path; returns the ``onnx.ModelProto``.
    See :func:`amanda_onnx.exporter.save_model`."""
    from .exporter import save_model as _save

    return _save(graph, target, **options)


def to_model(graph: Graph, **options: Any) -> Any:
    """The ``onnx.ModelProto`` of ``graph`` (nothing written); see :func:`amanda_onnx.exporter.to_model`."""
    from .exporter import to_model as _to_model

    return _to_model(graph, **options)


def infer_types(graph: Graph) -> int:
    """Type the node outputs ``graph`` leaves untyped with onnx's shape inference; returns how many it typed.
    See :func:`amanda_onnx.infer.infer_types`."""
    from .infer import infer_types as _infer_types

    return _infer_types(graph)


__all__ = [
    "ATTR_KINDS",
    "COMMUTATIVE_OPS",
    "ELEM_TYPES",
    "FAMILY",
    "INITIALIZER",
    "OUTER_VALUE",
    "SPARSE_INITIALIZER",
    "STRUCTURAL_TYPES",
    "ElemType",
    "OnnxNamespaces",
    "OnnxType",
    "OnnxTypeSystem",
    "SparseTensor",
    "dtype_from_type_proto",
    "elem_type_from_numpy",
    "elem_type_name",
    "elem_type_number",
    "infer_types",
    "load_model",
    "namespace_providers",
    "numpy_dtype",
    "parse_dtype",
    "save_model",
    "to_model",
    "type_proto_from_dtype",
]
