"""The ONNX node test suite converted to TensorFlow: every case of
``onnx.backend.test.loader.load_model_tests(kind="node")`` is

1. run as is in onnxruntime against its expected outputs (onnxruntime's own pass count);
2. read with ``amanda_onnx.load_model``, typed by onnx's shape inference, converted to ``amanda/tensorflow`` with
   the ONNX opset tables, the ``onnx_to_tf*.yaml`` tables of amanda-tf and its tables that go ahead of the chain
   (``onnx_*_to_tf*.yaml``) and the registered graph passes but the layout pass (:func:`passes`), and run with
   ``amanda_tf.runner.run`` against the same expected outputs, compared the way onnx's backend tests compare
   (same shape and dtype, ``assert_allclose`` with the case's ``rtol``/``atol``).

Each case ends as ``pass``, ``refused`` (no rule converts some op exactly: the conversion names it), ``error``
(converted, but TensorFlow refused to build or run the graph) or ``wrong`` (converted and ran, but an output
differs).  The goal is no ``wrong`` and no ``error``: a conversion that cannot be exact must be refused.

    .venv/bin/python bench/onnx_node_suite_tf.py            # the full run (prints the counts)
    .venv/bin/python bench/onnx_node_suite_tf.py -v         # and every case that did not pass, with the reason
    .venv/bin/python bench/onnx_node_suite_tf.py test_add test_conv_with_strides_padding   # some cases
    .venv/bin/python bench/onnx_node_suite_tf.py -k resize -k reduce   # cases whose name holds a word
    .venv/bin/python bench/onnx_node_suite_tf.py --groups   # refusals grouped by unconverted op, largest first

The functions here are also what ``plugins/amanda-tf/tests/test_onnx_to_tf.py`` runs on its subset.  The
process imports TensorFlow, so it must not import torch.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TABLES = ROOT / "plugins" / "amanda-tf" / "amanda_tf" / "tables"

_TABLES: list[Any] | None = None


def tables() -> list[Any]:
    """The ONNX opset tables, then the ONNX -> TF tables (loaded once)."""
    global _TABLES
    if _TABLES is None:
        from amanda_core.mapping import load_table
        from amanda_core.mapping.table import merge_parts
        from amanda_onnx import opset

        paths = sorted({*TABLES.glob("onnx_to_tf*.yaml"), *TABLES.glob("onnx_*_to_tf*.yaml")})  # the ahead tables too
        parts = [load_table(p, trusted=True) for p in paths]
        _TABLES = [*opset.tables(), *merge_parts(parts)]
    return _TABLES


_PASSES: list[Any] | None = None


def passes() -> list[Any]:
    """The registered graph passes, as ``amanda convert`` runs them (control flow, sequences, unrolling), but the
    layout pass ``tf-layout-nhwc``, which ``bench/onnx_node_suite_tf_nhwc.py`` measures on its own."""
    global _PASSES
    if _PASSES is None:
        from amanda_core.plugin.passes import registered_passes

        _PASSES = [p for p in registered_passes() if p.name != "tf-layout-nhwc"]
    return _PASSES


def load_cases(names: Iterable[str] | None = None) -> list[Any]:
    """The node cases (all, or those named), in the loader's order."""
    from onnx.backend.test import loader

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            cases = list(loader.load_model_tests(kind="node"))
    if names is None:
        return cases
    wanted = set(names)
    return [c for c in cases if c.name in wanted]


def _normalize(value: Any) -> Any:
    import onnx
    from onnx import numpy_helper

    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, onnx.SequenceProto):
        return [_normalize(v) for v in numpy_helper.to_list(value)]
    if isinstance(value, onnx.OptionalProto):
        return _normalize(numpy_helper.to_optional(value))
    if isinstance(value, (list, tuple)):
        return [_normalize(v) for v in value]
    return value


def assert_similar(ref: Any, out: Any, rtol: float, atol: float) -> None:
    """onnx's backend-test comparison (``Runner.assert_similar_outputs``) for one output."""
    if isinstance(out, (list, tuple)) or isinstance(ref, (list, tuple)):
        assert isinstance(out, (list, tuple)) and isinstance(ref, (list, tuple)), (type(ref), type(out))
        assert len(out) == len(ref), f"sequence of {len(out)} values, expected {len(ref)}"
        for r, o in zip(ref, out):
            assert_similar(r, o, rtol, atol)
        return
    if ref is None or out is None:
        assert ref is None and out is None, (ref, out)
        return
    ref, out = np.asarray(ref), np.asarray(out)
    np.testing.assert_array_equal(out.shape, ref.shape, err_msg="output has the wrong shape")
    if ref.dtype == object:  # TF's strings are bytes: compared with ONNX's str as their UTF-8 text
        out = out.astype(object)
        if out.size and all(isinstance(v, bytes) for v in out.flat) and all(isinstance(v, str) for v in ref.flat):
            out = np.vectorize(lambda v: v.decode("utf-8"), otypes=[object])(out)
        np.testing.assert_array_equal(out, ref)
        return
    np.testing.assert_equal(out.dtype, ref.dtype)
    r = rtol
    if out.dtype.name == "bfloat16":
        r = max(rtol, 2**-6)
        out, ref = out.astype(np.float32), ref.astype(np.float32)
    np.testing.assert_allclose(out, ref, rtol=r, atol=atol)


