"""ONNX -> TensorFlow: sequences, optionals and control flow (``amanda_tf.sequences``, ``amanda_tf.control``).

The node cases are converted with ``bench/onnx_node_suite_tf.py``'s functions (the registered passes included) and
run with TensorFlow against their expected outputs; small models the suite lacks (negative positions, erasing,
uneven split lengths, a loop of zero steps, an empty optional) are checked against onnx's reference evaluator.
This module imports TensorFlow; it never imports torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("tensorflow")
onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

MODULES = ["identity", "if_", "loop", "sequence_map", "sequenceinsert", "splittosequence", "optionalhaselement",
           "optionalgetelement"]

CONVERTS = ["test_identity_sequence", "test_identity_opt", "test_if", "test_if_seq", "test_if_opt", "test_loop11",
            "test_loop13_seq", "test_sequence_map_identity_1_sequence", "test_sequence_map_add_2_sequences",
            "test_sequence_map_add_1_sequence_1_tensor", "test_sequence_map_extract_shapes",
            "test_sequence_map_identity_2_sequences_expanded", "test_sequence_map_add_1_sequence_1_tensor_expanded",
            "test_sequence_insert_at_back", "test_sequence_insert_at_front", "test_split_to_sequence_1",
            "test_split_to_sequence_2", "test_split_to_sequence_nokeepdims"]
"""Node cases that convert and match: graph inputs and outputs that are sequences or optionals, If branches
returning them, Loop with scan outputs and with a carried sequence, SequenceMap and its expansion."""


@pytest.mark.parametrize("name", CONVERTS)
def test_converts_and_matches(bench: Any, cases: dict[str, Any], name: str) -> None:
    assert name in cases, f"no node case {name}"
    outcome, detail = bench.attempt(cases[name])
    assert outcome == "pass", detail


def test_generated_cases_never_wrong(bench: Any, cases: dict[str, Any]) -> None:
    """Every generated case of the modules: none converts to a graph that fails or differs."""
    suite = bench.run_suite([cases[n] for n in sorted(cases) if n in CONVERTS or "optional" in n])
    bad = {n: r for n, r in suite["results"].items() if r[1] in ("wrong", "error")}
    assert not bad, bad


# --------------------------------------------------------------------------- models the suite lacks

FLOAT_SEQ = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None))


def _model(nodes: list[Any], inputs: list[Any], outputs: list[Any], opset: int = 18) -> Any:
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _check(bench: Any, model: Any, feeds: dict[str, Any]) -> list[Any]:
    """The model converted to TF and run on ``feeds`` gives what onnx's reference evaluator gives."""
    from onnx.reference import ReferenceEvaluator

    from amanda_tf.runner import Runnable

    expected = ReferenceEvaluator(model).run(None, feeds)
    graph = bench.to_tf(model)
    got = list(Runnable(graph)(feeds).values())
    assert len(got) == len(expected)
    for ref, out in zip(expected, got):
        bench.assert_similar(ref, out, 0.0, 0.0)
    return got


def _pieces(*shapes: tuple[int, ...]) -> list[np.ndarray]:
    return [np.arange(int(np.prod(s)), dtype=np.float32).reshape(s) + 10 * k for k, s in enumerate(shapes)]


def test_positions_count_from_the_end(bench: Any) -> None:
    """SequenceInsert and SequenceAt at negative positions, SequenceErase at a position and at the end, and
    SequenceLength, on elements of different shapes."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    s = helper.make_value_info("s", FLOAT_SEQ)
    nodes = [helper.make_node("Constant", [], ["m2"], value=helper.make_tensor("m2", TensorProto.INT64, [], [-2])),
             helper.make_node("Constant", [], ["p1"], value=helper.make_tensor("p1", TensorProto.INT32, [], [1])),
             helper.make_node("SequenceInsert", ["s", "x", "m2"], ["ins"]),
             helper.make_node("SequenceAt", ["ins", "m2"], ["at"]),
             helper.make_node("SequenceErase", ["ins", "p1"], ["erased"]),
             helper.make_node("SequenceErase", ["erased"], ["popped"]),
             helper.make_node("SequenceLength", ["popped"], ["n"])]
    outs = [helper.make_value_info("ins", FLOAT_SEQ), helper.make_tensor_value_info("at", TensorProto.FLOAT, None),
            helper.make_value_info("erased", FLOAT_SEQ), helper.make_value_info("popped", FLOAT_SEQ),
            helper.make_tensor_value_info("n", TensorProto.INT64, [])]
    got = _check(bench, _model(nodes, [s, x], outs),
                 {"s": _pieces((3,), (2, 2), (1,)), "x": np.array([7.0, 8.0], np.float32)})
    assert [a.shape for a in got[0]] == [(3,), (2,), (2, 2), (1,)] and int(got[4]) == 2


@pytest.mark.parametrize("split,axis,keepdims", [(np.array(4, np.int64), 1, 1),
                                                 (np.array([1, 0, 2], np.int32), 0, 1), (None, -1, 1), (None, 2, 0)])
def test_split_to_sequence(bench: Any, split: Any, axis: int, keepdims: int) -> None:
    """A scalar split leaves a shorter last piece, a 1-D one may hold zero lengths; without split, pieces of one
    with and without the axis."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 9, 2])
    inputs = [x]
    feeds: dict[str, Any] = {"x": np.arange(54, dtype=np.float32).reshape(3, 9, 2)}
    names = ["x"]
    if split is not None:
        code = TensorProto.INT64 if split.dtype == np.int64 else TensorProto.INT32
        inputs.append(helper.make_tensor_value_info("split", code, list(split.shape)))
        feeds["split"] = split
        names.append("split")
    node = helper.make_node("SplitToSequence", names, ["seq"], axis=axis, keepdims=keepdims)
    _check(bench, _model([node], inputs, [helper.make_value_info("seq", FLOAT_SEQ)]), feeds)


