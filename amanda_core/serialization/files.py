"""Atomic file writing: a failed write leaves no partial file behind.

Files and folders appear with the permissions a plain ``open()`` / ``os.mkdir()`` would give them (``0o666`` /
``0o777`` less the process umask), not the private ``0o600`` of a temporary file.
"""

from __future__ import annotations

__all__ = ["atomic_write", "atomic_write_many", "atomic_directory", "default_mode", "check_parent_dir"]

import contextlib
import os
import shutil
import tempfile
import threading
from typing import IO, Iterator, Sequence

from ..errors import AmandaError

_umask_lock = threading.Lock()


def _umask() -> int:
    try:  # Linux states it without changing it
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _umask_lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def default_mode(directory: bool = False) -> int:
    """The permissions a new file (or folder) gets from ``open()`` (``os.mkdir``) under the current umask."""
    return (0o777 if directory else 0o666) & ~_umask()


def check_parent_dir(path: str | os.PathLike[str]) -> None:
    """Raise a one-line AmandaError when the folder that would hold ``path`` does not exist or is not a folder."""
    target = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(target.rstrip("/" + os.sep) or target))
    if not os.path.exists(parent):
        shown = os.path.dirname(target.rstrip("/" + os.sep)) or parent
        raise AmandaError(f"{target}: the folder {shown} does not exist (create it first, e.g. mkdir -p {shown})")
    if not os.path.isdir(parent):
        raise AmandaError(f"{target}: {os.path.dirname(target.rstrip('/' + os.sep))} is a file, not a folder")


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Write to a temporary file beside ``path``; move it into place only if the block succeeds."""
    with atomic_write_many([path], mode, encoding) as (f,):
        yield f


@contextlib.contextmanager
def atomic_write_many(paths: Sequence[str | os.PathLike[str]], mode: str = "w",
                      encoding: str | None = "utf-8") -> Iterator[list[IO]]:
    """Like :func:`atomic_write` for several files that must appear together."""
    handles: list[tuple[IO, str, str]] = []
    file_mode = default_mode()
    try:
        for path in paths:
            target = os.fspath(path)
            check_parent_dir(target)
            directory = os.path.dirname(os.path.abspath(target))
            fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(target) + ".", suffix=".tmp", dir=directory)
            try:
                os.fchmod(fd, file_mode)
            except (OSError, AttributeError):  # pragma: no cover - no fchmod (Windows)
                pass
            f = os.fdopen(fd, mode, encoding=None if "b" in mode else encoding)
            handles.append((f, tmp, target))
        yield [h[0] for h in handles]
        for f, _, _ in handles:
            f.flush()
            os.fsync(f.fileno())
            f.close()
        for _, tmp, target in handles:
            os.replace(tmp, target)
    except BaseException:
        for f, tmp, _ in handles:
            with contextlib.suppress(OSError):
                f.close()
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike[str]) -> Iterator[str]:
    """Build a folder atomically: yields the path of an empty temporary folder beside ``path``; when the block
    succeeds it is renamed to ``path`` (replacing a folder already there), when it fails it is removed and
    ``path`` is left as it was.  For exporters whose format is a folder (a TensorFlow SavedModel)."""
    target = os.fspath(path).rstrip("/" + os.sep) or os.fspath(path)
    check_parent_dir(target)
    if os.path.exists(target) and not os.path.isdir(target):
        raise AmandaError(f"{target}: a file is in the way of the folder to write")
    parent = os.path.dirname(os.path.abspath(target))
    tmp = tempfile.mkdtemp(prefix="." + os.path.basename(target) + ".", suffix=".tmp", dir=parent)
    try:
        with contextlib.suppress(OSError):
            os.chmod(tmp, default_mode(directory=True))
        yield tmp
        old = None
        if os.path.isdir(target):
            old = tempfile.mkdtemp(prefix="." + os.path.basename(target) + ".", suffix=".old", dir=parent)
            os.rmdir(old)
            os.rename(target, old)
        try:
            os.rename(tmp, target)
        except BaseException:
            if old is not None:
                os.rename(old, target)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
