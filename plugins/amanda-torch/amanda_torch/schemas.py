"""The namespace ``amanda/pytorch/<version>``: an op schema for every operator torch registers.

Op types (see the README for the full rules):

* ``aten::add.Tensor`` - one overload, from its ``FunctionSchema``;
  ``aten::relu.default`` - the overload with an empty overload name (torch's
  Python spelling, ``torch.ops.aten.relu.default``);
* ``aten::add`` - the bare name, which is what TorchScript graph nodes carry.
  It accepts every overload of that name: when the name has one overload its
  ports are that overload's; otherwise port *i* takes any type an overload
  has at position *i*, is named as the overloads name it where they agree
  (``in<i>`` / ``out<i>`` where they do not), and is optional unless every
  overload requires it.  ``meta.overloads`` lists the overloads;
* ``prim::If``, ``prim::Constant`` ... - TorchScript's structural node kinds
  (:mod:`amanda_torch.structural`).

Ports: every schema argument is an input port, in order, keyword-only ones
after the positional ones (TorchScript passes all of them as inputs); a
vararg schema (``aten::format(str self, ...)``) ends with a variadic port
``args``.  Returns are output ports named by their schema names, else
``out0``, ``out1`` ...; a varret schema has a variadic ``outputs``.  A port's
type is ``torch.<schema type>`` with alias annotations removed; its default is
the schema default (enum defaults as names: ``ScalarType`` ``int64``,
``Layout`` ``strided``, ``MemoryFormat`` ``contiguous_format``); a port is
optional when it has a default or an optional type.  Port meta keeps
``annotated_type`` (the type as written, e.g. ``Tensor(a!)``), ``alias``,
``mutable`` and ``kwarg_only``.  Overload entries keep the schema text in
``meta.schema`` and, for operators registered by importing a torch module,
that module in ``meta.module``.

Generation imports torch in a child process (:mod:`amanda_torch._generate`)
and is cached with :func:`amanda_core.namespace.cache.cached_json`, keyed by
the torch version and :data:`SCHEMA_VERSION`; listing versions and loading a
cached schema import no torch.
"""

from __future__ import annotations

import functools

__all__ = [
    "FAMILY",
    "SCHEMA_VERSION",
    "TorchNamespaces",
    "installed_torch_version",
    "namespace_version",
    "generate_records",
    "build_namespace_data",
    "namespace_schema_from_data",
    "cache_key",
    "overload_types",
]

import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterable, Sequence

from attrs import evolve

from amanda_core.errors import NamespaceError
from amanda_core.namespace.cache import cached_json
from amanda_core.namespace.registry import NOT_CONSTANT, ConstantOp, NamespaceProvider
from amanda_core.namespace.schema import (
    NO_DEFAULT,
    AttrSchema,
    NamespaceSchema,
    OpSchema,
    PortSchema,
    op_schema_from_dict,
)

from ._generate import GENERATOR_VERSION
from .scalar_types import LAYOUTS, MEMORY_FORMATS, lookup_enum, lookup_scalar_type
from .schema_text import ParsedSchema, SchemaArg, parse_function_schema
from .structural import EXCLUDED, NODE_ATTRIBUTES, STRUCTURAL
from .typeexpr import Named, OptionalOf, parse_type

FAMILY = "amanda/pytorch"
SCHEMA_VERSION = f"g{GENERATOR_VERSION}.s4"
"""Changes whenever the generated data would change for the same torch release."""
DEFAULT_OVERLOAD = "default"
TYPE_SYSTEM = "torch"


# --------------------------------------------------------------------------- versions


@functools.lru_cache(maxsize=1)
def installed_torch_version() -> str | None:
    """The installed torch distribution's version (``2.13.0+cpu``), read without importing torch (once per process:
    reading package metadata takes milliseconds, and the registry asks on every namespace lookup)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return None


def namespace_version(full: str) -> str:
    """The namespace version of a torch release: the public version, local label dropped."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(full).public
    except InvalidVersion:
        return full.split("+", 1)[0]


def cache_key(full_version: str) -> str:
    return f"amanda-torch-schema-{full_version}-{SCHEMA_VERSION}"


# --------------------------------------------------------------------------- generation