def test_loop_of_zero_steps_and_empty_optional(bench: Any) -> None:
    """A Loop with a scan output of a static element shape run zero times gives a [0, 2] tensor (and three times
    what the reference gives); an Optional without a value comes back as None, one with a sequence as the list."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]),
         helper.make_node("Add", ["v", "v"], ["v_out"]),
         helper.make_node("Identity", ["v_out"], ["scan"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("scan", TensorProto.FLOAT, [2])])
    opt = helper.make_optional_type_proto(FLOAT_SEQ)
    true = helper.make_tensor("true", TensorProto.BOOL, [], [True])
    nodes = [helper.make_node("Constant", [], ["go"], value=true),
             helper.make_node("Loop", ["m", "go", "v0"], ["v_final", "scans"], body=body),
             helper.make_node("Optional", [], ["none"], type=FLOAT_SEQ),
             helper.make_node("SequenceConstruct", ["v0", "v0"], ["pair"]),
             helper.make_node("Optional", ["pair"], ["some"]),
             helper.make_node("OptionalHasElement", ["none"], ["has_none"]),
             helper.make_node("OptionalHasElement", ["some"], ["has_some"])]
    model = _model(nodes, [helper.make_tensor_value_info("m", TensorProto.INT64, []),
                           helper.make_tensor_value_info("v0", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("v_final", TensorProto.FLOAT, [2]),
                    helper.make_tensor_value_info("scans", TensorProto.FLOAT, [None, 2]),
                    helper.make_value_info("none", opt), helper.make_value_info("some", opt),
                    helper.make_tensor_value_info("has_none", TensorProto.BOOL, []),
                    helper.make_tensor_value_info("has_some", TensorProto.BOOL, [])])
    from onnx.reference import ReferenceEvaluator

    from amanda_tf.runner import Runnable

    v0 = np.array([1.0, -2.0], np.float32)
    run = Runnable(bench.to_tf(model))
    for m in (3, 0):
        v_final, scans, none, some, has_none, has_some = run({"m": np.array(m, np.int64), "v0": v0}).values()
        if m:  # onnx's reference evaluator stacks no scan values of zero steps
            ref = ReferenceEvaluator(model).run(None, {"m": np.array(m, np.int64), "v0": v0})
            bench.assert_similar(ref[0], v_final, 0.0, 0.0)
            bench.assert_similar(ref[1], scans, 0.0, 0.0)
        else:
            np.testing.assert_array_equal(v_final, v0)
            assert scans.shape == (0, 2) and scans.dtype == np.float32
        assert none is None and not has_none and has_some
        np.testing.assert_array_equal(np.stack(some), np.stack([v0, v0]))


def test_sequence_of_sequences_is_refused(bench: Any) -> None:
    """A sequence whose elements are sequences has no TensorList form here: refused, naming the op."""
    from amanda_core.mapping import ConversionError

    nested = helper.make_sequence_type_proto(FLOAT_SEQ)
    nodes = [helper.make_node("SequenceConstruct", ["s", "s"], ["ss"])]
    model = _model(nodes, [helper.make_value_info("s", FLOAT_SEQ)], [helper.make_value_info("ss", nested)])
    with pytest.raises(ConversionError, match="SequenceConstruct"):
        bench.to_tf(model)


def test_a_refusal_part_way_leaves_the_graph_as_it_was() -> None:
    """An op the pass refuses after adding some of its TF ops (a SequenceAt whose position has no known element
    type, once the sequence's length op is made) leaves the graph unchanged and is reported by name; the position's
    type is not guessed."""
    from amanda_core import Graph
    from amanda_tf.sequences import onnx_sequences_to_tf

    g = Graph("amanda/onnx/18")
    s = g.add_input_port("s", "seq(tensor(float))")
    pos = g.add_input_port("pos")  # untyped
    at = g.add_op("SequenceAt", "at", inputs=["input_sequence", "position"], outputs=[("tensor", "tensor(float)")])
    g.connect(s, at.input_ports["input_sequence"])
    g.connect(pos, at.input_ports["position"])
    g.connect(at.output_ports["tensor"], g.add_output_port("out", "tensor(float)"))
    before = g.copy()
    report = onnx_sequences_to_tf(g)
    assert any("SequenceAt 'at'" in line and "position" in line for line in report.left), report.left
    assert g.diff(before) == ["graph attr 'variant_values' only in first"]  # (the pass records the graph's
    # variant inputs and outputs): no op, port or edge differs
