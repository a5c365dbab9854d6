"""The ``torch`` type system.

Type expressions are torch's schema types (see :mod:`amanda_torch.typeexpr`):
``Tensor``, ``Tensor?``, ``int[2]``, ``SymInt[]``, ``Scalar``, ``ScalarType?``,
``Dict(str, Tensor)``, ``(Tensor, Tensor)``, ``t`` ... and ``A | B`` unions.

Python values accepted by :meth:`TorchTypeSystem.check_value` (attribute
values, port defaults):

============================  ==========================================================
type                          value
============================  ==========================================================
``Tensor``                    ``numpy.ndarray``, :class:`amanda_core.ir.Tensor`, a ``torch.Tensor``
``int`` ``SymInt``            ``int`` (numpy integers too; not ``bool``)
``float`` ``SymFloat``        ``int`` or ``float`` (not ``bool``)
``bool`` ``SymBool``          ``bool``
``complex``                   ``complex``, ``int`` or ``float``
``Scalar`` ``number``         ``int``, ``float``, ``complex`` or ``bool``
``str`` ``Dimname``           ``str`` (a Dimname is an identifier or ``*``)
``ScalarType``                enum number (``6``), TorchScript name (``Float``), torch / numpy name
                              (``float32``, ``torch.float32``, ``torch.float`` aliases), numpy dtype
``Layout``                    number, ``strided`` / ``torch.strided`` / C++ name ``Strided`` ...
``MemoryFormat``              number, ``contiguous_format`` / ``channels_last`` ... / ``ChannelsLast``
``QScheme``                   number, ``per_tensor_affine`` ... / ``PER_TENSOR_AFFINE``
``Device``                    ``"cpu"``, ``"cuda:0"`` ... (type, optional ``:index``), a ``torch.device``
``Generator``                 a ``torch.Generator``
``Storage`` ``Stream``        a torch storage / stream object
``T?``                        None or a ``T``
``T[]`` ``T[N]``              a list or tuple of ``T``; for ``int[N]``-like lists also one ``T``,
                              which torch broadcasts (``stride=1``); N is a hint, not a length check
``(A, B)``                    a list or tuple of exactly that many items
``Dict(K, V)``                a dict
``Future(T)`` ``RRef(T)``     a torch future / rref / await object
``Await(T)``
``Any``, type variables       anything
custom classes, ``Capsule``   any object that is not None (opaque)
``Type``                      a TorchScript value type text (parsed with :meth:`parse_dtype`)
``Graph``                     an :class:`amanda_core.Graph` (blocks and subgraphs of structural ops)
============================  ==========================================================

:meth:`TorchTypeSystem.parse_dtype` parses port dtypes (see
:mod:`amanda_torch.valuetypes`); :meth:`TorchTypeSystem.check_dtype` says
whether a value of that type may flow through a port of a schema type, as
TorchScript's type rules allow it (a tensor type fits ``Tensor`` and
``Tensor?``, ``int`` fits ``int``, ``float`` and ``Scalar``, ``NoneType`` fits
any optional, ``int`` fits ``ScalarType`` / ``Layout`` / ``MemoryFormat``,
which TorchScript carries as ints, and so on).  A value type of ``Any`` fits
every port: nothing can be told.
"""

from __future__ import annotations

__all__ = ["TorchTypeSystem"]

import numbers
import re
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from amanda_core.errors import SchemaError
from amanda_core.namespace.types import TypeSystem

from .scalar_types import LAYOUTS, MEMORY_FORMATS, QSCHEMES, lookup_enum, lookup_scalar_type
from .typeexpr import (
    BUILTIN_NAMES,
    Container,
    ListOf,
    Named,
    OptionalOf,
    TupleOf,
    TypeExpr,
    TypeParseError,
    UnionOf,
    format_type,
    is_type_variable,
    parse_type,
)
from .valuetypes import (
    ClassValueType,
    ContainerValueType,
    DtypeParseError,
    ListValueType,
    NamedValueType,
    OptionalValueType,
    TensorValueType,
    TupleValueType,
    UnionValueType,
    ValueType,
    parse_value_type,
)

Checker = Callable[[Any], bool]

_DEVICE = re.compile(r"^[a-z][a-z0-9_]*(:\d+)?$")
_DIMNAME = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*|\*)$")


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_real(v: Any) -> bool:
    return (isinstance(v, (int, float, np.integer, np.floating))
            and not isinstance(v, (bool, np.bool_)))


