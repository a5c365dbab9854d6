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
from .ir import CONTROL, Graph, GraphInput, GraphOutput, InputPort, Op, OutputPort, Tensor
from .namespace import NamespaceRegistry, NamespaceSchema, OpSchema, TypeSystem, validate
from .plugin import Exporter, Importer, Runner, TypeInferer, hookimpl, registry

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
    "NamespaceError",
    "NamespaceRegistry",
    "NamespaceSchema",
    "Op",
    "OpSchema",
    "OutputPort",
    "PluginError",
    "Runner",
    "TypeInferer",
    "SchemaError",
    "Tensor",
    "TypeSystem",
    "ValidationError",
    "hookimpl",
    "registry",
    "validate",
]
