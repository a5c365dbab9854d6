"""Finding where a compiled query matches in a graph.

How the search runs, and what bounds its work:

1. **Candidates and order.**  Matching starts from every op of the graph, in topological order (insertion order
   if the graph has a cycle).  Only ops of the graph itself are seen (not those in op bodies: a meta-op matches
   as one op), and only ops the :class:`~amanda_core.mapping.match.MatchContext` accepts (``in_namespace``).

2. **A memo of longest continuations.**  For a state "op *o* taken by query position *p*" the search keeps
   ``longest[o, p]``: how many more ops the longest way to finish the branch from there takes (or "none").
   It is computed once per state and call, by an iterative depth-first pass over the product of the graph's
   data edges and the automaton's ``follow`` links, together with the best next state.  Every state is
   evaluated once, so the memo costs O((ops + edges) x positions) for all start ops together.  Backwards
   (through producers, for branch parts before their anchor) there is a second memo of the same kind.

3. **Preferred match.**  From a start op the search follows the memo's best next state, so the first match it
   finds takes the longest path: ``Relu+`` takes the whole chain of Relus, ``(A -> B | A)`` prefers ``A -> B``.
   Ties go to the alternative written first, then to the output port and consumer that come first.  A branch
   may stop early (a quantifier giving back ops) only when no longer way leads to a whole match.

4. **Branches** are matched in the query's :attr:`~amanda_core.regex.query.Query.plan` order: the first from
   the start op, each other one from an anchor already bound, forwards (consumers) for the part after the
   anchor and backwards (producers) for the part before it.  Ops are not shared between the nodes of a match
   except through anchors.  A bound anchor further along a branch prunes every op that comes after it in
   topological order (for forward parts; before it for backward parts).  When a branch cannot be completed
   the search backtracks into the previous branches.

5. **Bounded work per start op.**  Each start op may spend ``SearchLimits.max_steps`` steps plus the length of
   its preferred first path: a step is a state pushed on the search stack, an alternative examined when
   backtracking, or an op of a further match listed in "all" mode.  All mode also lists at most
   ``max_matches_per_start`` matches per start op, and stops once the matches listed hold ``max_total_ops``
   ops together.  When a limit cuts a search, :class:`QueryLimitWarning` says so.  So a 100k-op chain costs a
   few passes over the chain, and an op with a wide fan-out is examined once per state, not once per path
   through it: nothing is exponential.

6. **All matches** (``non_overlapping=False``): for every start op, every distinct match that takes different
   ops where the graph fans out (``Conv -> Relu`` lists a Conv once per Relu it feeds).  Where the query offers
   several ways to take the *same* op (alternatives, a quantifier going on or stopping), only the preferred way
   is followed, unless it leads to no whole match.  A start state (op, query position) that lies on the first
   branch's path of a match already listed is not searched again (its matches would be parts of that one):
   ``Relu+`` on a chain lists one match, not one per Relu, while ``Relu -> Relu`` lists every pair.

7. **Non-overlapping matches**: each start op contributes its preferred match; they are taken greedily by size
   (number of ops) descending, then by the topological position of the start op (positions are distinct, so
   the order is total and the result deterministic); a match sharing an op with one already taken is refused.
   A second pass retries, in the same order, each start op whose match was refused and that no taken match
   holds, this time searching around the taken ops; so no further match can be added (within the limits).
   The result is listed in topological order of the start ops.
"""

from __future__ import annotations

__all__ = ["SearchLimits", "run_query"]

import warnings
from typing import Any, Callable, Iterator, Mapping

import attrs

from ..errors import GraphCycleError
from ..ir.bulk import bulk_build
from ..ir.graph import Graph, Op
from ..matching.types import Match, MatchContext
from ..namespace.schema import NamespaceSchema, OpSchema
from .errors import QueryLimitWarning
from .predicate import Evaluator
from .query import Query

Key = tuple[Op, int]


