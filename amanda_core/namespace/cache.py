"""On-disk cache for generated namespace schemas.

Schemas generated from a framework's registry are stored as JSON under the
cache directory (``$AMANDA_CACHE_DIR``, else ``$XDG_CACHE_HOME/amanda``, else
``~/.cache/amanda``), keyed by what they were generated from (framework
version, generator version), so a framework upgrade regenerates them.
``AMANDA_NO_CACHE=1`` bypasses the cache.
"""

from __future__ import annotations

__all__ = ["cache_dir", "cached_json"]

import json
import os
import re
from pathlib import Path
from typing import Any, Callable

from ..serialization.files import atomic_write


def cache_dir() -> Path:
    base = os.environ.get("AMANDA_CACHE_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "amanda"


def cached_json(key: str, build: Callable[[], Any]) -> Any:
    """The JSON value stored under ``key``, built (and stored) on first use."""
    safe = re.sub(r"[^A-Za-z0-9_.+-]", "_", key)
    path = cache_dir() / f"{safe}.json"
    use_cache = os.environ.get("AMANDA_NO_CACHE", "").lower() not in ("1", "true", "yes")
    if use_cache and path.exists():
        try:
            with open(path, encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            pass  # unreadable or truncated: rebuild it
    value = build()
    if use_cache:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_write(path) as f:
                json.dump(value, f, separators=(",", ":"))
        except OSError:
            pass  # a read-only cache directory only costs speed
    return value
