"""ONNX -> TensorFlow: the string ops of ``onnx_to_tf_strings.yaml`` on the ONNX node suite's cases (read from the
stored suite) and on inputs the suite does not hold, checked against onnx's reference evaluator.  Imports
TensorFlow; never torch."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("onnx")

STRING_CASES = ["test_strnormalizer_export_monday_casesensintive_nochangecase",
                "test_strnormalizer_export_monday_casesensintive_lower",
                "test_strnormalizer_export_monday_casesensintive_upper",
                "test_strnormalizer_export_monday_empty_output",
                "test_strnormalizer_export_monday_insensintive_upper_twodim"]
"""StringNormalizer with stop words (case-sensitive or not), each case change, an empty result, a [1, C] input."""


def test_string_node_cases(bench: Any) -> None:
    found = bench.load_cases(STRING_CASES)
    assert sorted(c.name for c in found) == sorted(STRING_CASES)
    for case in found:
        outcome, detail = bench.attempt(case)
        assert outcome == "pass", (case.name, outcome, detail)


def _reference_case(bench: Any, node: Any, inputs: dict[str, Any], in_types: list[Any], opset: int = 18) -> Any:
    """A one-node case whose expected outputs are onnx's reference evaluator's."""
    import onnx
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    graph = helper.make_graph([node], "g", in_types, [helper.make_value_info(n, onnx.TypeProto()) for n in node.output])
    model = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))
    expected = [e.astype(object) if e.dtype.kind == "U" else e for e in ReferenceEvaluator(model).run(None, inputs)]

    class Case:
        name = node.op_type
        rtol, atol = 0.0, 0.0

    Case.model = model
    Case.data_sets = [(list(inputs.values()), expected)]
    return Case


@pytest.mark.parametrize("attrs", [
    {"stopwords": ["the", "a"], "is_case_sensitive": 1},
    {"stopwords": ["the", "a"], "is_case_sensitive": 0, "case_change_action": "LOWER"},
    {"stopwords": ["THE", "a"], "is_case_sensitive": 0, "case_change_action": "UPPER"},
    {"case_change_action": "UPPER"},
    {"case_change_action": "LOWER", "locale": "en_US"},
])
@pytest.mark.parametrize("shape", [[6], [1, 6]])
def test_string_normalizer_against_reference(bench: Any, attrs: dict[str, Any], shape: list[int]) -> None:
    """Stop words inside space-separated text, doubled and trailing spaces, empty elements, non-ASCII case
    mapping (ß -> SS), as the reference computes them."""
    import numpy as np
    from onnx import TensorProto, helper

    words = np.array(["the Cat", "a", "", "The  dog a ", "Straße", "x the"], dtype=object).reshape(shape)
    node = helper.make_node("StringNormalizer", ["x"], ["y"], **attrs)
    case = _reference_case(bench, node, {"x": words}, [helper.make_tensor_value_info("x", TensorProto.STRING, shape)])
    assert bench.attempt(case) == ("pass", "")


def test_string_normalizer_many_rows_refused(bench: Any) -> None:
    """An [R, C] input with R > 1 (outside ONNX's definition, where the reference drops nothing) is refused."""
    import numpy as np
    from onnx import TensorProto, helper

    words = np.array([["a", "b"], ["c", "a"]], dtype=object)
    node = helper.make_node("StringNormalizer", ["x"], ["y"], stopwords=["a"], case_change_action="UPPER")
    case = _reference_case(bench, node, {"x": words}, [helper.make_tensor_value_info("x", TensorProto.STRING, [2, 2])])
    assert bench.attempt(case)[0] == "refused"
