"""ONNX element types and the port dtype strings of ONNX graphs.

Element types
-------------
ONNX numbers its tensor element types (``TensorProto.DataType``) and names them
in type strings (``float``, ``int64``, ``bfloat16``, ``float8e4m3fn`` ...).
:data:`ELEM_TYPES` lists every one with its number and the numpy dtype that
holds its values (:mod:`ml_dtypes` supplies those numpy lacks: ``bfloat16``,
the 8-, 6- and 4-bit floats, ``int4``, ``uint4``, ``int2``, ``uint2``).  The
table is this module's own copy of the numbers fixed by ``onnx.proto``, so
converting needs no ``onnx`` import; a test compares it with the installed
``onnx``.

Port dtype strings
------------------
A port of an ONNX graph carries its value type as a string (or ``None`` when
the type is unknown).  The grammar, whitespace between tokens being free::

    dtype   ::= tensor(ELEM) [shape]          dense tensor
              | sparse_tensor(ELEM) [shape]   sparse tensor
              | seq(dtype)                    sequence
              | optional(dtype)               optional value
              | map(KEY, dtype)               map; KEY an integer type or string
              | opaque([DOMAIN,] NAME)        opaque (ONNX-ML)
              | ELEM                          ONNX's spelling of a scalar tensor:
                                              the same as tensor(ELEM)[]
    shape   ::= [ ]                           rank 0
              | [ dim {, dim} ]
    dim     ::= INTEGER                       a known size (dim_value)
              | NAME                          a symbolic size (dim_param), [A-Za-z_][A-Za-z0-9_.]*
              | "TEXT"                        any other dim_param, JSON-quoted
              | ?                             an unknown size

Without ``shape`` the rank is unknown.  Examples: ``tensor(float)``,
``tensor(float)[1,3,N,?]``, ``tensor(int64)[]``, ``seq(tensor(int64)[N])``,
``map(string, tensor(float))``, ``optional(seq(tensor(float)))``,
``sparse_tensor(float)[100,100]``, ``tensor(float)["batch size",3]``.

The type part (everything but the shapes) is spelled as in ONNX's own operator
schemas, so a shapeless dtype can be compared with a type constraint's allowed
types as text once both are brought to canonical form (:attr:`OnnxType.canonical`).
:func:`parse_dtype` keeps the text it was given: ``str()`` of the result
gives it back unchanged.
"""

from __future__ import annotations

__all__ = [
    "ELEM_TYPES",
    "ElemType",
    "OnnxType",
    "Dim",
    "parse_dtype",
    "format_shape",
    "elem_type",
    "elem_type_name",
    "elem_type_number",
    "elem_type_from_numpy",
    "numpy_dtype",
    "dtype_from_type_proto",
    "type_proto_from_dtype",
]

import json
import re
from functools import lru_cache
from typing import Any, NamedTuple, NoReturn, Sequence, Union

import attrs
import numpy as np

from amanda_core.ir.tensor import resolve_dtype
from amanda_core.namespace.types import TypeExprError


class ElemType(NamedTuple):
    """One tensor element type: ONNX number, ONNX name, numpy dtype name."""

    number: int
    name: str
    numpy: str


