"""The ``amanda`` command line.

Every command prints one clear message and exits non-zero on error;
``--debug`` (anywhere on the line) shows the traceback instead.
"""

from __future__ import annotations

import os
import signal
import sys


def _interrupted_early(signum: int, frame: object) -> None:  # pragma: no cover - timing dependent
    """Ctrl-C while the command line is still starting: the same one line as later, no traceback."""
    sys.stderr.write("amanda: interrupted\n")
    sys.stderr.flush()
    os._exit(130)


def _started_as_the_command() -> bool:
    """Whether this process is the ``amanda`` command (the console script or ``python -m amanda_core``), not a
    program or test run that imports the command line."""
    argv0 = sys.argv[0] if sys.argv else ""
    base = os.path.basename(argv0)
    return base in ("amanda", "amanda.exe", "-m") or argv0.endswith(os.path.join("amanda_core", "__main__.py"))


_EARLY_HANDLER = False
if _started_as_the_command() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    try:
        signal.signal(signal.SIGINT, _interrupted_early)
        _EARLY_HANDLER = True
    except ValueError:  # pragma: no cover - not the main thread
        pass

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402
from collections import Counter  # noqa: E402
from typing import Any, Sequence  # noqa: E402

from ..errors import AmandaError, GraphError  # noqa: E402
from ..ir.graph import Graph  # noqa: E402
from ..ir.tensor import tensor_nbytes  # noqa: E402

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_ERROR = 2
LAYOUTS = ("channels-first", "channels-last")


def _registry() -> Any:
    from ..plugin.manager import registry

    return registry()


def load_model(source: str, warnings: list[str] | None = None, *, inputs: Any = None, outputs: Any = None,
               lenient: bool = False, signature: str | None = None) -> Graph:
    """Read a graph (see :func:`amanda_core.io.load_model`); kept here for callers of the command line's module."""
    from ..io import load_model as _load

    return _load(source, inputs=inputs, outputs=outputs, warnings=warnings, lenient=lenient, signature=signature)


def save_model(graph: Graph, path: str) -> list[str]:
    """Write a graph (see :func:`amanda_core.io.save_model`)."""
    from ..io import save_model as _save

    return _save(graph, path)


def _specs(args: argparse.Namespace) -> tuple[Any, Any]:
    """``--input`` specs and ``--output`` names of a command, None where not given."""
    from ..plugin.types import parse_input_spec

    inputs = [parse_input_spec(t) for t in args.input] if getattr(args, "input", None) else None
    outputs = list(args.output) if getattr(args, "output", None) else None
    return inputs, outputs


class _Progress:
    """Says on stderr that something slow is under way when it takes more than ``after`` seconds."""

    def __init__(self, message: str, after: float = 1.0) -> None:
        self.message, self.after = message, after
        self._timer: threading.Timer | None = None

    def __enter__(self) -> _Progress:
        if self.after >= 0:
            self._timer = threading.Timer(self.after, self._say)
            self._timer.daemon = True
            self._timer.start()
        return self

    def _say(self) -> None:
        print(f"amanda: {self.message} ...", file=sys.stderr, flush=True)

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()


def _schema(reg: Any, namespace: str, *, usage: str = "") -> Any:
    """The schema of ``namespace`` (resolved), saying on stderr when building it takes a while (a framework's
    registry is read the first time, then the schema is cached)."""
    resolved = _resolve(reg, namespace, usage=usage)
    cache = os.environ.get("AMANDA_CACHE_DIR") or "~/.cache/amanda"
    with _Progress(f"generating the schema of {resolved} from the installed framework (first use; cached "
                   f"in {cache})"):
        return reg.schema(resolved)


def _resolve(reg: Any, name: str, *, usage: str = "") -> str:
    """``name`` resolved to a registered namespace, or a one-line error naming the known versions."""
    from ..errors import NamespaceError
    from ..namespace.names import parse_spec, version_key

    try:
        return str(reg.resolve(name))
    except NamespaceError as e:
        try:
            spec = parse_spec(name)
        except Exception:
            raise e from None
        versions = sorted(reg.versions(spec.family), key=version_key) if spec.family in reg.families() else []
        if not versions:
            raise
        newest = versions[-1]
        what = spec.exact if spec.exact is not None else str(spec.specifier)
        known = _ranges(versions)
        example = f"; e.g. {usage.format(ns=f'{spec.family}/{newest}')}" if usage else ""
        if spec.family == "amanda/onnx":  # every opset is known: one that is not does not exist
            state = f"opset {what} of amanda/onnx does not exist"
        else:  # a framework's namespaces are the versions installed
            state = f"version {what} of {spec.family} is not available (a plugin gives the versions of the " \
                    "framework installed)"
        raise AmandaError(f"{name}: {state}; the newest is {newest} (known: {known}){example}") from None


def _ranges(versions: Sequence[str]) -> str:
    """``1-10, 12-28`` for runs of consecutive integer versions; the versions as they are otherwise."""
    if not all(v.isdigit() for v in versions):
        return ", ".join(versions)
    nums = sorted(int(v) for v in versions)
    runs: list[list[int]] = []
    for n in nums:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


# --------------------------------------------------------------------------- commands


