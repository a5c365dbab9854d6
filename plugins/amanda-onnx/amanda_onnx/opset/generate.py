"""Rules generated from schema changes: the in-place updates of ops whose change is structurally harmless.

For the step from opset ``N`` to ``N + 1`` (:class:`~amanda_onnx.opset.diff.OpChange`) the upgrade rule moves the
op to the newer namespace, keeping its type, attributes and ports, when

* every attribute it loses is a hint without meaning (``policy.yaml``: ``droppable_attrs`` and
  ``upgrade.droppable``), dropped with ``keep_attrs``;
* every attribute it gains is optional; an attribute whose default changed is written out with the old default
  (captured from the older schema), one that became required must be present, one that had no default and got
  one must be listed as compatible;
* its ports keep their names and positions; ports it gains are optional; a type it no longer accepts must not be
  the type of its port (checked where the graph knows the type);
* the op is not listed as a semantic change (``upgrade.written``) and no written rule of the step matches it.

The downgrade rule (``N + 1`` to ``N``) is generated only where it is exact: attributes the older schema lacks
must be absent or at their default, inputs and outputs it lacks must be absent, widened types must be known and
accepted by the older schema, and doc-only bumps need an entry in ``downgrade.doc_only``.

Every rule is plain table data (the dict form of a YAML rule): matcher ``$op`` with attribute captures and
conditions, mapper ``$op`` with ``keep_attrs`` and captured values.  When no rule can be generated the reason is
returned instead, and the change is listed by :func:`amanda_onnx.opset.missing`.
"""

from __future__ import annotations

__all__ = ["Policy", "load_policy", "upgrade_rule", "downgrade_rule"]

from functools import lru_cache
from importlib import resources
from typing import Any

import attrs

from amanda_core.serialization.yamlio import safe_load

from .diff import OpChange, PortInfo


@attrs.frozen
class Policy:
    """The facts of ``policy.yaml`` (see there)."""

    droppable_attrs: frozenset[str]
    written: dict[tuple[int, str], str]
    droppable: dict[tuple[int, str], tuple[str, ...]]
    compatible_defaults: dict[tuple[int, str], tuple[str, ...]]
    inexact: dict[tuple[int, str], str]
    doc_only: dict[tuple[int, str], dict[str, Any]]
    neutral: dict[tuple[int, str], dict[str, Any]] = attrs.field(factory=dict)


def _key(text: str) -> tuple[int, str]:
    n, _, op = str(text).partition(" ")
    return int(n), op.strip()


@lru_cache(maxsize=1)
def load_policy() -> Policy:
    text = resources.files(__package__).joinpath("policy.yaml").read_text(encoding="utf-8")
    data = safe_load(text, "policy.yaml")
    up, down = data.get("upgrade") or {}, data.get("downgrade") or {}
    return Policy(
        droppable_attrs=frozenset(data.get("droppable_attrs") or {}),
        written={_key(k): str(v) for k, v in (up.get("written") or {}).items()},
        droppable={_key(k): tuple(v) for k, v in (up.get("droppable") or {}).items()},
        compatible_defaults={_key(k): tuple(v) for k, v in (up.get("compatible_defaults") or {}).items()},
        inexact={_key(k): str(v) for k, v in (down.get("inexact") or {}).items()},
        doc_only={_key(k): dict(v or {}) for k, v in (down.get("doc_only") or {}).items()},
        neutral={_key(k): dict(v or {}) for k, v in (down.get("neutral") or {}).items()},
    )


# --------------------------------------------------------------------------- expressions

_DTYPE = ("dt = lambda p: p.dtype if p.dtype is not None else "
          "((p.source.dtype if p.source is not None else None) if p.is_input else "
          "next((c.dtype for c in p.consumers if c.dtype is not None), None))\n"
          "name = lambda t: t if isinstance(t, str) else t.canonical\n")


def _slice(kind: str, i: int, port: PortInfo) -> str:
    ports = "op.inputs" if kind == "in" else "op.outputs"
    return f"{ports}[{i}:]" if port.variadic else f"{ports}[{i}:{i + 1}]"


def _lost_types_where(groups: list[tuple[list[str], list[str]]]) -> str:
    """Passes unless a port whose type is known has a type the newer schema dropped."""
    lines = [_DTYPE]
    checks = []
    for k, (slices, lost) in enumerate(groups):
        lines.append(f"seen{k} = [dt(p) for p in {' + '.join(slices)}]\n")
        checks.append(f"all(t is None or name(t) not in {tuple(sorted(lost))!r} for t in seen{k})")
    lines.append("return " + " and ".join(checks))
    return "${\n" + "".join(lines) + "\n}"


