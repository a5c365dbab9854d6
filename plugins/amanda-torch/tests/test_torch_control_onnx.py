"""Control flow between torch and ONNX (docs/torch.md, "Control flow"): ``torch.cond`` becomes ONNX ``If`` and
back, ONNX ``If``/``Loop`` whose branches read outer values by name become ``prim::If``/``prim::Loop`` taking
them as inputs, and each path is checked on inputs that take every branch or loop a different number of times."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import models  # noqa: E402 - the shared factories beside this file
from onnx import TensorProto as T  # noqa: E402
from onnx import helper  # noqa: E402

from amanda_core.mapping import ConversionError, convert, registered_tables  # noqa: E402
from amanda_core.plugin import registry  # noqa: E402
from amanda_core.plugin.passes import registered_passes  # noqa: E402


def _convert(graph: Any, target: str) -> Any:
    reg = registry()
    return convert(graph, target, registered_tables(reg), reg.namespaces, passes=registered_passes())


def _ort(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _to_torch(model: Any) -> Any:
    import amanda_onnx
    from amanda_torch.exporter import to_module

    graph = amanda_onnx.load_model(model)
    amanda_onnx.infer_types(graph)  # as the command line does before converting
    result = _convert(graph, "amanda/pytorch")
    return result, to_module(result.graph)


def _close(a: Any, b: Any, tol: float = 1e-5) -> None:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape
    scale = max(float(np.abs(b).max()), 1.0)
    assert float(np.abs(a - b).max()) <= tol * scale


def test_torch_cond_becomes_onnx_if_and_comes_back_traceable():
    import amanda_onnx
    from amanda_torch.importer import load_model

    model, (x,) = models.cond_module(0)
    _, (other,) = models.cond_module(0, negative=True)
    result = _convert(load_model(model, example_inputs=(x,)), "amanda/onnx/18")
    assert any(p[1] == "torch-control-to-onnx" and "1 higher_order::cond converted" in p[2] for p in result.passes)
    proto = amanda_onnx.to_model(result.graph)
    onnx.checker.check_model(proto, full_check=True)
    assert [n.op_type for n in proto.graph.node].count("If") == 1
    with torch.no_grad():
        for inp in (x, other):  # each takes a different branch
            _close(_ort(proto, {"x": inp.numpy()})[0], model(inp).numpy())
    back, module = _to_torch(proto)
    assert any(op.type == "prim::If" for op in back.graph)
    with torch.no_grad():
        for inp in (x, other):
            _close(module(inp).numpy(), model(inp).numpy())
    program = torch.export.export(module, (x,))  # the If traces into torch.cond: both branches stay
    with torch.no_grad():
        _close(program.module()(other).numpy(), model(other).numpy())


def _if_model(nested: bool) -> Any:
    """``y = cond ? (relu(x) + x) : (relu(x) - x)``; nested: the then branch holds another If reading ``h``
    (an outer value two levels up) on ``cond2``."""
    x = helper.make_tensor_value_info("x", T.FLOAT, [2, 3])
    c = helper.make_tensor_value_info("c", T.BOOL, [])
    c2 = helper.make_tensor_value_info("c2", T.BOOL, [])
    out = helper.make_tensor_value_info("y", T.FLOAT, [2, 3])
    t_out = helper.make_tensor_value_info("t", T.FLOAT, [2, 3])
    then_nodes = [helper.make_node("Add", ["h", "x"], ["t"])]
    if nested:
        inner_then = helper.make_graph([helper.make_node("Mul", ["h", "h"], ["it"])], "it", [],
                                       [helper.make_tensor_value_info("it", T.FLOAT, [2, 3])])
        inner_else = helper.make_graph([helper.make_node("Neg", ["h"], ["ie"])], "ie", [],
                                       [helper.make_tensor_value_info("ie", T.FLOAT, [2, 3])])
        then_nodes = [helper.make_node("If", ["c2"], ["inner"], then_branch=inner_then, else_branch=inner_else),
                      helper.make_node("Add", ["inner", "x"], ["t"])]
    then_g = helper.make_graph(then_nodes, "then", [], [t_out])
    else_g = helper.make_graph([helper.make_node("Sub", ["h", "x"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", T.FLOAT, [2, 3])])
    nodes = [helper.make_node("Relu", ["x"], ["h"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    graph = helper.make_graph(nodes, "g", [x, c] + ([c2] if nested else []), [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.parametrize("nested", [False, True])
def test_onnx_if_reading_outer_values_becomes_prim_if(nested):
    model = _if_model(nested)
    result, module = _to_torch(model)
    summary = next(s for _, name, s in result.passes_before if name == "onnx-control-to-torch")
    assert summary.startswith(f"{2 if nested else 1} If converted"), summary
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    for c in (True, False):
        for c2 in ((True, False) if nested else (None,)):
            feeds = {"x": x, "c": np.array(c)} | ({"c2": np.array(c2)} if nested else {})
            want = _ort(model, feeds)[0]
            args = [torch.from_numpy(v) for v in feeds.values()]
            with torch.no_grad():
                np.testing.assert_array_equal(module(*args).numpy(), want)


def _loop_model(with_trip_count: bool, reads_iteration: bool) -> Any:
    """``y`` doubled plus ``x`` (an outer value) per iteration, while ``sum(y) < limit`` and (optionally) fewer
    than ``n`` iterations; reading the iteration number adds it too."""
    x = helper.make_tensor_value_info("x", T.FLOAT, [3])
    n = helper.make_tensor_value_info("n", T.INT64, [])
    limit = helper.make_tensor_value_info("limit", T.FLOAT, [])
    y = helper.make_tensor_value_info("y", T.FLOAT, [3])
    body_in = [helper.make_tensor_value_info("i", T.INT64, []), helper.make_tensor_value_info("c_in", T.BOOL, []),
               helper.make_tensor_value_info("y_in", T.FLOAT, [3])]
    body_out = [helper.make_tensor_value_info("c_out", T.BOOL, []),
                helper.make_tensor_value_info("y_out", T.FLOAT, [3])]
    nodes = [helper.make_node("Add", ["y_in", "y_in"], ["twice"]), helper.make_node("Add", ["twice", "x"], ["step"])]
    if reads_iteration:
        nodes += [helper.make_node("Cast", ["i"], ["i_f"], to=T.FLOAT), helper.make_node("Add", ["step", "i_f"],
                                                                                          ["y_out"])]
    else:
        nodes += [helper.make_node("Identity", ["step"], ["y_out"])]
    nodes += [helper.make_node("ReduceSum", ["y_out"], ["total"], keepdims=0),
              helper.make_node("Less", ["total", "limit"], ["c_out"])]
    body = helper.make_graph(nodes, "body", body_in, body_out)
    outer = [helper.make_node("ReduceSum", ["x"], ["s0"], keepdims=0),
             helper.make_node("Less", ["s0", "limit"], ["c0"]),
             helper.make_node("Loop", ["n" if with_trip_count else "", "c0", "x"], ["y"], body=body)]
    graph = helper.make_graph(outer, "g", [x, limit] + ([n] if with_trip_count else []), [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.parametrize("with_trip_count,reads_iteration", [(True, False), (False, True), (True, True)])
def test_onnx_loop_becomes_prim_loop_and_runs_as_often(with_trip_count, reads_iteration):
    model = _loop_model(with_trip_count, reads_iteration)
    result, module = _to_torch(model)
    assert any(op.type == "prim::Loop" for op in result.graph)
    x = np.array([0.5, 1.0, 1.5], np.float32)
    for limit, n in ((0.0, 5), (40.0, 5), (1e4, 3), (1e4, 40)):  # no, some, trip-count-bound and long loops
        feeds = {"x": x, "limit": np.array(limit, np.float32)} | ({"n": np.array(n)} if with_trip_count else {})
        want = _ort(model, feeds)[0]
        with torch.no_grad():
            got = module(*[torch.from_numpy(v) for v in feeds.values()]).numpy()
        np.testing.assert_array_equal(got, want)


def test_a_loop_with_scan_outputs_is_left_and_the_reason_given():
    from onnx.backend.test.loader import load_model_tests

    import amanda_onnx

    case = next(c for c in load_model_tests(kind="node") if c.name == "test_loop11")
    graph = amanda_onnx.load_model(case.model)
    with pytest.raises(ConversionError, match=r"(?s)Loop"):
        _convert(graph, "amanda/pytorch")
    reg = registry()
    result = convert(graph, "amanda/pytorch", registered_tables(reg), reg.namespaces, passes=registered_passes(),
                     allow_partial=True)
    summary = next(s for _, name, s in result.passes_before if name == "onnx-control-to-torch")
    assert "scan outputs" in summary and "Loop" in summary


# --------------------------------------------------------------------------- TorchScript: numbers, If and Loop


class _WhileTensor(torch.nn.Module):
    """A ``while`` on a tensor condition (no trip count): grows ``x`` until its largest element reaches 4."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        while x.max() < 4.0:
            x = x + x.abs() * 0.5 + 0.125
        return x


