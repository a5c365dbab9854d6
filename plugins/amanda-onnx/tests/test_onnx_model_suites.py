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
import pytest
from onnx.backend.test.loader import load_model_tests
from onnx_suite_support import check_round_trip, data_set_inputs, dummy_inputs

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
    inputs = (lambda m: data_set_inputs(model_dir, m)) if model_dir else dummy_inputs
    check_round_trip(onnx.load(path), path, inputs, f"onnx {onnx.__version__} {kind} models",
                     os.path.basename(model_dir or path))
