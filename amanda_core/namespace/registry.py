"""The namespace registry: which namespaces exist and where their schemas come from.

A :class:`NamespaceProvider` serves one family (``amanda/onnx``) and every
version of it that it knows.  Listing versions must be cheap (no framework
import once caches are warm); building a schema may be expensive and is done
once per version, on demand.

Version resolution (see ``docs/namespaces.md``):

* ``amanda/tensorflow/2.21.0`` - exact (PEP 440 equality, so ``2.21`` also
  matches ``2.21.0``);
* ``amanda/onnx/>=13,<18`` - the newest registered version in the range;
* ``amanda/onnx`` - the newest registered version.

Within one ONNX namespace the op schema in force at opset N is the newest one
whose since-version is at most N; the ONNX provider applies that rule when it
builds ``amanda/onnx/N``.
"""

from __future__ import annotations

__all__ = ["NamespaceProvider", "StaticNamespaces", "NamespaceRegistry", "ConstantOp", "NOT_CONSTANT"]

from typing import TYPE_CHECKING, Any, Iterable, Sequence

import attrs

from ..errors import NamespaceError
from .names import is_within, parse_namespace, parse_spec, version_key
from .schema import NamespaceSchema
from .types import TypeSystem, TypeSystemRegistry

if TYPE_CHECKING:
    from ..ir.graph import Op


class _NotConstant:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NOT_CONSTANT"

    def __bool__(self) -> bool:
        return False


NOT_CONSTANT: Any = _NotConstant()
"""What :meth:`NamespaceProvider.constant_value` returns for an op that is not a constant."""


@attrs.frozen
class ConstantOp:
    """How a family writes a constant: an op of ``type`` with ``attrs``, whose output port ``port`` gives it."""

    type: str
    attrs: dict[str, Any]
    port: str
    shared: bool = False
    """Several inputs may read one such op: the family holds a plain literal (a number, a string, a list of
    them) as a value any number of ops can take, so a table application feeds every input that asks for the same
    literal from one op instead of one op each (see :func:`amanda_core.mapping.rewrite.literal_key`)."""


class NamespaceProvider:
    """Serves the namespaces of one family; subclass and override."""

    family: str = ""
    description: str = ""
    dtype_type_system: str | None = None
    """The type system that parses this family's port dtype strings (``onnx``, ``tf``, ``torch``), used when a
    port's schema slot does not say (graph ports, namespaces with no schema registered)."""

    def versions(self) -> Sequence[str]:
        """Every version of the family this provider can give a schema for."""
        return ()

    def schema(self, version: str | None) -> NamespaceSchema:
        """The namespace schema of ``family/version``."""
        raise NamespaceError(f"{type(self).__name__} gives no schemas")

    def constant_value(self, op: Op) -> Any:
        """The value ``op`` stands for if it is one of this family's constants (torch ``prim::Constant``, ONNX
        ``Constant`` and ``Initializer``, TF ``Const``), as mapping rules read it (``consts:``): plain Python for
        literals, numpy arrays for tensors; :data:`NOT_CONSTANT` otherwise."""
        return NOT_CONSTANT

    def make_constant(self, value: Any, version: str | None) -> ConstantOp | None:
        """How to write ``value`` as a constant op of ``family/version`` (None: this family cannot)."""
        return None


class StaticNamespaces(NamespaceProvider):
    """Fixed schemas (from YAML files or code) of one family."""

    def __init__(self, schemas: Iterable[NamespaceSchema], description: str = "") -> None:
        self._schemas: dict[str | None, NamespaceSchema] = {}
        family = None
        for s in schemas:
            n = parse_namespace(s.namespace)
            if family is not None and n.family != family:
                raise NamespaceError(f"StaticNamespaces mixes families {family} and {n.family}")
            family = n.family
            self._schemas[n.version] = s
        if family is None:
            raise NamespaceError("StaticNamespaces needs at least one schema")
        self.family = family
        self.description = description

    def versions(self) -> Sequence[str]:
        return [v for v in self._schemas if v is not None]

    def schema(self, version: str | None) -> NamespaceSchema:
        try:
            return self._schemas[version]
        except KeyError:
            raise NamespaceError(f"no schema for {self.family}/{version}") from None


