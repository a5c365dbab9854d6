"""Value types as TorchScript prints them for graph values (port dtypes).

``str(value.type())`` of a TorchScript graph value, for example::

    Float(1, 784)                                        a float tensor of shape [1, 784]
    Float(1, 784, strides=[784, 1], requires_grad=0, device=cpu)
    Float(*, 784)                                        first dimension unknown
    Float(SS(-3), 784)                                   a symbolic dimension
    Float(batch, 784)  Float(2*s0, 784)                  symbolic dimensions by name (torch.export)
    Long()  Long(requires_grad=0, device=cpu)            0-dim (rank 0) tensors
    Float                                                rank unknown
    Tensor  Tensor(2, 3)                                 element type unknown
    int  float  bool  str  NoneType  Device  Generator ...
    int[]  Tensor?  Tensor[]  (Tensor, Tensor)  Dict(str, Tensor)  Future[Tensor]  Union(Tensor, int)
    __torch__.torch.nn.modules.linear.Linear             a class (module) type
    Enum<__torch__.Color>

:func:`parse_value_type` turns such text into an object whose methods are
named as TorchScript's type API (``scalarType()``, ``sizes()``, ``dim()``,
``strides()``, ``device()``, ``requires_grad()``, ``getElementType()``,
``elements()``, ``kind()``) so mapping expressions can write
``op.output_ports["out0"].dtype.scalarType()``.

Invariants: ``str(parse_value_type(text)) == text`` (the exact text is kept,
also for every nested type, which keeps its own slice); two parsed types are
equal when their texts are equal.
"""

from __future__ import annotations

__all__ = [
    "ValueType",
    "TensorValueType",
    "NamedValueType",
    "ClassValueType",
    "ListValueType",
    "OptionalValueType",
    "TupleValueType",
    "ContainerValueType",
    "UnionValueType",
    "DtypeParseError",
    "parse_value_type",
]

import builtins
import re
from functools import lru_cache
from typing import Any

from amanda_core.errors import SchemaError

from .scalar_types import scalar_type


class DtypeParseError(SchemaError):
    """A port dtype that is not a TorchScript value type."""


class ValueType:
    """Base of parsed value types; ``str()`` is the exact parsed text."""

    __slots__ = ("text",)
    _kind = "AnyType"

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.text}>"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ValueType):
            return self.text == other.text
        if isinstance(other, str):
            return self.text == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.text)

    def kind(self) -> str:
        """TorchScript's type kind name (``TensorType``, ``IntType``, ``ListType`` ...)."""
        return self._kind

    def annotation_str(self) -> str:
        return self.text

    def containedTypes(self) -> list[ValueType]:  # noqa: N802 - TorchScript's API name
        return []

    def scalarType(self) -> str | None:  # noqa: N802
        """The TorchScript element type name of a tensor type (``Float``); None for other types."""
        return None

    @property
    def dtype(self) -> str | None:
        """The numpy-style element type name: ``float32`` for ``Float(...)``, ``int64`` for ``int``;
        None when unknown or not a number."""
        return None

    @property
    def is_tensor(self) -> bool:
        return False

    # last in the class body, so that ``str`` in the annotations above is the builtin
    def str(self) -> builtins.str:
        """The exact text (TorchScript's ``Type.str()``)."""
        return self.text


