"""Namespaces (``docs/namespaces.md``): names and
versions, namespace schemas, pluggable type systems, the registry, validation."""

from .names import NamespaceName, NamespaceSpec, is_within, parse_namespace, parse_spec
from .registry import NamespaceProvider, NamespaceRegistry, StaticNamespaces
from .schema import (
    NO_DEFAULT,
    AttrSchema,
    NamespaceSchema,
    OpSchema,
    PortSchema,
    dump_schema,
    load_schema,
    op_schema_from_dict,
    op_schema_to_dict,
    schema_from_dict,
    schema_to_dict,
)
from .types import PythonTypeSystem, TypeSystem, TypeSystemRegistry
from .validate import Problem, fill_defaults, match_ports, validate

__all__ = [
    "NO_DEFAULT",
    "AttrSchema",
    "NamespaceName",
    "NamespaceProvider",
    "NamespaceRegistry",
    "NamespaceSchema",
    "NamespaceSpec",
    "OpSchema",
    "PortSchema",
    "Problem",
    "PythonTypeSystem",
    "StaticNamespaces",
    "TypeSystem",
    "TypeSystemRegistry",
    "dump_schema",
    "fill_defaults",
    "is_within",
    "load_schema",
    "match_ports",
    "op_schema_from_dict",
    "op_schema_to_dict",
    "parse_namespace",
    "parse_spec",
    "schema_from_dict",
    "schema_to_dict",
    "validate",
]
