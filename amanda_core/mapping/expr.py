"""Expressions in mapping tables: ``${...}``.

An expression is Python.  It is either one expression (``${axis + 1}``) or a body of statements that ends in
``return`` (the multi-line form, ``docs/mapping-tables.md``, "Expressions")::

    T: |
      ${
          dtype = op.output_ports["out0"].dtype.scalarType()
          if dtype == "Float":
            return "float32"
          return "float64"
      }

Variables bound by the matcher are plain names inside expressions; writing them with their ``$`` (``$eps``) is
accepted too.

Expressions are compiled once, when their table loads, after their syntax tree has been checked.  Refused:
``import``, ``global``/``nonlocal``, class and function definitions, ``with``, ``async``/``await``/``yield``,
any name or attribute that starts with ``_``, the attributes through which Python code usually climbs out of a
sandbox (frames, code objects, generators' internals, ``format``/``format_map``, ``mro``, numpy's ``ctypes``
and file writers), and calls of ``eval``, ``exec``, ``compile``, ``open``, ``getattr`` and their kin.  The
built-ins available are a fixed list of harmless ones.  This is defence in depth: a table given on the command
line runs expressions only with ``--trust-expressions``; tables installed by plugins are trusted.
"""

from __future__ import annotations

__all__ = [
    "Expression",
    "ExpressionError",
    "compile_expression",
    "is_expression",
    "SAFE_BUILTINS",
    "check_tree",
]

import ast
import builtins
import io
import re
import sys
import textwrap
import tokenize
import types
from typing import Any, Mapping

from ..errors import AmandaError, Location


class ExpressionError(AmandaError):
    """An expression that is refused, does not compile, or fails when evaluated."""

    def __init__(self, message: str, location: Location | None = None, rule: str | None = None) -> None:
        self.reason = message
        self.location = location
        self.rule = rule
        where = f"{location}: " if location is not None else ""
        in_rule = f"rule {rule!r}: " if rule else ""
        super().__init__(f"{where}{in_rule}{message}")


_SAFE_NAMES = (
    "abs", "all", "any", "bool", "dict", "divmod", "enumerate", "filter", "float", "frozenset", "int", "isinstance",
    "len", "list", "map", "max", "min", "pow", "range", "repr", "reversed", "round", "set", "slice", "sorted", "str",
    "sum", "tuple", "zip", "ValueError", "TypeError", "KeyError", "IndexError", "ArithmeticError", "Exception",
    "True", "False", "None", "bytes", "chr", "ord", "hash", "iter", "next",
)
SAFE_BUILTINS: dict[str, Any] = {name: getattr(builtins, name) for name in _SAFE_NAMES}
"""The built-ins expressions may use."""

_FORBIDDEN_CALLS = {
    "eval", "exec", "compile", "open", "globals", "locals", "vars", "getattr", "setattr", "delattr", "hasattr",
    "__import__", "input", "breakpoint", "help", "exit", "quit", "memoryview", "type", "object", "super",
    "classmethod", "staticmethod", "property", "dir", "id", "print",
}
_FORBIDDEN_ATTRS = {
    "format", "format_map", "mro", "ctypes", "tofile", "dump", "dumps", "load", "loads", "fromfile",
    "func_globals", "func_code", "im_func", "im_self",
}
_FORBIDDEN_ATTR_PREFIXES = ("_", "gi_", "ag_", "cr_", "f_", "tb_", "co_")
_FORBIDDEN_NODES: tuple[type, ...] = (
    ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef,
    ast.AsyncFor, ast.AsyncWith, ast.With, ast.Await, ast.Yield, ast.YieldFrom,
)
if hasattr(ast, "TryStar"):
    _FORBIDDEN_NODES += (ast.TryStar,)


def check_tree(tree: ast.AST) -> str | None:
    """The reason ``tree`` is refused, or None if it may run."""
    for node in ast.walk(tree):
        if isinstance(node, _FORBIDDEN_NODES):
            return f"{type(node).__name__.lower()} is not allowed in an expression"
        if isinstance(node, ast.Name):
            if node.id.startswith("_"):
                return f"name {node.id!r} is not allowed (names may not start with '_')"
            if node.id in _FORBIDDEN_CALLS:
                return f"{node.id!r} is not allowed in an expression"
        elif isinstance(node, ast.Attribute):
            attr = node.attr
            if attr.startswith(_FORBIDDEN_ATTR_PREFIXES) or attr in _FORBIDDEN_ATTRS:
                return f"attribute {attr!r} is not allowed in an expression"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "__" in node.value:
            return "string constants containing '__' are not allowed in an expression"
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            right = node.right
            if isinstance(right, ast.Constant) and isinstance(right.value, (int, float)) and abs(right.value) > 4096:
                return "exponent too large"
    return None


_DOLLAR = re.compile(r"\$(?=[A-Za-z_])")