def cmd_plugins(args: argparse.Namespace) -> int:
    from ..plugin.manager import get_manager

    manager = get_manager()
    infos = manager.plugins()
    reg = manager.registry()
    can = _capabilities(reg)
    if args.json:
        print(json.dumps([{"name": i.name, "distribution": i.distribution, "version": i.version,
                           "hooks": list(i.hooks), **can.get(i.name, {})} for i in infos], indent=2))
        return EXIT_OK
    for i in infos:
        dist = f"{i.distribution or '(in-process)'} {i.version or ''}".strip()
        print(f"{i.name}: {dist}")
        print(f"  hooks: {', '.join(i.hooks) or 'none'}")
        mine = can.get(i.name, {})
        if mine.get("reads"):
            print(f"  reads: {'; '.join(mine['reads'])}")
        if mine.get("writes"):
            print(f"  writes: {'; '.join(mine['writes'])}")
        if mine.get("runs"):
            print(f"  runs: {'; '.join(mine['runs'])}")
    return EXIT_OK


def _capabilities(reg: Any) -> dict[str, dict[str, list[str]]]:
    """What each plugin reads, writes and runs, in words a user can act on."""
    out: dict[str, dict[str, list[str]]] = {}
    for imp, plugin in reg.importers:
        exts = ", ".join(imp.extensions)
        extra = " and folders or objects it accepts" if imp.accepts is not None else ""
        out.setdefault(plugin, {}).setdefault("reads", []).append(
            f"{imp.name}: {exts or 'no files by extension'}{extra}")
    for exp, plugin in reg.exporters:
        exts = ", ".join("folders (a path ending in /)" if e == "/" else e for e in exp.extensions)
        out.setdefault(plugin, {}).setdefault("writes", []).append(f"{exp.name}: {exts} from {exp.namespace}")
    for run, plugin in reg.runners:
        out.setdefault(plugin, {}).setdefault("runs", []).append(f"{run.name}: {run.namespace}")
    return out


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
    usage = "amanda schema {ns}" + (f" {args.op_type}" if args.op_type else "")
    schema = _schema(reg, args.namespace, usage=usage)
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
    inputs, outputs = _specs(args)
    graph = load_model(args.file, warnings, inputs=inputs, outputs=outputs, signature=args.signature)
    info = summarize(graph)
    from .lock import print_provenance, provenance_info

    if args.json:
        info["warnings"] = warnings
        if provenance_info(graph) is not None:
            info["provenance"] = provenance_info(graph)
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
    print_provenance(graph)
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    from ..namespace.validate import validate

    warnings: list[str] = []
    graph = load_model(args.file, warnings)
    reg = _registry().namespaces
    namespace = args.namespace or graph.namespace
    if namespace is None:
        raise AmandaError(f"{args.file}: the graph has no namespace; give one with --namespace")
    resolved = _resolve(reg, namespace, usage="amanda validate FILE --namespace {ns}")
    with _Progress(f"generating the schema of {resolved} from the installed framework (first use)"):
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


def _tables(args: argparse.Namespace, reg: Any, between: tuple[Any, str] | None = None) -> list[Any]:
    """The tables given with ``--table``, then the plugins' (``between=(source namespaces, target)``: only those
    that can be on a path between them, so that no other table file is read)."""
    from ..mapping import check_table, load_table, registered_tables, tables_between

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
        raise AmandaError(f"{len(problems)} problem(s) in the given table(s): " + "; ".join(problems))
    if args.no_plugin_tables:
        return user
    from ..mapping import broken_tables

    if between is not None and not getattr(args, "exclude_table", None):  # (--exclude-table names any table)
        installed = tables_between(reg, *between)
    else:
        installed = registered_tables(reg)
    for line in broken_tables(reg):
        print(f"warning: {line}", file=sys.stderr)
    return user + installed


def _same_namespace(a: str, b: str) -> bool:
    from ..namespace.names import spec_matches

    return a == b or (spec_matches(b, a) and spec_matches(a, b))


def _op_namespaces(graph: Graph) -> set[str]:
    """The namespaces ops of ``graph`` (and of the graphs in it) name for themselves (a custom ONNX domain)."""
    found: set[str] = set()
    for g in [graph] + [n.graph for n in graph.nested_graphs()]:
        if g.namespace is not None:
            found.add(g.namespace)
        for op in g:
            if op.namespace is not None:
                found.add(op.namespace)
    return found


def _reachable(source: str, tables: Sequence[Any], reg: Any) -> list[str]:
    """Every namespace some chain of ``tables`` leads to from ``source`` (for the message when none reaches the
    target), sorted by family and version."""
    from ..errors import NamespaceError
    from ..namespace.names import parse_namespace, parse_spec, version_key

    seen = {source}
    todo = [source]
    while todo:
        here = todo.pop()
        for t in tables:
            if not parse_spec(t.src).matches(here):
                continue
            try:
                nxt = reg.resolve(t.dst)
            except NamespaceError:
                nxt = t.dst if parse_spec(t.dst).exact is not None else None
            if nxt is not None and nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    seen.discard(source)

    def key(name: str) -> tuple[Any, ...]:
        try:
            n = parse_namespace(name)
            return (n.family, version_key(n.version) if n.version is not None else ())
        except Exception:
            return (name, ())

    return sorted(seen, key=key)


def _grouped(names: Sequence[str]) -> str:
    """``amanda/onnx/{1-10, 12-28}, amanda/tensorflow/2.21.0``."""
    from ..namespace.names import parse_namespace

    groups: dict[str, list[str]] = {}
    for name in names:
        try:
            n = parse_namespace(name)
            groups.setdefault(n.family, []).extend([n.version] if n.version is not None else [])
        except Exception:
            groups.setdefault(name, [])
    parts = []
    for family, versions in groups.items():
        if not versions:
            parts.append(family)
        elif len(versions) == 1:
            parts.append(f"{family}/{versions[0]}")
        else:
            parts.append(f"{family}/{{{_ranges(versions)}}}")
    return ", ".join(parts)


