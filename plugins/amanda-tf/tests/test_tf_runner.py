"""The TensorFlow runner: outputs by name in order; seeded example inputs."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from amanda_core.errors import AmandaError  # noqa: E402
from amanda_tf.importer import load_model  # noqa: E402
from amanda_tf.runner import example_inputs, run  # noqa: E402


@tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x"),
                              tf.TensorSpec([None], tf.int32, name="ids")])
def two_outputs(x, ids):
    return {"b_scaled": x * 2.0, "a_picked": tf.gather(tf.constant([10.0, 20.0, 30.0]), ids)}


def test_run_outputs_by_name_in_order():
    g = load_model(two_outputs)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    ids = np.array([2, 0, 1], np.int32)
    out = run(g, {"ids": ids, "x": x})
    assert list(out) == g.output_ports.names()
    np.testing.assert_array_equal(out["b_scaled"], x * 2)
    np.testing.assert_array_equal(out["a_picked"], np.array([30.0, 10.0, 20.0], np.float32))
    with pytest.raises(AmandaError, match="no value given for graph input"):
        run(g, {"x": x})
    with pytest.raises(AmandaError, match="does not fit"):
        run(g, {"x": np.zeros((2, 4), np.float32), "ids": ids})


def test_example_inputs_seeded_dims_and_safe_integers():
    g = load_model(two_outputs)
    a = example_inputs(g, 7)
    b = example_inputs(g, 7)
    c = example_inputs(g, 8)
    assert a["x"].shape == (1, 3) and a["x"].dtype == np.float32 and a["ids"].dtype == np.int32
    np.testing.assert_array_equal(a["x"], b["x"])
    assert not np.array_equal(a["x"], c["x"])
    d = example_inputs(g, 0, {"x:0": 5, "?": 4})
    assert d["x"].shape == (5, 3) and d["ids"].shape == (4,)
    assert example_inputs(g, 0, {"batch": 2})["x"].shape == (2, 3)
    big = example_inputs(g, 1, {"?": 1000})["ids"]
    assert big.min() >= 0 and big.max() < 3  # safe as indices of anything
    run(g, example_inputs(g, 3, {"?": 6}))
