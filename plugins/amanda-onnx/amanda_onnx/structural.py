"""Structural op types: how an ONNX graph's non-node parts appear as ops.

These are **not ONNX operators**.  An ONNX graph holds values that no node computes: initializers, sparse
initializers, and (inside a subgraph) values of an enclosing graph.  The graph abstraction gives every value a
producing port, so the importer makes an op for each, and the exporter turns them back into the graph's
``initializer`` / ``sparse_initializer`` lists and outer-scope names.  The namespace schemas of the default
domain (``amanda/onnx/<opset>``) carry their schemas, marked ``meta: {structural: true}``.

* ``Initializer`` -- attribute ``value`` (the tensor), output port ``output``.  Named after the initializer.
  With ``graph_input: true`` it is the default value of the graph input of the same name (ONNX IR < 4 lists such
  initializers among the graph inputs): the value then flows from that graph input, and this op feeds nothing.
* ``SparseInitializer`` -- the same for ``sparse_initializer`` entries; ``value`` is a
  :class:`~amanda_onnx.typesystem.SparseTensor`.
* ``OuterValue`` -- inside a subgraph (``If`` branch, ``Loop``/``Scan`` body, any GRAPH attribute), a value the
  subgraph reads from an enclosing graph; attribute ``name`` is its ONNX name there.  The op holding the subgraph
  gets a control edge from the value's producer in the enclosing graph, so the ordering stays visible.
"""

from __future__ import annotations

__all__ = ["INITIALIZER", "SPARSE_INITIALIZER", "OUTER_VALUE", "STRUCTURAL_TYPES", "structural_op_schemas"]

from amanda_core.namespace import NO_DEFAULT, AttrSchema, OpSchema, PortSchema

INITIALIZER = "Initializer"
SPARSE_INITIALIZER = "SparseInitializer"
OUTER_VALUE = "OuterValue"
STRUCTURAL_TYPES: frozenset[str] = frozenset({INITIALIZER, SPARSE_INITIALIZER, OUTER_VALUE})
"""Op types of the default ONNX namespaces that stand for graph structure, not for ONNX operators."""

_NOTE = "Not an ONNX operator: a structural op of the amanda-onnx plugin. "


def structural_op_schemas() -> list[OpSchema]:
    """The schemas of :data:`STRUCTURAL_TYPES`, added to every ``amanda/onnx/<opset>`` namespace."""
    out = PortSchema("output", None, doc="the value")
    graph_input = AttrSchema("graph_input", "python.bool", False,
                             doc="true: the default value of the graph input of the same name, which feeds the "
                                 "consumers (ONNX IR < 4 style); this op then feeds nothing")
    meta = {"structural": True}
    return [
        OpSchema(INITIALIZER, output_ports=(out,),
                 attrs=(AttrSchema("value", "onnx.TENSOR", NO_DEFAULT, doc="the tensor"), graph_input),
                 domain="ai.onnx", meta=meta,
                 doc=_NOTE + "An entry of an ONNX graph's initializer list, named after it."),
        OpSchema(SPARSE_INITIALIZER, output_ports=(out,),
                 attrs=(AttrSchema("value", "onnx.SPARSE_TENSOR", NO_DEFAULT, doc="the sparse tensor"), graph_input),
                 domain="ai.onnx", meta=meta,
                 doc=_NOTE + "An entry of an ONNX graph's sparse_initializer list, named after its values tensor."),
        OpSchema(OUTER_VALUE, output_ports=(out,),
                 attrs=(AttrSchema("name", "python.str", NO_DEFAULT,
                                   doc="the ONNX name of the value in the enclosing graph"),),
                 domain="ai.onnx", meta=meta,
                 doc=_NOTE + "Inside a subgraph, a value produced by an enclosing graph (ONNX outer scope)."),
    ]
