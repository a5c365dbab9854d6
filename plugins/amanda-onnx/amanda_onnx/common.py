"""What the importer and exporter share: namespaces of ONNX domains, op plans (port names and attribute kinds
from the op schemas), attribute kinds of Python values.  Imports no ``onnx``."""

from __future__ import annotations

__all__ = [
    "KIND_NAMES",
    "KIND_NUMBERS",
    "PLURAL",
    "Plan",
    "PlanCache",
    "domain_component",
    "infer_kind",
    "is_model_proto",
    "namespace_domain",
    "namespace_for",
]

import re
import sys
from typing import Any

import numpy as np

from amanda_core.errors import NamespaceError, SchemaError
from amanda_core.ir import Graph, Tensor
from amanda_core.namespace import NamespaceSchema
from amanda_core.namespace.names import parse_namespace

from .schemas import DEFAULT_DOMAIN, FAMILY, namespace_providers
from .typesystem import SparseTensor

KIND_NUMBERS: dict[str, int] = {
    "FLOAT": 1, "INT": 2, "STRING": 3, "TENSOR": 4, "GRAPH": 5, "FLOATS": 6, "INTS": 7, "STRINGS": 8,
    "TENSORS": 9, "GRAPHS": 10, "SPARSE_TENSOR": 11, "SPARSE_TENSORS": 12, "TYPE_PROTO": 13, "TYPE_PROTOS": 14,
}
"""ONNX ``AttributeProto.AttributeType`` numbers (fixed by onnx.proto)."""
KIND_NAMES: dict[int, str] = {v: k for k, v in KIND_NUMBERS.items()}
PLURAL = {"FLOAT": "FLOATS", "INT": "INTS", "STRING": "STRINGS", "TENSOR": "TENSORS", "GRAPH": "GRAPHS",
          "SPARSE_TENSOR": "SPARSE_TENSORS", "TYPE_PROTO": "TYPE_PROTOS"}

def is_model_proto(source: Any) -> bool:
    """True for an ``onnx.ModelProto``, without importing onnx (if it is not imported, nothing is one)."""
    mod = sys.modules.get("onnx")
    return mod is not None and isinstance(source, mod.ModelProto)


_COMPONENT_BAD = re.compile(r"[^A-Za-z0-9_.+\-]")


def domain_component(domain: str) -> str:
    """The namespace path component for an ONNX domain (characters a namespace name cannot hold become ``_``;
    the importer then records the exact domain in the op's meta)."""
    comp = _COMPONENT_BAD.sub("_", domain)
    if not comp or comp[0].isdigit():
        comp = "_" + comp
    return comp


def namespace_for(domain: str, opsets: dict[str, int]) -> str:
    """``amanda/onnx/<v>`` for the default domain, ``amanda/onnx/<domain>/<v>`` for another (no version when
    the model imports no opset of that domain)."""
    if domain in ("", DEFAULT_DOMAIN):
        v = opsets.get("")
        return f"{FAMILY}/{v}" if v is not None else FAMILY
    comp = domain_component(domain)
    v = opsets.get(domain)
    return f"{FAMILY}/{comp}/{v}" if v is not None else f"{FAMILY}/{comp}"


_NS_CACHE: dict[str, tuple[str, int | None]] = {}


def namespace_domain(namespace: str) -> tuple[str, int | None]:
    """``(domain, opset)`` of an ONNX namespace (domain ``""`` for the default one; opset None when the name
    has no version); NamespaceError for a namespace outside ``amanda/onnx``."""
    found = _NS_CACHE.get(namespace)
    if found is not None:
        return found
    n = parse_namespace(namespace)
    family = n.family
    if family == FAMILY:
        domain = ""
    elif family.startswith(FAMILY + "/"):
        domain = family[len(FAMILY) + 1:]
        if domain == DEFAULT_DOMAIN:
            domain = ""
    else:
        raise NamespaceError(f"{namespace} is not an ONNX namespace (amanda/onnx/...)")
    version: int | None = None
    if n.version is not None:
        try:
            version = int(n.version)
        except ValueError:
            raise NamespaceError(f"{namespace}: an ONNX opset version is a whole number") from None
    _NS_CACHE[namespace] = (domain, version)
    return domain, version


def infer_kind(value: Any) -> str | None:
    """The attribute kind the exporter gives a value when no schema says (None: it cannot tell)."""
    if isinstance(value, bool):
        return "INT"
    if isinstance(value, int):
        return "INT"
    if isinstance(value, float):
        return "FLOAT"
    if isinstance(value, (str, bytes)):
        return "STRING"
    if isinstance(value, (np.ndarray, Tensor)):
        return "TENSOR"
    if isinstance(value, Graph):
        return "GRAPH"
    if isinstance(value, SparseTensor):
        return "SPARSE_TENSOR"
    if isinstance(value, (np.integer,)):
        return "INT"
    if isinstance(value, (np.floating,)):
        return "FLOAT"
    if isinstance(value, (list, tuple)) and value:
        first = infer_kind(value[0])
        return PLURAL.get(first) if first is not None else None
    return None


