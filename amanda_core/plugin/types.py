"""What plugins register besides namespaces and type systems."""

from __future__ import annotations

__all__ = ["Importer", "Exporter", "Runner", "TypeInferer"]

import os
from typing import Any, Callable

import attrs

from ..ir.graph import Graph
from ..namespace.names import parse_spec


@attrs.frozen
class Importer:
    """Reads a model into a graph.

    ``load(source, **options)`` takes a path or a live object and returns a
    graph whose namespace lies in ``namespace`` (a family or version range).
    ``framework_versions`` is the PEP 440 range of the framework release this
    importer supports (``None``: any installed).
    """

    name: str
    namespace: str
    extensions: tuple[str, ...]
    load: Callable[..., Graph]
    framework: str | None = None
    framework_versions: str | None = None
    description: str = ""
    accepts: Callable[[Any], bool] | None = None

    def handles(self, source: Any) -> bool:
        if isinstance(source, (str, os.PathLike)):
            path = os.fspath(source).lower()
            return any(path.endswith(e) for e in self.extensions)
        return self.accepts(source) if self.accepts is not None else False


@attrs.frozen
class Exporter:
    """Writes a graph to a model.

    ``save(graph, target, **options)``; ``namespace`` is the family or range
    of namespaces it can write.  Writes must be atomic: on failure no partial
    file is left.
    """

    name: str
    namespace: str
    extensions: tuple[str, ...]
    save: Callable[..., Any]
    framework: str | None = None
    framework_versions: str | None = None
    description: str = ""

    def handles_path(self, path: str | os.PathLike[str]) -> bool:
        p = os.fspath(path).lower()
        return any(p.endswith(e) for e in self.extensions)

    def handles_namespace(self, namespace: str) -> bool:
        spec = parse_spec(self.namespace)
        return spec.matches(namespace)


@attrs.frozen
class Runner:
    """Runs a graph with a framework's runtime.

    ``run(graph, inputs)`` takes a dict of numpy arrays by graph input name and returns the graph outputs in
    order (a dict by output name); ``example_inputs(graph, seed)`` makes inputs that fit the graph's input ports
    (symbolic dimensions taken as 1 unless told otherwise).  ``namespace`` is the family or range it runs.
    """

    name: str
    namespace: str
    run: Callable[..., Any]
    example_inputs: Callable[..., Any]
    framework: str | None = None
    description: str = ""

    def handles_namespace(self, namespace: str) -> bool:
        return parse_spec(self.namespace).matches(namespace)


@attrs.frozen
class TypeInferer:
    """Fills in the value types a graph does not state, with the framework's own inference.

    ``infer(graph)`` gives a dtype to output ports that have none, where the framework can tell it, and returns
    how many it typed; it changes nothing else.  Conversions run it first, so that rules whose exactness depends
    on a value's type (an opset downgrade, say) can see the types of intermediate values.  ``namespace`` is the
    family or range it serves."""

    name: str
    namespace: str
    infer: Callable[[Graph], int]
    description: str = ""

    def handles_namespace(self, namespace: str) -> bool:
        return parse_spec(self.namespace).matches(namespace)
