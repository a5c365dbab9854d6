"""``amanda convert ... --explain-rule NAME``: why a rule did or did not match, candidate by candidate.

For each rule named (``NAME`` or ``TABLE:NAME``; repeatable) the conversion traces every anchor op the rule tried
(:func:`amanda_core.mapping.engine.explaining_rules`) and this prints one line per candidate: rewritten, matched
but declined by containment (an op it would remove is read outside the match), or not matched with the first
reason that stopped it (the failed check that got furthest: type, attribute, constant input, port, containment,
edge, commutative order, expression, ``where`` ...).  A rule the conversion never ran says why (its table was not
in the chain, or tags left it out); a name no table has is an error naming the rules with similar names.
"""

from __future__ import annotations

__all__ = ["add_explain_rule_option", "explain_rules_of", "print_rule_explanations", "tracing_rules"]

import argparse
import difflib
import sys
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Sequence, TextIO

from ..errors import AmandaError


def add_explain_rule_option(p: argparse.ArgumentParser) -> None:
    """Register ``--explain-rule NAME`` on the ``convert`` parser."""
    p.add_argument("--explain-rule", action="append", metavar="NAME",
                   help="print each op the rule NAME (or TABLE:NAME) tried and why it did not match (repeatable)")


def explain_rules_of(args: argparse.Namespace) -> list[str]:
    """The rule names given with ``--explain-rule`` (none when the option is absent)."""
    return list(getattr(args, "explain_rule", None) or ())


def tracing_rules(args: argparse.Namespace) -> AbstractContextManager[Any]:
    """The block in which the conversion traces the rules named with ``--explain-rule`` (a no-op without any)."""
    names = explain_rules_of(args)
    if not names:
        return nullcontext()
    from ..mapping.engine import explaining_rules

    return explaining_rules(names)


def _matches(name: str, table: str, rule: str) -> bool:
    return name == rule or name == f"{table}:{rule}"


def _known(name: str, tables: Sequence[Any]) -> list[tuple[Any, Any]]:
    """The (table, rule) pairs ``name`` means."""
    return [(t, r) for t in tables for r in t.rules.values() if _matches(name, t.name, r.name)]


def _anchor_text(rule: Any) -> str:
    from ..mapping.match import _plan

    pattern = rule.src
    if not pattern.ops:
        return "its anchor"
    key = _plan(pattern)[0][0]
    t = pattern.ops[key].type
    if t is None or t.kind != "literal":
        return f"{key} (any type)"
    types = t.value if isinstance(t.value, list) else [t.value]
    return f"{key} ({' or '.join(map(str, types))})"


def print_rule_explanations(result: Any, args: argparse.Namespace, tables: Sequence[Any] = (),
                            out: TextIO | None = None) -> None:
    """Print, for each ``--explain-rule`` name, what became of each candidate of the rule in ``result`` (a
    :class:`~amanda_core.mapping.planner.Conversion`); raises AmandaError for a name no table has."""
    names = explain_rules_of(args)
    if not names:
        return
    out = out or sys.stdout
    for name in names:
        known = _known(name, tables)
        if not known:
            every = sorted({r.name for t in tables for r in t.rules.values()})
            close = difflib.get_close_matches(name.rpartition(":")[2], every, n=5, cutoff=0.6)
            hint = f" (similar: {', '.join(close)})" if close else ""
            raise AmandaError(f"--explain-rule {name}: no table of this conversion has a rule {name!r}{hint}; "
                              "nothing was written")
        found = False
        for report in result.reports:
            for rr in report.rules:
                if rr.candidates is None or not _matches(name, rr.table, rr.rule):
                    continue
                found = True
                _print_rule(report, rr, tables, out)
        if found:
            continue
        ran = {report.table for report in result.reports}
        for table, rule in known:
            if table.name in ran:
                why = "its tags left it out of this conversion" + (
                    f" (tags: {', '.join(rule.tags)}; --tag or --allow-approximate select tagged rules)"
                    if rule.tags else "")
            else:
                chain = " -> ".join(f"{r.table}" for r in result.reports) or "no table"
                why = f"its table was not in the conversion's chain ({chain})"
            print(f"rule {table.name}:{rule.name}: not run: {why}", file=out)


def _print_rule(report: Any, rr: Any, tables: Sequence[Any], out: TextIO) -> None:
    table = next((t for t in tables if t.name == rr.table), None)
    rule = table.rules.get(rr.rule) if table is not None else None
    head = f"rule {rr.table}:{rr.rule} ({report.src} -> {report.dst})"
    if rule is not None and rule.src.query is not None:
        print(f"{head}: a query rule ({rule.src.query!r}); {rr.matches} match(es); reasons are given for "
              "rules with ops and edges only", file=out)
        return
    cands = rr.candidates or []
    if not cands:
        anchor = _anchor_text(rule) if rule is not None else "its anchor"
        print(f"{head}: no candidate: no op of the graph could be {anchor} when the rule ran", file=out)
        return
    done = sum(1 for c in cands if c.outcome == "rewritten")
    print(f"{head}: {len(cands)} candidate(s), {done} rewritten", file=out)
    for c in cands:
        where = "" if c.graph == "main" else f" in {c.graph}"
        if c.outcome == "no match":
            print(f"  {c.op} ({c.type}){where}: no match: {c.reason}", file=out)
        elif c.outcome == "declined":
            print(f"  {c.op} ({c.type}){where}: matched, but containment declined it: an op the rewrite removes "
                  "is read outside the match and the mapper does not say where its readers go", file=out)
        else:
            print(f"  {c.op} ({c.type}){where}: rewritten", file=out)