class Plan:
    """How ops of one type in one namespace are laid out: formal input/output parameters and attribute kinds
    (from the op schema; with no schema, ports are positional ``in0``/``out0`` and kinds come from values)."""

    __slots__ = ("schema", "inputs", "outputs", "attr_kinds", "_in_names", "_out_names", "_in_pos", "_out_pos")

    def __init__(self, schema: Any | None) -> None:
        self.schema = schema
        if schema is not None:
            self.inputs = [(p.name, p.variadic) for p in schema.input_ports]
            self.outputs = [(p.name, p.variadic) for p in schema.output_ports]
            self.attr_kinds = {a.name: a.type.rsplit(".", 1)[-1] for a in schema.attrs}
        else:
            self.inputs = None
            self.outputs = None
            self.attr_kinds = {}
        self._in_names: dict[int, list[str]] = {}
        self._out_names: dict[int, list[str]] = {}
        self._in_pos: dict[tuple[str, ...], list[int] | None] = {}
        self._out_pos: dict[tuple[str, ...], list[int] | None] = {}

    def input_names(self, n: int) -> list[str]:
        found = self._in_names.get(n)
        if found is None:
            found = self._in_names[n] = _names(self.inputs, n, "in")
        return found

    def output_names(self, n: int) -> list[str]:
        found = self._out_names.get(n)
        if found is None:
            found = self._out_names[n] = _names(self.outputs, n, "out")
        return found

    def input_positions(self, names: tuple[str, ...]) -> list[int] | None:
        """Positions of input ports called ``names`` in the node's input list; None when they are simply
        0, 1, 2 ...  Raises ValueError for a name the op type does not have."""
        if names in self._in_pos:
            return self._in_pos[names]
        found = self._in_pos[names] = _positions(self.inputs, names, "in")
        return found

    def output_positions(self, names: tuple[str, ...]) -> list[int] | None:
        if names in self._out_pos:
            return self._out_pos[names]
        found = self._out_pos[names] = _positions(self.outputs, names, "out")
        return found


def _names(formals: list[tuple[str, bool]] | None, n: int, prefix: str) -> list[str]:
    if formals is not None:
        out: list[str] = []
        for name, variadic in formals:
            if len(out) >= n:
                break
            if variadic:
                out.extend(f"{name}_{i}" for i in range(n - len(out)))
                break
            out.append(name)
        if len(out) == n:
            return out
    return [f"{prefix}{i}" for i in range(n)]


def _positions(formals: list[tuple[str, bool]] | None, names: tuple[str, ...], prefix: str) -> list[int] | None:
    positions: list[int] = []
    for name in names:
        pos = _position(formals, name, prefix)
        if pos is None:
            known = ", ".join(f"{f}_<i>" if v else f for f, v in formals) if formals else f"{prefix}<i>"
            raise ValueError(f"port {name!r} is not a parameter of this op type (parameters: {known})")
        positions.append(pos)
    if len(set(positions)) != len(positions):
        raise ValueError(f"ports {list(names)} name one parameter position twice")
    if positions == list(range(len(names))):
        return None
    return positions


def _position(formals: list[tuple[str, bool]] | None, name: str, prefix: str) -> int | None:
    if formals is not None:
        for i, (formal, variadic) in enumerate(formals):
            if name == formal:
                return i
            if variadic and name.startswith(formal + "_") and name[len(formal) + 1:].isdigit():
                return i + int(name[len(formal) + 1:])
    if name.startswith(prefix) and name[len(prefix):].isdigit():
        return int(name[len(prefix):])
    if formals is None:
        return None
    return None


class PlanCache:
    """Plans by ``(domain, opset, op type)``, built from the plugin's namespace schemas once per process."""

    def __init__(self) -> None:
        self._plans: dict[tuple[str, int | None, str], Plan] = {}
        self._schemas: dict[tuple[str, int | None], NamespaceSchema | None] = {}
        self._providers: dict[str, Any] | None = None

    def schema(self, domain: str, version: int | None) -> NamespaceSchema | None:
        key = (domain, version)
        if key in self._schemas:
            return self._schemas[key]
        found: NamespaceSchema | None = None
        if version is not None:
            if self._providers is None:
                self._providers = {("" if p.domain == DEFAULT_DOMAIN else p.domain): p
                                   for p in namespace_providers()}
            provider = self._providers.get(domain)
            if provider is not None and provider.first <= version <= provider.last:
                try:
                    found = provider.schema(version)
                except (NamespaceError, SchemaError):
                    found = None
        self._schemas[key] = found
        return found

    def plan(self, domain: str, version: int | None, op_type: str) -> Plan:
        key = (domain, version, op_type)
        found = self._plans.get(key)
        if found is None:
            schema = self.schema(domain, version)
            op_schema = schema.get(op_type) if schema is not None else None
            found = self._plans[key] = Plan(op_schema)
        return found


PLANS = PlanCache()
"""The process-wide plan cache (schemas never change within a process)."""
