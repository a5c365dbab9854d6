"""The ``tf`` type system.

Attribute types are TensorFlow's OpDef attribute types, qualified ``tf.``:

==================  ============================================================
``tf.string``       ``str`` (or ``bytes``)
``tf.int``          ``int`` (not ``bool``)
``tf.float``        ``float`` or ``int`` (not ``bool``)
``tf.bool``         ``bool``
``tf.type``         a dtype name (``float32``); never a ``_ref`` type
``tf.shape``        list of ints >= -1 (-1: unknown dimension), or None (unknown rank)
``tf.tensor``       numpy array or :class:`amanda_core.ir.Tensor` of a TF element type
``tf.func``         a function name, ``{"name": str, "attr": {str: value}}``, or the function's body as a
                    :class:`amanda_core.ir.Graph` (what the importer makes)
``tf.list(X)``      list (or tuple) of values of ``X``, for each ``X`` above
==================  ============================================================

``tf.DType``, ``tf.TensorShape`` and ``tf.Tensor`` (the names of the minimal
schema examples/schemas/tensorflow-1.13.1.yaml) are aliases of ``tf.type``, ``tf.shape`` and ``tf.tensor``,
also inside ``list(...)``.

Port types say which dtypes a port may carry (:meth:`TFTypeSystem.check_dtype`):

* ``T`` - the name of a type attribute of the op: the port's element type
  must be the attribute's value (its default if the op does not set it; if
  it has none, one of its allowed values, and the same for every port bound
  to ``T``).  For a ``list(type)`` attribute the *i*-th port of a variadic
  slot has the *i*-th type when the validation context names the port, and
  one of the listed types otherwise;
* ``float32`` - a fixed dtype;
* ``Ref(T)``, ``Ref(float32)`` or ``float32_ref`` - a reference of that type;
* ``DType`` (or ``type``) - any dtype.

A reference dtype (``float32_ref``) may enter a plain input (TensorFlow
dereferences it), so it is accepted where a plain type is expected, except
on an output port when the context says which port it is.  Port dtype
strings are parsed by :func:`amanda_tf.dtypes.parse_dtype`
(``float32[1,784]``).
"""

from __future__ import annotations

__all__ = ["ATTR_TYPES", "ALIASES", "TFTypeSystem", "parse_attr_type"]

import re
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from amanda_core.ir.graph import Graph, OutputPort
from amanda_core.ir.tensor import Tensor, resolve_dtype
from amanda_core.namespace.schema import NO_DEFAULT, AttrSchema, OpSchema, PortSchema
from amanda_core.namespace.types import TypeExprError, TypeSystem

from .dtypes import DTypeError, TFDType, dtype_enum, dtype_from_numpy, is_dtype_name, parse_dtype

ATTR_TYPES: tuple[str, ...] = ("string", "int", "float", "bool", "type", "shape", "tensor", "func")
"""TensorFlow's OpDef attribute types (each also as ``list(X)``)."""

ALIASES: Mapping[str, str] = {"DType": "type", "TensorShape": "shape", "Tensor": "tensor"}

_LIST_RE = re.compile(r"^list\(\s*([A-Za-z]+)\s*\)$")
_REF_RE = re.compile(r"^Ref\(\s*([A-Za-z0-9_]+)\s*\)$")


@lru_cache(maxsize=256)
def parse_attr_type(expr: str) -> tuple[bool, str]:
    """``"list(int)"`` -> ``(True, "int")``, ``"DType"`` -> ``(False, "type")``; :class:`TypeExprError`
    for anything else."""
    text = expr.strip()
    if text.startswith("tf."):
        text = text[3:]
    m = _LIST_RE.match(text)
    is_list, base = (True, m.group(1)) if m else (False, text)
    base = ALIASES.get(base, base)
    if base not in ATTR_TYPES:
        known = ", ".join([*ATTR_TYPES, *(f"list({t})" for t in ATTR_TYPES), *ALIASES])
        raise TypeExprError(f"unknown tf attribute type {expr!r}; tf attribute types are: {known}")
    return is_list, base


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _got(value: Any) -> str:
    return f"got {type(value).__name__} {_brief(value)}"


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_string(v: Any) -> str | None:
    return None if isinstance(v, (str, bytes)) else f"expected a string, {_got(v)}"


def _check_int(v: Any) -> str | None:
    return None if _is_int(v) else f"expected an int, {_got(v)}"


def _check_float(v: Any) -> str | None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool)
    return None if ok else f"expected a float, {_got(v)}"


def _check_bool(v: Any) -> str | None:
    return None if isinstance(v, bool) else f"expected a bool, {_got(v)}"


def _check_type(v: Any) -> str | None:
    if not isinstance(v, str):
        return f"expected a dtype name such as 'float32', {_got(v)}"
    try:
        dtype_enum(v)
    except DTypeError as e:
        return str(e)
    if is_dtype_name(v, ref=True):
        return f"a type attribute holds a plain dtype, not the reference type {v!r}"
    return None


