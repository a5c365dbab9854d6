"""The ``amanda-onnx`` plugin: what it registers with Amanda.

Importing this module does not import ``onnx``; neither does calling its hooks
once the schema cache is warm (see :mod:`amanda_onnx.schemas`).
"""

from __future__ import annotations

from amanda_core import hookimpl
from amanda_core.namespace import NamespaceProvider, TypeSystem

from .schemas import namespace_providers
from .typesystem import OnnxTypeSystem


@hookimpl
def amanda_type_systems() -> list[TypeSystem]:
    """The ``onnx`` type system."""
    return [OnnxTypeSystem()]


@hookimpl
def amanda_namespaces() -> list[NamespaceProvider]:
    """One provider per ONNX domain: ``amanda/onnx`` (opsets 1 to newest), ``amanda/onnx/ai.onnx.ml`` ..."""
    return list(namespace_providers())
