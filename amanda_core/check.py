"""Running two models on the same inputs and comparing their outputs (``amanda check``, ``convert --check``).

The reference and the candidate may be of different frameworks: each is run by the runner registered for its
namespace (``amanda_runners``).  Inputs are made up by the reference's runner (random values of the declared
types; symbolic dimensions from ``dims``, default 1) unless given (``input_data``: arrays by input name, read from
``.npy``/``.npz`` files by :func:`read_input_data`).  The candidate gets the same values, by input name or, when
the names differ, by position.  Outputs are matched by name, then by position.  Each output pair is reported with
the largest absolute difference, that difference relative to the largest magnitude in the reference output, and
the tolerance it was held to: ``|candidate - reference| <= atol + rtol * |reference|`` element by element (numpy's
``allclose``), or bit for bit with ``exact``.

Layouts are matched by name: when a conversion changed the layout of a graph input or output (a channels-last
TF model made from a channels-first one, :mod:`amanda_core.ir.layout`), each side is fed its own layout (the
input values transposed by the permutation the converted graph records) and its outputs are transposed back
before they are compared.
"""

from __future__ import annotations

__all__ = ["OutputComparison", "CheckReport", "compare_graphs", "read_input_data", "runner_for"]

import os
from typing import Any, Mapping, Sequence

import attrs

from .errors import AmandaError
from .ir.graph import Graph
from .ir.layout import format_perm, io_layouts


@attrs.define
class OutputComparison:
    output: str
    candidate_output: str
    shape: list[int]
    dtype: str
    match: bool
    bit_identical: bool = False
    max_abs_diff: float | None = None
    max_rel_diff: float | None = None  # max_abs_diff / the largest |reference| value
    tolerance: str = ""
    problem: str | None = None

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)

    def describe(self) -> str:
        if self.problem is not None:
            return f"{self.output}: MISMATCH {self.problem}"
        if self.bit_identical:
            state = "bit-identical"
        elif self.max_abs_diff is None:
            state = f"values {'equal' if self.match else 'differ'}"
        else:
            rel = "" if self.max_rel_diff is None else f", {self.max_rel_diff:.3g} of the largest reference value"
            state = f"max abs diff {self.max_abs_diff:.3g}{rel} (tolerance {self.tolerance})"
        name = self.output if self.output == self.candidate_output else f"{self.output} / {self.candidate_output}"
        return f"{name}: {self.dtype}{self.shape} {state} -> {'ok' if self.match else 'MISMATCH'}"