ELEM_TYPES: tuple[ElemType, ...] = (
    ElemType(1, "float", "float32"),
    ElemType(2, "uint8", "uint8"),
    ElemType(3, "int8", "int8"),
    ElemType(4, "uint16", "uint16"),
    ElemType(5, "int16", "int16"),
    ElemType(6, "int32", "int32"),
    ElemType(7, "int64", "int64"),
    ElemType(8, "string", "object"),
    ElemType(9, "bool", "bool"),
    ElemType(10, "float16", "float16"),
    ElemType(11, "double", "float64"),
    ElemType(12, "uint32", "uint32"),
    ElemType(13, "uint64", "uint64"),
    ElemType(14, "complex64", "complex64"),
    ElemType(15, "complex128", "complex128"),
    ElemType(16, "bfloat16", "bfloat16"),
    ElemType(17, "float8e4m3fn", "float8_e4m3fn"),
    ElemType(18, "float8e4m3fnuz", "float8_e4m3fnuz"),
    ElemType(19, "float8e5m2", "float8_e5m2"),
    ElemType(20, "float8e5m2fnuz", "float8_e5m2fnuz"),
    ElemType(21, "uint4", "uint4"),
    ElemType(22, "int4", "int4"),
    ElemType(23, "float4e2m1", "float4_e2m1fn"),
    ElemType(24, "float8e8m0", "float8_e8m0fnu"),
    ElemType(25, "uint2", "uint2"),
    ElemType(26, "int2", "int2"),
    ElemType(27, "float6e2m3", "float6_e2m3fn"),
    ElemType(28, "float6e3m2", "float6_e3m2fn"),
)
"""Every ONNX tensor element type (``UNDEFINED``, number 0, is not a type)."""

_BY_NUMBER = {e.number: e for e in ELEM_TYPES}
_BY_NAME = {e.name: e for e in ELEM_TYPES}
_BY_NUMPY = {e.numpy: e for e in ELEM_TYPES if e.numpy != "object"}
_MAP_KEYS = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "string"})


def elem_type(key: int | str) -> ElemType:
    """The element type with this ONNX number or ONNX name; ValueError if there is none."""
    found = _BY_NUMBER.get(key) if isinstance(key, int) else _BY_NAME.get(key)
    if found is None:
        if isinstance(key, int):
            raise ValueError(f"unknown ONNX element type number {key} (known: 1 to {max(_BY_NUMBER)})")
        raise ValueError(f"unknown ONNX element type {key!r} (known: {', '.join(_BY_NAME)})")
    return found


def elem_type_name(number: int) -> str:
    """``1`` -> ``float``."""
    return elem_type(int(number)).name


def elem_type_number(name: str) -> int:
    """``float`` -> ``1``."""
    return elem_type(name).number


def numpy_dtype(key: int | str) -> np.dtype[Any]:
    """The numpy dtype holding values of an ONNX element type (number or name).

    ``string`` is numpy's ``object`` (arrays of ``bytes``); the types numpy lacks
    come from :mod:`ml_dtypes`."""
    e = elem_type(key)
    try:
        return resolve_dtype(e.numpy)
    except TypeError:
        raise ValueError(f"ONNX element type {e.name!r} needs numpy dtype {e.numpy!r}, which the installed "
                         "ml_dtypes does not provide (upgrade ml_dtypes)") from None


def elem_type_from_numpy(dtype: Any) -> str:
    """The ONNX element type name of a numpy dtype (or anything ``numpy.dtype`` takes, or an
    :mod:`ml_dtypes` name such as ``"bfloat16"``).  Object, bytes and unicode arrays are ``string``."""
    if isinstance(dtype, str) and dtype in _BY_NUMPY:
        return _BY_NUMPY[dtype].name
    if isinstance(dtype, np.dtype):
        known = _FROM_NUMPY.get(dtype)
        if known is not None:
            return known
    try:
        dt = np.dtype(dtype)
    except TypeError:
        try:
            dt = resolve_dtype(str(dtype))
        except TypeError:
            raise ValueError(f"{dtype!r} is not a numpy dtype") from None
    if dt.kind in "OSU":
        return "string"
    found = _BY_NUMPY.get(dt.name)
    if found is None:
        raise ValueError(f"numpy dtype {dt.name!r} has no ONNX element type")
    if isinstance(dtype, np.dtype):
        _FROM_NUMPY[dtype] = found.name
    return found.name


_FROM_NUMPY: dict[np.dtype[Any], str] = {}
"""The element type names of the numeric numpy dtypes :func:`elem_type_from_numpy` has been asked about (a
dtype's ``name`` is slow to make)."""


# --------------------------------------------------------------------------- dtype strings

