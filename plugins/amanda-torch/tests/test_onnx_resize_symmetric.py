"""Resize-19's ``half_pixel_symmetric`` mode to torch (``amanda_torch/onnx_resize.py``): linear and cubic, against
onnxruntime; nearest mode and cubic with run-time sizes stay refused."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402


def _model(mode: str, by: str, values: list[float]) -> tuple[Any, dict[str, np.ndarray]]:
    """A Resize-19 whose scales or sizes are graph inputs (values at run time), its output shape declared."""
    rng = np.random.default_rng(3)
    feeds = {"X": rng.standard_normal([1, 2, 5, 6]).astype(np.float32)}
    if by == "scales":
        feeds["scales"] = np.array(values, dtype=np.float32)
        ins, vi = ["X", "", "scales"], helper.make_tensor_value_info("scales", TensorProto.FLOAT, [4])
    else:
        feeds["sizes"] = np.array(values, dtype=np.int64)
        ins, vi = ["X", "", "", "sizes"], helper.make_tensor_value_info("sizes", TensorProto.INT64, [4])
    out = [int(np.floor(n * v)) for n, v in zip([1, 2, 5, 6], values)] if by == "scales" else [int(v) for v in values]
    node = helper.make_node("Resize", ins, ["Y"], mode=mode, coordinate_transformation_mode="half_pixel_symmetric")
    graph = helper.make_graph([node], "resize", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 2, 5, 6]),
                                                 vi], [helper.make_tensor_value_info("Y", TensorProto.FLOAT, out)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]), feeds


def _outcome(bench: Any, tables: list[Any], model: Any, feeds: dict[str, np.ndarray]) -> tuple[str, str]:
    from amanda_core.plugin.manager import registry

    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    case = SimpleNamespace(model=model, data_sets=[(list(feeds.values()), expected)], rtol=1e-4, atol=1e-5)
    outcome, why, _ = bench.amanda_case(case, tables, registry().namespaces)
    return outcome, why


@pytest.mark.parametrize("mode,by,values", [("linear", "scales", [1.0, 1.0, 1.7, 0.6]),
                                            ("cubic", "scales", [1.0, 1.0, 0.7, 2.5]),
                                            ("linear", "sizes", [1, 2, 8, 4])])
def test_half_pixel_symmetric_matches_onnxruntime(bench: Any, tables: list[Any], mode: str, by: str,
                                                  values: list[float]) -> None:
    model, feeds = _model(mode, by, values)
    assert _outcome(bench, tables, model, feeds) == ("passed", "")


@pytest.mark.parametrize("mode,by,values", [("nearest", "scales", [1.0, 1.0, 2.0, 2.0]),
                                            ("cubic", "sizes", [1, 2, 3, 9])])
def test_half_pixel_symmetric_without_rule_is_refused(bench: Any, tables: list[Any], mode: str, by: str,
                                                      values: list[float]) -> None:
    """Nearest mode has no rule for this coordinate mode; cubic with run-time sizes has none in any such mode."""
    model, feeds = _model(mode, by, values)
    assert _outcome(bench, tables, model, feeds) == ("refused", "Resize")
