"""Errors and warnings of graph regular expressions."""

from __future__ import annotations

__all__ = ["QueryError", "QueryLimitWarning", "line_col"]

from ..errors import FormatError, Location


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of ``offset`` in ``text``."""
    line = text.count("\n", 0, offset) + 1
    start = text.rfind("\n", 0, offset) + 1
    return line, offset - start + 1


class QueryError(FormatError):
    """A query that does not parse, breaks a rule of the language, names an unknown op type or function, or whose
    function failed while matching.

    ``str(error)`` reads ``query:<line>:<column>: <what>`` followed by the query line with a caret under the
    place; ``reason``, ``line``, ``column``, ``expected`` (what the parser wanted, when it wanted something),
    ``query`` (the text) and ``rule`` (the mapping rule, when the query came from one) are kept as attributes.
    """

    def __init__(self, message: str, text: str = "", offset: int | None = None, *, expected: str | None = None,
                 rule: str | None = None) -> None:
        self.query = text
        self.offset = offset
        self.expected = expected
        self.rule = rule
        if offset is not None:
            self.line, self.column = line_col(text, offset)
            location: Location | None = Location("query", self.line, self.column)
        else:
            self.line = self.column = None  # type: ignore[assignment]
            location = Location("query")
        FormatError.__init__(self, message, location)
        self.reason = message
        head = f"rule {rule!r}: " if rule else ""
        body = f"{location}: {message}"
        snippet = self._snippet()
        self.args = (f"{head}{body}{snippet}",)

    def _snippet(self) -> str:
        if self.offset is None or not self.query:
            return ""
        start = self.query.rfind("\n", 0, self.offset) + 1
        end = self.query.find("\n", self.offset)
        line = self.query[start: end if end >= 0 else len(self.query)]
        if not line.strip():
            return ""
        pad = "".join("\t" if ch == "\t" else " " for ch in line[: self.offset - start])
        return f"\n  {line}\n  {pad}^"

    def __str__(self) -> str:
        return str(self.args[0])

    def in_rule(self, rule: str | None) -> QueryError:
        """The same error, said to come from mapping rule ``rule``."""
        if rule is None or self.rule is not None:
            return self
        return QueryError(self.reason, self.query, self.offset, expected=self.expected, rule=rule)


class QueryLimitWarning(UserWarning):
    """The search from some start ops stopped at a limit (:class:`~amanda_core.regex.SearchLimits`), so matches
    may be missing."""
