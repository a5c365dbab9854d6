"""``amanda_onnx.static_if``: an ``If`` whose condition constants and static shapes decide becomes the ops of the
branch it takes; the model written back runs in onnxruntime as the original does.  One whose condition is known
only at run time stays."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import amanda_onnx  # noqa: E402
from amanda_onnx.static_if import fold_static_ifs  # noqa: E402


def _run(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _fold(model: Any) -> tuple[Any, str, list[str]]:
    graph = amanda_onnx.load_model(model)
    amanda_onnx.infer_types(graph)
    summary = fold_static_ifs(graph).summary()
    return amanda_onnx.to_model(graph), summary, [op.type for op in graph]


def _branch(name: str, nodes: list[Any], out: str, shape: list[Any]) -> Any:
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(out, TensorProto.FLOAT, shape)])


def _model(cond_nodes: list[Any], then_nodes: list[Any], else_nodes: list[Any], *, nested: Any = None) -> Any:
    """y = If(cond, then: x * 2 (or the graph ``nested``), else: x + 1), x of shape [2, 3]; ``cond_nodes`` make
    ``cond``."""
    then_g = _branch("then", then_nodes, "t", [2, 3]) if nested is None else nested
    else_g = _branch("else", else_nodes, "e", [2, 3])
    nodes = [helper.make_node("Constant", [], ["two"], value_float=2.0),
             helper.make_node("Constant", [], ["one"], value_float=1.0), *cond_nodes,
             helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


THEN = [helper.make_node("Mul", ["x", "two"], ["t"])]
ELSE = [helper.make_node("Add", ["x", "one"], ["e"])]
X = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}


@pytest.mark.parametrize("size, taken", [(6, "then"), (5, "else")])
def test_a_condition_of_a_static_shape_takes_its_branch(size: int, taken: str) -> None:
    cond = [helper.make_node("Size", ["x"], ["n"]), helper.make_node("Constant", [], ["k"], value_int=size),
            helper.make_node("Equal", ["n", "k"], ["cond"])]
    model = _model(cond, THEN, ELSE)
    folded, summary, types = _fold(model)
    assert summary.startswith("1 If folded"), summary
    assert "If" not in types and ("Mul" if taken == "then" else "Add") in types
    np.testing.assert_array_equal(_run(folded, X)[0], _run(model, X)[0])


def test_an_op_the_pass_does_not_evaluate_leaves_the_if() -> None:
    cond = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Constant", [], ["two_i"], value_ints=[2, 3]),
            helper.make_node("Equal", ["s", "two_i"], ["eq"]),
            helper.make_node("Constant", [], ["axes"], value_ints=[0]),
            helper.make_node("ReduceMin", ["eq_i", "axes"], ["m"], keepdims=0),
            helper.make_node("Cast", ["eq"], ["eq_i"], to=TensorProto.INT64),
            helper.make_node("Cast", ["m"], ["cond0"], to=TensorProto.BOOL),
            helper.make_node("Not", ["cond0"], ["cond"])]
    model = _model(cond, THEN, ELSE)
    folded, summary, types = _fold(model)
    # ReduceMin is not among the ops the pass evaluates: the condition stays a run-time one, and nothing changes
    assert "If" in types and "known only at run time" in summary
    np.testing.assert_array_equal(_run(folded, X)[0], _run(model, X)[0])


def test_a_run_time_condition_is_left() -> None:
    cond = [helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
            helper.make_node("Constant", [], ["zero"], value_float=0.0),
            helper.make_node("Greater", ["total", "zero"], ["cond"])]
    folded, summary, types = _fold(_model(cond, THEN, ELSE))
    assert types.count("If") == 1 and "known only at run time" in summary


def test_a_branch_holding_graphs_keeps_the_names_they_read() -> None:
    """The taken branch holds an If of its own whose branches read a value the outer branch makes, by name."""
    inner_then = _branch("inner_then", [helper.make_node("Mul", ["x2", "two"], ["it"])], "it", [2, 3])
    inner_else = _branch("inner_else", [helper.make_node("Neg", ["x2"], ["ie"])], "ie", [2, 3])
    outer_then = _branch("then", [helper.make_node("Add", ["x", "x"], ["x2"]),
                                  helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                                  helper.make_node("Constant", [], ["z"], value_float=0.0),
                                  helper.make_node("Greater", ["s", "z"], ["c2"]),
                                  helper.make_node("If", ["c2"], ["t"], then_branch=inner_then,
                                                   else_branch=inner_else)], "t", [2, 3])
    cond = [helper.make_node("Constant", [], ["c1"], value_ints=[1]),  # a one-element vector, cast and squeezed
            helper.make_node("Cast", ["c1"], ["c1b"], to=TensorProto.BOOL),
            helper.make_node("Squeeze", ["c1b"], ["cond"])]
    model = _model(cond, THEN, ELSE, nested=outer_then)
    folded, summary, types = _fold(model)
    assert summary.startswith("1 If folded"), summary
    assert types.count("If") == 1  # the inner one, with a run-time condition
    onnx.checker.check_model(folded)
    for x in (X["x"], -X["x"] - 1):
        np.testing.assert_array_equal(_run(folded, {"x": x})[0], _run(model, {"x": x})[0])
