"""Reading graph regular expressions: tokens, syntax trees, and the parser.

The grammar (``docs/graph-regex.md`` explains it with examples)::

    query      := branch (';' branch)* [';']
    branch     := alt
    alt        := seq ('|' seq)*
    seq        := item ('->' item)*
    item       := atom [quantifier]             quantifier := '+' | '*' | '?'
    atom       := node | '(' alt ')'
    node       := optype [anchor] [predicate] | optype predicate anchor | anchor [predicate]
    optype     := NAME | STRING | '.'            NAME: [A-Za-z_][A-Za-z0-9_]* ('::' [A-Za-z_][A-Za-z0-9_]*)*
    anchor     := '#' (INT | NAME)
    predicate  := '[' expr ']'

    expr       := and ('||' and)*
    and        := unary ('&&' unary)*
    unary      := '!' unary | compare
    compare    := value [('==' | '!=' | '<' | '<=' | '>' | '>=') value]
    value      := INT | FLOAT | STRING | 'true' | 'false' | 'null' | '$' | '@' NAME
                | NAME '(' [expr (',' expr)*] ')' | NAME | '[' [expr (',' expr)* [',']] ']' | '(' expr ')'

Every syntax error is a :class:`~amanda_core.regex.errors.QueryError` that says where (line and column) and what
was expected.  Trees keep the offset of every node so later checks can point at the place too.
"""

from __future__ import annotations

__all__ = [
    "Token",
    "tokenize",
    "NodeAst",
    "SeqAst",
    "AltAst",
    "RepeatAst",
    "RegexAst",
    "Expr",
    "Literal",
    "ListExpr",
    "AttrRef",
    "OpField",
    "SelfRef",
    "Call",
    "Not",
    "BoolOp",
    "Compare",
    "parse",
    "OP_FIELDS",
    "start_of",
]

import re
from typing import Any, Union

import attrs

from .errors import QueryError

# --------------------------------------------------------------------------- tokens

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_NAME_RE = re.compile(rf"{_NAME}(?:::{_NAME})*")
_NUMBER_RE = re.compile(r"-?[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?")
_PUNCT = [
    ("->", "->"), ("&&", "&&"), ("||", "||"), ("==", "=="), ("!=", "!="), ("<=", "<="), (">=", ">="),
    ("+", "+"), ("*", "*"), ("?", "?"), ("|", "|"), (";", ";"), ("(", "("), (")", ")"), ("[", "["),
    ("]", "]"), ("#", "#"), (".", "."), (",", ","), ("$", "$"), ("@", "@"), ("!", "!"), ("<", "<"), (">", ">"),
]
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", "'": "'", '"': '"'}