def _is_bool(v: Any) -> bool:
    return isinstance(v, (bool, np.bool_))


def _from_torch(v: Any, *names: str) -> bool:
    cls = type(v)
    return cls.__module__.split(".")[0] == "torch" and any(n in cls.__name__ for n in names)


def _is_tensor(v: Any) -> bool:
    from amanda_core.ir.tensor import Tensor

    return isinstance(v, (np.ndarray, Tensor)) or _from_torch(v, "Tensor", "Parameter")


def _is_device(v: Any) -> bool:
    if isinstance(v, str):
        return bool(_DEVICE.match(v))
    return type(v).__name__ == "device" and type(v).__module__.split(".")[0] == "torch"


def _is_graph(v: Any) -> bool:
    from amanda_core.ir.graph import Graph

    return isinstance(v, Graph)


def _is_value_type_text(v: Any) -> bool:
    if not isinstance(v, str):
        return False
    try:
        parse_value_type(v)
    except DtypeParseError:
        return False
    return True


_SIMPLE: dict[str, Checker] = {
    "Tensor": _is_tensor,
    "int": _is_int,
    "SymInt": _is_int,
    "float": _is_real,
    "SymFloat": _is_real,
    "bool": _is_bool,
    "SymBool": _is_bool,
    "complex": lambda v: _is_real(v) or isinstance(v, (complex, np.complexfloating)),
    "number": lambda v: isinstance(v, (numbers.Number, np.number, np.bool_)),
    "Scalar": lambda v: isinstance(v, (numbers.Number, np.number, np.bool_)),
    "str": lambda v: isinstance(v, str),
    "Dimname": lambda v: isinstance(v, str) and bool(_DIMNAME.match(v)),
    "ScalarType": lambda v: lookup_scalar_type(v) is not None,
    "Layout": lambda v: lookup_enum(LAYOUTS, v) is not None,
    "MemoryFormat": lambda v: lookup_enum(MEMORY_FORMATS, v) is not None,
    "QScheme": lambda v: lookup_enum(QSCHEMES, v) is not None,
    "Device": _is_device,
    "DeviceObjType": _is_device,
    "Generator": lambda v: _from_torch(v, "Generator"),
    "Storage": lambda v: _from_torch(v, "Storage"),
    "Stream": lambda v: _from_torch(v, "Stream"),
    "StreamObjType": lambda v: _from_torch(v, "Stream"),
    "Capsule": lambda v: v is not None,
    "PyObject": lambda v: True,
    "Any": lambda v: True,
    "NoneType": lambda v: v is None,
    "None": lambda v: v is None,
    "AnyClassType": lambda v: v is not None,
    "AnyEnumType": lambda v: v is not None,
    "AnyListType": lambda v: isinstance(v, (list, tuple)),
    "AnyTupleType": lambda v: isinstance(v, (list, tuple)),
    "Type": _is_value_type_text,
    "Graph": _is_graph,
    "Function": lambda v: isinstance(v, str) or callable(v),
    "Uninitialized": lambda v: True,
}
assert set(_SIMPLE) == set(BUILTIN_NAMES), set(_SIMPLE) ^ set(BUILTIN_NAMES)

_CONTAINER_OBJECTS = {"Future": ("Future",), "RRef": ("RRef",), "Await": ("Await",)}
_BROADCASTS = {"int", "SymInt", "bool", "SymBool", "float", "SymFloat"}


