"""Opset upgrade of the ONNX node test suite: Amanda's tables against onnx's version converter.

Every node case of ``onnx.backend.test.loader.load_model_tests(kind="node")`` whose default-domain opset is below
the target (the newest opset both onnx and onnxruntime know) is upgraded twice in the same run:

* by Amanda: ``amanda_onnx.load_model`` -> ``amanda_core.mapping.convert`` with ``amanda_onnx.opset.tables()``
  -> ``amanda_onnx.to_model``;
* by ``onnx.version_converter.convert_version``;

and both results run in onnxruntime against the case's expected outputs, compared the way onnx's backend tests
compare them (same shape and dtype, ``assert_allclose`` with the case's ``rtol``/``atol``, strings exactly,
sequences element by element).  Cases whose original model onnxruntime cannot run are counted apart (and still
converted, for the record).

Every model Amanda converts must end at the target opset (and every one-step downgrade at the opset below the
case's).  The module fails if Amanda passes fewer cases than the version converter, if a case the version
converter passes fails with Amanda and is not in :data:`KNOWN` (with its reason), or if the runnable cases Amanda
fails are not exactly :data:`EXPECTED_FAILURES` (each named with its reason; an entry that passes now is a failure
too, so the list stays true).  The counts are printed in the terminal summary (the ``amanda_report`` hook of the
root ``conftest.py``), the failing cases one by one with ``-v`` or in ``.pytest_cache/d/amanda/details.txt``.
"""

from __future__ import annotations

import time
import warnings
from collections import Counter
from typing import Any

import numpy as np
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import pytest

pytestmark = pytest.mark.slow

KNOWN: dict[str, str] = {}
"""Cases the version converter passes and Amanda does not, with the reason (none at present)."""

_NO_KERNEL = "onnxruntime {version} has no CPU kernel for {op} at the target opset (the version converter fails too)"
EXPECTED_FAILURES: dict[str, str] = {
    "test_dynamicquantizelinear_expanded": _NO_KERNEL.format(version="1.32.0", op="QuantizeLinear"),
    "test_dynamicquantizelinear_max_adjusted_expanded": _NO_KERNEL.format(version="1.32.0", op="QuantizeLinear"),
    "test_dynamicquantizelinear_min_adjusted_expanded": _NO_KERNEL.format(version="1.32.0", op="QuantizeLinear"),
    "test_if_opt": _NO_KERNEL.format(version="1.32.0", op="Optional"),
    "test_loop16_seq_none": _NO_KERNEL.format(version="1.32.0", op="OptionalHasElement"),
    "test_swish": _NO_KERNEL.format(version="1.32.0", op="Swish"),
}
"""Runnable cases (the original runs in onnxruntime) that Amanda's upgrade fails, with the reason: the upgraded
model is right but onnxruntime cannot run it (onnx 1.23.2, onnxruntime 1.32.0, target opset 28)."""


def target_opset() -> int:
    """The newest default-domain opset that both onnx and onnxruntime's CPU kernels know."""
    from onnxruntime.capi import _pybind_state as capi

    newest = 0
    for k in capi.get_all_opkernel_def():
        if k.domain in ("", "ai.onnx") and k.provider == "CPUExecutionProvider":
            newest = max(newest, int(k.version_range[0]))
    return min(newest, int(onnx.defs.onnx_opset_version()))


def _opset(model: Any) -> int | None:
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return int(o.version)
    return None


def _normalize(value: Any) -> Any:
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
    if ref.dtype == object:
        np.testing.assert_array_equal(out, ref)
        return
    np.testing.assert_equal(out.dtype, ref.dtype)
    r = rtol
    if out.dtype.name == "bfloat16":
        r = max(rtol, 2**-6)
        out, ref = out.astype(np.float32), ref.astype(np.float32)
    np.testing.assert_allclose(out, ref, rtol=r, atol=atol)


