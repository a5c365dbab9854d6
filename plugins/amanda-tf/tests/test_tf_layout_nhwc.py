"""The ONNX -> TF layout pass (``amanda_tf.layout_tf``, graph pass ``tf-layout-nhwc``): torch-like ONNX CNNs
converted to TensorFlow run their convolutions channels-last with no transpose left between them, and compute
what onnxruntime computes.

Never imports torch (this process imports TensorFlow).
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")

TOL = 1e-5


@pytest.fixture(scope="module")
def reg(tf_schema) -> Any:
    """The plugin manager of the installed plugins (its passes, tables and namespaces)."""
    from amanda_core.plugin.manager import get_manager

    return get_manager()


def _to_tf(model: Any, pm: Any, *, layout: bool = True) -> Any:
    import amanda_onnx
    from amanda_core.mapping import convert
    from amanda_core.mapping.registry import registered_tables
    from amanda_core.plugin.passes import registered_passes

    registry = pm.registry()
    graph = amanda_onnx.load_model(model)
    registry.type_inferer_for(graph.namespace).infer(graph)
    passes = [p for p in registered_passes(pm) if layout or p.name != "tf-layout-nhwc"]
    assert len(passes) == len(registered_passes(pm)) - (not layout)
    out = convert(graph, "amanda/tensorflow", registered_tables(registry), registry.namespaces, passes=passes)
    return out.graph


def _check(model: Any, tf_graph: Any, feeds: dict[str, np.ndarray]) -> None:
    import onnxruntime as ort

    from amanda_tf.runner import run

    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = list(run(tf_graph, feeds).values())
    assert len(got) == len(ref)
    for r, g in zip(ref, got):
        assert r.shape == g.shape
        diff = float(np.abs(r.astype(np.float64) - g.astype(np.float64)).max())
        assert diff <= TOL, f"max abs diff {diff}"


def _types(graph: Any) -> collections.Counter:
    return collections.Counter(op.type for op in graph)


def _between_convs(graph: Any) -> list[str]:
    """The transposes with a convolution both before and after them."""
    conv = {"Conv2D", "DepthwiseConv2dNative", "MaxPool", "AvgPool"}

    def reaches(op: Any, down: bool) -> bool:
        seen, todo = set(), [op]
        while todo:
            o = todo.pop()
            nxt = ([c.op for q in o.output_ports for c in q.consumers if c.op is not None] if down
                   else [p.source.op for p in o.input_ports if p.source is not None and p.source.op is not None])
            for n in nxt:
                if n.name in seen:
                    continue
                if n.type in conv:
                    return True
                seen.add(n.name)
                todo.append(n)
        return False

    return [op.name for op in graph if op.type == "Transpose" and reaches(op, False) and reaches(op, True)]


def _model(nodes: list[Any], inits: dict[str, np.ndarray], x_shape: list[int], y_shape: list[int] | None,
           outputs: tuple[str, ...] = ("y",)) -> Any:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, y_shape)
                           for o in outputs],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(m)
    return m


def _resnet_like(seed: int = 0, n: int = 2, c: int = 3, hw: int = 9) -> Any:
    """Conv -> BatchNormalization -> Relu -> Conv (stride 2, pads) + a 1x1 projection (stride 2) -> Add -> Relu
    -> GlobalAveragePool -> Flatten -> Gemm, as torch.onnx writes a ResNet block."""
    from onnx import helper

    rng = np.random.default_rng(seed)

    def f(*s: int) -> np.ndarray:
        return rng.normal(0, 0.5, s).astype(np.float32)

    inits = {"w1": f(8, c, 3, 3), "b1": f(8), "scale": rng.uniform(0.5, 1.5, 8).astype(np.float32),
             "bias": f(8), "mean": f(8), "var": rng.uniform(0.5, 1.5, 8).astype(np.float32),
             "w2": f(8, 8, 3, 3), "b2": f(8), "w3": f(8, 8, 1, 1), "wg": f(5, 8), "bg": f(5)}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c1", "scale", "bias", "mean", "var"], ["bn"], epsilon=1e-5),
             helper.make_node("Relu", ["bn"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Conv", ["r1", "w3"], ["c3"], strides=[2, 2]),
             helper.make_node("Add", ["c2", "c3"], ["s"]),
             helper.make_node("Relu", ["s"], ["r2"]),
             helper.make_node("GlobalAveragePool", ["r2"], ["gap"]),
             helper.make_node("Flatten", ["gap"], ["fl"]),
             helper.make_node("Gemm", ["fl", "wg", "bg"], ["y"], transB=1)]
    return _model(nodes, inits, [n, c, hw, hw], [n, 5])


def _feeds(shape: list[int], seed: int = 1) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(seed).normal(size=shape).astype(np.float32)}


def test_resnet_block_runs_channels_last(reg: Any) -> None:
    model = _resnet_like()
    tf_graph = _to_tf(model, reg)
    counts = _types(tf_graph)
    assert counts["Conv2D"] == 3
    assert counts["Transpose"] <= 2, counts
    assert _between_convs(tf_graph) == []
    _check(model, tf_graph, _feeds([2, 3, 9, 9]))


def test_without_the_pass_transposes_stay(reg: Any) -> None:
    model = _resnet_like()
    tf_graph = _to_tf(model, reg, layout=False)
    assert _types(tf_graph)["Transpose"] == 6
    assert len(_between_convs(tf_graph)) >= 2
    _check(model, tf_graph, _feeds([2, 3, 9, 9]))


def test_mobilenet_like(reg: Any) -> None:
    """Depthwise-separable blocks with Clip (ReLU6), per-channel Mul/Sub by [C,1,1] constants, a reflect Pad,
    MaxPool and AveragePool, a channel Concat, Sigmoid gating and a ReduceMean over the channels without keepdims:
    no transpose left between the convolutions, the numbers unchanged."""
    from onnx import helper

    rng = np.random.default_rng(3)

    def f(*s: int) -> np.ndarray:
        return rng.normal(0, 0.5, s).astype(np.float32)

    inits = {"w1": f(6, 3, 3, 3), "dw": f(6, 1, 3, 3), "pw": f(4, 6, 1, 1), "pb": f(4), "k": f(4, 1, 1),
             "m": f(4, 1, 1), "lo": np.asarray(0, np.float32), "hi": np.asarray(6, np.float32),
             "w4": f(4, 8, 1, 1), "pads": np.asarray([0, 0, 1, 1, 0, 0, 1, 1], np.int64),
             "axes": np.asarray([1], np.int64)}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Clip", ["c1", "lo", "hi"], ["r1"]),
             helper.make_node("Conv", ["r1", "dw"], ["d1"], pads=[1, 1, 1, 1], group=6),
             helper.make_node("Clip", ["d1", "lo", "hi"], ["r2"]),
             helper.make_node("Conv", ["r2", "pw", "pb"], ["p1"]),
             helper.make_node("Mul", ["p1", "k"], ["m1"]),
             helper.make_node("Sub", ["m1", "m"], ["m2"]),
             helper.make_node("Pad", ["m2", "pads"], ["pd"], mode="reflect"),
             helper.make_node("MaxPool", ["pd"], ["mp"], kernel_shape=[3, 3]),
             helper.make_node("AveragePool", ["m2"], ["ap"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Concat", ["mp", "ap"], ["cat"], axis=1),
             helper.make_node("Sigmoid", ["cat"], ["sg"]),
             helper.make_node("Mul", ["cat", "sg"], ["sw"]),
             helper.make_node("Conv", ["sw", "w4"], ["c4"]),
             helper.make_node("ReduceMean", ["c4", "axes"], ["y"], keepdims=0)]
    model = _model(nodes, inits, [2, 3, 10, 10], [2, 5, 5])
    tf_graph = _to_tf(model, reg)
    before = _types(_to_tf(model, reg, layout=False))["Transpose"]
    after = _types(tf_graph)["Transpose"]
    assert _between_convs(tf_graph) == []
    assert after <= 1 < before, (before, after)
    _check(model, tf_graph, _feeds([2, 3, 10, 10]))


def test_transposes_that_change_the_numbers_stay(reg: Any) -> None:
    """A Flatten of [N, C, H, W] with H, W > 1 reads the channels-first order: one transpose to NCHW stays before
    it (the model's output must not change); explicit ONNX transposes that are inverse cancel; a Softmax over the
    channels is not moved off its axis."""
    from onnx import helper

    rng = np.random.default_rng(5)
    inits = {"w": rng.normal(0, 0.5, (4, 3, 3, 3)).astype(np.float32),
             "w2": rng.normal(0, 0.5, (4, 4, 1, 1)).astype(np.float32)}
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 3, 1]),
             helper.make_node("Relu", ["xt"], ["xr"]),
             helper.make_node("Transpose", ["xr"], ["xb"], perm=[0, 3, 1, 2]),
             helper.make_node("Conv", ["xb", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Softmax", ["c"], ["s"], axis=1),
             helper.make_node("Conv", ["s", "w2"], ["c2"]),
             helper.make_node("Flatten", ["c2"], ["y"])]
    model = _model(nodes, inits, [2, 3, 5, 5], [2, 100])
    tf_graph = _to_tf(model, reg)
    _check(model, tf_graph, _feeds([2, 3, 5, 5]))
    assert _types(_to_tf(model, reg, layout=False))["Transpose"] > _types(tf_graph)["Transpose"]
    readers = [c.op.type for op in tf_graph if op.type == "Transpose" for c in op.output_ports[0].consumers
               if c.op is not None]
    assert "Reshape" in readers  # the NHWC -> NCHW before the Flatten


def test_no_more_transposes_at_the_outputs(reg: Any) -> None:
    """A convolution read by two heads that are graph outputs: its one transpose back to NCHW is not pushed into
    two (one per output)."""
    from onnx import helper

    w = np.random.default_rng(7).normal(0, 0.5, (4, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"]),
             helper.make_node("Sigmoid", ["c"], ["z"])]
    model = _model(nodes, {"w": w}, [1, 3, 6, 6], [1, 4, 6, 6], outputs=("y", "z"))
    tf_graph = _to_tf(model, reg)
    assert _types(tf_graph)["Transpose"] == 2
    _check(model, tf_graph, _feeds([1, 3, 6, 6]))

    # channels-last at both ends: no transpose at all, the layouts recorded
    import onnxruntime as ort

    from amanda_tf.layout_tf import count_transposes, optimize
    from amanda_tf.runner import run

    tf_graph = _to_tf(model, reg, layout=False)
    optimize(tf_graph, channels_last_inputs=True, channels_last_outputs=True)
    assert count_transposes(tf_graph) == 0
    assert tf_graph.attrs["amanda.output_layout"] == {"y": "0,3,1,2", "z": "0,3,1,2"}
    x = _feeds([1, 3, 6, 6])["x"]
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = list(run(tf_graph, {"x": np.ascontiguousarray(x.transpose(0, 2, 3, 1))}).values())
    for r, g in zip(ref, got):
        assert float(np.abs(r - g.transpose(0, 3, 1, 2)).max()) <= TOL


def test_channels_last_inputs(reg: Any) -> None:
    """``optimize(graph, channels_last_inputs=True)``: the graph input takes NHWC data and no transpose is left."""
    from amanda_tf.layout_tf import count_transposes, optimize

    model = _resnet_like(seed=2)
    tf_graph = _to_tf(model, reg, layout=False)
    report = optimize(tf_graph, channels_last_inputs=True)
    assert count_transposes(tf_graph) == 0
    assert report.rewrites.get("inputs made channels-last") == 1
    assert tf_graph.attrs["amanda.input_layout"] == {"x": "0,2,3,1"}
    import onnxruntime as ort

    from amanda_tf.runner import run

    x = _feeds([2, 3, 9, 9], seed=4)["x"]
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = list(run(tf_graph, {"x": np.ascontiguousarray(x.transpose(0, 2, 3, 1))}).values())
    assert float(np.abs(ref[0] - got[0]).max()) <= TOL


def test_channels_last_outputs_of_a_feature_map_and_its_pooling(reg: Any) -> None:
    """A feature map that is an output and also feeds a global pooling that is another (a backbone's
    ``last_hidden_state`` and ``pooler_output``): once the feature map's output takes the NHWC value, the transpose
    left for the pooling goes below it to the pooled output, which then gives NHWC too; none is left."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from amanda_tf.layout_tf import count_transposes, optimize
    from amanda_tf.runner import run

    w = np.random.default_rng(3).normal(0, 0.5, (4, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"]),
             helper.make_node("GlobalAveragePool", ["y"], ["z"])]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 6, 6]),
                           helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 4, 1, 1])],
                          [numpy_helper.from_array(w, "w")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(model)
    tf_graph = _to_tf(model, reg, layout=False)
    optimize(tf_graph, channels_last_inputs=True, channels_last_outputs=True)
    assert count_transposes(tf_graph) == 0
    assert tf_graph.attrs["amanda.output_layout"] == {"y": "0,3,1,2", "z": "0,3,1,2"}
    x = _feeds([2, 3, 6, 6])["x"]
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = list(run(tf_graph, {"x": np.ascontiguousarray(x.transpose(0, 2, 3, 1))}).values())
    assert [g.shape for g in got] == [(2, 6, 6, 4), (2, 1, 1, 4)]
    for r, g in zip(ref, got):
        assert float(np.abs(r - g.transpose(0, 3, 1, 2)).max()) <= TOL

