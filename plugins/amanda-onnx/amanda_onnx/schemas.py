"""Namespace schemas of every ONNX domain and opset, generated from ``onnx.defs``.

Namespaces
----------
Each operator-set domain the installed ``onnx`` defines ops for is a family;
each opset version of it, from the domain's first to its newest, a namespace:

=============================  =========================================
domain                         namespaces
=============================  =========================================
``ai.onnx`` (ONNX's ``""``)    ``amanda/onnx/1`` ... ``amanda/onnx/<newest>``
``ai.onnx.ml``                 ``amanda/onnx/ai.onnx.ml/1`` ...
``ai.onnx.preview.training``   ``amanda/onnx/ai.onnx.preview.training/1``
``ai.onnx.preview``            ``amanda/onnx/ai.onnx.preview/1`` (when onnx has it)
=============================  =========================================

Opset rule
----------
The schema of op *X* in opset *N* is the newest schema of *X* whose
``since_version`` is at most *N*; an op whose first schema is newer than *N* is
absent.  A schema that onnx flags deprecated (``Upsample`` from 10,
``Scatter`` from 11, ``GroupNormalization``-18, the ML tree ensembles at 5)
stays in force, with ``deprecated: true`` (validation warns): onnx keeps the
schema, and for some ops (GroupNormalization at opsets 18-20) it is the only one.

Per op schema
-------------
* input/output ports from the formal parameters: ``name?`` for an optional
  one, ``name+`` / ``name*`` for a variadic one with at least one / zero ports
  (``min_count`` holds a larger minimum); a variadic port's ports are
  ``name_0``, ``name_1`` ... (``Concat``: ``inputs_0``; ``Sum``: ``data_0_0``).
  A heterogeneous variadic port (Loop, If, Scan ...) has ``meta: {homogeneous: false}``;
* port types: the type constraint's name (``T``) or the concrete type (``tensor(int64)``);
* attributes typed ``onnx.INT``, ``onnx.FLOATS`` ...; a required attribute has
  no default; an optional one has onnx's default decoded to a Python value
  (floats rounded to the float32 they are, strings as ``str``) or ``null``
  when onnx gives none;
* ``type_constraints``, ``since_version``, ``domain`` (``ai.onnx`` for the
  default domain), ``deprecated``, ``doc`` (trimmed of indentation);
* ``commutative``: the input ports of the ops in :data:`COMMUTATIVE_OPS`, whose
  inputs may be reordered without changing the result, except in their
  pre-opset-7 versions with a ``broadcast`` attribute (only ``B`` broadcasts
  there, so ``A`` and ``B`` are not interchangeable).

Structural types
----------------
Every default-domain namespace also holds the schemas of ``Initializer``,
``SparseInitializer`` and ``OuterValue`` (:mod:`amanda_onnx.structural`):
not ONNX operators, but the ops the importer makes for initializers and
outer-scope values, marked ``meta: {structural: true}``.

Cache
-----
Generation imports ``onnx`` and runs once per ``onnx`` release and
:data:`GENERATOR_VERSION`: an index of domains and opsets and one file per
domain with every schema version of every op are stored with
:func:`amanda_core.namespace.cache.cached_json`.  The ``onnx`` version comes
from :mod:`importlib.metadata`, so with a warm cache neither listing versions
nor building a schema imports ``onnx``.
"""

from __future__ import annotations

__all__ = [
    "COMMUTATIVE_OPS",
    "DEFAULT_DOMAIN",
    "FAMILY",
    "GENERATOR_VERSION",
    "OnnxNamespaces",
    "clear_memo",
    "constant_value",
    "decode_attr_default",
    "domain_data",
    "family_of",
    "in_force",
    "index",
    "namespace_providers",
    "onnx_version",
]

import textwrap
import threading
from collections.abc import Iterator, Mapping
from importlib import metadata
from typing import Any, Callable

import numpy as np

from amanda_core.errors import NamespaceError
from amanda_core.namespace import NO_DEFAULT, AttrSchema, NamespaceProvider, NamespaceSchema, OpSchema, PortSchema
from amanda_core.namespace.cache import cache_dir, cached_json
from amanda_core.namespace.registry import NOT_CONSTANT, ConstantOp

