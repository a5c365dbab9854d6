"""ONNX -> TensorFlow through amanda-onnx's passes: LinearAttention as its function body (``onnx-expand-functions``
before ``onnx-newest-to-tf``), RNN, GRU, LSTM and Scan of a length known at conversion step by step
(``onnx-unroll`` before ``onnx-to-tf``), cases of the stored ONNX node suite converted and run with
``bench/onnx_node_suite_tf.py``'s functions; the LSTM BlockLSTMV2 computes stays one op, and a recurrence of a
symbolic length stays refused.  This module imports TensorFlow; it never imports torch.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("onnx")

CONVERTS = ["test_gru_seq_length", "test_gru_bidirectional", "test_simple_rnn_reverse", "test_rnn_seq_length",
            "test_lstm_with_peepholes", "test_lstm_bidirectional", "test_lstm_reverse", "test_scan_sum",
            "test_scan9_multi_state", "test_linear_attention_gated_delta_gqa",
            "test_linear_attention_prefill_with_past_expanded", "test_linear_attention_fp16"]
"""Node cases the passes make convertible (each must convert and match)."""


def test_unrolled_cases_convert_and_match(bench: Any) -> None:
    found = bench.load_cases(CONVERTS)
    assert sorted(c.name for c in found) == sorted(CONVERTS)
    for case in found:
        outcome, detail = bench.attempt(case)
        assert outcome == "pass", (case.name, outcome, detail)


def test_fused_lstm_stays_one_op(bench: Any) -> None:
    """An LSTM BlockLSTMV2 computes (forward, with a bias, zero initial states) is left whole for the table."""
    (case,) = bench.load_cases(["test_lstm_with_initial_bias"])
    graph = bench.to_tf(case.model)
    types = {op.type for op in graph}
    assert "BlockLSTMV2" in types and "Sigmoid" not in types, types
    assert bench.attempt(case) == ("pass", "")


@pytest.mark.parametrize("kind,gates", [("GRU", 3), ("RNN", 1)])
def test_symbolic_length_is_refused(bench: Any, kind: str, gates: int) -> None:
    """The number of steps is a dimension known only at run time: nothing to unroll, the op is named."""
    from onnx import TensorProto, helper

    node = helper.make_node(kind, ["X", "W", "R"], ["Y", "Y_h"], hidden_size=4)
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["steps", 2, 3]),
              helper.make_tensor_value_info("W", TensorProto.FLOAT, [1, gates * 4, 3]),
              helper.make_tensor_value_info("R", TensorProto.FLOAT, [1, gates * 4, 4])]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Y_h")]
    model = helper.make_model(helper.make_graph([node], "rec", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 14)])
    case = SimpleNamespace(name=f"{kind}_symbolic", model=model, data_sets=[], rtol=1e-5, atol=1e-6)
    assert bench.attempt(case) == ("refused", f"unconverted: {kind}")
