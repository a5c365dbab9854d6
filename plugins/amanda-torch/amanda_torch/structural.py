"""TorchScript node kinds that no operator schema describes.

A TorchScript graph is made of nodes; most are calls of registered operators
(``aten::matmul``) and get their op schema from the operator's
``FunctionSchema``.  The rest are the IR's own structure: graph inputs and
outputs, constants, lists and tuples, attribute access on modules, method
and function calls, control flow with blocks.  torch knows them only as
interned ``prim::`` symbols, so their op schemas are written here.

Three tables:

* :data:`STRUCTURAL` - kinds that appear in graphs that ``torch.jit.trace``,
  ``torch.jit.script``, ``torch.jit.freeze`` or a public TorchScript pass
  return, with their ports and node attributes, each with the reason it is
  here; and the higher-order operators of ``torch.export`` (``torch.cond``,
  ``while_loop``), which have no ``FunctionSchema``, as ``higher_order::``
  kinds whose branch and body graphs are attributes.  Blocks (``prim::If``,
  ``prim::Loop``) and subgraphs (``prim::fork``) are attributes holding :class:`amanda_core.Graph` values.
* :data:`NODE_ATTRIBUTES` - node attributes of kinds that *do* have an
  operator schema (``prim::DifferentiableGraph(...) -> (...)``) but carry
  attributes the schema cannot say (its ``Subgraph``).
* :data:`EXCLUDED` - the other ``prim::`` symbols without a schema that torch
  interns, and why no graph handed to a user holds them.

Invariants: the three tables name disjoint kinds; no kind in
:data:`STRUCTURAL` or :data:`EXCLUDED` has an operator schema in the
installed torch (checked when the namespace is built: such a kind is then
taken from its schema and this table's entry is dropped, see
:func:`amanda_torch.schemas.build_namespace_data`).
"""

from __future__ import annotations

__all__ = ["STRUCTURAL", "NODE_ATTRIBUTES", "EXCLUDED"]

from typing import Any

_ANY = "torch.Any"
_GRAPH = "torch.Graph"


def _op(kind: str, reason: str, inputs: list[Any] | None = None, outputs: list[Any] | None = None,
        attrs: dict[str, Any] | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"type": kind, "meta": {"kind": "structural", "reason": reason}}
    if inputs:
        d["input_ports"] = inputs
    if outputs:
        d["output_ports"] = outputs
    if attrs:
        d["attrs"] = attrs
    return d


