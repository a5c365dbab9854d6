"""Graph regular expressions: find op patterns in a graph with a short query (``docs/graph-regex.md``).

::

    from amanda_core.regex import match

    match(graph, "Transpose#first -> Transpose#second")        # every match
    match(graph, "Conv[group == 1] -> (BatchNormalization)? -> Relu+", non_overlapping=True)
    match(graph, "Conv#c -> Relu; Conv#c -> Add")               # a Conv feeding a Relu and an Add

A query is made of node tests (an op type or ``.``, with an optional predicate in brackets) joined by ``->``
(a data edge), repeated with ``+``, ``*``, ``?``, grouped and alternated with ``( | )``, and tied together across
``;``-separated branches by anchors ``Type#id``.  Results are :class:`~amanda_core.mapping.match.Match` objects,
as the subgraph matcher of mapping tables gives: ``Match.ops`` keys anchored ops ``"$<name>"`` (``#first``) or
``"#<n>"`` (``#1``), other ops ``"_0"``, ``"_1"``... in the order the query visits them.

A mapping rule uses a query as its matcher with ``src: {query: "..."}``; the engine calls :func:`query_matches`.
"""

from __future__ import annotations

__all__ = [
    "Query",
    "QueryError",
    "QueryLimitWarning",
    "SearchLimits",
    "compile_query",
    "match",
    "query_matches",
    "register_function",
    "unregister_function",
    "registered_functions",
    "BUILTINS",
]

from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..ir.graph import Graph
from ..matching.types import Match, MatchContext
from ..namespace.schema import NamespaceSchema
from .errors import QueryError, QueryLimitWarning
from .predicate import BUILTINS, register_function, registered_functions, unregister_function
from .query import Query, compile_query
from .search import SearchLimits, run_query

if TYPE_CHECKING:
    from ..mapping.table import Rule


@lru_cache(maxsize=512)
def _compiled(text: str) -> Query:
    return compile_query(text)


def match(graph: Graph, query: str | Query, *, functions: Mapping[str, Callable[..., Any]] | None = None,
          non_overlapping: bool = False, schema: NamespaceSchema | None = None, ctx: MatchContext | None = None,
          limits: SearchLimits | None = None) -> list[Match]:
    """The matches of ``query`` in ``graph`` (its own ops, not those inside op bodies).

    * ``non_overlapping=False``: every match from every start op, by start op in topological order;
      ``True``: a maximal set of matches that share no op, chosen greedily by size (see
      :mod:`amanda_core.regex.search` for the exact order), listed in topological order of their start ops.
    * ``functions``: predicates the query may call, besides the registered and built-in ones.
    * ``schema``: the namespace schema of the graph; every op type the query names must be in it
      (QueryError otherwise), and attributes an op does not carry take their schema defaults.  Without it op
      types are compared as strings and an unknown type simply matches nothing.
    * ``ctx``: a :class:`~amanda_core.mapping.match.MatchContext`; only ops for which ``ctx.in_namespace(op)``
      holds are matched, ``ctx.schema_of`` gives attribute defaults, ``ctx.parse_dtype`` the dtypes functions
      see through ``OpView``.
    * ``limits``: bounds on the work per start op (default :class:`SearchLimits`); a cut search warns with
      :class:`QueryLimitWarning`.
    """
    q = query if isinstance(query, Query) else compile_query(query, functions)
    table = q.check_functions(functions)
    if schema is not None:
        q.check_types(schema)
    return run_query(graph, q, ctx or MatchContext(), schema, table, limits or SearchLimits(), non_overlapping)


def query_matches(graph: Graph, query: str | Query, ctx: MatchContext, *, rule: Rule | None = None,
                  schema: NamespaceSchema | None = None) -> list[Match]:
    """What a mapping rule whose matcher is ``{query: "..."}`` matches: non-overlapping matches in topological
    order of their start ops, only over ops ``ctx.in_namespace`` accepts, each with ``Match.rule`` set.  Errors
    name the rule."""
    try:
        q = query if isinstance(query, Query) else _compiled(query)
        table = q.check_functions(None)
        if schema is not None:
            q.check_types(schema)
        found = run_query(graph, q, ctx, schema, table, SearchLimits(), True)
    except QueryError as e:
        raise e.in_rule(rule.name if rule is not None else None) from None
    for m in found:
        m.rule = rule
    return found