def _strip_dollars(source: str) -> str:
    """``$name`` -> ``name`` outside string literals."""
    if "$" not in source:
        return source
    out: list[str] = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return _DOLLAR.sub("", source)
    lines = source.splitlines(keepends=True)
    # rebuild the text, replacing '$' only in the gaps between string tokens
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    pos = 0
    for tok in tokens:
        if tok.type != tokenize.STRING:
            continue
        start = offsets[tok.start[0] - 1] + tok.start[1]
        end = offsets[tok.end[0] - 1] + tok.end[1]
        out.append(_DOLLAR.sub("", source[pos:start]))
        out.append(source[start:end])
        pos = end
    out.append(_DOLLAR.sub("", source[pos:]))
    return "".join(out)


def is_expression(value: Any) -> bool:
    """True for a string written ``${...}`` (whitespace around it allowed)."""
    if not isinstance(value, str):
        return False
    s = value.strip()
    return s.startswith("${") and s.endswith("}")


class Expression:
    """A checked, compiled expression; call :meth:`evaluate` with the names it may see."""

    __slots__ = ("source", "location", "rule", "_code", "_is_body", "names")

    def __init__(self, source: str, code: types.CodeType, is_body: bool, location: Location | None,
                 rule: str | None, names: frozenset[str]) -> None:
        self.source = source
        self._code = code
        self._is_body = is_body
        self.location = location
        self.rule = rule
        self.names = names
        """Free names the expression reads (bound variables, helpers, built-ins)."""

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        library = getattr(env, "library", None)
        if library is None:
            scope = dict(env)
        else:  # a match's Scope: only the names the code reads, the match's before the library's
            scope = {}
            for name in self.names:
                if name in env:
                    scope[name] = env[name]
                elif name in library:
                    scope[name] = library[name]
        scope["__builtins__"] = SAFE_BUILTINS
        try:
            if self._is_body:
                fn = types.FunctionType(self._code, scope)
                return fn()
            return eval(self._code, scope)  # noqa: S307 - checked tree, restricted builtins
        except ExpressionError:
            raise
        except Exception as e:
            raise ExpressionError(f"expression {self.source.strip()!r} failed: {type(e).__name__}: {e}",
                                  self.location, self.rule) from e

    def __repr__(self) -> str:
        return f"Expression({self.source!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Expression) and other.source == self.source

    def __hash__(self) -> int:
        return hash(self.source)


_COMPILED: dict[str, tuple[types.CodeType, bool, frozenset[str]]] = {}
"""Checked and compiled sources (the Python text): tables repeat expressions (three times each on average over
the installed tables), and checking and compiling is most of the time of loading a table."""


def compile_expression(text: str, location: Location | None = None, rule: str | None = None) -> Expression:
    """Check and compile ``${...}`` (or the bare source); raises ExpressionError with the reason."""
    s = text.strip()
    if s.startswith("${") and s.endswith("}"):
        s = s[2:-1]
    source = textwrap.dedent(s.strip("\n")).strip()
    if not source:
        raise ExpressionError("empty expression", location, rule)
    python = _strip_dollars(source)
    done = _COMPILED.get(python)
    if done is not None:  # the same checked code, named after this expression's place in tracebacks
        code, is_body, names = done
        return Expression(text, code.replace(co_filename=_filename(location, rule)), is_body, location, rule, names)
    is_body = False
    try:
        tree: ast.AST = ast.parse(python, mode="eval")
    except SyntaxError:
        try:
            tree = ast.parse(python, mode="exec")
        except SyntaxError as e:
            raise ExpressionError(f"not a valid Python expression or body: {e.msg} (line {e.lineno} of the "
                                  f"expression)", location, rule) from None
        is_body = True
    reason = check_tree(tree)
    if reason:
        raise ExpressionError(f"expression refused: {reason}", location, rule)
    names = frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
    if is_body:
        body = tree.body  # type: ignore[attr-defined]
        if not any(isinstance(n, ast.Return) for n in ast.walk(tree)):
            raise ExpressionError("a multi-line expression must 'return' its value", location, rule)
        fields: dict[str, Any] = {"name": "expression", "body": body, "decorator_list": [], "returns": None,
                                  "args": ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                                                        kw_defaults=[], kwarg=None, defaults=[])}
        if sys.version_info >= (3, 12):
            fields["type_params"] = []
        module = ast.Module(body=[ast.FunctionDef(**fields)], type_ignores=[])
        ast.fix_missing_locations(module)
        outer = compile(module, _filename(location, rule), "exec")
        code = next(c for c in outer.co_consts if isinstance(c, types.CodeType))
    else:
        code = compile(tree, _filename(location, rule), "eval")  # type: ignore[call-overload]
    _COMPILED[python] = (code, is_body, names)
    return Expression(text, code, is_body, location, rule, names)


def _filename(location: Location | None, rule: str | None) -> str:
    return f"<expression{' in rule ' + rule if rule else ''}{' at ' + str(location) if location else ''}>"