def _explain_so_far(result: Any, args: argparse.Namespace, tables: Sequence[Any] = ()) -> None:
    from .explain_rule import print_rule_explanations

    print_rule_explanations(result, args, tables)
    if not args.explain:
        return
    print(result.explain() or "no table applied: the graph is already in the target namespace")
    by_name = {getattr(t, "name", None): t for t in tables}
    for report in result.reports:
        table = by_name.get(report.table)
        for r in report.rules:
            rule = table.rules.get(r.rule) if table is not None else None
            if rule is None or not r.matches or "approximate" not in rule.tags:
                continue
            text = " ".join(str(rule.raw.get("description") or "no description").split())
            print(f"approximate: {report.table}, rule {r.rule} ({r.matches} match(es)): {text}")


def cmd_convert(args: argparse.Namespace) -> int:
    from ..io import check_output_path
    from ..mapping import ConversionError, convert
    from .lock import check_lock, choose_tables, record_provenance

    reg = _registry()
    check_output_path(args.output_file, reg)  # before any work: a missing folder, a folder, an unknown format
    check_lock(args, reg)  # --lock FILE: refuse where the environment differs
    warnings: list[str] = []
    inputs, outputs = _specs(args)
    graph = load_model(args.input_model, warnings, inputs=inputs, outputs=outputs, signature=args.signature)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    if graph.namespace is None:
        raise AmandaError(f"{args.input_model}: the graph has no namespace, so no table can be chosen for it")
    # --check of a model defined in code compares with the model converted here, not with a second call of the
    # code: a factory that initializes its weights at random (unseeded, or seeded once at import) would make
    # other weights, and the check would report a mismatch the conversion did not make (tensors are shared)
    converted_source = graph.copy() if args.check and _is_code(args.input_model) else None
    target = graph.namespace
    if args.to:
        target = _resolve(reg.namespaces, args.to, usage="--to {ns}") if _is_known_family(reg, args.to) else args.to
    if _same_namespace(graph.namespace, target) and not args.table:
        tables: list[Any] = []  # a re-export: no table applies, none is read
    else:
        sources = {graph.namespace} | {ns for ns in _op_namespaces(graph)}
        tables = choose_tables(args, _tables(args, reg, (sources, target)))
    inferred = ""
    inferer = reg.type_inferer_for(graph.namespace) if args.to and not args.no_infer_types else None
    if inferer is not None:
        try:
            n = inferer.infer(graph)
        except AmandaError as e:
            print(f"warning: {inferer.name} could not type the graph's values ({e}); converting without it",
                  file=sys.stderr)
        else:
            inferred = f" ({n} value types filled in by {inferer.name})" if n else ""
    try:
        from ..plugin.passes import registered_passes
        from .explain_rule import tracing_rules

        wanted = list(args.tag or ()) + (["approximate"] if getattr(args, "allow_approximate", False) else [])
        with tracing_rules(args):
            result = convert(graph, target, tables, reg.namespaces, include_tags=wanted,
                             exclude_tags=_excluded_tags(args), allow_partial=True, copy=False,
                             passes=registered_passes(), foreign=bool(args.to),
                             infer=None if args.no_infer_types else reg.infer_types,
                             pass_options=_layout_options(args))
    except ConversionError as e:
        if str(e).startswith("no chain of mapping tables"):
            source = graph.namespace
            try:
                source = reg.namespaces.resolve(source)
            except AmandaError:
                pass
            reach = _reachable(source, choose_tables(args, _tables(args, reg)), reg.namespaces)  # every table
            if args.explain:
                print("no table applied: no chain of mapping tables reaches the target")
            hint = f"; from {source} the tables reach {_grouped(reach)}" if reach else f"; no table reads {source}"
            raise AmandaError(f"no chain of mapping tables leads from {source} to {target}{hint}") from None
        raise
    out = result.graph
    _sync_opset_attrs(out)
    _layouts_taken(args, result)
    if result.unconverted and not args.allow_partial:
        _explain_so_far(result, args, tables)
        left = result.unconverted
        total = sum(n for _, _, n, _ in left)
        kinds = "; ".join(f"{n} x {t} ({ns or 'no namespace'}), e.g. {', '.join(names[:3])}"
                          for t, ns, n, names in left)
        approx = "" if getattr(args, "allow_approximate", False) else _approximate_hint(left, tables)
        raise AmandaError(f"{total} op(s) of {len(left)} type(s) were not converted to {result.target} (no rule "
                          f"maps them exactly): {kinds}{approx}; nothing was written (--allow-partial keeps them "
                          "as they are)")
    _explain_so_far(result, args, tables)
    if result.unconverted:
        total = sum(n for _, _, n, _ in result.unconverted)
        _refuse_mixed_versions(result, args.output_file)
        print(f"warning: --allow-partial: {total} op(s) were left unconverted:", file=sys.stderr)
        for t, ns, n, names in result.unconverted:
            print(f"  {n} x {t} ({ns}), e.g. {', '.join(names)}", file=sys.stderr)
    keeper = _foreign_keeper(result, reg, args)  # a format that cannot keep them: refused first
    _validate_result(result, reg, args)
    if keeper is not None:
        _keep_foreign(result, reg, args, keeper)
    record_provenance(args, result)
    written = save_model(out, args.output_file)
    if len(result.steps) > 2:
        chain = f"{result.steps[0].src} -> {result.steps[-1].dst} ({len(result.steps)} tables)"
    else:
        chain = " -> ".join([s.src for s in result.steps[:1]] + [s.dst for s in result.steps]) or str(out.namespace)
    n_ops = sum(1 for _ in out.walk())
    approx_note = ""
    approx_ops = _approximations(result, tables)
    if approx_ops:
        approx_note = f"; {approx_ops} op(s) by approximate decompositions (--allow-approximate)"
    print(f"{args.input_model}: {chain}: {n_ops} ops{inferred}{approx_note}; wrote {', '.join(written)}")
    _say_layouts(args, out)
    if args.check:
        from ..ir.layout import io_layouts

        return _check_files(args, args.input_model, written[0], inputs=inputs, outputs=outputs,
                            candidate_layouts=io_layouts(out)[0], written=True, reference_graph=converted_source)
    return EXIT_OK


