"""Namespace schemas: the exact dictionary of one namespace's ops.

The YAML form, ``namespace_schema`` (``docs/namespaces.md``, "Schemas")::

    namespace_schema:
      namespace: amanda/tensorflow/2.21.0
      default_type_system: python
      op_schemas:
        - type: MatMul
          attrs:
            T: tf.type
            transpose_a: bool = false
          input_ports:
            - a: T
          output_ports:
            - product: T

Extensions (all optional, documented in ``docs/namespaces.md``):

* a port name ending in ``?`` is optional (may be absent or unfed); ending in
  ``*`` or ``+`` it is variadic (zero-or-more / one-or-more ports named
  ``name_0``, ``name_1``, ...);
* a port or attribute may be written in long form, a mapping with ``type``,
  ``default``, ``allowed_values``, ``doc``, ``optional``, ``variadic``,
  ``meta``;
* an op schema may carry ``type_constraints`` (ONNX-style ``T: [tensor(float),
  ...]``), ``commutative`` (input ports whose order does not matter),
  ``since_version``, ``domain``, ``deprecated``, ``doc`` and ``meta``.
"""

from __future__ import annotations

__all__ = [
    "NO_DEFAULT",
    "PortSchema",
    "AttrSchema",
    "OpSchema",
    "NamespaceSchema",
    "schema_from_dict",
    "schema_to_dict",
    "op_schema_from_dict",
    "op_schema_to_dict",
    "load_schema",
    "dump_schema",
]

import json
from typing import Any, Iterator, Mapping

import yaml
from attrs import cmp_using, evolve, field, frozen

from ..errors import FormatError, SchemaError


class _NoDefault:
    _instance: _NoDefault | None = None

    def __new__(cls) -> _NoDefault:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_DEFAULT"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()
"""Marks an attribute without a default (it is required) or a port without a default dtype."""


def _same_default(a: Any, b: Any) -> bool:
    from ..ir.compare import values_equal

    return a is b or values_equal(a, b)


def _frozen_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return dict(value) if value else {}


@frozen
class PortSchema:
    """One input or output port of an op schema."""

    name: str
    type: str | None = None
    default: Any = field(default=NO_DEFAULT, eq=cmp_using(eq=_same_default, require_same_type=False))
    optional: bool = False
    variadic: bool = False
    min_count: int = 1
    doc: str = ""
    meta: Mapping[str, Any] = field(factory=dict, converter=_frozen_mapping)

    def accepts_name(self, port_name: str) -> bool:
        """True if a port called ``port_name`` fills this slot (``x`` or, if variadic, ``x_3``)."""
        if port_name == self.name:
            return True
        if self.variadic and port_name.startswith(self.name + "_"):
            return port_name[len(self.name) + 1:].isdigit()
        return False


@frozen
class AttrSchema:
    """One attribute of an op schema; required when it has no default."""

    name: str
    type: str
    default: Any = field(default=NO_DEFAULT, eq=cmp_using(eq=_same_default, require_same_type=False))
    allowed_values: tuple[Any, ...] | None = None
    doc: str = ""
    meta: Mapping[str, Any] = field(factory=dict, converter=_frozen_mapping)

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT


@frozen
class OpSchema:
    """The schema of one op type in one namespace."""

    type: str
    input_ports: tuple[PortSchema, ...] = ()
    output_ports: tuple[PortSchema, ...] = ()
    attrs: tuple[AttrSchema, ...] = ()
    type_constraints: Mapping[str, tuple[str, ...]] = field(factory=dict, converter=_frozen_mapping)
    commutative: tuple[str, ...] = ()
    body: Mapping[str, Any] | None = None
    since_version: str | None = None
    domain: str | None = None
    deprecated: bool = False
    doc: str = ""
    meta: Mapping[str, Any] = field(factory=dict, converter=_frozen_mapping)
    _input_positions: dict[str, int] | None = field(default=None, init=False, eq=False, repr=False)
    """Input slot name -> position, made the first time :meth:`input_position` is asked."""

    def attr(self, name: str) -> AttrSchema | None:
        for a in self.attrs:
            if a.name == name:
                return a
        return None

    def attr_names(self) -> list[str]:
        return [a.name for a in self.attrs]

    def input(self, name: str) -> PortSchema | None:
        return _port_for(self.input_ports, name)

    def input_position(self, name: str) -> int | None:
        """The position of the input slot called exactly ``name``, or None."""
        positions = self._input_positions
        if positions is None:
            positions = {p.name: i for i, p in enumerate(self.input_ports)}
            object.__setattr__(self, "_input_positions", positions)
        return positions.get(name)

    def output(self, name: str) -> PortSchema | None:
        return _port_for(self.output_ports, name)