def _compile(t: TypeExpr, expr: str) -> Checker:
    if isinstance(t, Named):
        checker = _SIMPLE.get(t.name)
        if checker is not None:
            return checker
        if is_type_variable(t.name) or "." in t.name:
            return (lambda v: True) if is_type_variable(t.name) else (lambda v: v is not None)
        raise TypeParseError(f"unknown torch type {t.name!r} in {expr!r}")
    if isinstance(t, OptionalOf):
        inner = _compile(t.elem, expr)
        return lambda v: v is None or inner(v)
    if isinstance(t, ListOf):
        item = _compile(t.elem, expr)
        scalar_ok = t.size is not None and isinstance(t.elem, Named) and t.elem.name in _BROADCASTS
        return lambda v: (isinstance(v, (list, tuple)) and all(item(x) for x in v)) or (scalar_ok and item(v))
    if isinstance(t, TupleOf):
        items = [_compile(a, expr) for a in t.items]
        return lambda v: isinstance(v, (list, tuple)) and len(v) == len(items) and all(
            c(x) for c, x in zip(items, v))
    if isinstance(t, UnionOf):
        alts = [_compile(a, expr) for a in t.alts]
        return lambda v: any(c(v) for c in alts)
    if isinstance(t, Container):
        if t.name == "Dict":
            if len(t.args) != 2:
                raise TypeParseError(f"Dict takes two types in {expr!r}")
            k, val = (_compile(a, expr) for a in t.args)
            return lambda v: isinstance(v, dict) and all(k(a) and val(b) for a, b in v.items())
        names = _CONTAINER_OBJECTS.get(t.name)
        if names is None:
            raise TypeParseError(f"unknown torch type {t.name!r} in {expr!r}")
        for a in t.args:
            _compile(a, expr)  # reject unknown element types early
        return lambda v: _from_torch(v, *names)
    raise TypeParseError(f"cannot check values of {expr!r}")


@lru_cache(maxsize=4096)
def compile_type(expr: str) -> Checker:
    """A function telling whether a Python value has the schema type ``expr``."""
    return _compile(parse_type(expr), expr)


# --------------------------------------------------------------------------- dtype fit

_NUMBERS = {"int", "float", "complex", "bool", "number", "Scalar", "SymInt", "SymFloat", "SymBool"}
_FITS: dict[str, set[str]] = {
    "int": {"int", "SymInt"},
    "SymInt": {"int", "SymInt"},
    "float": {"float", "SymFloat", "int", "SymInt"},
    "SymFloat": {"float", "SymFloat", "int", "SymInt"},
    "bool": {"bool", "SymBool"},
    "SymBool": {"bool", "SymBool"},
    "complex": {"complex", "float", "int", "SymInt", "SymFloat"},
    "number": _NUMBERS,
    "Scalar": _NUMBERS,
    "str": {"str"},
    "Dimname": {"str"},
    "ScalarType": {"int", "ScalarType"},
    "Layout": {"int", "Layout"},
    "MemoryFormat": {"int", "MemoryFormat"},
    "QScheme": {"int", "QScheme"},
    "Device": {"Device"},
    "DeviceObjType": {"Device"},
    "Generator": {"Generator"},
    "Storage": {"Storage"},
    "Stream": {"Stream"},
    "StreamObjType": {"Stream"},
    "Capsule": {"Capsule"},
    "NoneType": {"NoneType", "None"},
    "None": {"NoneType", "None"},
}
_ANYTHING = {"Any", "PyObject", "Type", "Graph", "Function", "Uninitialized"}


def _fits(t: TypeExpr, v: ValueType) -> bool:
    if isinstance(v, NamedValueType) and not isinstance(v, ClassValueType) and v.name == "Any":
        return True
    if isinstance(t, UnionOf):
        return any(_fits(a, v) for a in t.alts)
    if isinstance(v, UnionValueType):
        return all(_fits(t, a) for a in v.items)
    if isinstance(t, OptionalOf):
        if isinstance(v, NamedValueType) and v.name in ("NoneType", "None"):
            return True
        if isinstance(v, OptionalValueType):
            return _fits(t.elem, v.elem)
        return _fits(t.elem, v)
    if isinstance(v, OptionalValueType):
        return isinstance(t, Named) and (t.name in _ANYTHING or is_type_variable(t.name))
    if isinstance(t, ListOf):
        if isinstance(v, ListValueType):
            return _fits(t.elem, v.elem)
        return (t.size is not None and isinstance(t.elem, Named) and t.elem.name in _BROADCASTS
                and _fits(t.elem, v))
    if isinstance(t, TupleOf):
        return isinstance(v, TupleValueType) and not isinstance(v, UnionValueType) and len(v.items) == len(
            t.items) and all(_fits(a, b) for a, b in zip(t.items, v.items))
    if isinstance(t, Container):
        return (isinstance(v, ContainerValueType) and v.name == t.name and len(v.args) == len(t.args)
                and all(_fits(a, b) for a, b in zip(t.args, v.args)))
    assert isinstance(t, Named)
    name = t.name
    if name in _ANYTHING or is_type_variable(name):
        return True
    if name == "Tensor":
        return isinstance(v, TensorValueType)
    if name == "AnyClassType":
        return isinstance(v, ClassValueType) and v.kind() == "ClassType"
    if name == "AnyEnumType":
        return isinstance(v, ClassValueType) and v.kind() == "EnumType"
    if name == "AnyListType":
        return isinstance(v, ListValueType) and not isinstance(v, OptionalValueType)
    if name == "AnyTupleType":
        return isinstance(v, TupleValueType) and not isinstance(v, UnionValueType)
    if "." in name:
        return isinstance(v, ClassValueType) and v.name == name
    allowed = _FITS.get(name)
    if allowed is None:
        return False
    return isinstance(v, NamedValueType) and not isinstance(v, ClassValueType) and v.name in allowed


