"""Progress of long work (reading a model, applying each table, writing), shown on a terminal.

Importers, exporters and the conversion engine call :func:`task`; it does nothing unless the command line (or a
program) called :func:`enable` and standard error is a terminal.  The display is ``tqdm``'s when it is
installed; without it nothing is shown.  :func:`notice` prints a one-line message that matters to the user (an
output written with external data because it is over 2 GB) unless progress output is turned off entirely
(``--quiet``).

    with progress.task("writing out.onnx", total=nbytes, unit="B") as bar:
        ...
        bar.advance(len(chunk))
"""

from __future__ import annotations

__all__ = ["enable", "enabled", "notice", "task", "Task"]

import contextlib
import os
import sys
from typing import Any, Iterator

_state = {"enabled": False, "quiet": False}


def enable(on: bool = True, *, quiet: bool = False) -> None:
    """Show progress bars (when standard error is a terminal); ``quiet`` silences notices as well."""
    _state["enabled"] = bool(on) and not quiet
    _state["quiet"] = bool(quiet)


def enabled() -> bool:
    """Whether a bar would be shown now."""
    if not _state["enabled"] or os.environ.get("AMANDA_NO_PROGRESS"):
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class Task:
    """One piece of work being shown; :meth:`advance` by units done.  A do-nothing object when not shown."""

    __slots__ = ("_bar",)

    def __init__(self, bar: Any = None) -> None:
        self._bar = bar

    def advance(self, n: float = 1) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def describe(self, text: str) -> None:
        if self._bar is not None:
            self._bar.set_description_str(text, refresh=False)


@contextlib.contextmanager
def task(label: str, total: float | None = None, unit: str = "it") -> Iterator[Task]:
    """A progress bar labelled ``label`` for the block (``total`` units, None when unknown)."""
    if not enabled():
        yield Task()
        return
    try:
        from tqdm import tqdm
    except ImportError:
        yield Task()
        return
    bar = tqdm(total=total, desc=label, unit=unit, unit_scale=unit == "B", unit_divisor=1024 if unit == "B" else 1000,
               leave=False, file=sys.stderr, dynamic_ncols=True, mininterval=0.2, delay=0.5)
    try:
        yield Task(bar)
    finally:
        bar.close()


def notice(message: str) -> None:
    """Print ``message`` to standard error unless output is quiet (``--quiet``)."""
    if _state["quiet"]:
        return
    print(message, file=sys.stderr)
