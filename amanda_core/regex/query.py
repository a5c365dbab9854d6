"""Compiling a parsed query: checks, positions and the automaton the search walks.

A query is compiled into one position automaton (Glushkov's construction) per branch:

* every op written in the query is a *position*, numbered in the order written;
* ``first`` are the positions a branch's path may start at, ``last`` those it may end at;
* ``follow[p]`` are the positions that may come right after ``p`` on the path (so ``A -> B+`` gives
  ``follow[A] = [B]``, ``follow[B] = [B]``), ``precede`` the reverse.

The automaton has no empty moves and one state per position, so a path of ops matches a branch when its first op
fits a ``first`` position, each next op fits a ``follow`` position of the previous one and is fed by it, and the
last position is in ``last``.

Rules checked here, each a QueryError pointing at the place:

* an anchor names exactly one op of every match, so it may not sit under a quantifier or in one arm of an
  alternative, and appears at most once per branch (a path never comes back to an op);
* the occurrences of an anchor agree on its type (one may leave it out: ``Conv#1 -> Relu; #1 -> Add``);
* a branch must match at least one op (``Relu*`` alone is refused: use ``Relu+``);
* every branch after the first shares an anchor with one before it (the search joins branches through anchors);
* every function called is a built-in, registered, or given, and built-ins get their number of arguments.
"""

from __future__ import annotations

__all__ = ["Position", "Query", "compile_query"]

import difflib
from typing import Any, Callable, Iterable, Iterator, Mapping

import attrs

from ..namespace.schema import NamespaceSchema
from .errors import QueryError
from .predicate import BUILTINS, resolve_functions
from .syntax import (
    AltAst,
    BoolOp,
    Call,
    Compare,
    Expr,
    ListExpr,
    NodeAst,
    Not,
    RegexAst,
    RepeatAst,
    SeqAst,
    parse,
    start_of,
)


@attrs.frozen
class Position:
    """One op written in the query."""

    index: int
    branch: int
    item: int  # index of the top-level item of its branch it belongs to
    type: str | None  # None: any type
    predicates: tuple[Expr, ...]  # all must hold (an anchor gathers those of every occurrence)
    anchor: str | None  # "#1" / "$name"
    offset: int


@attrs.frozen
class _Glushkov:
    nullable: bool
    first: tuple[int, ...]
    last: tuple[int, ...]


