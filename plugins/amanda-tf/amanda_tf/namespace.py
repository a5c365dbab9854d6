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

from typing import Any, Sequence

from amanda_core.errors import NamespaceError
from amanda_core.namespace.registry import NOT_CONSTANT, ConstantOp, NamespaceProvider
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

    def constant_value(self, op: Any) -> Any:
        """``Const`` ops are constants: their ``value`` tensor, as a numpy array (a lazy tensor, such as a weight
        still in a SavedModel's checkpoint, is read when a rule reads it: a view of its mapped file)."""
        if op.type == "Const" and "value" in op.attrs:
            value = op.attrs["value"]
            from amanda_core.ir.tensor import Tensor

            if isinstance(value, Tensor):
                return value.numpy()
            return value.numpy() if hasattr(value, "numpy") and not hasattr(value, "dtype") else value
        return NOT_CONSTANT

    def make_constant(self, value: Any, version: str | None) -> ConstantOp:
        """A ``Const`` op holding ``value`` as a tensor (Python ints as int64 ... floats as float32), with its
        ``dtype`` attribute."""
        import numpy as np

        from .dtypes import dtype_from_numpy

        if not isinstance(value, np.ndarray):
            flat = value
            while isinstance(flat, (list, tuple)) and flat:
                flat = flat[0]
            dtype = ("bool" if isinstance(flat, bool) else "int64" if isinstance(flat, int)
                     else "float32" if isinstance(flat, float) else None)
            value = np.asarray(value, dtype=dtype)
        return ConstantOp("Const", {"value": value, "dtype": dtype_from_numpy(value.dtype)}, "output")

