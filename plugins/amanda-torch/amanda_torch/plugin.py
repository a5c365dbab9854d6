"""The ``amanda-torch`` plugin: the ``torch`` type system and the ``amanda/pytorch`` namespaces.

Importing this module imports no torch; torch is imported (in a child
process) only when a schema is built on a cold cache.
"""

from __future__ import annotations

from amanda_core import hookimpl
from amanda_core.namespace.registry import NamespaceProvider
from amanda_core.namespace.types import TypeSystem

from .schemas import TorchNamespaces
from .types import TorchTypeSystem

_NAMESPACES = TorchNamespaces()


@hookimpl
def amanda_type_systems() -> list[TypeSystem]:
    """The ``torch`` type system."""
    return [TorchTypeSystem()]


@hookimpl
def amanda_namespaces() -> list[NamespaceProvider]:
    """``amanda/pytorch``: the installed torch release's operators and TorchScript node kinds."""
    return [_NAMESPACES]
