"""Node predicates: evaluating ``[...]`` against one op, the built-in functions, and user functions.

Values:

* a bare name is an attribute of the op; an attribute the op does not carry takes its schema default when the
  op's schema is known and gives one, and is ``null`` otherwise (so ``[axis == null]`` tests for absence and
  ``[!has($, 'axis')]`` tests that the op does not carry it);
* ``@type``, ``@name``, ``@namespace`` are the op's type, name and effective namespace;
* ``$`` is the op itself; a function receives it as a read-only :class:`~amanda_core.matching.views.OpView`.

Comparisons: ``==``/``!=`` compare numbers by value (``1 == 1.0``; ``true`` is not ``1``), lists and tuples element
by element (an attribute ``(3, 3)`` equals ``[3, 3]``), tensors by their elements, everything else with Python
equality.  ``<``, ``<=``, ``>``, ``>=`` compare two numbers or two strings and are false for anything else
(``null`` included).  A value used as a condition is true unless it is ``null``, ``false``, ``0``, ``''`` or an
empty list.
"""

from __future__ import annotations

__all__ = [
    "BUILTINS",
    "register_function",
    "unregister_function",
    "registered_functions",
    "values_equal_loose",
    "truth",
    "Evaluator",
]

import keyword
import math
import threading
from typing import Any, Callable, Mapping

from ..ir.compare import values_equal
from ..ir.graph import Graph, Op
from ..ir.tensor import as_array, is_tensor
from ..matching.views import DtypeParser, OpView, view_value
from ..namespace.schema import NO_DEFAULT, OpSchema
from .errors import QueryError
from .syntax import AttrRef, BoolOp, Call, Compare, Expr, ListExpr, Literal, Not, OpField, SelfRef

# --------------------------------------------------------------------------- values


def _plain(value: Any) -> Any:
    """Tensors as nested lists, tuples as lists: the form comparisons work on."""
    if is_tensor(value) or type(value).__module__ == "numpy":
        try:
            arr = as_array(value)
            return arr.tolist()
        except Exception:
            return value
    return value


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def values_equal_loose(a: Any, b: Any) -> bool:
    """Equality as predicates see it (see the module docstring)."""
    a, b = _plain(a), _plain(b)
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _number(a) and _number(b):
        if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
            return True
        return bool(a == b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(values_equal_loose(x, y) for x, y in zip(a, b))
    if isinstance(a, OpView) or isinstance(b, OpView):
        return a == b
    if isinstance(a, Graph) or isinstance(b, Graph):
        return values_equal(a, b)
    try:
        return bool(a == b)
    except Exception:
        return False


def _order(op: str, a: Any, b: Any) -> bool:
    a, b = _plain(a), _plain(b)
    if not ((_number(a) and _number(b)) or (isinstance(a, str) and isinstance(b, str))):
        return False
    if op == "<":
        return bool(a < b)
    if op == "<=":
        return bool(a <= b)
    if op == ">":
        return bool(a > b)
    return bool(a >= b)


def truth(value: Any) -> bool:
    """Whether a value holds as a condition."""
    value = _plain(value)
    if value is None:
        return False
    try:
        return bool(value)
    except Exception:
        return True


# --------------------------------------------------------------------------- built-in functions


class _Env:
    """What one evaluation sees: the op under test, how to find its schema, how to parse dtypes."""

    __slots__ = ("op", "schema_of", "parse")

    def __init__(self, op: Op, schema_of: Callable[[Op], OpSchema | None], parse: DtypeParser) -> None:
        self.op = op
        self.schema_of = schema_of
        self.parse = parse


def attribute(op: Op, name: str, schema_of: Callable[[Op], OpSchema | None]) -> Any:
    """An attribute's value, else its schema default, else None."""
    if name in op.attrs:
        return op.attrs[name]
    schema = schema_of(op)
    if schema is not None:
        a = schema.attr(name)
        if a is not None and a.default is not NO_DEFAULT:
            return a.default
    return None


def _op_arg(fn: str, value: Any) -> Op:
    if isinstance(value, OpView):
        return value._op
    raise TypeError(f"{fn}() takes the op ($) as its first argument, got {type(value).__name__}")


def _b_attr(env: _Env, op: Any, name: Any) -> Any:
    if not isinstance(name, str):
        raise TypeError(f"attr() takes an attribute name (a string), got {name!r}")
    return attribute(_op_arg("attr", op), name, env.schema_of)


def _b_has(env: _Env, op: Any, name: Any) -> bool:
    if not isinstance(name, str):
        raise TypeError(f"has() takes an attribute name (a string), got {name!r}")
    return name in _op_arg("has", op).attrs


def _b_len(env: _Env, value: Any) -> int:
    value = _plain(value)
    if value is None:
        return 0
    if isinstance(value, (list, tuple, str, dict)):
        return len(value)
    raise TypeError(f"len() of {type(value).__name__}")


def _b_consumers(env: _Env, op: Any) -> int:
    return len(_op_arg("consumers", op).successors())


def _b_startswith(env: _Env, text: Any, prefix: Any) -> bool:
    return isinstance(text, str) and isinstance(prefix, str) and text.startswith(prefix)


BUILTINS: dict[str, tuple[Callable[..., Any], int, str]] = {
    "attr": (_b_attr, 2, "attr($, 'name'): the attribute's value (schema default when absent, else null)"),
    "has": (_b_has, 2, "has($, 'name'): whether the op carries the attribute"),
    "len": (_b_len, 1, "len(value): length of a list, string or tensor's first dimension (0 for null)"),
    "consumers": (_b_consumers, 1, "consumers($): how many ops read an output of the op"),
    "startswith": (_b_startswith, 2, "startswith(text, prefix): whether text starts with prefix"),
}
"""Functions every query may call: name -> (implementation, number of arguments, description)."""

# --------------------------------------------------------------------------- user functions

_REGISTRY: dict[str, Callable[..., Any]] = {}
_LOCK = threading.Lock()


def check_function_name(name: str) -> None:
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"a query function is named by an identifier, got {name!r}")
    if name in BUILTINS:
        raise ValueError(f"{name!r} is a built-in query function and cannot be replaced")
    if name in ("true", "false", "null", "True", "False", "None"):
        raise ValueError(f"{name!r} is a constant in queries, not a function name")


