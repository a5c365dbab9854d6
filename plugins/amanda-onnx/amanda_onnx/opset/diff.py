"""What changed in an op's schema from one opset of the default ONNX domain to the next.

The comparison is structural: formal inputs and outputs (name, optional, variadic, the types each accepts),
attributes (type, default, required), and whether anything but the documentation and ``since_version`` moved.
It reads the namespace schemas of :mod:`amanda_onnx.schemas`, so with a warm schema cache it imports no
``onnx``; the result is cached as JSON per onnx release (:func:`step_changes`).

Invariants:

* a change is recorded for an op exactly when its op schema differs between opsets ``N`` and ``N + 1``
  (the condition under which ``carry: unchanged`` does not move it), and the op exists in both;
* ports are compared by position, the way ONNX nodes list them; a port's accepted types are the allowed types
  of its type constraint, or the one concrete type it names.
"""

from __future__ import annotations

__all__ = ["DIFF_VERSION", "PortInfo", "AttrInfo", "OpChange", "compare", "step_changes", "changes_at",
           "default_opsets"]

from typing import Any

import attrs

from amanda_core.namespace import NO_DEFAULT, OpSchema, PortSchema
from amanda_core.namespace.cache import cached_json

from ..schemas import DEFAULT_DOMAIN, namespace_providers, onnx_version

DIFF_VERSION = "1"
"""Bumped whenever the cached form of the changes changes."""


@attrs.frozen
class PortInfo:
    """One formal input or output: name, optional/variadic flags, the types it accepts (sorted), and the type
    constraint it is bound to (``T``; empty for a concrete type)."""

    name: str
    optional: bool
    variadic: bool
    types: tuple[str, ...]
    constraint: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "optional": self.optional, "variadic": self.variadic, "types": list(self.types),
                "constraint": self.constraint}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PortInfo:
        return cls(d["name"], d["optional"], d["variadic"], tuple(d["types"]), d.get("constraint", ""))


@attrs.frozen
class AttrInfo:
    """One attribute: its ``onnx.*`` type, whether it is required, and its default (None: optional without a
    default value)."""

    name: str
    type: str
    required: bool
    default: Any = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "required": self.required, "default": self.default}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> AttrInfo:
        return cls(d["name"], d["type"], d["required"], d["default"])


