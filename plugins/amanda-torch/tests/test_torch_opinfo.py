"""The per-op suite on a representative subset (the full run, beside torch.onnx, is ``bench/torch_opinfo.py``):
torch's own OpInfo samples (float32, CPU), each op exported alone with torch.export, converted to ONNX with the
torch -> ONNX table, run in onnxruntime and compared with eager.  Every sample Amanda converts must be right (a
conversion that cannot be exact is refused, never written with other numbers), and at least FLOOR samples of the
subset convert."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("expecttest")  # torch.testing._internal imports it


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
    # cumulative ops over a triangle, integration, real inverse DFTs and shifts, contractions, histograms,
    # quantiles, pooling torch sizes its own way, reductions by index, training-mode batch norm, unpooling
    "cummax", "logcumsumexp", "cumulative_trapezoid", "fft.hfft", "fft.fftshift", "tensordot", "histc",
    "nanquantile", "nn.functional.max_pool2d", "nn.functional.avg_pool2d", "scatter_reduce.mean",
    "index_reduce.mean", "nn.functional.batch_norm", "nn.functional.max_unpool2d", "masked_scatter", "gradient",
]
FLOOR = 64  # measured: every sample of the subset converts and matches

@pytest.fixture(scope="module")
def bench(load_bench: Any) -> Any:
    return load_bench("torch_opinfo.py")


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


def _nan_tie_inputs() -> dict[str, Any]:
    nan, inf = float("nan"), float("inf")
    return {
        "ties": torch.tensor([[1.0, 3.0, 3.0, -0.0, 0.0, 3.0], [2.0, nan, 1.0, nan, 5.0, -inf]]),
        "infs": torch.tensor([[-inf, -inf, 0.5, inf, -inf], [nan, 1.0, 2.0, -inf, inf]]),
        "nans": torch.tensor([[nan, nan, nan], [1.0, nan, 2.0], [4.0, 3.0, 7.0]]),
        "edges": torch.tensor([0.0, 0.1, 0.2, 9.9, 10.0, -0.1, 10.1, 5.0, 6.3, nan, 3.3000002]),
        "plain": torch.tensor([[[1.0, 4.0, 4.0, -2.0, 0.5, 7.0, 7.0], [3.0, -1.0, 2.0, 2.0, 9.0, -5.0, 0.0]]]),
    }


# edge cases OpInfo samples do not reach (NaN, ties, signed zeros, infinities, values on bin edges, short axes,
# every interpolation and pooling mode): each converted module must match eager exactly as the bench compares
EDGE_CASES = [
    ("cummax_ties_nan", lambda x: torch.cummax(x, 1), "ties"),
    ("cummin_ties_nan", lambda x: torch.cummin(x, 1), "ties"),
    ("cummax_dim0", lambda x: torch.cummax(x, 0), "infs"),
    ("cumprod_infs", lambda x: torch.cumprod(x, 1), "infs"),
    ("logcumsumexp_infs", lambda x: torch.logcumsumexp(x, 1), "infs"),
    ("quantile_nan_linear", lambda x: torch.quantile(x, 0.3, dim=1, keepdim=True), "nans"),
    ("quantile_lower", lambda x: torch.quantile(x, 0.4, dim=0, interpolation="lower"), "ties"),
    ("quantile_higher_all", lambda x: torch.quantile(x, 0.75, interpolation="higher"), "edges"),
    ("quantile_nearest", lambda x: torch.quantile(x, 0.5, dim=1, interpolation="nearest"), "infs"),
    ("nanquantile_midpoint", lambda x: torch.nanquantile(x, 0.35, dim=1, interpolation="midpoint"), "nans"),
    ("nanquantile_all_nan_row", lambda x: torch.nanquantile(x, 0.9, dim=0), "nans"),
    ("histc_edges", lambda x: torch.histc(x, bins=100, min=0, max=10), "edges"),
    ("gradient_order2", lambda x: torch.gradient(x, spacing=0.5, dim=1, edge_order=2)[0], "ties"),
    ("gradient_two_points", lambda x: torch.gradient(x[:, :2], dim=1)[0], "ties"),
    ("irfft_odd", lambda x: torch.fft.irfft(x, 7, dim=0, norm="forward"), "ties"),
    ("hfft_default", lambda x: torch.fft.hfft(x), "ties"),
    ("fftshift_dims", lambda x: torch.fft.ifftshift(x, dim=(0, 1)), "nans"),
    ("max_pool_ceil_nan", lambda x: torch.nn.functional.max_pool1d(x[None], 2, 2, ceil_mode=True), "infs"),
    ("max_pool_ceil_indices",
     lambda x: torch.nn.functional.max_pool1d(x, 3, 2, 1, ceil_mode=True, return_indices=True), "plain"),
    ("avg_pool_ceil_divisor",
     lambda x: torch.nn.functional.avg_pool2d(x[None], 2, 2, 1, ceil_mode=True, divisor_override=3), "plain"),
    ("avg_pool_ceil_uncounted",
     lambda x: torch.nn.functional.avg_pool1d(x[None, :, :5], 2, 2, 1, ceil_mode=True, count_include_pad=False),
     "ties"),
    ("scatter_mean_without_self",
     lambda x: x.scatter_reduce(1, torch.tensor([[0, 0, 2], [1, 1, 1]]), x[:, :3] * 2, "mean", include_self=False),
     "ties"),
    ("index_reduce_mean", lambda x: x.index_reduce(0, torch.tensor([1, 1]), x * 3, "mean"), "ties"),
    ("masked_scatter", lambda x: x.masked_scatter(x > 0, -x), "ties"),
    ("cartesian_prod_3", lambda x: torch.cartesian_prod(x[0, :2], x[1, :3], x[0, 3:5]), "ties"),
    ("block_diag_ranks", lambda x: torch.block_diag(x[0], x[1:, :2], x[0, 1]), "ties"),
]


@pytest.mark.parametrize("name,fn,which", EDGE_CASES, ids=[c[0] for c in EDGE_CASES])
def test_edge_cases_match_eager(bench: Any, tables: Any, name: str, fn: Any, which: str) -> None:
    import onnx

    import amanda_onnx
    from amanda_core.mapping import convert
    from amanda_core.plugin import registry
    from amanda_torch.importer import load_model

    class Op(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            out = fn(x)
            return out if isinstance(out, tuple) else (out,)

    x = _nan_tie_inputs()[which]
    want = [o.numpy() for o in Op()(x.clone())]
    program = torch.export.export(Op(), (x,))
    graph = convert(load_model(program), "amanda/onnx/18", tables, registry().namespaces).graph
    model = amanda_onnx.to_model(graph)
    onnx.checker.check_model(model)
    diff = bench.compare(bench.run_onnx(model, (x,)), want)
    assert diff is None, diff