class Query:
    """A parsed and checked graph regular expression.  Build it with :func:`compile_query`.

    Public, read-only: ``text``; ``positions`` (every op written, in order); ``branches`` (the positions of each
    branch); ``first``, ``last``, ``follow``, ``precede`` (the automaton); ``anchors`` (anchor key -> the
    position of its occurrence in each branch, as ``{branch: position}``); ``plan`` (the order branches are
    joined in, each with its pivot anchor); ``op_types``; ``function_names``; ``functions`` (those given to
    :func:`compile_query`).
    """

    def __init__(self, text: str, functions: Mapping[str, Callable[..., Any]] | None = None) -> None:
        self.text = text
        self.functions: dict[str, Callable[..., Any]] = dict(functions or {})
        trees = parse(text)
        self.positions: list[Position] = []
        self.branches: list[list[int]] = []
        self.first: list[tuple[int, ...]] = []
        self.last: set[int] = set()
        self.follow: dict[int, list[int]] = {}
        self.precede: dict[int, list[int]] = {}
        self.anchors: dict[str, dict[int, int]] = {}
        self.branch_offsets: list[int] = []
        self._anchor_type: dict[str, tuple[str, int]] = {}
        self._anchor_preds: dict[str, list[Expr]] = {}
        self.type_offsets: dict[str, int] = {}
        self.function_names: dict[str, int] = {}
        for b, tree in enumerate(trees):
            self._branch(b, tree)
        self._settle_anchors()
        self.plan: list[tuple[int, str | None]] = self._plan()
        self.op_types: tuple[str, ...] = tuple(self.type_offsets)
        self.check_functions(self.functions)
        # per position: the anchor met next going forward / backward along its branch (for pruning)
        self.next_anchor: dict[int, str | None] = {}
        self.prev_anchor: dict[int, str | None] = {}
        for members in self.branches:
            anchored = sorted((self.positions[p].item, self.positions[p].anchor) for p in members
                              if self.positions[p].anchor is not None)
            for p in members:
                item = self.positions[p].item
                self.next_anchor[p] = next((a for i, a in anchored if i > item), None)
                self.prev_anchor[p] = next((a for i, a in reversed(anchored) if i < item), None)

    # -- building
    def _branch(self, b: int, tree: RegexAst) -> None:
        self.branch_offsets.append(_offset(tree))
        items = _flatten(tree)
        members: list[int] = []
        self.branches.append(members)
        seen_here: dict[str, int] = {}
        info = _Glushkov(True, (), ())
        for i, item in enumerate(items):
            if isinstance(item, NodeAst) and item.anchor is not None:
                if item.anchor in seen_here:
                    raise QueryError(f"anchor {_show(item.anchor)} appears twice in this branch (first at column "
                                     f"{self._col(seen_here[item.anchor])}); a path never comes back to an op, "
                                     "so write the second one in a branch of its own", self.text, item.offset)
                seen_here[item.anchor] = item.offset
            g = self._glushkov(item, b, i, members, top=True)
            # sequence: info then g
            for p in info.last:
                self._add_follow(p, g.first)
            first = info.first + (g.first if info.nullable else ())
            last = g.last + (info.last if g.nullable else ())
            info = _Glushkov(info.nullable and g.nullable, _unique(first), _unique(last))
        if info.nullable:
            raise QueryError("this branch can match no op at all (everything in it is optional); use + rather "
                             "than * or ? on at least one op", self.text, _offset(tree))
        self.first.append(info.first)
        self.last.update(info.last)

    def _col(self, offset: int) -> int:
        return offset - (self.text.rfind("\n", 0, offset) + 1) + 1

    def _add_follow(self, p: int, qs: Iterable[int]) -> None:
        f = self.follow.setdefault(p, [])
        for q in qs:
            if q not in f:
                f.append(q)
                self.precede.setdefault(q, []).append(p)

    def _glushkov(self, t: RegexAst, b: int, item: int, members: list[int], top: bool) -> _Glushkov:
        if isinstance(t, NodeAst):
            if t.anchor is not None and not top:
                raise QueryError(f"anchor {_show(t.anchor)} is under a quantifier or in one arm of an "
                                 "alternative; an anchor names exactly one op of every match, so it must stand "
                                 "on the main path of its branch", self.text, t.offset)
            p = len(self.positions)
            preds = (t.predicate,) if t.predicate is not None else ()
            for e in preds:
                self._collect_calls(e)
            if t.type is not None:
                self.type_offsets.setdefault(t.type, t.type_offset if t.type_offset is not None else t.offset)
            if t.anchor is not None:
                self.anchors.setdefault(t.anchor, {})[b] = p
                if t.type is not None:
                    known = self._anchor_type.get(t.anchor)
                    if known is not None and known[0] != t.type:
                        raise QueryError(f"anchor {_show(t.anchor)} is a {known[0]!r} at column "
                                         f"{self._col(known[1])} but a {t.type!r} here; an anchor is one op",
                                         self.text, t.offset)
                    self._anchor_type.setdefault(t.anchor, (t.type, t.offset))
                self._anchor_preds.setdefault(t.anchor, []).extend(preds)
            self.positions.append(Position(p, b, item, t.type, preds, t.anchor, t.offset))
            members.append(p)
            return _Glushkov(False, (p,), (p,))
        if isinstance(t, SeqAst):
            info = _Glushkov(True, (), ())
            for child in t.items:
                g = self._glushkov(child, b, item, members, top)
                for p in info.last:
                    self._add_follow(p, g.first)
                info = _Glushkov(info.nullable and g.nullable,
                                 _unique(info.first + (g.first if info.nullable else ())),
                                 _unique(g.last + (info.last if g.nullable else ())))
            return info
        if isinstance(t, AltAst):
            parts = [self._glushkov(o, b, item, members, False) for o in t.options]
            return _Glushkov(any(g.nullable for g in parts), _unique(tuple(x for g in parts for x in g.first)),
                             _unique(tuple(x for g in parts for x in g.last)))
        assert isinstance(t, RepeatAst)
        g = self._glushkov(t.child, b, item, members, False)
        if t.kind in ("+", "*"):
            for p in g.last:
                self._add_follow(p, g.first)
        return _Glushkov(g.nullable or t.kind in ("*", "?"), g.first, g.last)

    def _collect_calls(self, e: Expr) -> None:
        for node in _walk(e):
            if isinstance(node, Call):
                self.function_names.setdefault(node.name, node.offset)
                builtin = BUILTINS.get(node.name)
                if builtin is not None and len(node.args) != builtin[1]:
                    raise QueryError(f"{node.name}() takes {builtin[1]} argument(s), got {len(node.args)}: "
                                     f"{builtin[2]}", self.text, node.offset)

    def _settle_anchors(self) -> None:
        """Give every occurrence of an anchor the anchor's type and all its predicates."""
        for key, occurrences in self.anchors.items():
            t = self._anchor_type.get(key)
            preds = tuple(self._anchor_preds.get(key, ()))
            for p in occurrences.values():
                old = self.positions[p]
                self.positions[p] = attrs.evolve(old, type=t[0] if t is not None else None, predicates=preds)

    def _plan(self) -> list[tuple[int, str | None]]:
        """Branches in the order they are matched, each with the anchor it is joined by (None for the first)."""
        plan: list[tuple[int, str | None]] = [(0, None)]
        bound = {a for a, occ in self.anchors.items() if 0 in occ}
        todo = list(range(1, len(self.branches)))
        while todo:
            for b in todo:
                shared = [self.positions[p].anchor for p in self.branches[b]
                          if self.positions[p].anchor in bound]
                if shared:
                    plan.append((b, shared[0]))
                    bound |= {a for a, occ in self.anchors.items() if b in occ}
                    todo.remove(b)
                    break
            else:
                b = todo[0]
                raise QueryError("this branch shares no anchor with the branches before it; branches are joined "
                                 "through anchors (write the same anchor in both, e.g. 'Conv#1 -> Relu; Conv#1 -> "
                                 "Add'), or match them as separate queries", self.text, self.branch_offsets[b])
        return plan

    # -- checks
    def check_functions(self, functions: Mapping[str, Callable[..., Any]] | None) -> dict[str, Callable[..., Any]]:
        """The functions this query calls, resolved (``functions`` first, then registered ones); a name that
        resolves nowhere is a QueryError."""
        try:
            table = resolve_functions({**self.functions, **(functions or {})})
        except (ValueError, TypeError) as e:
            raise QueryError(str(e), self.text) from None
        for name, offset in self.function_names.items():
            if name not in BUILTINS and name not in table:
                known = sorted(set(BUILTINS) | set(table))
                close = difflib.get_close_matches(name, known, n=3)
                hint = f" (did you mean {', '.join(close)}?)" if close else ""
                raise QueryError(f"unknown function {name!r}{hint}; register it with register_function() or pass "
                                 f"it in functions=", self.text, offset)
        return table

    def check_types(self, schema: NamespaceSchema) -> None:
        """Every op type written must be an op type of ``schema``'s namespace."""
        for t, offset in self.type_offsets.items():
            if t not in schema:
                close = difflib.get_close_matches(t, list(schema.op_schemas), n=3, cutoff=0.6)
                if not close:
                    low = t.lower()
                    close = [k for k in schema.op_schemas if k.lower() == low or k.lower().endswith("::" + low)][:3]
                hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
                raise QueryError(f"op type {t!r} is not in namespace {schema.namespace}{hint}", self.text, offset)

    # -- misc
    @property
    def single_branch(self) -> bool:
        return len(self.branches) == 1

    def __repr__(self) -> str:
        return f"Query({self.text!r})"

    def __str__(self) -> str:
        return self.text