def _port_for(ports: tuple[PortSchema, ...], name: str) -> PortSchema | None:
    for p in ports:
        if p.accepts_name(name):
            return p
    return None


class NamespaceSchema:
    """Every op schema of one namespace, by op type."""

    __slots__ = ("namespace", "default_type_system", "_ops", "meta")

    def __init__(self, namespace: str, op_schemas: Mapping[str, OpSchema] | list[OpSchema] = (),  # type: ignore[assignment]
                 default_type_system: str | None = None, meta: Mapping[str, Any] | None = None) -> None:
        self.namespace = namespace
        self.default_type_system = default_type_system
        if isinstance(op_schemas, Mapping):
            self._ops: dict[str, OpSchema] = dict(op_schemas)
        else:
            self._ops = {}
            for s in op_schemas:
                if s.type in self._ops:
                    raise SchemaError(f"namespace schema {namespace}: op type {s.type!r} defined twice")
                self._ops[s.type] = s
        self.meta: dict[str, Any] = dict(meta or {})

    @property
    def op_schemas(self) -> Mapping[str, OpSchema]:
        return self._ops

    def __contains__(self, op_type: object) -> bool:
        return op_type in self._ops

    def __getitem__(self, op_type: str) -> OpSchema:
        try:
            return self._ops[op_type]
        except KeyError:
            raise SchemaError(f"namespace {self.namespace} has no op type {op_type!r}") from None

    def get(self, op_type: str) -> OpSchema | None:
        return self._ops.get(op_type)

    def __len__(self) -> int:
        return len(self._ops)

    def __iter__(self) -> Iterator[OpSchema]:
        return iter(self._ops.values())

    def __repr__(self) -> str:
        return f"<NamespaceSchema {self.namespace}: {len(self._ops)} op types>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NamespaceSchema):
            return NotImplemented
        return (self.namespace, self.default_type_system, self._ops) == (
            other.namespace, other.default_type_system, other._ops)

    __hash__ = None  # type: ignore[assignment]


# --------------------------------------------------------------------------- dict form

_LONG_PORT_KEYS = {"type", "default", "optional", "variadic", "min_count", "doc", "meta"}
_LONG_ATTR_KEYS = {"type", "default", "allowed_values", "doc", "meta"}


def _parse_default(text: str, where: str) -> Any:
    if not text.strip():
        return ""
    try:  # defaults are written as JSON (so 1e-05 stays a float, which YAML 1.1 would read as a string)
        return json.loads(text)
    except ValueError:
        pass
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise SchemaError(f"{where}: cannot read default value {text!r}: {e}") from None


def _split_type_default(text: str, where: str) -> tuple[str, Any]:
    if "=" in text:
        t, _, d = text.partition("=")
        return t.strip(), _parse_default(d.strip(), where)
    return text.strip(), NO_DEFAULT