from .dtypes import dtype_from_type_proto
from .structural import structural_op_schemas

GENERATOR_VERSION = "1"
"""Bumped whenever the cached data's form or content changes."""

DEFAULT_DOMAIN = "ai.onnx"
FAMILY = "amanda/onnx"
TYPE_SYSTEM = "onnx"

COMMUTATIVE_OPS: frozenset[str] = frozenset({
    "Add", "Mul", "Sum", "Max", "Min", "Mean", "And", "Or", "Xor", "Equal", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
})
"""Ops of the default domain whose input ports are interchangeable (every input
port is listed in ``commutative``; a variadic port's numbered ports likewise)."""


_version: list[str] = []


def onnx_version() -> str:
    """The installed onnx release (from package metadata: no import), read once per process (until
    :func:`clear_memo`): reading it parses the package's metadata, a millisecond or two each time, and every cache
    key names it."""
    if _version:
        return _version[0]
    try:
        found = metadata.version("onnx")
    except metadata.PackageNotFoundError:
        raise NamespaceError("the onnx package is not installed; amanda-onnx generates its namespace schemas "
                             "from it (pip install onnx)") from None
    _version[:] = [found]
    return found


def family_of(domain: str) -> str:
    """``""`` or ``ai.onnx`` -> ``amanda/onnx``; ``ai.onnx.ml`` -> ``amanda/onnx/ai.onnx.ml``."""
    d = domain or DEFAULT_DOMAIN
    return FAMILY if d == DEFAULT_DOMAIN else f"{FAMILY}/{d}"


# --------------------------------------------------------------------------- cached data

_memo: dict[tuple[str, str], Any] = {}
_memo_lock = threading.Lock()


def _cached(key: str, build: Callable[[], Any]) -> Any:
    """``cached_json`` plus an in-process memo (per cache directory)."""
    memo_key = (key, str(cache_dir()))
    with _memo_lock:
        if memo_key in _memo:
            return _memo[memo_key]
    value = cached_json(key, build)
    with _memo_lock:
        _memo[memo_key] = value
    return value


def clear_memo() -> None:
    """Forget what this process has read (the disk cache stays)."""
    with _memo_lock:
        _memo.clear()
        _version.clear()


def _key(what: str) -> str:
    return f"onnx-{what}-onnx{onnx_version()}-gen{GENERATOR_VERSION}"


def index() -> dict[str, Any]:
    """``{"onnx_version": ..., "domains": [{"domain", "first", "last", "ops"}, ...]}``,
    the default domain first, then by name."""
    data: dict[str, Any] = _cached(_key("index"), _build_index)
    return data


def domain_data(domain: str) -> dict[str, Any]:
    """Every schema version of every op of ``domain``: ``{"domain", "ops": {name: [entry, ...]}}``,
    each op's entries in increasing ``since`` order."""
    d = domain or DEFAULT_DOMAIN
    data: dict[str, Any] = _cached(_key(f"defs-{d}"), lambda: _build_domain(d))
    return data


def _onnx_defs() -> Any:
    try:
        import onnx.defs
    except ImportError as e:
        raise NamespaceError(f"cannot import onnx to generate the ONNX namespace schemas: {e}") from None
    return onnx.defs


def _build_index() -> dict[str, Any]:
    defs = _onnx_defs()
    counts: dict[str, set[str]] = {}
    newest: dict[str, int] = {}
    for s in defs.get_all_schemas_with_history():
        d = s.domain or DEFAULT_DOMAIN
        counts.setdefault(d, set()).add(s.name)
        newest[d] = max(newest.get(d, 0), int(s.since_version))
    ranges: dict[str, tuple[int, int]] = {}
    version_map = getattr(getattr(defs, "C", None), "schema_version_map", None)
    if version_map is not None:
        for d, (lo, hi) in version_map().items():
            ranges[d or DEFAULT_DOMAIN] = (int(lo), int(hi))
    domains = []
    for d in sorted(counts, key=lambda x: (x != DEFAULT_DOMAIN, x)):
        lo, hi = ranges.get(d, (1, newest[d]))
        if d == DEFAULT_DOMAIN:
            hi = max(hi, int(defs.onnx_opset_version()))
        domains.append({"domain": d, "first": max(1, lo), "last": max(hi, newest[d]), "ops": len(counts[d])})
    import onnx

    return {"onnx_version": onnx.__version__, "generator": GENERATOR_VERSION, "domains": domains}


