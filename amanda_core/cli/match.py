"""``amanda match FILE QUERY``: where a graph regular expression matches in a model.

::

    amanda match model.yaml "Transpose#a -> Transpose#b"          # one line per match
    amanda match model.onnx "Conv -> Relu+" --json                 # a JSON list of matches
    amanda match model.yaml "Relu -> Relu" --all                   # overlapping matches too
    amanda match model.yaml "Conv[big($)]" --function big=mypkg.preds:is_big

FILE is a YAML graph or any model file a plugin imports.  The op types of the query are checked against the
schema of the graph's namespace when a plugin provides it (``--no-schema`` skips the check).  Exit status: 0 when
something matched, 1 when nothing did, 2 on an error (a bad query, an unreadable file).

:func:`add_match_command` registers the command on the ``amanda`` parser; :func:`main` runs it alone
(``python -m amanda_core.cli.match``).
"""

from __future__ import annotations

__all__ = ["add_match_command", "cmd_match", "main"]

import argparse
import importlib
import json
import sys
from typing import Any, Callable, Sequence

from ..errors import AmandaError, NamespaceError, SchemaError
from ..matching.types import Match
from ..namespace.schema import NamespaceSchema

EXIT_OK = 0
EXIT_NONE = 1
EXIT_ERROR = 2


def _load_function(spec: str) -> tuple[str, Callable[..., Any]]:
    name, eq, target = spec.partition("=")
    module, colon, attr = target.partition(":")
    if not eq or not colon or not name or not module or not attr:
        raise AmandaError(f"--function {spec!r}: write NAME=MODULE:ATTRIBUTE (e.g. big=mypkg.preds:is_big)")
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        raise AmandaError(f"--function {spec!r}: cannot import module {module!r}: {e}") from None
    obj: Any = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise AmandaError(f"--function {spec!r}: module {module!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise AmandaError(f"--function {spec!r}: {module}:{attr} is not callable")
    return name, obj


def _schema_for(namespace: str | None) -> tuple[NamespaceSchema | None, str | None]:
    """The schema of ``namespace`` from the installed plugins, or None with the reason."""
    if namespace is None:
        return None, "the graph has no namespace"
    from ..plugin.manager import registry

    try:
        return registry().namespaces.schema(namespace), None
    except (NamespaceError, SchemaError) as e:
        return None, str(e)


def _in_file(op: Any) -> dict[str, Any]:
    """How the op can be found in the file it came from: its name when the file names it; otherwise (an
    importer records ``meta["name"] = None`` for an op the file leaves unnamed, as ONNX nodes may be) the names
    of the values it writes (``meta["outputs"]``) and its position among its graph's ops."""
    meta = op.meta if isinstance(getattr(op, "meta", None), dict) else {}
    if "name" not in meta or meta["name"] == op.name:
        return {"name": op.name}
    info: dict[str, Any] = {"name": meta["name"]}
    outs = meta.get("outputs")
    if isinstance(outs, dict):
        info["outputs"] = [v for v in outs.values() if v]
    graph = op.graph
    if graph is not None:
        for i, other in enumerate(graph.ops.values()):
            if other is op:
                info["index"] = i
                break
    return info


def _label(op: Any) -> str:
    info = _in_file(op)
    if info["name"] == op.name and len(info) == 1:
        return f"{op.name} ({op.type})"
    where = []
    if info.get("outputs"):
        where.append("writes " + ", ".join(repr(v) for v in info["outputs"]))
    if "index" in info and not info.get("outputs"):
        where.append(f"op #{info['index']} of its graph")
    named = f"named {info['name']!r} in the file" if info["name"] else "unnamed in the file"
    return f"{op.type} ({named}; {'; '.join(where) or 'called ' + op.name + ' here'})"


def _describe(m: Match) -> str:
    return ", ".join(f"{key}={_label(op)}" for key, op in m.ops.items())


def cmd_match(args: argparse.Namespace) -> int:
    """Run ``amanda match`` with parsed arguments; errors are raised as AmandaError (exit 2 in ``main``)."""
    from ..io import load_model
    from ..regex import compile_query, match

    functions = dict(_load_function(spec) for spec in (args.function or ()))
    query = compile_query(args.query, functions)  # syntax errors before the (possibly slow) model load
    graph = load_model(args.file)
    schema = None
    if not args.no_schema:
        schema, why = _schema_for(graph.namespace)
        if schema is None:
            print(f"note: op types are not checked against a schema ({why})", file=sys.stderr)
    found = match(graph, query, functions=functions, non_overlapping=not args.all, schema=schema)
    if args.json:
        print(json.dumps([{"ops": [{"key": k, "name": op.name, "type": op.type,
                                    **({"in_file": _in_file(op)} if _in_file(op) != {"name": op.name} else {})}
                                   for k, op in m.ops.items()]}
                          for m in found], indent=2))
    else:
        for m in found:
            print(_describe(m))
        if not found:
            print(f"no match in {args.file}", file=sys.stderr)
    return EXIT_OK if found else EXIT_NONE


def add_match_command(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``match`` on the sub-command parsers of the ``amanda`` command (returns its parser)."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "match", help="find where a graph regular expression matches (exit 1 if nowhere)",
        description="Find where a graph regular expression (docs/graph-regex.md) matches in a model. "
                    "Exit status: 0 with matches, 1 with none, 2 on an error.")
    p.add_argument("file", metavar="FILE", help="a YAML graph or a model file a plugin imports")
    p.add_argument("query", metavar="QUERY", help="e.g. \"Conv[group == 1] -> Relu+\"")
    p.add_argument("--json", action="store_true", help="print a JSON list of matches (op keys, names, types)")
    p.add_argument("--all", action="store_true",
                   help="list every match, overlapping ones too (default: a non-overlapping set)")
    p.add_argument("--function", action="append", metavar="NAME=MODULE:ATTR",
                   help="make a Python callable usable as NAME(...) in predicates (repeatable)")
    p.add_argument("--no-schema", action="store_true",
                   help="do not check the query's op types against the graph's namespace schema")
    p.set_defaults(func=cmd_match)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m amanda_core.cli.match FILE QUERY ...``: the command on its own."""
    parser = argparse.ArgumentParser(prog="amanda")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_match_command(sub)
    args = parser.parse_args(["match", *(sys.argv[1:] if argv is None else argv)])
    try:
        return int(args.func(args))
    except AmandaError as e:
        print(f"amanda: error: {e}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
