"""Reading torch's operator schema text.

torch prints every registered operator as a ``FunctionSchema``::

    aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
    aten::max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)
    prim::TupleUnpack(Any tup) -> ...
    aten::format(str self, ...) -> str

The text is the faithful form: the Python binding's argument types lose
``SymInt`` (shown as ``int``) and ``Scalar`` (shown as ``number``), so types
are taken from here.  ``*`` starts the keyword-only arguments, ``...`` in the
arguments or as the returns means any number more (vararg / varret).

Invariant: a parsed argument keeps both the type without alias annotations
(``type``) and the type exactly as written (``annotated``); they differ only by
the annotations listed in ``aliases``.
"""

from __future__ import annotations

__all__ = ["SchemaArg", "ParsedSchema", "parse_function_schema"]

from dataclasses import dataclass

from .typeexpr import TypeParseError, _Parser, format_type


@dataclass(frozen=True)
class SchemaArg:
    """One argument or return of a schema."""

    name: str | None
    type: str
    annotated: str
    aliases: tuple[str, ...] = ()
    kwarg_only: bool = False
    default: str | None = None

    @property
    def mutable(self) -> bool:
        """True if an alias annotation marks the value as written (``Tensor(a!)``)."""
        return any("!" in a for a in self.aliases)


@dataclass(frozen=True)
class ParsedSchema:
    name: str
    overload: str
    args: tuple[SchemaArg, ...]
    returns: tuple[SchemaArg, ...]
    vararg: bool = False
    varret: bool = False

    @property
    def qualified_name(self) -> str:
        return f"{self.name}.{self.overload}" if self.overload else self.name


class _SchemaParser(_Parser):
    def lit(self, s: str) -> bool:
        self.ws()
        if self.text.startswith(s, self.pos):
            self.pos += len(s)
            return True
        return False

    def ident(self) -> str:
        self.ws()
        start = self.pos
        while self.pos < len(self.text) and (self.text[self.pos].isalnum() or self.text[self.pos] == "_"):
            self.pos += 1
        if self.pos == start:
            raise self.error("expected a name")
        return self.text[start:self.pos]

    def typed(self) -> tuple[str, str, tuple[str, ...]]:
        self.ws()
        start, before = self.pos, len(self.aliases)
        t = self.postfix()
        raw = self.text[start:self.pos].strip()
        return format_type(t), raw, tuple(self.aliases[before:])

    def default_text(self) -> str:
        self.ws()
        start, depth, quote = self.pos, 0, ""
        text = self.text
        while self.pos < len(text):
            ch = text[self.pos]
            if quote:
                if ch == "\\":
                    self.pos += 1
                elif ch == quote:
                    quote = ""
            elif ch in "\"'":
                quote = ch
            elif ch in "([":
                depth += 1
            elif ch in ")]":
                if depth == 0:
                    break
                depth -= 1
            elif ch == "," and depth == 0:
                break
            self.pos += 1
        return text[start:self.pos].strip()

    def at_name(self) -> bool:
        ch = self.peek()
        return bool(ch) and (ch.isalpha() or ch == "_")


def parse_function_schema(text: str) -> ParsedSchema:
    """Parse one operator schema as torch prints it."""
    p = _SchemaParser(text)
    try:
        ns = p.ident()
        if not p.lit("::"):
            raise p.error("expected '::' after the operator namespace")
        name = f"{ns}::{p.ident()}"
        overload = p.ident() if p.lit(".") else ""
        p.expect("(")
        args: list[SchemaArg] = []
        kwarg_only = vararg = False
        if not p.lit(")"):
            while True:
                if p.lit("..."):
                    vararg = True
                elif p.lit("*"):
                    kwarg_only = True
                else:
                    t, raw, aliases = p.typed()
                    arg_name = p.ident()
                    default = p.default_text() if p.lit("=") else None
                    args.append(SchemaArg(arg_name, t, raw, aliases, kwarg_only, default))
                if p.lit(","):
                    continue
                p.expect(")")
                break
        if not p.lit("->"):
            raise p.error("expected '->'")
        returns: list[SchemaArg] = []
        varret = False

        def one_return() -> None:
            nonlocal varret
            if p.lit("..."):
                varret = True
                return
            t, raw, aliases = p.typed()
            ret_name = p.ident() if p.at_name() else None
            returns.append(SchemaArg(ret_name, t, raw, aliases))

        if p.peek() == "(":
            p.pos += 1
            if not p.lit(")"):
                while True:
                    one_return()
                    if p.lit(","):
                        continue
                    p.expect(")")
                    break
        else:
            one_return()
        if p.peek():
            raise p.error("unexpected text after the returns")
    except TypeParseError as e:
        raise TypeParseError(f"cannot parse operator schema {text!r}: {e}") from None
    return ParsedSchema(name, overload, tuple(args), tuple(returns), vararg, varret)