@attrs.frozen
class SearchLimits:
    """Bounds on the work spent from one start op (see :mod:`amanda_core.regex.search`)."""

    max_steps: int = 100_000
    """Search steps one start op may spend beyond the length of its preferred path."""
    max_matches_per_start: int = 10_000
    """Matches listed from one start op (all mode)."""
    max_total_ops: int = 1_000_000
    """All mode stops listing once the matches listed hold this many ops together (a query such as ``.+`` on a
    graph of n ops has matches of total size about n*n/2)."""

    def __attrs_post_init__(self) -> None:
        if self.max_steps < 1 or self.max_matches_per_start < 1 or self.max_total_ops < 1:
            raise ValueError("search limits must be positive")


class _OutOfSteps(Exception):
    pass


class _Overlay:
    """A set of ops on top of a read-only base set (the ops already taken)."""

    __slots__ = ("base", "own")

    def __init__(self, base: set[Op] | frozenset[Op]) -> None:
        self.base = base
        self.own: set[Op] = set()

    def __contains__(self, op: object) -> bool:
        return op in self.own or op in self.base

    def add(self, op: Op) -> None:
        self.own.add(op)

    def discard(self, op: Op) -> None:
        self.own.discard(op)


class _Frame:
    __slots__ = ("key", "entry", "stage", "i", "best", "added", "bound", "done")

    def __init__(self, key: Key | None, entry: int) -> None:
        self.key = key
        self.entry = entry  # matches completed when the frame was pushed
        self.stage = 0
        self.i = 0
        self.best: Key | None = None
        self.added = False
        self.bound: str | None = None
        self.done: set[Op] | None = None  # next ops through which a match was completed