Dim = Union[int, str, None]
"""One dimension: a size, a symbolic name, or None (unknown)."""

_KINDS = ("tensor", "sparse_tensor", "seq", "optional", "map", "opaque")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_TOKEN = re.compile(r"""\s*(?:(?P<name>[A-Za-z_][A-Za-z0-9_.]*)|(?P<int>-?[0-9]+)|(?P<str>"(?:[^"\\]|\\.)*")"""
                    r"""|(?P<punct>[()\[\],?]))""")


def _dim_text(d: Dim) -> str:
    if d is None:
        return "?"
    if isinstance(d, int):
        return str(d)
    return d if _NAME.fullmatch(d) else json.dumps(d, ensure_ascii=False)


def format_shape(shape: Sequence[Dim] | None) -> str:
    """``[1, "N", None]`` -> ``[1,N,?]``; ``None`` (unknown rank) -> ``""``."""
    if shape is None:
        return ""
    return "[" + ",".join(_dim_text(d) for d in shape) + "]"


@attrs.frozen(eq=False, repr=False)
class OnnxType:
    """A parsed ONNX value type.

    ``kind`` is ``tensor``, ``sparse_tensor``, ``seq``, ``optional``, ``map`` or
    ``opaque``.  Tensors (dense and sparse) have ``elem_type`` and ``shape``
    (``None``: rank unknown; a tuple of :data:`Dim` otherwise); ``seq`` and
    ``optional`` have ``inner``; a ``map`` has ``key`` (an element type) and
    ``inner`` (the value type); ``opaque`` has ``domain`` and ``name``.
    ``scalar`` marks a tensor written as a bare element type (``float``, shape
    ``()``).  Two types are equal when their structure and shapes are, however
    they were spaced; ``str()`` is the text they were parsed from.
    """

    kind: str
    elem_type: str | None = None
    shape: tuple[Dim, ...] | None = None
    inner: OnnxType | None = None
    key: str | None = None
    domain: str = ""
    name: str = ""
    scalar: bool = False
    text: str = attrs.field(default="", eq=False)

    # -- construction
    @classmethod
    def tensor(cls, elem: str, shape: Sequence[Dim] | None = None, *, sparse: bool = False) -> OnnxType:
        elem_type(elem)
        return _finish(cls("sparse_tensor" if sparse else "tensor", elem,
                           tuple(shape) if shape is not None else None))

    @classmethod
    def seq(cls, inner: OnnxType) -> OnnxType:
        return _finish(cls("seq", inner=inner))

    @classmethod
    def optional(cls, inner: OnnxType) -> OnnxType:
        return _finish(cls("optional", inner=inner))

    @classmethod
    def map(cls, key: str, value: OnnxType) -> OnnxType:
        if key not in _MAP_KEYS:
            raise ValueError(f"ONNX map keys are integers or strings, not {key!r}")
        return _finish(cls("map", inner=value, key=key))

    @classmethod
    def opaque(cls, domain: str, name: str) -> OnnxType:
        return _finish(cls("opaque", domain=domain, name=name))

    # -- views
    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"OnnxType({self.text!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OnnxType):
            return NotImplemented
        return self.format() == other.format()

    def __hash__(self) -> int:
        return hash(self.format())

    @property
    def rank(self) -> int | None:
        return len(self.shape) if self.shape is not None else None

    @property
    def is_tensor(self) -> bool:
        return self.kind == "tensor"

    @property
    def canonical(self) -> str:
        """The type without shapes in canonical spelling (a scalar becomes ``tensor(ELEM)``):
        what type constraints compare."""
        return self.format(shapes=False)

    def format(self, shapes: bool = True) -> str:
        """Canonical text: ``map(K, V)`` with one space, shapes without spaces."""
        k = self.kind
        if k in ("tensor", "sparse_tensor"):
            head = f"{k}({self.elem_type})"
            return head + format_shape(self.shape) if shapes else head
        if k in ("seq", "optional"):
            assert self.inner is not None
            return f"{k}({self.inner.format(shapes)})"
        if k == "map":
            assert self.inner is not None
            return f"map({self.key}, {self.inner.format(shapes)})"
        return f"opaque({self.domain},{self.name})" if self.domain else f"opaque({self.name})"

    def without_shapes(self) -> OnnxType:
        """This type with every shape dropped (rank unknown)."""
        return parse_dtype(self.canonical)

    @property
    def numpy_dtype(self) -> np.dtype[Any]:
        """The numpy dtype of a (dense or sparse) tensor's elements."""
        if self.elem_type is None:
            raise ValueError(f"{self.text} is not a tensor type")
        return numpy_dtype(self.elem_type)