class _ForRange(torch.nn.Module):
    """``for i in range(n)``, ``n = int(k.sum())`` read from an integer tensor (negative: no iteration); the
    iteration number enters the arithmetic as a float."""

    def forward(self, x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        n = int(k.sum())
        for i in range(n):
            x = x * 0.5 + float(i)
        return x


class _IfTensor(torch.nn.Module):
    """An ``if`` on a tensor comparison whose branches also choose a Python int the result is scaled by."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            s = 3
            y = x * 2.0
        else:
            s = -1
            y = x - 1.0
        return y * s


class _FloatToInt(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * int(x.sum())


def _script_to_onnx(module: Any, example: tuple[Any, ...]) -> tuple[Any, Any]:
    import amanda_onnx
    from amanda_torch.importer import load_model

    result = _convert(load_model(module, example_inputs=example), "amanda/onnx/18")
    proto = amanda_onnx.to_model(result.graph)
    onnx.checker.check_model(proto, full_check=True)
    return result, proto


def _loop_steps(model: Any, x: Any) -> int:
    """How often :class:`models.LoopModule`'s loop runs on ``x`` (its own logic, in Python)."""
    steps = 0
    with torch.no_grad():
        while bool(torch.linalg.vector_norm(x) < model.limit) and steps < 16:
            x = x * 2.0 + model.bias
            steps += 1
    return steps


def test_scripted_loop_becomes_onnx_loop_and_comes_back():
    model, (x,) = models.scripted_loop()
    result, proto = _script_to_onnx(model, (x,))
    assert any(p[1] == "torch-control-to-onnx" and "1 prim::Loop converted" in p[2] for p in result.passes)
    ops = [n.op_type for n in proto.graph.node]
    assert ops.count("Loop") == 1 and "If" not in ops  # the loop's first test needs no If outside the Loop
    body = next(n for n in proto.graph.node if n.op_type == "Loop").attribute[0].g
    assert "If" in [n.op_type for n in body.node]  # `... and steps < 16` short-circuits: an If in the body
    with torch.no_grad():
        bias = model.bias.detach()
    inputs = [models.scripted_loop(scale=1e3)[1][0], models.scripted_loop(scale=0.5)[1][0],
              -bias.expand(2, 8).clone()]  # x + bias = 0: x stays -bias, the norm small: the 16-step cap ends it
    assert [_loop_steps(model, v) for v in inputs] == [0, 6, 16]
    with torch.no_grad():
        wants = [model(v).numpy() for v in inputs]
    for v, want in zip(inputs, wants):
        _close(_ort(proto, {"x": v.numpy()})[0], want)
    back, module = _to_torch(proto)
    assert any(op.type == "prim::Loop" for op in back.graph)
    with torch.no_grad():
        for v, want in zip(inputs, wants):
            _close(module(v).numpy(), want)


@pytest.mark.parametrize("kind", ["while", "for", "if"])
def test_small_scripted_modules_convert_to_onnx_and_back(kind):
    gen = torch.Generator().manual_seed(3)
    x3 = torch.randn(2, 3, generator=gen)
    module, cases, control = {
        "while": (_WhileTensor(), [(x3,), (torch.full((2, 3), 5.0),), (x3 * 1e-3,)], "Loop"),
        "for": (_ForRange(), [(x3[0], torch.tensor([2, 1])), (x3[0], torch.tensor([-4, 1])),
                              (x3[0], torch.tensor([0, 0]))], "Loop"),
        "if": (_IfTensor(), [(x3.abs(),), (-x3.abs(),)], "If"),
    }[kind]
    scripted = torch.jit.script(module.eval())
    result, proto = _script_to_onnx(scripted, cases[0])
    assert [n.op_type for n in proto.graph.node].count(control) == 1
    names = [i.name for i in proto.graph.input]
    back, converted = _to_torch(proto)
    assert any(op.type == f"prim::{control}" for op in back.graph)
    for case in cases:  # no iteration, some, many; each branch
        with torch.no_grad():
            want = scripted(*case).numpy()
            got = converted(*case).numpy()
        _close(_ort(proto, dict(zip(names, [c.numpy() for c in case])))[0], want)
        _close(got, want)


def test_script_numbers_that_cannot_be_exact_are_refused_by_name():
    from amanda_torch.importer import load_model

    x = torch.randn(2, 3)
    with pytest.raises(ConversionError, match=r"aten::Int\.Tensor"):  # int() of a float: torch raises on NaN
        _convert(load_model(torch.jit.script(_FloatToInt()), example_inputs=(x,)), "amanda/onnx/18")
    model, (x,) = models.scripted_loop()
    with pytest.raises(ConversionError, match=r"aten::mul\.Scalar"):  # no example inputs: no element types
        _convert(load_model(model), "amanda/onnx/18")
