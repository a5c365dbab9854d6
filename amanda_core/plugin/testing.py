"""Helpers for testing plugins and code that uses them.

In a test module or ``conftest.py``::

    pytest_plugins = ["amanda_core.plugin.testing"]

    def test_my_rules(amanda_plugin):
        amanda_plugin(MyPlugin())      # registered for this test only
        ...

or, without pytest, ``with registered_plugin(MyPlugin()): ...``.

``amanda_isolated`` (and :func:`isolated_plugins`) does the same with a fresh plugin manager that loads no
installed plugin, so a test sees only the core and what it registers.
"""

from __future__ import annotations

__all__ = ["registered_plugin", "isolated_plugins", "amanda_plugin", "amanda_isolated"]

import contextlib
from typing import Any, Callable, Iterator

try:
    import pytest
except ImportError:  # pragma: no cover - the helper works without pytest
    pytest = None  # type: ignore[assignment]

from .manager import PluginManager, get_manager, swap_manager


@contextlib.contextmanager
def registered_plugin(plugin: Any, name: str | None = None) -> Iterator[str]:
    """Register ``plugin`` in the process-wide manager for the duration of the block."""
    manager = get_manager()
    registered = manager.register(plugin, name)
    try:
        yield registered
    finally:
        manager.unregister(registered)


def _amanda_plugin() -> Iterator[Callable[..., str]]:
    """Call it with a plugin object to register it until the test ends."""
    stack = contextlib.ExitStack()

    def register(plugin: Any, name: str | None = None) -> str:
        return stack.enter_context(registered_plugin(plugin, name))

    with stack:
        yield register


amanda_plugin = pytest.fixture(_amanda_plugin, name="amanda_plugin") if pytest is not None else _amanda_plugin


@contextlib.contextmanager
def isolated_plugins(*plugins: Any) -> Iterator[PluginManager]:
    """Within the block the process-wide manager is a new one holding only the core and ``plugins``
    (installed plugins are not loaded); the previous manager comes back afterwards."""
    manager = PluginManager(autoload=False)
    for plugin in plugins:
        manager.register(plugin)
    old = swap_manager(manager)
    try:
        yield manager
    finally:
        swap_manager(old)


def _amanda_isolated() -> Iterator[Callable[..., str]]:
    """Like ``amanda_plugin``, but no installed plugin is loaded during the test."""
    with isolated_plugins() as manager:
        yield manager.register


amanda_isolated = (pytest.fixture(_amanda_isolated, name="amanda_isolated") if pytest is not None
                   else _amanda_isolated)