def _check_shape(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, (list, tuple)) and all(_is_int(d) and d >= -1 for d in v):
        return None
    return f"expected a shape (a list of ints, -1 for an unknown dimension, or null for an unknown rank), {_got(v)}"


def _check_tensor(v: Any) -> str | None:
    if isinstance(v, Tensor):
        try:
            nd = resolve_dtype(v.dtype)
        except TypeError:
            return f"a tensor of element type {v.dtype!r} has no TensorFlow dtype"
    elif isinstance(v, np.ndarray):
        nd = v.dtype
    else:
        return f"expected a tensor (numpy array or amanda_core.ir.Tensor), {_got(v)}"
    try:
        dtype_from_numpy(nd)
    except DTypeError:
        return f"a tensor of element type {nd.name!r} has no TensorFlow dtype"
    return None


def _check_func(v: Any) -> str | None:
    if isinstance(v, Graph):  # a function body read from the function library (amanda_tf.importer)
        return None
    if isinstance(v, str):
        return None if v else "expected a function name, got an empty string"
    if isinstance(v, dict):
        extra = set(v) - {"name", "attr"}
        if extra:
            return f"a function value has keys 'name' and 'attr', got also {sorted(extra)}"
        if not isinstance(v.get("name"), str) or not v["name"]:
            return f"a function value needs a non-empty 'name', got {_brief(v.get('name'))}"
        attr = v.get("attr", {})
        if not isinstance(attr, dict) or not all(isinstance(k, str) for k in attr):
            return f"a function's 'attr' maps attribute names to values, got {_brief(attr)}"
        return None
    return f"expected a function (a name, or {{name: ..., attr: {{...}}}}), {_got(v)}"


_CHECKERS: dict[str, Callable[[Any], str | None]] = {
    "string": _check_string, "int": _check_int, "float": _check_float, "bool": _check_bool, "type": _check_type,
    "shape": _check_shape, "tensor": _check_tensor, "func": _check_func,
}


def _type_attr(s: OpSchema | None, name: str) -> AttrSchema | None:
    """The attribute ``name`` of ``s`` if it is a (list of) type attribute."""
    if s is None:
        return None
    a = s.attr(name)
    if a is None:
        return None
    try:
        _, base = parse_attr_type(a.type)
    except TypeExprError:
        return None
    return a if base == "type" else None


def _variadic_index(port: Any, ps: PortSchema | None) -> int | None:
    if port is None or ps is None or not ps.variadic:
        return None
    name = getattr(port, "name", None)
    if isinstance(name, str) and name.startswith(ps.name + "_") and name[len(ps.name) + 1:].isdigit():
        return int(name[len(ps.name) + 1:])
    return None


