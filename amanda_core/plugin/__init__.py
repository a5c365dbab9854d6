"""The plugin system: hook specifications, the manager, test helpers."""

from .hookspecs import hookimpl, hookspec
from .lazy import lazy
from .manager import PluginInfo, PluginManager, Registry, get_manager, registry, reset
from .types import Exporter, GraphPass, Importer, Runner, TypeInferer

__all__ = ["Exporter", "GraphPass", "Importer", "Runner", "TypeInferer", "PluginInfo", "PluginManager", "Registry",
           "get_manager", "hookimpl", "hookspec", "lazy", "registry", "reset"]
