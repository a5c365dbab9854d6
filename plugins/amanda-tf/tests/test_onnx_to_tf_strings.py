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


ML_CASES = ["test_ai_onnx_ml_array_feature_extractor", "test_ai_onnx_ml_binarizer",
            "test_ai_onnx_ml_label_encoder_string_int", "test_ai_onnx_ml_label_encoder_string_int_no_default",
            "test_ai_onnx_ml_label_encoder_tensor_mapping", "test_ai_onnx_ml_label_encoder_tensor_value_only_mapping"]
"""ONNX-ML ops: their namespace (``amanda/onnx/ai.onnx.ml/N``) is converted by ``onnx_ml_to_tf.yaml`` after the
main chain."""


@pytest.mark.parametrize("names", [STRING_CASES, ML_CASES], ids=["strings", "onnx_ml"])
def test_node_cases(bench: Any, names: list[str]) -> None:
    found = bench.load_cases(names)
    assert sorted(c.name for c in found) == sorted(names)
    for case in found:
        outcome, detail = bench.attempt(case)
        assert outcome == "pass", (case.name, outcome, detail)


def _reference_case(bench: Any, node: Any, inputs: dict[str, Any], in_types: list[Any], opset: int = 18,
                    ml_opset: int | None = None) -> Any:
    """A one-node case whose expected outputs are onnx's reference evaluator's (``ml_opset``: the model imports
    ``ai.onnx.ml`` at that version too)."""
    import onnx
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    graph = helper.make_graph([node], "g", in_types, [helper.make_value_info(n, onnx.TypeProto()) for n in node.output])
    imports = [helper.make_opsetid("", opset)]
    if ml_opset is not None:
        imports.append(helper.make_opsetid("ai.onnx.ml", ml_opset))
    model = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=imports))
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


TFIDF_CASES = ["test_tfidfvectorizer_tf_only_bigrams_skip0", "test_tfidfvectorizer_tf_batch_onlybigrams_skip0",
               "test_tfidfvectorizer_tf_onlybigrams_levelempty", "test_tfidfvectorizer_tf_onlybigrams_skip5",
               "test_tfidfvectorizer_tf_batch_onlybigrams_skip5", "test_tfidfvectorizer_tf_uniandbigrams_skip5",
               "test_tfidfvectorizer_tf_batch_uniandbigrams_skip5"]


def test_tfidf_node_cases(bench: Any) -> None:
    found = bench.load_cases(TFIDF_CASES)
    assert sorted(c.name for c in found) == sorted(TFIDF_CASES)
    for case in found:
        outcome, detail = bench.attempt(case)
        assert outcome == "pass", (case.name, outcome, detail)


@pytest.mark.parametrize("mode, weights", [("TF", None), ("IDF", [0.5, 2, 3, 4, 5, 6, 7, 8]),
                                           ("TFIDF", [0.5, 2, 3, 4, 5, 6, 7, 8])])
@pytest.mark.parametrize("kind", ["int32", "int64", "string"])
def test_tfidf_against_reference(bench: Any, mode: str, weights: Any, kind: str) -> None:
    """Unigrams to trigrams with skips, a repeated n-gram (the last id counts), every mode with weights (TF mode
    without: the reference needs them in the others), integer and string rows, as onnx's reference evaluator
    computes them."""
    import numpy as np
    from onnx import TensorProto, helper

    rng = np.random.default_rng(3)
    rows = rng.integers(0, 5, size=(3, 9))
    pool = [1, 3, 2, 0, 1, 1, 2, 3, 0, 1, 0, 1, 2, 4, 4]   # unigrams 1 3, bigrams 20 11 23 01 01, trigram 244
    counts, indexes = [0, 2, 12], [7, 0, 1, 2, 3, 4, 5, 6]
    attrs: dict[str, Any] = {"mode": mode, "min_gram_length": 1, "max_gram_length": 3, "max_skip_count": 2,
                             "ngram_counts": counts, "ngram_indexes": indexes}
    if weights is not None:
        attrs["weights"] = [float(w) for w in weights]
    if kind == "string":
        words = np.array([f"w{v}" for v in rows.reshape(-1)], dtype=object).reshape(rows.shape)
        attrs["pool_strings"] = [f"w{v}" for v in pool]
        elem = TensorProto.STRING
    else:
        words = rows.astype(kind)
        attrs["pool_int64s"] = pool
        elem = TensorProto.INT32 if kind == "int32" else TensorProto.INT64
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)
    for x in (words, words[0]):
        case = _reference_case(bench, node, {"x": x}, [helper.make_tensor_value_info("x", elem, list(x.shape))])
        assert bench.attempt(case) == ("pass", ""), (mode, kind, x.shape)


