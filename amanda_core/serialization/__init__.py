"""Text and file formats of the core: the YAML graph format with its tensor sidecar file, safe YAML helpers,
atomic file writing."""

from .files import atomic_directory, atomic_write, atomic_write_many
from .graph_yaml import (
    INLINE_LIMIT,
    dump_graph,
    iter_tensors,
    load_graph,
    load_op,
    register_value_type,
    save_graph,
    sidecar_path,
)

__all__ = [
    "INLINE_LIMIT",
    "atomic_directory",
    "atomic_write",
    "atomic_write_many",
    "dump_graph",
    "iter_tensors",
    "load_graph",
    "load_op",
    "register_value_type",
    "save_graph",
    "sidecar_path",
]