def _is_code(source: str) -> bool:
    """Whether ``source`` names a model defined in code (``pkg.module:factory``), not a file."""
    from ..io import is_factory_reference

    return is_factory_reference(source) and not os.path.exists(source)


def _layout_options(args: argparse.Namespace) -> dict[str, str]:
    """``--input-layout`` / ``--output-layout`` as the graph passes' options ``input_layout``/``output_layout``."""
    return {k: v for k, v in (("input_layout", getattr(args, "input_layout", None)),
                              ("output_layout", getattr(args, "output_layout", None))) if v}


def _layouts_taken(args: argparse.Namespace, result: Any) -> None:
    """A layout option no graph pass of the conversion took is an error, before anything is written."""
    from ..plugin.passes import registered_passes

    for key, value in _layout_options(args).items():
        if result.options_taken.get(key):
            continue
        flag = "--" + key.replace("_", "-")
        able = [f"{p.name} (after {', '.join(p.tables)})" for p in registered_passes() if key in p.options]
        chain = " -> ".join([s.table.name for s in result.steps]) or "no table"
        raise AmandaError(f"{flag} {value}: no graph pass of this conversion ({chain}) moves the layout of the "
                          f"model's {key.split('_')[0]}s; nothing was written (passes that do: "
                          f"{', '.join(able) or 'none installed'})")


def _say_layouts(args: argparse.Namespace, graph: Graph) -> None:
    """Which inputs and outputs take another layout than the source model's (what --check feeds each side)."""
    from ..ir.layout import format_perm, io_layouts

    ins, outs = io_layouts(graph)
    for kind, found in (("input", ins), ("output", outs)):
        for name, perm in found.items():
            print(f"layout: input {name} takes the source model's data transposed by {format_perm(perm)}"
                  if kind == "input" else
                  f"layout: output {name} transposed by {format_perm(perm)} is the source model's output")
        asked = getattr(args, f"{kind}_layout", None)
        if asked and not found:
            print(f"note: --{kind}-layout {asked}: no {kind} changed layout (it is the source model's already, or "
                  f"no {kind} is read or made by a transpose of the layout pass)")


def _is_known_family(reg: Any, name: str) -> bool:
    from ..namespace.names import parse_spec

    try:
        return parse_spec(name).family in reg.namespaces.families()
    except Exception:
        return False


def _excluded_tags(args: argparse.Namespace) -> list[str]:
    tags = list(args.exclude_tag or ())
    if not getattr(args, "allow_approximate", False):
        tags.append("approximate")
    return tags


def _approximate_hint(left: Sequence[Any], tables: Sequence[Any]) -> str:
    """'; --allow-approximate would convert Gelu (...)' when tagged approximate rules exist for these op types."""
    types = {t for t, _, _, _ in left}
    found = []
    for table in tables:
        for rule in table.rules.values():
            tags = set(rule.tags)
            if "approximate" not in tags:
                continue
            for t in _rule_types(rule):
                if t in types and t not in found:
                    found.append(t)
    if not found:
        return ""
    return f"; --allow-approximate converts {', '.join(found)} by decompositions exact up to rounding (see --explain)"


def _rule_types(rule: Any) -> list[str]:
    """The literal op types a rule's matcher names."""
    out: list[str] = []
    for pat in rule.src.ops.values():
        t = getattr(pat, "type", None)
        if t is not None and getattr(t, "kind", None) == "literal":
            out.extend(t.value if isinstance(t.value, list) else [t.value])
    return out


def _approximations(result: Any, tables: Sequence[Any]) -> int:
    """How many matches of rules tagged ``approximate`` the conversion applied."""
    by_name = {getattr(t, "name", None): t for t in tables}
    n = 0
    for report in result.reports:
        table = by_name.get(report.table)
        for r in report.rules:
            rule = table.rules.get(r.rule) if table is not None else None
            if rule is not None and "approximate" in rule.tags:
                n += r.matches
    return n


