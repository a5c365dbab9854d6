"""PyTorch support for Amanda.

* :mod:`amanda_torch.schemas` - the namespace ``amanda/pytorch/<version>``,
  generated from the installed torch's operator registry and cached;
* :mod:`amanda_torch.types` - the ``torch`` type system;
* :mod:`amanda_torch.valuetypes` - TorchScript value types (port dtypes such
  as ``Float(1, 784)``) as objects with ``scalarType()``, ``sizes()`` ...;
* :mod:`amanda_torch.scalar_types` - ScalarType, Layout, MemoryFormat and
  QScheme tables;
* :mod:`amanda_torch.structural` - TorchScript's structural node kinds.

Importing the package imports no torch.
"""

from __future__ import annotations

from .scalar_types import LAYOUTS, MEMORY_FORMATS, QSCHEMES, SCALAR_TYPES, lookup_scalar_type
from .schemas import FAMILY, TorchNamespaces, installed_torch_version, namespace_version
from .types import TorchTypeSystem
from .valuetypes import TensorValueType, ValueType, parse_value_type

__version__ = "0.1.0"

__all__ = [
    "FAMILY",
    "LAYOUTS",
    "MEMORY_FORMATS",
    "QSCHEMES",
    "SCALAR_TYPES",
    "TensorValueType",
    "TorchNamespaces",
    "TorchTypeSystem",
    "ValueType",
    "installed_torch_version",
    "lookup_scalar_type",
    "namespace_version",
    "parse_value_type",
]