@attrs.define
class CheckReport:
    reference: str
    candidate: str
    reference_runner: str
    candidate_runner: str
    seed: int
    inputs: dict[str, tuple[str, list[int]]]
    given: list[str]
    outputs: list[OutputComparison]
    tolerance: str
    layouts: list[str] = attrs.field(factory=list)
    """How inputs and outputs were transposed because a side records another layout (``amanda.input_layout``)."""

    @property
    def ok(self) -> bool:
        return all(o.match for o in self.outputs)

    def to_json(self) -> dict[str, Any]:
        return {"reference": self.reference, "candidate": self.candidate, "runner": self.reference_runner,
                "candidate_runner": self.candidate_runner, "seed": self.seed,
                "inputs": {k: shape for k, (_, shape) in self.inputs.items()},
                "input_dtypes": {k: dt for k, (dt, _) in self.inputs.items()}, "given_inputs": self.given,
                "outputs": [o.to_json() for o in self.outputs], "tolerance": self.tolerance, "match": self.ok,
                "layouts": list(self.layouts), "note": self.rounding_note()}

    def lines(self) -> list[str]:
        made = [k for k in self.inputs if k not in self.given]
        shapes = ", ".join(f"{k}: {dt}{shape}" for k, (dt, shape) in self.inputs.items()) or "none"
        where = []
        if made:
            where.append(f"made up with seed {self.seed}: {', '.join(made)}")
        if self.given:
            where.append(f"given: {', '.join(self.given)}")
        out = [f"inputs {shapes} ({'; '.join(where) or 'none'})"]
        out += [f"  layout: {note}" for note in self.layouts]
        out += [f"  {o.describe()}" for o in self.outputs]
        runners = self.reference_runner if self.reference_runner == self.candidate_runner else \
            f"{self.reference_runner} / {self.candidate_runner}"
        out.append(f"{'same outputs' if self.ok else 'outputs differ'} ({runners}, {self.tolerance})")
        note = self.rounding_note()
        if note:
            out.append(f"  {note}")
        return out

    def rounding_note(self) -> str | None:
        """When every output that differs does so by no more than rounding in its element type reaches through a
        deep network (relative to the output's largest value: float32 1e-4, float16 and bfloat16 1e-2, float64
        1e-12), a line saying so and the ``--atol`` that would accept them; None otherwise (and for ``--exact``)."""
        if self.ok or self.tolerance == "bit for bit":
            return None
        differing = [o for o in self.outputs if not o.match]
        worst_rel = worst_abs = 0.0
        for o in differing:
            bound = _ROUNDING.get(o.dtype)
            if o.problem is not None or bound is None or o.max_rel_diff is None or o.max_abs_diff is None \
                    or o.max_rel_diff > bound:
                return None
            worst_rel, worst_abs = max(worst_rel, o.max_rel_diff), max(worst_abs, o.max_abs_diff)
        atol = float(f"{worst_abs * 1.05:.2g}")
        return (f"each difference is at most {worst_rel:.3g} of its output's largest value, within what rounding in "
                f"these element types can grow to through a deep network; if that is expected here, --atol {atol:g} "
                "accepts them")


_ROUNDING = {"float32": 1e-4, "complex64": 1e-4, "float16": 1e-2, "bfloat16": 1e-2, "float64": 1e-12,
             "complex128": 1e-12}
"""The largest difference, relative to an output's largest value, that rounding is said to explain."""


def runner_for(graph: Graph, what: str, reg: Any = None) -> Any:
    """The runner registered for the graph's namespace; a one-line error naming ``what`` when none is."""
    if reg is None:
        from .plugin.manager import registry

        reg = registry()
    ns = graph.namespace or ""
    for runner, _plugin in reg.runners:
        if ns and runner.handles_namespace(ns):
            return runner
    installed = ", ".join(f"{r.name} ({r.namespace})" for r, _ in reg.runners) or "none"
    raise AmandaError(f"{what}: no installed plugin runs graphs of {ns or 'no namespace'} (runners: {installed})")


def read_input_data(items: Sequence[str]) -> dict[str, Any]:
    """``NAME=FILE.npy`` (one input), ``FILE.npz`` (one input per array, by its name in the archive), or
    ``NAME=FILE.npz`` (an archive holding one array): the arrays by input name."""
    import numpy as np

    out: dict[str, Any] = {}

    def load(path: str, item: str) -> Any:
        if not os.path.exists(path):
            raise AmandaError(f"--input-data {item!r}: {path}: no such file")
        try:
            return np.load(path, allow_pickle=False)
        except ValueError as e:
            if "pickle" in str(e).lower():
                raise AmandaError(f"--input-data {item!r}: {path} holds Python objects (pickled), which are not "
                                  "read; save strings as a numpy string array (dtype str)") from None
            raise AmandaError(f"--input-data {item!r}: {path}: not a numpy .npy/.npz file ({e})") from None
        except OSError as e:
            raise AmandaError(f"--input-data {item!r}: {path}: cannot read it ({e})") from None

    for item in items:
        name, eq, path = item.partition("=")
        if not eq:
            name, path = "", item
        name, path = name.strip(), path.strip()
        if not path:
            raise AmandaError(f"--input-data {item!r}: write NAME=FILE.npy or FILE.npz")
        data = load(path, item)
        if isinstance(data, np.lib.npyio.NpzFile):
            with data:
                arrays = {k: data[k] for k in data.files}
            if name:
                if len(arrays) != 1:
                    raise AmandaError(f"--input-data {item!r}: {path} holds {len(arrays)} arrays "
                                      f"({', '.join(arrays)}); give it without NAME= to feed each by its name")
                arrays = {name: next(iter(arrays.values()))}
        else:
            if not name:
                raise AmandaError(f"--input-data {item!r}: a .npy file holds one array: write NAME={path}")
            arrays = {name: data}
        for k, v in arrays.items():
            if k in out:
                raise AmandaError(f"--input-data: input {k!r} is given twice")
            out[k] = v
    return out


