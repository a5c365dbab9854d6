"""Amanda's YAML value tags: the safe loader and the deterministic dumper of graph files, and the registry of
value types plugins add (``register_value_type``).  The tags themselves are described in ``graph_yaml``."""

from __future__ import annotations

import re
from typing import Any, Callable

import yaml

from .yamlio import Dumper, Loader

__all__ = ["GraphDumper", "GraphLoader", "add_tag_source", "register_value_type"]


class Tagged:
    """A tagged node read from YAML, turned into a value once the whole file is read."""

    __slots__ = ("tag", "value", "line")

    def __init__(self, tag: str, value: Any, line: int) -> None:
        self.tag = tag
        self.value = value
        self.line = line


class GraphLoader(Loader):
    """Safe loader for graph files: Amanda's tags, duplicate mapping keys refused."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._resolved: dict[tuple[str, bool], str] = {}

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        # Graph files repeat the same scalars (keys, port names, dtypes) many times; resolving a plain scalar's
        # tag runs regular expressions, so remember each answer for the length of one load.
        if kind is yaml.ScalarNode and implicit[0]:
            key = (value, implicit[1])
            tag = self._resolved.get(key)
            if tag is None:
                tag = self._resolved[key] = super().resolve(kind, value, implicit)
            return tag
        return super().resolve(kind, value, implicit)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        self.flatten_mapping(node)
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key = key_node.value
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        "while reading a mapping", node.start_mark, f"found duplicate key {key!r}",
                        key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]


def _construct_tagged(loader: GraphLoader, suffix: str, node: yaml.Node) -> Tagged:
    if isinstance(node, yaml.MappingNode):
        value: Any = loader.construct_mapping(node, deep=True)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_scalar(node)  # type: ignore[arg-type]
    return Tagged(suffix, value, node.start_mark.line + 1)


GraphLoader.add_multi_constructor("!", _construct_tagged)


class Out:
    """A tagged value to write."""

    __slots__ = ("tag", "value", "flow")

    def __init__(self, tag: str, value: Any, flow: bool = True) -> None:
        self.tag = tag
        self.value = value
        self.flow = flow


class GraphDumper(Dumper):
    """Deterministic dumper for graph files."""


def _represent_out(dumper: GraphDumper, data: Out) -> yaml.Node:
    if isinstance(data.value, dict):
        return dumper.represent_mapping("!" + data.tag, data.value, flow_style=data.flow)
    return dumper.represent_sequence("!" + data.tag, data.value, flow_style=data.flow)


class Flow(list):  # type: ignore[type-arg]
    """A list written in flow style (``[1, 2]``)."""


class FlowDict(dict):  # type: ignore[type-arg]
    """A mapping written in flow style (``{a: 1}``)."""


GraphDumper.add_representer(Out, _represent_out)
GraphDumper.add_representer(Flow, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))
GraphDumper.add_representer(FlowDict, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v,
                                                                        flow_style=True))


# --------------------------------------------------------------------------- plugin value types

VALUE_TYPES: dict[str, tuple[type, Callable[[Any], Any], Callable[[Any], Any]]] = {}
VALUE_TAGS: dict[type, str] = {}


def register_value_type(tag: str, cls: type, encode: Callable[[Any], Any], decode: Callable[[Any], Any]) -> None:
    """Let attribute values of class ``cls`` be written as ``!tag``.

    ``encode(value)`` returns plain attribute values (dicts, lists, tensors, graphs ...) and ``decode`` builds
    the object back from them.  Plugins call this when their module is imported.
    """
    if tag in ("tensor", "graph", "tuple", "scalar"):
        raise ValueError(f"tag !{tag} is Amanda's own")
    if not re.match(r"^[A-Za-z][A-Za-z0-9_.\-]*$", tag):
        raise ValueError(f"malformed tag {tag!r}")
    VALUE_TYPES[tag] = (cls, encode, decode)
    VALUE_TAGS[cls] = tag


TAG_SOURCES: list[Callable[[], None]] = []


def add_tag_source(load: Callable[[], None]) -> None:
    """Register a function that may define more value types (by loading plugins) when a reader meets a tag no one
    registered.  The plugin manager registers its ``load`` when it is imported, so serialization never imports the
    layer above it."""
    if load not in TAG_SOURCES:
        TAG_SOURCES.append(load)

