"""Function calls and stateful control flow: ``PartitionedCall`` at the top level and inside a ``tf.cond`` inside a
``tf.while_loop`` (an XLA-compiled ``tf.function``, which Grappler does not inline), and the stateful ``If``/``While``
TF writes when a branch or body holds an ``Assert``.  Imported as nested bodies to any depth and run by the runner
as TF runs them; converted to ONNX with ``tf-inline-calls`` (the calls inlined) and run in onnxruntime."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from amanda_core.ir.graph import Graph  # noqa: E402


@tf.function(jit_compile=True)
def _inner(x):
    return tf.nn.relu(x) * 2.0 - 0.5


def _outer(checked: bool) -> Any:
    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x"),
                                  tf.TensorSpec([], tf.int32, name="n")])
    def outer(x, n):
        def body(i, y):
            y = tf.cond(tf.reduce_sum(y) > 0, lambda: _inner(y) - 1.0, lambda: y * 0.5 + 1.0)
            if checked:
                tf.debugging.Assert(tf.reduce_all(tf.math.is_finite(y)), [y])
            return i + 1, y

        _, y = tf.while_loop(lambda i, y: i < n, body, [0, x])
        return _inner(y)

    return outer


def _walk(g: Graph, depth: int = 0):
    for op in g:
        yield depth, op
        for v in op.attrs.values():
            for b in v if isinstance(v, list) else [v]:
                if isinstance(b, Graph):
                    yield from _walk(b, depth + 1)


def _inputs(seed: int, n: int) -> dict[str, np.ndarray]:
    x = np.random.default_rng(seed).standard_normal((2, 3)).astype(np.float32) * (1 if seed % 2 else -1)
    return {"x": x, "n": np.array(n, np.int32)}


def test_calls_and_stateful_control_flow_import_to_any_depth(tf_registry) -> None:
    from amanda_core.namespace import validate
    from amanda_tf.importer import load_model
    from amanda_tf.runner import run

    fn = _outer(checked=True)
    g = load_model(fn)
    found = {(op.type, depth) for depth, op in _walk(g)}
    assert ("While", 0) in found and ("If", 1) in found and ("Assert", 2) in found  # stateful: Assert inside
    assert ("StatelessIf", 1) in found and ("PartitionedCall", 0) in found and ("PartitionedCall", 2) in found
    call = next(op for d, op in _walk(g) if op.type == "PartitionedCall" and d == 2)
    assert isinstance(call.attrs["f"], Graph) and "Relu" in {o.type for o in call.attrs["f"]}
    assert validate(g, tf_registry.namespaces) == []
    for seed, n in ((1, 0), (1, 3), (2, 1), (2, 4)):
        xs = _inputs(seed, n)
        np.testing.assert_array_equal(run(g, xs)["output_0"], fn(**xs).numpy())


def test_calls_are_inlined_on_the_way_to_onnx(plugins: Any) -> None:
    import onnxruntime as ort

    import amanda_onnx
    from amanda_core.mapping import convert, registered_tables
    from amanda_core.plugin.passes import registered_passes
    from amanda_tf.importer import load_model

    fn = _outer(checked=False)
    tables = [t for t in registered_tables(plugins.registry()) if t.name == "tf-to-onnx"]
    result = convert(load_model(fn), "amanda/onnx/18", tables, plugins.registry().namespaces,
                     passes=registered_passes(plugins))
    types = {op.type for _, op in _walk(result.graph)}
    assert "Loop" in types and "If" in types and not types & {"PartitionedCall", "StatefulPartitionedCall"}
    assert "2 function call(s) inlined" in result.explain()
    sess = ort.InferenceSession(amanda_onnx.to_model(result.graph).SerializeToString(),
                                providers=["CPUExecutionProvider"])
    for seed, n in ((1, 0), (1, 3), (2, 1), (2, 4)):
        xs = _inputs(seed, n)
        (got,) = sess.run(None, xs)
        np.testing.assert_allclose(got, fn(**xs).numpy(), rtol=1e-6, atol=1e-6)