def test_onnx_ml_against_reference(bench: Any) -> None:
    """LabelEncoder from floats to strings (a -0.0 key, the default string) and from ints to floats, Binarizer on
    float64 with NaN, ArrayFeatureExtractor with negative indices on a 3-D input, as the reference computes them;
    repeated keys are refused."""
    import numpy as np
    from onnx import TensorProto, helper

    def ml_case(node: Any, inputs: dict[str, Any], in_types: list[Any]) -> Any:
        return _reference_case(bench, node, inputs, in_types, ml_opset=4)

    vi = helper.make_tensor_value_info
    floats = np.array([[0.5, -0.0, 2.0], [7.0, 0.5, np.nan]], np.float32)
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml", keys_floats=[0.5, 0.0, 2.0],
                            values_strings=["half", "zero", "two"], default_string="other")
    assert bench.attempt(ml_case(node, {"x": floats}, [vi("x", TensorProto.FLOAT, [2, 3])])) == ("pass", "")
    ints = np.array([3, -1, 4, 10], np.int64)
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml", keys_int64s=[3, 4, -1],
                            values_floats=[0.25, 1.5, -2.0])
    assert bench.attempt(ml_case(node, {"x": ints}, [vi("x", TensorProto.INT64, [4])])) == ("pass", "")
    node = helper.make_node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml", threshold=0.5)
    x64 = np.array([0.5, 0.5000001, np.nan, -3.0], np.float64)
    assert bench.attempt(ml_case(node, {"x": x64}, [vi("x", TensorProto.DOUBLE, [4])])) == ("pass", "")
    node = helper.make_node("ArrayFeatureExtractor", ["x", "i"], ["z"], domain="ai.onnx.ml")
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    case = ml_case(node, {"x": data, "i": np.array([[-1, 0, 2]], np.int64)},
                   [vi("x", TensorProto.FLOAT, [2, 3, 4]), vi("i", TensorProto.INT64, [1, 3])])
    assert bench.attempt(case) == ("pass", "")
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml", keys_int64s=[3, 3],
                            values_int64s=[1, 2])
    assert bench.attempt(ml_case(node, {"x": ints}, [vi("x", TensorProto.INT64, [4])]))[0] == "refused"


@pytest.mark.parametrize("delimiter", [None, ","])
def test_string_split_on_unicode_whitespace_against_reference(bench: Any, delimiter: Any) -> None:
    """StringSplit on whitespace splits on every character Python counts as whitespace (the reference's
    ``str.split``), not only TF's six ASCII ones: no-break and ideographic spaces, line and paragraph separators,
    U+1C-1F; runs and leading and trailing whitespace give no empty pieces.  With a delimiter nothing else splits."""
    import numpy as np
    from onnx import TensorProto, helper

    texts = np.array(["a\u00a0b c", "\u3000lead\u2003trail\u2029", "x\x1cy\x1f z\u0085w", "one", "",
                      "p,\u00a0q,,r"], dtype=object)
    attrs = {} if delimiter is None else {"delimiter": delimiter}
    node = helper.make_node("StringSplit", ["x"], ["y", "n"], **attrs)
    case = _reference_case(bench, node, {"x": texts}, [helper.make_tensor_value_info("x", TensorProto.STRING, [6])],
                           opset=20)
    assert bench.attempt(case) == ("pass", "")
