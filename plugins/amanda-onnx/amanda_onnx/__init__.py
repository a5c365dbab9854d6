"""ONNX support for Amanda.

* :mod:`amanda_onnx.schemas` - namespaces ``amanda/onnx/<opset>`` and
  ``amanda/onnx/<domain>/<opset>``, generated from ``onnx.defs`` and cached;
* :mod:`amanda_onnx.typesystem` - the ``onnx`` type system and :class:`SparseTensor`;
* :mod:`amanda_onnx.dtypes` - element types and port dtype strings
  (``tensor(float)[1,3,N,?]``).

Importing this package does not import ``onnx``.
"""

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
from .typesystem import ATTR_KINDS, OnnxTypeSystem, SparseTensor

__version__ = "0.1.0"

__all__ = [
    "ATTR_KINDS",
    "COMMUTATIVE_OPS",
    "ELEM_TYPES",
    "FAMILY",
    "ElemType",
    "OnnxNamespaces",
    "OnnxType",
    "OnnxTypeSystem",
    "SparseTensor",
    "dtype_from_type_proto",
    "elem_type_from_numpy",
    "elem_type_name",
    "elem_type_number",
    "namespace_providers",
    "numpy_dtype",
    "parse_dtype",
    "type_proto_from_dtype",
]