_CONSTANT_TYPE = (
    "value = op.attrs.get('value')\n"
    "numpy_names = {'float32': 'float', 'float64': 'double', 'bool': 'bool', 'float16': 'float16',\n"
    "               'int8': 'int8', 'int16': 'int16', 'int32': 'int32', 'int64': 'int64', 'uint8': 'uint8',\n"
    "               'uint16': 'uint16', 'uint32': 'uint32', 'uint64': 'uint64', 'bfloat16': 'bfloat16'}\n"
    "try:\n"
    "    kind = str(value.dtype) if value is not None else None\n"
    "except Exception:\n"
    "    kind = None  # an element type that needs a module the expression may not import: unknown\n"
    "given = ['tensor(' + numpy_names.get(kind, kind) + ')'] if kind is not None else []\n"
    "given += ['tensor(float)' for k in ('value_float', 'value_floats') if k in op.attrs]\n"
    "given += ['tensor(int64)' for k in ('value_int', 'value_ints') if k in op.attrs]\n"
    "given += ['tensor(string)' for k in ('value_string', 'value_strings') if k in op.attrs]\n"
)
"""A Constant's output type, read from the attribute that holds its value (the output port is rarely typed)."""


def _known_types_where(groups: list[tuple[list[str], list[str]]], constant: bool = False, guard: str = "") -> str:
    """Passes when ``guard`` holds and each group's type is known from at least one of its ports and the older
    schema accepts it (``constant``: the op is a Constant, whose value attribute gives the type)."""
    lines = [_DTYPE] + ([_CONSTANT_TYPE] if constant else [])
    checks = [f"({guard})"] if guard else []
    for k, (slices, allowed) in enumerate(groups):
        extra = " + given" if constant else ""
        lines.append(f"seen{k} = [t for t in [dt(p) for p in {' + '.join(slices)}]{extra} if t is not None]\n")
        checks.append(f"(len(seen{k}) > 0 and all(name(t) in {tuple(sorted(allowed))!r} for t in seen{k}))")
    lines.append("return " + " and ".join(checks))
    return "${\n" + "".join(lines) + "\n}"


# --------------------------------------------------------------------------- upgrade


def _same_port(a: PortInfo, b: PortInfo) -> bool:
    return a.name == b.name and a.variadic == b.variadic


def upgrade_rule(c: OpChange, policy: Policy) -> tuple[dict[str, Any] | None, str]:
    """The generated rule for upgrading ``c.op`` from opset ``c.step`` (or None and the reason there is none)."""
    key = (c.step, c.op)
    if key in policy.written:
        return None, f"semantic change ({policy.written[key]}): written rules only"
    match_attrs: dict[str, Any] = {}
    set_attrs: dict[str, Any] = {}
    drop = False
    droppable = policy.droppable_attrs | set(policy.droppable.get(key, ()))
    old = {a.name: a for a in c.old_attrs}
    new = {a.name: a for a in c.new_attrs}
    for name, a in old.items():
        b = new.get(name)
        if b is None:
            if name not in droppable:
                return None, f"attribute {name!r} removed"
            drop = True
            continue
        if a.type != b.type:
            return None, f"attribute {name!r} changed type from {a.type} to {b.type}"
        if b.required:
            if not a.required:
                if a.default is None:
                    match_attrs[name] = "${value is not None}"
                else:
                    match_attrs[name] = f"${name}"
                    set_attrs[name] = f"${name}"
            continue
        if a.required or _equal(a.default, b.default):
            continue
        if a.default is None:
            if name in policy.compatible_defaults.get(key, ()):
                continue
            return None, f"attribute {name!r} got a default ({b.default!r}) where it had none"
        match_attrs[name] = f"${name}"  # absent: the older schema's default, written out
        set_attrs[name] = f"${name}"
    for name, b in new.items():
        if name not in old and b.required:
            return None, f"new required attribute {name!r}"
    groups: list[tuple[list[str], list[str]]] = []
    for kind, olds, news in (("in", c.old_inputs, c.new_inputs), ("out", c.old_outputs, c.new_outputs)):
        if len(olds) > len(news):
            return None, f"{'input' if kind == 'in' else 'output'} {olds[len(news)].name!r} removed"
        for i, (p, q) in enumerate(zip(olds, news)):
            if not _same_port(p, q):
                return None, f"{'input' if kind == 'in' else 'output'} {p.name!r} became {q.name!r}" + (
                    " (variadic changed)" if p.name == q.name else "")
            if p.optional and not q.optional and not q.variadic:
                return None, f"optional {'input' if kind == 'in' else 'output'} {p.name!r} became required"
            lost = sorted(set(p.types) - set(q.types))
            if lost:
                groups.append(([_slice(kind, i, p)], lost))
        for q in news[len(olds):]:
            if not (q.optional or q.variadic):
                return None, f"new required {'input' if kind == 'in' else 'output'} {q.name!r}"
    src_op: dict[str, Any] = {"type": c.op}
    if match_attrs:
        src_op["attrs"] = match_attrs
    src: dict[str, Any] = {"ops": {"$op": src_op}}
    if groups:
        src["where"] = _lost_types_where(groups)
    dst_op: dict[str, Any] = {}
    if drop:
        dst_op["keep_attrs"] = sorted(new)
    if set_attrs:
        dst_op["attrs"] = set_attrs
    return {"src": src, "dst": {"ops": {"$op": dst_op}}}, ""


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return float(a) == float(b)
        except (TypeError, ValueError):
            return False
    return bool(a == b)


