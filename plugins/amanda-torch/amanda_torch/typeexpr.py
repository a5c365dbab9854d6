"""Schema type expressions: the types written in torch operator schemas.

The language is the one torch prints in a ``FunctionSchema``
(``aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor``)::

    Tensor  int  float  bool  str  complex  Scalar  SymInt  ScalarType  Device ...
    T?                 optional (``Tensor?``)
    T[]  T[N]          list, with N a size hint (``int[2]``, ``SymInt[]``)
    (A, B)             tuple (``(str, t)[]`` is a list of tuples)
    Dict(K, V)  Future(T)  RRef(T)  Await(T)  Union(A, B)
    t  t1  tVal        type variables
    __torch__.torch.classes.quantized.Conv2dPackedParamsBase   custom classes

plus, for schemas written by hand, Python spellings (``List[int]``,
``Optional[Tensor]``, ``Dict[str, Tensor]``, ``Tuple[int, int]``,
``Union[int, str]``) and ``A | B``, a union of alternatives (the bare-name op
entries use it for ports that accept several overloads' types).

Alias annotations (``Tensor(a!)``, ``int[](a)``, ``Dict(str, t)(a!)``,
``str(b -> *)``) are parsed and reported apart: they say how values alias,
not what a value is, so :func:`parse_schema_type` returns the type without
them and the annotations it saw.

Invariant: ``format_type(parse_schema_type(s)[0])`` is canonical and parses
back to an equal expression.
"""

from __future__ import annotations

__all__ = [
    "TypeExpr",
    "Named",
    "Container",
    "ListOf",
    "OptionalOf",
    "TupleOf",
    "UnionOf",
    "parse_schema_type",
    "parse_type",
    "format_type",
    "is_type_variable",
    "TypeParseError",
]

from dataclasses import dataclass
from functools import lru_cache

from amanda_core.errors import SchemaError


class TypeParseError(SchemaError):
    """A type expression that is not valid in torch's schema type language."""


@dataclass(frozen=True)
class TypeExpr:
    """Base of the parsed type expressions."""

    def __str__(self) -> str:
        return format_type(self)


@dataclass(frozen=True)
class Named(TypeExpr):
    """A type named by one (possibly dotted) identifier: ``Tensor``, ``int``, ``t``, ``__torch__.X``."""

    name: str


@dataclass(frozen=True)
class Container(TypeExpr):
    """A parameterised type other than list, optional, tuple and union: ``Dict(K, V)``, ``Future(T)``."""

    name: str
    args: tuple[TypeExpr, ...]


@dataclass(frozen=True)
class ListOf(TypeExpr):
    """``T[]`` or ``T[N]`` (``size`` is torch's size hint, not a checked length)."""

    elem: TypeExpr
    size: int | None = None


@dataclass(frozen=True)
class OptionalOf(TypeExpr):
    """``T?``: a ``T`` or None."""

    elem: TypeExpr


@dataclass(frozen=True)
class TupleOf(TypeExpr):
    """``(A, B, ...)``."""

    items: tuple[TypeExpr, ...]


@dataclass(frozen=True)
class UnionOf(TypeExpr):
    """``A | B`` or ``Union(A, B)``: any of the alternatives."""

    alts: tuple[TypeExpr, ...]


# Parameterised types torch writes with parentheses; Python spellings with brackets.
CONTAINERS = frozenset({"Dict", "Future", "RRef", "Await", "Union"})
_PY_GENERICS = {"List", "Optional", "Dict", "Tuple", "Union", "Future", "RRef", "Await"}

# Simple type names with a fixed meaning (everything else lowercase-initial is a type variable).
BUILTIN_NAMES = frozenset({
    "Tensor", "int", "float", "bool", "str", "complex", "number", "Scalar", "SymInt", "SymFloat", "SymBool",
    "ScalarType", "Layout", "MemoryFormat", "Device", "Generator", "Dimname", "Storage", "Stream", "QScheme",
    "Capsule", "Any", "NoneType", "None", "AnyClassType", "AnyEnumType", "AnyListType", "AnyTupleType", "Type",
    "Graph", "PyObject", "Function", "Uninitialized", "DeviceObjType", "StreamObjType",
})


