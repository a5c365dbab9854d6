"""The graph abstraction: graphs, ops, ports, edges, tensors (``docs/architecture.md``, "The graph")."""

from .bulk import bulk_build
from .compare import values_equal
from .graph import (
    CONTROL,
    ControlEdge,
    Edge,
    Graph,
    GraphInput,
    GraphOutput,
    InputPort,
    Op,
    OutputPort,
    Port,
    PortList,
    default_op_name,
)
from .tensor import Tensor, as_array, is_tensor

__all__ = [
    "CONTROL",
    "ControlEdge",
    "Edge",
    "Graph",
    "GraphInput",
    "GraphOutput",
    "InputPort",
    "Op",
    "OutputPort",
    "Port",
    "PortList",
    "Tensor",
    "as_array",
    "bulk_build",
    "default_op_name",
    "is_tensor",
    "values_equal",
]