def _run(runner: Any, graph: Graph, inputs: Mapping[str, Any], label: str) -> list[tuple[str, Any]]:
    try:
        outputs = runner.run(graph, dict(inputs))
    except AmandaError as e:
        text = str(e)
        hint = ""
        if "dimension" in text.lower() or "shape" in text.lower():
            fed = ", ".join(f"{k}{list(getattr(v, 'shape', ()))}" for k, v in inputs.items())
            hint = (f" (inputs fed: {fed}; a symbolic dimension is 1 unless set with --dim NAME=SIZE, or give the "
                    "values with --input-data NAME=FILE.npy)")
        elif any(word in text.lower() for word in ("index", "indices", "out of range", "bounds")):
            ints = [k for k, v in inputs.items()
                    if getattr(getattr(v, "dtype", None), "kind", "") in ("i", "u") and getattr(v, "size", 0) > 0]
            if ints:  # made-up token ids or indices beyond what the model takes (an embedding of 10 rows)
                spans = ", ".join(f"{k} in [{int(inputs[k].min())}, {int(inputs[k].max())}]" for k in ints)
                hint = (f" (integer inputs fed: {spans}; give values the model takes with --input-data "
                        "NAME=FILE.npy)")
        raise AmandaError(f"{label}: {text}{hint}") from None
    return list(outputs.items())


def _pair_outputs(ref: list[tuple[str, Any]], cand: list[tuple[str, Any]], labels: tuple[str, str]
                  ) -> list[tuple[str, Any, str, Any]]:
    cand_by_name = dict(cand)
    if all(n in cand_by_name for n, _ in ref) and len(ref) == len(cand):
        return [(n, a, n, cand_by_name[n]) for n, a in ref]
    if len(ref) == len(cand):
        by_name = {n for n, _ in ref} & set(cand_by_name)
        rest_c = [(n, b) for n, b in cand if n not in by_name]
        pairs = []
        it = iter(rest_c)
        for n, a in ref:
            if n in by_name:
                pairs.append((n, a, n, cand_by_name[n]))
            else:
                m, b = next(it)
                pairs.append((n, a, m, b))
        return pairs
    raise AmandaError(f"{labels[0]} gives {len(ref)} output(s) ({', '.join(n for n, _ in ref)}) and {labels[1]} "
                      f"{len(cand)} ({', '.join(n for n, _ in cand)}); they cannot be compared")


