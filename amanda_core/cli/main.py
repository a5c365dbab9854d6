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


def save_model(graph: Graph, path: str) -> list[str]:
    """Write a graph as YAML or in any format a plugin exports (chosen by the file extension); atomic."""
    lower = path.lower()
    if lower.endswith((".yaml", ".yml")):
        from ..serialization.graph_yaml import save_graph

        return save_graph(graph, path)
    reg = _registry()
    by_ext = [e for e, _ in reg.exporters if e.handles_path(path)]
    if not by_ext:
        known = sorted({x for e, _ in reg.exporters for x in e.extensions} | {".yaml", ".yml"})
        raise AmandaError(f"{path}: no exporter writes this kind of file (known extensions: {', '.join(known)}); "
                          "is the plugin for its framework installed?")
    ns = graph.namespace or ""
    for exporter in by_ext:
        if ns and exporter.handles_namespace(ns):
            exporter.save(graph, path)
            return [path]
    names = ", ".join(f"{e.name} ({e.namespace})" for e in by_ext)
    raise AmandaError(f"{path}: the graph is in {ns or 'no namespace'}, which no exporter for this file type writes "
                      f"({names}); convert it first with --to")


def _tables(args: argparse.Namespace, reg: Any) -> list[Any]:
    from ..mapping import check_table, load_table, registered_tables

    user = []
    for path in args.table or []:
        if not os.path.exists(path):
            raise AmandaError(f"{path}: no such table file")
        user.append(load_table(path, trusted=args.trust_expressions))
    problems: list[str] = []
    for table in user:
        errors, _notes = check_table(table, reg.namespaces)
        problems.extend(str(e) for e in errors)
    if problems:
        raise AmandaError(f"{len(problems)} problem(s) in the given table(s):\n  " + "\n  ".join(problems))
    return user + ([] if args.no_plugin_tables else registered_tables(reg))


def cmd_convert(args: argparse.Namespace) -> int:
    from ..mapping import convert
    from ..namespace.validate import validate

    warnings: list[str] = []
    graph = load_model(args.input, warnings)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    reg = _registry()
    if graph.namespace is None:
        raise AmandaError(f"{args.input}: the graph has no namespace, so no table can be chosen for it")
    target = args.to or graph.namespace
    tables = _tables(args, reg)
    inferred = ""
    inferer = reg.type_inferer_for(graph.namespace) if args.to and not args.no_infer_types else None
    if inferer is not None:
        try:
            n = inferer.infer(graph)
        except AmandaError as e:
            print(f"warning: {inferer.name} could not type the graph's values ({e}); converting without it",
                  file=sys.stderr)
        else:
            inferred = f" ({n} value types inferred by {inferer.name})" if n else ""
    result = convert(graph, target, tables, reg.namespaces, include_tags=args.tag or (),
                     exclude_tags=args.exclude_tag or (), allow_partial=args.allow_partial, copy=False)
    out = result.graph
    if args.explain:
        print(result.explain() or "no table applied: the graph is already in the target namespace")
    if result.unconverted:
        total = sum(n for _, _, n, _ in result.unconverted)
        print(f"warning: --allow-partial: {total} op(s) were left unconverted:", file=sys.stderr)
        for t, ns, n, names in result.unconverted:
            print(f"  {n} x {t} ({ns}), e.g. {', '.join(names)}", file=sys.stderr)
    if result.steps and not args.no_validate and result.target not in reg.namespaces:
        print(f"note: no schema is registered for {result.target}; the result was not validated", file=sys.stderr)
    elif result.steps and not args.no_validate:
        problems = [p for p in validate(out, reg.namespaces) if p.severity == "error"]
        if result.unconverted:
            left = {t for t, _, _, _ in result.unconverted}
            problems = [p for p in problems if p.op_type not in left]
        if problems:
            lines = []
            for p in problems[:50]:
                made = ""
                if p.op is not None:
                    op = _find(out, p.op)
                    if op is not None and op.provenance:
                        made = f" [made by table {op.provenance[0]!r}, rule {op.provenance[1]!r}]"
                lines.append(f"{p}{made}")
            raise AmandaError(f"the converted graph breaks the schema of {result.target} ({len(problems)} "
                              "problem(s)); nothing was written:\n  " + "\n  ".join(lines))
    written = save_model(out, args.output)
    if len(result.steps) > 2:
        chain = f"{result.steps[0].src} -> {result.steps[-1].dst} ({len(result.steps)} tables)"
    else:
        chain = " -> ".join([s.src for s in result.steps[:1]] + [s.dst for s in result.steps]) or str(out.namespace)
    n_ops = sum(1 for _ in out.walk())
    print(f"{args.input}: {chain}: {n_ops} ops{inferred}; wrote {', '.join(written)}")
    return EXIT_OK


