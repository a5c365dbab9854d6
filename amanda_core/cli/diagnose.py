"""``amanda check --per-op``, ``amanda repro`` and ``amanda coverage``: finding what a conversion gets wrong
(``docs/checking.md``)."""

from __future__ import annotations

__all__ = ["add_per_op_options", "run_per_op", "add_repro_command", "add_coverage_command"]

import argparse
import json
import sys
from typing import Any

from ..errors import AmandaError
from ..ir.graph import Graph


def add_per_op_options(p: argparse.ArgumentParser) -> None:
    """Options of ``amanda check`` for the per-op check."""
    p.add_argument("--per-op", action="store_true",
                   help="line up each candidate op with the reference ops it stands for and report the first "
                        "whose value is beyond tolerance, with the rule that made it (CANDIDATE may be left out "
                        "with --to: REFERENCE is converted in memory)")
    _conversion_options(p, with_to=True)


def _conversion_options(p: argparse.ArgumentParser, *, with_to: bool) -> None:
    if with_to:
        p.add_argument("--to", metavar="NAMESPACE", help="convert REFERENCE to this namespace in memory")
    p.add_argument("--table", action="append", metavar="FILE", help="a mapping table file to use (repeatable)")
    p.add_argument("--trust-expressions", action="store_true",
                   help="let --table files run their ${...} expressions (Python code)")
    p.add_argument("--no-plugin-tables", action="store_true", help="use only the --table files")
    p.add_argument("--tag", action="append", metavar="T", help="apply tagged rules only with one of these tags")
    p.add_argument("--exclude-tag", action="append", metavar="T", help="never apply rules with this tag")
    p.add_argument("--allow-approximate", action="store_true", help="also use rules tagged approximate")


def _converter(args: argparse.Namespace, reg: Any, target: str) -> Any:
    """A function converting a graph to ``target`` with the command line's tables, origins recorded."""
    from ..mapping import convert
    from ..mapping.rewrite import recording_origins
    from ..plugin.passes import registered_passes
    from .main import _excluded_tags, _resolve, _tables

    tables = _tables(args, reg)
    resolved = _resolve(reg.namespaces, target, usage="--to {ns}")

    def run(graph: Graph) -> Graph:
        inferer = reg.type_inferer_for(graph.namespace) if graph.namespace else None
        work = graph.copy()
        if inferer is not None:
            try:
                inferer.infer(work)
            except AmandaError:
                pass
        wanted = list(args.tag or ()) + (["approximate"] if args.allow_approximate else [])
        with recording_origins():
            result = convert(work, resolved, tables, reg.namespaces, include_tags=wanted,
                             exclude_tags=_excluded_tags(args), allow_partial=True, copy=False,
                             passes=registered_passes())
        return result.graph

    run.tables = tables  # type: ignore[attr-defined]
    return run


def _inputs(args: argparse.Namespace, reference: Graph, reg: Any) -> dict[str, Any]:
    from ..check import read_input_data, runner_for
    from .main import _dims

    data = read_input_data(args.input_data or ())
    made = runner_for(reference, "reference", reg).example_inputs(reference, args.seed, _dims(args.dim))
    made.update({k: v for k, v in data.items() if k in made or not made})
    return made


def _by_position(reference: Graph, candidate: Graph, inputs: dict[str, Any]) -> dict[str, Any]:
    names = [p.name for p in candidate.input_ports]
    if all(n in inputs for n in names):
        return {n: inputs[n] for n in names}
    return {c: inputs[r.name] for c, r in zip(names, reference.input_ports) if r.name in inputs}


def _load_pair(args: argparse.Namespace, reg: Any) -> tuple[Graph, Graph, Any]:
    from .main import _specs, load_model

    specs, outputs = _specs(args)
    reference = load_model(args.reference, inputs=specs, outputs=outputs, lenient=True, signature=args.signature)
    convert = _converter(args, reg, args.to) if getattr(args, "to", None) else None
    if args.candidate is not None:
        candidate = load_model(args.candidate, inputs=specs, outputs=outputs, lenient=True,
                               signature=args.signature)
    elif convert is not None:
        candidate = convert(reference)
    else:
        raise AmandaError("give CANDIDATE, or --to NAMESPACE to convert REFERENCE in memory")
    return reference, candidate, convert


def run_per_op(args: argparse.Namespace) -> int:
    """``amanda check --per-op``: exit 0 when no op diverges, 1 when one does."""
    from ..perop import check_per_op
    from ..plugin.manager import registry

    reg = registry()
    reference, candidate, _ = _load_pair(args, reg)
    inputs = _inputs(args, reference, reg)
    report = check_per_op(reference, candidate, inputs, rtol=args.rtol, atol=0.0 if args.exact else args.atol,
                          reg=reg, candidate_inputs=_by_position(reference, candidate, inputs))
    if args.json:
        print(json.dumps(report.to_json(), indent=2, default=str))
    else:
        for line in report.lines():
            print(line)
    return 0 if report.ok else 1


