"""Value types of an ONNX graph that the model does not state, from onnx's own shape inference.

Models exported by frameworks often give types to their inputs and outputs only.  Rules that must know a value's
element type to be exact (most opset downgrades: ``Add`` 14 -> 13 holds only if the values are not ``int8``,
say) would otherwise refuse every op between them.  :func:`infer_types` runs ``onnx.shape_inference`` on the graph
as it would be exported and gives each untyped node output of the top-level graph the type inference found.  It
changes nothing else; the values it typed are written to the exported model's ``value_info``.

Inference runs on a *weightless* copy of the model (:func:`amanda_onnx.to_model` with ``weightless=True``):
large tensors keep their element type and dims but no data, so no weight is read or copied.  Small tensors (the
shapes ``Reshape`` reads, say) keep their values, which inference uses.
"""

from __future__ import annotations

__all__ = ["infer_types"]

from typing import Any

from amanda_core.errors import AmandaError
from amanda_core.ir import Graph

from .dtypes import dtype_from_tensor_type_bytes, dtype_from_type_proto, elem_type_from_numpy
from .structural import INITIALIZER, OUTER_VALUE, STRUCTURAL_TYPES


class InferenceError(AmandaError):
    """onnx's shape inference refused the graph."""


def infer_types(graph: Graph) -> int:
    """Give untyped node outputs of ``graph``, and those typed with an element type only (``tensor(float)``, as a
    rule types the ops it makes), at every level (the bodies of ``If``/``Loop``/``Scan`` too), the types onnx's
    shape inference finds for them; returns how many it typed.  Raises :class:`InferenceError`
    when inference fails (an inconsistent model), leaving the graph as it was.  When every node output is typed
    already (a model that states its ``value_info``), or untyped only where it feeds a graph output of a static
    tensor type, inference is not run: those outputs take that type, initializers theirs from their tensors."""
    graphs = [graph, *(nested.graph for nested in graph.nested_graphs())]
    initializers: list[Any] = []
    settled = _settled(graph, graphs, initializers)
    if settled is not None:
        # every node output is typed already (a model written with its value_info), or is a graph output of a
        # static type (which inference keeps as it is): inference would add nothing more
        for q, dtype in settled:
            q.dtype = dtype
        shapes: dict[Any, str] = {}
        return len(settled) + sum([_type_initializer(op, shapes) for op in initializers])

    import onnx

    from .exporter import to_model

    value_names: dict[Any, str] = {}
    model = to_model(graph, weightless=True, value_names=value_names)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=False)
    except (onnx.shape_inference.InferenceError, ValueError, RuntimeError) as e:
        raise InferenceError(f"onnx shape inference failed: {e}") from None
    found: dict[str, Any] = {}
    _value_types(inferred.graph, found, len(graphs) > 1)
    if not found:
        return 0
    typed = 0
    texts: dict[bytes, str | None] = {}  # serialized TypeProto -> its dtype (many values share a type)
    shapes: dict[Any, str] = {}
    for g in graphs:
        for op in g:
            if op.namespace is None:
                t = op.type
                if t == INITIALIZER:
                    typed += _type_initializer(op, shapes)
                    continue
                if t in STRUCTURAL_TYPES and t != OUTER_VALUE:
                    continue  # (an outer value inside a body takes the type of the value it names)
            for q in op.output_ports:
                old = q.dtype
                if old is not None and not _rank_unknown(old):
                    continue
                value = value_names.get(q)  # the model's own name, or the one the export gave a value made here
                tp = found.get(value) if value else None
                if tp is None:
                    continue
                key = tp.SerializeToString(deterministic=True)
                if key in texts:
                    dtype = texts[key]
                else:
                    dtype = texts[key] = dtype_from_tensor_type_bytes(key) or dtype_from_type_proto(tp)
                if dtype is not None and (old is None or _refines(old, dtype)):
                    q.dtype = dtype
                    typed += 1
    return typed