def _refuse_mixed_versions(result: Any, path: str) -> None:
    """An output format that holds one version of a family cannot hold ops --allow-partial left at another."""
    from ..namespace.names import parse_namespace

    if path.lower().endswith((".yaml", ".yml")):
        return
    try:
        target = parse_namespace(result.target)
    except Exception:
        return
    stuck = []
    for t, ns, n, _names in result.unconverted:
        try:
            other = parse_namespace(ns) if ns else None
        except Exception:
            continue
        if other is not None and other.family == target.family and other.version != target.version:
            stuck.append(f"{n} x {t} ({ns})")
    if stuck:
        ext = os.path.splitext(path)[1] or path
        raise AmandaError(f"{path}: --allow-partial left {', '.join(stuck)}, but a {ext} file holds one version of "
                          f"{target.family} ({result.target}); nothing was written: write a .yaml file to keep "
                          "the mixed graph, or convert to a version that has these ops")


def _foreign_keeper(result: Any, reg: Any, args: argparse.Namespace) -> Any:
    """The output format's exporter when --allow-partial left ops in another framework's family and it keeps
    them as something its format says (its ``keep_foreign``); None when there are none or the output is a .yaml
    file (which holds them as they are); a format that cannot keep them is refused, nothing written."""
    from ..foreign import foreign_ops
    from ..io import _exporters_for

    path = args.output_file
    if path.lower().endswith((".yaml", ".yml")) and not os.path.isdir(path):
        return None
    found = foreign_ops(result.graph, result.target)
    if not found:
        return None
    exporters = [e for e in _exporters_for(path, reg) if e.handles_namespace(result.target)]
    exporter = exporters[0] if exporters else None
    if exporter is None or exporter.keep_foreign is None:
        kinds: dict[str, int] = {}
        for op, _ns in found:
            kinds[op.type or "(no type)"] = kinds.get(op.type or "(no type)", 0) + 1
        listed = ", ".join(f"{n} x {t}" for t, n in kinds.items())
        what = f"the {exporter.name} exporter" if exporter is not None else "its exporter"
        raise AmandaError(f"{path}: --allow-partial left {len(found)} op(s) of another framework ({listed}), and "
                          f"{what} cannot keep ops it has no conversion for; nothing was written: write a .yaml "
                          "file to keep the partial graph, or add a table that converts them")
    return exporter


def _keep_foreign(result: Any, reg: Any, args: argparse.Namespace, exporter: Any) -> None:
    """Hand the ops --allow-partial left in another framework's family to ``exporter.keep_foreign``; say so."""
    from ..foreign import keep_foreign_ops

    kept = keep_foreign_ops(result.graph, result.target, reg.namespaces, exporter.keep_foreign)
    by_path = {op.path: op for op in result.graph.walk()}
    lines = []
    for info in kept:
        op = by_path.get(info.path)
        now = f"{op.type} ({op.effective_namespace})" if op is not None else "removed"
        lines.append(f"  {info.path}: {info.type} ({info.namespace}) kept as {now}")
    print(f"note: {len(kept)} op(s) of another framework kept for {exporter.name}, unconverted:", file=sys.stderr)
    for line in lines:
        print(line, file=sys.stderr)
    if args.explain:
        print("kept unconverted (--allow-partial):")
        for line in lines:
            print(line)


def _sync_opset_attrs(graph: Graph) -> None:
    """Keep a graph's record of its imported opset (``opset_import`` in its attributes, as the ONNX importer
    writes it) in step with its namespace after a conversion."""
    from ..namespace.names import parse_namespace

    entries = graph.attrs.get("opset_import") if isinstance(graph.attrs, dict) else None
    if not entries or graph.namespace is None:
        return
    try:
        ns = parse_namespace(graph.namespace)
    except Exception:
        return
    if ns.family != "amanda/onnx" or ns.version is None or not ns.version.isdigit():
        return
    version = int(ns.version)
    changed = False
    new = []
    for entry in entries:
        if isinstance(entry, dict) and entry.get("domain", "") in ("", "ai.onnx") and entry.get("version") != version:
            entry = {**entry, "version": version}
            changed = True
        new.append(entry)
    if changed:
        graph.attrs["opset_import"] = type(entries)(new) if isinstance(entries, list) else new


def _validate_result(result: Any, reg: Any, args: argparse.Namespace) -> None:
    from ..namespace.validate import validate

    out = result.graph
    if not result.steps or args.no_validate:
        return
    if result.target not in reg.namespaces:
        print(f"note: no schema is registered for {result.target}; the result was not validated", file=sys.stderr)
        return
    with _Progress(f"generating the schema of {result.target} (first use)"):
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
                          "problem(s)); nothing was written: " + "; ".join(lines))


def _find(graph: Graph, path: str) -> Any:
    for op in graph.walk():
        if op.path == path:
            return op
    return None


