"""Amanda: convert neural-network graphs between frameworks.

Three ideas, three places:

* :mod:`amanda_core.ir` - one graph abstraction (ops, named ports, edges,
  control edges, ops that contain graphs, attributes);
* :mod:`amanda_core.namespace` - namespaces, one per framework and version,
  whose schemas are an exact dictionary of that version's ops;
* :mod:`amanda_core.mapping` - declarative tables that rewrite graphs from one
  namespace to another.

Plugins (``amanda-onnx``, ``amanda-tf``, ``amanda-torch`` and third-party rule
packs) register through :mod:`amanda_core.plugin`.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy reads it the same way)

# The names below are imported on first use (PEP 562), so that ``import amanda_core`` (which every ``amanda``
# command does before anything else) is quick and a Ctrl-C right after start-up reaches the command line's handler.
_EXPORTS = {
    "AmandaError": "errors", "FormatError": "errors", "GraphCycleError": "errors", "GraphError": "errors",
    "NamespaceError": "errors", "PluginError": "errors", "SchemaError": "errors", "ValidationError": "errors",
    "CONTROL": "ir", "Graph": "ir", "GraphInput": "ir", "GraphOutput": "ir", "InputPort": "ir", "Op": "ir",
    "OutputPort": "ir", "Tensor": "ir",
    "NamespaceRegistry": "namespace", "NamespaceSchema": "namespace", "OpSchema": "namespace",
    "TypeSystem": "namespace", "validate": "namespace",
    "Exporter": "plugin", "Importer": "plugin", "Runner": "plugin", "TypeInferer": "plugin", "GraphPass": "plugin",
    "hookimpl": "plugin",
    "registry": "plugin",
    "InputSpec": "plugin.types", "parse_input_spec": "plugin.types",
    "load_model": "io", "save_model": "io",
}

if TYPE_CHECKING:
    from typing import Any

    from .errors import (
        AmandaError,
        FormatError,
        GraphCycleError,
        GraphError,
        NamespaceError,
        PluginError,
        SchemaError,
        ValidationError,
    )
    from .io import load_model, save_model
    from .ir import CONTROL, Graph, GraphInput, GraphOutput, InputPort, Op, OutputPort, Tensor
    from .namespace import NamespaceRegistry, NamespaceSchema, OpSchema, TypeSystem, validate
    from .plugin import Exporter, GraphPass, Importer, Runner, TypeInferer, hookimpl, registry
    from .plugin.types import InputSpec, parse_input_spec


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'amanda_core' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__version__ = "0.1.0"

__all__ = [
    "CONTROL",
    "AmandaError",
    "Exporter",
    "FormatError",
    "Graph",
    "GraphCycleError",
    "GraphError",
    "GraphInput",
    "GraphOutput",
    "Importer",
    "InputPort",
    "InputSpec",
    "NamespaceError",
    "NamespaceRegistry",
    "NamespaceSchema",
    "Op",
    "OpSchema",
    "OutputPort",
    "PluginError",
    "Runner",
    "TypeInferer",
    "GraphPass",
    "SchemaError",
    "Tensor",
    "TypeSystem",
    "ValidationError",
    "hookimpl",
    "load_model",
    "parse_input_spec",
    "registry",
    "save_model",
    "validate",
]
