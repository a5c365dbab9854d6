"""The Keras layers and TF functions a Keras user meets most (``keras_op_models.CASES``: convolutions of every kind,
pooling, normalisations, activations, resize, pad, slicing, reductions, matmul and einsum, the reshape family,
concat/split, recurrent layers, control flow), each converted TF -> ONNX with the plugin's tables and passes (as
``amanda convert`` does) and run in onnxruntime against Keras/TF on the same inputs at batch 2.

What is not converted must be refused by name: ``REFUSED`` lists those cases with the op type the error names.
The default run takes a representative subset (``FAST``); ``AMANDA_SLOW=1`` runs every case.
Never imports torch (this process imports TensorFlow).
"""

from __future__ import annotations

import os
from typing import Any

import keras_op_models
import numpy as np
import pytest

pytest.importorskip("tensorflow")

TOL = 1e-4

REFUSED = {
    "activation_gelu_erf": "Erfc",  # converted by the approximate rule only (--allow-approximate)
    "unstack": "Unpack",
}
"""Cases refused on purpose (no rule, or no exact one), with an op type the refusal names."""

INVALID = {"Conv2D_grouped": "shape"}
"""Cases that convert but whose ONNX model onnx.checker rejects: Keras calls a function for a grouped Conv2D on the
CPU, which tf-inline-calls inlines, but TF records no shape for the values after the call, and a graph output of
unknown rank is written without a shape."""

FAST = ["Conv1D_causal_dilated", "Conv2D_dilated", "Conv3D", "SeparableConv2D", "Conv2DTranspose",
        "Conv1DTranspose", "Conv3DTranspose", "MaxPooling3D", "AveragePooling1D_same", "GlobalMaxPooling2D_keepdims",
        "BatchNormalization", "LayerNormalization", "GroupNormalization", "UnitNormalization", "activation_swish",
        "activation_hard_swish", "activation_gelu_tanh", "activation_mish", "ReLU_max_threshold", "PReLU",
        "Softmax_axis1", "UpSampling2D_nearest", "UpSampling2D_bilinear", "image_resize_bilinear_down",
        "image_resize_align_corners", "Resizing_nearest", "tf_pad_constant", "tf_pad_reflect", "Cropping2D",
        "strided_slice_masks", "reductions", "Dense_3d", "EinsumDense", "batch_matmul", "MultiHeadAttention",
        "RepeatVector", "Permute", "concat_split", "LSTM_sequences", "GRU", "GRU_sequences", "tf_cond",
        "tf_while_loop", "activation_gelu_erf", "unstack", "Conv2D_grouped", "SimpleRNN",
        "GRU_reset_before", "Resizing_bicubic", "tf_pad_symmetric", "Resizing_area"]
SLOW = bool(os.environ.get("AMANDA_SLOW"))


def _refs(model: Any, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    if hasattr(model, "layers"):
        out = model(*inputs.values()) if len(inputs) == 1 else model(inputs)
    else:
        out = model(**inputs)
    out = list(out.values()) if isinstance(out, dict) else out if isinstance(out, (list, tuple)) else [out]
    return [np.asarray(o) for o in out]


def test_fast_subset_names_cases() -> None:
    assert set(FAST) | set(REFUSED) | set(INVALID) <= set(keras_op_models.CASES)


@pytest.mark.parametrize("name", [n for n in keras_op_models.CASES if SLOW or n in FAST])
def test_keras_case(name: str, plugins: Any) -> None:
    import onnx
    import onnxruntime as ort

    import amanda_onnx
    from amanda_core.mapping import ConversionError, convert, registered_tables
    from amanda_core.plugin.passes import registered_passes
    from amanda_tf.importer import load_model

    model, inputs = keras_op_models.CASES[name]()
    refs = _refs(model, inputs)
    tables = [t for t in registered_tables(plugins.registry()) if t.name == "tf-to-onnx"]
    graph = load_model(model)
    if name in REFUSED:
        with pytest.raises(ConversionError, match=REFUSED[name]):
            convert(graph, "amanda/onnx/18", tables, plugins.registry().namespaces,
                    passes=registered_passes(plugins))
        return
    result = convert(graph, "amanda/onnx/18", tables, plugins.registry().namespaces, passes=registered_passes(plugins))
    proto = amanda_onnx.to_model(result.graph)
    if name in INVALID:
        with pytest.raises(onnx.checker.ValidationError, match=INVALID[name]):
            onnx.checker.check_model(proto)
        return
    onnx.checker.check_model(proto)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {i.name: inputs[i.name] for i in sess.get_inputs()})
    assert len(got) == len(refs)
    for g, r in zip(got, refs):
        assert g.shape == r.shape and g.dtype == r.dtype, (g.shape, g.dtype, r.shape, r.dtype)
        if r.dtype.kind in "biu":
            np.testing.assert_array_equal(g, r)
            continue
        diff = float(np.abs(g.astype(np.float64) - r).max()) if r.size else 0.0
        scale = max(float(np.abs(r).max()), 1e-12) if r.size else 1.0
        assert diff <= TOL or diff / scale <= TOL, f"max abs diff {diff}, relative {diff / scale}"