def _compare(name_a: str, a: Any, name_b: str, b: Any, rtol: float, atol: float, exact: bool) -> OutputComparison:
    import numpy as np

    a, b = np.asarray(a), np.asarray(b)
    tol = "bit for bit" if exact else f"rtol {rtol:g}, atol {atol:g}"
    row = OutputComparison(output=name_a, candidate_output=name_b, shape=list(a.shape), dtype=str(a.dtype),
                           match=False, tolerance=tol)
    if a.shape != b.shape or a.dtype != b.dtype:
        row.problem = f"reference {a.dtype}{list(a.shape)} against candidate {b.dtype}{list(b.shape)}"
        return row
    row.bit_identical = a.tobytes() == b.tobytes() if a.dtype.kind != "O" else bool(np.array_equal(a, b))
    if a.dtype.kind in "fciub" and a.size:
        x, y = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64), \
            b.astype(np.complex128 if b.dtype.kind == "c" else np.float64)
        both_nan = np.isnan(x) & np.isnan(y)
        diff = np.where(both_nan, 0.0, np.abs(x - y))
        diff = np.where(np.isnan(diff), np.inf, diff)
        row.max_abs_diff = float(np.max(diff))
        scale = np.abs(x[~np.isnan(x)])
        largest = float(np.max(scale)) if scale.size else 0.0
        row.max_rel_diff = row.max_abs_diff / largest if largest > 0 else (0.0 if row.max_abs_diff == 0 else None)
        if a.dtype.kind in "fc":
            close = bool(np.allclose(b, a, rtol=rtol, atol=atol, equal_nan=True))
        else:
            close = bool(np.array_equal(a, b))
            row.tolerance = "exact (integer output)" if not exact else tol
    else:
        row.max_abs_diff = 0.0 if row.bit_identical else None
        close = bool(np.array_equal(a, b))
        row.tolerance = "equal values"
    row.match = row.bit_identical if exact else close
    return row


def compare_graphs(reference: Graph, candidate: Graph, *, reference_name: str = "reference",
                   candidate_name: str = "candidate", seed: int = 0, dims: Mapping[str, int] | None = None,
                   rtol: float = 1e-5, atol: float = 1e-5, exact: bool = False,
                   input_data: Mapping[str, Any] | None = None, reg: Any = None) -> CheckReport:
    """Run both graphs on the same inputs and compare every output (see the module's doc)."""
    import numpy as np

    ref_label, cand_label = f"reference {reference_name}", f"candidate {candidate_name}"
    run_ref = runner_for(reference, ref_label, reg)
    run_cand = runner_for(candidate, cand_label, reg)
    given = dict(input_data or {})
    ref_names = reference.input_ports.names()
    unknown = [k for k in given if k not in ref_names]
    if unknown:
        raise AmandaError(f"--input-data gives {', '.join(map(repr, unknown))}, which {ref_label} does not take "
                          f"(its inputs: {', '.join(ref_names) or 'none'})")
    inputs: dict[str, Any] = {}
    if dims:
        _check_dims(dims, reference, candidate, ref_label, reg)
    if any(n not in given for n in ref_names):
        try:
            made = run_ref.example_inputs(reference, seed, dict(dims or {}))
        except AmandaError as e:
            raise AmandaError(f"{ref_label}: {e}; give the value with --input-data NAME=FILE.npy "
                              "(or FILE.npz for several)") from None
        inputs.update({k: v for k, v in made.items() if k not in given})
    inputs.update(given)
    order = [n for n in ref_names if n in inputs] + [n for n in inputs if n not in ref_names]
    inputs = {n: inputs[n] for n in order}
    names_c = candidate.input_ports.names()
    if all(n in names_c for n in inputs) and len(names_c) >= len(inputs):
        cand_inputs = dict(inputs)
    elif len(names_c) == len(inputs):
        cand_inputs = dict(zip(names_c, inputs.values()))  # the same inputs under other names: by position
    else:
        raise AmandaError(f"the models take different inputs: {ref_label} {', '.join(inputs) or 'none'}, "
                          f"{cand_label} {', '.join(names_c) or 'none'}")
    notes: list[str] = []
    ref_in, ref_out = io_layouts(reference)
    cand_in, cand_out = io_layouts(candidate)
    for ref_name, cand_name in zip(list(inputs), list(cand_inputs)):  # (the reference is fed its own layout)
        if ref_in.get(ref_name) is None and cand_in.get(cand_name) is None:
            continue
        back = _inverse(ref_in.get(ref_name))  # the values in the layout of the model both were made from
        canonical = _permuted(inputs[ref_name], back, f"{ref_label} input {ref_name!r} (in the source's layout)",
                              notes)
        cand_inputs[cand_name] = _permuted(canonical, cand_in.get(cand_name), f"{cand_label} input {cand_name!r}",
                                           notes)
    out_ref = _run(run_ref, reference, inputs, ref_label)
    out_cand = _run(run_cand, candidate, cand_inputs, cand_label)
    out_ref = [(n, _permuted(v, ref_out.get(n), f"{ref_label} output {n!r} (transposed back)", notes))
               for n, v in out_ref]
    out_cand = [(n, _permuted(v, cand_out.get(n), f"{cand_label} output {n!r} (transposed back)", notes))
                for n, v in out_cand]
    rows = [_compare(na, a, nb, b, rtol, atol, exact)
            for na, a, nb, b in _pair_outputs(out_ref, out_cand, (ref_label, cand_label))]
    shapes = {k: (str(np.asarray(v).dtype), list(np.asarray(v).shape)) for k, v in inputs.items()}
    tol = "bit for bit" if exact else f"rtol {rtol:g}, atol {atol:g}"
    return CheckReport(reference_name, candidate_name, run_ref.name, run_cand.name, seed, shapes,
                       [k for k in inputs if k in given], rows, tol, notes)


