"""The ``amanda/tensorflow`` namespace family: one version, the installed TensorFlow release.

Listing versions reads package metadata only.  The schema of the installed
release is built on demand from the cached JSON form (see
:mod:`amanda_tf.schema`), generated from TensorFlow's op registry the first
time.  Without TensorFlow the family lists no version, and asking for its
schema raises :class:`~amanda_tf.framework.TensorFlowMissingError` saying
how to install it.
"""

from __future__ import annotations

__all__ = ["TensorFlowNamespaces"]

from typing import Sequence

from amanda_core.errors import NamespaceError
from amanda_core.namespace.registry import NamespaceProvider
from amanda_core.namespace.schema import NamespaceSchema

from .framework import DISTRIBUTIONS, INSTALL_HINT, TensorFlowMissingError, find_tensorflow, same_release
from .schema import FAMILY, build_schema, load_schema_data

_UNSET = object()


class TensorFlowNamespaces(NamespaceProvider):
    """Serves ``amanda/tensorflow/<installed version>``.

    ``distributions`` are the distribution names under which TensorFlow is
    looked for (first found wins).  The installed release is looked up once
    per provider; the schema is built once per provider.
    """

    dtype_type_system = "tf"

    family = FAMILY
    description = "every op of the installed TensorFlow's op registry"

    def __init__(self, distributions: Sequence[str] = DISTRIBUTIONS) -> None:
        self.distributions = tuple(distributions)
        self._found: object = _UNSET
        self._schema: NamespaceSchema | None = None

    def installed(self) -> tuple[str, str] | None:
        """``(distribution, version)`` of the installed TensorFlow, or None."""
        if self._found is _UNSET:
            self._found = find_tensorflow(self.distributions)
        return self._found  # type: ignore[return-value]

    def versions(self) -> Sequence[str]:
        found = self.installed()
        return [found[1]] if found else []

    def schema(self, version: str | None) -> NamespaceSchema:
        found = self.installed()
        if found is None:
            raise TensorFlowMissingError(f"the {FAMILY} namespace is read from TensorFlow's op registry, and "
                                         f"TensorFlow is not installed; {INSTALL_HINT}")
        dist, installed = found
        if version is not None and not same_release(version, installed):
            raise NamespaceError(f"no schema for {FAMILY}/{version}: the schema is read from the installed "
                                 f"TensorFlow, which is {installed} (distribution {dist})")
        if self._schema is None:
            self._schema = build_schema(load_schema_data(installed, self.distributions))
        return self._schema

