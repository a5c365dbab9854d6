"""Pluggable type systems.

A namespace schema writes attribute and port types as type expressions:
``int``, ``List[int]``, ``tf.DType``, ``onnx.INTS``, ``torch.Tensor``.  A
qualified expression (``tf.DType``) names its type system before the first
dot; an unqualified one uses the schema's ``default_type_system``.

A type system answers three questions:

* :meth:`TypeSystem.check_value` - does an attribute value have this type?
* :meth:`TypeSystem.parse_dtype` - what object stands for a port dtype
  string (``Float(1, 784)`` becomes an object with ``scalarType()``)?
* :meth:`TypeSystem.check_dtype` - may a port with this dtype sit in a port
  of this schema type?

The core ships ``python``; each framework plugin registers its own.
"""

from __future__ import annotations

__all__ = ["TypeSystem", "PythonTypeSystem", "TypeSystemRegistry", "split_type_expr", "TypeExprError"]

import re
from functools import lru_cache
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..errors import SchemaError


class TypeExprError(SchemaError):
    """A type expression the type system cannot parse."""


class TypeSystem:
    """Base class of type systems; subclasses override what they need."""

    name: str = ""
    description: str = ""

    def type_names(self) -> Sequence[str]:
        """The simple type names this system defines (for documentation and listing)."""
        return ()

    def check_value(self, type_expr: str, value: Any) -> str | None:
        """None if ``value`` is of type ``type_expr``, else the reason it is not."""
        return None

    def parse_dtype(self, text: str) -> Any:
        """The object standing for a port dtype written as ``text`` (default: the text)."""
        return text

    def check_dtype(self, type_expr: str, dtype: Any, context: Mapping[str, Any] | None = None) -> str | None:
        """None if a port of schema type ``type_expr`` may carry ``dtype``."""
        return None

    def canonical_dtype(self, value: Any) -> str | None:
        """The element type of ``value`` (a dtype string or parsed dtype of this system, or an attribute value
        naming an element type) as a numpy-style name (``float32``, ``int64``, ``bool``, ``bfloat16``,
        ``string``), or None if it names none.  Mapping tables convert dtypes between systems through it."""
        return None

    def from_canonical_dtype(self, name: str) -> Any:
        """How this system writes the element type ``name`` (numpy-style) as an attribute value, or None."""
        return None

    def tensor_type(self, dtype: Any) -> tuple[str, tuple[int | str | None, ...] | None] | None:
        """A port dtype of this system read as a tensor type: its numpy-style element type and its shape (dims as
        ints, names of symbolic dims, None for unknown; None for an unknown rank); None when ``dtype`` is not a
        tensor type this system can read.  Conversions between families carry port types through it."""
        return None

    def make_tensor_type(self, elem: str, shape: tuple[int | str | None, ...] | None) -> str | None:
        """The port dtype text of a tensor of numpy-style element type ``elem`` and ``shape`` in this system, or
        None when it cannot say it."""
        return None

    def __repr__(self) -> str:
        return f"<TypeSystem {self.name}>"


def split_type_expr(expr: str, default: str | None) -> tuple[str | None, str]:
    """``tf.DType`` -> ``("tf", "DType")``; ``List[int]`` -> ``(default, "List[int]")``.

    A leading ``name.`` always names a type system (``typing.`` excepted), so a
    type of an unregistered system is reported as such rather than misread."""
    head, dot, rest = expr.partition(".")
    if dot and head != "typing" and re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", head):
        return head, rest  # qualified, whether or not that system is registered
    return default, expr


# --------------------------------------------------------------------------- python


_TOKEN = re.compile(r"\s*(?:([A-Za-z_][A-Za-z0-9_.]*)|(\.\.\.)|([\[\],]))")


def _tokenize(expr: str) -> list[str]:
    pos, out = 0, []
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m or m.end() == pos:
            if expr[pos:].strip() == "":
                break
            raise TypeExprError(f"cannot parse type {expr!r} at {expr[pos:]!r}")
        out.append(m.group(1) or m.group(2) or m.group(3))
        pos = m.end()
    return out


Checker = Callable[[Any], bool]