def _finish(t: OnnxType) -> OnnxType:
    return attrs.evolve(t, text=t.format())


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                if not text[pos:].strip():
                    break
                self.fail(f"unexpected {text[pos:].lstrip()[:10]!r}", pos)
            assert m.lastgroup is not None
            self.tokens.append((m.lastgroup, m.group(m.lastgroup), m.start(m.lastgroup)))
            pos = m.end()
        self.i = 0

    def fail(self, why: str, pos: int | None = None) -> NoReturn:
        if pos is None:
            pos = self.tokens[self.i][2] if self.i < len(self.tokens) else len(self.text)
        raise TypeExprError(f"bad ONNX type {self.text!r} at column {pos + 1}: {why}")

    def peek(self) -> str | None:
        return self.tokens[self.i][1] if self.i < len(self.tokens) else None

    def take(self, kind: str | None = None, value: str | None = None, what: str = "") -> str:
        wanted = what or (repr(value) if value is not None else kind)
        if self.i >= len(self.tokens):
            self.fail(f"expected {wanted} but the text ends")
        k, v, _ = self.tokens[self.i]
        if (kind is not None and k != kind) or (value is not None and v != value):
            self.fail(f"expected {wanted}, found {v!r}")
        self.i += 1
        return v

    def elem(self, allowed: frozenset[str] | None = None) -> str:
        name = self.take("name", what="an element type")
        if name not in _BY_NAME:
            self.i -= 1
            self.fail(f"unknown element type {name!r} (known: {', '.join(_BY_NAME)})")
        if allowed is not None and name not in allowed:
            self.i -= 1
            self.fail(f"a map key is an integer type or string, not {name!r}")
        return name

    def type(self) -> OnnxType:
        head = self.take("name", what="a type (tensor, sparse_tensor, seq, optional, map, opaque or an element "
                                      "type)")
        if head in ("tensor", "sparse_tensor"):
            self.take(value="(")
            e = self.elem()
            self.take(value=")")
            return OnnxType(head, e, self.shape())
        if head in ("seq", "optional"):
            self.take(value="(")
            inner = self.type()
            self.take(value=")")
            return OnnxType(head, inner=inner)
        if head == "map":
            self.take(value="(")
            key = self.elem(_MAP_KEYS)
            self.take(value=",")
            value = self.type()
            self.take(value=")")
            return OnnxType("map", inner=value, key=key)
        if head == "opaque":
            self.take(value="(")
            parts = []
            while self.peek() != ")":
                parts.append(self.take("name", what="an opaque type's domain or name"))
                if self.peek() == ",":
                    self.take(value=",")
            self.take(value=")")
            if len(parts) > 2:
                self.fail("opaque takes at most a domain and a name")
            domain, name = (parts[0], parts[1]) if len(parts) == 2 else ("", parts[0] if parts else "")
            return OnnxType("opaque", domain=domain, name=name)
        if head in _BY_NAME:
            return OnnxType("tensor", head, (), scalar=True)
        self.i -= 1
        self.fail(f"unknown type {head!r}; expected one of {', '.join(_KINDS)} or an element type")

    def shape(self) -> tuple[Dim, ...] | None:
        if self.peek() != "[":
            return None
        self.take(value="[")
        dims: list[Dim] = []
        if self.peek() == "]":
            self.take(value="]")
            return ()
        while True:
            if self.i >= len(self.tokens):
                self.fail("unclosed '['")
            k, v, _ = self.tokens[self.i]
            self.i += 1
            if k == "int":
                dims.append(int(v))
            elif k == "name":
                dims.append(v)
            elif k == "str":
                dims.append(json.loads(v))
            elif v == "?":
                dims.append(None)
            else:
                self.i -= 1
                self.fail(f"expected a dimension (a size, a name, a quoted name or ?), found {v!r}")
            sep = self.take(what="',' or ']'")
            if sep == "]":
                return tuple(dims)
            if sep != ",":
                self.i -= 1
                self.fail(f"expected ',' or ']', found {sep!r}")


