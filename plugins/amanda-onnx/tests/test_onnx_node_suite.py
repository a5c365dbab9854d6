"""Every node test case of the installed onnx (``load_model_tests(kind="node")``, built in memory) goes
ONNX -> Amanda -> ONNX and must come back the same model:

* byte-identical ``SerializeToString(deterministic=True)`` (the only normalisation is the one deterministic
  serialization does: map entries sorted, fields in number order, which the graph cannot tell anyway);
* ``onnx.checker.check_model(full_check=True)`` passes on the exported model whenever it passes on the
  original;
* onnxruntime, run on the case's own inputs, gives bit-identical outputs (NaN payloads included) for the
  original and the exported model.

A case onnxruntime cannot run is skipped with the runtime's own message (the structural and checker checks have
passed by then); the summary line at the end counts passes, such cases, and failures.
"""

import warnings

import onnx
import pytest
from onnx.backend.test.loader import load_model_tests
from onnx_suite_support import check_round_trip

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # some case generators overflow on purpose
    CASES = load_model_tests(kind="node")

SUITE = f"onnx {onnx.__version__} node cases"


def test_the_node_suite_is_all_there():
    assert len(CASES) >= 1800, len(CASES)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_node_case_round_trip(case):
    inputs = list(case.data_sets[0][0]) if case.data_sets else []
    check_round_trip(case.model, case.model, inputs, SUITE, case.name)
