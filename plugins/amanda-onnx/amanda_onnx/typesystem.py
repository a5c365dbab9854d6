"""The ``onnx`` type system.

Attribute types are ONNX's attribute kinds, written ``onnx.INT``,
``onnx.FLOATS``, ``onnx.GRAPH`` ... in a namespace schema.  The Python values
Amanda holds for them:

==================  ===============================================================
kind                value
==================  ===============================================================
``FLOAT``           ``float`` (an ``int`` is accepted; ``bool`` is not)
``INT``             ``int`` (not ``bool``)
``STRING``          ``str``; ``bytes`` for a string that is not UTF-8
``TENSOR``          ``numpy.ndarray`` or :class:`amanda_core.ir.Tensor`
``GRAPH``           :class:`amanda_core.Graph`
``SPARSE_TENSOR``   :class:`SparseTensor`
``TYPE_PROTO``      a dtype string (``tensor(float)``; see :mod:`amanda_onnx.dtypes`)
                    or a parsed :class:`~amanda_onnx.dtypes.OnnxType`
``FLOATS`` ...      a list (or tuple) of the singular kind's values
==================  ===============================================================

Port types are ONNX types (``tensor(int64)``) or the names of an op schema's
type constraints (``T``).  :meth:`OnnxTypeSystem.check_dtype` checks a port's
dtype string against either; a constraint binds one type for all ports of an
op that use it (homogeneous ports), as ONNX requires.
"""

from __future__ import annotations

__all__ = ["ATTR_KINDS", "OnnxTypeSystem", "SparseTensor", "SPARSE_TENSOR_TAG"]

from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from amanda_core.errors import SchemaError
from amanda_core.ir import Graph, Tensor, is_tensor, values_equal
from amanda_core.namespace.types import TypeExprError, TypeSystem
from amanda_core.serialization import register_value_type

from .dtypes import OnnxType, elem_type_from_numpy, parse_dtype


def _tensor_dtype_name(value: np.ndarray | Tensor) -> str:
    return value.dtype if isinstance(value, Tensor) else value.dtype.name


class SparseTensor:
    """An ONNX sparse tensor (``SparseTensorProto``): ``values`` holds the NNZ stored
    values (a 1-D tensor), ``indices`` their positions as int64 (shape ``[NNZ]``
    of linear indices, or ``[NNZ, rank]`` of coordinates), ``dims`` the dense
    shape.  Immutable: copies share it."""

    __slots__ = ("values", "indices", "dims")

    def __init__(self, values: np.ndarray | Tensor, indices: np.ndarray | Tensor, dims: Sequence[int]) -> None:
        if not is_tensor(values):
            raise TypeError(f"SparseTensor values must be a numpy array or Tensor, got {type(values).__name__}")
        if not is_tensor(indices):
            raise TypeError(f"SparseTensor indices must be a numpy array or Tensor, got {type(indices).__name__}")
        dims_t = tuple(dims)
        if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in dims_t):
            raise ValueError(f"SparseTensor dims must be non-negative ints, got {list(dims_t)}")
        dims_t = tuple(int(d) for d in dims_t)
        if len(values.shape) != 1:
            raise ValueError(f"SparseTensor values must be 1-D, got shape {list(values.shape)}")
        nnz = values.shape[0]
        if _tensor_dtype_name(indices) != "int64":
            raise ValueError(f"SparseTensor indices must be int64, got {_tensor_dtype_name(indices)}")
        ishape = tuple(indices.shape)
        if ishape not in ((nnz,), (nnz, len(dims_t))):
            raise ValueError(f"SparseTensor indices have shape {list(ishape)}; with {nnz} values and "
                             f"{len(dims_t)} dims they must be [{nnz}] or [{nnz}, {len(dims_t)}]")
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "indices", indices)
        object.__setattr__(self, "dims", dims_t)

    values: np.ndarray | Tensor
    indices: np.ndarray | Tensor
    dims: tuple[int, ...]

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("SparseTensor is immutable")

    @property
    def elem_type(self) -> str:
        """The ONNX element type of the values (``float``, ``int64`` ...)."""
        return elem_type_from_numpy(_tensor_dtype_name(self.values))

    @property
    def nnz(self) -> int:
        return int(self.values.shape[0])

    def to_dense(self) -> np.ndarray:
        """The dense array: zeros except at the stored positions."""
        values = np.asarray(self.values)
        indices = np.asarray(self.indices)
        out = np.zeros(self.dims, dtype=values.dtype)
        if indices.ndim == 1:
            out.reshape(-1)[indices] = values
        else:
            out[tuple(indices.T)] = values
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SparseTensor):
            return NotImplemented
        return self.dims == other.dims and values_equal(self.values, other.values) and values_equal(
            self.indices, other.indices)

    __hash__ = None  # type: ignore[assignment]

    def __copy__(self) -> SparseTensor:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> SparseTensor:
        return self

    def __repr__(self) -> str:
        return f"SparseTensor({self.elem_type}, nnz={self.nnz}, dims={list(self.dims)})"