@attrs.frozen
class Token:
    kind: str  # "name", "string", "int", "float", "eof", or the punctuation itself
    value: Any
    offset: int
    end: int

    def describe(self) -> str:
        if self.kind == "eof":
            return "the end of the query"
        if self.kind == "name":
            return f"name {self.value!r}"
        if self.kind == "string":
            return f"string {self.value!r}"
        if self.kind in ("int", "float"):
            return f"number {self.value!r}"
        return f"'{self.kind}'"


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text``, ending with an ``eof`` token; whitespace (newlines too) separates tokens."""
    out: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch in "'\"":
            i = _string(text, i, out)
            continue
        if ch.isdigit() or (ch == "-" and i + 1 < n and text[i + 1].isdigit()):
            m = _NUMBER_RE.match(text, i)
            assert m is not None
            raw = m.group(0)
            if m.group(1) is not None or m.group(2) is not None:
                out.append(Token("float", float(raw), i, m.end()))
            else:
                out.append(Token("int", int(raw), i, m.end()))
            i = m.end()
            continue
        if ch.isalpha() or ch == "_":
            m = _NAME_RE.match(text, i)
            assert m is not None
            end = m.end()
            if end < n and text[end] == "." and end + 1 < n and (text[end + 1].isalnum() or text[end + 1] == "_"):
                tail = re.match(r"[A-Za-z0-9_.:]*", text[end:])
                word = m.group(0) + (tail.group(0) if tail else "")
                raise QueryError(f"a name cannot contain '.': quote an op type that does ('{word}'); an attribute "
                                 f"so named is attr($, '{word}')", text, end, expected="a quoted name")
            if end < n and text[end] == ":" and not text.startswith("::", end):
                raise QueryError("a single ':' cannot follow a name: namespaced op types are written 'aten::relu', "
                                 "anything else in quotes", text, end, expected="'::' or a quoted name")
            out.append(Token("name", m.group(0), i, end))
            i = end
            continue
        for lexeme, kind in _PUNCT:
            if text.startswith(lexeme, i):
                out.append(Token(kind, lexeme, i, i + len(lexeme)))
                i += len(lexeme)
                break
        else:
            hint = ""
            if ch == "=":
                hint = " (equality is written '==')"
            elif ch == "&":
                hint = " (and is written '&&')"
            elif ch == "-":
                hint = " (an edge is written '->')"
            raise QueryError(f"unexpected character {ch!r}{hint}", text, i)
    out.append(Token("eof", None, n, n))
    return out


def _string(text: str, start: int, out: list[Token]) -> int:
    quote = text[start]
    i = start + 1
    chars: list[str] = []
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt not in _ESCAPES:
                raise QueryError(f"unknown escape '\\{nxt}' in a string (known: \\n \\t \\\\ \\' \\\")", text, i)
            chars.append(_ESCAPES[nxt])
            i += 2
            continue
        if ch == quote:
            out.append(Token("string", "".join(chars), start, i + 1))
            return i + 1
        if ch == "\n":
            break
        chars.append(ch)
        i += 1
    raise QueryError(f"unterminated string: no closing {quote} on this line", text, start,
                     expected=f"a closing {quote}")


# --------------------------------------------------------------------------- predicate trees

OP_FIELDS = ("type", "name", "namespace")
"""What ``@field`` may name: the op's type, its name, its (effective) namespace."""


@attrs.frozen
class Literal:
    value: Any
    offset: int


@attrs.frozen
class ListExpr:
    items: tuple[Expr, ...]
    offset: int


@attrs.frozen
class AttrRef:
    """An attribute of the op being tested (by bare name)."""

    name: str
    offset: int


@attrs.frozen
class OpField:
    """``@type``, ``@name``, ``@namespace``."""

    field: str
    offset: int


@attrs.frozen
class SelfRef:
    """``$``: the op being tested (functions receive an OpView of it)."""

    offset: int


@attrs.frozen
class Call:
    name: str
    args: tuple[Expr, ...]
    offset: int


@attrs.frozen
class Not:
    operand: Expr
    offset: int


@attrs.frozen
class BoolOp:
    op: str  # "&&" | "||"
    operands: tuple[Expr, ...]
    offset: int


@attrs.frozen
class Compare:
    op: str  # "==" "!=" "<" "<=" ">" ">="
    left: Expr
    right: Expr
    offset: int


Expr = Union[Literal, ListExpr, AttrRef, OpField, SelfRef, Call, Not, BoolOp, Compare]

# --------------------------------------------------------------------------- regex trees


@attrs.frozen
class NodeAst:
    """One op of the pattern: a type (None for ``.`` or a bare anchor), an anchor key (``"#1"`` or ``"$name"``)
    and a predicate."""

    type: str | None
    anchor: str | None
    predicate: Expr | None
    offset: int
    type_offset: int | None = None
    wildcard: bool = False


@attrs.frozen
class SeqAst:
    items: tuple[RegexAst, ...]
    offset: int


@attrs.frozen
class AltAst:
    options: tuple[RegexAst, ...]
    offset: int


@attrs.frozen
class RepeatAst:
    child: RegexAst
    kind: str  # "+" | "*" | "?"
    offset: int


RegexAst = Union[NodeAst, SeqAst, AltAst, RepeatAst]

# --------------------------------------------------------------------------- parser

