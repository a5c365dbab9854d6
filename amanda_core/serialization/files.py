"""Atomic file writing: a failed write leaves no partial file behind."""

from __future__ import annotations

__all__ = ["atomic_write", "atomic_write_many"]

import contextlib
import os
import tempfile
from typing import IO, Iterator, Sequence


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
    try:
        for path in paths:
            target = os.fspath(path)
            directory = os.path.dirname(os.path.abspath(target))
            fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(target) + ".", suffix=".tmp", dir=directory)
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