# --------------------------------------------------------------------------- attribute kinds


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_float(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _is_type(v: Any) -> bool:
    if isinstance(v, OnnxType):
        return True
    if not isinstance(v, str):
        return False
    try:
        parse_dtype(v)
    except TypeExprError:
        return False
    return True


_SINGLE: dict[str, tuple[Callable[[Any], bool], str]] = {
    "FLOAT": (_is_float, "a float"),
    "INT": (_is_int, "an int"),
    "STRING": (lambda v: isinstance(v, (str, bytes)), "a str (bytes if not UTF-8)"),
    "TENSOR": (is_tensor, "a numpy array or amanda_core Tensor"),
    "GRAPH": (lambda v: isinstance(v, Graph), "an amanda_core Graph"),
    "SPARSE_TENSOR": (lambda v: isinstance(v, SparseTensor), "an amanda_onnx SparseTensor"),
    "TYPE_PROTO": (_is_type, "an ONNX type string such as 'tensor(float)'"),
}
_PLURAL = {"FLOATS": "FLOAT", "INTS": "INT", "STRINGS": "STRING", "TENSORS": "TENSOR", "GRAPHS": "GRAPH",
           "SPARSE_TENSORS": "SPARSE_TENSOR", "TYPE_PROTOS": "TYPE_PROTO"}

ATTR_KINDS: tuple[str, ...] = (*_SINGLE, *_PLURAL)
"""Every ONNX attribute kind (``AttributeProto.AttributeType`` but ``UNDEFINED``)."""


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class OnnxTypeSystem(TypeSystem):
    """``onnx``: attribute kinds for attributes, ONNX types and type constraints for ports."""

    name = "onnx"
    description = "ONNX attribute kinds (INT, FLOATS, GRAPH ...) and value types (tensor(float), seq(...) ...)"

    def canonical_dtype(self, value: Any) -> str | None:
        """Numpy-style element type name of an ONNX element type number (``1``), name (``float``), or tensor
        type (``tensor(float)[...]``, parsed or not); ``string`` for strings."""
        from .dtypes import elem_type, parse_dtype

        try:
            if isinstance(value, int) and not isinstance(value, bool):
                e = elem_type(value)
            elif isinstance(value, str) and "(" not in value:
                e = elem_type(value)
            else:
                t = parse_dtype(str(value))
                if t.elem_type is None:
                    return None
                e = elem_type(t.elem_type)
        except (ValueError, TypeError, SchemaError):
            return None
        return "string" if e.name == "string" else str(e.numpy)

    def from_canonical_dtype(self, name: str) -> Any:
        """The ONNX element type number (what ``Cast``'s ``to`` holds) of a numpy-style name."""
        from .dtypes import elem_type_from_numpy, elem_type_number

        try:
            return elem_type_number("string" if name == "string" else elem_type_from_numpy(name))
        except (ValueError, TypeError):
            return None

    def tensor_type(self, dtype: Any) -> tuple[str, tuple[int | str | None, ...] | None] | None:
        """``tensor(float)[N,3]`` -> ``("float32", ("N", 3))``."""
        from amanda_core.namespace.types import TypeExprError

        from .dtypes import numpy_dtype, parse_dtype

        try:
            t = parse_dtype(str(dtype))
            if t.kind != "tensor" or t.elem_type is None:
                return None
            elem = "string" if t.elem_type == "string" else numpy_dtype(t.elem_type).name
        except (ValueError, TypeError, KeyError, TypeExprError):  # not an ONNX type (another system's string)
            return None
        return elem, t.shape

    def make_tensor_type(self, elem: str, shape: tuple[int | str | None, ...] | None) -> str | None:
        from .dtypes import OnnxType, elem_type_from_numpy

        try:
            name = "string" if elem == "string" else elem_type_from_numpy(elem)
            return str(OnnxType.tensor(name, shape))
        except (ValueError, TypeError, KeyError):
            return None

    def type_names(self) -> Sequence[str]:
        return ATTR_KINDS

    # -- attributes
    def check_value(self, type_expr: str, value: Any) -> str | None:
        kind = type_expr.strip()
        if kind in _SINGLE:
            ok, what = _SINGLE[kind]
            if ok(value):
                return None
            return f"expected onnx.{kind} ({what}), got {type(value).__name__} {_brief(value)}"
        if kind in _PLURAL:
            ok, what = _SINGLE[_PLURAL[kind]]
            if not isinstance(value, (list, tuple)):
                return f"expected onnx.{kind} (a list of {_PLURAL[kind].lower()}), got {type(value).__name__} " \
                       f"{_brief(value)}"
            for i, item in enumerate(value):
                if not ok(item):
                    return f"expected onnx.{kind}: element {i} should be {what}, got {type(item).__name__} " \
                           f"{_brief(item)}"
            return None
        raise TypeExprError(f"unknown onnx attribute type {type_expr!r} (known: {', '.join(ATTR_KINDS)})")

    # -- ports
    def parse_dtype(self, text: str) -> OnnxType:
        return parse_dtype(text)

    def check_dtype(self, type_expr: str, dtype: Any, context: Mapping[str, Any] | None = None) -> str | None:
        """None if a port of schema type ``type_expr`` may carry ``dtype``.

        ``type_expr`` is a type constraint of ``context["op_schema"]`` or an ONNX
        type.  A constraint is bound in ``context["bindings"]`` (shared by the
        ports of one op) to the first type seen, and every later port using it
        must have the same type -- except heterogeneous variadic ports (port meta
        ``homogeneous: false``, as in Loop or If), whose ports each pick any
        allowed type.  Shapes never matter."""
        try:
            actual = dtype if isinstance(dtype, OnnxType) else parse_dtype(str(dtype))
        except TypeExprError as e:
            return f"cannot read dtype: {e}"
        ctx = context or {}
        op_schema = ctx.get("op_schema")
        constraints: Mapping[str, Sequence[str]] = getattr(op_schema, "type_constraints", None) or {}
        name = type_expr.strip()
        if name in constraints:
            allowed = _canonical_set(tuple(constraints[name]))
            got = actual.canonical
            if got not in allowed:
                shown = ", ".join(constraints[name][:8]) + (", ..." if len(constraints[name]) > 8 else "")
                return f"{actual} is not allowed for type constraint {name} (allowed: {shown})"
            if _binds(name, op_schema, ctx.get("port_schema")):
                bindings = ctx.get("bindings")
                if isinstance(bindings, dict):
                    bound = bindings.setdefault(name, got)
                    if bound != got:
                        return f"type constraint {name} is bound to {bound} by another port, but this port has {got}"
            return None
        try:
            expected = parse_dtype(name)
        except TypeExprError as e:
            op_type = getattr(op_schema, "type", None)
            where = f" of op {op_type}" if op_type else ""
            return f"schema port type {name!r} is neither a type constraint{where} nor an ONNX type ({e})"
        if expected.canonical != actual.canonical:
            return f"expected {expected.canonical}, got {actual}"
        return None


@lru_cache(maxsize=2048)
def _canonical_set(allowed: tuple[str, ...]) -> frozenset[str]:
    return frozenset(parse_dtype(t).canonical for t in allowed)


def _binds(constraint: str, op_schema: Any, port_schema: Any) -> bool:
    """Does this port's use of ``constraint`` bind it?  Not on a heterogeneous variadic port."""
    if port_schema is not None:
        return bool(port_schema.meta.get("homogeneous", True))
    for p in (*getattr(op_schema, "input_ports", ()), *getattr(op_schema, "output_ports", ())):
        if p.type == constraint and not p.meta.get("homogeneous", True):
            return False
    return True


# --------------------------------------------------------------------------- YAML form


def _encode_sparse(value: SparseTensor) -> dict[str, Any]:
    return {"values": value.values, "indices": value.indices, "dims": list(value.dims)}


def _decode_sparse(data: Any) -> SparseTensor:
    if not isinstance(data, dict) or set(data) != {"values", "indices", "dims"}:
        raise ValueError("!onnx.sparse_tensor takes {values, indices, dims}")
    return SparseTensor(data["values"], data["indices"], data["dims"])


SPARSE_TENSOR_TAG = "onnx.sparse_tensor"
"""YAML tag of :class:`SparseTensor` values: ``!onnx.sparse_tensor {values: !tensor ..., indices: ..., dims: [..]}``."""

register_value_type(SPARSE_TENSOR_TAG, SparseTensor, _encode_sparse, _decode_sparse)
