"""ONNX -> torch tables on a representative subset of the ONNX node test suite, run with the torch runner (ops
whose constant inputs are constants in the test models; many node tests feed axes, shapes and k as graph inputs,
which the tables refuse).

A case either converts and gives the expected outputs, or is refused (an op stays unconverted); a converted case
with different outputs fails the test.  The whole suite, with onnxruntime and onnx2torch beside it, is
``bench/onnx_torch.py``.
"""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

SUBSET = re.compile(r"^test_(abs|add|add_bcast|relu|sigmoid|tanh|div|div_uint8|mul|sub|pow|pow_types_int32_float32|"
                    r"equal|less|greater|and2d|not_2d|where_example|clip|clip_default_inbounds|leakyrelu|elu|selu|"
                    r"hardsigmoid|softsign|prelu_broadcast|softmax_axis_1|logsoftmax_axis_1|softmax_axis_1_expanded|"
                    r"max_two_inputs|mean_example|argmax_keepdims_example|"
                    r"argmax_keepdims_example_select_last_index|matmul_2d|gemm_default_no_bias|gemm_all_attributes|"
                    r"conv_with_strides_padding|maxpool_2d_default|"
                    r"averagepool_2d_default|globalaveragepool|batchnorm_example|instancenorm_example|"
                    r"flatten_axis1|transpose_default|"
                    r"concat_2d_axis_0|cast_FLOAT_to_DOUBLE|"
                    r"identity)$")


@pytest.fixture(scope="module")
def cases():
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [c for c in load_model_tests(kind="node") if SUBSET.match(c.name)]


def test_subset_converts_and_matches(cases):
    import onnx_torch  # bench/onnx_torch.py

    from amanda_core.plugin.manager import registry
    from amanda_onnx import opset
    from amanda_torch.onnx_tables import onnx_to_torch_table

    tables = [onnx_to_torch_table(), *opset.tables()]
    outcomes = {c.name: onnx_torch.amanda_case(c, tables, registry().namespaces)[:2] for c in cases}
    wrong = {n: why for n, (o, why) in outcomes.items() if o == "wrong"}
    assert not wrong, wrong
    passed = [n for n, (o, _) in outcomes.items() if o == "passed"]
    assert len(cases) >= 45
    assert len(passed) == len(cases), {n: o for n, o in outcomes.items() if o[0] != "passed"}


def test_tables_check_against_both_schemas():
    from amanda_core.mapping import check_table, load_table
    from amanda_core.plugin.manager import registry
    from amanda_torch.onnx_tables import onnx_to_torch_files

    for path in onnx_to_torch_files():
        errors, _ = check_table(load_table(path, trusted=True), registry().namespaces)
        assert errors == [], errors


def test_helpers():
    from amanda_core.mapping.attrconv import (
        broadcast_shape,
        conv_transpose_padding,
        elem_kind,
        onnx_conv_pads,
        onnx_elem_dtype,
        shape_size,
        slice_plan,
        split_sizes,
        symmetric_pads,
        torch_pad_order,
    )

    assert onnx_conv_pads("NOTSET", None, None, [3, 3]) == [0, 0, 0, 0]
    assert onnx_conv_pads("SAME_UPPER", None, [5, 5], [2, 2]) == [0, 0, 1, 1]
    assert onnx_conv_pads("SAME_LOWER", None, [5, 5], [2, 2]) == [1, 1, 0, 0]
    assert onnx_conv_pads("SAME_UPPER", None, [None, 5], [2, 2]) is None
    assert symmetric_pads([1, 2, 1, 2]) == [1, 2] and symmetric_pads([1, 0, 0, 0]) is None
    assert torch_pad_order([0, 1, 2, 0, 3, 4]) == [2, 4, 1, 3]
    assert conv_transpose_padding([1, 1], [0], [2], [1]) == ([1], [0])
    assert conv_transpose_padding([1, 0], [0], [2], [1]) == ([1], [1])
    assert conv_transpose_padding([0, 1], [0], [2], [1]) is None
    assert broadcast_shape([3, 1], [2, 1, 4]) == [2, 3, 4]
    with pytest.raises(ValueError):
        broadcast_shape([3], [4])
    assert split_sizes(7, 3) == [3, 3, 1] and split_sizes(None, 2) is None and split_sizes(6, 2, [1, 5]) == [1, 5]
    assert onnx_elem_dtype(1) == "float32" and onnx_elem_dtype(16) == "bfloat16"
    assert elem_kind("uint8") == "uint" and elem_kind(np.zeros(2, np.float16)) == "float"
    assert shape_size([2, 3, 4]) == 24 and shape_size([]) == 1
    plan = slice_plan([5, 4], [4], [0], [0], [-2])
    x = np.arange(20).reshape(5, 4)
    flipped = np.flip(x, plan["flip"])
    got = np.lib.stride_tricks.as_strided(np.ascontiguousarray(flipped).reshape(-1)[plan["offset"]:],
                                          plan["sizes"], [s * 8 for s in plan["strides"]])
    np.testing.assert_array_equal(got, x[4:0:-2])
