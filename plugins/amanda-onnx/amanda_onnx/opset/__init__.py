"""ONNX opset conversion as mapping tables: ``amanda/onnx/N`` <-> ``amanda/onnx/N+1`` for every opset of the
default domain the installed onnx knows.

Each step is one table with ``carry: unchanged``, so an op whose schema is the same in both opsets moves without a
rule.  Its rules come from two places:

* **written rules**, ``rules/upgrade/<N>.yaml`` (``N -> N+1``) and ``rules/downgrade/<N>.yaml`` (``N+1 -> N``):
  YAML tables for the changes that move meaning (an attribute that became an input, the Softmax axis, legacy
  broadcasting, BatchNormalization's outputs, ...);
* **generated rules** (:mod:`.generate`), built from the structural difference of the two schemas
  (:mod:`.diff`) for every other op whose schema changed: in-place updates (types widened, optional attributes
  or inputs added) with the conditions that keep them exact, steered by the facts in ``policy.yaml``.

An op whose schema changed and that no rule converts stays in the source namespace, and the planner's conversion
fails naming it; :func:`missing` lists those changes with the reason.

``tables()`` is what the plugin registers: one lazy table per step (:meth:`MappingTable.lazy`), whose header
(name, namespaces) is all the planner reads, and whose rules are built the first time a conversion applies the
step (or a listing such as ``amanda tables`` reads them), once per process.  A conversion from opset 13 to 21
builds the 8 steps it takes, not the 54 there are.  Building imports no ``onnx`` once the schema cache is warm:
the schema differences are cached as JSON per onnx release.
"""

from __future__ import annotations

__all__ = ["tables", "upgrade_tables", "downgrade_tables", "missing", "newest_opset", "step_table", "RULES"]

import functools
import json
import threading
from importlib import resources
from typing import Any

from amanda_core.mapping import MappingTable, TableError, load_table, table_from_dict

from ..schemas import FAMILY
from .diff import OpChange, changes_at, default_opsets, step_changes
from .generate import EXPANDED, downgrade_rule, load_policy, upgrade_rule

RULES = resources.files(__package__).joinpath("rules")
"""Where the written rules live: ``upgrade/<N>.yaml`` and ``downgrade/<N>.yaml``."""

_lock = threading.Lock()
_built: dict[str, list[MappingTable]] = {}


def newest_opset() -> int:
    """The newest opset of the default domain the installed onnx knows."""
    return default_opsets()[1]


def _namespace(n: int) -> str:
    return f"{FAMILY}/{n}"


def _written(direction: str, n: int, src: str, dst: str) -> MappingTable | None:
    f = RULES.joinpath(direction, f"{n}.yaml")
    if not f.is_file():
        return None
    text = f.read_text(encoding="utf-8")
    table = load_table(text, filename=f"amanda_onnx/opset/rules/{direction}/{n}.yaml", trusted=True)
    if (table.src, table.dst, table.carry) != (src, dst, "unchanged"):
        raise TableError(f"the written {direction} rules for opset {n} must say src: {src}, dst: {dst}, "
                         f"carry: unchanged (they say {table.src}, {table.dst}, {table.carry})",
                         table=table.name)
    return table


def _covered(table: MappingTable) -> set[str]:
    """Op types the table's written rules convert: the literal types of single-op matchers whose mapper keeps or
    rebuilds the op.  An op a rule only reads (the Constant feeding an ``axes`` input) or removes (a Constant
    nobody reads any more) still gets its generated rule, which runs after the written ones."""
    out: set[str] = set()
    for rule in table.rules.values():
        if len(rule.src.ops) != 1 or rule.dst.transform == "remove":
            continue
        for pat in rule.src.ops.values():
            if pat.type is not None and pat.type.kind == "literal":
                value = pat.type.value
                out.update(value if isinstance(value, list) else [value])
    return out


def _header(direction: str, n: int) -> tuple[str, str, str]:
    """``(name, src, dst)`` of the step table."""
    if direction not in ("upgrade", "downgrade"):
        raise ValueError(f"direction is 'upgrade' or 'downgrade', not {direction!r}")
    if direction == "upgrade":
        return f"onnx-opset-{n}-to-{n + 1}", _namespace(n), _namespace(n + 1)
    return f"onnx-opset-{n + 1}-to-{n}", _namespace(n + 1), _namespace(n)


