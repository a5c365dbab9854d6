"""The plugin system: hook specifications, the manager, test helpers."""

from .hookspecs import hookimpl, hookspec
from .lazy import import_from_plugin, lazy
from .manager import PluginInfo, PluginManager, Registry, get_manager, registry, reset
from .types import Exporter, GraphPass, Importer, Runner, TypeInferer

__all__ = ["Exporter", "GraphPass", "Importer", "Runner", "TypeInferer", "PluginInfo", "PluginManager", "Registry",
           "get_manager", "hookimpl", "hookspec", "import_from_plugin", "lazy", "registry", "reset"]
