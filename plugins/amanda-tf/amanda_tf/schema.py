"""The ``amanda/tensorflow/<version>`` namespace schema, generated from TensorFlow's op registry.

Source: the serialized ``OpList`` of every op registered in the running
TensorFlow (``TF_GetAllOpList`` of the C API), so the schema lists exactly
the ops of the installed release: public ones, internal ``_``-prefixed ones,
deprecated ones.  (``tf.raw_ops`` lists fewer: only ops with Python wrappers.)

Per ``OpDef`` the op schema holds:

* input and output ports from ``input_arg``/``output_arg``, in order.  An arg
  with ``number_attr`` (``values: N * T``) or ``type_list_attr``
  (``output: Tout``) is a variadic port (``values_0``, ``values_1`` ...)
  whose least count is that attribute's ``minimum``; its meta says which
  attribute counts or types it (``number_attr``/``type_list_attr``).
* the port type, in the ``tf`` type system: the name of the arg's type
  attribute (``T``), its fixed type as a dtype name (``int32``,
  ``resource``), or its ``type_list_attr``; ``Ref(...)`` around it for a
  reference arg, which also carries ``is_ref: true`` in its meta.
* attributes typed ``tf.<OpDef type>`` (``tf.int``, ``tf.list(type)``),
  defaults decoded to Python values (:mod:`amanda_tf.attrs`), allowed values
  (dtype names for type attributes), ``minimum`` in the attribute's meta.
* ``commutative`` (every input port) for ``is_commutative`` ops;
  ``deprecated`` plus ``meta.deprecation`` (GraphDef version, explanation);
  ``meta`` flags ``is_stateful``, ``is_aggregate``,
  ``allows_uninitialized_input``, ``is_distributed_communication`` when set;
  the op's summary as ``doc``.

Generation imports TensorFlow (seconds) and is cached as JSON with
:func:`amanda_core.namespace.cache.cached_json`, keyed by the TensorFlow
release and :data:`GENERATOR_VERSION`; a warm cache builds the schema
without importing TensorFlow.
"""

from __future__ import annotations

__all__ = ["FAMILY", "GENERATOR_VERSION", "build_op_schema", "build_schema", "cache_key", "generate",
           "load_schema_data", "op_record", "read_op_list"]

from typing import Any, Iterable, Mapping

from amanda_core.errors import NamespaceError
from amanda_core.namespace.cache import cached_json
from amanda_core.namespace.schema import NO_DEFAULT, AttrSchema, NamespaceSchema, OpSchema, PortSchema

from .attrs import decode_attr_value, decode_json, encode_json
from .dtypes import dtype_from_enum
from .framework import DISTRIBUTIONS, import_tensorflow, same_release

FAMILY = "amanda/tensorflow"
GENERATOR_VERSION = "1"
"""Changes whenever generation changes what it writes, so that caches of older generators are not reused."""

_OP_FLAGS = ("is_stateful", "is_aggregate", "allows_uninitialized_input", "is_distributed_communication")


def cache_key(version: str) -> str:
    return f"amanda-tf-ops-{version}-gen{GENERATOR_VERSION}"


def read_op_list(distributions: Iterable[str] = DISTRIBUTIONS) -> Any:
    """The ``OpList`` message of every op registered in TensorFlow (imports it)."""
    import_tensorflow(tuple(distributions))
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session

    buf = pywrap_tf_session.TF_GetAllOpList()
    try:
        data = pywrap_tf_session.TF_GetBuffer(buf)
    finally:
        pywrap_tf_session.TF_DeleteBuffer(buf)
    op_list = op_def_pb2.OpList()
    op_list.ParseFromString(data)
    return op_list


def _port_record(arg: Any, attr_defs: Mapping[str, Any]) -> dict[str, Any]:
    if arg.type_attr:
        base = arg.type_attr
    elif arg.type_list_attr:
        base = arg.type_list_attr
    else:
        base = dtype_from_enum(int(arg.type))
    rec: dict[str, Any] = {"name": arg.name, "type": f"Ref({base})" if arg.is_ref else base}
    meta: dict[str, Any] = {}
    count_attr = arg.number_attr or arg.type_list_attr
    if count_attr:
        a = attr_defs.get(count_attr)
        rec["variadic"] = True
        rec["min_count"] = int(a.minimum) if a is not None and a.has_minimum else 0
        meta["number_attr" if arg.number_attr else "type_list_attr"] = count_attr
    if arg.is_ref:
        meta["is_ref"] = True
    if meta:
        rec["meta"] = meta
    if arg.description:
        rec["doc"] = arg.description
    return rec


def _allowed_values(attr: Any) -> list[Any] | None:
    if not attr.HasField("allowed_values"):
        return None
    base = attr.type[5:-1] if attr.type.startswith("list(") else attr.type
    value = decode_attr_value(attr.allowed_values, f"list({base})")
    return value if isinstance(value, list) else [value]


