"""Functions of modules that are imported only when the function is first called."""

from __future__ import annotations

__all__ = ["lazy"]

import importlib
from typing import Any, Callable


def lazy(target: str) -> Callable[..., Any]:
    """``"package.module:function"`` as a callable that imports the module on its first call.

    A plugin registers its importers, exporters and runners with such callables, so that loading the plugin (which
    every ``amanda`` command does) never imports the framework its modules need."""
    module_name, colon, attr = target.partition(":")
    if not colon or not module_name or not attr:
        raise ValueError(f"a lazy target is 'package.module:function', got {target!r}")
    found: list[Callable[..., Any]] = []

    def call(*args: Any, **kwargs: Any) -> Any:
        if not found:
            found.append(getattr(importlib.import_module(module_name), attr))
        return found[0](*args, **kwargs)

    call.__name__ = attr
    call.__qualname__ = target
    call.__doc__ = f"{target}, imported on first call."
    return call