# --------------------------------------------------------------------------- repro

def add_repro_command(sub: Any) -> None:
    p = sub.add_parser("repro", help="write the smallest source model that still diverges, for a bug report",
                       description="Run the per-op check of REFERENCE converted to --to, cut the first diverging "
                                   "op and what feeds it out of the source model (inputs replaced by the values "
                                   "the reference computed) and write it, its inputs, the rule's name and table "
                                   "and a README to the folder -o.  Exit 1 when the written model still diverges, "
                                   "0 when nothing diverges.")
    p.add_argument("reference", metavar="REFERENCE", help="the source model")
    p.add_argument("-o", dest="folder", required=True, metavar="FOLDER", help="the folder to write")
    _conversion_options(p, with_to=True)
    from .main import _check_options, _model_options

    _check_options(p)
    _model_options(p)
    p.set_defaults(func=_cmd_repro, candidate=None)


def _cmd_repro(args: argparse.Namespace) -> int:
    import os

    from ..perop import check_per_op
    from ..plugin.manager import registry
    from ..repro import write_repro

    if not args.to:
        raise AmandaError("amanda repro needs --to NAMESPACE (the conversion to reproduce)")
    if os.path.exists(args.folder) and (not os.path.isdir(args.folder) or os.listdir(args.folder)):
        raise AmandaError(f"{args.folder}: already exists and is not an empty folder; nothing was written")
    reg = registry()
    reference, candidate, convert = _load_pair(args, reg)
    inputs = _inputs(args, reference, reg)
    atol = 0.0 if args.exact else args.atol
    report = check_per_op(reference, candidate, inputs, rtol=args.rtol, atol=atol, reg=reg,
                          candidate_inputs=_by_position(reference, candidate, inputs))
    for line in report.lines():
        print(line)
    if report.ok:
        print("nothing to reproduce: no op diverges; nothing was written")
        return 0
    d = report.divergence
    assert d is not None
    rule_text = None
    for t in getattr(convert, "tables", ()):
        if t.name == d.table and d.rule in t.rules:
            raw = getattr(t.rules[d.rule], "raw", None)
            if raw is not None:
                from ..serialization.yamlio import dump_yaml

                rule_text = dump_yaml({d.rule: dict(raw)})
    out = write_repro(reference, report, inputs, args.folder, convert=convert, reg=reg, rtol=args.rtol,
                      atol=atol, rule_text=rule_text, target=args.to)
    state = "still diverges" if out["still_diverges"] else "no longer diverges once cut out"
    print(f"wrote {args.folder}: {', '.join(out['files'])} (the cut model {state}; table {d.table!r}, "
          f"rule {d.rule!r})")
    return 1 if out["still_diverges"] else 0


# --------------------------------------------------------------------------- coverage

def add_coverage_command(sub: Any) -> None:
    p = sub.add_parser("coverage", help="list each op type of a model and the rule that would convert it (exit 1 "
                                        "when one is not covered)")
    p.add_argument("model", metavar="MODEL", help="a model file or folder, or pkg.module:factory")
    p.add_argument("--json", action="store_true", help="print JSON")
    _conversion_options(p, with_to=True)
    from .main import _model_options

    _model_options(p)
    p.set_defaults(func=_cmd_coverage)


def _cmd_coverage(args: argparse.Namespace) -> int:
    from ..coverage import coverage
    from ..mapping import ConversionError
    from ..plugin.manager import registry
    from ..plugin.passes import registered_passes
    from .main import _excluded_tags, _resolve, _specs, _tables, load_model

    if not args.to:
        raise AmandaError("amanda coverage needs --to NAMESPACE")
    reg = registry()
    specs, outputs = _specs(args)
    graph = load_model(args.model, inputs=specs, outputs=outputs, signature=args.signature)
    target = _resolve(reg.namespaces, args.to, usage="--to {ns}")
    tables = _tables(args, reg)
    wanted = list(args.tag or ()) + (["approximate"] if args.allow_approximate else [])
    try:
        report = coverage(graph, target, tables, reg.namespaces, include_tags=wanted,
                          exclude_tags=_excluded_tags(args), passes=registered_passes())
    except ConversionError as e:
        raise AmandaError(f"{args.model}: {e}") from None
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        for line in report.lines():
            print(line)
    sys.stdout.flush()
    return 0 if report.ok else 1
