"""What a match is, shared by the mapping engine's matcher and the graph regular expressions (both depend on this
module, neither on the other for it)."""

from __future__ import annotations

__all__ = ["Match", "MatchContext", "Scope"]

from typing import Any, Callable, Mapping

import attrs

from ..ir.graph import Graph, Op, Port
from ..namespace.registry import NOT_CONSTANT
from ..namespace.schema import OpSchema
from .views import GraphView, OpView, PortView


@attrs.define
class Match:
    """One place where a pattern fits: pattern keys to ops, and what the variables captured."""

    graph: Graph
    ops: dict[str, Op]
    ports: dict[str, Port] = attrs.field(factory=dict)
    groups: dict[str, list[Port]] = attrs.field(factory=dict)
    values: dict[str, Any] = attrs.field(factory=dict)
    portmap: dict[tuple[str, str, str], Port] = attrs.field(factory=dict)
    rule: Any = None
    """The mapping rule that found it (a :class:`amanda_core.mapping.table.Rule`), if any."""
    inner: dict[str, Match] = attrs.field(factory=dict)
    """For op patterns with a body pattern: the match found inside the op's body, by the op's key."""
    scope: Scope | None = attrs.field(default=None, eq=False, repr=False)
    """The names the matcher's expressions read (:meth:`MatchContext.env` of the match and its pattern), kept
    for the rewrite that follows so that it need not make them again; None when the matcher evaluated nothing."""

    @property
    def all_ops(self) -> list[Op]:
        seen: dict[Op, None] = {}
        for op in self.ops.values():
            seen[op] = None
        return list(seen)

    def describe(self) -> str:
        return ", ".join(f"{k}={op.name}" for k, op in self.ops.items())


class Scope(dict):  # type: ignore[type-arg]
    """The names an expression sees for one match: the match's own (its variables, ``graph``, ``op``) in the dict,
    and the helper library behind them, read only for the names an expression uses (a name of the match hides a
    helper of the same name).  Copying the library into every match's names cost more than most rewrites."""

    __slots__ = ("library",)

    def __init__(self, library: Mapping[str, Any]) -> None:
        super().__init__()
        self.library = library


@attrs.define
class MatchContext:
    """What matching needs to know besides the graph: which ops are in the source namespace, their schemas,
    how to parse dtypes, and the helper functions expressions may call."""

    in_namespace: Callable[[Op], bool] = lambda op: True
    schema_of: Callable[[Op], OpSchema | None] = lambda op: None
    parse_dtype: Callable[[Port], Any] = lambda port: port.dtype
    library: Mapping[str, Any] = attrs.field(factory=dict)
    constant_of: Callable[[Op], Any] = lambda op: NOT_CONSTANT
    """The value of a constant op (``NOT_CONSTANT`` for any other op), as its namespace family defines it."""

    def env(self, graph: Graph, match: Match, pattern: Any = None) -> Scope:
        """The names expressions see for a match."""
        env = Scope(self.library)
        env["graph"] = GraphView(graph, self.parse_dtype)
        for key, op in match.ops.items():
            var = pattern.var_of(key) if pattern is not None and key in pattern.ops else None
            if var is None and key.startswith("$"):
                var = key[1:]  # graph-regex anchors are keyed "$name"
            if var is not None:
                env[var] = OpView(op, self.parse_dtype)
        for key, inner in match.inner.items():
            body = pattern.ops[key].body if pattern is not None and key in pattern.ops else None
            for name, value in self.env(inner.graph, inner, body).items():
                if name not in env or name in ("graph",):
                    env.setdefault(name, value)
        for name, port in match.ports.items():
            env[name] = PortView(port, self.parse_dtype)
        for name, ports in match.groups.items():
            env[name] = [PortView(p, self.parse_dtype) for p in ports]
        env.update(match.values)
        return env