STRUCTURAL: tuple[dict[str, Any], ...] = (
    _op("prim::Param", "the node whose outputs are a graph's inputs; examples/seed/pytorch_single_layer.yaml keeps "
        "parameters as prim::Param outputs", outputs=[{"outputs*": _ANY}]),
    _op("prim::Return", "the node whose inputs are a graph's (or block's) outputs",
        inputs=[{"inputs*": _ANY}]),
    _op("prim::Constant", "every constant of a graph (numbers, strings, None, tensors, devices, lists); "
        "function constants carry name/fallback instead of value",
        outputs=[{"output": _ANY}],
        attrs={"value": "torch.Any = null", "name": "torch.str? = null", "fallback": "torch.int? = null"}),
    _op("prim::ListConstruct", "builds a list from its inputs (Tensor[] arguments, int[] sizes)",
        inputs=[{"elements*": _ANY}], outputs=[{"list": _ANY}]),
    _op("prim::ListUnpack", "splits a list of statically known length into values",
        inputs=[{"list": _ANY}], outputs=[{"elements*": _ANY}]),
    _op("prim::TupleConstruct", "builds a tuple (multiple returns, nested outputs of traced modules)",
        inputs=[{"elements*": _ANY}], outputs=[{"tuple": _ANY}]),
    _op("prim::DictConstruct", "builds a dict from alternating key and value inputs",
        inputs=[{"items*": _ANY}], outputs=[{"dict": _ANY}]),
    _op("prim::GetAttr", "reads a module attribute (submodules, parameters, buffers) in scripted and traced "
        "modules", inputs=[{"self": _ANY}], outputs=[{"output": _ANY}], attrs={"name": "torch.str"}),
    _op("prim::SetAttr", "writes a module attribute in scripted modules",
        inputs=[{"self": _ANY}, {"value": _ANY}], attrs={"name": "torch.str"}),
    _op("prim::If", "conditional with two blocks (then, else) returning the node's outputs; values of the "
        "enclosing graph a block reads come in as captured_<k> (block graphs take the same names)",
        inputs=[{"cond": "torch.bool"}, {"captured*": _ANY}], outputs=[{"outputs*": _ANY}],
        attrs={"then_block": _GRAPH, "else_block": _GRAPH}),
    _op("prim::Loop", "loop with one block: inputs max_trip_count, start condition and loop-carried values; "
        "the block takes the iteration number and carried values and returns the next condition and values; "
        "values of the enclosing graph the block reads come in as captured_<k>",
        inputs=[{"max_trip_count": "torch.int"}, {"start_condition": "torch.bool"}, {"carried*": _ANY},
                {"captured*": _ANY}],
        outputs=[{"carried*": _ANY}], attrs={"body": _GRAPH}),
    _op("prim::CallMethod", "calls a method of a module object (a traced or scripted submodule's forward)",
        inputs=[{"self": _ANY}, {"args*": _ANY}], outputs=[{"outputs*": _ANY}], attrs={"name": "torch.str"}),
    _op("prim::CallFunction", "calls a TorchScript function value (a prim::Constant of function type)",
        inputs=[{"function": _ANY}, {"args*": _ANY}], outputs=[{"outputs*": _ANY}]),
    _op("prim::CreateObject", "creates an instance of a TorchScript class (also context managers of with)",
        outputs=[{"object": _ANY}]),
    _op("prim::Enter", "enters a with-statement's context manager", inputs=[{"context": _ANY}],
        outputs=[{"output?": _ANY}]),
    _op("prim::Exit", "leaves a with-statement's context manager", inputs=[{"context": _ANY}],
        outputs=[{"output?": _ANY}]),
    _op("prim::fork", "torch.jit.fork: runs its Subgraph asynchronously and returns a Future",
        inputs=[{"args*": _ANY}], outputs=[{"future": _ANY}], attrs={"Subgraph": _GRAPH}),
    _op("prim::awaitable", "torch.jit._awaitable: a lazily run Subgraph, returns an Await",
        inputs=[{"args*": _ANY}], outputs=[{"awaitable": _ANY}], attrs={"Subgraph": _GRAPH}),
    _op("prim::isinstance", "isinstance() on values whose type is only known at run time (Any)",
        inputs=[{"obj": _ANY}], outputs=[{"result": "torch.bool"}], attrs={"types": "torch.Type[]"}),
    _op("prim::BroadcastingChunk", "left inside prim::FusionGroup subgraphs by the legacy fuser",
        inputs=[{"inputs*": _ANY}], outputs=[{"outputs*": _ANY}],
        attrs={"chunks": "torch.int", "dim": "torch.int"}),
    _op("higher_order::cond", "torch.cond in an ExportedProgram: runs true_graph or false_graph on the operands; "
        "each branch graph takes inputs operands_<i> and returns outputs_<i>, the op's outputs",
        inputs=[{"pred": _ANY}, {"operands*": _ANY}], outputs=[{"outputs*": _ANY}],
        attrs={"true_graph": _GRAPH, "false_graph": _GRAPH}),
    _op("higher_order::while_loop", "torch.ops.higher_order.while_loop in an ExportedProgram: while cond_graph "
        "returns true, body_graph maps the carried values to their next values; both graphs take inputs "
        "carried_inputs_<i> then additional_inputs_<j>; cond_graph returns pred, body_graph outputs_<i>",
        inputs=[{"carried_inputs*": _ANY}, {"additional_inputs*": _ANY}], outputs=[{"outputs*": _ANY}],
        attrs={"cond_graph": _GRAPH, "body_graph": _GRAPH}),
    _op("prim::FunctionalGraph", "left in a graph by torch._C._jit_pass_create_functional_graphs",
        inputs=[{"inputs*": _ANY}], outputs=[{"outputs*": _ANY}], attrs={"Subgraph": _GRAPH}),
)

_SUBGRAPH = {"Subgraph": _GRAPH}
_TYPES = {"types": "torch.Type[]"}