def compile_query(text: str, functions: Mapping[str, Callable[..., Any]] | None = None) -> Query:
    """Parse and check a graph regular expression (``docs/graph-regex.md``).

    ``functions`` maps names to predicates callable in ``[...]``; with those registered by
    :func:`~amanda_core.regex.register_function`, every function the query calls must be known now.  Raises
    :class:`~amanda_core.regex.QueryError` with the line, column and what was expected.
    """
    return Query(text, functions)


# --------------------------------------------------------------------------- helpers


def _offset(t: RegexAst) -> int:
    return start_of(t)


def _show(anchor: str) -> str:
    return anchor if anchor.startswith("#") else "#" + anchor[1:]


def _unique(xs: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(dict.fromkeys(xs))


def _flatten(t: RegexAst) -> list[RegexAst]:
    """The top-level items of a branch (sequences without quantifier are spliced in)."""
    if isinstance(t, SeqAst):
        out: list[RegexAst] = []
        for child in t.items:
            out.extend(_flatten(child))
        return out
    return [t]


def _walk(e: Expr) -> Iterator[Expr]:
    yield e
    if isinstance(e, Compare):
        yield from _walk(e.left)
        yield from _walk(e.right)
    elif isinstance(e, BoolOp):
        for x in e.operands:
            yield from _walk(x)
    elif isinstance(e, Not):
        yield from _walk(e.operand)
    elif isinstance(e, ListExpr):
        for x in e.items:
            yield from _walk(x)
    elif isinstance(e, Call):
        for x in e.args:
            yield from _walk(x)
