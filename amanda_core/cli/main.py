"""The ``amanda`` command line.

Every command prints one clear message and exits non-zero on error;
``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections import Counter
from typing import Any, Sequence

from ..errors import AmandaError
from ..ir.graph import Graph
from ..ir.tensor import tensor_nbytes

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_ERROR = 2


def _registry() -> Any:
    from ..plugin.manager import registry

    return registry()


def load_model(path: str, warnings: list[str] | None = None) -> Graph:
    """Read a graph from a YAML file or from any format a plugin imports."""
    if not os.path.exists(path):
        raise AmandaError(f"{path}: no such file")
    lower = path.lower()
    if lower.endswith((".yaml", ".yml")):
        from ..serialization.graph_yaml import load_graph

        return load_graph(path, warnings=warnings)
    reg = _registry()
    for importer, _plugin in reg.importers:
        if importer.handles(path):
            return importer.load(path)
    known = sorted({e for imp, _ in reg.importers for e in imp.extensions} | {".yaml", ".yml"})
    raise AmandaError(f"{path}: no importer reads this kind of file (known extensions: {', '.join(known)}); "
                      "is the plugin for its framework installed?")


# --------------------------------------------------------------------------- commands


def cmd_plugins(args: argparse.Namespace) -> int:
    from ..plugin.manager import get_manager

    infos = get_manager().plugins()
    if args.json:
        print(json.dumps([{"name": i.name, "distribution": i.distribution, "version": i.version,
                           "hooks": list(i.hooks)} for i in infos], indent=2))
        return EXIT_OK
    for i in infos:
        dist = f"{i.distribution or '(in-process)'} {i.version or ''}".strip()
        print(f"{i.name}: {dist}")
        print(f"  hooks: {', '.join(i.hooks) or 'none'}")
    return EXIT_OK


def cmd_namespaces(args: argparse.Namespace) -> int:
    reg = _registry().namespaces
    rows = reg.namespaces()
    if args.json:
        print(json.dumps([{"namespace": n, "plugin": p} for n, p in rows], indent=2))
        return EXIT_OK
    if not rows:
        print("no namespaces registered (no framework plugin is installed or loaded)")
        return EXIT_OK
    width = max(len(n) for n, _ in rows)
    for name, plugin in rows:
        print(f"{name:<{width}}  {plugin or ''}".rstrip())
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    from ..namespace.schema import dump_schema

    reg = _registry().namespaces
    schema = reg.schema(args.namespace)
    if args.op_type:
        op = schema.get(args.op_type)
        if op is None:
            import difflib

            close = difflib.get_close_matches(args.op_type, list(schema.op_schemas), n=5)
            hint = f"; similar: {', '.join(close)}" if close else ""
            raise AmandaError(f"namespace {schema.namespace} has no op type {args.op_type!r}{hint}")
        sys.stdout.write(dump_schema(op, docs=args.docs))
    else:
        sys.stdout.write(dump_schema(schema, docs=args.docs))
    return EXIT_OK


def summarize(graph: Graph) -> dict[str, Any]:
    """Namespace, op counts by type, boundary ports, and the number and bytes of tensors."""
    from ..serialization.graph_yaml import iter_tensors

    counts: Counter[str] = Counter(op.type or "(no type)" for op in graph.walk())
    tensors = list(iter_tensors(graph))
    return {
        "namespace": graph.namespace,
        "ops": sum(counts.values()),
        "op_types": dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        "inputs": [{"name": p.name, "dtype": None if p.dtype is None else str(p.dtype)} for p in graph.input_ports],
        "outputs": [{"name": p.name, "dtype": None if p.dtype is None else str(p.dtype)} for p in graph.output_ports],
        "tensors": len(tensors),
        "tensor_bytes": sum(tensor_nbytes(t) for t in tensors),
    }


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def cmd_inspect(args: argparse.Namespace) -> int:
    warnings: list[str] = []
    graph = load_model(args.file, warnings)
    info = summarize(graph)
    if args.json:
        info["warnings"] = warnings
        print(json.dumps(info, indent=2))
        return EXIT_OK
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(f"file:      {args.file}")
    print(f"namespace: {info['namespace'] or '(none)'}")
    print(f"ops:       {info['ops']} ({len(info['op_types'])} types)")
    for t, n in info["op_types"].items():
        print(f"  {n:>6}  {t}")

    def ports(items: list[dict[str, Any]]) -> str:
        return ", ".join(f"{p['name']}: {p['dtype']}" if p["dtype"] else p["name"] for p in items) or "(none)"

    print(f"inputs:    {ports(info['inputs'])}")
    print(f"outputs:   {ports(info['outputs'])}")
    print(f"tensors:   {info['tensors']} ({_human_bytes(info['tensor_bytes'])})")
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    from ..namespace.validate import validate

    warnings: list[str] = []
    graph = load_model(args.file, warnings)
    reg = _registry().namespaces
    namespace = args.namespace or graph.namespace
    if namespace is None:
        raise AmandaError(f"{args.file}: the graph has no namespace; give one with --namespace")
    resolved = reg.resolve(namespace)
    problems = validate(graph, reg, resolved if args.namespace else None)
    errors = [p for p in problems if p.severity == "error"]
    notes = [f"warning: {w}" for w in warnings] + [str(p) for p in problems if p.severity != "error"]
    if args.strict:
        errors = [p for p in problems]
    if args.json:
        print(json.dumps({"file": args.file, "namespace": resolved, "valid": not errors,
                          "problems": [{"severity": p.severity, "op": p.op, "op_type": p.op_type,
                                        "message": p.message} for p in problems],
                          "load_warnings": warnings}, indent=2))
        return EXIT_INVALID if errors else EXIT_OK
    for n in notes:
        print(n)
    if errors:
        print(f"{args.file}: INVALID against {resolved}: {len(errors)} problem(s)")
        for p in errors:
            print(f"  {p}")
        return EXIT_INVALID
    print(f"{args.file}: valid against {resolved} ({sum(1 for _ in graph.walk())} ops)")
    return EXIT_OK


# --------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="amanda",
        description="Convert neural-network graphs between frameworks through versioned namespaces "
                    "and mapping tables.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("plugins", help="list the loaded plugins, their versions and hooks")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_plugins)

    p = sub.add_parser("namespaces", help="list every known namespace and version")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_namespaces)

    p = sub.add_parser("schema", help="print a namespace schema, or one op schema, as YAML")
    p.add_argument("namespace", metavar="NAMESPACE", help="e.g. amanda/onnx/13 or amanda/tensorflow")
    p.add_argument("op_type", metavar="OP_TYPE", nargs="?")
    p.add_argument("--no-docs", dest="docs", action="store_false", help="leave out doc strings")
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser("inspect", help="summarize a graph or model file")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("validate", help="check a graph against its namespace schema (exit 1 if invalid)")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--namespace", metavar="NS", help="validate against this namespace instead of the graph's")
    p.add_argument("--strict", action="store_true", help="treat warnings as problems")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_validate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    try:
        return int(args.func(args))
    except AmandaError as e:
        if args.debug:
            traceback.print_exc()
        else:
            print(f"amanda: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("amanda: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as e:  # an internal error: still one line unless --debug
        if args.debug:
            traceback.print_exc()
        else:
            print(f"amanda: internal error: {type(e).__name__}: {e} (run with --debug for the traceback)",
                  file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
