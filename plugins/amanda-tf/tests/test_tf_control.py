"""Functional control flow between TF and ONNX (``amanda_tf.control``): ``tf.cond`` and ``tf.while_loop`` to ONNX
``If``/``Loop`` and back to TF, checked on inputs that take each branch and on several trip counts.

Never imports torch (this process imports TensorFlow).
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np
import pytest
from tf_models import FUNCTIONS

TOL = 1e-5


@pytest.fixture(scope="module")
def reg(tf_schema) -> Any:
    import amanda_onnx.plugin
    import amanda_tf.plugin
    from amanda_core.plugin import PluginManager

    pm = PluginManager(autoload=False)
    pm.register(amanda_tf.plugin, "amanda-tf")
    pm.register(amanda_onnx.plugin, "amanda-onnx")
    return pm.registry()


def _types(graph: Any) -> collections.Counter:
    from amanda_core import Graph

    seen: collections.Counter = collections.Counter()

    def walk(g: Graph) -> None:
        for op in g:
            seen[op.type] += 1
            for v in op.attrs.values():
                for x in v if isinstance(v, list) else [v]:
                    if isinstance(x, Graph):
                        walk(x)

    walk(graph)
    return seen


def _variants(name: str, feeds: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    if name == "cond_function":  # sum(x) > 0 and sum(x) < 0: each branch
        return [feeds, {"x": -feeds["x"]}]
    return [{**feeds, "n": np.array(k, np.int32)} for k in (0, 1, 2, 5)]  # trip counts, odd and even


def _close(got: np.ndarray, ref: np.ndarray) -> None:
    assert got.shape == ref.shape
    diff = float(np.abs(got.astype(np.float64) - ref.astype(np.float64)).max())
    assert diff <= TOL, f"max abs diff {diff}"


def _to_onnx(name: str, reg: Any) -> tuple[Any, Any, Any]:
    import onnx

    import amanda_onnx
    from amanda_tf.importer import load_model
    from amanda_tf.layout import to_onnx

    fn, feeds = FUNCTIONS[name]()
    graph, report = to_onnx(load_model(fn), reg)
    model = amanda_onnx.to_model(graph)
    onnx.checker.check_model(model, full_check=True)
    return fn, feeds, (graph, model, report)


@pytest.mark.parametrize("name,control", [("cond_function", {"If": 1}), ("while_function", {"Loop": 1, "If": 1})])
def test_tf_to_onnx(name: str, control: dict[str, int], reg) -> None:
    import onnxruntime as ort

    fn, feeds, (graph, model, report) = _to_onnx(name, reg)
    types = _types(graph)
    assert {t: types[t] for t in control} == control, types
    assert not any(t in types for t in ("StatelessIf", "StatelessWhile", "If_", "While")), types
    assert "control flow" in report.summary()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    outs = set()
    for feeds_k in _variants(name, feeds):
        (got,) = sess.run(None, feeds_k)
        ref = fn(**feeds_k).numpy()
        _close(got, ref)
        outs.add(got.tobytes())
    assert len(outs) == len(_variants(name, feeds))  # each branch / trip count computes something else


@pytest.mark.parametrize("name", ["cond_function", "while_function"])
def test_onnx_to_tf_round_trip(name: str, reg) -> None:
    """The ONNX written from TF, read back and converted to TF (``StatelessIf``/``StatelessWhile``), run by TF."""
    import amanda_onnx
    from amanda_core.mapping import convert
    from amanda_core.mapping.registry import registered_tables
    from amanda_core.plugin.passes import registered_passes
    from amanda_tf.runner import Runnable

    fn, feeds, (_, model, _) = _to_onnx(name, reg)
    onnx_graph = amanda_onnx.load_model(model)
    reg.type_inferer_for(onnx_graph.namespace).infer(onnx_graph)
    conversion = convert(onnx_graph, "amanda/tensorflow", registered_tables(reg), reg.namespaces,
                         passes=registered_passes())
    tf_graph = conversion.graph
    types = _types(tf_graph)
    assert types["StatelessIf"] == 1 and not any(t in types for t in ("If", "Loop", "OuterValue")), types
    if name == "while_function":
        assert types["StatelessWhile"] == 1
    run = Runnable(tf_graph)
    for feeds_k in _variants(name, feeds):
        (got,) = run(feeds_k).values()
        _close(np.asarray(got), fn(**feeds_k).numpy())


def test_onnx_loop_scan_outputs_as_tensor_lists(reg) -> None:
    """A Loop with scan outputs: each scan value pushed to a TensorList the StatelessWhile carries, stacked after
    it; left for the conversion to report while the scan output's element type is unknown."""
    import onnx
    from onnx import TensorProto, helper

    import amanda_onnx
    from amanda_tf.control import onnx_control_to_tf

    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["v", "v"], ["v_next"]),
         helper.make_node("Identity", ["v_next"], ["scan"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_next", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("scan", TensorProto.FLOAT, [2])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["m", "", "x"], ["y", "ys"], body=body)], "g",
        [helper.make_tensor_value_info("m", TensorProto.INT64, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("ys", TensorProto.FLOAT, [None, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(model)
    g = amanda_onnx.load_model(model)
    report = onnx_control_to_tf(g)
    assert not report.converted and "unknown" in report.summary()
    assert [op.type for op in g] == ["Loop"]
    reg.type_inferer_for(g.namespace).infer(g)
    assert onnx_control_to_tf(g).converted == {"Loop": 1}
    assert {"StatelessWhile", "EmptyTensorList", "TensorListStack"} <= {op.type for op in g}