class TensorValueType(ValueType):
    """A tensor type: element type, sizes, strides, requires_grad, device (each may be unknown)."""

    __slots__ = ("_scalar", "_sizes", "_strides", "_requires_grad", "_device", "_undefined")
    _kind = "TensorType"

    def __init__(self, text: str, scalar: str | None, sizes: tuple[int | str | None, ...] | None,
                 strides: tuple[int | None, ...] | None, requires_grad: bool | None, device: str | None,
                 undefined: bool | None) -> None:
        super().__init__(text)
        self._scalar = scalar
        self._sizes = sizes
        self._strides = strides
        self._requires_grad = requires_grad
        self._device = device
        self._undefined = undefined

    @property
    def is_tensor(self) -> bool:
        return True

    def scalarType(self) -> str | None:  # noqa: N802
        return self._scalar

    @property
    def dtype(self) -> str | None:
        row = scalar_type(self._scalar) if self._scalar else None
        return row.torch_name if row else None

    def sizes(self) -> list[int | None] | None:
        """Sizes with None for unknown (``*``) or symbolic (``SS(-3)``, ``batch``) dims; None if the rank is
        unknown."""
        if self._sizes is None:
            return None
        return [d if isinstance(d, int) else None for d in self._sizes]

    varyingSizes = sizes  # noqa: N815 - TorchScript's API name

    def symbolic_sizes(self) -> list[int | str | None] | None:
        """Sizes as printed: ints, None for ``*``, and the texts of symbolic dims (``SS(-3)``, a name such as
        ``batch`` or ``s0``, or an expression of names such as ``2*s0``)."""
        return None if self._sizes is None else list(self._sizes)

    @property
    def shape(self) -> tuple[int | None, ...] | None:
        sizes = self.sizes()
        return None if sizes is None else tuple(sizes)

    def dim(self) -> int | None:
        return None if self._sizes is None else len(self._sizes)

    def strides(self) -> list[int | None] | None:
        return None if self._strides is None else list(self._strides)

    def device(self) -> str | None:
        return self._device

    def requires_grad(self) -> bool | None:
        return self._requires_grad

    requiresGrad = requires_grad  # noqa: N815 - the C++ spelling

    def undefined(self) -> bool | None:
        return self._undefined

    def isComplete(self) -> bool:  # noqa: N802
        """True when element type, device and every size and stride are known."""
        return (self._scalar is not None and self._device is not None and self._sizes is not None
                and all(isinstance(d, int) for d in self._sizes)
                and self._strides is not None and all(isinstance(s, int) for s in self._strides))


_NAMED_KINDS = {
    "int": "IntType", "float": "FloatType", "bool": "BoolType", "str": "StringType", "complex": "ComplexType",
    "number": "NumberType", "Scalar": "NumberType", "NoneType": "NoneType", "None": "NoneType",
    "Device": "DeviceObjType", "Generator": "GeneratorType", "Storage": "StorageType", "Stream": "StreamObjType",
    "Layout": "LayoutType", "ScalarType": "ScalarTypeType", "MemoryFormat": "MemoryFormatType",
    "QScheme": "QSchemeType", "Capsule": "CapsuleType", "Any": "AnyType", "SymInt": "SymIntType",
    "SymFloat": "SymFloatType", "SymBool": "SymBoolType", "AnyClassType": "AnyClassType",
    "AnyEnumType": "AnyEnumType", "AnyListType": "AnyListType", "AnyTupleType": "AnyTupleType",
    "Function": "FunctionType", "PyObject": "PyObjectType", "Uninitialized": "UninitializedType",
    "Dimname": "StringType", "Type": "AnyType",
}
_NUMPY_OF = {"int": "int64", "float": "float64", "bool": "bool", "complex": "complex128", "SymInt": "int64",
             "SymFloat": "float64", "SymBool": "bool"}


class NamedValueType(ValueType):
    """A type named by one word: ``int``, ``float``, ``str``, ``NoneType``, ``Device``, ``Any`` ..."""

    __slots__ = ("name",)

    def __init__(self, text: str, name: str) -> None:
        super().__init__(text)
        self.name = name

    def kind(self) -> str:
        return _NAMED_KINDS.get(self.name, "AnyType")

    @property
    def dtype(self) -> str | None:
        return _NUMPY_OF.get(self.name)


class ClassValueType(NamedValueType):
    """A class type (``__torch__.torch.nn.modules.linear.Linear``) or enum type (``Enum<...>``)."""

    __slots__ = ()

    def kind(self) -> str:
        return "EnumType" if self.name.startswith("Enum<") else "ClassType"


class ListValueType(ValueType):
    __slots__ = ("elem",)
    _kind = "ListType"

    def __init__(self, text: str, elem: ValueType) -> None:
        super().__init__(text)
        self.elem = elem

    def getElementType(self) -> ValueType:  # noqa: N802
        return self.elem

    def containedTypes(self) -> list[ValueType]:  # noqa: N802
        return [self.elem]


class OptionalValueType(ListValueType):
    __slots__ = ()
    _kind = "OptionalType"


class TupleValueType(ValueType):
    __slots__ = ("items",)
    _kind = "TupleType"

    def __init__(self, text: str, items: tuple[ValueType, ...]) -> None:
        super().__init__(text)
        self.items = items

    def elements(self) -> list[ValueType]:
        return list(self.items)

    def containedTypes(self) -> list[ValueType]:  # noqa: N802
        return list(self.items)