def parse_dtype(text: str) -> OnnxType:
    """Parse a port dtype string (grammar in the module docstring); raises
    :class:`~amanda_core.namespace.types.TypeExprError` saying where it is malformed."""
    if not isinstance(text, str):
        raise TypeExprError(f"an ONNX dtype is a string, got {type(text).__name__} {text!r}")
    return _parse(text)


@lru_cache(maxsize=4096)
def _parse(text: str) -> OnnxType:
    p = _Parser(text)
    if not p.tokens:
        raise TypeExprError("empty ONNX type")
    t = p.type()
    if p.i != len(p.tokens):
        p.fail(f"unexpected {p.tokens[p.i][1]!r} after the type")
    return _with_text(t, text)


def _with_text(t: OnnxType, text: str) -> OnnxType:
    inner = _with_text(t.inner, t.inner.format()) if t.inner is not None else None
    return attrs.evolve(t, inner=inner, text=text)


# --------------------------------------------------------------------------- TypeProto


def dtype_from_type_proto(tp: Any) -> str | None:
    """The dtype string of an ``onnx.TypeProto`` (shapes included), or None when the proto
    leaves the type unknown (no type set, or element type ``UNDEFINED`` somewhere)."""
    if tp.WhichOneof("value") == "tensor_type":  # the common case, spelled here as OnnxType.format spells it
        tt = tp.tensor_type
        e = _BY_NUMBER.get(tt.elem_type)
        if e is None:
            return None
        if not tt.HasField("shape"):
            return f"tensor({e.name})"
        dims = []
        for d in tt.shape.dim:
            v = d.WhichOneof("value")
            dims.append(str(d.dim_value) if v == "dim_value" else _dim_text(d.dim_param) if v == "dim_param"
                        else "?")
        return f"tensor({e.name})[{','.join(dims)}]"
    t = _from_proto(tp)
    return t.format() if t is not None else None


