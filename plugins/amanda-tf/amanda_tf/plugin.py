"""The ``amanda-tf`` plugin: the ``tf`` type system and the ``amanda/tensorflow`` namespace.

Importing this module (which the plugin manager does through the entry point
``amanda-tf``) never imports TensorFlow.
"""

from __future__ import annotations

__all__ = ["amanda_namespaces", "amanda_type_systems"]

from amanda_core import hookimpl
from amanda_core.namespace.registry import NamespaceProvider
from amanda_core.namespace.types import TypeSystem

from .namespace import TensorFlowNamespaces
from .types import TFTypeSystem


@hookimpl
def amanda_type_systems() -> list[TypeSystem]:
    """The ``tf`` type system."""
    return [TFTypeSystem()]


@hookimpl
def amanda_namespaces() -> list[NamespaceProvider]:
    """``amanda/tensorflow``: one version, the installed TensorFlow release (none if it is not installed)."""
    return [TensorFlowNamespaces()]
