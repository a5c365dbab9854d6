"""Finding, loading and querying plugins.

Plugins are found through the entry-point group ``amanda`` and loaded once,
on first use.  ``AMANDA_DISABLE_PLUGIN_AUTOLOAD=1`` stops autoloading (only
the core and plugins registered in code are used);
``AMANDA_PLUGINS=amanda-onnx,amanda-tf`` loads only the named plugins (entry
point or distribution names).
"""

from __future__ import annotations

__all__ = ["PluginInfo", "PluginManager", "Registry", "get_manager", "registry", "reset", "swap_manager"]

import os
import threading
from typing import Any, Iterable, Sequence

import attrs
import pluggy

from ..errors import PluginError
from ..ir.graph import Graph
from ..namespace.registry import NamespaceProvider, NamespaceRegistry
from ..namespace.types import PythonTypeSystem, TypeSystem, TypeSystemRegistry
from ..serialization.graph_yaml import add_tag_source
from . import hookspecs
from .types import Exporter, Importer, Runner, TypeInferer

ENTRY_POINT_GROUP = "amanda"
ENV_DISABLE = "AMANDA_DISABLE_PLUGIN_AUTOLOAD"
ENV_ONLY = "AMANDA_PLUGINS"
HOOK_NAMES = ("amanda_type_systems", "amanda_namespaces", "amanda_importers", "amanda_exporters", "amanda_runners",
              "amanda_type_inferers", "amanda_mapping_tables")


@attrs.frozen
class PluginInfo:
    name: str
    distribution: str | None
    version: str | None
    hooks: tuple[str, ...]


class _CorePlugin:
    """What the core itself registers: the ``python`` type system."""

    @hookspecs.hookimpl
    def amanda_type_systems(self) -> list[TypeSystem]:
        return [PythonTypeSystem()]


@attrs.define
class Registry:
    """Everything the loaded plugins registered, gathered once.

    Mapping tables are gathered on first use only: building them may take a plugin a moment, and listing
    namespaces or reading a model does not need them."""

    namespaces: NamespaceRegistry
    importers: list[tuple[Importer, str]]
    exporters: list[tuple[Exporter, str]]
    runners: list[tuple[Runner, str]]
    type_inferers: list[tuple[TypeInferer, str]] = attrs.field(factory=list)
    _gather_tables: Any = attrs.field(default=None, repr=False)
    _tables: list[tuple[Any, str]] | None = attrs.field(default=None, repr=False)

    @property
    def type_systems(self) -> TypeSystemRegistry:
        return self.namespaces.type_systems

    @property
    def tables(self) -> list[tuple[Any, str]]:
        """Mapping tables (objects or paths) with the plugin that registered each."""
        if self._tables is None:
            self._tables = list(self._gather_tables()) if self._gather_tables is not None else []
        return self._tables

    def type_inferer_for(self, namespace: str | None) -> TypeInferer | None:
        """The first registered type inferer serving ``namespace``, or None."""
        if namespace is None:
            return None
        for inferer, _plugin in self.type_inferers:
            if inferer.handles_namespace(namespace):
                return inferer
        return None

    def infer_types(self, graph: Graph, namespace: str) -> int:
        """Type ``graph`` (in ``namespace``) with the registered inferer serving it; how many types it gave (0
        without one).  What :func:`amanda_core.mapping.convert` takes as ``infer``, as ``amanda convert`` gives it."""
        inferer = self.type_inferer_for(namespace)
        return int(inferer.infer(graph)) if inferer is not None else 0


