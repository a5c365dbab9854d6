"""Recurrences of a static length unrolled before ``onnx-to-torch`` (``amanda_torch/unroll_onnx.py``): GRU variants
the node suite does not hold, checked against onnxruntime, and the cases that must stay refused."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

BENCH = Path(__file__).resolve().parents[3] / "bench" / "onnx_torch.py"


@pytest.fixture(scope="module")
def bench() -> Any:
    spec = importlib.util.spec_from_file_location("onnx_torch_bench_unroll", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tables(bench: Any) -> list[Any]:
    return bench.amanda_tables()


def _expected(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """onnxruntime's outputs; a batch-major GRU (which onnxruntime's kernel refuses) as the sequence-major one on
    the swapped inputs, its outputs swapped back."""
    layout = {a.name: a.i for a in model.graph.node[0].attribute}.get("layout", 0)
    if layout:
        model = onnx.ModelProto.FromString(model.SerializeToString())
        node = model.graph.node[0]
        for a in node.attribute:
            if a.name == "layout":
                a.i = 0
        for vi in model.graph.input:
            if vi.name in ("X", "H0"):
                dims = vi.type.tensor_type.shape.dim
                d0, d1 = dims[0].dim_value, dims[1].dim_value
                dims[0].dim_value, dims[1].dim_value = d1, d0
        feeds = {k: (np.swapaxes(v, 0, 1).copy() if k in ("X", "H0") else v) for k, v in feeds.items()}
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    y, y_h = session.run(None, feeds)
    if layout:
        y, y_h = np.transpose(y, (2, 0, 1, 3)), np.swapaxes(y_h, 0, 1)
    return [y, y_h]


def _run(bench: Any, tables: list[Any], model: Any, feeds: dict[str, np.ndarray]) -> tuple[str, str]:
    """Amanda's outcome on ``model`` against onnxruntime's outputs on ``feeds``."""
    from amanda_core.plugin.manager import registry

    expected = _expected(model, feeds)
    case = SimpleNamespace(model=model, data_sets=[(list(feeds.values()), expected)], rtol=1e-4, atol=1e-5)
    outcome, why, _ = bench.amanda_case(case, tables, registry().namespaces)
    return outcome, why


def _gru(direction: str, layout: int, lbr: int, seq: int | str = 4, seq_lens: Any = None,
         lens_input: bool = False, **extra: Any) -> tuple[Any, dict[str, np.ndarray]]:
    rng = np.random.default_rng(7)
    batch, size, hidden = 2, 3, 4
    dirs = 2 if direction == "bidirectional" else 1
    s = seq if isinstance(seq, int) else 4
    x_shape = [batch, seq, size] if layout else [seq, batch, size]
    h_shape = [batch, dirs, hidden] if layout else [dirs, batch, hidden]
    feeds = {"X": rng.standard_normal([batch, s, size] if layout else [s, batch, size]).astype(np.float32),
             "W": rng.standard_normal([dirs, 3 * hidden, size]).astype(np.float32),
             "R": rng.standard_normal([dirs, 3 * hidden, hidden]).astype(np.float32),
             "B": rng.standard_normal([dirs, 6 * hidden]).astype(np.float32),
             "H0": rng.standard_normal(h_shape).astype(np.float32)}
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, x_shape if n == "X" else list(v.shape))
              for n, v in feeds.items()]
    inits = []
    lens = ""
    if seq_lens is not None:
        lens = "lens"
        if lens_input:
            feeds["lens"] = np.array(seq_lens, dtype=np.int32)
            inputs.append(helper.make_tensor_value_info("lens", TensorProto.INT32, [batch]))
        else:
            inits.append(helper.make_tensor("lens", TensorProto.INT32, [batch], seq_lens))
    node = helper.make_node("GRU", ["X", "W", "R", "B", lens, "H0"], ["Y", "Y_h"], hidden_size=hidden,
                            direction=direction, layout=layout, linear_before_reset=lbr, **extra)
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Y_h")]
    graph = helper.make_graph([node], "gru", inputs, outputs, initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), feeds


@pytest.mark.parametrize("direction,layout,lbr", [("forward", 0, 1), ("reverse", 1, 0), ("bidirectional", 0, 0),
                                                  ("bidirectional", 1, 1)])
def test_gru_unrolled_matches_onnxruntime(bench: Any, tables: list[Any], direction: str, layout: int,
                                          lbr: int) -> None:
    model, feeds = _gru(direction, layout, lbr)
    assert _run(bench, tables, model, feeds) == ("passed", "")


def test_gru_constant_full_sequence_lens(bench: Any, tables: list[Any]) -> None:
    model, feeds = _gru("forward", 0, 0, seq_lens=[4, 4])
    assert _run(bench, tables, model, feeds) == ("passed", "")


@pytest.mark.parametrize("kwargs", [dict(seq_lens=[4, 2]), dict(seq_lens=[4, 4], lens_input=True),
                                    dict(seq="steps"), dict(clip=1.0),
                                    dict(activations=["Sigmoid", "Relu"])])
def test_gru_not_static_is_refused(bench: Any, tables: list[Any], kwargs: dict[str, Any]) -> None:
    model, feeds = _gru("forward", 0, 0, **kwargs)
    from amanda_core.plugin.manager import registry

    case = SimpleNamespace(model=model, data_sets=[], rtol=1e-4, atol=1e-5)
    outcome, why, _ = bench.amanda_case(case, tables, registry().namespaces)
    assert (outcome, why) == ("refused", "GRU")