@attrs.frozen
class OpChange:
    """The change of op ``op`` from opset ``step`` to ``step + 1``: both forms of its ports and attributes."""

    op: str
    step: int
    old_inputs: tuple[PortInfo, ...]
    new_inputs: tuple[PortInfo, ...]
    old_outputs: tuple[PortInfo, ...]
    new_outputs: tuple[PortInfo, ...]
    old_attrs: tuple[AttrInfo, ...]
    new_attrs: tuple[AttrInfo, ...]
    old_deprecated: bool = False
    new_deprecated: bool = False

    @property
    def doc_only(self) -> bool:
        """Nothing but the documentation and the version moved."""
        return (self.old_inputs == self.new_inputs and self.old_outputs == self.new_outputs
                and self.old_attrs == self.new_attrs and self.old_deprecated == self.new_deprecated)

    def old_attr(self, name: str) -> AttrInfo | None:
        return next((a for a in self.old_attrs if a.name == name), None)

    def new_attr(self, name: str) -> AttrInfo | None:
        return next((a for a in self.new_attrs if a.name == name), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "op": self.op, "step": self.step,
            "old_inputs": [p.to_json() for p in self.old_inputs], "new_inputs": [p.to_json() for p in self.new_inputs],
            "old_outputs": [p.to_json() for p in self.old_outputs],
            "new_outputs": [p.to_json() for p in self.new_outputs],
            "old_attrs": [a.to_json() for a in self.old_attrs], "new_attrs": [a.to_json() for a in self.new_attrs],
            "old_deprecated": self.old_deprecated, "new_deprecated": self.new_deprecated,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> OpChange:
        return cls(
            d["op"], d["step"],
            tuple(PortInfo.from_json(p) for p in d["old_inputs"]),
            tuple(PortInfo.from_json(p) for p in d["new_inputs"]),
            tuple(PortInfo.from_json(p) for p in d["old_outputs"]),
            tuple(PortInfo.from_json(p) for p in d["new_outputs"]),
            tuple(AttrInfo.from_json(a) for a in d["old_attrs"]), tuple(AttrInfo.from_json(a) for a in d["new_attrs"]),
            d["old_deprecated"], d["new_deprecated"],
        )


def _port(p: PortSchema, schema: OpSchema) -> PortInfo:
    allowed = schema.type_constraints.get(p.type or "")
    types = tuple(sorted(allowed)) if allowed is not None else ((p.type,) if p.type else ())
    return PortInfo(p.name, p.optional, p.variadic, types, p.type if allowed is not None and p.type else "")


def _attr(a: Any) -> AttrInfo:
    required = a.default is NO_DEFAULT
    default = None if required else a.default
    if isinstance(default, tuple):
        default = list(default)
    return AttrInfo(a.name, a.type, required, default)


def compare(old: OpSchema, new: OpSchema, step: int) -> OpChange:
    """The structural change from ``old`` (opset ``step``) to ``new`` (opset ``step + 1``)."""
    return OpChange(
        op=new.type, step=step,
        old_inputs=tuple(_port(p, old) for p in old.input_ports),
        new_inputs=tuple(_port(p, new) for p in new.input_ports),
        old_outputs=tuple(_port(p, old) for p in old.output_ports),
        new_outputs=tuple(_port(p, new) for p in new.output_ports),
        old_attrs=tuple(sorted((_attr(a) for a in old.attrs), key=lambda a: a.name)),
        new_attrs=tuple(sorted((_attr(a) for a in new.attrs), key=lambda a: a.name)),
        old_deprecated=old.deprecated, new_deprecated=new.deprecated,
    )


def default_opsets() -> tuple[int, int]:
    """First and newest opset of the default domain the installed onnx knows (from the cached index)."""
    for p in namespace_providers():
        if p.domain == DEFAULT_DOMAIN:
            return p.first, p.last
    raise LookupError("the installed onnx has no default-domain opsets")


def _build() -> dict[str, Any]:
    provider = next(p for p in namespace_providers() if p.domain == DEFAULT_DOMAIN)
    steps: dict[str, list[dict[str, Any]]] = {}
    for n in range(provider.first, provider.last):
        a, b = provider.schema(n), provider.schema(n + 1)
        changes = []
        for s in a:
            t = b.get(s.type)
            if t is None or s == t or s.meta.get("structural"):
                continue
            changes.append(compare(s, t, n).to_json())
        steps[str(n)] = changes
    return {"onnx_version": onnx_version(), "diff_version": DIFF_VERSION, "steps": steps}


_memo: dict[str, dict[int, list[OpChange]]] = {}
_raw: dict[str, dict[str, list[dict[str, Any]]]] = {}


def _memo_key() -> tuple[str, str]:
    from amanda_core.namespace.cache import cache_dir

    key = f"onnx-opset-diff-onnx{onnx_version()}-gen{DIFF_VERSION}"
    return key, f"{key}@{cache_dir()}"


def _steps_json() -> tuple[str, dict[str, list[dict[str, Any]]]]:
    key, memo_key = _memo_key()
    steps = _raw.get(memo_key)
    if steps is None:
        steps = _raw[memo_key] = cached_json(key, _build)["steps"]
    return memo_key, steps


def step_changes() -> dict[int, list[OpChange]]:
    """Every op change of the default domain, by opset ``N`` (the step ``N -> N + 1``), ops in name order.

    Cached as JSON per onnx release and :data:`DIFF_VERSION`; memoised per process."""
    memo_key, steps = _steps_json()
    found = _memo.get(memo_key)
    if found is None:
        found = {int(n): [OpChange.from_json(c) for c in changes] for n, changes in steps.items()}
        _memo[memo_key] = found
    return found


def changes_at(n: int) -> list[OpChange]:
    """The op changes of the step ``N -> N + 1`` alone (what :func:`step_changes` gives for ``n``), without
    reading the others' (a conversion builds the steps it takes)."""
    memo_key, steps = _steps_json()
    found = _memo.get(memo_key)
    if found is not None:
        return found.get(n, [])
    return [OpChange.from_json(c) for c in steps.get(str(n), [])]