BEYOND_TF = {
    "FLOAT8E8M0": "TensorFlow has no such element type",
    "FLOAT8E4M3FNUZ": "TensorFlow's dtype has no kernel that casts or bitcasts it to or from another type",
    "FLOAT8E5M2FNUZ": "TensorFlow's dtype has no kernel that casts or bitcasts it to or from another type",
    "INT4": "TensorFlow's dtype has no kernel that casts or bitcasts it to or from another type",
    "UINT4": "TensorFlow's dtype has no kernel that casts or bitcasts it to or from another type",
    "INT2": "TensorFlow's dtype has no kernel that casts or bitcasts it to or from another type",
    "UINT2": "TensorFlow's dtype has no kernel that casts or bitcasts it to or from another type",
    "FLOAT4E2M1": "TensorFlow's dtype has no kernel that casts or bitcasts it to or from another type",
}
"""ONNX element types a TensorFlow graph cannot compute with (measured on TF 2.21's CPU kernels: ``Cast`` to and
from float32, float16, bfloat16, int32, int8 and uint8 is UNIMPLEMENTED, ``Bitcast`` does not admit them; only
kernels that copy (``Const``, ``Identity``, ``Reshape``) take them).  FLOAT8E4M3FN and FLOAT8E5M2 are not here:
TF casts them from and to float32, float16 and bfloat16."""

COPY_OPS = frozenset({"Identity", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Concat", "Split",
                      "Slice", "Gather", "Expand", "Tile"})


def beyond_tf(model: Any) -> str | None:
    """Why no TensorFlow graph can compute the case (None when one can): a graph input or output whose element type
    is in :data:`BEYOND_TF`, read or written by an op that does more than copy values."""
    from onnx import TensorProto

    def elem(value_info: Any) -> int | None:
        t = value_info.type
        while t.HasField("sequence_type") or t.HasField("optional_type"):
            t = t.sequence_type.elem_type if t.HasField("sequence_type") else t.optional_type.elem_type
        return t.tensor_type.elem_type if t.HasField("tensor_type") else None

    graph = model.graph
    if all(n.op_type in COPY_OPS for n in graph.node):
        return None
    for value_info in [*graph.input, *graph.output]:
        code = elem(value_info)
        name = TensorProto.DataType.Name(code) if code else None
        if name in BEYOND_TF:
            return f"{name}: {BEYOND_TF[name]}"
    return None