def _settled(graph: Graph, graphs: list[Graph], initializers: list[Any]) -> list[tuple[Any, str]] | None:
    """When inference cannot tell more than the graph says: the untyped node outputs with the type each gets
    (the static tensor type of a top-level graph output it feeds); None when some output needs inference.
    ``graphs``: ``graph`` and the graphs nested in it.  The initializers of ``graphs`` are added to
    ``initializers`` on the way (all of them when the result is not None)."""
    if not graph.output_ports:
        return None
    static: dict[int, str | None] = {}
    for gp in graph.output_ports:
        src, dtype = gp.source, gp.dtype
        if src is not None:  # (a value that is two graph outputs: left to inference)
            ok = id(src) not in static and isinstance(dtype, str) and _static_tensor(dtype)
            static[id(src)] = dtype if ok else None
    out: list[tuple[Any, str]] = []
    for g in graphs:
        for op in g:
            if op.namespace is None:
                t = op.type
                if t == INITIALIZER:
                    initializers.append(op)  # (typed from its tensor)
                    continue
                if t in STRUCTURAL_TYPES and t != OUTER_VALUE:
                    continue  # other structural ops are never typed
            for q in op.output_ports:
                old = q.dtype
                if old is not None and not _rank_unknown(old):
                    continue
                dtype = static.get(id(q)) if g is graph else None
                if dtype is None or (old is not None and not _refines(old, dtype)):
                    return None
                out.append((q, dtype))
    return out


def _static_tensor(dtype: str) -> bool:
    """``tensor(<elem>)[d0,d1,...]`` with every dimension a number (``tensor(float)[]`` too)."""
    if not dtype.startswith("tensor(") or not dtype.endswith("]") or "[" not in dtype:
        return False
    dims = dtype[dtype.index("[") + 1:-1]
    return all(d.strip().isdigit() for d in dims.split(",")) if dims else True


def _value_types(gp: Any, found: dict[str, Any], nested: bool) -> None:
    """Value name -> inferred type, in ``gp`` and, when ``nested`` (the graph holds graphs), the graphs its
    nodes hold (ONNX names are unique across a model's graphs)."""
    import onnx

    for vi in gp.value_info:
        found.setdefault(vi.name, vi.type)
    for vi in gp.output:
        found.setdefault(vi.name, vi.type)
    if not nested:
        return
    for node in gp.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                _value_types(a.g, found, True)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sub in a.graphs:
                    _value_types(sub, found, True)


def _rank_unknown(dtype: str) -> bool:
    """A tensor type that states its element type only (``tensor(float)``): a rule's new op says no more."""
    return dtype.startswith("tensor(") and dtype.endswith(")") and "[" not in dtype


def _refines(old: str, new: str) -> bool:
    """``new`` is ``old`` with a shape (the same element type)."""
    return new.startswith(old) and new[len(old):].startswith("[")


def _type_initializer(op: Any, texts: dict[Any, str]) -> int:
    """An initializer's value type from its tensor's element type and shape (no bytes read): rules that need the
    shape of a weight (a convolution's kernel) see it.  ``texts``: the type of each ``(dtype, shape)`` made so
    far (weights often share one)."""
    outputs = op.output_ports
    if not outputs or outputs[0].dtype is not None:
        return 0
    q = outputs[0]
    attrs = op.attrs
    value = attrs.get("value")
    if value is None or attrs.get("graph_input"):
        return 0
    dtype, shape = getattr(value, "dtype", None), getattr(value, "shape", None)
    if dtype is None or shape is None:
        return 0
    key: Any = (dtype, shape)
    try:
        text = texts.get(key)
    except TypeError:  # (an unhashable shape)
        key = text = None
    try:
        if text is None:  # (the text OnnxType.tensor(elem, shape) gives, made directly)
            text = f"tensor({elem_type_from_numpy(dtype)})[{','.join([str(int(d)) for d in shape])}]"
            if key is not None:
                texts[key] = text
        q.dtype = text
    except (ValueError, TypeError, KeyError):
        return 0
    return 1
