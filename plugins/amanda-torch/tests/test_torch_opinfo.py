"""The per-op suite on a representative subset (the full run, beside torch.onnx, is ``bench/torch_opinfo.py``):
torch's own OpInfo samples (float32, CPU), each op exported alone with torch.export, converted to ONNX with the
torch -> ONNX table, run in onnxruntime and compared with eager.  Every sample Amanda converts must be right (a
conversion that cannot be exact is refused, never written with other numbers), and at least FLOOR samples of the
subset convert."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("expecttest")  # torch.testing._internal imports it

BENCH = Path(__file__).resolve().parents[3] / "bench" / "torch_opinfo.py"

# one OpInfo per family: elementwise math (with torch's own rounding and sign rules) and special functions,
# activations, comparisons, reductions (NaN-skipping, variance with mean), losses, normalizations, resampling, shape
# and indexing ops (scatter, index tables, splits), sorting, linear algebra
SUBSET = [
    "acos", "round.decimals_3", "trunc", "frac", "log2", "expm1", "isfinite",
    "remainder", "fmod", "div.floor_rounding", "div.trunc_rounding", "rsub", "copysign",
    "addcdiv", "heaviside", "logical_xor", "atan2", "special.ndtr", "lerp",
    "nn.functional.softplus", "nn.functional.mish", "nn.functional.threshold",
    "nn.functional.logsigmoid", "softmax.with_dtype",
    "max.reduction_with_dim", "sum", "argmax", "clamp", "nansum", "var_mean",
    "nn.functional.mse_loss", "nn.functional.cross_entropy", "nn.functional.group_norm",
    "nn.functional.interpolate.bilinear",
    "flip", "mT", "expand_as", "ones_like", "cat", "roll", "diagonal", "hsplit",
    "scatter_reduce.sum", "index_put", "argsort", "isin",
    "einsum", "linalg.det",
]
FLOOR = 48  # measured: every sample of the subset converts and matches

@pytest.fixture(scope="module")
def bench() -> Any:
    spec = importlib.util.spec_from_file_location("torch_opinfo_bench", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def tables() -> Any:
    """The torch -> ONNX parts only (what the conversion's plan picks among all registered tables)."""
    import amanda_torch.plugin as plugin
    from amanda_core.mapping import load_table, merge_parts

    return merge_parts([load_table(p, trusted=True) for p in sorted(plugin.TABLES.glob("torch_to_onnx*.yaml"))])


def test_opinfo_subset_converts_exactly_or_is_refused(bench: Any, tables: Any) -> None:
    import amanda_onnx
    from amanda_core.mapping import convert
    from amanda_core.plugin import registry
    from amanda_core.plugin.passes import registered_passes
    from amanda_torch.importer import load_model

    reg = registry()
    passes = registered_passes()

    def to_onnx(program: Any) -> Any:
        graph = convert(load_model(program), "amanda/onnx/18", tables, reg.namespaces, passes=passes).graph
        return amanda_onnx.to_model(graph)

    bench.amanda_onnx_model = to_onnx
    infos = {bench.op_label(i): i for i in bench.float32_ops(set(SUBSET))}
    missing = sorted(set(SUBSET) - set(infos))
    assert not missing, f"not in this torch's op_db: {missing}"
    records = []
    for label in SUBSET:
        records += bench.run_op(infos[label], 1, ("amanda",))
    bad = [f"{r['op']}[{r['sample']}] {r['outcome']}: {r['detail']}" for r in records
           if r["outcome"] in ("wrong", "invalid")]
    assert not bad, "converted but wrong:\n" + "\n".join(bad)
    passed = [r for r in records if r["outcome"] == "pass"]
    refused = [f"{r['op']}: {r['detail']}" for r in records if r["outcome"] != "pass"]
    assert len(passed) >= FLOOR, f"{len(passed)} of {len(records)} passed (floor {FLOOR}); others:\n" \
        + "\n".join(refused)


def test_a_wrong_result_is_told_from_a_right_one(bench: Any) -> None:
    import numpy as np

    want = [np.array([1.0, np.nan, np.inf], dtype=np.float32)]
    assert bench.compare([want[0].copy()], want) is None
    assert "NaN" in bench.compare([np.array([1.0, 0.0, np.inf], dtype=np.float32)], want)
    assert "inf" in bench.compare([np.array([1.0, np.nan, -np.inf], dtype=np.float32)], want)
    assert "abs diff" in bench.compare([np.array([1.01, np.nan, np.inf], dtype=np.float32)], want)
    assert "dtype" in bench.compare([want[0].astype(np.float64)], want)
    assert "shape" in bench.compare([want[0][:2]], want)
    assert "values differ" in bench.compare([np.array([1, 2])], [np.array([1, 3])])


def test_the_torch_to_onnx_parts_check_against_both_schemas(tables: Any) -> None:
    from amanda_core.mapping.check import check_table
    from amanda_core.plugin import registry

    (table,) = tables
    errors, _ = check_table(table, registry().namespaces)
    assert not errors, "\n".join(str(e) for e in errors)