def ort_passes(case: Any) -> bool:
    """Whether onnxruntime runs the case as is and matches its expected outputs."""
    import onnxruntime as ort

    try:
        options = ort.SessionOptions()
        options.log_severity_level = 4
        session = ort.InferenceSession(case.model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        for inputs, expected in case.data_sets:
            got = session.run(None, {n: _normalize(v) for n, v in zip(names, inputs)})
            assert len(got) == len(expected)
            for ref, out in zip(expected, got):
                assert_similar(_normalize(ref), out, case.rtol, case.atol)
    except Exception:  # noqa: BLE001 - a failure is a result
        return False
    return True


def to_tf(model: Any) -> Any:
    """The ONNX model converted to an ``amanda/tensorflow`` graph (raises ``ConversionError`` naming the ops no
    rule converts)."""
    import amanda_onnx
    from amanda_core.errors import AmandaError
    from amanda_core.mapping import convert
    from amanda_core.plugin.manager import registry

    reg = registry()
    graph = amanda_onnx.load_model(model)
    inferer = reg.type_inferer_for(graph.namespace)
    if inferer is not None:
        try:
            inferer.infer(graph)
        except AmandaError:
            pass
    out = convert(graph, "amanda/tensorflow", tables(), reg.namespaces, copy=False, passes=passes()).graph
    for port in out.output_ports:  # a value a new op makes carries no dtype yet: the graph output's says it
        src = port.source
        if src is not None and src.dtype is None and port.dtype is not None:
            src.dtype = port.dtype
    return out


def run_tf(graph: Any, case: Any) -> None:
    """Run the converted graph on every data set of the case; raises when an output differs."""
    from amanda_tf.runner import Runnable

    runnable = Runnable(graph)
    names = graph.input_ports.names()
    for inputs, expected in case.data_sets:
        feeds = {n: _normalize(v) for n, v in zip(names, inputs)}
        got = list(runnable(feeds).values())
        assert len(got) == len(expected), f"{len(got)} outputs, expected {len(expected)}"
        for ref, out in zip(expected, got):
            assert_similar(_normalize(ref), out, case.rtol, case.atol)


def attempt(case: Any) -> tuple[str, str]:
    """``(outcome, detail)``: outcome is ``pass``, ``refused``, ``error`` or ``wrong``."""
    from amanda_core.mapping import ConversionError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = to_tf(case.model)
    except ConversionError as e:
        ops = sorted({u[0] for u in e.unconverted})
        return "refused", ("unconverted: " + ", ".join(ops)) if ops else str(e).splitlines()[0][:300]
    except Exception as e:  # noqa: BLE001 - every failure is a result to count
        return "error", f"convert: {type(e).__name__}: {e}".splitlines()[0][:300]
    try:
        run_tf(graph, case)
    except AssertionError as e:
        return "wrong", " ".join(str(e).split())[:300]
    except Exception as e:  # noqa: BLE001
        return "error", f"run: {type(e).__name__}: {e}".splitlines()[0][:300]
    return "pass", ""


def run_suite(cases: list[Any], verbose: bool = False) -> dict[str, Any]:
    results: dict[str, tuple[bool, str, str]] = {}
    counts_beyond: Counter[bool] = Counter()
    for case in cases:
        ort_ok = ort_passes(case)
        outcome, detail = attempt(case)
        results[case.name] = (ort_ok, outcome, detail)
        if beyond_tf(case.model) is not None:
            counts_beyond[ort_ok] += 1
        if verbose and outcome != "pass":
            print(f"{case.name}: {outcome}{' (ort fails too)' if not ort_ok else ''}: {detail}", flush=True)
    counts: Counter[str] = Counter()
    for ort_ok, outcome, _ in results.values():
        counts[outcome] += 1
        counts["ort pass"] += ort_ok
        if ort_ok:
            counts[f"ort pass, tf {outcome}"] += 1
    counts["beyond tf"] = counts_beyond[True] + counts_beyond[False]
    counts["ort pass, beyond tf"] = counts_beyond[True]
    return {"results": results, "counts": counts}


def refusal_groups(results: dict[str, tuple[bool, str, str]]) -> list[tuple[str, list[str], list[str]]]:
    """The refused cases grouped by what stopped them: each unconverted op type (a case refused for two op types
    is in both groups), or the first line of the refusal when it names none.  ``(group, cases onnxruntime
    passes, other cases)``, the largest groups (by onnxruntime's cases, then all) first."""
    groups: dict[str, tuple[list[str], list[str]]] = {}
    for name, (ort_ok, outcome, detail) in results.items():
        if outcome != "refused":
            continue
        keys = detail[len("unconverted: "):].split(", ") if detail.startswith("unconverted: ") else [detail]
        for key in keys:
            ort_cases, others = groups.setdefault(key, ([], []))
            (ort_cases if ort_ok else others).append(name)
    order = sorted(groups.items(), key=lambda kv: (-len(kv[1][0]), -len(kv[1][0]) - len(kv[1][1]), kv[0]))
    return [(key, ort_cases, others) for key, (ort_cases, others) in order]


def print_groups(results: dict[str, tuple[bool, str, str]], show_cases: bool = False) -> None:
    print("refused, by unconverted op (cases onnxruntime passes / all):")
    for key, ort_cases, others in refusal_groups(results):
        print(f"  {key}: {len(ort_cases)} / {len(ort_cases) + len(others)}")
        if show_cases:
            for name in ort_cases:
                print(f"      {name}")
            for name in others:
                print(f"      {name} (ort fails too)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="*", help="case names (default: all)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every case that does not pass")
    parser.add_argument("-k", dest="words", action="append", default=[],
                        help="only the cases whose name holds this text (repeatable: any of them)")
    parser.add_argument("--groups", action="store_true",
                        help="list the refused cases grouped by unconverted op type, largest groups first")
    args = parser.parse_args(argv)
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    start = time.perf_counter()
    cases = load_cases(args.cases or None)
    if args.words:
        cases = [c for c in cases if any(w in c.name for w in args.words)]
    suite = run_suite(cases, args.verbose)
    c = suite["counts"]
    n = len(cases)
    ort = c["ort pass"]
    both = c["ort pass, tf pass"]
    print(f"node cases: {n}")
    print(f"onnxruntime passes: {ort}")
    print(f"converted to TF and pass: {c['pass']} ({both} of onnxruntime's {ort}: "
          f"{100.0 * both / max(ort, 1):.1f}%)")
    reach = ort - c["ort pass, beyond tf"]
    print(f"beyond TensorFlow (a graph input or output of an element type no TF kernel computes with: "
          f"{', '.join(BEYOND_TF)}): {c['beyond tf']}, {c['ort pass, beyond tf']} of them among onnxruntime's; "
          f"the ceiling: {reach} of onnxruntime's {ort} ({100.0 * reach / max(ort, 1):.1f}%)")
    print(f"refused (no exact rule): {c['refused']}")
    print(f"converted, TF failed to run: {c['error']}")
    print(f"converted, wrong result: {c['wrong']}")
    if args.groups:
        print_groups(suite["results"], show_cases=args.verbose)
    print(f"seconds: {time.perf_counter() - start:.0f}")
    return 0 if c["wrong"] == 0 and c["error"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