def cmd_tables(args: argparse.Namespace) -> int:
    from ..mapping import broken_tables, check_table, registered_tables

    reg = _registry()
    tables = registered_tables(reg)
    broken = broken_tables(reg)
    rows = [{"name": t.name, "src": t.src, "dst": t.dst, "rules": len(t.rules), "plugin": t.plugin,
             "source": t.source, "carry": t.carry, "bidirectional": t.bidirectional, "ahead": t.ahead,
             "unused": __import__("amanda_core.cli.lock", fromlist=["_"]).unused_reason(reg, t)} for t in tables]
    problems: list[str] = list(broken)
    notes: list[str] = []
    unchecked: list[str] = []
    if args.check:
        with _Progress(f"checking {len(tables)} table(s) against the schemas of their namespaces (a framework's "
                       "schema is generated on first use)", after=2.0):
            for t in tables:
                if not _schema_known(reg, t.src) or not _schema_known(reg, t.dst):
                    unchecked.append(t.name)
                errors, table_notes = check_table(t, reg.namespaces)
                problems.extend(str(e) for e in errors)
                notes.extend(f"note: {n}" for n in table_notes)
    n_rules = sum(r["rules"] for r in rows)
    if args.json:
        if args.check:
            print(json.dumps({"tables": rows, "problems": problems + notes,
                              "checked": {"tables": len(rows), "rules": n_rules, "errors": len(problems),
                                          "notes": len(notes), "without_schema": unchecked}}, indent=2))
        else:
            print(json.dumps(rows, indent=2))
    elif args.check:
        for p in problems + notes:
            print(p)
        schemas = f"; {len(unchecked)} table(s) with a namespace that has no registered schema were checked for " \
                  f"syntax only ({', '.join(unchecked[:5])}{', ...' if len(unchecked) > 5 else ''})" if unchecked \
            else ""
        verdict = "no problems" if not problems else f"{len(problems)} problem(s)"
        print(f"checked {len(rows)} table(s), {n_rules} rule(s) against the schemas of their namespaces (op "
              f"types, ports, attributes, expressions): {verdict}, {len(notes)} note(s){schemas}")
    else:
        for line in broken:
            print(f"error: {line}")
        if not rows:
            print("no mapping tables registered (no plugin registers any)")
        for r in rows:
            print(f"{r['name']}: {r['src']} -> {r['dst']}  ({r['rules']} rule(s), plugin {r['plugin'] or '-'}"
                  + ("; ahead of chains" if r["ahead"] else "") + ")"
                  + (f"; not used: {r['unused']}" if r["unused"] else ""))
    return EXIT_INVALID if problems else EXIT_OK


def _schema_known(reg: Any, name: str) -> bool:
    try:
        reg.namespaces.resolve(name)
        return True
    except AmandaError:
        return False


def _dims(items: Sequence[str] | None) -> dict[str, int]:
    dims: dict[str, int] = {}
    for item in items or []:
        name, eq, value = item.partition("=")
        if not eq or not name.strip() or not value.strip().isdigit():
            raise AmandaError(f"--dim takes NAME=SIZE (e.g. batch=4), got {item!r}")
        dims[name.strip()] = int(value)
    return dims


def _check_files(args: argparse.Namespace, reference: str, candidate: str, *, inputs: Any = None,
                 outputs: Any = None, candidate_layouts: Any = None, written: bool = False,
                 reference_graph: Any = None) -> int:
    """Load both models, each from its own file (external data beside it), run and compare them.  ``--input``
    specs describe the reference; the candidate gets them in the layout it records (``candidate_layouts``: the
    input permutations, when the caller knows them before loading it).  ``written``: the candidate is the file
    the command just wrote (a Python module file is then run as the model it defines).  ``reference_graph``:
    the reference already loaded (the model a conversion read from code), used instead of loading it again."""
    from ..check import compare_graphs, read_input_data
    from ..io import is_factory_reference, require_source

    for named in (reference, candidate):
        require_source(named)  # a missing file is named before the other model is made
    dims = _dims(args.dim)
    data = read_input_data(args.input_data or ())
    signature = getattr(args, "signature", None)
    cand_first = None
    try:
        ref = reference_graph if reference_graph is not None else \
            load_model(reference, inputs=inputs, outputs=outputs, lenient=True, signature=signature)
    except AmandaError:
        if inputs or not is_factory_reference(reference) or os.path.exists(reference) \
                or not os.path.exists(candidate):
            raise
        # a model defined in code that gives no example inputs of its own is traced on inputs like the file's
        # (made as the check makes them), each in the layout the code reads when the file records another
        from ..check import runner_for
        from ..ir.layout import io_layouts
        from ..plugin.types import InputSpec

        cand_first = load_model(candidate, outputs=outputs, lenient=True, signature=signature)
        made = runner_for(cand_first, f"candidate {candidate}").example_inputs(cand_first, args.seed, dict(dims))
        perms = io_layouts(cand_first)[0]
        inputs = [InputSpec(n, str(v.dtype), _unpermuted(tuple(v.shape), perms.get(n))) for n, v in made.items()]
        ref = load_model(reference, inputs=inputs, outputs=outputs, lenient=True, signature=signature)
    cand_specs = _permuted_specs(inputs, candidate_layouts) if candidate_layouts else inputs

    source: Any = candidate
    code = is_factory_reference(candidate) and not os.path.exists(candidate)
    if written and candidate.lower().endswith(".py") and os.path.isfile(candidate):
        from ..io import load_python_module

        source = load_python_module(candidate)  # the module file this command just wrote: its class, made
        signature = None  # (a live module has no signatures)
        code = True
    if code and not cand_specs:
        # a model defined in code is traced on inputs like the reference's (made as the check makes them)
        from ..check import runner_for
        from ..plugin.types import InputSpec

        made = runner_for(ref, f"reference {reference}").example_inputs(ref, args.seed, dict(dims))
        cand_specs = [InputSpec(n, str(v.dtype), tuple(v.shape)) for n, v in made.items()]
    try:
        cand = cand_first if cand_first is not None else \
            load_model(source, inputs=cand_specs, outputs=outputs, lenient=True, signature=signature)
    except AmandaError:
        if not inputs or candidate_layouts is not None or not os.path.exists(candidate):
            raise
        from ..ir.layout import io_layouts

        cand = load_model(candidate, outputs=outputs, lenient=True,  # a file states its inputs: in which layout?
                          signature=signature)
        if not io_layouts(cand)[0]:
            raise
        cand = load_model(candidate, inputs=_permuted_specs(inputs, io_layouts(cand)[0]), outputs=outputs,
                          lenient=True, signature=signature)
    report = compare_graphs(ref, cand, reference_name=reference, candidate_name=candidate, seed=args.seed,
                            dims=dims, rtol=args.rtol, atol=args.atol, exact=args.exact, input_data=data)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        for line in report.lines():
            print(line)
    return EXIT_OK if report.ok else EXIT_INVALID