def dtype_from_tensor_type_bytes(data: bytes) -> str | None:
    """The dtype string of a serialized ``TypeProto`` that its dtype string says all of: a dense tensor type of
    a known element type, with or without a shape, each dim a size, a name or unknown, and nothing else (no
    denotation, no other field).  Such a message is exactly what :func:`type_proto_from_dtype` makes of the
    string.  None for any other message.  Reads the bytes as protobuf writes them (fields in number order), so
    a quick check and no ``onnx`` objects."""
    n = len(data)
    if n < 4 or data[0] != 0x0A:  # TypeProto.tensor_type (field 1, length-delimited)
        return None
    try:
        size, pos = _uvarint(data, 1)
        if pos + size != n or data[pos] != 0x08:  # Tensor.elem_type (field 1, varint)
            return None
        number, pos = _uvarint(data, pos + 1)
        e = _BY_NUMBER.get(number)
        if e is None:
            return None
        if pos == n:
            return f"tensor({e.name})"
        if data[pos] != 0x12:  # Tensor.shape (field 2)
            return None
        size, pos = _uvarint(data, pos + 1)
        if pos + size != n:
            return None
        dims = []
        while pos < n:
            if data[pos] != 0x0A:  # TensorShapeProto.dim (field 1)
                return None
            size, pos = _uvarint(data, pos + 1)
            end = pos + size
            if end > n:
                return None
            if size == 0:
                dims.append("?")
            elif data[pos] == 0x08:  # dim_value (int64)
                value, pos = _uvarint(data, pos + 1)
                if pos != end:
                    return None
                dims.append(str(value - (1 << 64) if value >= 1 << 63 else value))
            elif data[pos] == 0x12:  # dim_param
                size, pos = _uvarint(data, pos + 1)
                if pos + size != end:
                    return None
                dims.append(_dim_text(data[pos:end].decode("utf-8")))
            else:
                return None
            pos = end
    except (IndexError, UnicodeDecodeError):
        return None
    return f"tensor({e.name})[{','.join(dims)}]"


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` and the position after it (IndexError when the data ends first)."""
    b = data[pos]
    if b < 0x80:
        return b, pos + 1
    value = b & 0x7F
    shift = 7
    while True:
        pos += 1
        b = data[pos]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos + 1
        shift += 7


def _from_proto(tp: Any) -> OnnxType | None:
    which = tp.WhichOneof("value")
    if which in ("tensor_type", "sparse_tensor_type"):
        tt = getattr(tp, which)
        if not tt.elem_type or tt.elem_type not in _BY_NUMBER:
            return None
        shape: tuple[Dim, ...] | None = None
        if tt.HasField("shape"):
            dims: list[Dim] = []
            for d in tt.shape.dim:
                v = d.WhichOneof("value")
                dims.append(d.dim_value if v == "dim_value" else d.dim_param if v == "dim_param" else None)
            shape = tuple(dims)
        return OnnxType("tensor" if which == "tensor_type" else "sparse_tensor", _BY_NUMBER[tt.elem_type].name, shape)
    if which in ("sequence_type", "optional_type"):
        inner = _from_proto(getattr(tp, which).elem_type)
        return OnnxType("seq" if which == "sequence_type" else "optional", inner=inner) if inner else None
    if which == "map_type":
        key = _BY_NUMBER.get(tp.map_type.key_type)
        value = _from_proto(tp.map_type.value_type)
        if key is None or value is None or key.name not in _MAP_KEYS:
            return None
        return OnnxType("map", inner=value, key=key.name)
    if which == "opaque_type":
        return OnnxType("opaque", domain=tp.opaque_type.domain, name=tp.opaque_type.name)
    return None


def type_proto_from_dtype(dtype: str | OnnxType) -> Any:
    """An ``onnx.TypeProto`` for a dtype string or parsed type (imports ``onnx``)."""
    import onnx

    t = parse_dtype(dtype) if isinstance(dtype, str) else dtype
    tp = onnx.TypeProto()
    _fill_proto(tp, t)
    return tp


def _fill_proto(tp: Any, t: OnnxType) -> None:
    if t.kind in ("tensor", "sparse_tensor"):
        tt = tp.tensor_type if t.kind == "tensor" else tp.sparse_tensor_type
        assert t.elem_type is not None
        tt.elem_type = elem_type_number(t.elem_type)
        if t.shape is not None:
            shape = tt.shape
            shape.SetInParent()
            for d in t.shape:
                dim = shape.dim.add()
                if isinstance(d, int):
                    dim.dim_value = d
                elif isinstance(d, str):
                    dim.dim_param = d
    elif t.kind in ("seq", "optional"):
        assert t.inner is not None
        holder = tp.sequence_type if t.kind == "seq" else tp.optional_type
        holder.SetInParent()
        _fill_proto(holder.elem_type, t.inner)
    elif t.kind == "map":
        assert t.inner is not None and t.key is not None
        tp.map_type.key_type = elem_type_number(t.key)
        _fill_proto(tp.map_type.value_type, t.inner)
    else:
        tp.opaque_type.SetInParent()
        tp.opaque_type.domain = t.domain
        tp.opaque_type.name = t.name