def _port_from(entry: Any, where: str) -> PortSchema:
    if isinstance(entry, str):
        name, spec = entry, None
    elif isinstance(entry, Mapping) and len(entry) == 1:
        ((name, spec),) = entry.items()
    else:
        raise SchemaError(f"{where}: a port is written '- name' or '- name: type', got {entry!r}")
    name = str(name)
    optional = variadic = False
    min_count = 1
    if name.endswith("?"):
        name, optional = name[:-1], True
    elif name.endswith("*"):
        name, variadic, min_count = name[:-1], True, 0
    elif name.endswith("+"):
        name, variadic = name[:-1], True
    if spec is None:
        return PortSchema(name, optional=optional, variadic=variadic, min_count=min_count)
    if isinstance(spec, str):
        t, d = _split_type_default(spec, f"{where} port {name}")
        return PortSchema(name, t or None, d, optional, variadic, min_count)
    if isinstance(spec, Mapping):
        unknown = set(spec) - _LONG_PORT_KEYS
        if unknown:
            raise SchemaError(f"{where} port {name}: unknown keys {sorted(unknown)}")
        return PortSchema(
            name, spec.get("type"), spec.get("default", NO_DEFAULT), bool(spec.get("optional", optional)),
            bool(spec.get("variadic", variadic)), int(spec.get("min_count", min_count)),
            str(spec.get("doc", "")), spec.get("meta") or {},
        )
    raise SchemaError(f"{where} port {name}: expected a type string or a mapping, got {spec!r}")


def _attr_from(name: str, spec: Any, where: str) -> AttrSchema:
    if isinstance(spec, str):
        t, d = _split_type_default(spec, f"{where} attr {name}")
        return AttrSchema(name, t, d)
    if isinstance(spec, Mapping):
        unknown = set(spec) - _LONG_ATTR_KEYS
        if unknown:
            raise SchemaError(f"{where} attr {name}: unknown keys {sorted(unknown)}")
        if "type" not in spec:
            raise SchemaError(f"{where} attr {name}: long form needs 'type'")
        allowed = spec.get("allowed_values")
        return AttrSchema(name, str(spec["type"]), spec.get("default", NO_DEFAULT),
                          tuple(allowed) if allowed is not None else None, str(spec.get("doc", "")),
                          spec.get("meta") or {})
    raise SchemaError(f"{where} attr {name}: expected 'type' or 'type = default', got {spec!r}")


def op_schema_from_dict(d: Mapping[str, Any], where: str = "op schema") -> OpSchema:
    if not isinstance(d, Mapping) or "type" not in d:
        raise SchemaError(f"{where}: an op schema is a mapping with a 'type'")
    where = f"{where} {d['type']}"
    known = {"type", "input_ports", "output_ports", "attrs", "ops", "edges", "type_constraints", "commutative",
             "since_version", "domain", "deprecated", "doc", "meta"}
    unknown = set(d) - known
    if unknown:
        raise SchemaError(f"{where}: unknown keys {sorted(unknown)}")
    attrs_d = d.get("attrs") or {}
    if not isinstance(attrs_d, Mapping):
        raise SchemaError(f"{where}: 'attrs' must be a mapping")
    body = None
    if d.get("ops") or d.get("edges"):
        body = {"ops": d.get("ops") or {}, "edges": list(d.get("edges") or [])}
    tc = {str(k): tuple(v) for k, v in (d.get("type_constraints") or {}).items()}
    sv = d.get("since_version")
    return OpSchema(
        type=str(d["type"]),
        input_ports=tuple(_port_from(e, where) for e in (d.get("input_ports") or [])),
        output_ports=tuple(_port_from(e, where) for e in (d.get("output_ports") or [])),
        attrs=tuple(_attr_from(str(k), v, where) for k, v in attrs_d.items()),
        type_constraints=tc,
        commutative=tuple(d.get("commutative") or ()),
        body=body,
        since_version=str(sv) if sv is not None else None,
        domain=d.get("domain"),
        deprecated=bool(d.get("deprecated", False)),
        doc=str(d.get("doc", "")),
        meta=d.get("meta") or {},
    )


def _dump_default(value: Any) -> str | None:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return None


def _port_to(p: PortSchema) -> Any:
    name = p.name + ("?" if p.optional else "") + (("*" if p.min_count == 0 else "+") if p.variadic else "")
    short = not p.doc and not p.meta and (not p.variadic or p.min_count in (0, 1))
    if short:
        if p.type is None and p.default is NO_DEFAULT:
            return name
        if p.default is NO_DEFAULT:
            return {name: p.type}
        d = _dump_default(p.default)
        if d is not None and p.type is not None:
            return {name: f"{p.type} = {d}"}
    long: dict[str, Any] = {}
    if p.type is not None:
        long["type"] = p.type
    if p.default is not NO_DEFAULT:
        long["default"] = p.default
    if p.doc:
        long["doc"] = p.doc
    if p.meta:
        long["meta"] = dict(p.meta)
    if p.variadic and p.min_count not in (0, 1):
        long["min_count"] = p.min_count
    return {name: long}