def _unpermuted(shape: tuple[Any, ...], perm: Any) -> tuple[Any, ...]:
    """The shape a value had before it was transposed by ``perm`` to ``shape`` (``shape`` itself without one)."""
    if perm is None or len(perm) != len(shape):
        return shape
    out: list[Any] = [None] * len(shape)
    for i, p in enumerate(perm):
        out[p] = shape[i]
    return tuple(out)


def _permuted_specs(specs: Any, layouts: Any) -> Any:
    """``--input`` specs with each shape transposed by the layout its input records (by name)."""
    import attrs

    out = []
    for spec in specs or ():
        perm = layouts.get(spec.name)
        if perm is not None and spec.shape is not None and len(spec.shape) == len(perm):
            spec = attrs.evolve(spec, shape=tuple(spec.shape[p] for p in perm))
        out.append(spec)
    return out if specs is not None else None


def cmd_check(args: argparse.Namespace) -> int:
    """Run two models on the same inputs with their frameworks' runtimes and compare the outputs."""
    if getattr(args, "per_op", False) or args.candidate is None:
        from .diagnose import run_per_op

        return run_per_op(args)
    inputs, outputs = _specs(args)
    return _check_files(args, args.reference, args.candidate, inputs=inputs, outputs=outputs)


# --------------------------------------------------------------------------- parser

_DEBUG_HELP = "show the traceback of an error (accepted anywhere on the line)"


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=_DEBUG_HELP)
    p.add_argument("--quiet", action="store_true", default=argparse.SUPPRESS,
                   help="no progress bars or notices (bars show only on a terminal anyway)")


def _model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", action="append", metavar="SPEC",
                   help="an input of a model whose file does not state it, as NAME:DTYPE[DIMS] (e.g. "
                        "x:float32[batch,3,224,224]; x:int64[] is a scalar; dims are sizes or names) (repeatable; "
                        "formats that state their inputs, like ONNX and YAML, take none)")
    p.add_argument("--output", action="append", metavar="NAME",
                   help="an output of the model to keep (repeatable; for formats that do not state their outputs)")
    p.add_argument("--signature", metavar="NAME",
                   help="the signature of a TensorFlow SavedModel to read (default serving_default)")


