"""Building large graphs quickly.

A graph of 100k ops holds about a million small Python objects.  While they are being created, CPython's cyclic
garbage collector runs full collections again and again over everything created so far, which more than doubles
the time to build the graph and makes it grow faster than linearly.  Nothing in a graph under construction is
garbage, so importers and loaders build inside :func:`bulk_build`, which pauses the collector and restores it
afterwards (nesting is fine; reference counting still frees memory as usual).
"""

from __future__ import annotations

__all__ = ["bulk_build"]

import contextlib
import gc
from typing import Iterator


@contextlib.contextmanager
def bulk_build() -> Iterator[None]:
    """Pause the cyclic garbage collector for the duration of the block."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