def run_case(model: Any, case: Any) -> None:
    """Run ``model`` on every data set of ``case``; raises if onnxruntime fails or an output differs."""
    options = ort.SessionOptions()
    options.log_severity_level = 4
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    for inputs, expected in case.data_sets:
        feeds = {n: _normalize(v) for n, v in zip(names, inputs)}
        got = session.run(None, feeds)
        assert len(got) == len(expected), f"{len(got)} outputs, expected {len(expected)}"
        for ref, out in zip(expected, got):
            assert_similar(_normalize(ref), out, case.rtol, case.atol)


def amanda_upgrade(model: Any, target: int) -> Any:
    import amanda_onnx
    from amanda_core.mapping import convert
    from amanda_core.plugin.manager import registry
    from amanda_onnx import opset

    graph = amanda_onnx.load_model(model)
    result = convert(graph, f"amanda/onnx/{target}", opset.tables(), registry().namespaces, copy=False)
    return amanda_onnx.to_model(result.graph)


def converter_upgrade(model: Any, target: int) -> Any:
    from onnx import version_converter

    return version_converter.convert_version(model, target)


def _attempt(convert: Any, model: Any, case: Any, target: int) -> tuple[str, str, float, int | None]:
    """``(outcome, detail, seconds converting, opset the converted model ends at)``; outcome is ``pass``,
    ``convert`` or ``run``."""
    start = time.perf_counter()
    try:
        converted = convert(model, target)
    except Exception as e:  # noqa: BLE001 - every failure is a result to count
        return "convert", f"{type(e).__name__}: {e}"[:400], time.perf_counter() - start, None
    seconds = time.perf_counter() - start
    try:
        run_case(converted, case)
    except Exception as e:  # noqa: BLE001
        return "run", f"{type(e).__name__}: {e}"[:400], seconds, _opset(converted)
    return "pass", "", seconds, _opset(converted)