class PythonTypeSystem(TypeSystem):
    """``python``: int, float, str, bool, bytes, None, Any, List[T], Tuple[...],
    Optional[T], Union[...], Dict[K, V] (also ``list``, ``dict``, ``Sequence``).

    A ``float`` accepts an ``int`` value (YAML writes ``1`` for ``1.0``); an
    ``int`` does not accept a ``bool``.  Lists accept tuples.
    """

    name = "python"
    description = "Python types as written in typing annotations"
    _SIMPLE: dict[str, Checker] = {
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "str": lambda v: isinstance(v, str),
        "bool": lambda v: isinstance(v, bool),
        "bytes": lambda v: isinstance(v, bytes),
        "None": lambda v: v is None,
        "NoneType": lambda v: v is None,
        "Any": lambda v: True,
        "object": lambda v: True,
        "list": lambda v: isinstance(v, (list, tuple)),
        "tuple": lambda v: isinstance(v, (list, tuple)),
        "dict": lambda v: isinstance(v, dict),
    }

    def type_names(self) -> Sequence[str]:
        return [*self._SIMPLE, "List", "Sequence", "Tuple", "Optional", "Union", "Dict", "Mapping"]

    def check_value(self, type_expr: str, value: Any) -> str | None:
        checker = self.compile(type_expr)
        if checker(value):
            return None
        return f"expected {type_expr}, got {type(value).__name__} {_brief(value)}"

    @lru_cache(maxsize=1024)  # noqa: B019 - instances are long-lived singletons
    def compile(self, type_expr: str) -> Checker:
        tokens = _tokenize(type_expr)
        checker, rest = self._parse(tokens, type_expr)
        if rest:
            raise TypeExprError(f"unexpected {' '.join(rest)!r} in type {type_expr!r}")
        return checker

    def _parse(self, tokens: list[str], expr: str) -> tuple[Checker, list[str]]:
        if not tokens:
            raise TypeExprError(f"incomplete type {expr!r}")
        head, rest = tokens[0], tokens[1:]
        if head.startswith("typing."):
            head = head[len("typing."):]
        args: list[Checker] = []
        ellipsis = False
        if rest and rest[0] == "[":
            rest = rest[1:]
            while True:
                if rest and rest[0] == "...":
                    ellipsis = True
                    rest = rest[1:]
                else:
                    arg, rest = self._parse(rest, expr)
                    args.append(arg)
                if not rest:
                    raise TypeExprError(f"unclosed '[' in type {expr!r}")
                if rest[0] == ",":
                    rest = rest[1:]
                    continue
                if rest[0] == "]":
                    rest = rest[1:]
                    break
                raise TypeExprError(f"unexpected {rest[0]!r} in type {expr!r}")
        return self._build(head, args, ellipsis, expr), rest

    def _build(self, head: str, args: list[Checker], ellipsis: bool, expr: str) -> Checker:
        if not args:
            if head in self._SIMPLE:
                return self._SIMPLE[head]
            if head in ("List", "Sequence", "Tuple", "Dict", "Mapping", "Optional", "Union"):
                return self._build(head, [self._SIMPLE["Any"]] * (2 if head in ("Dict", "Mapping") else 1),
                                   False, expr)
            raise TypeExprError(f"unknown python type {head!r} in {expr!r}")
        if head in ("List", "Sequence", "list"):
            (item,) = args[:1]
            return lambda v: isinstance(v, (list, tuple)) and all(item(x) for x in v)
        if head in ("Tuple", "tuple"):
            if ellipsis or len(args) == 1:
                one = args[0]
                return lambda v: isinstance(v, (list, tuple)) and all(one(x) for x in v)
            fixed = list(args)
            return lambda v: isinstance(v, (list, tuple)) and len(v) == len(fixed) and all(
                c(x) for c, x in zip(fixed, v))
        if head == "Optional":
            inner = args[0]
            return lambda v: v is None or inner(v)
        if head == "Union":
            alts = list(args)
            return lambda v: any(c(v) for c in alts)
        if head in ("Dict", "Mapping", "dict"):
            if len(args) != 2:
                raise TypeExprError(f"{head} needs two arguments in {expr!r}")
            k, val = args
            return lambda v: isinstance(v, dict) and all(k(a) and val(b) for a, b in v.items())
        raise TypeExprError(f"python type {head!r} takes no arguments ({expr!r})")


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# --------------------------------------------------------------------------- registry


class TypeSystemRegistry:
    """Type systems by name."""

    def __init__(self, systems: Iterable[TypeSystem] = ()) -> None:
        self._systems: dict[str, TypeSystem] = {}
        for ts in systems:
            self.add(ts)

    def add(self, ts: TypeSystem) -> None:
        if not ts.name:
            raise SchemaError(f"type system {ts!r} has no name")
        self._systems[ts.name] = ts

    def get(self, name: str) -> TypeSystem | None:
        return self._systems.get(name)

    def __getitem__(self, name: str) -> TypeSystem:
        try:
            return self._systems[name]
        except KeyError:
            known = ", ".join(sorted(self._systems)) or "none"
            raise SchemaError(f"unknown type system {name!r} (known: {known})") from None

    def __contains__(self, name: object) -> bool:
        return name in self._systems

    def names(self) -> list[str]:
        return sorted(self._systems)

    def resolve(self, type_expr: str, default: str | None) -> tuple[TypeSystem | None, str]:
        """The type system a type expression belongs to, and the expression local to it."""
        system, local = split_type_expr(type_expr, default)
        return (self._systems.get(system) if system else None), local
