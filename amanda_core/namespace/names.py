"""Namespace names, versions and version ranges.

A namespace name is a ``/``-separated path: ``amanda/tensorflow/2.21.0`` lies
inside ``amanda/tensorflow``, which lies inside ``amanda``.  When the last
component is a version (it starts with a digit) the rest is the *family*:

========================================  =========================  =========
name                                      family                     version
========================================  =========================  =========
``amanda/onnx/13``                        ``amanda/onnx``            ``13``
``amanda/onnx/ai.onnx.ml/3``              ``amanda/onnx/ai.onnx.ml`` ``3``
``amanda/tensorflow/2.21.0``              ``amanda/tensorflow``      ``2.21.0``
``amanda/example``                        ``amanda/example``         (none)
========================================  =========================  =========

A *namespace spec* may put a PEP 440 version range where the version goes:
``amanda/onnx/>=13``, ``amanda/tensorflow/>=2.15,<3``, ``amanda/pytorch/==2.*``;
a bare family (``amanda/onnx``) matches every version.  Versions compare by PEP
440 rules (``2.13`` equals ``2.13.0``; a local label like ``+cpu`` is ignored).
"""

from __future__ import annotations

__all__ = ["NamespaceName", "NamespaceSpec", "parse_namespace", "parse_spec", "spec_matches", "is_within",
           "normalize_version", "version_key"]

import re
from functools import lru_cache
from typing import Iterable

import attrs
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from ..errors import NamespaceError

_SPEC_START = re.compile(r"^(==|!=|<=|>=|<|>|~=|===)")
_COMPONENT = re.compile(r"^[A-Za-z0-9_.+\-]+$")


@lru_cache(maxsize=4096)
def _version(text: str) -> Version | None:
    try:
        v = Version(text)
    except InvalidVersion:
        return None
    return Version(v.public) if v.local else v


def normalize_version(text: str) -> str:
    """``2.13.0+cpu`` -> ``2.13.0``; text that is no PEP 440 version is kept."""
    v = _version(text)
    return v.public if v is not None else text


def version_key(text: str) -> tuple[int, Version | str]:
    """Sort key: PEP 440 versions in order, other strings after them."""
    v = _version(text)
    return (0, v) if v is not None else (1, text)  # type: ignore[return-value]


def _is_version(component: str) -> bool:
    return bool(component) and component[0].isdigit()


@attrs.frozen
class NamespaceName:
    """A parsed namespace name: ``family`` plus an optional ``version``."""

    family: str
    version: str | None = None

    def __str__(self) -> str:
        return f"{self.family}/{self.version}" if self.version is not None else self.family

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(str(self).split("/"))


@lru_cache(maxsize=4096)
def parse_namespace(text: str) -> NamespaceName:
    """Parse ``amanda/onnx/13``; raises NamespaceError on a malformed name."""
    if not isinstance(text, str) or not text.strip():
        raise NamespaceError(f"namespace name must be a non-empty string, got {text!r}")
    parts = text.strip().strip("/").split("/")
    for p in parts:
        if not _COMPONENT.match(p):
            raise NamespaceError(f"malformed namespace {text!r}: bad component {p!r}")
    if len(parts) > 1 and _is_version(parts[-1]):
        return NamespaceName("/".join(parts[:-1]), parts[-1])
    return NamespaceName("/".join(parts))


@attrs.frozen
class NamespaceSpec:
    """A family with a version constraint: exact, a PEP 440 range, or any."""

    family: str
    exact: str | None = None
    specifier: SpecifierSet | None = None

    def __str__(self) -> str:
        if self.exact is not None:
            return f"{self.family}/{self.exact}"
        if self.specifier is not None:
            return f"{self.family}/{self.specifier}"
        return self.family

    def matches_version(self, version: str | None) -> bool:
        if self.exact is not None:
            if version is None:
                return False
            a, b = _version(self.exact), _version(version)
            return a == b if a is not None and b is not None else self.exact == version
        if self.specifier is not None:
            v = _version(version) if version is not None else None
            return v is not None and self.specifier.contains(v, prereleases=True)
        return True

    def matches(self, name: str | NamespaceName) -> bool:
        n = parse_namespace(name) if isinstance(name, str) else name
        return n.family == self.family and self.matches_version(n.version)

    def select(self, versions: Iterable[str]) -> str | None:
        """The newest of ``versions`` this spec admits, or None."""
        ok = [v for v in versions if self.matches_version(v)]
        return max(ok, key=version_key) if ok else None


@lru_cache(maxsize=16384)
def spec_matches(spec: str, namespace: str) -> bool:
    """``parse_spec(spec).matches(namespace)``, remembered (the planner asks it of every table at every step);
    False when either does not parse."""
    try:
        return parse_spec(spec).matches(namespace)
    except NamespaceError:
        return False


@lru_cache(maxsize=4096)
def parse_spec(text: str) -> NamespaceSpec:
    """Parse ``amanda/onnx/>=13,<18`` (or an exact name, or a bare family)."""
    text = text.strip().strip("/")
    head, _, last = text.rpartition("/")
    if head and _SPEC_START.match(last):
        try:
            spec = SpecifierSet(last)
        except InvalidSpecifier as e:
            raise NamespaceError(f"malformed version range in namespace {text!r}: {e}") from None
        parse_namespace(head)
        return NamespaceSpec(head, specifier=spec)
    n = parse_namespace(text)
    return NamespaceSpec(n.family, exact=n.version)


def is_within(inner: str, outer: str) -> bool:
    """True if namespace ``inner`` equals ``outer`` or lies inside it."""
    a = inner.strip("/").split("/")
    b = outer.strip("/").split("/")
    return a[: len(b)] == b