class ContainerValueType(ValueType):
    """``Dict(K, V)``, ``Future[T]``, ``RRef[T]``, ``Await[T]``."""

    __slots__ = ("name", "args")

    def __init__(self, text: str, name: str, args: tuple[ValueType, ...]) -> None:
        super().__init__(text)
        self.name = name
        self.args = args

    def kind(self) -> str:
        return f"{self.name}Type"

    def containedTypes(self) -> list[ValueType]:  # noqa: N802
        return list(self.args)

    def getElementType(self) -> ValueType:  # noqa: N802
        return self.args[-1]

    def getKeyType(self) -> ValueType:  # noqa: N802
        return self.args[0]

    def getValueType(self) -> ValueType:  # noqa: N802
        return self.args[-1]


class UnionValueType(TupleValueType):
    __slots__ = ()
    _kind = "UnionType"


_CONTAINERS = {"Dict": 2, "Future": 1, "RRef": 1, "Await": 1, "Union": -1, "Optional": 1, "List": 1, "Tuple": -1}


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def error(self, what: str) -> DtypeParseError:
        return DtypeParseError(f"cannot parse TorchScript value type {self.text!r}: {what} at column {self.pos + 1}")

    def ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] == " ":
            self.pos += 1

    def peek(self, n: int = 1) -> str:
        self.ws()
        return self.text[self.pos:self.pos + n]

    def take(self, s: str) -> bool:
        self.ws()
        if self.text.startswith(s, self.pos):
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str) -> None:
        if not self.take(s):
            raise self.error(f"expected {s!r}")

    def word(self) -> str:
        self.ws()
        start = self.pos
        while self.pos < len(self.text) and (self.text[self.pos].isalnum() or self.text[self.pos] in "_."):
            self.pos += 1
        if self.pos == start:
            raise self.error("expected a type")
        return self.text[start:self.pos]

    def slice(self, start: int) -> str:
        return self.text[start:self.pos].strip()

    def value_type(self) -> ValueType:
        self.ws()
        start = self.pos
        t = self.atom()
        while True:
            if self.take("[]"):
                t = ListValueType(self.slice(start), t)
            elif self.peek() == "?":
                self.pos += 1
                t = OptionalValueType(self.slice(start), t)
            else:
                return t

    def list_of(self, close: str) -> tuple[ValueType, ...]:
        items: list[ValueType] = []
        if self.take(close):
            return ()
        while True:
            items.append(self.value_type())
            if self.take(","):
                continue
            self.expect(close)
            return tuple(items)

    def atom(self) -> ValueType:
        self.ws()
        start = self.pos
        if self.take("("):
            items = self.list_of(")")
            return TupleValueType(self.slice(start), items)
        name = self.word()
        if name == "Enum" and self.take("<"):
            depth = 1
            while self.pos < len(self.text) and depth:
                depth += {"<": 1, ">": -1}.get(self.text[self.pos], 0)
                self.pos += 1
            if depth:
                raise self.error("unclosed '<'")
            return ClassValueType(self.slice(start), self.slice(start))
        if name == "Tensor" or scalar_type(name) is not None:
            return self.tensor(start, None if name == "Tensor" else name)
        if name in _CONTAINERS:
            close = {"(": ")", "[": "]"}.get(self.peek())
            if close:
                self.pos += 1
                args = self.list_of(close)
                return self.container(start, name, args)
        if "." in name or name.startswith("__"):
            return ClassValueType(self.slice(start), name)
        if name not in _NAMED_KINDS:
            self.pos = start
            raise self.error(f"unknown type name {name!r}")
        return NamedValueType(self.slice(start), name)

    def container(self, start: int, name: str, args: tuple[ValueType, ...]) -> ValueType:
        text = self.slice(start)
        arity = _CONTAINERS[name]
        if arity > 0 and len(args) != arity:
            raise self.error(f"{name} takes {arity} type(s), got {len(args)}")
        if name == "Optional":
            return OptionalValueType(text, args[0])
        if name == "List":
            return ListValueType(text, args[0])
        if name == "Tuple":
            return TupleValueType(text, args)
        if name == "Union":
            return UnionValueType(text, args)
        return ContainerValueType(text, name, args)

    def tensor(self, start: int, scalar: str | None) -> TensorValueType:
        sizes: list[int | str | None] | None = None
        strides: tuple[int | None, ...] | None = None
        requires_grad: bool | None = None
        device: str | None = None
        undefined: bool | None = None
        if self.peek() == "(":
            self.pos += 1
            items: list[Any] = []
            if not self.take(")"):
                while True:
                    self.item(items)
                    if self.take(","):
                        continue
                    self.expect(")")
                    break
            props: dict[str, Any] = dict(x for x in items if isinstance(x, tuple))
            sizes = [x for x in items if not isinstance(x, tuple)]
            # ``Long(requires_grad=0, device=cpu)`` is printed both for rank 0 and for an unknown
            # rank; it is read as rank 0, what traced scalars are (``Long`` alone is an unknown rank).
            strides = props.get("strides")
            requires_grad = props.get("requires_grad")
            device = props.get("device")
        if self.take("[Undefined]"):
            undefined = True
        return TensorValueType(self.slice(start), scalar, None if sizes is None else tuple(sizes), strides,
                               requires_grad, device, undefined)

    def item(self, out: list[Any]) -> None:
        self.ws()
        if self.take("*"):
            out.append(None)
            return
        if self.take("SS("):
            start = self.pos - 3
            while self.pos < len(self.text) and self.text[self.pos] != ")":
                self.pos += 1
            self.expect(")")
            out.append(self.text[start:self.pos])
            return
        ch = self.peek()
        symbol = self.symbol()
        if symbol is not None:
            out.append(symbol)
            return
        if ch.isdigit() or ch == "-":
            out.append(self.integer())
            return
        key = self.word()
        self.expect("=")
        if key == "strides":
            self.expect("[")
            values: list[int | None] = []
            if not self.take("]"):
                while True:
                    values.append(None if self.take("*") else self.integer())
                    if self.take(","):
                        continue
                    self.expect("]")
                    break
            out.append(("strides", tuple(values)))
        elif key == "requires_grad":
            v = self.integer()
            if v not in (0, 1):
                raise self.error("requires_grad is 0 or 1")
            out.append(("requires_grad", bool(v)))
        elif key == "device":
            self.ws()
            begin = self.pos
            while self.pos < len(self.text) and self.text[self.pos] not in ",)":
                self.pos += 1
            dev = self.text[begin:self.pos].strip()
            if not dev:
                raise self.error("empty device")
            out.append(("device", dev))
        else:
            raise self.error(f"unknown tensor property {key!r}")

    def symbol(self) -> str | None:
        """A symbolic size written by its name or expression (``batch``, ``s0``, ``2*s0 + 1``), else None (and
        nothing consumed): the text up to the next ``,`` or ``)`` outside parentheses, when it is neither an
        integer nor a ``key=value`` property."""
        depth, end = 0, self.pos
        while end < len(self.text):
            c = self.text[end]
            if c == "(":
                depth += 1
            elif c == ")":
                if depth == 0:
                    break
                depth -= 1
            elif c == "," and depth == 0:
                break
            end += 1
        token = self.text[self.pos:end].strip()
        if not token or "=" in token or _INTEGER.fullmatch(token) or not _SYMBOL_START.match(token):
            return None
        self.pos = end
        return token

    def integer(self) -> int:
        self.ws()
        start = self.pos
        if self.pos < len(self.text) and self.text[self.pos] == "-":
            self.pos += 1
        while self.pos < len(self.text) and self.text[self.pos].isdigit():
            self.pos += 1
        try:
            return int(self.text[start:self.pos])
        except ValueError:
            self.pos = start
            raise self.error("expected an integer") from None


_INTEGER = re.compile(r"-?\d+")
_SYMBOL_START = re.compile(r"[A-Za-z_(0-9-]")


@lru_cache(maxsize=4096)
def parse_value_type(text: str) -> ValueType:
    """Parse a TorchScript value type (a port dtype); ``str()`` of the result is ``text``."""
    if not isinstance(text, str):
        raise DtypeParseError(f"a TorchScript value type is a string, got {type(text).__name__} {text!r}")
    p = _Parser(text)
    t = p.value_type()
    p.ws()
    if p.pos != len(text):
        raise p.error("unexpected text")
    if t.text != text:  # surrounding whitespace: keep the exact text at top level
        t.text = text
    return t
