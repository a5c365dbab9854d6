"""Safe YAML reading and deterministic YAML writing, shared by every text format.

Only safe loaders are used (``CSafeLoader`` when libyaml is present).  Parsing
is fast and keeps no positions; when a later check fails, :func:`locate`
parses the text once more to find the line of the offending key (a reader
that will ask for many, like a table's, has them kept as it parses).
"""

from __future__ import annotations

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


def safe_load(text: str, filename: str | None = None, loader: type | None = None, *, positions: bool = False
              ) -> Any:
    """Parse YAML safely; a syntax error becomes a FormatError with file and line.

    ``positions``: for a caller that will ask :func:`locate` for many places in ``text`` (a table compiles each
    expression under its line): the node tree parsed here is indexed for it, instead of the text being parsed
    once more on the first question."""
    try:
        if not positions:
            return yaml.load(text, Loader=loader or Loader)  # noqa: S506 - Loader derives from SafeLoader
        parser = (loader or Loader)(text)
        try:
            node = parser.get_single_node()
            data = parser.construct_document(node) if node is not None else None
        finally:
            parser.dispose()
        _remember(text, _index(node))
        return data
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


_Positions = dict[tuple[str | int, ...], tuple[int, int]]
_POSITIONS: dict[str, _Positions | None] = {}
"""The positions of the last few texts asked about (a table asks for hundreds of locations in its text)."""
_KEEP = 4


def _remember(text: str, positions: _Positions | None) -> None:
    _POSITIONS.pop(text, None)
    _POSITIONS[text] = positions
    while len(_POSITIONS) > _KEEP:
        del _POSITIONS[next(iter(_POSITIONS))]


def _positions(text: str) -> _Positions | None:
    if text in _POSITIONS:
        return _POSITIONS[text]
    try:
        root = yaml.compose(text, Loader=_BaseLoader)
    except yaml.YAMLError:
        root = None
    found = _index(root)
    _remember(text, found)
    return found


def _index(root: Any) -> _Positions | None:
    """Where each node of a document's tree starts (1-based line and column), by its path: mapping keys as strings
    (the key's own position), list indexes as ints; a key repeated in a mapping is found at its first place."""
    if root is None:
        return None
    out: _Positions = {}
    stack: list[tuple[tuple[str | int, ...], Any, Any]] = [((), root, root)]
    while stack:
        path, mark_node, node = stack.pop()
        if path in out:
            continue
        out[path] = (mark_node.start_mark.line + 1, mark_node.start_mark.column + 1)
        if isinstance(node, yaml.MappingNode):
            for k, v in reversed(node.value):
                if isinstance(k, yaml.ScalarNode):
                    stack.append(((*path, k.value), k, v))
        elif isinstance(node, yaml.SequenceNode):
            for i in range(len(node.value) - 1, -1, -1):
                item = node.value[i]
                stack.append(((*path, i), item, item))
    return out


def locate(text: str, path: Sequence[str | int], filename: str | None = None) -> Location:
    """The location of the node at ``path`` (mapping keys and list indexes),
    or of the deepest node on the way that exists."""
    positions = _positions(text)
    if positions is None:
        return Location(filename)
    found: tuple[str | int, ...] = ()
    for key in path:
        step: tuple[str | int, ...] = (*found, key)
        if not (isinstance(key, int) and step in positions):  # a list's index, or else a mapping's key
            step = (*found, str(key))
            if step not in positions:
                break
        found = step
    line, column = positions[found]
    return Location(filename, line, column)
