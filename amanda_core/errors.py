"""Exceptions raised by Amanda.

Every error says *what* went wrong and, where it is known, *where*: a file and
line for text input, an op name (with its path through subgraphs) for graph
problems.  Command-line tools print ``str(error)`` and exit non-zero.
"""

from __future__ import annotations

__all__ = [
    "AmandaError",
    "first_line",
    "GraphError",
    "GraphCycleError",
    "FormatError",
    "NamespaceError",
    "SchemaError",
    "ValidationError",
    "PluginError",
    "Location",
]

from typing import Any, Sequence

import attrs


@attrs.frozen
class Location:
    """A place in a text file: ``file:line`` (``line`` is 1-based)."""

    file: str | None = None
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        parts = [self.file or "<string>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)


class AmandaError(Exception):
    """Base class of every error Amanda raises on purpose."""


class GraphError(AmandaError):
    """A graph mutation or query that would break the graph's invariants."""


class GraphCycleError(GraphError):
    """The data and control edges of a graph form a cycle."""

    def __init__(self, message: str, ops: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.ops = tuple(ops)


class FormatError(AmandaError):
    """Malformed input text or file (YAML graph, schema, table, model file)."""

    def __init__(self, message: str, location: Location | None = None) -> None:
        self.location = location
        self.reason = message
        super().__init__(f"{location}: {message}" if location else message)


class NamespaceError(AmandaError):
    """An unknown namespace, or a version that no registered namespace matches."""


class SchemaError(AmandaError):
    """An op schema or namespace schema that is malformed or missing."""


class ValidationError(AmandaError):
    """A graph that breaks its namespace schema; holds every problem found."""

    def __init__(self, problems: Sequence[Any]) -> None:
        self.problems = list(problems)
        lines = [f"{len(self.problems)} problem(s):"]
        lines.extend(f"  {p}" for p in self.problems)
        super().__init__("\n".join(lines))


class PluginError(AmandaError):
    """A plugin failed to load or registered something invalid."""


def first_line(e: BaseException) -> str:
    """The first line of an exception's message (its type's name when it has none): what a framework's long error
    says in one line, for the one-line errors Amanda prints."""
    lines = str(e).strip().splitlines()
    return lines[0] if lines else type(e).__name__
