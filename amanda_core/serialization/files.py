"""Atomic file writing: a failed write leaves no partial file behind.

Files and folders appear with the permissions a plain ``open()`` / ``os.mkdir()`` would give them (``0o666`` /
``0o777`` less the process umask), not the private ``0o600`` of a temporary file.
"""

from __future__ import annotations

__all__ = ["atomic_write", "atomic_write_many", "atomic_directory", "default_mode", "check_parent_dir",
           "start_writeback"]

import contextlib
import os
import shutil
import sys
import tempfile
import threading
from typing import IO, Any, Iterator, Sequence

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


_sync_file_range: list[Any] = []


def start_writeback(f: IO[bytes]) -> None:
    """Ask the OS to start writing ``f``'s dirty pages to disk now, without waiting for them (Linux's
    ``sync_file_range(SYNC_FILE_RANGE_WRITE)``; nothing elsewhere).  A large file written piece by piece and then
    fsynced (every atomic write here is) spends less time in the final ``fsync`` when its writeback overlaps the
    writing: call this after each large piece."""
    if not _sync_file_range:
        fn = None
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                fn = ctypes.CDLL(None, use_errno=True).sync_file_range
                fn.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
                fn.restype = ctypes.c_int
            except (OSError, AttributeError):
                fn = None
        _sync_file_range.append(fn)
    fn = _sync_file_range[0]
    if fn is None:
        return
    f.flush()
    fn(f.fileno(), 0, 0, 2)  # SYNC_FILE_RANGE_WRITE over the whole file; a failure only means no head start


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