@pytest.fixture(scope="module")
def cases() -> list[Any]:
    from onnx.backend.test import loader

    ort.set_default_logger_severity(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(loader.load_model_tests(kind="node"))


@pytest.fixture(scope="module")
def suite(cases: list[Any], amanda_report: Any) -> dict[str, Any]:
    target = target_opset()
    results: dict[str, dict[str, Any]] = {}
    counts: Counter[str] = Counter()
    seconds = Counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in cases:
            v = _opset(case.model)
            if v is None or v >= target:
                counts["not below target"] += 1
                continue
            try:
                run_case(case.model, case)
                original = True
            except Exception:  # noqa: BLE001
                original = False
            a, a_detail, a_s, a_opset = _attempt(amanda_upgrade, case.model, case, target)
            c, c_detail, c_s, _ = _attempt(converter_upgrade, case.model, case, target)
            seconds["amanda"] += a_s
            seconds["converter"] += c_s
            results[case.name] = {"opset": v, "original": original, "amanda": a, "amanda_detail": a_detail,
                                  "amanda_opset": a_opset, "converter": c, "converter_detail": c_detail}
            group = "runnable" if original else "original fails"
            counts[f"{group}"] += 1
            counts[f"{group}: amanda {a}"] += 1
            counts[f"{group}: converter {c}"] += 1
    out = {"target": target, "results": results, "counts": counts, "seconds": seconds, "total": len(cases)}
    _report_upgrades(out, amanda_report)
    return out


def _report_upgrades(suite: dict[str, Any], amanda_report: Any) -> None:
    """The counts, for the terminal summary; the cases Amanda fails, one by one, as details."""
    runnable = _runnable(suite)
    broken = {n: r for n, r in suite["results"].items() if not r["original"]}
    a = sum(r["amanda"] == "pass" for r in runnable.values())
    c = sum(r["converter"] == "pass" for r in runnable.values())
    ab = sum(r["amanda"] == "pass" for r in broken.values())
    cb = sum(r["converter"] == "pass" for r in broken.values())
    n = len(runnable)
    lines = [
        f"ONNX node suite upgraded to opset {suite['target']} ({suite['total']} cases; {len(suite['results'])} "
        f"below the target)",
        f"  original runs in onnxruntime: {n} cases",
        f"    Amanda tables:      {a}/{n} pass ({100.0 * a / max(n, 1):.1f}%), conversion "
        f"{suite['seconds']['amanda']:.1f} s",
        f"    version converter:  {c}/{n} pass ({100.0 * c / max(n, 1):.1f}%), conversion "
        f"{suite['seconds']['converter']:.1f} s",
        f"  original fails in onnxruntime: {len(broken)} cases (after upgrade: Amanda runs {ab}, version converter "
        f"{cb})",
    ]
    fails = sorted((name, r) for name, r in runnable.items() if r["amanda"] != "pass")
    details = [f"Amanda fails {name} (opset {r['opset']}; converter: {r['converter']}): {r['amanda_detail'][:160]}"
               for name, r in fails]
    amanda_report("ONNX node suite: opset upgrade", lines, details)


def amanda_downgrade(model: Any, target: int) -> tuple[Any, list[tuple[str, str]]]:
    """The model converted down to ``target`` and the (table, rule) pairs of the written rules that produced ops."""
    import amanda_onnx
    from amanda_core.mapping import convert
    from amanda_core.plugin.manager import registry
    from amanda_onnx import opset

    graph = amanda_onnx.load_model(model)
    result = convert(graph, f"amanda/onnx/{target}", opset.tables(), registry().namespaces, copy=False,
                     exclude_tags=["approximate"])  # exact downgrades only (--allow-approximate's are tested apart)
    used = {(r.table, r.rule) for report in result.reports for r in report.rules if r.matches}
    return amanda_onnx.to_model(result.graph), sorted(used)


@pytest.fixture(scope="module")
def downgrades(cases: list[Any], suite: dict[str, Any], amanda_report: Any) -> dict[str, Any]:
    """Every runnable case above opset 7 taken one opset down by Amanda and run against its expected outputs.
    Only exact downgrades exist, so a case either fails to convert (naming the ops) or must pass."""
    from amanda_core.mapping import ConversionError

    outcome: dict[str, tuple[str, str]] = {}
    ends_at: dict[str, tuple[int, int | None]] = {}  # case: (opset asked for, opset the model ends at)
    rules: Counter[tuple[str, str]] = Counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in cases:
            r = suite["results"].get(case.name)
            v = _opset(case.model)
            if v is None or v <= 7 or (r is not None and not r["original"]):
                continue
            if r is None:  # at or above the upgrade target: runnable?
                try:
                    run_case(case.model, case)
                except Exception:  # noqa: BLE001
                    continue
            try:
                model, used = amanda_downgrade(case.model, v - 1)
            except ConversionError as e:
                outcome[case.name] = ("not converted", str(e).splitlines()[0][:200])
                continue
            rules.update(used)
            ends_at[case.name] = (v - 1, _opset(model))
            try:
                run_case(model, case)
            except Exception as e:  # noqa: BLE001
                outcome[case.name] = ("wrong", f"opset {v} -> {v - 1}: {type(e).__name__}: {e}"[:400])
                continue
            outcome[case.name] = ("pass", "")
    down = Counter(o for o, _ in outcome.values())
    amanda_report("ONNX node suite: one opset down", [
        f"  one opset down (Amanda, runnable cases above opset 7): {down['pass']} pass, "
        f"{down['not converted']} not converted (no exact downgrade), {down['wrong']} wrong"])
    return {"outcome": outcome, "rules": rules, "ends_at": ends_at}


KNOWN_DOWNGRADE: dict[str, str] = {}
"""Cases whose one-step downgrade converts but does not pass, with the reason (none at present)."""


def test_downgrades_are_exact(downgrades):
    wrong = {n: d for n, (o, d) in downgrades["outcome"].items() if o == "wrong" and n not in KNOWN_DOWNGRADE}
    assert not wrong, "downgraded cases that do not pass:\n" + "\n".join(
        f"  {n}: {d}" for n, d in sorted(wrong.items()))


def test_every_downgrade_ends_one_opset_down(downgrades):
    assert len(downgrades["ends_at"]) > 800
    wrong = {n: e for n, (want, e) in downgrades["ends_at"].items() if e != want}
    assert not wrong, f"downgraded models that end at another opset: {sorted(wrong.items())[:20]}"


def test_written_downgrade_rules_are_exercised(downgrades):
    from amanda_onnx import opset

    written = {(t.name, r) for t in opset.downgrade_tables() for r in t.rules if t.source}
    used = {k for k in downgrades["rules"] if k in written}
    passed = sum(o == "pass" for o, _ in downgrades["outcome"].values())
    assert passed > 800  # onnx 1.23.2: 842
    # the others are exercised by test_onnx_opset_tables.py on models built for them
    for table, rule in [("onnx-opset-13-to-12", "softmax_last_axis"), ("onnx-opset-13-to-12", "split_equal_parts"),
                        ("onnx-opset-18-to-17", "reduce_all_axes"),
                        ("onnx-opset-18-to-17", "reduce_constant_axes_shared"),
                        ("onnx-opset-18-to-17", "split_given_sizes"),
                        ("onnx-opset-18-to-17", "split_num_outputs_even")]:
        # (`unread_constant` is a fallback now: the engine sweeps a constant whose last reader a rule removed)
        assert (table, rule) in used, (table, rule)


def _runnable(suite: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: r for n, r in suite["results"].items() if r["original"]}


def test_suite_covers_the_cases_below_the_target(suite):
    runnable = _runnable(suite)
    assert suite["target"] >= 18
    assert len(suite["results"]) > 1000  # onnx 1.23.2: 1,642 cases below opset 28
    assert len(runnable) > 1000


def test_every_upgrade_ends_at_the_target_opset(suite):
    converted = {n: r["amanda_opset"] for n, r in suite["results"].items() if r["amanda"] != "convert"}
    assert len(converted) > 1000
    wrong = {n: v for n, v in converted.items() if v != suite["target"]}
    assert not wrong, f"models Amanda upgraded that end at another opset than {suite['target']}: " \
                      f"{sorted(wrong.items())[:20]}"


def test_the_failures_are_the_expected_ones(suite):
    failing = {n for n, r in _runnable(suite).items() if r["amanda"] != "pass"}
    unexpected = {n: _runnable(suite)[n]["amanda_detail"][:200] for n in sorted(failing - set(EXPECTED_FAILURES))}
    passing_now = sorted(set(EXPECTED_FAILURES) - failing)
    assert not unexpected and not passing_now, f"Amanda fails cases not expected to fail: {unexpected}; " \
                                               f"EXPECTED_FAILURES entries that pass (or left the suite): {passing_now}"


def test_amanda_passes_at_least_as_many_cases_as_the_version_converter(suite):
    runnable = _runnable(suite)
    amanda = sum(r["amanda"] == "pass" for r in runnable.values())
    converter = sum(r["converter"] == "pass" for r in runnable.values())
    assert amanda >= converter, f"Amanda passes {amanda} cases, the version converter {converter}"


def test_no_unlisted_regression_against_the_version_converter(suite):
    regressions = {n: r["amanda_detail"] for n, r in _runnable(suite).items()
                   if r["converter"] == "pass" and r["amanda"] != "pass" and n not in KNOWN}
    assert not regressions, "cases the version converter passes and Amanda fails:\n" + "\n".join(
        f"  {n}: {d}" for n, d in sorted(regressions.items()))


def test_known_cases_still_fail(suite):
    stale = [n for n in KNOWN if n in suite["results"] and suite["results"][n]["amanda"] == "pass"]
    missing = [n for n in KNOWN if n not in suite["results"]]
    assert not stale and not missing, f"KNOWN entries that no longer fail: {stale}; not in the suite: {missing}"