def _build_domain(domain: str) -> dict[str, Any]:
    defs = _onnx_defs()
    onnx_domain = "" if domain == DEFAULT_DOMAIN else domain
    entries = [s for s in defs.get_all_schemas_with_history() if s.domain == onnx_domain]
    if not entries:
        raise NamespaceError(f"onnx {onnx_version()} defines no ops in domain {domain!r}")
    ops: dict[str, list[dict[str, Any]]] = {}
    for s in sorted(entries, key=lambda s: (s.name, s.since_version)):
        ops.setdefault(s.name, []).append(_op_entry(s))
    return {"domain": domain, "generator": GENERATOR_VERSION, "ops": ops}


def _clean(doc: str | None) -> str:
    if not doc:
        return ""
    lines = textwrap.dedent(doc).strip().splitlines()
    return "\n".join(line.rstrip() for line in lines)


def _op_entry(s: Any) -> dict[str, Any]:
    """The JSON form of one ``onnx.defs.OpSchema``."""
    where = f"{s.domain or DEFAULT_DOMAIN} {s.name}-{s.since_version}"
    return {
        "name": s.name,
        "since": int(s.since_version),
        "deprecated": bool(s.deprecated),
        "doc": _clean(s.doc),
        "inputs": [_param_entry(p) for p in s.inputs],
        "outputs": [_param_entry(p) for p in s.outputs],
        "attrs": [_attr_entry(a, where) for a in s.attributes.values()],
        "type_constraints": [[tc.type_param_str, list(tc.allowed_type_strs)] for tc in s.type_constraints],
    }


def _param_entry(p: Any) -> dict[str, Any]:
    return {
        "name": p.name,
        "type": p.type_str,
        "option": p.option.name.lower(),  # single | optional | variadic
        "min_arity": int(p.min_arity),
        "homogeneous": bool(p.is_homogeneous),
        "doc": _clean(p.description),
    }


def _attr_entry(a: Any, where: str) -> dict[str, Any]:
    kind = a.type.name
    entry: dict[str, Any] = {"name": a.name, "type": kind, "required": bool(a.required), "doc": _clean(a.description)}
    if not a.required:
        has, value, note = decode_attr_default(kind, a.default_value, f"{where} attribute {a.name}")
        if has:
            entry["default"] = value
        if note:
            entry["note"] = note
    return entry


def _f32(x: float) -> float:
    """The shortest decimal that is the same float32 (ONNX stores FLOAT defaults as float32)."""
    return float(str(np.float32(x)))


def _text(b: bytes, where: str) -> str:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        raise NamespaceError(f"{where}: default string {b!r} is not UTF-8") from None


def decode_attr_default(kind: str, proto: Any, where: str = "attribute") -> tuple[bool, Any, str]:
    """Decode an optional attribute's default (an ``AttributeProto``) to a JSON-able Python value.

    Returns ``(has_default, value, note)``: ``has_default`` is False when onnx gives
    no default (the schema then says ``null``); ``note`` explains a default of a
    kind a schema cannot hold (TENSOR, GRAPH, SPARSE_TENSOR and their lists),
    which is then left out."""
    if proto is None or not getattr(proto, "type", 0):
        return False, None, ""
    if kind == "FLOAT":
        return True, _f32(proto.f), ""
    if kind == "FLOATS":
        return True, [_f32(x) for x in proto.floats], ""
    if kind == "INT":
        return True, int(proto.i), ""
    if kind == "INTS":
        return True, [int(x) for x in proto.ints], ""
    if kind == "STRING":
        return True, _text(proto.s, where), ""
    if kind == "STRINGS":
        return True, [_text(x, where) for x in proto.strings], ""
    if kind == "TYPE_PROTO":
        return True, dtype_from_type_proto(proto.tp), ""
    if kind == "TYPE_PROTOS":
        return True, [dtype_from_type_proto(t) for t in proto.type_protos], ""
    return False, None, f"onnx gives a default {kind} value, which a namespace schema cannot hold; it is left out"


# --------------------------------------------------------------------------- building schemas