# --------------------------------------------------------------------------- downgrade


def _nonnegative(value_name: str) -> str:
    return (f"${{{value_name} is None or ({value_name} >= 0 if isinstance({value_name}, int) "
            f"else all(v >= 0 for v in {value_name}))}}")


def downgrade_rule(c: OpChange, policy: Policy) -> tuple[dict[str, Any] | None, str]:
    """The generated rule for downgrading ``c.op`` from opset ``c.step + 1`` to ``c.step`` (or None and why)."""
    key = (c.step, c.op)
    if key in policy.written:
        return None, f"semantic change ({policy.written[key]}): written rules only"
    if key in policy.inexact:
        return None, f"not exact: {policy.inexact[key]}"
    extra = policy.doc_only.get(key)
    if c.doc_only and extra is None:
        return None, "the newer version changed only its documentation (semantics may have widened)"
    if c.new_deprecated != c.old_deprecated and extra is None:
        return None, "deprecation changed"
    extra = extra or {}
    match_attrs: dict[str, Any] = {}
    set_attrs: dict[str, Any] = {}
    old = {a.name: a for a in c.old_attrs}  # opset N: the target
    new = {a.name: a for a in c.new_attrs}  # opset N+1: the source
    drop = False
    for name, b in new.items():
        a = old.get(name)
        if a is None:
            if name in policy.droppable_attrs:
                drop = True
                continue
            if b.required:
                return None, f"attribute {name!r} is required in the newer opset and unknown in the older"
            if b.default is not None:
                match_attrs[name] = b.default
            elif name in policy.neutral.get(key, {}):  # a value that means what leaving it out means
                v = policy.neutral[key][name]
                match_attrs[name] = f"${{value is None or all(x == {v!r} for x in value)}}"
            else:
                match_attrs[name] = "${value is None}"
            drop = True
            continue
        if a.type != b.type:
            return None, f"attribute {name!r} changed type from {a.type} to {b.type}"
        if b.required:
            continue  # always present: kept
        if b.default is None:
            if not a.required and a.default is None:
                continue
            match_attrs[name] = "${value is not None}"  # unspecified in the newer opset: only when given
            continue
        if a.required or not _equal(a.default, b.default):
            match_attrs[name] = f"${name}"
            set_attrs[name] = f"${name}"
    for name in old:
        if name not in new and name not in policy.droppable_attrs:
            return None, f"attribute {name!r} of the older opset is gone in the newer"
    for name in extra.get("nonnegative", ()):
        match_attrs[name] = _nonnegative("value")
    for name, values in (extra.get("not_values") or {}).items():
        match_attrs[name] = f"${{value not in {tuple(values)!r}}}"
    conditions: list[str] = []
    # ports bound to one type constraint of the newer schema share their type: a group is checked as a whole
    groups: dict[str, tuple[list[str], set[str]]] = {}
    widened: set[str] = set()
    for kind, olds, news in (("in", c.old_inputs, c.new_inputs), ("out", c.old_outputs, c.new_outputs)):
        ports = "op.inputs" if kind == "in" else "op.outputs"
        if len(olds) > len(news):
            return None, f"{'input' if kind == 'in' else 'output'} {olds[len(news)].name!r} of the older opset is gone"
        for i, (p, q) in enumerate(zip(olds, news)):
            if not _same_port(p, q):
                return None, f"{'input' if kind == 'in' else 'output'} {q.name!r} was {p.name!r}"
            if q.optional and not p.optional and not p.variadic:
                conditions.append(f"len({ports}) > {i} and " + (
                    f"{ports}[{i}].fed" if kind == "in" else f"len({ports}[{i}].consumers) > 0"))
            group = q.constraint or f"{kind}{i}"
            slices, allowed = groups.setdefault(group, ([], set(p.types)))
            slices.append(_slice(kind, i, q))
            allowed &= set(p.types)
            if set(q.types) - set(p.types):
                widened.add(group)
        conditions.extend(f"len({ports}) <= {j}" for j in range(len(olds), len(news)))
    typed = [(slices, sorted(allowed)) for g, (slices, allowed) in groups.items() if g in widened]
    src_op: dict[str, Any] = {"type": c.op}
    if match_attrs:
        src_op["attrs"] = match_attrs
    src: dict[str, Any] = {"ops": {"$op": src_op}}
    guard = " and ".join(f"({x})" for x in conditions)
    if typed:
        src["where"] = _known_types_where(typed, constant=c.op == "Constant", guard=guard)
    elif guard:
        src["where"] = "${" + guard + "}"
    dst_op: dict[str, Any] = {}
    if drop:
        dst_op["keep_attrs"] = sorted(old)
    if set_attrs:
        dst_op["attrs"] = set_attrs
    return {"src": src, "dst": {"ops": {"$op": dst_op}}}, ""


