"""``amanda repro``: the smallest source-framework model that still diverges, as a folder for a bug report.

From the first diverging op the per-op check finds (:mod:`amanda_core.perop`), the reference ops it stands for
are cut out of the source model with the constants they read; every other value they read becomes a graph input,
fed with the value the reference computed for it (recorded in ``inputs.npz``).  The cut model is converted with
the same tables and checked again, so the folder says whether it still diverges.
"""

from __future__ import annotations

__all__ = ["extract", "write_repro"]

import json
import os
from typing import Any, Callable, Mapping

from .errors import AmandaError
from .ir.graph import Graph, Op
from .perop import Divergence, PerOpReport, check_per_op, record_reference


def extract(reference: Graph, names: list[str], output: str) -> tuple[Graph, dict[str, tuple[str, str]]]:
    """The ops ``names`` of ``reference`` and the constants they read, as a graph of their own: ``(graph,
    {input name: (reference op, port)})``; ``output`` (``op.port``) is its one output."""
    g = reference.copy()
    keep: set[Op] = {g.ops[n] for n in names if n in g.ops}
    todo = list(keep)
    while todo:  # constants (ops without inputs) feeding what is kept
        op = todo.pop()
        for p in op.input_ports:
            src = p.source
            if src is not None and isinstance(src.owner, Op) and src.owner not in keep and \
                    len(src.owner.input_ports) == 0:
                keep.add(src.owner)
                todo.append(src.owner)
    fed: dict[str, tuple[str, str]] = {}
    for op in list(g.topological_order()):
        if op in keep:
            continue
        for q in op.output_ports:
            readers = [c for c in q.consumers if c.op in keep]
            if not readers:
                continue
            name = f"{op.name}_{q.name}".replace(":", "_").replace("/", "_").replace(".", "_")
            port = g.add_input_port(name, q.dtype)
            fed[port.name] = (op.name, q.name)
            for c in readers:
                g.connect(port, c, replace=True)
    for out in list(g.output_ports):
        g.remove_output_port(out)
    op_name, _, port_name = output.rpartition(".")
    src_op = g.ops[op_name]
    q = src_op.output_ports[port_name]
    out = g.add_output_port("output", q.dtype)
    g.connect(q, out)
    for op in reversed(list(g.topological_order())):  # readers first: an op is removed once nothing reads it
        if op not in keep:
            g.remove_op(op)
    for port in list(g.input_ports):
        if port.name not in fed:
            g.remove_input_port(port)
    return g, fed


def write_repro(reference: Graph, report: PerOpReport, inputs: Mapping[str, Any], folder: str, *,
                convert: Callable[[Graph], Graph], reg: Any, rtol: float, atol: float,
                rule_text: str | None = None, target: str = "NAMESPACE") -> dict[str, Any]:
    """Write the cut model, its inputs and a README to ``folder`` (created; must not exist or be empty); return
    what was written and whether the cut model still diverges."""
    import numpy as np

    from .io import save_model
    from .serialization.files import atomic_directory

    d: Divergence | None = report.divergence
    if d is None:
        raise AmandaError("no op diverges, so there is nothing to reproduce")
    typed = reference.copy()  # the cut model's inputs need the types of the values they replace
    inferer = reg.type_inferer_for(typed.namespace) if typed.namespace else None
    if inferer is not None:
        try:
            inferer.infer(typed)
        except AmandaError:
            pass
    small, fed = extract(typed, d.reference_ops, d.reference_port)
    values: dict[str, Any] = {}
    with _tempdir() as tmp:
        paths = record_reference(reference, inputs, set(fed.values()), tmp, reg)
        for name, key in fed.items():
            if key not in paths:
                raise AmandaError(f"the reference computed no value for {key[0]}.{key[1]} (an input of the cut "
                                  "model)")
            values[name] = np.array(np.load(paths[key]))
    cand = convert(small)
    again = check_per_op(small, cand, values, rtol=rtol, atol=atol, reg=reg)
    exporter = next((e for e, _ in reg.exporters if small.namespace and e.handles_namespace(small.namespace)), None)
    with atomic_directory(folder) as tmp:
        tmp = os.fspath(tmp)
        written = save_model(small, os.path.join(tmp, "model.yaml"))
        if exporter is not None:
            ext = next((e for e in exporter.extensions if e != "/"), None)
            path = os.path.join(tmp, "model" + ext) if ext else os.path.join(tmp, "model") + os.sep
            written += save_model(small, path)
        np.savez(os.path.join(tmp, "inputs.npz"), **values)
        summary = {"op": d.op, "op_type": d.op_type, "table": d.table, "rule": d.rule,
                   "reference_ops": d.reference_ops, "reference_output": d.reference_port,
                   "max_abs_diff": d.max_abs_diff, "still_diverges": not again.ok,
                   "cut_check": again.to_json()}
        with open(os.path.join(tmp, "divergence.json"), "w") as f:
            json.dump(summary, f, indent=2, default=str)
        models = ", ".join(os.path.relpath(w, tmp) for w in written)
        lines = [f"# {d.op} ({d.op_type}) computes something else than {', '.join(d.reference_ops)}", "",
                 f"Made by table `{d.table}`, rule `{d.rule}`.", "",
                 f"- source model cut to the op and what feeds it: {models} (inputs: the reference's own values, "
                 "in inputs.npz)",
                 f"- first run: max abs diff {d.max_abs_diff} ({report.tolerance})",
                 f"- the cut model {'still diverges' if not again.ok else 'no longer diverges'}: " +
                 " / ".join(again.lines()[:2]), "",
                 f"Reproduce: `amanda check --per-op model.yaml --to {target} --input-data inputs.npz` "
                 "(with the same tables)", ""]
        if rule_text:
            lines += ["The rule:", "", "```yaml", rule_text.rstrip(), "```", ""]
        with open(os.path.join(tmp, "README.md"), "w") as f:
            f.write("\n".join(lines))
    return {"folder": folder, "still_diverges": not again.ok, "files": sorted(os.listdir(folder))}


class _tempdir:
    def __enter__(self) -> str:
        import tempfile

        self.path = tempfile.mkdtemp(prefix="amanda-repro-")
        return self.path

    def __exit__(self, *exc: object) -> None:
        import shutil

        shutil.rmtree(self.path, ignore_errors=True)
