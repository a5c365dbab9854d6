"""Keras GRU and SimpleRNN end to end: the keras-lstm pass recognises the loop and writes one ONNX ``GRU``
(``linear_before_reset = 1`` for Keras' default ``reset_after=True``, 0 for ``reset_after=False``) or ``RNN``, and
onnxruntime matches Keras at batch 1 and 3 on one symbolic-batch model.  A GRU with another activation is left and
named.  Never imports torch."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("tensorflow")

TOL = 1e-4
STEPS, FEATURES, UNITS = 7, 5, 6


def _model(kind: str = "GRU", **kwargs: Any) -> Any:
    import keras

    keras.utils.set_random_seed(11)
    x = keras.Input((STEPS, FEATURES), name="x")
    layer = getattr(keras.layers, kind)(UNITS, bias_initializer="random_normal", **kwargs)
    out = layer(x)
    return keras.Model(x, out)


VARIANTS = {
    "last": {},
    "sequences": {"return_sequences": True},
    "states": {"return_sequences": True, "return_state": True},
    "no_bias": {"use_bias": False},
    "backwards": {"go_backwards": True},
    "reset_before": {"reset_after": False},
    "reset_before_sequences_no_bias": {"reset_after": False, "return_sequences": True, "use_bias": False},
    "simple_rnn": {"kind": "SimpleRNN"},
    "simple_rnn_sequences": {"kind": "SimpleRNN", "return_sequences": True, "use_bias": False},
}


def _convert(model: Any, pm: Any) -> Any:
    from amanda_core.mapping import convert, registered_tables
    from amanda_core.plugin.passes import registered_passes
    from amanda_tf.importer import load_model

    tables = [t for t in registered_tables(pm.registry()) if t.name == "tf-to-onnx"]
    return convert(load_model(model), "amanda/onnx/18", tables, pm.registry().namespaces,
                   passes=registered_passes(pm))


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_keras_gru_is_one_onnx_gru(variant: str, plugins: Any) -> None:
    import onnxruntime as ort

    import amanda_onnx

    model = _model(**VARIANTS[variant])
    result = _convert(model, plugins)
    types = [op.type for op in result.graph.walk()]
    onnx_type = "RNN" if variant.startswith("simple") else "GRU"
    assert types.count(onnx_type) == 1 and "Loop" not in types and "LSTM" not in types, types
    rnn = next(op for op in result.graph.walk() if op.type == onnx_type)
    assert rnn.attrs["hidden_size"] == UNITS
    if onnx_type == "GRU":
        assert rnn.attrs["linear_before_reset"] == int(VARIANTS[variant].get("reset_after", True))
        assert "1 Keras GRU loop(s) -> ONNX GRU" in result.explain()
    else:
        assert "1 Keras SimpleRNN loop(s) -> ONNX RNN" in result.explain()
    sess = ort.InferenceSession(amanda_onnx.to_model(result.graph).SerializeToString(),
                                providers=["CPUExecutionProvider"])
    for batch in (1, 3):
        x = np.random.default_rng(batch).standard_normal((batch, STEPS, FEATURES)).astype(np.float32)
        refs = model(x)
        refs = [np.asarray(r) for r in (refs if isinstance(refs, (list, tuple)) else [refs])]
        got = sess.run(None, {"x": x})
        assert len(got) == len(refs)
        for g, r in zip(got, refs):
            assert g.shape == r.shape
            assert float(np.abs(g - r).max()) <= TOL * max(1.0, float(np.abs(r).max()))


def test_other_activations_are_left_and_named(plugins: Any) -> None:
    from amanda_core.mapping import ConversionError
    from amanda_tf.importer import load_model
    from amanda_tf.rnn import fuse_keras_lstms

    model = _model(activation="relu")
    report = fuse_keras_lstms(load_model(model))
    assert not report.fused and not report.fused_gru and not report.fused_rnn
    assert len(report.left) == 1 and "nor a GRU" in report.left[0][1] and "Tanh" in report.left[0][1]
    with pytest.raises(ConversionError, match="TensorListGetItem"):
        _convert(model, plugins)
