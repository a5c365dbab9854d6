"""The YAML text format of graphs (``docs/yaml-format.md``).

A file holds one graph::

    graph:
      namespace: amanda/pytorch/2.13.0       # optional
      attrs: {versions: {producer: 27}}      # optional
      input_ports: [- name | - name: dtype]  # optional
      output_ports: [...]                    # optional
      ops:
        name:
          type: aten::matmul
          namespace: ...                     # optional: the op's own namespace, mid-conversion
          attrs: {...}
          input_ports: [...]
          output_ports: [...]
          ops: {...}                         # optional: the op contains a graph
          edges: [...]
      edges:
        - op.port -> op.port                 # data edge; ``graph.port`` names the graph's own ports
        - a.^control -> b.^control           # control edge
      tensor_data: model.tensors             # written by the dumper when tensors live in a sidecar file

or one op (a document whose only key is the op's name; ``docs/yaml-format.md``).

Inside an op's body the op's own ports are named after the op (``h.hx -> f.x``), or ``graph.hx``.  Edge ends are
split at their last ``.``: op names may contain dots, port names may not.

Attribute values are plain YAML, plus these tags:

* ``!tensor {dtype: float32, shape: [2, 2], data: [...]}`` - a small tensor, inline (``data`` flat, row-major;
  ``base64`` instead of ``data`` when a list of numbers could not give the exact bits back);
* ``!tensor {dtype: float32, shape: [784, 100], offset: 0}`` - a tensor in the sidecar file named by
  ``tensor_data``: raw little-endian C-order bytes, each tensor 64-byte aligned, mapped into memory and read
  lazily (never pickle);
* ``!graph {...}`` - a graph held by an attribute (ONNX ``If`` branches, ``Loop`` bodies);
* ``!tuple [...]``, ``!scalar {dtype: float32, value: 1.5}`` (a numpy scalar), and YAML's ``!!binary`` for bytes;
* tags that plugins register with :func:`register_value_type` for their own value classes.

Where a file strays from the grammar in a way with one obvious meaning, the loader reads that meaning and says
so in ``warnings`` (``docs/yaml-format.md``, "Lenient reading"); anything it cannot read is a
:class:`FormatError` with file and line.

This module is the format's public face; the work is done in four modules beside it:

* :mod:`.value_tags` - the YAML loader and dumper with Amanda's tags, and the registry of plugins' value types;
* :mod:`.graph_reader` - YAML -> :class:`Graph` (the lenient paths, file and line for every error);
* :mod:`.tensor_data` - tensors inline and in the sidecar file;
* :mod:`.graph_writer` - :class:`Graph` -> YAML and sidecar.

The edge syntax is read by :mod:`amanda_core.ir.edges`, which mapping tables use too.
"""

from __future__ import annotations

from .graph_reader import load_graph, load_op, load_values
from .graph_writer import dump_graph, dump_values, iter_tensors, save_graph
from .tensor_data import INLINE_LIMIT, sidecar_path
from .value_tags import add_tag_source, register_value_type

__all__ = [
    "load_graph",
    "load_op",
    "dump_graph",
    "save_graph",
    "register_value_type",
    "add_tag_source",
    "sidecar_path",
    "iter_tensors",
    "load_values",
    "dump_values",
    "INLINE_LIMIT",
]