class NamespaceRegistry:
    """Every registered namespace family, their versions, and their schemas."""

    def __init__(self, type_systems: TypeSystemRegistry | None = None) -> None:
        self.type_systems = type_systems or TypeSystemRegistry()
        self._providers: dict[str, list[tuple[NamespaceProvider, str | None]]] = {}
        self._schemas: dict[str, NamespaceSchema] = {}
        self._resolved: dict[str, str] = {}
        self.generation = 0
        """How many providers were added: what a namespace name resolves to can change only when it grows."""

    def add(self, provider: NamespaceProvider, plugin: str | None = None) -> None:
        if not provider.family:
            raise NamespaceError(f"namespace provider {provider!r} has no family")
        parse_namespace(provider.family)
        self._providers.setdefault(provider.family, []).append((provider, plugin))
        self._resolved.clear()
        self.generation += 1

    def add_schema(self, schema: NamespaceSchema, plugin: str | None = None) -> None:
        """Register one fixed schema (its namespace name gives family and version)."""
        self.add(StaticNamespaces([schema]), plugin)

    def add_type_system(self, ts: TypeSystem) -> None:
        self.type_systems.add(ts)

    def constant_value(self, op: Op, namespace: str | None) -> Any:
        """The value of ``op`` if the family of ``namespace`` (the op's namespace) counts it as a constant, else
        :data:`NOT_CONSTANT`."""
        if namespace is None:
            return NOT_CONSTANT
        try:
            family = parse_namespace(namespace).family
        except NamespaceError:
            return NOT_CONSTANT
        for provider, _plugin in self.providers(family):
            value = provider.constant_value(op)
            if value is not NOT_CONSTANT:
                return value
        return NOT_CONSTANT

    def make_constant(self, value: Any, namespace: str) -> ConstantOp:
        """The constant op that gives ``value`` in ``namespace``; an error if its family has no constants."""
        n = parse_namespace(namespace)
        for provider, _plugin in self.providers(n.family):
            made = provider.make_constant(value, n.version)
            if made is not None:
                return made
        raise NamespaceError(f"no registered provider of {n.family} says how to write a constant")

    def families(self) -> list[str]:
        return sorted(self._providers)

    def providers(self, family: str) -> list[tuple[NamespaceProvider, str | None]]:
        return list(self._providers.get(family, ()))

    def dtype_type_system(self, namespace: str) -> str | None:
        """The type system of the port dtypes of ``namespace``'s family, as its provider declares it."""
        try:
            family = parse_namespace(namespace).family
        except NamespaceError:
            return None
        for provider, _ in self._providers.get(family, ()):
            if provider.dtype_type_system:
                return provider.dtype_type_system
        return None

    def versions(self, family: str) -> list[str]:
        seen: dict[str, None] = {}
        for provider, _ in self._providers.get(family, ()):
            for v in provider.versions():
                seen[v] = None
        return sorted(seen, key=version_key)

    def namespaces(self) -> list[tuple[str, str | None]]:
        """Every known namespace name with the plugin that registered it."""
        out: list[tuple[str, str | None]] = []
        for family in self.families():
            for provider, plugin in self._providers[family]:
                versions = sorted(provider.versions(), key=version_key)
                if not versions:
                    out.append((family, plugin))
                out.extend((f"{family}/{v}", plugin) for v in versions)
        return out

    def resolve(self, name: str) -> str:
        """The registered namespace name that ``name`` (exact, range or family) means (remembered until a provider
        is added: conversions ask for the same few names again and again)."""
        found = self._resolved.get(name)
        if found is None:
            found = self._resolved[name] = self._resolve(name)
        return found

    def _resolve(self, name: str) -> str:
        spec = parse_spec(name)
        providers = self._providers.get(spec.family)
        if not providers:
            near = [f for f in self._providers if is_within(f, spec.family) or is_within(spec.family, f)]
            hint = f"; did you mean one of: {', '.join(near)}" if near else ""
            known = ", ".join(self.families()) or "none (no plugin registered any)"
            raise NamespaceError(f"unknown namespace {name!r}{hint}; known families: {known}")
        versions = self.versions(spec.family)
        if spec.exact is None and spec.specifier is None:
            if not versions:
                return spec.family
            return f"{spec.family}/{versions[-1]}"
        chosen = spec.select(versions)
        if chosen is None:
            shown = _shorten(versions)
            raise NamespaceError(
                f"namespace {name!r} is not registered: {spec.family} has version(s) {shown}; "
                f"pick one of them (for example with --namespace {spec.family}/{versions[-1] if versions else '?'})"
            )
        return f"{spec.family}/{chosen}"

    def schema(self, name: str) -> NamespaceSchema:
        """The schema of namespace ``name`` (resolved as in :meth:`resolve`), built once."""
        resolved = self.resolve(name)
        cached = self._schemas.get(resolved)
        if cached is not None:
            return cached
        n = parse_namespace(resolved)
        errors = []
        for provider, _plugin in self._providers[n.family]:
            if n.version is None or n.version in provider.versions() or any(
                    parse_spec(f"{n.family}/{v}").matches(resolved) for v in provider.versions()):
                try:
                    schema = provider.schema(n.version)
                except NamespaceError as e:
                    errors.append(str(e))
                    continue
                self._schemas[resolved] = schema
                return schema
        raise NamespaceError(f"no provider could build the schema of {resolved}: {'; '.join(errors)}")

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            self.resolve(name)
        except NamespaceError:
            return False
        return True


def _shorten(versions: list[str]) -> str:
    if len(versions) > 8:
        return f"{versions[0]} ... {versions[-1]} ({len(versions)} versions)"
    return ", ".join(versions) or "none"
