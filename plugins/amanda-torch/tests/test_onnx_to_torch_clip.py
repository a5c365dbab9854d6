"""ONNX -> torch: Clip whose bounds are constants of one element becomes ``aten::clamp.default`` with the bounds as
numbers in the call (ReLU6 as ``clamp(x, 0.0, 6.0)``), so the module holds no tensor for them; bounds given at run
time, or of another element type than the input, stay tensors (``aten::clamp.Tensor``).  Each module is compared
with onnxruntime on inputs beyond both bounds."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import models  # noqa: E402 - the shared factories beside this file
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

_ELEM = {np.float32: TensorProto.FLOAT, np.float16: TensorProto.FLOAT16, np.int32: TensorProto.INT32,
         np.float64: TensorProto.DOUBLE}


def _model(elem: Any, lo: Any, hi: Any, *, runtime_hi: bool = False) -> Any:
    """y = Clip(x, lo, hi); a bound of None is left out (an empty input name), an array is an initializer."""
    inits, names = [], []
    for name, b in (("lo", lo), ("hi", hi)):
        if b is None or (name == "hi" and runtime_hi):
            names.append("hi" if runtime_hi and name == "hi" else "")
            continue
        inits.append(numpy_helper.from_array(np.asarray(b), name))
        names.append(name)
    inputs = [helper.make_tensor_value_info("x", _ELEM[elem], [2, 5])]
    if runtime_hi:
        inputs.append(helper.make_tensor_value_info("hi", _ELEM[elem], []))
    while names and names[-1] == "":
        names.pop()
    graph = helper.make_graph([helper.make_node("Clip", ["x", *names], ["y"])], "g", inputs,
                              [helper.make_tensor_value_info("y", _ELEM[elem], [2, 5])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


_module = models.onnx_module


def _calls(module: Any) -> list[Any]:
    return [n for n in module.graph.nodes if n.op == "call_function"]


def _check(model: Any, module: Any, elem: Any, hi: Any = None) -> None:
    x = np.array([[-9, -1, 0, 1, 3], [5, 6, 7, 40, -40]], dtype=elem)
    feeds = {"x": x} if hi is None else {"x": x, "hi": np.asarray(hi, dtype=elem)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = module(*(torch.from_numpy(np.asarray(v)) for v in feeds.values()))
    np.testing.assert_array_equal(got.detach().numpy(), want)
    assert got.dtype == torch.from_numpy(x).dtype


@pytest.mark.parametrize("elem,lo,hi", [
    (np.float32, np.float32(0), np.float32(6)),  # ReLU6
    (np.float32, np.array([-0.5], np.float32), None),  # one element of shape [1]; no upper bound
    (np.float32, None, np.float32(2.5)),
    (np.float16, np.float16(0.1), np.float16(3.3)),
    (np.float64, np.float64(-1e-300), np.float64(1.5)),
    (np.int32, np.int32(-2), np.int32(5)),
    (np.float32, np.float32(4), np.float32(1)),  # min above max: every element is max, as in ONNX
])
def test_constant_bounds_become_numbers(elem: Any, lo: Any, hi: Any) -> None:
    model = _model(elem, lo, hi)
    module = _module(model)
    (call,) = _calls(module)
    assert call.target is torch.ops.aten.clamp.default
    want = [None if b is None else np.asarray(b).reshape(()).item() for b in (lo, hi)]
    given = {**dict(zip(("self", "min", "max"), call.args)), **call.kwargs}
    assert [given.get("min"), given.get("max")] == want
    assert all(type(given.get(k)) in (float, int, type(None)) for k in ("min", "max"))
    assert not list(module.named_buffers()) and not list(module.named_parameters())
    _check(model, module, elem)


def test_run_time_bound_stays_a_tensor() -> None:
    model = _model(np.float32, np.float32(-1), None, runtime_hi=True)
    module = _module(model)
    (call,) = _calls(module)
    assert call.target is torch.ops.aten.clamp.Tensor
    _check(model, module, np.float32, hi=np.float32(2))


def test_bound_of_two_elements_is_not_read_as_a_number() -> None:
    # ONNX wants scalar bounds; a bound of two elements is no number, so the literal rule leaves it alone
    import amanda_onnx
    from amanda_core.mapping import convert, registered_tables
    from amanda_core.plugin import registry

    model = _model(np.float32, np.array([0, 1], np.float32), np.float32(6))
    graph = amanda_onnx.load_model(model)
    amanda_onnx.infer_types(graph)
    out = convert(graph, "amanda/pytorch", registered_tables(), registry().namespaces, allow_partial=True).graph
    assert not any(op.type == "aten::clamp.default" for op in out)
