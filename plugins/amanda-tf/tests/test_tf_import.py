"""The TensorFlow importer: Keras models, .keras files, tf.functions, tf.Modules, SavedModels, frozen GraphDefs."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

import tf_models as models  # noqa: E402 - the factories beside this file (tf_models: a name no other test folder uses)

from amanda_core.ir.graph import Graph  # noqa: E402
from amanda_core.namespace import validate  # noqa: E402
from amanda_tf.importer import is_tf_program, load_model  # noqa: E402
from amanda_tf.runner import run  # noqa: E402


def _mlp():
    keras.utils.set_random_seed(3)
    x = keras.Input((8,), name="features")
    h = keras.layers.Dense(5, activation="relu", name="hidden")(x)
    return keras.Model(x, keras.layers.Dense(2, name="scores")(h))


def _bodies(graph):
    for op in graph.walk():
        for v in op.attrs.values():
            for g in v if isinstance(v, list) else [v]:
                if isinstance(g, Graph):
                    yield op, g


def test_keras_model_ports_constants_and_plumbing(tf_registry, tf_version):
    model = _mlp()
    g = load_model(model)
    assert g.namespace == f"amanda/tensorflow/{tf_version}"
    assert [(p.name, p.dtype) for p in g.input_ports] == [("features", "float32[?,8]")]
    assert [(p.name, p.dtype) for p in g.output_ports] == [("scores", "float32[?,2]")]
    types = sorted(op.type for op in g)
    assert types == ["BiasAdd", "BiasAdd", "Const", "Const", "Const", "Const", "MatMul", "MatMul", "Relu"]
    assert not any(op.control_inputs for op in g)
    matmul = next(op for op in g if op.type == "MatMul" and op.input_ports["a"].source.name == "features")
    assert matmul.input_ports.names() == ["a", "b"] and matmul.output_ports.names() == ["product"]
    assert matmul.attrs["T"] == "float32" and matmul.attrs["transpose_b"] is False
    weight = matmul.input_ports["b"].source.owner
    value = weight.attrs["value"]
    assert weight.type == "Const" and isinstance(value, np.ndarray) and not value.flags.writeable
    kernel = model.get_layer("hidden").kernel
    storage = np.asarray(kernel.value.read_value() if hasattr(kernel, "value") else kernel.read_value())
    assert np.shares_memory(value, storage)  # the variable's own storage: no copy
    np.testing.assert_array_equal(value, kernel.numpy())
    kernel.assign(np.zeros(kernel.shape, np.float32))  # TensorFlow gives the variable new storage ...
    assert np.any(value != 0)  # ... and the imported value stays what it was
    assert validate(g, tf_registry.namespaces) == []


def test_keras_text_model(tf_registry):
    model, inputs = models.text_model()
    g = load_model(model)
    assert [(p.name, p.dtype) for p in g.input_ports] == [("tokens", "int32[?,12]")]
    assert g.output_ports.names() == ["probs"]
    assert validate(g, tf_registry.namespaces) == []
    for op in g.walk():  # plumbing is dropped, except what a function names as its control outputs
        if op.type in ("Identity", "NoOp"):
            assert op.name in op.graph.attrs.get("control_ret", {}).values(), op.path
    out = run(g, inputs)["probs"]
    np.testing.assert_array_equal(out, model(inputs["tokens"], training=False).numpy())


def test_cond_function_bodies(tf_registry):
    fn, inputs = models.cond_function()
    g = load_model(fn)
    assert g.input_ports.names() == ["x"] and g.output_ports.names() == ["output_0"]
    (op,) = [op for op in g if op.type in ("StatelessIf", "If")]
    assert op.input_ports.names() == ["cond", "input_0"] and op.output_ports.names() == ["output_0"]
    then, other = op.attrs["then_branch"], op.attrs["else_branch"]
    assert isinstance(then, Graph) and isinstance(other, Graph)
    assert then.attrs["function"] and then.namespace is None
    assert {o.type for o in then} >= {"Relu"} and {o.type for o in other} >= {"Tanh"}
    assert len(then.input_ports) == 1 and len(then.output_ports) == 1
    assert validate(g, tf_registry.namespaces) == []
    for positive in (True, False):
        _, xs = models.cond_function(positive=positive)
        np.testing.assert_array_equal(run(g, xs)["output_0"], fn(**xs).numpy())


def test_while_function_nested_bodies(tf_registry):
    fn, inputs = models.while_function()
    g = load_model(fn)
    assert [(p.name, p.dtype) for p in g.input_ports] == [("x", "float32[?,4]"), ("n", "int32[]")]
    (loop,) = [op for op in g if op.type in ("StatelessWhile", "While")]
    body = loop.attrs["body"]
    assert len(body.input_ports) == len(loop.input_ports) == len(loop.attrs["T"])
    nested = [o for o in body if o.type in ("StatelessIf", "If")]
    assert nested and isinstance(nested[0].attrs["then_branch"], Graph)  # a body inside a body
    assert len(list(_bodies(g))) >= 4
    assert validate(g, tf_registry.namespaces) == []
    for steps in (0, 1, 4):
        _, xs = models.while_function(steps=steps)
        np.testing.assert_array_equal(run(g, xs)["output_0"], fn(**xs).numpy())


def test_function_with_inputs_option():
    @tf.function
    def f(a, b):
        return {"sum": a + b, "prod": a * b}

    g = load_model(f, inputs=["a:float32[batch,3]", "b:float32[1,3]"])
    assert [(p.name, p.dtype) for p in g.input_ports] == [("a", "float32[?,3]"), ("b", "float32[1,3]")]
    assert sorted(g.output_ports.names()) == ["prod", "sum"]
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.ones((1, 3), np.float32) * 2
    out = run(g, {"a": a, "b": b})
    np.testing.assert_array_equal(out["sum"], a + b)
    np.testing.assert_array_equal(out["prod"], a * b)


def test_concrete_function_and_module():
    class Scale(tf.Module):
        def __init__(self):
            self.w = tf.Variable([1.5, -2.0])

        @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32, name="v")])
        def __call__(self, v):
            return v * self.w

    m = Scale()
    assert is_tf_program(m) and is_tf_program(m.__call__)
    for source in (m, m.__call__.get_concrete_function()):
        g = load_model(source)
        assert g.input_ports.names() == ["v"]
        x = np.array([[1.0, 2.0]], np.float32)
        np.testing.assert_array_equal(run(g, {"v": x})["output_0"], x * np.array([1.5, -2.0], np.float32))
    assert not is_tf_program(object())


def test_keras_file_savedmodel_and_frozen_graph(tmp_path, tf_registry):
    model = _mlp()
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    want = model(x, training=False).numpy()
    path = tmp_path / "mlp.keras"
    model.save(path)
    g = load_model(str(path))
    np.testing.assert_array_equal(run(g, {"features": x})["scores"], want)

    saved = tmp_path / "saved"
    tf.saved_model.save(model, str(saved))
    g2 = load_model(str(saved))
    assert g2.input_ports.names() == ["inputs"] and g2.output_ports.names() == ["output_0"]  # the signature's keys
    np.testing.assert_allclose(run(g2, {"inputs": x})["output_0"], want, rtol=1e-6, atol=1e-6)
    assert validate(g2, tf_registry.namespaces) == []

    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    cf = tf.function(lambda t: model(t, training=False)).get_concrete_function(
        tf.TensorSpec([None, 8], tf.float32, name="features"))
    frozen = convert_variables_to_constants_v2(cf)
    pb = tmp_path / "frozen.pb"
    pb.write_bytes(frozen.graph.as_graph_def().SerializeToString())
    out_node = frozen.outputs[0].op.name
    g3 = load_model(str(pb), inputs=["features:float32[1,8]"], outputs=[out_node])
    assert [(p.name, p.dtype) for p in g3.input_ports] == [("features", "float32[1,8]")]
    assert g3.output_ports.names() == [out_node]
    np.testing.assert_array_equal(run(g3, {"features": x[:1]})[out_node], model(x[:1], training=False).numpy())


def test_mobilenet_v2_small(tf_registry):
    model, inputs = models.mobilenet_v2(size=96)
    g = load_model(model)
    assert [(p.name, p.dtype) for p in g.input_ports] == [(next(iter(inputs)), "float32[?,96,96,3]")]
    assert g.output_ports.names() == ["predictions"]
    assert validate(g, tf_registry.namespaces) == []
    counts = {}
    for op in g:
        counts[op.type] = counts.get(op.type, 0) + 1
    assert counts["Conv2D"] + counts.get("DepthwiseConv2dNative", 0) >= 50
    assert "Identity" not in counts and "ReadVariableOp" not in counts