def is_type_variable(name: str) -> bool:
    """True for schema type variables (``t``, ``t1``, ``tVal``): lowercase-initial names that are not builtins."""
    return name[:1].islower() and name not in BUILTIN_NAMES and "." not in name


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.aliases: list[str] = []

    def error(self, what: str) -> TypeParseError:
        return TypeParseError(f"cannot parse torch type {self.text!r}: {what} at column {self.pos + 1}")

    def ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1

    def peek(self) -> str:
        self.ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, ch: str) -> None:
        if self.peek() != ch:
            raise self.error(f"expected {ch!r}")
        self.pos += 1

    def name(self) -> str:
        self.ws()
        start = self.pos
        text = self.text
        while self.pos < len(text) and (text[self.pos].isalnum() or text[self.pos] in "_."):
            self.pos += 1
        word = text[start:self.pos]
        if not word or word[0].isdigit() or word.endswith(".") or ".." in word:
            self.pos = start
            raise self.error("expected a type name")
        return word

    def union(self) -> TypeExpr:
        alts = [self.postfix()]
        while self.peek() == "|":
            self.pos += 1
            alts.append(self.postfix())
        return alts[0] if len(alts) == 1 else UnionOf(tuple(alts))

    def args(self, close: str) -> tuple[TypeExpr, ...]:
        items: list[TypeExpr] = []
        if self.peek() == close:
            self.pos += 1
            return ()
        while True:
            items.append(self.union())
            ch = self.peek()
            if ch == ",":
                self.pos += 1
                continue
            if ch == close:
                self.pos += 1
                return tuple(items)
            raise self.error(f"expected ',' or {close!r}")

    def alias(self) -> None:
        # at '(' of an alias annotation: keep its text up to the matching ')'
        self.expect("(")
        start, depth = self.pos, 1
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    self.aliases.append(self.text[start:self.pos].strip())
                    self.pos += 1
                    return
            self.pos += 1
        raise self.error("unclosed alias annotation")

    def primary(self) -> TypeExpr:
        ch = self.peek()
        if ch == "(":
            self.pos += 1
            return TupleOf(self.args(")"))
        word = self.name()
        nxt = self.peek()
        if nxt == "(" and word in CONTAINERS:
            self.pos += 1
            args = self.args(")")
            return UnionOf(args) if word == "Union" else Container(word, args)
        if nxt == "[" and word in _PY_GENERICS and self._bracket_holds_type():
            self.pos += 1
            args = self.args("]")
            return self._generic(word, args)
        return Named(word)

    def _bracket_holds_type(self) -> bool:
        j = self.pos + 1
        while j < len(self.text) and self.text[j] == " ":
            j += 1
        return j < len(self.text) and (self.text[j].isalpha() or self.text[j] in "_(")

    def _generic(self, word: str, args: tuple[TypeExpr, ...]) -> TypeExpr:
        if word == "List":
            if len(args) != 1:
                raise self.error("List takes one type")
            return ListOf(args[0])
        if word == "Optional":
            if len(args) != 1:
                raise self.error("Optional takes one type")
            return OptionalOf(args[0])
        if word == "Tuple":
            return TupleOf(args)
        if word == "Union":
            return UnionOf(args)
        return Container(word, args)

    def postfix(self) -> TypeExpr:
        t = self.primary()
        while True:
            ch = self.peek()
            if ch == "?":
                self.pos += 1
                t = OptionalOf(t)
            elif ch == "[":
                self.pos += 1
                self.ws()
                start = self.pos
                while self.pos < len(self.text) and self.text[self.pos].isdigit():
                    self.pos += 1
                size = int(self.text[start:self.pos]) if self.pos > start else None
                self.expect("]")
                t = ListOf(t, size)
            elif ch == "(":
                self.alias()
            else:
                return t


@lru_cache(maxsize=8192)
def parse_schema_type(text: str) -> tuple[TypeExpr, tuple[str, ...]]:
    """Parse a schema type; returns the type (alias annotations removed) and the annotations seen."""
    p = _Parser(text)
    t = p.union()
    if p.peek():
        raise p.error("unexpected text")
    return t, tuple(p.aliases)


def parse_type(text: str) -> TypeExpr:
    """Parse a schema type, ignoring alias annotations."""
    return parse_schema_type(text)[0]


def format_type(t: TypeExpr, top: bool = True) -> str:
    """The canonical text of a type expression (no alias annotations)."""
    if isinstance(t, Named):
        return t.name
    if isinstance(t, Container):
        return f"{t.name}({', '.join(format_type(a) for a in t.args)})"
    if isinstance(t, ListOf):
        return f"{format_type(t.elem, False)}[{'' if t.size is None else t.size}]"
    if isinstance(t, OptionalOf):
        return f"{format_type(t.elem, False)}?"
    if isinstance(t, TupleOf):
        return f"({', '.join(format_type(a) for a in t.items)})"
    if isinstance(t, UnionOf):
        if top:
            return " | ".join(format_type(a, False) for a in t.alts)
        return f"Union({', '.join(format_type(a) for a in t.alts)})"
    raise TypeError(f"not a type expression: {t!r}")