def _find(graph: Graph, path: str) -> Any:
    for op in graph.walk():
        if op.path == path:
            return op
    return None


def cmd_tables(args: argparse.Namespace) -> int:
    from ..mapping import check_table, registered_tables

    reg = _registry()
    tables = registered_tables(reg)
    rows = [{"name": t.name, "src": t.src, "dst": t.dst, "rules": len(t.rules), "plugin": t.plugin,
             "source": t.source, "carry": t.carry, "bidirectional": t.bidirectional} for t in tables]
    problems: list[str] = []
    if args.check:
        for t in tables:
            errors, notes = check_table(t, reg.namespaces)
            problems.extend(str(e) for e in errors)
            problems.extend(f"note: {n}" for n in notes)
    if args.json:
        print(json.dumps({"tables": rows, "problems": problems} if args.check else rows, indent=2))
    else:
        if not rows:
            print("no mapping tables registered (no plugin registers any)")
        for r in rows:
            print(f"{r['name']}: {r['src']} -> {r['dst']}  ({r['rules']} rule(s), plugin {r['plugin'] or '-'})")
        for p in problems:
            print(p)
    return EXIT_INVALID if any(not p.startswith("note:") for p in problems) else EXIT_OK


def _runner(graph: Graph, what: str) -> Any:
    ns = graph.namespace or ""
    for runner, _plugin in _registry().runners:
        if ns and runner.handles_namespace(ns):
            return runner
    raise AmandaError(f"{what}: no installed plugin runs graphs of {ns or 'no namespace'}")


