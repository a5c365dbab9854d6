"""Every model of the other kinds the installed onnx ships, ONNX -> Amanda -> ONNX, read from its file:
byte-identical deterministic serialization, the checker (full_check) passes whenever it passes on the original,
and onnxruntime gives bit-identical outputs on the case's own test data (``test_data_set_0``), or for the
light models on the inputs onnx's runner makes for them (``arange(n) / n``).

What onnx 1.23.2 ships (``onnx/backend/test/data``): ``simple`` (23 cases), ``pytorch-converted`` (82),
``pytorch-operator`` (35), each case a directory with ``model.onnx`` and data sets; ``real`` (9 cases) whose
``url`` points at the files of ``light``; ``light`` itself holds the 9 model files (``light_*.onnx``, weights
made light) with expected outputs but no case directories, so ``load_model_tests(kind="light")`` lists nothing.
"""

import glob
import os
import warnings

import onnx
import onnx.checker
import pytest
from onnx.backend.test.loader import load_model_tests
from onnx_suite_support import (
    RuntimeUnavailable,
    data_set_inputs,
    dummy_inputs,
    proto_diff,
    record,
    run,
    try_run,
)

import amanda_onnx

DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
KINDS = ("simple", "pytorch-converted", "pytorch-operator", "real")


def _cases():
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kind in KINDS:
            for c in sorted(load_model_tests(kind=kind), key=lambda c: c.name):
                if c.model_dir is not None:
                    out.append(pytest.param(kind, os.path.join(c.model_dir, "model.onnx"), c.model_dir,
                                            id=f"{kind}/{c.name}"))
                else:
                    path = os.path.normpath(os.path.join(os.path.dirname(onnx.__file__), "..", c.url))
                    out.append(pytest.param(kind, path, None, id=f"{kind}/{c.name}"))
    return out


CASES = _cases()
LIGHT = sorted(glob.glob(os.path.join(DATA, "light", "*.onnx")))


def test_what_the_installed_onnx_ships():
    kinds = sorted(d for d in os.listdir(DATA) if os.path.isdir(os.path.join(DATA, d)))
    assert set(KINDS) | {"light"} <= set(kinds), kinds
    assert load_model_tests(kind="light") == []  # model files only, no case directories
    real = load_model_tests(kind="real")
    assert real and all(c.url.startswith("onnx/backend/test/data/light/") for c in real)
    assert len(LIGHT) == len(real)
    for kind in ("simple", "pytorch-converted", "pytorch-operator"):
        assert load_model_tests(kind=kind), kind


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "path", "model_dir"), CASES)
def test_model_round_trip(kind, path, model_dir):
    suite = f"onnx {onnx.__version__} {kind} models"
    outcome = "fail"
    try:
        original = onnx.load(path)
        graph = amanda_onnx.load_model(path)
        exported = amanda_onnx.to_model(graph)
        b = exported.SerializeToString(deterministic=True)
        assert original.SerializeToString(deterministic=True) == b, proto_diff(original, exported)
        try:
            onnx.checker.check_model(original, full_check=True)
            original_ok = True
        except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError):
            original_ok = False
        if original_ok:
            onnx.checker.check_model(exported, full_check=True)
        inputs = data_set_inputs(model_dir, original) if model_dir else dummy_inputs(original)
        try:
            want = try_run(original, inputs)
        except RuntimeUnavailable as e:
            outcome = "runtime unavailable"
            record(suite, outcome, os.path.basename(model_dir or path), str(e))
            pytest.skip(f"onnxruntime cannot run the original model: {e}")
        got = run(exported, b, inputs)
        assert got == want, "onnxruntime outputs differ between the original and the exported model"
        outcome = "pass"
    finally:
        if outcome != "runtime unavailable":
            record(suite, outcome)