def _port(p: dict[str, Any]) -> PortSchema:
    variadic = p["option"] == "variadic"
    meta = {"homogeneous": False} if variadic and not p["homogeneous"] else {}
    return PortSchema(p["name"], p["type"], optional=p["option"] == "optional", variadic=variadic,
                      min_count=p["min_arity"] if variadic else 1, doc=p["doc"], meta=meta)


def _attr(a: dict[str, Any]) -> AttrSchema:
    if a["required"]:
        default = NO_DEFAULT
    else:
        default = a.get("default")
    meta = {"note": a["note"]} if a.get("note") else {}
    return AttrSchema(a["name"], f"{TYPE_SYSTEM}.{a['type']}", default, doc=a["doc"], meta=meta)


def _op_schema(e: dict[str, Any], domain: str) -> OpSchema:
    inputs = tuple(_port(p) for p in e["inputs"])
    attrs = tuple(_attr(a) for a in e["attrs"])
    commutative: tuple[str, ...] = ()
    if domain == DEFAULT_DOMAIN and e["name"] in COMMUTATIVE_OPS and not any(a.name == "broadcast" for a in attrs):
        commutative = tuple(p.name for p in inputs)
    return OpSchema(
        type=e["name"],
        input_ports=inputs,
        output_ports=tuple(_port(p) for p in e["outputs"]),
        attrs=attrs,
        type_constraints={name: tuple(types) for name, types in e["type_constraints"]},
        commutative=commutative,
        since_version=str(e["since"]),
        domain=domain,
        deprecated=e["deprecated"],
        doc=e["doc"],
    )


def in_force(history: list[dict[str, Any]], opset: int) -> dict[str, Any] | None:
    """The entry in force at ``opset``: the newest whose ``since`` is at most ``opset``."""
    chosen = None
    for entry in history:
        if entry["since"] > opset:
            break
        chosen = entry
    return chosen


def constant_value(op: Any) -> Any:
    """The value of an ONNX ``Initializer`` op (not one that is also a graph input) or ``Constant`` node, as a numpy
    array (``value_float``, ``value_ints`` ... as the array they stand for); :data:`NOT_CONSTANT` for any other op."""
    t = op.type
    if t == "Initializer":
        if op.attrs.get("graph_input"):
            return NOT_CONSTANT
        return _array(op.attrs.get("value"))
    if t == "Constant":
        a = op.attrs
        for key, dtype in (("value", None), ("value_float", "float32"), ("value_floats", "float32"),
                           ("value_int", "int64"), ("value_ints", "int64"), ("value_string", "object"),
                           ("value_strings", "object")):
            if key in a:
                return _array(a[key], dtype)
    return NOT_CONSTANT