def cmd_check(args: argparse.Namespace) -> int:
    """Run two models on the same inputs with their frameworks' runtimes and compare the outputs."""
    import numpy as np

    dims: dict[str, int] = {}
    for item in args.dim or []:
        name, eq, value = item.partition("=")
        if not eq or not value.strip().isdigit():
            raise AmandaError(f"--dim takes NAME=SIZE, got {item!r}")
        dims[name.strip()] = int(value)
    ref, cand = load_model(args.reference), load_model(args.candidate)
    run_ref, run_cand = _runner(ref, args.reference), _runner(cand, args.candidate)
    inputs = run_ref.example_inputs(ref, args.seed, dims)
    names_c = cand.input_ports.names()
    if sorted(names_c) == sorted(inputs):
        cand_inputs = dict(inputs)
    elif len(names_c) == len(inputs):
        cand_inputs = dict(zip(names_c, inputs.values()))  # same inputs, other names: by position
    else:
        raise AmandaError(f"the models take different inputs: {', '.join(inputs)} and {', '.join(names_c)}")
    out_ref = list(run_ref.run(ref, inputs).items())
    out_cand = list(run_cand.run(cand, cand_inputs).items())
    if len(out_ref) != len(out_cand):
        raise AmandaError(f"the models give {len(out_ref)} and {len(out_cand)} outputs")
    rows = []
    ok = True
    for (name_a, a), (name_b, b) in zip(out_ref, out_cand):
        a, b = np.asarray(a), np.asarray(b)
        row: dict[str, Any] = {"output": name_a, "candidate_output": name_b, "shape": list(a.shape),
                               "dtype": str(a.dtype)}
        if a.shape != b.shape or a.dtype != b.dtype:
            row.update(match=False, problem=f"{a.dtype}{list(a.shape)} against {b.dtype}{list(b.shape)}")
        else:
            same_bits = a.tobytes() == b.tobytes()
            if a.dtype.kind in "fc" and a.size:
                diff = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
                close = bool(np.allclose(a, b, rtol=args.rtol, atol=args.atol, equal_nan=True))
            else:
                diff = 0.0 if same_bits else float("nan")
                close = bool(np.array_equal(a, b))
            row.update(max_abs_diff=diff, bit_identical=same_bits, match=same_bits if args.exact else close)
        ok &= bool(row["match"])
        rows.append(row)
    if args.json:
        print(json.dumps({"reference": args.reference, "candidate": args.candidate, "runner": run_ref.name,
                          "inputs": {k: list(v.shape) for k, v in inputs.items()}, "outputs": rows, "match": ok},
                         indent=2))
    else:
        shapes = ", ".join(f"{k}{list(v.shape)}" for k, v in inputs.items())
        print(f"inputs (seed {args.seed}): {shapes}")
        for r in rows:
            if "problem" in r:
                print(f"  {r['output']}: MISMATCH {r['problem']}")
                continue
            state = "bit-identical" if r["bit_identical"] else f"max abs diff {r['max_abs_diff']:.3g}"
            print(f"  {r['output']}: {r['dtype']}{r['shape']} {state} -> {'ok' if r['match'] else 'MISMATCH'}")
        tol = "bit for bit" if args.exact else f"rtol {args.rtol:g}, atol {args.atol:g}"
        print(f"{'same outputs' if ok else 'outputs differ'} ({run_ref.name} / {run_cand.name}, {tol})")
    return EXIT_OK if ok else EXIT_INVALID


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

    p = sub.add_parser("convert", help="convert a graph or model to another namespace (or re-export it)")
    p.add_argument("input", metavar="INPUT", help="a YAML graph or a model file a plugin imports")
    p.add_argument("--to", metavar="NAMESPACE", help="target namespace or range (default: the input's own)")
    p.add_argument("-o", "--output", required=True, metavar="OUTPUT",
                   help="output file; its extension picks the format (.yaml, or a plugin's)")
    p.add_argument("--table", action="append", metavar="FILE", help="a mapping table file to use (repeatable)")
    p.add_argument("--tag", action="append", metavar="T", help="apply tagged rules only with one of these tags")
    p.add_argument("--exclude-tag", action="append", metavar="T", help="never apply rules with this tag")
    p.add_argument("--allow-partial", action="store_true", help="keep ops no rule converts (and say so)")
    p.add_argument("--explain", action="store_true", help="print what each rule matched and produced")
    p.add_argument("--trust-expressions", action="store_true",
                   help="let --table files run their ${...} expressions (Python code)")
    p.add_argument("--no-plugin-tables", action="store_true", help="use only the --table files")
    p.add_argument("--no-validate", action="store_true", help="skip checking the result against its schema")
    p.add_argument("--no-infer-types", action="store_true",
                   help="do not run the source framework's type inference before converting (it lets rules that "
                        "depend on value types, like exact opset downgrades, see the types of intermediate values)")
    p.set_defaults(func=cmd_convert)

    p = sub.add_parser("check", help="run two models on the same inputs and compare their outputs (exit 1 if "
                                     "they differ)")
    p.add_argument("reference", metavar="REFERENCE", help="the original model")
    p.add_argument("candidate", metavar="CANDIDATE", help="the converted model")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--dim", action="append", metavar="NAME=SIZE", help="size of a symbolic dimension (default 1)")
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--atol", type=float, default=1e-6)
    p.add_argument("--exact", action="store_true", help="require bit-identical outputs")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("tables", help="list the registered mapping tables")
    p.add_argument("--json", action="store_true")
    p.add_argument("--check", action="store_true", help="also check each table against the schemas")
    p.set_defaults(func=cmd_tables)

    from ..regex.cli import add_match_command

    add_match_command(sub)
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