class TorchTypeSystem(TypeSystem):
    """``torch``: torch's schema types; port dtypes are TorchScript value types."""

    name = "torch"
    description = "PyTorch operator schema types; port dtypes as TorchScript prints graph value types"

    def canonical_dtype(self, value: Any) -> str | None:
        """Numpy-style element type name of a ScalarType (``Float``, ``torch.float32``, ``6``) or of a parsed or
        printed tensor type (``Float(1, 784)``)."""
        from .scalar_types import lookup_scalar_type

        info = lookup_scalar_type(value)
        if info is None and isinstance(value, str) and "(" in value:
            try:
                value = self.parse_dtype(value)
            except Exception:  # noqa: BLE001 - not a type this system prints
                return None
        if info is None and hasattr(value, "scalarType"):
            st = value.scalarType()
            info = lookup_scalar_type(st) if st else None
        return info.numpy_name if info is not None else None

    def from_canonical_dtype(self, name: str) -> Any:
        """The TorchScript ScalarType name (``Float``) of a numpy-style name."""
        from .scalar_types import SCALAR_TYPES

        for info in SCALAR_TYPES:
            if info.numpy_name == name:
                return info.script_name
        return None

    def tensor_type(self, dtype: Any) -> tuple[str, tuple[int | str | None, ...] | None] | None:
        """``Float(batch, 3)`` -> ``("float32", ("batch", 3))``; ``SS(-3)`` dims and ``*`` are unknown (None)."""
        try:
            t = self.parse_dtype(str(dtype))
        except Exception:  # noqa: BLE001 - not a type this system prints
            return None
        if not getattr(t, "is_tensor", False) or not t.scalarType():
            return None
        elem = self.canonical_dtype(t)
        if elem is None:
            return None
        sizes = t.symbolic_sizes()
        if sizes is None:
            return elem, None
        return elem, tuple(d if isinstance(d, int) or (isinstance(d, str) and d.isidentifier()) else None
                           for d in sizes)

    def make_tensor_type(self, elem: str, shape: tuple[int | str | None, ...] | None) -> str | None:
        """``("float32", ("batch", 3))`` -> ``Float(batch, 3)``."""
        scalar = self.from_canonical_dtype(elem)
        if scalar is None:
            return None
        if shape is None:
            return str(scalar)
        return f"{scalar}({', '.join('*' if d is None else str(d) for d in shape)})"

    def type_names(self) -> Sequence[str]:
        return sorted(BUILTIN_NAMES) + ["T?", "T[]", "T[N]", "(A, B)", "Dict(K, V)", "Future(T)", "RRef(T)",
                                        "Await(T)", "Union(A, B)", "A | B"]

    def check_value(self, type_expr: str, value: Any) -> str | None:
        if compile_type(type_expr)(value):
            return None
        text = repr(value)
        if len(text) > 40:
            text = text[:37] + "..."
        return f"expected torch.{type_expr}, got {type(value).__name__} {text}"

    def parse_dtype(self, text: str) -> ValueType:
        """The TorchScript value type ``text`` (``Float(1, 784)``) as an object; see :mod:`.valuetypes`."""
        if isinstance(text, ValueType):
            return text
        return parse_value_type(text)

    def check_dtype(self, type_expr: str, dtype: Any, context: Mapping[str, Any] | None = None) -> str | None:
        try:
            t = parse_type(type_expr)
            compile_type(type_expr)  # rejects unknown type names
        except TypeParseError as e:
            return f"schema type {type_expr!r} cannot be checked: {e}"
        if dtype is None:
            return None
        try:
            v = self.parse_dtype(dtype)
        except SchemaError as e:
            return f"dtype {dtype!r} is not a TorchScript value type ({e})"
        if _fits(t, v):
            return None
        return f"dtype {v.text} does not fit schema type torch.{format_type(t)}"
