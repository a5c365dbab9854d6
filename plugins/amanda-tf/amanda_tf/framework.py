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
    "filter_start_up_lines",
    "install_quiet_import",
    "quiet_start_up_lines",
    "INSTALL_HINT",
    "TensorFlowMissingError",
    "find_tensorflow",
    "import_tensorflow",
    "normalize_version",
    "same_release",
]

import contextlib
import importlib.abc
import os
import re
import sys
import tempfile
from importlib import metadata
from typing import Any, Iterator, Sequence

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


# --------------------------------------------------------------------------- TensorFlow's start-up lines
_SEVERITY = {"I": 0, "W": 1, "E": 2, "F": 3}
_LOG_LINE = re.compile(r"^([IWEF])\d{4} ")
_ABSL_PREAMBLE = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"


def _min_log_level() -> int:
    try:
        return int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"))
    except ValueError:
        return 0


def filter_start_up_lines(text: str, level: int) -> str:
    """``text`` (what TensorFlow's native libraries wrote to stderr) without the log lines below ``level``
    (``I`` 0, ``W`` 1, ``E`` 2, ``F`` 3), with the lines that continue them, and without absl's notice that
    logging is not set up yet; every other line is kept as it was."""
    if level < 1:
        return text
    kept: list[str] = []
    dropping = False
    for line in text.splitlines(keepends=True):
        if line.rstrip("\r\n") == _ABSL_PREAMBLE:
            dropping = False
            continue
        m = _LOG_LINE.match(line)
        if m is not None:
            dropping = _SEVERITY[m.group(1)] < level
        if not dropping:
            kept.append(line)
    return "".join(kept)


@contextlib.contextmanager
def quiet_start_up_lines() -> Iterator[None]:
    """While the block runs, what is written to the process's stderr (file descriptor 2, where TensorFlow's native
    libraries log before their logging is set up, whatever ``TF_CPP_MIN_LOG_LEVEL`` says) is held; after it, the
    held text is written back without the log lines ``TF_CPP_MIN_LOG_LEVEL`` asks to leave out.  With the
    variable unset or 0 nothing is held."""
    level = _min_log_level()
    if level < 1:
        yield
        return
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    saved = os.dup(2)
    held = tempfile.TemporaryFile()
    try:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            held.seek(0)
            text = filter_start_up_lines(held.read().decode("utf-8", "replace"), level)
            if text:
                os.write(2, text.encode("utf-8", "replace"))
    finally:
        os.close(saved)
        held.close()


class _QuietFirstImport(importlib.abc.MetaPathFinder):
    """Finds ``tensorflow`` the first time it is imported (by Amanda or by a model's own code) and runs its module
    under :func:`quiet_start_up_lines`; then steps aside."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != "tensorflow":
            return None
        _uninstall()
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module: Any) -> None:
            with quiet_start_up_lines():
                run(module)

        try:
            loader.exec_module = exec_module  # this loader loads this one module
        except (AttributeError, TypeError):
            pass
        return spec


_FINDER = _QuietFirstImport()


def _uninstall() -> None:
    with contextlib.suppress(ValueError):
        sys.meta_path.remove(_FINDER)


def install_quiet_import() -> None:
    """Have the first ``import tensorflow`` of the process honour ``TF_CPP_MIN_LOG_LEVEL`` for the lines
    TensorFlow 2.20+ prints while loading (absl's notice and oneDNN's and the CPU features' ``I`` lines), which it
    writes before its logging reads the variable.  Nothing happens when TensorFlow is already imported."""
    if "tensorflow" not in sys.modules and _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