class TFTypeSystem(TypeSystem):
    """``tf``: TensorFlow attribute types and port dtypes (see the module docs)."""

    name = "tf"
    description = "TensorFlow OpDef attribute types (tf.int, tf.list(type) ...) and dtypes (float32, float32_ref)"

    def canonical_dtype(self, value: Any) -> str | None:
        """Numpy-style element type name of a TensorFlow dtype name (``float32``, ``float32_ref``, shaped
        ``float32[1,784]``) or DataType number; ``string`` for strings; None for resource and variant."""
        from .dtypes import DTypeError, dtype_from_enum, numpy_dtype, parse_dtype

        try:
            if isinstance(value, int) and not isinstance(value, bool):
                name = dtype_from_enum(value)
            else:
                name = parse_dtype(str(value)).name
            if name.endswith("_ref"):
                name = name[: -len("_ref")]
            if name == "string":
                return "string"
            nd = numpy_dtype(name)
        except (DTypeError, ValueError, TypeError):
            return None
        return None if nd is None else str(nd.name)

    def tensor_type(self, dtype: Any) -> tuple[str, tuple[int | str | None, ...] | None] | None:
        """``float32[?,784]`` -> ``("float32", (None, 784))``."""
        from .dtypes import DTypeError, parse_dtype

        try:
            t = parse_dtype(str(dtype))
        except (DTypeError, TypeError, ValueError):
            return None
        elem = self.canonical_dtype(t.name)
        if elem is None or t.is_ref:
            return None
        return elem, t.shape

    def make_tensor_type(self, elem: str, shape: tuple[int | str | None, ...] | None) -> str | None:
        """``("float32", ("batch", 3))`` -> ``float32[?,3]`` (TensorFlow shapes have no names for dims)."""
        from .dtypes import DTypeError, TFDType

        name = self.from_canonical_dtype(elem)
        if name is None:
            return None
        try:
            dims = None if shape is None else tuple(d if isinstance(d, int) else None for d in shape)
            return str(TFDType(str(name), False, dims))
        except (DTypeError, TypeError, ValueError):
            return None

    def from_canonical_dtype(self, name: str) -> Any:
        """The TensorFlow dtype name (what a ``type`` attribute holds) of a numpy-style name."""
        from .dtypes import DTypeError, dtype_from_numpy

        if name == "string":
            return "string"
        try:
            from amanda_core.ir.tensor import resolve_dtype

            return dtype_from_numpy(resolve_dtype(name))
        except (DTypeError, TypeError, ValueError):
            return None

    def type_names(self) -> Sequence[str]:
        return [*ATTR_TYPES, *(f"list({t})" for t in ATTR_TYPES), *ALIASES]

    # -- attribute values
    def check_value(self, type_expr: str, value: Any) -> str | None:
        is_list, base = parse_attr_type(type_expr)
        check = _CHECKERS[base]
        if not is_list:
            return check(value)
        if not isinstance(value, (list, tuple)):
            return f"expected a list of {base}, {_got(value)}"
        for i, item in enumerate(value):
            reason = check(item)
            if reason:
                return f"item {i}: {reason}"
        return None

    # -- port dtypes
    def parse_dtype(self, text: str) -> TFDType:
        return parse_dtype(text)

    def check_dtype(self, type_expr: str, dtype: Any, context: Mapping[str, Any] | None = None) -> str | None:
        """None if a port of schema type ``type_expr`` may carry ``dtype``.

        ``context`` (from validation) has ``op``, ``op_schema`` and
        ``bindings`` (a dict shared by the ports of one op); ``port`` and
        ``port_schema``, when present, say which port is checked."""
        try:
            d = parse_dtype(dtype)
        except DTypeError as e:
            return str(e)
        ctx = context or {}
        expr = type_expr.strip()
        want_ref = False
        m = _REF_RE.match(expr)
        if m:
            want_ref, expr = True, m.group(1)
        op_schema: OpSchema | None = ctx.get("op_schema")
        attr = _type_attr(op_schema, expr)
        if attr is not None:
            reason = self._check_bound(attr, d, ctx)
        elif expr in ("DType", "type"):
            return None  # any dtype, refs included (examples/schemas/tensorflow-1.13.1.yaml types VariableV2's ref so)
        elif is_dtype_name(expr, ref=None):
            if expr.endswith("_ref"):
                want_ref, expr = True, expr[:-4]
            reason = None if d.name == expr else f"expected dtype {expr}{'_ref' if want_ref else ''}, got {d}"
        else:
            where = f" of {op_schema.type}" if op_schema is not None else ""
            return f"port type {type_expr!r} names neither a TensorFlow dtype nor a type attribute{where}"
        if reason:
            return reason
        if want_ref and not d.is_ref:
            return f"expects a reference ({d.name}_ref), got the plain dtype {d}"
        if not want_ref and d.is_ref and isinstance(ctx.get("port"), OutputPort):
            return f"produces a plain tensor, not the reference {d}"
        return None

    def _check_bound(self, attr: AttrSchema, d: TFDType, ctx: Mapping[str, Any]) -> str | None:
        """The port's element type against the type attribute ``attr`` of the op."""
        op = ctx.get("op")
        value = op.attrs.get(attr.name, NO_DEFAULT) if op is not None else NO_DEFAULT
        if value is NO_DEFAULT:
            value = attr.default
        if isinstance(value, str):
            if not is_dtype_name(value):
                return None  # the attribute itself is reported as invalid
            return None if d.name == value else f"dtype {d} does not match attribute {attr.name} = {value}"
        if isinstance(value, (list, tuple)):
            if not all(is_dtype_name(v) for v in value):
                return None
            index = _variadic_index(ctx.get("port"), ctx.get("port_schema"))
            if index is not None:
                if index >= len(value):
                    return f"port number {index} has no type in attribute {attr.name} = {list(value)}"
                want = value[index]
                return None if d.name == want else (
                    f"dtype {d} does not match {attr.name}[{index}] = {want} (attribute {attr.name} = {list(value)})")
            return None if d.name in value else f"dtype {d} is none of attribute {attr.name} = {list(value)}"
        if value is not NO_DEFAULT and value is not None:
            return None  # a malformed attribute value, reported by the attribute check
        # Unset and without default: the dtype must be allowed and agree across the ports bound to it.
        if attr.allowed_values is not None and d.name not in attr.allowed_values:
            return f"dtype {d} is not allowed for {attr.name} (allowed: {', '.join(map(str, attr.allowed_values))})"
        bindings = ctx.get("bindings")
        if isinstance(bindings, dict) and not parse_attr_type(attr.type)[0]:
            bound = bindings.setdefault(("tf", attr.name), d.name)
            if bound != d.name:
                return f"dtype {d} differs from {bound}, which another port binds to {attr.name}"
        return None