def _attr_to(a: AttrSchema) -> Any:
    if a.allowed_values is None and not a.doc and not a.meta:
        if a.default is NO_DEFAULT:
            return a.type
        d = _dump_default(a.default)
        if d is not None:
            return f"{a.type} = {d}"
    long: dict[str, Any] = {"type": a.type}
    if a.default is not NO_DEFAULT:
        long["default"] = a.default
    if a.allowed_values is not None:
        long["allowed_values"] = list(a.allowed_values)
    if a.doc:
        long["doc"] = a.doc
    if a.meta:
        long["meta"] = dict(a.meta)
    return long


def op_schema_to_dict(s: OpSchema, *, docs: bool = True) -> dict[str, Any]:
    d: dict[str, Any] = {"type": s.type}
    if s.domain:
        d["domain"] = s.domain
    if s.since_version is not None:
        d["since_version"] = s.since_version
    if s.deprecated:
        d["deprecated"] = True
    if s.attrs:
        d["attrs"] = {a.name: _attr_to(a if docs else evolve(a, doc="")) for a in s.attrs}
    if s.input_ports:
        d["input_ports"] = [_port_to(p if docs else evolve(p, doc="")) for p in s.input_ports]
    if s.output_ports:
        d["output_ports"] = [_port_to(p if docs else evolve(p, doc="")) for p in s.output_ports]
    if s.type_constraints:
        d["type_constraints"] = {k: list(v) for k, v in s.type_constraints.items()}
    if s.commutative:
        d["commutative"] = list(s.commutative)
    if s.body:
        d["ops"] = s.body.get("ops", {})
        d["edges"] = list(s.body.get("edges", []))
    if s.meta:
        d["meta"] = dict(s.meta)
    if docs and s.doc:
        d["doc"] = s.doc
    return d


def schema_from_dict(d: Mapping[str, Any], where: str = "namespace schema") -> NamespaceSchema:
    if isinstance(d, Mapping) and "namespace_schema" in d:
        d = d["namespace_schema"]
    if not isinstance(d, Mapping) or "namespace" not in d:
        raise SchemaError(f"{where}: expected a 'namespace_schema' mapping with a 'namespace'")
    ops = d.get("op_schemas") or []
    if not isinstance(ops, list):
        raise SchemaError(f"{where}: 'op_schemas' must be a list")
    return NamespaceSchema(
        str(d["namespace"]),
        [op_schema_from_dict(o, f"{where}: op_schemas[{i}]") for i, o in enumerate(ops)],
        d.get("default_type_system"),
        d.get("meta"),
    )


def schema_to_dict(s: NamespaceSchema, *, docs: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {"namespace": s.namespace}
    if s.default_type_system:
        body["default_type_system"] = s.default_type_system
    if s.meta:
        body["meta"] = dict(s.meta)
    body["op_schemas"] = [op_schema_to_dict(o, docs=docs) for o in s]
    return {"namespace_schema": body}


def load_schema(source: str, *, filename: str | None = None) -> NamespaceSchema:
    """Load a namespace schema from YAML text (or a path, if ``filename`` is None and it names a file)."""
    from ..serialization.graph_yaml import load_values
    from ..serialization.yamlio import read_yaml_text

    text, fname = read_yaml_text(source, filename)
    data = load_values(text, filename=fname)
    try:
        return schema_from_dict(data, fname or "namespace schema")
    except SchemaError as e:
        raise FormatError(str(e)) from None


def dump_schema(schema: NamespaceSchema | OpSchema, *, docs: bool = True) -> str:
    """YAML text of a namespace schema (or of one op schema)."""
    from ..serialization.graph_yaml import dump_values

    data = schema_to_dict(schema, docs=docs) if isinstance(schema, NamespaceSchema) else op_schema_to_dict(
        schema, docs=docs)
    return dump_values(data)