_COMPARE = ("==", "!=", "<", "<=", ">", ">=")
_CONSTANTS = {"true": True, "false": False, "True": True, "False": False, "null": None, "None": None}
_NODE_START = "an op type, '.', an anchor '#...' or '('"


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0

    # -- helpers
    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def next(self) -> Token:
        t = self.tokens[self.i]
        if t.kind != "eof":
            self.i += 1
        return t

    def error(self, expected: str, tok: Token | None = None, note: str = "") -> QueryError:
        t = tok or self.tok
        return QueryError(f"expected {expected}, got {t.describe()}{note}", self.text, t.offset, expected=expected)

    def expect(self, kind: str, expected: str, note: str = "") -> Token:
        if self.tok.kind != kind:
            raise self.error(expected, note=note)
        return self.next()

    # -- graph level
    def query(self) -> list[RegexAst]:
        branches = [self.alt()]
        while self.tok.kind == ";":
            self.next()
            if self.tok.kind == "eof":
                break
            branches.append(self.alt())
        if self.tok.kind != "eof":
            expected = "'->', '|', ';', a quantifier (+ * ?) or the end of the query"
            note = ""
            if self.tok.kind == ")":
                note = " (no '(' is open here)"
            elif self.tok.kind in ("[", "#"):
                note = " (an op takes its anchor and its predicate once each)"
            raise self.error(expected, note=note)
        return branches

    def alt(self) -> RegexAst:
        start = self.tok.offset
        options = [self.seq()]
        while self.tok.kind == "|":
            self.next()
            options.append(self.seq())
        return options[0] if len(options) == 1 else AltAst(tuple(options), start)

    def seq(self) -> RegexAst:
        start = self.tok.offset
        items = [self.item()]
        while self.tok.kind == "->":
            self.next()
            items.append(self.item())
        return items[0] if len(items) == 1 else SeqAst(tuple(items), start)

    def item(self) -> RegexAst:
        atom = self.atom()
        if self.tok.kind in ("+", "*", "?"):
            q = self.next()
            atom = RepeatAst(atom, q.kind, q.offset)
            if self.tok.kind in ("+", "*", "?"):
                raise QueryError("a quantifier cannot follow another (write (A+)* if you mean it)", self.text,
                                 self.tok.offset, expected="'->', '|', ';', ')' or the end of the query")
        return atom

    def atom(self) -> RegexAst:
        t = self.tok
        if t.kind == "(":
            self.next()
            if self.tok.kind == ")":
                raise self.error(_NODE_START, note=" (a group cannot be empty)")
            inner = self.alt()
            if self.tok.kind != ")":
                raise self.error("')'", note=f" (to close the '(' at column {self._col(t.offset)})")
            self.next()
            return inner
        if t.kind in ("name", "string", ".", "#"):
            return self.node()
        note = ""
        if t.kind in ("+", "*", "?"):
            note = " (a quantifier follows the op or group it repeats)"
        elif t.kind == "->":
            note = " (an edge joins two ops)"
        raise self.error(_NODE_START, note=note)

    def _col(self, offset: int) -> int:
        return offset - (self.text.rfind("\n", 0, offset) + 1) + 1

    def node(self) -> NodeAst:
        t = self.tok
        op_type: str | None = None
        type_offset: int | None = None
        wildcard = False
        if t.kind == "name":
            op_type, type_offset = t.value, t.offset
            self.next()
        elif t.kind == "string":
            if not t.value:
                raise QueryError("an op type cannot be empty", self.text, t.offset)
            op_type, type_offset = t.value, t.offset
            self.next()
        elif t.kind == ".":
            wildcard = True
            self.next()
        anchor = self.anchor() if self.tok.kind == "#" else None
        predicate = None
        if self.tok.kind == "[":
            predicate = self.predicate()
            if self.tok.kind == "#":
                if anchor is not None:
                    raise QueryError("an op takes one anchor", self.text, self.tok.offset,
                                     expected="'->', '|', ';', a quantifier or the end of the query")
                if op_type is None and not wildcard:
                    raise QueryError("the anchor goes before the predicate here", self.text, self.tok.offset)
                anchor = self.anchor()
        return NodeAst(op_type, anchor, predicate, t.offset, type_offset, wildcard)

    def anchor(self) -> str:
        self.next()  # '#'
        t = self.tok
        if t.kind == "int" and t.value >= 0 and self.text[t.offset].isdigit():
            self.next()
            return f"#{t.value}"
        if t.kind == "name" and "::" not in t.value:
            self.next()
            return f"${t.value}"
        raise self.error("an anchor id after '#' (a number such as #1 or a name such as #first)")

    def predicate(self) -> Expr:
        open_tok = self.next()  # '['
        if self.tok.kind == "]":
            raise self.error("a condition", note=" (an empty predicate [] is not allowed)")
        expr = self.expr()
        if self.tok.kind != "]":
            note = f" (to close the predicate opened at column {self._col(open_tok.offset)})"
            if self.tok.kind in _COMPARE:
                note = " (comparisons do not chain; join them with && or ||)"
            elif self.tok.kind == "name" and self.tok.value in ("and", "or", "not"):
                note = " (and, or, not are written &&, ||, !)"
            raise self.error("']', '&&' or '||'", note=note)
        self.next()
        return expr

    # -- predicate level
    def expr(self) -> Expr:
        start = self.tok.offset
        operands = [self.conj()]
        while self.tok.kind == "||":
            self.next()
            operands.append(self.conj())
        return operands[0] if len(operands) == 1 else BoolOp("||", tuple(operands), start)

    def conj(self) -> Expr:
        start = self.tok.offset
        operands = [self.unary()]
        while self.tok.kind == "&&":
            self.next()
            operands.append(self.unary())
        return operands[0] if len(operands) == 1 else BoolOp("&&", tuple(operands), start)

    def unary(self) -> Expr:
        if self.tok.kind == "!":
            t = self.next()
            return Not(self.unary(), t.offset)
        return self.compare()

    def compare(self) -> Expr:
        left = self.value()
        if self.tok.kind in _COMPARE:
            op = self.next()
            right = self.value()
            if self.tok.kind in _COMPARE:
                raise QueryError("comparisons do not chain; join them with && or ||", self.text, self.tok.offset,
                                 expected="']', '&&', '||', ',' or ')'")
            return Compare(op.kind, left, right, op.offset)
        return left

    def value(self) -> Expr:
        t = self.tok
        if t.kind in ("int", "float", "string"):
            self.next()
            return Literal(t.value, t.offset)
        if t.kind == "$":
            self.next()
            return SelfRef(t.offset)
        if t.kind == "@":
            self.next()
            f = self.tok
            if f.kind != "name" or f.value not in OP_FIELDS:
                raise self.error(", ".join(f"@{x}" for x in OP_FIELDS) + " after '@'")
            self.next()
            return OpField(f.value, t.offset)
        if t.kind == "(":
            self.next()
            inner = self.expr()
            self.expect(")", "')'", note=f" (to close the '(' at column {self._col(t.offset)})")
            return inner
        if t.kind == "[":
            self.next()
            items: list[Expr] = []
            while self.tok.kind != "]":
                items.append(self.expr())
                if self.tok.kind == ",":
                    self.next()
                    continue
                if self.tok.kind != "]":
                    raise self.error("',' or ']' in a list")
            self.next()
            return ListExpr(tuple(items), t.offset)
        if t.kind == "name":
            self.next()
            if t.value in _CONSTANTS and self.tok.kind != "(":
                return Literal(_CONSTANTS[t.value], t.offset)
            if "::" in t.value:
                raise QueryError(f"{t.value!r} is not an attribute or function name (write attr($, "
                                 f"'{t.value}') for an attribute so named)", self.text, t.offset)
            if self.tok.kind == "(":
                open_tok = self.next()
                args: list[Expr] = []
                if self.tok.kind != ")":
                    args.append(self.expr())
                    while self.tok.kind == ",":
                        self.next()
                        args.append(self.expr())
                self.expect(")", "',' or ')'", note=f" (to close the call opened at column "
                                                     f"{self._col(open_tok.offset)})")
                return Call(t.value, tuple(args), t.offset)
            return AttrRef(t.value, t.offset)
        note = ""
        if t.kind == "]":
            note = " (the condition is not finished)"
        raise self.error("a value (a number, 'string', true, false, null, a list, an attribute name, $, @type, "
                         "@name or a function call)", note=note)


def start_of(t: RegexAst) -> int:
    """Where the text of a regex tree begins (a quantifier's tree begins with what it repeats)."""
    while not isinstance(t, NodeAst):
        if isinstance(t, RepeatAst):
            t = t.child
        elif isinstance(t, SeqAst):
            t = t.items[0]
        else:
            t = t.options[0]
    return t.offset


def parse(text: str) -> list[RegexAst]:
    """The branches of a query (``;``-separated), as syntax trees.  Raises QueryError."""
    if not isinstance(text, str):
        raise QueryError(f"a query is a string, got {type(text).__name__}")
    return _Parser(text).query()