class OnnxNamespaces(NamespaceProvider):
    """Every opset of one ONNX domain; each namespace schema is built once, on demand."""
    dtype_type_system = "onnx"

    def __init__(self, domain: str, first: int, last: int) -> None:
        self.domain = domain or DEFAULT_DOMAIN
        self.family = family_of(self.domain)
        self.first = first
        self.last = last
        self.description = f"ONNX domain {self.domain}, opsets {first} to {last}"
        self._schemas: dict[int, NamespaceSchema] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<OnnxNamespaces {self.family} {self.first}..{self.last}>"

    def versions(self) -> list[str]:
        return [str(v) for v in range(self.first, self.last + 1)]

    def opset(self, version: str | int | None) -> int:
        """The opset a version string names; NamespaceError if this domain has no such opset."""
        if version is None:
            raise NamespaceError(f"{self.family} needs an opset version ({self.first} to {self.last})")
        try:
            n = int(str(version).strip())
        except ValueError:
            raise NamespaceError(f"{self.family}/{version}: an ONNX opset version is a whole number "
                                 f"({self.first} to {self.last})") from None
        if not self.first <= n <= self.last:
            raise NamespaceError(f"{self.family} has opsets {self.first} to {self.last} in onnx {onnx_version()}; "
                                 f"there is no opset {n}")
        return n

    def schema(self, version: str | int | None) -> NamespaceSchema:
        n = self.opset(version)
        with self._lock:
            found = self._schemas.get(n)
            if found is None:
                found = self._build(n)
                self._schemas[n] = found
            return found

    def constant_value(self, op: Any) -> Any:
        """:func:`constant_value` of ``op`` in this domain's ops (only the default domain has constants)."""
        if self.domain != DEFAULT_DOMAIN:
            return NOT_CONSTANT
        return constant_value(op)

    def make_constant(self, value: Any, version: str | None) -> ConstantOp | None:
        """A ``Constant`` node whose ``value`` is ``value`` as a tensor: numpy arrays as they are, Python ints (and
        lists of them) as int64, floats as float32, bools as bool."""
        if self.domain != DEFAULT_DOMAIN:
            return None
        return ConstantOp("Constant", {"value": _array(value)}, "output")

    def _build(self, n: int) -> NamespaceSchema:
        data = domain_data(self.domain)
        entries: dict[str, dict[str, Any]] = {}
        try:
            for name in sorted(data["ops"]):
                entry = in_force(data["ops"][name], n)
                if entry is not None:
                    missing = _ENTRY_KEYS - entry.keys()
                    if missing:
                        raise KeyError(", ".join(sorted(missing)))
                    entries[name] = entry
        except (KeyError, TypeError, AttributeError) as e:
            raise NamespaceError(f"the cached ONNX schema data for {self.domain} under {cache_dir()} is malformed "
                                 f"({type(e).__name__}: {e}); delete that file to regenerate it") from None
        built = {s.type: s for s in structural_op_schemas()} if self.domain == DEFAULT_DOMAIN else {}
        twice = sorted(set(built) & set(entries))
        if twice:
            raise NamespaceError(f"namespace schema {self.family}/{n}: op type {twice[0]!r} defined twice")
        schema = NamespaceSchema(f"{self.family}/{n}", (), default_type_system=TYPE_SYSTEM,
                                 meta={"onnx_version": onnx_version(), "domain": self.domain, "opset": n})
        schema._ops = _OpSchemas(entries, self.domain, built)  # type: ignore[assignment]
        return schema


_ENTRY_KEYS = frozenset({"name", "inputs", "outputs", "attrs", "type_constraints", "since", "deprecated", "doc"})
"""What :func:`_op_schema` reads of a cached entry (checked when an opset's schema is made, so a malformed cache
is reported then, though each op schema is built on first use)."""


class _OpSchemas(Mapping[str, OpSchema]):
    """The op schemas of one opset by type, each made from its cached entry when first asked for: a conversion
    looks up the few op types its graph holds, not the two hundred an opset has (building them all takes 3 ms
    per opset, and a conversion from 13 to 21 visits nine)."""

    def __init__(self, entries: dict[str, dict[str, Any]], domain: str, built: dict[str, OpSchema]) -> None:
        self._entries = entries
        self._domain = domain
        self._built = built
        self._names = list(entries) + [name for name in built if name not in entries]

    def __getitem__(self, name: str) -> OpSchema:
        found = self._built.get(name)
        if found is None:
            entry = self._entries[name]  # (KeyError: no such op)
            try:
                found = _op_schema(entry, self._domain)
            except (KeyError, TypeError) as e:
                raise NamespaceError(f"the cached ONNX schema data for {self._domain} under {cache_dir()} is "
                                     f"malformed ({type(e).__name__}: {e}); delete that file to regenerate it"
                                     ) from None
            self._built[name] = found
        return found

    def __contains__(self, name: object) -> bool:
        return name in self._built or name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def _array(value: Any, dtype: str | None = None) -> Any:
    """A read-only numpy array for a constant's value (lazy tensors are loaded)."""
    import numpy as np

    if value is None:
        return None
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        value = value.numpy()
    if isinstance(value, np.ndarray):
        return value
    if dtype is None:
        flat = value
        while isinstance(flat, (list, tuple)) and flat:
            flat = flat[0]
        if isinstance(flat, bool):
            dtype = "bool"
        elif isinstance(flat, int):
            dtype = "int64"
        elif isinstance(flat, float):
            dtype = "float32"
    arr = np.asarray(value, dtype=dtype)
    arr.flags.writeable = False
    return arr


def namespace_providers() -> list[OnnxNamespaces]:
    """One provider per ONNX domain with ops (from the cached index)."""
    return [OnnxNamespaces(d["domain"], int(d["first"]), int(d["last"])) for d in index()["domains"]]