class _Run:
    """One search of one query in one graph (memos live as long as the run)."""

    def __init__(self, graph: Graph, query: Query, ctx: MatchContext, schema: NamespaceSchema | None,
                 functions: Mapping[str, Callable[..., Any]], limits: SearchLimits) -> None:
        self.graph = graph
        self.q = query
        self.ctx = ctx
        self.limits = limits

        def schema_of(op: Op) -> OpSchema | None:
            s = ctx.schema_of(op)
            if s is None and schema is not None and op.type is not None:
                s = schema.get(op.type)
            return s

        self.evaluator = Evaluator(query.text, functions, schema_of, ctx.parse_dtype)
        try:
            self.order: tuple[Op, ...] = graph.topological_order()
            self.acyclic = True
        except GraphCycleError:
            self.order = tuple(graph)
            self.acyclic = False
        self.topo = {op: i for i, op in enumerate(self.order)}
        self.first_all = {p for f in query.first for p in f}
        self.fit: dict[Key, bool] = {}
        self.nbrs: tuple[dict[Op, tuple[Op, ...]], dict[Op, tuple[Op, ...]]] = ({}, {})
        self.val: tuple[dict[Key, int | None], dict[Key, int | None]] = ({}, {})
        self.best: tuple[dict[Key, Key | None], dict[Key, Key | None]] = ({}, {})
        self.ranked: tuple[dict[Key, list[Key]], dict[Key, list[Key]]] = ({}, {})
        self.marked: set[Key] = set()
        self.steps = 0
        self.allowance = 0
        self.completed = 0
        self.cut_steps = 0
        self.cut_matches = 0
        self.cut_total = False

    # -- basic relations
    def fits(self, op: Op, p: int) -> bool:
        key = (op, p)
        r = self.fit.get(key)
        if r is None:
            pos = self.q.positions[p]
            r = (pos.type is None or op.type == pos.type) and op.graph is self.graph and \
                bool(self.ctx.in_namespace(op))
            if r and pos.predicates:
                r = all(self.evaluator.holds(e, op) for e in pos.predicates)
            self.fit[key] = r
        return r

    def neighbours(self, d: int, op: Op) -> tuple[Op, ...]:
        cache = self.nbrs[d]
        n = cache.get(op)
        if n is None:
            n = cache[op] = tuple(op.successors() if d == 0 else op.predecessors())
        return n

    def children(self, d: int, key: Key) -> list[Key]:
        op, p = key
        nexts = self.q.follow.get(p, ()) if d == 0 else self.q.precede.get(p, ())
        if not nexts:
            return []
        ops = self.neighbours(d, op)
        return [(o, q) for q in nexts for o in ops if self.fits(o, q)]

    def accepts(self, d: int, p: int) -> bool:
        return p in self.q.last if d == 0 else p in self.first_all

    # -- the memo
    def value(self, d: int, key: Key) -> int | None:
        memo = self.val[d]
        if key not in memo:
            self._compute(d, key)
        return memo[key]

    def _compute(self, d: int, root: Key) -> None:
        memo, best = self.val[d], self.best[d]
        pending: dict[Key, list[Key]] = {}
        stack = [root]
        while stack:
            key = stack[-1]
            if key in memo:
                stack.pop()
                continue
            kids = pending.get(key)
            if kids is None:
                kids = pending[key] = self.children(d, key)
                todo = [k for k in kids if k not in memo and k not in pending]
                if todo:
                    stack.extend(reversed(todo))
                    continue
            v: int | None = 0 if self.accepts(d, key[1]) else None
            b: Key | None = None
            for k in kids:
                if k in memo:
                    kv = memo[k]
                    if kv is None:
                        continue
                else:
                    kv = 0  # a state still being computed: a cycle; hope (the search checks)
                if v is None or kv + 1 > v:
                    v, b = kv + 1, k
            memo[key] = v
            best[key] = b
            del pending[key]
            stack.pop()

    def ranked_children(self, d: int, key: Key) -> list[Key]:
        """Children that can finish the branch, longest first (ties in children order)."""
        cache = self.ranked[d]
        r = cache.get(key)
        if r is None:
            memo = self.val[d]
            scored = []
            for i, k in enumerate(self.children(d, key)):
                v = memo[k] if k in memo else self.value(d, k)
                if v is not None:
                    scored.append((-v, i, k))
            scored.sort(key=lambda t: (t[0], t[1]))
            r = cache[key] = [k for _, _, k in scored]
        return r

    def root_options(self, s: Op) -> list[Key]:
        scored = []
        for i, p in enumerate(self.q.first[0]):
            if self.fits(s, p):
                v = self.value(0, (s, p))
                if v is not None:
                    scored.append((-v, i, (s, p)))
        scored.sort(key=lambda t: (t[0], t[1]))
        return [k for _, _, k in scored]

    # -- budget
    def step(self, n: int = 1) -> None:
        self.steps += n
        if self.steps > self.allowance:
            raise _OutOfSteps

    # -- the depth-first search of one branch part
    def ok(self, d: int, key: Key, used: Any, bound: dict[str, Op]) -> bool:
        op, p = key
        pos = self.q.positions[p]
        if pos.anchor is not None:
            w = bound.get(pos.anchor)
            if w is not None:
                return op is w
        if op in used:
            return False
        if self.acyclic:
            a = self.q.next_anchor[p] if d == 0 else self.q.prev_anchor[p]
            if a is not None:
                w = bound.get(a)
                if w is not None:
                    return self.topo[op] < self.topo[w] if d == 0 else self.topo[op] > self.topo[w]
        return True

    def next_child(self, d: int, f: _Frame, used: Any, bound: dict[str, Op], roots: list[Key] | None,
                   skip_marked: bool) -> Key | None:
        if f.key is None:
            assert roots is not None
            while f.i < len(roots):
                k = roots[f.i]
                f.i += 1
                if f.done is not None and k[0] in f.done:
                    continue
                if skip_marked and k in self.marked:  # the tail of a listed match: done through k's op
                    if f.done is None:
                        f.done = set()
                    f.done.add(k[0])
                    continue
                if self.ok(d, k, used, bound):
                    return k
            return None
        if f.stage == 0:
            f.stage = 1
            self.value(d, f.key)
            b = self.best[d].get(f.key)
            if b is not None and self.ok(d, b, used, bound):
                f.best = b
                return b
        ranked = self.ranked_children(d, f.key)
        while f.i < len(ranked):
            k = ranked[f.i]
            f.i += 1
            if k == f.best or (f.done is not None and k[0] in f.done):
                continue
            self.step()
            if self.ok(d, k, used, bound):
                return k
        return None

    def paths(self, d: int, used: Any, bound: dict[str, Op], *, fixed: Key | None = None,
              roots: list[Key] | None = None, skip_marked: bool = False) -> Iterator[list[Key]]:
        """Every way to walk one branch part, in preference order, as lists of states (``fixed`` first when
        given).  While a path is yielded its ops are in ``used`` and its anchors in ``bound``."""
        frames = [_Frame(fixed, self.completed)]
        while frames:
            f = frames[-1]
            child = self.next_child(d, f, used, bound, roots, skip_marked)
            if child is not None:
                self.step()
                nf = _Frame(child, self.completed)
                op, p = child
                anchor = self.q.positions[p].anchor
                if anchor is not None and anchor not in bound:
                    bound[anchor] = op
                    nf.bound = anchor
                if op not in used:
                    used.add(op)
                    nf.added = True
                frames.append(nf)
                continue
            frames.pop()
            key = f.key
            if key is not None and self.accepts(d, key[1]) and self.completed == f.entry:
                yield [fr.key for fr in frames if fr.key is not None] + [key]
            if frames and self.completed > f.entry:
                parent = frames[-1]
                if parent.done is None:
                    parent.done = set()
                parent.done.add(key[0])  # type: ignore[index]
            if f.added:
                used.discard(key[0])  # type: ignore[index]
            if f.bound is not None:
                del bound[f.bound]

    # -- whole matches
    def search(self, s: Op, used: Any, skip_marked: bool) -> Iterator[list[list[Key]]]:
        """Every match from start op ``s``, as one path per branch (forward order)."""
        bound: dict[str, Op] = {}
        roots = self.root_options(s)
        if not roots:
            return
        self.allowance = self.steps + self.limits.max_steps + (self.val[0][roots[0]] or 0) + 1
        per_branch: list[list[Key]] = [[] for _ in self.q.branches]
        plan = self.q.plan

        def join(i: int) -> Iterator[list[list[Key]]]:
            if i == len(plan):
                yield per_branch
                return
            b, pivot = plan[i]
            assert pivot is not None
            fixed = (bound[pivot], self.q.anchors[pivot][b])
            for right in self.paths(0, used, bound, fixed=fixed):
                for left in self.paths(1, used, bound, fixed=fixed):
                    per_branch[b] = left[:0:-1] + right
                    yield from join(i + 1)

        for root in self.paths(0, used, bound, roots=roots, skip_marked=skip_marked):
            per_branch[0] = root
            yield from join(1)

    def make_match(self, paths: list[list[Key]]) -> Match:
        ops: dict[str, Op] = {}
        n = 0
        positions = self.q.positions
        for path in paths:
            for op, p in path:
                a = positions[p].anchor
                if a is not None:
                    if a not in ops:
                        ops[a] = op
                else:
                    ops[f"_{n}"] = op
                    n += 1
        return Match(self.graph, ops)

    def first_match(self, s: Op, used: Any) -> Match | None:
        try:
            for paths in self.search(s, used, False):
                self.completed += 1
                return self.make_match(paths)
        except _OutOfSteps:
            self.cut_steps += 1
        return None

    # -- the two modes
    def all_matches(self) -> list[Match]:
        out: list[Match] = []
        cap = self.limits.max_matches_per_start
        total = 0
        for s in self.order:
            if total >= self.limits.max_total_ops:
                self.cut_total = True
                break
            seen: set[tuple[tuple[str, Op], ...]] = set()
            count = 0
            try:
                for paths in self.search(s, set(), self.acyclic):
                    self.completed += 1
                    m = self.make_match(paths)
                    sig = tuple(m.ops.items())
                    if sig in seen:
                        continue
                    if count:
                        self.step(len(m.ops))
                    if count >= cap:
                        self.cut_matches += 1
                        break
                    seen.add(sig)
                    count += 1
                    total += len(m.ops)
                    out.append(m)
                    if self.acyclic:
                        self.marked.update(paths[0])
                    if total >= self.limits.max_total_ops:
                        break
            except _OutOfSteps:
                self.cut_steps += 1
        return out

    def greedy_path(self, s: Op, taken: set[Op]) -> list[Key] | None:
        """The preferred path of a one-branch query from ``s``, or None if it meets a taken op."""
        key: Key | None = self.root_options(s)[0]
        path = []
        best = self.best[0]
        while key is not None:
            if key[0] in taken:
                return None
            path.append(key)
            key = best.get(key)
        return path

    def non_overlapping(self) -> list[Match]:
        lazy = self.q.single_branch and self.acyclic
        candidates: list[tuple[int, int, Op, Match | None]] = []
        for s in self.order:
            if lazy:
                roots = self.root_options(s)
                if roots:
                    candidates.append((1 + (self.val[0][roots[0]] or 0), self.topo[s], s, None))
            else:
                m = self.first_match(s, set())
                if m is not None:
                    candidates.append((len(m.all_ops), self.topo[s], s, m))
        candidates.sort(key=lambda c: (-c[0], c[1]))
        taken: set[Op] = set()
        chosen: list[tuple[int, Match]] = []
        refused: list[Op] = []
        for _size, t, s, m in candidates:
            if m is None:
                path = self.greedy_path(s, taken)
                if path is None:
                    refused.append(s)
                    continue
                m = self.make_match([path])
            elif any(op in taken for op in m.ops.values()):
                refused.append(s)
                continue
            chosen.append((t, m))
            taken.update(m.ops.values())
        for s in refused:
            if s in taken:
                continue
            m = self.first_match(s, _Overlay(taken))
            if m is not None:
                chosen.append((self.topo[s], m))
                taken.update(m.ops.values())
        chosen.sort(key=lambda c: c[0])
        return [m for _, m in chosen]

    def warn(self, stacklevel: int) -> None:
        parts = []
        if self.cut_steps:
            parts.append(f"the search from {self.cut_steps} start op(s) stopped after max_steps="
                         f"{self.limits.max_steps} steps")
        if self.cut_matches:
            parts.append(f"{self.cut_matches} start op(s) had more than max_matches_per_start="
                         f"{self.limits.max_matches_per_start} matches")
        if self.cut_total:
            parts.append(f"listing stopped once the matches held max_total_ops={self.limits.max_total_ops} ops")
        if parts:
            warnings.warn(QueryLimitWarning(f"query {self.q.text!r}: {'; '.join(parts)}; matches may be missing "
                                            "(pass limits=SearchLimits(...) to search further)"),
                          stacklevel=stacklevel + 1)


def run_query(graph: Graph, query: Query, ctx: MatchContext, schema: NamespaceSchema | None,
              functions: Mapping[str, Callable[..., Any]], limits: SearchLimits, non_overlapping: bool,
              stacklevel: int = 2) -> list[Match]:
    """The matches of ``query`` in ``graph`` (see the module docstring for what and in which order)."""
    run = _Run(graph, query, ctx, schema, functions, limits)
    with bulk_build():  # the memos are many small objects, none of them in a reference cycle
        out = run.non_overlapping() if non_overlapping else run.all_matches()
    run.warn(stacklevel + 1)
    return out