# kind -> (attributes in the core's dict form, reason)
NODE_ATTRIBUTES: dict[str, tuple[dict[str, Any], str]] = {
    "prim::DifferentiableGraph": (_SUBGRAPH, "autodiff subgraph made by the profiling executor"),
    "prim::TensorExprGroup": (_SUBGRAPH, "subgraph fused by the TensorExpr fuser"),
    "prim::TensorExprDynamicGroup": (_SUBGRAPH, "TensorExpr fusion with dynamic shapes"),
    "prim::FallbackGraph": (_SUBGRAPH, "unoptimized fallback of a fused group"),
    "prim::FusionGroup": (_SUBGRAPH, "subgraph fused by the legacy fuser"),
    "prim::StaticSubgraph": (_SUBGRAPH, "subgraph handed to Static Runtime"),
    "prim::oneDNNFusionGroup": (_SUBGRAPH, "subgraph fused by the oneDNN graph fuser"),
    "prim::TypeCheck": (_TYPES, "guards a fused group on its inputs' profiled types"),
    "prim::RequiresGradCheck": (_TYPES, "guards autodiff subgraphs on requires_grad"),
    "prim::TensorExprDynamicGuard": (_TYPES, "guards a dynamic-shape fusion on its inputs' types"),
    "prim::ConstantChunk": ({"chunks": "torch.int", "dim": "torch.int"}, "chunk with constant count and dim"),
    "prim::ConstantMKLDNNTensor": ({"value": "torch.Tensor"}, "MKLDNN weight constant of optimize_for_inference"),
    "prim::PythonOp": ({"inplace": "torch.int? = null", "module": "torch.str? = null",
                        "Subgraph": "torch.Graph? = null"},
                       "a Python autograd Function recorded by torch.jit.trace"),
}

_FRONTEND = ("front-end marker used while compiling Python source; the compiler removes or lowers it before "
             "it returns a graph")
_TRACER = "used by the tracer while recording; replaced or inlined before torch.jit.trace returns"
_INTERNAL = "temporary of the compiler, interpreter or code emitter; never a node of a returned graph"
_AUTODIFF = "internal to symbolic autodiff and the legacy autograd closure"
_STATIC_RUNTIME = "replacement Static Runtime makes in its own copy of a graph"

EXCLUDED: dict[str, str] = {
    **{k: _FRONTEND for k in (
        "prim::Assign", "prim::BreakStmt", "prim::ContinueStmt", "prim::ReturnStmt", "prim::ComprehensionScope",
        "prim::LoopContinuation", "prim::Starred", "prim::Store", "prim::Load", "prim::EmptyListLiteral",
        "prim::LegacyTypedConstructor", "prim::dict", "prim::list", "prim::range", "prim::enumerate", "prim::zip",
        "prim::HasAttr", "prim::annotate")},
    "prim::With": "replaced by prim::Enter / prim::Exit before a graph is returned",
    "prim::TupleSlice": "lowered to prim::TupleIndex and prim::TupleConstruct by the compiler",
    "prim::Closure": "lifted by the compiler: a forked closure becomes prim::fork with a Subgraph",
    "prim::forkClosure": "lifted by the compiler into prim::fork",
    "prim::awaitableClosure": "lifted by the compiler into prim::awaitable",
    **{k: _TRACER for k in ("prim::TracedAttr", "prim::TracedModuleForward", "prim::TracedFork")},
    **{k: _INTERNAL for k in ("prim::Drop", "prim::Jump", "prim::JumpNZ", "prim::JumpZ", "prim::Placeholder",
                               "prim::Expand")},
    **{k: _AUTODIFF for k in ("prim::GradOf", "prim::Reverse", "prim::add_optional", "prim::Eval")},
    "prim::MakeTestTensor": "only created by torch's own C++ tests",
    "prim::MKLDNNGroup": "transient inside the MKLDNN conversion of optimize_for_inference, removed before it "
                         "returns",
    "prim::CudaFusionGroup": "made only by nvFuser, which TorchScript no longer supports",
    "prim::CudaFusionGuard": "made only by nvFuser, which TorchScript no longer supports",
    "prim::PackPadded": "introduced only by the ONNX exporter's preprocessing of packed sequences",
    "prim::PadPacked": "introduced only by the ONNX exporter's preprocessing of packed sequences",
    **{k: _STATIC_RUNTIME for k in (
        "prim::expand_as_copy", "prim::expand_copy", "prim::flatten_copy", "prim::permute_copy",
        "prim::reshape_copy", "prim::squeeze_copy", "prim::t_copy", "prim::transpose_copy",
        "prim::unsqueeze_copy", "prim::view_copy")},
}