class PluginManager:
    """A typed facade over :class:`pluggy.PluginManager`."""

    def __init__(self, autoload: bool | None = None) -> None:
        self._pm = pluggy.PluginManager(hookspecs.PROJECT)
        self._pm.add_hookspecs(hookspecs)
        self._pm.register(_CorePlugin(), name="amanda-core")
        self._dists: dict[str, tuple[str | None, str | None]] = {"amanda-core": ("amanda-core", _core_version())}
        self._autoload = autoload
        self._loaded = False
        self._lock = threading.RLock()
        self._registry: Registry | None = None

    # -- loading
    def load(self) -> None:
        """Load the entry-point plugins (once)."""
        with self._lock:
            if self._loaded:
                return
            self._loaded = True
            autoload = self._autoload
            if autoload is None:
                autoload = os.environ.get(ENV_DISABLE, "").strip().lower() not in ("1", "true", "yes", "on")
            if autoload:
                self._load_entry_points()

    def _load_entry_points(self) -> None:
        try:
            from importlib_metadata import entry_points
        except ImportError:  # pragma: no cover - the backport is a dependency
            from importlib.metadata import entry_points  # type: ignore[assignment]
        only = {s.strip() for s in os.environ.get(ENV_ONLY, "").split(",") if s.strip()}
        found = sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)
        for ep in found:
            dist = getattr(ep, "dist", None)
            dist_name = dist.metadata["Name"] if dist is not None else None
            if only and ep.name not in only and dist_name not in only:
                continue
            if self._pm.has_plugin(ep.name):
                continue
            try:
                plugin = ep.load()
            except Exception as e:
                raise PluginError(
                    f"plugin {ep.name!r} (entry point {ep.value!r}"
                    f"{', distribution ' + dist_name if dist_name else ''}) failed to load: "
                    f"{type(e).__name__}: {e}"
                ) from e
            self._pm.register(plugin, name=ep.name)
            self._dists[ep.name] = (dist_name, dist.version if dist is not None else None)
        if only:
            missing = only - set(self._dists) - {d for d, _ in self._dists.values() if d}
            if missing:
                raise PluginError(f"{ENV_ONLY} names plugin(s) that are not installed: {', '.join(sorted(missing))}")

    def register(self, plugin: Any, name: str | None = None) -> str:
        """Register a plugin object or module in this process."""
        with self._lock:
            self.load()
            try:
                registered = self._pm.register(plugin, name=name)
            except ValueError as e:
                raise PluginError(f"cannot register plugin {name or plugin!r}: {e}") from e
            if registered is None:
                raise PluginError(f"plugin {name or plugin!r} is already registered")
            self._dists.setdefault(registered, (None, None))
            self._registry = None
            return registered

    def unregister(self, name: str) -> None:
        with self._lock:
            self._pm.unregister(name=name)
            self._dists.pop(name, None)
            self._registry = None

    # -- queries
    def plugins(self) -> list[PluginInfo]:
        self.load()
        out = []
        for name, plugin in self._pm.list_name_plugin():
            hooks = tuple(sorted(h.name for h in self._pm.get_hookcallers(plugin) or ()))
            dist, version = self._dists.get(name, (None, None))
            out.append(PluginInfo(name, dist, version, hooks))
        return out

    def registry(self) -> Registry:
        """Namespaces, type systems, importers, exporters and tables of every plugin."""
        with self._lock:
            if self._registry is None:
                self.load()
                self._registry = self._collect()
            return self._registry

    def _collect(self) -> Registry:
        types = TypeSystemRegistry()
        namespaces = NamespaceRegistry(types)
        for plugin_name, items in self._call("amanda_type_systems"):
            for ts in items:
                if not isinstance(ts, TypeSystem):
                    raise PluginError(f"plugin {plugin_name!r} registered {ts!r}, which is not a TypeSystem")
                types.add(ts)
        for plugin_name, items in self._call("amanda_namespaces"):
            for provider in items:
                if not isinstance(provider, NamespaceProvider):
                    raise PluginError(f"plugin {plugin_name!r} registered {provider!r}, "
                                      "which is not a NamespaceProvider")
                namespaces.add(provider, plugin_name)
        importers = [(i, p) for p, items in self._call("amanda_importers") for i in _typed(items, Importer, p)]
        exporters = [(e, p) for p, items in self._call("amanda_exporters") for e in _typed(items, Exporter, p)]
        def gather_tables() -> list[tuple[Any, str]]:
            return [(t, p) for p, items in self._call("amanda_mapping_tables") for t in items]

        runners = [(r, p) for p, items in self._call("amanda_runners") for r in _typed(items, Runner, p)]
        inferers = [(t, p) for p, items in self._call("amanda_type_inferers") for t in _typed(items, TypeInferer, p)]
        return Registry(namespaces, importers, exporters, runners, inferers, gather_tables)

    def call_hook(self, hook_name: str) -> list[tuple[str, Sequence[Any]]]:
        """Call a hook on every loaded plugin (loading them first): ``(plugin name, what it returned)`` pairs."""
        self.load()
        return self._call(hook_name)

    def _call(self, hook_name: str) -> list[tuple[str, Sequence[Any]]]:
        """Call a hook on every plugin, keeping which plugin gave what."""
        out: list[tuple[str, Sequence[Any]]] = []
        for impl in reversed(getattr(self._pm.hook, hook_name).get_hookimpls()):
            try:
                result = impl.function()
            except Exception as e:
                raise PluginError(f"plugin {impl.plugin_name!r} failed in {hook_name}: "
                                  f"{type(e).__name__}: {e}") from e
            if result is None:
                continue
            out.append((impl.plugin_name, list(result)))
        return out

    @property
    def pluggy(self) -> pluggy.PluginManager:
        return self._pm


def _typed(items: Iterable[Any], cls: type, plugin: str) -> list[Any]:
    out = []
    for item in items:
        if not isinstance(item, cls):
            raise PluginError(f"plugin {plugin!r} registered {item!r}, which is not an {cls.__name__}")
        out.append(item)
    return out


def _core_version() -> str | None:
    try:
        from importlib_metadata import version
    except ImportError:  # pragma: no cover
        from importlib.metadata import version  # type: ignore[assignment]
    try:
        return version("amanda-core")
    except Exception:
        return None


_manager: PluginManager | None = None
_manager_lock = threading.Lock()


def get_manager() -> PluginManager:
    """The process-wide plugin manager (created on first use)."""
    global _manager
    with _manager_lock:
        if _manager is None:
            _manager = PluginManager()
        return _manager


def _load_for_tags() -> None:
    get_manager().load()


add_tag_source(_load_for_tags)  # a graph's YAML with a plugin's value tag loads the plugins (plugins register
# their value types with register_value_type as their modules are imported, that is, as they load)


def registry() -> Registry:
    """Shortcut for ``get_manager().registry()``."""
    return get_manager().registry()


def reset() -> None:
    """Forget the process-wide manager (tests; a changed environment)."""
    global _manager
    with _manager_lock:
        _manager = None


def swap_manager(new: PluginManager | None) -> PluginManager | None:
    """Make ``new`` the process-wide manager; returns the one it replaces (for test isolation)."""
    global _manager
    with _manager_lock:
        old, _manager = _manager, new
        return old
