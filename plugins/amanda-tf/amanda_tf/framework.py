"""Finding the installed TensorFlow without importing it, and importing it on demand.

TensorFlow ships under several distribution names (``tensorflow``,
``tensorflow-cpu``, ``tensorflow-intel``, ``tf-nightly``); all install the
same ``tensorflow`` package.  The installed release is read from package
metadata (:mod:`importlib.metadata`), which costs milliseconds, while
``import tensorflow`` costs seconds: only :func:`import_tensorflow` imports
it, and only code that needs the framework (building a schema on a cold
cache, reading or writing a model) calls it.
"""

from __future__ import annotations

__all__ = [
    "DISTRIBUTIONS",
    "INSTALL_HINT",
    "TensorFlowMissingError",
    "find_tensorflow",
    "import_tensorflow",
    "normalize_version",
    "same_release",
]

from importlib import metadata
from typing import Any, Sequence

from packaging.version import InvalidVersion, Version

from amanda_core.errors import NamespaceError, PluginError

DISTRIBUTIONS: tuple[str, ...] = ("tensorflow", "tensorflow-cpu", "tensorflow-intel", "tf-nightly")
"""Distribution names that install the ``tensorflow`` package, in the order they are looked for."""

INSTALL_HINT = ("install it with `pip install amanda-tf[cpu]` (or `pip install amanda-tf[gpu]` for the "
                "GPU build of TensorFlow)")


class TensorFlowMissingError(PluginError, NamespaceError):
    """TensorFlow is not installed, or is installed but cannot be imported."""


def normalize_version(version: str) -> str:
    """The public PEP 440 form of a release string: ``2.21.0+cu121`` -> ``2.21.0``."""
    try:
        return Version(version).public
    except InvalidVersion:
        return version.split("+", 1)[0]


def same_release(a: str, b: str) -> bool:
    """PEP 440 equality of two release strings (``2.21`` == ``2.21.0``); plain equality if either is not PEP 440."""
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def find_tensorflow(distributions: Sequence[str] = DISTRIBUTIONS) -> tuple[str, str] | None:
    """``(distribution, normalized version)`` of the first installed TensorFlow distribution, or None.

    Reads package metadata only; never imports TensorFlow."""
    for dist in distributions:
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
        if version:
            return dist, normalize_version(version)
    return None


def import_tensorflow(distributions: Sequence[str] = DISTRIBUTIONS) -> Any:
    """The ``tensorflow`` module, imported now; :class:`TensorFlowMissingError` (saying how to
    install it) when it is missing or broken."""
    found = find_tensorflow(distributions)
    try:
        import tensorflow
    except ImportError as e:
        if found is None:
            raise TensorFlowMissingError(f"TensorFlow is not installed; {INSTALL_HINT}") from e
        dist, version = found
        raise TensorFlowMissingError(
            f"TensorFlow {version} (distribution {dist}) is installed but cannot be imported: {e}; "
            f"reinstall it, or {INSTALL_HINT}") from e
    return tensorflow
