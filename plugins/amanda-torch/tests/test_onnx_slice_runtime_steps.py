"""ONNX Slice to torch where steps (and starts, ends, axes) are computed at run time, steps of either sign: the ONNX
node cases, then Slice models fed bounds beyond the axis, at the int64 extremes, negative axes and steps, int32 index
tensors and an empty axis, against onnx's reference evaluator.  The constant-step rules are held to the same bounds.

The reference evaluator slices with numpy, which departs from the operator's definition in one place: a negative
step whose start lies before the axis (start + dim < 0) starts at index 0 by the definition (start clamped to
[0, dim - 1]), at -1 (past the axis: nothing) in numpy's slicing.  The expected results clamp such a start first."""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

I64_MIN, I64_MAX = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)
SHAPE = [5, 4, 6, 3]
BOUNDS = [I64_MIN, -9, -6, -5, -4, -1, 0, 1, 2, 3, 4, 5, 6, 9, I64_MAX]
STEPS = [-7, -3, -2, -1, 1, 2, 3, 7, I64_MAX, -I64_MAX]


def _outcome(bench: Any, tables: list[Any], model: Any, data_sets: list[tuple[list[np.ndarray], list[np.ndarray]]]) \
        -> tuple[str, str]:
    from amanda_core.plugin.manager import registry

    case = SimpleNamespace(model=model, data_sets=data_sets, rtol=0.0, atol=0.0)
    outcome, why, _ = bench.amanda_case(case, tables, registry().namespaces)
    return outcome, why