def _check_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--dim", action="append", metavar="NAME=SIZE",
                   help="size of a symbolic dimension, e.g. batch=4 (repeatable; default 1)")
    p.add_argument("--input-data", action="append", metavar="NAME=FILE.npy|FILE.npz",
                   help="feed this input with the array in a .npy file, or every input named in a .npz file, "
                        "instead of random values (repeatable; needed for string and shape inputs)")
    p.add_argument("--rtol", type=float, default=1e-5,
                   help="relative tolerance: |candidate - reference| <= atol + rtol * |reference| (default 1e-5)")
    p.add_argument("--atol", type=float, default=1e-5,
                   help="absolute tolerance (default 1e-5, torch.testing's for float32: two runtimes' float32 sums of "
                        "hundreds of products differ by a few 1e-6 on values of order 1)")
    p.add_argument("--exact", action="store_true", help="require bit-identical outputs")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="amanda",
        description="Convert neural-network graphs between frameworks through versioned namespaces "
                    "and mapping tables.",
    )
    parser.add_argument("--debug", action="store_true", help=_DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("plugins", help="list the loaded plugins, their versions, hooks and what they read and write")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_plugins)

    p = sub.add_parser("namespaces", help="list every known namespace and version")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_namespaces)

    p = sub.add_parser("schema", help="print a namespace schema, or one op schema, as YAML")
    p.add_argument("namespace", metavar="NAMESPACE", help="e.g. amanda/onnx/13 or amanda/tensorflow")
    p.add_argument("op_type", metavar="OP_TYPE", nargs="?")
    p.add_argument("--no-docs", dest="docs", action="store_false", help="leave out doc strings")
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser("inspect", help="summarize a graph or model file")
    p.add_argument("file", metavar="FILE", help="a YAML graph, a model file or folder, or pkg.module:factory")
    p.add_argument("--json", action="store_true", help="print JSON")
    _model_options(p)
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("validate", help="check a graph against its namespace schema (exit 1 if invalid)")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--namespace", metavar="NS", help="validate against this namespace instead of the graph's")
    p.add_argument("--strict", action="store_true", help="treat warnings as problems")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("convert", help="convert a graph or model to another namespace (or re-export it)",
                       description="Convert a model through the shortest chain of mapping tables. INPUT may be "
                                   "pkg.module:factory, which imports that module (current folder first) and "
                                   "calls the factory: trusted code, like --trust-expressions.")
    p.add_argument("input_model", metavar="INPUT",
                   help="a YAML graph, a model file or folder a plugin imports, or pkg.module:factory")
    p.add_argument("--to", metavar="NAMESPACE", help="target namespace or range (default: the input's own)")
    p.add_argument("-o", dest="output_file", required=True, metavar="OUTPUT",
                   help="output file; its extension picks the format (.yaml, or a plugin's); a folder (ending "
                        "in /) for formats that are folders")
    _model_options(p)
    p.add_argument("--table", action="append", metavar="FILE", help="a mapping table file to use (repeatable)")
    p.add_argument("--tag", action="append", metavar="T", help="apply tagged rules only with one of these tags")
    p.add_argument("--exclude-tag", action="append", metavar="T", help="never apply rules with this tag")
    p.add_argument("--allow-partial", action="store_true", help="keep ops no rule converts (and say so)")
    p.add_argument("--allow-approximate", action="store_true",
                   help="also use decompositions that are exact only up to floating-point rounding (rules tagged "
                        "approximate; --explain names each and its worst-case difference)")
    p.add_argument("--explain", action="store_true", help="print what each rule matched and produced")
    p.add_argument("--input-layout", choices=LAYOUTS, metavar="LAYOUT",
                   help="channels-first or channels-last: the layout the converted model's image inputs take, "
                        "where a layout pass of the conversion can move the transposes at its inputs (a TF model "
                        "made from a torch or ONNX one takes NHWC with channels-last; an ONNX or torch model made "
                        "from a TF one takes NCHW with channels-first); default: the source model's")
    p.add_argument("--output-layout", choices=LAYOUTS, metavar="LAYOUT",
                   help="the same for the outputs that a transpose at the end only reorders (default: the source "
                        "model's)")
    from .explain_rule import add_explain_rule_option

    add_explain_rule_option(p)
    p.add_argument("--trust-expressions", action="store_true",
                   help="let --table files run their ${...} expressions (Python code)")
    p.add_argument("--no-plugin-tables", action="store_true", help="use only the --table files")
    p.add_argument("--no-validate", action="store_true", help="skip checking the result against its schema")
    p.add_argument("--no-infer-types", action="store_true",
                   help="do not run the source framework's type inference before converting (it lets rules that "
                        "depend on value types, like exact opset downgrades, see the types of intermediate values)")
    p.add_argument("--check", action="store_true",
                   help="after writing, run INPUT and OUTPUT on the same inputs as amanda check does (exit 1 if "
                        "they differ)")
    p.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    _check_options(p)
    __import__("amanda_core.cli.lock", fromlist=["_"]).add_convert_options(p)
    p.set_defaults(func=cmd_convert)

    p = sub.add_parser("check", help="run two models on the same inputs and compare their outputs (exit 1 if "
                                     "they differ)",
                       description="Run REFERENCE and CANDIDATE, each with the runtime of its own framework, on the "
                                   "same inputs and compare their outputs, matched by name, then by position. "
                                   "Exit status: 0 when every output is within tolerance, 1 when one is not, 2 on "
                                   "an error.")
    p.add_argument("reference", metavar="REFERENCE", help="the original model")
    p.add_argument("candidate", metavar="CANDIDATE", nargs="?", help="the converted model")
    _check_options(p)
    p.add_argument("--json", action="store_true",
                   help="print a JSON report (inputs, and per output the differences and the tolerance)")
    _model_options(p)
    from .diagnose import add_coverage_command, add_per_op_options, add_repro_command

    add_per_op_options(p)
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("tables", help="list the registered mapping tables")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--check", action="store_true",
                   help="check each table against the schemas of its namespaces and print the result instead")
    p.set_defaults(func=cmd_tables)

    from .match import add_match_command

    add_match_command(sub)
    add_repro_command(sub)
    add_coverage_command(sub)
    __import__("amanda_core.cli.lock", fromlist=["_"]).add_lock_command(sub)
    for name, sp in sub.choices.items():
        del name
        _common(sp)
    return parser


def _enable_progress(quiet: bool) -> None:
    """Progress bars of long work on a terminal (amanda_core.progress), unless --quiet."""
    from .. import progress

    progress.enable(not quiet, quiet=quiet)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    args: argparse.Namespace | None = None
    try:
        if _EARLY_HANDLER and signal.getsignal(signal.SIGINT) is _interrupted_early:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        if _started_as_the_command():
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ start-up lines
            # What the imports made lives as long as the process: the cyclic collector need not walk it each time
            # (about 5% of a small conversion's CPU).  Not done for a program that calls main() many times.
            gc.freeze()
        parser = build_parser()
        args = parser.parse_args(argv)
        debug = bool(getattr(args, "debug", False)) or debug
        _enable_progress(bool(getattr(args, "quiet", False)))
        if not getattr(args, "func", None):
            parser.print_help(sys.stderr)
            return EXIT_ERROR
        return int(args.func(args))
    except AmandaError as e:
        if debug:
            traceback.print_exc()
        else:
            message = str(e)
            source = getattr(args, "input_model", None) or getattr(args, "file", None)
            if isinstance(e, GraphError) and isinstance(source, str) and source not in message:
                message = f"{source}: {message}"  # a broken graph (a cycle ...) says which model it is in
            print(f"amanda: error: {_one_line(message)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("amanda: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as e:  # an internal error: still one line unless --debug
        if debug:
            traceback.print_exc()
        else:
            print(f"amanda: internal error: {type(e).__name__}: {_one_line(str(e))} (run with --debug for the "
                  "traceback)", file=sys.stderr)
        return EXIT_ERROR


def _one_line(text: str) -> str:
    """An error message on one line: its lines joined with '; ' (a list stays readable, a traceback does not
    print)."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return "; ".join(lines) if lines else "(no message)"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