def _attr_record(attr: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {"name": attr.name, "type": f"tf.{attr.type}"}
    if attr.HasField("default_value"):
        rec["default"] = encode_json(decode_attr_value(attr.default_value, attr.type))
    allowed = _allowed_values(attr)
    if allowed is not None:
        rec["allowed_values"] = encode_json(allowed)
    if attr.has_minimum:
        rec["meta"] = {"minimum": int(attr.minimum)}
    if attr.description:
        rec["doc"] = attr.description
    return rec


def op_record(op_def: Any) -> dict[str, Any]:
    """The JSON form of one ``OpDef`` (what the cache stores per op)."""
    attr_defs = {a.name: a for a in op_def.attr}
    rec: dict[str, Any] = {
        "type": op_def.name,
        "inputs": [_port_record(a, attr_defs) for a in op_def.input_arg],
        "outputs": [_port_record(a, attr_defs) for a in op_def.output_arg],
        "attrs": [_attr_record(a) for a in op_def.attr],
    }
    if op_def.is_commutative:
        rec["commutative"] = [a.name for a in op_def.input_arg]
    meta: dict[str, Any] = {f: True for f in _OP_FLAGS if getattr(op_def, f)}
    if op_def.HasField("deprecation"):
        rec["deprecated"] = True
        meta["deprecation"] = {"version": int(op_def.deprecation.version),
                               "explanation": op_def.deprecation.explanation}
    if meta:
        rec["meta"] = meta
    if op_def.summary:
        rec["doc"] = op_def.summary
    return rec


def generate(version: str, distributions: Iterable[str] = DISTRIBUTIONS) -> dict[str, Any]:
    """Read the op registry of the running TensorFlow (imports it) into the cached JSON form.

    ``version`` is the release the package metadata names; the imported module must be that release (two
    TensorFlow distributions installed over each other can disagree), else the schema would be cached under
    the wrong version."""
    dists = tuple(distributions)
    tf = import_tensorflow(dists)
    loaded = str(getattr(tf, "__version__", ""))
    if not same_release(loaded, version):
        raise NamespaceError(f"the installed TensorFlow metadata says {version} but the module that imports is "
                             f"{loaded or 'of unknown version'}; more than one TensorFlow distribution "
                             f"({', '.join(dists)}) may be installed: uninstall all but one")
    op_list = read_op_list(dists)
    from tensorflow.python.framework import versions

    ops = sorted((op_record(o) for o in op_list.op), key=lambda r: r["type"])
    return {
        "generator": GENERATOR_VERSION,
        "tensorflow_version": version,
        "meta": {
            "tensorflow_version": version,
            "graph_def_version": int(versions.GRAPH_DEF_VERSION),
            "graph_def_version_min_consumer": int(versions.GRAPH_DEF_VERSION_MIN_CONSUMER),
            "graph_def_version_min_producer": int(versions.GRAPH_DEF_VERSION_MIN_PRODUCER),
            "op_count": len(ops),
            "generator": f"amanda-tf schema generator {GENERATOR_VERSION}",
            "source": "TF_GetAllOpList",
        },
        "ops": ops,
    }


def _is_current(data: Any, version: str) -> bool:
    return (isinstance(data, dict) and data.get("generator") == GENERATOR_VERSION
            and data.get("tensorflow_version") == version and isinstance(data.get("ops"), list))


def load_schema_data(version: str, distributions: Iterable[str] = DISTRIBUTIONS) -> dict[str, Any]:
    """The JSON form for ``version``: from the cache, else generated (and cached)."""
    dists = tuple(distributions)
    data = cached_json(cache_key(version), lambda: generate(version, dists))
    if not _is_current(data, version):  # a cache file someone else wrote under our key
        data = generate(version, dists)
    return data  # type: ignore[no-any-return]


def _port(rec: Mapping[str, Any]) -> PortSchema:
    return PortSchema(rec["name"], rec["type"], variadic=bool(rec.get("variadic", False)),
                      min_count=int(rec.get("min_count", 1)), doc=rec.get("doc", ""), meta=rec.get("meta") or {})


def _attr(rec: Mapping[str, Any]) -> AttrSchema:
    allowed = rec.get("allowed_values")
    return AttrSchema(rec["name"], rec["type"], decode_json(rec["default"]) if "default" in rec else NO_DEFAULT,
                      tuple(decode_json(allowed)) if allowed is not None else None, rec.get("doc", ""),
                      rec.get("meta") or {})


def build_op_schema(rec: Mapping[str, Any]) -> OpSchema:
    """The op schema of one cached op record."""
    return OpSchema(
        type=rec["type"],
        input_ports=tuple(_port(p) for p in rec["inputs"]),
        output_ports=tuple(_port(p) for p in rec["outputs"]),
        attrs=tuple(_attr(a) for a in rec["attrs"]),
        commutative=tuple(rec.get("commutative", ())),
        deprecated=bool(rec.get("deprecated", False)),
        doc=rec.get("doc", ""),
        meta=rec.get("meta") or {},
    )


def build_schema(data: Mapping[str, Any]) -> NamespaceSchema:
    """The namespace schema of a (cached) JSON form."""
    version = data["tensorflow_version"]
    return NamespaceSchema(f"{FAMILY}/{version}", [build_op_schema(r) for r in data["ops"]],
                           default_type_system="tf", meta=data["meta"])