def _model(shape: list[int], k: int, runtime: tuple[str, ...], consts: dict[str, list[int]],
           index_type: int = TensorProto.INT64) -> Any:
    """A Slice over an input of ``shape``: the index inputs named in ``runtime`` are graph inputs of shape [k], those
    in ``consts`` initializers (a name in neither is left out)."""
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)]
    inits = []
    np_type = np.int64 if index_type == TensorProto.INT64 else np.int32
    for name in runtime:
        inputs.append(helper.make_tensor_value_info(name, index_type, [k]))
    for name, values in consts.items():
        inits.append(numpy_helper.from_array(np.array(values, dtype=np_type), name))
    order = ["starts", "ends", "axes", "steps"]
    given = [n for n in order if n in runtime or n in consts]
    last = max(order.index(n) for n in given)
    ins = ["x"] + [n if (n in runtime or n in consts) else "" for n in order[: last + 1]]
    node = helper.make_node("Slice", ins, ["y"])
    graph = helper.make_graph([node], "slice", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _expected(x: np.ndarray, args: dict[str, list[int]]) -> np.ndarray:
    """The Slice of ``x`` by the reference evaluator, a negative step's start before the axis first clamped to 0 as
    the definition says (numpy's slicing would take it as -1)."""
    k = len(args["starts"])
    axes = args.get("axes", list(range(k)))
    steps = args.get("steps", [1] * k)
    starts = [0 if p < 0 and s + x.shape[a] < 0 else s for s, a, p in zip(args["starts"], axes, steps)]
    model = _model(list(x.shape), k, ("starts", "ends", "axes", "steps"), {})
    feeds = {"x": x, "starts": np.array(starts, dtype=np.int64), "ends": np.array(args["ends"], dtype=np.int64),
             "axes": np.array(axes, dtype=np.int64), "steps": np.array(steps, dtype=np.int64)}
    (y,) = ReferenceEvaluator(model).run(None, feeds)
    return y


def _data_sets(model: Any, shape: list[int], feeds: list[dict[str, list[int]]], index_type: type = np.int64) \
        -> list[tuple[list[np.ndarray], list[np.ndarray]]]:
    """Each feed (merged with the model's constant arguments) with its expected output; x counts up so that every
    element is told apart."""
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    names = [i.name for i in model.graph.input]
    consts = {t.name: numpy_helper.to_array(t).tolist() for t in model.graph.initializer}
    sets = []
    for feed in feeds:
        values = {"x": x, **{k: np.array(v, dtype=index_type) for k, v in feed.items()}}
        sets.append(([values[n] for n in names], [_expected(x, {**consts, **feed})]))
    return sets


def _feeds(k: int, count: int, seed: int, rank: int = len(SHAPE)) -> list[dict[str, list[int]]]:
    """``count`` Slice arguments over ``k`` distinct axes (either sign), bounds and steps drawn from the pools."""
    rng = np.random.default_rng(seed)
    feeds = []
    for _ in range(count):
        axes = [int(a) - (rank if rng.random() < 0.5 else 0) for a in rng.choice(rank, size=k, replace=False)]
        feeds.append({"starts": [int(v) for v in rng.choice(BOUNDS, size=k)],
                      "ends": [int(v) for v in rng.choice(BOUNDS, size=k)],
                      "axes": axes,
                      "steps": [int(v) for v in rng.choice(STEPS, size=k)]})
    return feeds


def test_node_cases_convert_and_match(bench: Any, tables: list[Any]) -> None:
    """Every ONNX node case of Slice, among them ``test_slice_neg_steps`` (starts, ends, axes and steps graph
    inputs, two steps negative)."""
    import importlib
    import warnings

    from onnx.backend.test.case import node

    from amanda_core.plugin.manager import registry

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        importlib.import_module("onnx.backend.test.case.node.slice")
    cases = [c for c in node._NodeTestCases if c.name.startswith("test_slice")]
    assert "test_slice_neg_steps" in {c.name for c in cases}
    for case in cases:
        outcome, why, _ = bench.amanda_case(case, tables, registry().namespaces)
        assert outcome == "passed", (case.name, outcome, why)


def test_one_axis_every_bound_and_step(bench: Any, tables: list[Any]) -> None:
    """One axis: every start and end of the pool (beyond the axis on both sides, the int64 extremes) with every
    step, positive and negative, the axis counted from either end."""
    model = _model(SHAPE, 1, ("starts", "ends", "axes", "steps"), {})
    feeds = [{"starts": [s], "ends": [e], "axes": [a], "steps": [p]}
             for s, e in itertools.product(BOUNDS, BOUNDS) for a, p in [(2, -1), (-2, 2), (0, -3), (-4, 1)]]
    feeds += [{"starts": [s], "ends": [e], "axes": [1], "steps": [p]}
              for s, e, p in itertools.product([I64_MIN, -1, 0, 3, I64_MAX], [I64_MIN, -1, 0, 3, I64_MAX], STEPS)]
    assert _outcome(bench, tables, model, _data_sets(model, SHAPE, feeds)) == ("passed", "")


@pytest.mark.parametrize("k", [2, 3, 4])
def test_several_axes_steps_of_both_signs(bench: Any, tables: list[Any], k: int) -> None:
    model = _model(SHAPE, k, ("starts", "ends", "axes", "steps"), {})
    feeds = _feeds(k, 60, seed=k)
    assert any(p < 0 for f in feeds for p in f["steps"]) and any(p > 0 for f in feeds for p in f["steps"])
    assert _outcome(bench, tables, model, _data_sets(model, SHAPE, feeds)) == ("passed", "")


def test_int32_index_inputs(bench: Any, tables: list[Any]) -> None:
    """ONNX allows int32 starts, ends, axes and steps; the axes index the input's shape as int64."""
    model = _model(SHAPE, 2, ("starts", "ends", "axes", "steps"), {}, TensorProto.INT32)
    i32 = np.iinfo(np.int32)
    feeds = [{"starts": [i32.max, -2], "ends": [i32.min, 9], "axes": [-1, 0], "steps": [-1, 2]},
             {"starts": [i32.min, 7], "ends": [i32.max, i32.min], "axes": [2, -3], "steps": [3, -2]},
             {"starts": [1, 0], "ends": [1, -1], "axes": [3, 1], "steps": [-1, 1]}]
    assert _outcome(bench, tables, model, _data_sets(model, SHAPE, feeds, np.int32)) == ("passed", "")


def test_empty_axis(bench: Any, tables: list[Any]) -> None:
    """An axis of size 0: every start and end clamps to an empty range for steps of either sign."""
    shape = [3, 0, 4]
    model = _model(shape, 2, ("starts", "ends", "axes", "steps"), {})
    feeds = [{"starts": [s, 1], "ends": [e, -1], "axes": [1, 2], "steps": [p, -1]}
             for s, e, p in itertools.product([I64_MIN, -1, 0, 2, I64_MAX], [I64_MIN, -1, 0, I64_MAX], [-2, -1, 1])]
    assert _outcome(bench, tables, model, _data_sets(model, shape, feeds)) == ("passed", "")


def test_runtime_bounds_constant_positive_steps(bench: Any, tables: list[Any]) -> None:
    """Starts and ends at run time, axes and steps constant (or absent): aten::slice with those bounds."""
    feeds = [{"starts": [s, t], "ends": [e, f]} for s, e in itertools.product(BOUNDS[::2], BOUNDS[1::2])
             for t, f in [(I64_MIN, I64_MAX), (-2, 1), (5, -5)]]
    for consts in ({"axes": [2, -1], "steps": [2, 1]}, {"axes": [-4, 1]}, {}):
        model = _model(SHAPE, 2, ("starts", "ends"), consts)
        assert _outcome(bench, tables, model, _data_sets(model, SHAPE, feeds)) == ("passed", ""), consts


def test_runtime_axes_constant_positive_steps(bench: Any, tables: list[Any]) -> None:
    feeds = [{"starts": [s, 1], "ends": [e, I64_MAX], "axes": [a, -4]}
             for s, e in itertools.product(BOUNDS[::3], BOUNDS[1::3]) for a in (2, -1)]
    model = _model(SHAPE, 2, ("starts", "ends", "axes"), {"steps": [3, 2]})
    assert _outcome(bench, tables, model, _data_sets(model, SHAPE, feeds)) == ("passed", "")


@pytest.mark.parametrize("start,end,step", [
    (I64_MAX, I64_MIN, -1), (I64_MIN, I64_MAX, 1), (9, -9, -2), (-9, 9, 3), (I64_MAX, -6, -1), (-6, I64_MAX, 2),
    (-1, I64_MIN, -3), (4, 5, 1), (9, 8, -1), (-7, -8, -1), (I64_MIN, I64_MIN, -1), (I64_MAX, I64_MAX, 1),
    (0, -1, -1), (I64_MAX, 0, -I64_MAX), (0, I64_MAX, I64_MAX)])
def test_constant_bounds_at_the_extremes(bench: Any, tables: list[Any], start: int, end: int, step: int) -> None:
    """Constant starts, ends, axes and steps (one axis, then two with the second reversed): aten::slice, or on the
    known shape a flip and a strided view, against the reference."""
    one = _model(SHAPE, 1, (), {"starts": [start], "ends": [end], "axes": [-2], "steps": [step]})
    two = _model(SHAPE, 2, (), {"starts": [start, -1], "ends": [end, I64_MIN], "axes": [0, 3], "steps": [step, -1]})
    for model in (one, two):
        assert _outcome(bench, tables, model, _data_sets(model, SHAPE, [{}])) == ("passed", "")
