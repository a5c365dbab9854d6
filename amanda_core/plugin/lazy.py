"""Functions of modules that are imported only when the function is first called."""

from __future__ import annotations

__all__ = ["lazy", "import_from_plugin"]

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


def import_from_plugin(module: str, distribution: str, purpose: str) -> Any:
    """Import ``module`` of another plugin, which a plugin uses without depending on it (amanda-tf runs
    amanda-onnx's ONNX -> ONNX passes on the ONNX graphs amanda-onnx reads).  When that plugin is not installed,
    a :class:`~amanda_core.errors.PluginError` says what needs it and how to install it; an import error inside
    the module is raised as it is."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        parts = module.split(".")
        if e.name not in {".".join(parts[:i]) for i in range(1, len(parts) + 1)}:
            raise
        from ..errors import PluginError

        raise PluginError(f"{purpose} needs the {distribution} plugin (pip install {distribution})") from None