def register_function(name: str, fn: Callable[..., Any]) -> None:
    """Make ``fn`` callable as ``name(...)`` in every query's predicates.

    It is called with the values written between the parentheses: ``$`` as an OpView of the op being tested,
    literals as Python values, attribute names as the attribute's value (graphs as read-only views).  Its result
    is used as a condition, or compared if written in a comparison.  Registering a name again replaces the
    function; built-in names (:data:`BUILTINS`) cannot be taken.
    """
    check_function_name(name)
    if not callable(fn):
        raise TypeError(f"register_function({name!r}, ...): {fn!r} is not callable")
    with _LOCK:
        _REGISTRY[name] = fn


def unregister_function(name: str) -> None:
    """Forget a function registered with :func:`register_function` (no error if it is not registered)."""
    with _LOCK:
        _REGISTRY.pop(name, None)


def registered_functions() -> dict[str, Callable[..., Any]]:
    """A snapshot of the functions registered with :func:`register_function`."""
    with _LOCK:
        return dict(_REGISTRY)


def resolve_functions(extra: Mapping[str, Callable[..., Any]] | None) -> dict[str, Callable[..., Any]]:
    """Registered functions overlaid by ``extra`` (checked)."""
    table = registered_functions()
    for name, fn in (extra or {}).items():
        check_function_name(name)
        if not callable(fn):
            raise TypeError(f"query function {name!r}: {fn!r} is not callable")
        table[name] = fn
    return table


# --------------------------------------------------------------------------- evaluation


class Evaluator:
    """Evaluates predicate trees of one query against ops.

    ``functions`` maps user function names to callables (built-ins are always there); a function that raises
    makes the match fail with a QueryError that names the function, the op and the place in the query.
    """

    def __init__(self, text: str, functions: Mapping[str, Callable[..., Any]],
                 schema_of: Callable[[Op], OpSchema | None], parse: DtypeParser) -> None:
        self.text = text
        self.functions = functions
        self.schema_of = schema_of
        self.parse = parse

    def holds(self, expr: Expr, op: Op) -> bool:
        return truth(self.eval(expr, _Env(op, self.schema_of, self.parse)))

    def eval(self, e: Expr, env: _Env) -> Any:
        if isinstance(e, Literal):
            return e.value
        if isinstance(e, AttrRef):
            return attribute(env.op, e.name, env.schema_of)
        if isinstance(e, Compare):
            a, b = self.eval(e.left, env), self.eval(e.right, env)
            if e.op == "==":
                return values_equal_loose(a, b)
            if e.op == "!=":
                return not values_equal_loose(a, b)
            return _order(e.op, a, b)
        if isinstance(e, BoolOp):
            if e.op == "&&":
                return all(truth(self.eval(x, env)) for x in e.operands)
            return any(truth(self.eval(x, env)) for x in e.operands)
        if isinstance(e, Not):
            return not truth(self.eval(e.operand, env))
        if isinstance(e, OpField):
            if e.field == "type":
                return env.op.type
            if e.field == "name":
                return env.op.name
            return env.op.effective_namespace
        if isinstance(e, SelfRef):
            return OpView(env.op, env.parse)
        if isinstance(e, ListExpr):
            return [self.eval(x, env) for x in e.items]
        if isinstance(e, Call):
            return self.call(e, env)
        raise AssertionError(f"unknown predicate node {e!r}")

    def call(self, e: Call, env: _Env) -> Any:
        args = [self.eval(a, env) for a in e.args]
        builtin = BUILTINS.get(e.name)
        try:
            if builtin is not None:
                return builtin[0](env, *args)
            fn = self.functions.get(e.name)
            if fn is None:
                raise QueryError(f"unknown function {e.name!r}", self.text, e.offset)
            return fn(*[view_value(a, env.parse) if not isinstance(a, OpView) else a for a in args])
        except QueryError:
            raise
        except Exception as err:
            raise QueryError(f"function {e.name}() failed on op {env.op.path!r} ({env.op.type}): "
                             f"{type(err).__name__}: {err}", self.text, e.offset) from err
