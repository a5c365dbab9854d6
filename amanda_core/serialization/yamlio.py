"""Safe YAML reading and deterministic YAML writing, shared by every text format.

Only safe loaders are used (``CSafeLoader`` when libyaml is present).  Parsing
is fast and keeps no positions; when a later check fails, :func:`locate`
parses the text once more to find the line of the offending key.
"""

from __future__ import annotations

import functools

__all__ = ["safe_load", "dump_yaml", "read_yaml_text", "locate", "Loader", "Dumper"]

import os
from typing import Any, Sequence

import yaml

from ..errors import FormatError, Location

_BaseLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_BaseDumper: type = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class Loader(_BaseLoader):  # type: ignore[misc,valid-type]
    """The safe loader, extended with Amanda's tags by the format modules."""


class Dumper(_BaseDumper):  # type: ignore[misc,valid-type]
    """The safe dumper, extended with Amanda's representers."""


def read_yaml_text(source: str | os.PathLike[str], filename: str | None = None) -> tuple[str, str | None]:
    """Text and file name of ``source``: a path to a file, or YAML text itself."""
    if isinstance(source, os.PathLike) or (filename is None and "\n" not in str(source)
                                            and os.path.exists(str(source))):
        path = os.fspath(source)
        try:
            with open(path, encoding="utf-8") as f:
                return f.read(), path
        except UnicodeDecodeError as e:
            raise FormatError(f"not a UTF-8 text file ({e.reason} at byte {e.start})", Location(path)) from None
        except OSError as e:
            raise FormatError(f"cannot read file: {e.strerror}", Location(path)) from None
    return str(source), filename


def safe_load(text: str, filename: str | None = None, loader: type | None = None) -> Any:
    """Parse YAML safely; a syntax error becomes a FormatError with file and line."""
    try:
        return yaml.load(text, Loader=loader or Loader)  # noqa: S506 - Loader derives from SafeLoader
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        loc = Location(filename, mark.line + 1, mark.column + 1) if mark else Location(filename)
        problem = " ".join(p for p in (e.context, e.problem) if p) or "malformed YAML"
        raise FormatError(problem, loc) from None
    except yaml.YAMLError as e:
        raise FormatError(f"malformed YAML: {e}", Location(filename)) from None


def dump_yaml(data: Any, dumper: type | None = None) -> str:
    """Deterministic block-style YAML (keys in insertion order)."""
    return yaml.dump(data, Dumper=dumper or Dumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=120)


@functools.lru_cache(maxsize=4)
def _compose(text: str) -> Any:
    """The node tree of a document, composed once per text (a table asks for hundreds of locations in it)."""
    try:
        return yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return None


def locate(text: str, path: Sequence[str | int], filename: str | None = None) -> Location:
    """The location of the node at ``path`` (mapping keys and list indexes),
    or of the deepest node on the way that exists."""
    node = _compose(text)
    if node is None:
        return Location(filename)
    best = node
    for key in path:
        if node is None:
            break
        nxt = None
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value == str(key):
                    best, nxt = k, v
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
            nxt = node.value[key]
            best = nxt
        node = nxt
        if nxt is None:
            break
    if best is None:
        return Location(filename)
    return Location(filename, best.start_mark.line + 1, best.start_mark.column + 1)