def step_table(direction: str, n: int, changes: list[OpChange] | None = None) -> MappingTable:
    """The table of one step, built now: ``direction`` is ``"upgrade"`` (opset ``n`` to ``n + 1``) or
    ``"downgrade"`` (``n + 1`` to ``n``): written rules first, then generated ones for the changed ops they do not
    cover."""
    name, src, dst = _header(direction, n)
    up = direction == "upgrade"
    table = _written(direction, n, src, dst)
    if table is None:
        table = table_from_dict({"name": name, "src": src, "dst": dst, "carry": "unchanged", "rules": {},
                                 "description": f"ONNX opset {src.rsplit('/', 1)[1]} to {dst.rsplit('/', 1)[1]}"})
    elif table.name != name:
        raise TableError(f"the written {direction} rules for opset {n} must be named {name!r}", table=table.name)
    expand = EXPANDED.get((direction, n))
    if expand is not None:
        _merge(table, expand())
    if changes is None:
        changes = changes_at(n)
    covered = _covered(table)
    policy = load_policy()
    generated: dict[str, Any] = {}
    for c in changes:
        if c.op in covered:
            continue
        rule, _ = (upgrade_rule if up else downgrade_rule)(c, policy)
        if rule is not None:
            generated[c.op] = rule
    if generated:
        _merge(table, _grouped(generated))
    return table


def _grouped(rules: dict[str, Any]) -> dict[str, Any]:
    """Rules that differ only in the op type they match become one rule matching the list of those types (so a
    step whose changes are mostly widened types has a handful of rules, not one per op)."""
    groups: dict[str, list[str]] = {}
    for op, rule in rules.items():
        src_op = dict(rule["src"]["ops"]["$op"])
        src_op.pop("type")
        shape = json.dumps({"src": {**rule["src"], "ops": {"$op": src_op}}, "dst": rule["dst"]}, sort_keys=True)
        groups.setdefault(shape, []).append(op)
    out: dict[str, Any] = {}
    for shape, ops in groups.items():
        rule = json.loads(shape)
        rule["src"]["ops"]["$op"] = {"type": ops[0] if len(ops) == 1 else sorted(ops), **rule["src"]["ops"]["$op"]}
        if len(ops) == 1:
            name = ops[0]
        elif not rule["dst"]["ops"]["$op"] and "where" not in rule["src"] and len(rule["src"]["ops"]["$op"]) == 1:
            name = "same_meaning"
        else:
            name = f"{sorted(ops)[0]}_and_{len(ops) - 1}_more"
        out[name] = rule
    return out


def _merge(table: MappingTable, rules: dict[str, Any]) -> None:
    """Add rules (their dict form) after the table's own."""
    clash = sorted(set(rules) & set(table.rules))
    if clash:
        raise TableError(f"rules {', '.join(clash)} are defined twice", table=table.name)
    extra = table_from_dict({"name": table.name, "src": table.src, "dst": table.dst, "carry": table.carry,
                             "rules": rules})
    table.rules.update(extra.rules)
    raw_rules = dict(table.raw.get("rules") or {})
    raw_rules.update(rules)
    table.raw["rules"] = raw_rules


def _key() -> str:
    from amanda_core.namespace.cache import cache_dir

    from ..schemas import onnx_version

    return f"{onnx_version()}@{cache_dir()}"


def _lazy_step(direction: str, n: int) -> MappingTable:
    """The step table as registered: its header now, its rules (:func:`step_table`) on first use."""
    name, src, dst = _header(direction, n)
    return MappingTable.lazy(name, src, dst, functools.partial(step_table, direction, n), carry="unchanged")


def _all() -> list[MappingTable]:
    key = _key()
    with _lock:
        found = _built.get(key)
        if found is None:
            first, last = default_opsets()
            ups = [_lazy_step("upgrade", n) for n in range(first, last)]
            downs = [_lazy_step("downgrade", n) for n in range(first, last)]
            found = _built[key] = ups + downs
        return list(found)


def upgrade_tables() -> list[MappingTable]:
    """``amanda/onnx/N -> N+1`` for every opset ``N`` below the newest, in order."""
    return [t for t in _all() if int(t.dst.rsplit("/", 1)[1]) > int(t.src.rsplit("/", 1)[1])]


def downgrade_tables() -> list[MappingTable]:
    """``amanda/onnx/N+1 -> N`` for every opset ``N`` below the newest, in order."""
    return [t for t in _all() if int(t.dst.rsplit("/", 1)[1]) < int(t.src.rsplit("/", 1)[1])]


def tables() -> list[MappingTable]:
    """Every opset table (upgrades, then downgrades): what the plugin registers with Amanda.  Their rules are
    built when first read (:attr:`MappingTable.built` says whether they are)."""
    return _all()


def missing(direction: str = "upgrade") -> list[tuple[int, str, str]]:
    """Changed ops that no rule of their step converts: ``(N, op, reason)`` for the step ``N -> N+1``
    (``direction="upgrade"``) or ``N+1 -> N`` (``"downgrade"``)."""
    policy = load_policy()
    out = []
    by_step = {int(t.src.rsplit("/", 1)[1]) if direction == "upgrade" else int(t.dst.rsplit("/", 1)[1]): t
               for t in (upgrade_tables() if direction == "upgrade" else downgrade_tables())}
    for n, changes in sorted(step_changes().items()):
        covered = _covered(by_step[n])
        for c in changes:
            if c.op in covered:
                continue
            rule, reason = (upgrade_rule if direction == "upgrade" else downgrade_rule)(c, policy)
            if rule is None:
                out.append((n, c.op, reason))
    return out