def symbolic_dims(graph: Graph, reg: Any = None) -> list[str] | None:
    """The names of the symbolic dimensions of ``graph``'s inputs, in order, as its namespace's type system reads
    its input types; None when that system reads none of them, or when an input has a dimension without a name
    (TensorFlow's ``?``: a runner may size it by a conventional name, ``batch`` at axis 0)."""
    if reg is None:
        from .plugin.manager import registry

        reg = registry()
    system = reg.namespaces.dtype_type_system(graph.namespace or "") if graph.namespace else None
    ts = reg.type_systems.get(system) if system else None
    if ts is None:
        return None
    names: list[str] = []
    read = False
    for port in graph.input_ports:
        found = ts.tensor_type(port.dtype) if port.dtype is not None else None
        if found is None or found[1] is None:
            continue
        if any(d is None for d in found[1]):
            return None
        read = True
        names += [d for d in found[1] if isinstance(d, str) and d not in names]
    return names if read else None


def _check_dims(dims: Mapping[str, int], reference: Graph, candidate: Graph, ref_label: str, reg: Any) -> None:
    """A ``--dim`` that names no symbolic dimension of either model's inputs would change nothing: an error that
    says which names there are, rather than a check at sizes the user did not ask for."""
    ref_dims = symbolic_dims(reference, reg)
    if ref_dims is None:
        return  # its types say nothing of names: the runner decides
    cand_dims = symbolic_dims(candidate, reg)
    if cand_dims is None and candidate.input_ports.names():
        return  # the candidate's runner may size unnamed dims by a conventional name
    known = ref_dims + [d for d in cand_dims or () if d not in ref_dims]
    unknown = [name for name in dims if name not in known and ":" not in name and name != "?"]
    if unknown:
        raise AmandaError(f"--dim {', '.join(unknown)}: no input of {ref_label} or of the candidate has a symbolic "
                          f"dimension of that name (their symbolic dimensions: {', '.join(known) or 'none'})")


def _inverse(perm: list[int] | None) -> list[int] | None:
    return None if perm is None else [perm.index(i) for i in range(len(perm))]


def _permuted(value: Any, perm: list[int] | None, what: str | None, notes: list[str]) -> Any:
    """``value`` transposed by ``perm`` (as is without one); ``what`` names it in ``notes`` and in the error when
    its rank is not the permutation's."""
    import numpy as np

    if perm is None or perm == list(range(len(perm))):
        return value
    array = np.asarray(value)
    if array.ndim != len(perm):
        raise AmandaError(f"{what or 'a value'} has rank {array.ndim}, but its recorded layout is the permutation "
                          f"{format_perm(perm)} of {len(perm)} axes")
    if what is not None:
        notes.append(f"{what} transposed by {format_perm(perm)}")
    return np.ascontiguousarray(np.transpose(array, perm))