def generate_records(timeout: float = 900.0) -> dict[str, Any]:
    """Run :mod:`amanda_torch._generate` in a child process and return what it collected."""
    package_root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = package_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONWARNINGS", "ignore")
    with tempfile.TemporaryDirectory(prefix="amanda-torch-") as tmp:
        out = os.path.join(tmp, "schemas.json")
        try:
            proc = subprocess.run([sys.executable, "-m", "amanda_torch._generate", out], env=env,
                                  capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise NamespaceError(f"collecting torch's operator schemas took longer than {timeout:.0f} s") from None
        if proc.returncode != 0 or not os.path.exists(out):
            tail = "\n".join((proc.stderr or proc.stdout or "").strip().splitlines()[-15:])
            raise NamespaceError(f"collecting torch's operator schemas failed (exit {proc.returncode}):\n{tail}")
        with open(out, encoding="utf-8") as f:
            data: dict[str, Any] = json.load(f)
    return data


# --------------------------------------------------------------------------- building op schemas


def _stored_default(value: Any) -> Any:
    if isinstance(value, dict) and "float" in value:
        return float(value["float"])
    if isinstance(value, dict) and "complex" in value:
        re_, im = value["complex"]
        return complex(re_, im)
    return value


def _named_default(type_text: str, value: Any) -> Any:
    """Enum defaults, which torch stores as numbers, as names (``ScalarType`` 4 -> ``int64``)."""
    t = parse_type(type_text)
    if isinstance(t, OptionalOf):
        t = t.elem
    if not isinstance(t, Named) or not isinstance(value, int) or isinstance(value, bool):
        return value
    if t.name == "ScalarType":
        row = lookup_scalar_type(value)
        return row.torch_name if row else value
    table = {"Layout": LAYOUTS, "MemoryFormat": MEMORY_FORMATS}.get(t.name)
    if table is not None:
        enum_row = lookup_enum(table, value)
        return enum_row.torch_name if enum_row else value
    return value


def _is_optional_type(type_text: str) -> bool:
    return isinstance(parse_type(type_text), OptionalOf)


def _port_meta(arg: SchemaArg) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if arg.aliases:
        meta["annotated_type"] = arg.annotated
        meta["alias"] = arg.aliases[0] if len(arg.aliases) == 1 else list(arg.aliases)
        if arg.mutable:
            meta["mutable"] = True
    if arg.kwarg_only:
        meta["kwarg_only"] = True
    return meta


def _unique(name: str, taken: set[str]) -> str:
    out, n = name, 1
    while out in taken:
        out = f"{name}_{n}"
        n += 1
    taken.add(out)
    return out


def overload_op_schema(parsed: ParsedSchema, record: dict[str, Any], op_type: str) -> OpSchema:
    """The op schema of one overload."""
    inputs: list[PortSchema] = []
    taken: set[str] = set()
    for i, arg in enumerate(parsed.args):
        has_default = bool(record["has_default"][i])
        default = _named_default(arg.type, _stored_default(record["defaults"][i])) if has_default else NO_DEFAULT
        optional = has_default or _is_optional_type(arg.type)
        meta = _port_meta(arg)
        name = arg.name or f"in{i}"
        if name in taken:  # torch has a schema naming two arguments alike: the second goes by position
            meta["schema_name"] = name
            name = f"in{i}"
        name = _unique(name, taken)
        inputs.append(PortSchema(name, f"{TYPE_SYSTEM}.{arg.type}", default, optional, meta=meta))
    if parsed.vararg:
        inputs.append(PortSchema(_unique("args", taken), f"{TYPE_SYSTEM}.Any", variadic=True, min_count=0))
    outputs: list[PortSchema] = []
    taken = set()
    for i, ret in enumerate(parsed.returns):
        meta = _port_meta(ret)
        name = ret.name or f"out{i}"
        if name in taken:
            meta["schema_name"] = name
            name = f"out{i}"
        name = _unique(name, taken)
        outputs.append(PortSchema(name, f"{TYPE_SYSTEM}.{ret.type}", meta=meta))
    if parsed.varret:
        outputs.append(PortSchema(_unique("outputs", taken), f"{TYPE_SYSTEM}.Any", variadic=True, min_count=0))
    op_meta: dict[str, Any] = {"kind": "overload", "name": parsed.name, "overload": parsed.overload,
                               "schema": record["schema"]}
    if record.get("module"):
        op_meta["module"] = record["module"]
    return OpSchema(type=op_type, input_ports=tuple(inputs), output_ports=tuple(outputs),
                    domain=parsed.name.split("::", 1)[0], meta=op_meta)


def _merge_ports(lists: list[list[PortSchema]], prefix: str) -> list[PortSchema]:
    """Port *i* of the bare-name entry: accepts what any overload's port *i* accepts."""
    fixed = [[p for p in ports if not p.variadic] for ports in lists]
    any_variadic = any(p.variadic for ports in lists for p in ports)
    width = max((len(f) for f in fixed), default=0)
    merged: list[PortSchema] = []
    taken: set[str] = set()
    for i in range(width):
        at = [f[i] for f in fixed if len(f) > i]
        missing = len(at) < len(fixed)
        names = {p.name for p in at}
        name = names.pop() if len(names) == 1 else f"{prefix}{i}"
        if name in taken:
            name = f"{prefix}{i}"
        taken.add(name)
        types: list[str] = []
        for p in at:
            local = (p.type or f"{TYPE_SYSTEM}.Any")[len(TYPE_SYSTEM) + 1:]
            if local not in types:
                types.append(local)
        defaults = [p.default for p in at]
        default = defaults[0] if not missing and all(
            d is not NO_DEFAULT and d == defaults[0] and type(d) is type(defaults[0]) for d in defaults) \
            else NO_DEFAULT
        optional = missing or any(p.optional for p in at)
        merged.append(PortSchema(name, f"{TYPE_SYSTEM}.{' | '.join(types)}", default, optional))
    if any_variadic:
        vname = "args" if prefix == "in" else "outputs"
        merged.append(PortSchema(_unique(vname, taken), f"{TYPE_SYSTEM}.Any", variadic=True, min_count=0))
    return merged


def bare_op_schema(name: str, overloads: list[OpSchema]) -> OpSchema:
    """The entry of the bare name ``name``, which TorchScript nodes carry: any of ``overloads``."""
    meta = {"kind": "node_kind", "overloads": [o.type for o in overloads]}
    domain = name.split("::", 1)[0]
    if len(overloads) == 1:
        only = overloads[0]
        return OpSchema(type=name, input_ports=only.input_ports, output_ports=only.output_ports, domain=domain,
                        meta={**meta, "schema": only.meta["schema"]})
    inputs = _merge_ports([list(o.input_ports) for o in overloads], "in")
    outputs = _merge_ports([list(o.output_ports) for o in overloads], "out")
    return OpSchema(type=name, input_ports=tuple(inputs), output_ports=tuple(outputs), domain=domain, meta=meta)


def _with_attrs(op: OpSchema, attrs: dict[str, Any], reason: str) -> OpSchema:
    extra = op_schema_from_dict({"type": op.type, "attrs": attrs}).attrs
    meta = {**op.meta, "attrs_reason": reason}
    return evolve(op, attrs=tuple(op.attrs) + tuple(extra), meta=meta)


def build_namespace_data(records: dict[str, Any]) -> dict[str, Any]:
    """From what :mod:`._generate` collected, every op schema in the compact JSON form of :func:`_op_to_json`."""
    by_name: dict[str, list[OpSchema]] = {}
    ops: list[OpSchema] = []
    for record in records["schemas"]:
        parsed = parse_function_schema(record["schema"])
        op_type = f"{parsed.name}.{parsed.overload or DEFAULT_OVERLOAD}"
        if parsed.overload == DEFAULT_OVERLOAD:
            raise NamespaceError(f"operator {parsed.name} has an overload named {DEFAULT_OVERLOAD!r}, which "
                                 "this namespace uses for the empty overload name")
        op = overload_op_schema(parsed, record, op_type)
        ops.append(op)
        by_name.setdefault(parsed.name, []).append(op)
    overload_count = len(ops)
    for name in sorted(by_name):
        group = sorted(by_name[name], key=lambda o: (o.meta["overload"] != "", o.type))
        ops.append(bare_op_schema(name, group))
    structural = 0
    for d in STRUCTURAL:
        if d["type"] in by_name:
            continue  # torch now registers a schema for it: the schema wins
        ops.append(op_schema_from_dict(d))
        structural += 1
    with_attrs = []
    for i, op in enumerate(ops):
        base = op.type.split(".", 1)[0] if op.meta.get("kind") == "overload" else op.type
        if base in NODE_ATTRIBUTES:
            attrs, reason = NODE_ATTRIBUTES[base]
            ops[i] = _with_attrs(op, attrs, reason)
            with_attrs.append(op.type)
    meta = {
        "torch_version": records["torch_version"],
        "generator": records["generator"],
        "schema_version": SCHEMA_VERSION,
        "overloads": overload_count,
        "operator_names": len(by_name),
        "structural_kinds": structural,
        "excluded_kinds": sorted(k for k in EXCLUDED if k not in by_name),
        "modules_imported": records.get("modules_imported", []),
        "modules_failed": records.get("modules_failed", {}),
        "dispatcher_only": records.get("dispatcher_only", []),
        "collect_seconds": records.get("seconds"),
    }
    return {"meta": meta, "ops": [_op_to_json(o) for o in ops]}


# --------------------------------------------------------------------------- compact JSON form


def _port_to_json(p: PortSchema) -> dict[str, Any]:
    d: dict[str, Any] = {"n": p.name}
    if p.type is not None:
        d["t"] = p.type
    if p.default is not NO_DEFAULT:
        d["d"] = p.default
    if p.optional:
        d["o"] = 1
    if p.variadic:
        d["v"] = p.min_count
    if p.meta:
        d["m"] = dict(p.meta)
    return d


def _port_from_json(d: dict[str, Any]) -> PortSchema:
    variadic = "v" in d
    return PortSchema(d["n"], d.get("t"), _stored_default(d["d"]) if "d" in d else NO_DEFAULT, bool(d.get("o")),
                      variadic, d["v"] if variadic else 1, "", d.get("m") or {})


def _op_to_json(o: OpSchema) -> dict[str, Any]:
    d: dict[str, Any] = {"type": o.type}
    if o.input_ports:
        d["in"] = [_port_to_json(p) for p in o.input_ports]
    if o.output_ports:
        d["out"] = [_port_to_json(p) for p in o.output_ports]
    if o.attrs:
        d["attrs"] = [{"n": a.name, "t": a.type, **({"d": a.default} if a.default is not NO_DEFAULT else {})}
                      for a in o.attrs]
    if o.domain:
        d["domain"] = o.domain
    if o.meta:
        d["meta"] = dict(o.meta)
    return d


def _op_from_json(d: dict[str, Any]) -> OpSchema:
    return OpSchema(
        type=d["type"],
        input_ports=tuple(_port_from_json(p) for p in d.get("in", ())),
        output_ports=tuple(_port_from_json(p) for p in d.get("out", ())),
        attrs=tuple(AttrSchema(a["n"], a["t"], a["d"] if "d" in a else NO_DEFAULT) for a in d.get("attrs", ())),
        domain=d.get("domain"),
        meta=d.get("meta") or {},
    )


def namespace_schema_from_data(namespace: str, data: dict[str, Any]) -> NamespaceSchema:
    """The namespace schema from the cached compact form."""
    return NamespaceSchema(namespace, [_op_from_json(d) for d in data["ops"]], TYPE_SYSTEM, data["meta"])


# --------------------------------------------------------------------------- provider


class TorchNamespaces(NamespaceProvider):
    """``amanda/pytorch``: one version, the installed torch's (local label dropped)."""

    family = FAMILY
    description = "every operator overload and TorchScript node kind of the installed torch"
    dtype_type_system = "torch"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._built: dict[str, NamespaceSchema] = {}

    def versions(self) -> Sequence[str]:
        full = installed_torch_version()
        return [namespace_version(full)] if full else []

    def schema(self, version: str | None) -> NamespaceSchema:
        full = installed_torch_version()
        if full is None:
            raise NamespaceError(f"{FAMILY}: torch is not installed, so no PyTorch namespace can be built")
        installed = namespace_version(full)
        if version is not None and not _same_version(version, installed):
            raise NamespaceError(f"{FAMILY}/{version}: only the installed torch {installed} can be described "
                                 f"(schemas come from torch's own operator registry)")
        with self._lock:
            schema = self._built.get(full)
            if schema is None:
                data = cached_json(cache_key(full), lambda: build_namespace_data(generate_records()))
                schema = namespace_schema_from_data(f"{FAMILY}/{installed}", data)
                self._built[full] = schema
            return schema

    def constant_value(self, op: Any) -> Any:
        """``prim::Constant`` ops are constants: their ``value`` (None when they have none, as TorchScript's
        ``None`` constant)."""
        if op.type == "prim::Constant":
            return op.attrs.get("value")
        return NOT_CONSTANT

    def make_constant(self, value: Any, version: str | None) -> ConstantOp:
        """A ``prim::Constant`` holding ``value``; one holding a plain literal (an int list, a bool, a dtype name)
        may feed every input of the graph that reads the same literal, as TorchScript's constant pooling does."""
        return ConstantOp("prim::Constant", {"value": value}, "output", shared=True)


def _same_version(a: str, b: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def overload_types(schema: NamespaceSchema) -> Iterable[str]:
    """The op types of ``schema`` that stand for one registered overload each."""
    return (o.type for o in schema if o.meta.get("kind") == "overload")