# --------------------------------------------------------------------------- rules written per arity


def scan_batch_rules(max_inputs: int = 8, max_outputs: int = 8) -> dict[str, Any]:
    """Scan 8 -> 9, one rule per number of inputs and outputs (a mapper names each port it rewires).

    Scan-8 runs its body once per batch element (the first axis of every input and output), Scan-9 has no batch
    axis.  With one batch element and no ``sequence_lens`` the two agree once the batch axis is taken off the
    inputs (Squeeze) and put back on the outputs (Unsqueeze); ``directions`` becomes ``scan_input_directions``.
    The batch size must be known from the graph to be 1; otherwise the op is not converted."""
    rules: dict[str, Any] = {}
    for n in range(1, max_inputs + 1):
        for m in range(1, max_outputs + 1):
            ins = [f"$i{k}" for k in range(n)]
            outs = [f"$o{k}" for k in range(m)]
            where = (
                "${\n"
                "dt = lambda p: (p.dtype if p.dtype is not None\n"
                "                else (p.source.dtype if p.source is not None else None))\n"
                f"if len(scan.inputs) != {n + 1} or len(scan.outputs) != {m} or seq.fed:\n"
                "    return False\n"
                "types = [dt(p) for p in scan.inputs[1:]]\n"
                "return all(t is not None and not isinstance(t, str) and t.rank is not None and t.rank > 0\n"
                "           and t.shape[0] == 1 for t in types)\n"
                "}"
            )
            ops: dict[str, Any] = {
                "$scan9": {"type": "Scan", "name": "${scan.name}",
                           "attrs": {"body": "$body", "num_scan_inputs": "$count",
                                     "scan_input_directions": "$dirs"}},
            }
            edges = []
            for k in range(n):
                ops[f"$batch_in{k}"] = {"type": "Squeeze", "attrs": {"axes": [0]}}
                edges.append(f"$scan.$i{k} -> $batch_in{k}.data")
                edges.append(f"$batch_in{k}.squeezed -> $scan9.initial_state_and_scan_inputs_{k}")
            for k in range(m):
                ops[f"$batch_out{k}"] = {"type": "Unsqueeze", "attrs": {"axes": [0]}}
                edges.append(f"$scan9.final_state_and_scan_outputs_{k} -> $batch_out{k}.data")
                edges.append(f"$batch_out{k}.expanded -> $scan.$o{k}")
            rules[f"scan_batch_of_one_{n}_in_{m}_out"] = {
                "src": {
                    "ops": {"$scan": {"type": "Scan",
                                      "attrs": {"body": "$body", "num_scan_inputs": "$count", "directions": "$dirs"},
                                      "input_ports": ["$seq", *ins], "output_ports": outs}},
                    "where": where,
                },
                "dst": {"ops": ops, "edges": edges},
            }
    return rules


EXPANDED: dict[tuple[str, int], Any] = {("upgrade", 8): scan_batch_rules}
"""Written rules built per arity, by direction and step (merged into that step's written table)."""
