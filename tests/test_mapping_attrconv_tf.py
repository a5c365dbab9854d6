"""The ONNX -> TensorFlow helpers of ``amanda_core.mapping.attrconv`` (no framework imported)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from amanda_core.mapping import attrconv as ac


def _python_slice(x: np.ndarray, starts: list[int], ends: list[int], axes: list[int], steps: list[int]) -> np.ndarray:
    index = [slice(None)] * x.ndim
    for a, s, e, st in zip(axes, starts, ends, steps):
        index[a] = slice(s, e, st)
    return x[tuple(index)]


def _strided(x: np.ndarray, plan: dict) -> np.ndarray:
    index = []
    for a in range(x.ndim):
        if plan["begin_mask"] >> a & 1:
            index.append(slice(None))
        else:
            index.append(slice(int(plan["begin"][a]), int(plan["end"][a]), int(plan["strides"][a])))
    return x[tuple(index)]


def test_tf_const_dtype() -> None:
    assert ac.tf_const_dtype(np.zeros(2, np.float32)) == "float32"
    assert ac.tf_const_dtype(np.array([b"a"], dtype=object)) == "string"
    assert ac.tf_const_dtype(np.zeros(2, np.complex64)) == "complex64"
    assert ac.tf_const_dtype(np.zeros(2, "datetime64[s]")) is None
    assert ac.tf_const_dtype(3) is None


@pytest.mark.parametrize("starts, ends, axes, steps", [
    ([1], [3], [0], [1]),
    ([0, -1], [2, -1000], [1, 0], [1, -1]),
    ([2**62], [-(2**62)], [-1], [-2]),
    ([-100], [100], [1], [3]),
])
def test_onnx_strided_slice_is_python_slicing(starts: list, ends: list, axes: list, steps: list) -> None:
    x = np.arange(4 * 5 * 6).reshape(4, 5, 6)
    plan = ac.onnx_strided_slice(np.array(starts), np.array(ends), np.array(axes), np.array(steps), 3)
    assert plan is not None and plan["begin"].dtype == np.int64
    norm = [a % 3 for a in axes]
    np.testing.assert_array_equal(_strided(x, plan), _python_slice(x, starts, ends, norm, steps))


def test_onnx_strided_slice_defaults_and_refusals() -> None:
    plan = ac.onnx_strided_slice([1], [2], None, None, 2)
    assert plan["begin"].tolist() == [1, 0] and plan["begin_mask"] == 0b10 == plan["end_mask"]
    assert ac.onnx_strided_slice([0, 0], [1, 1], [0, -2], None, 2) is None   # an axis twice
    assert ac.onnx_strided_slice([0], [1], [0], [0], 2) is None              # step 0
    assert ac.onnx_strided_slice([0], [1], [5], None, 2) is None             # no such axis


def test_onnx_pad_pairs() -> None:
    assert ac.onnx_pad_pairs([1, 2, 3, 4], 2).tolist() == [[1, 3], [2, 4]]
    assert ac.onnx_pad_pairs([1, 2], 3, [-1]).tolist() == [[0, 0], [0, 0], [1, 2]]
    assert ac.onnx_pad_pairs([-1, 0], 1) is None
    assert ac.onnx_pad_pairs([1, 2, 3], 2) is None


def test_perms() -> None:
    assert ac.tf_nhwc_perm(4).tolist() == [0, 2, 3, 1]
    assert ac.tf_nhwc_perm(5, False).tolist() == [0, 4, 1, 2, 3]
    assert ac.tf_filter_perm(4).tolist() == [2, 3, 1, 0]
    w = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    hwio = ac.tf_filter(w)
    assert hwio.shape == (4, 5, 3, 2) and hwio[1, 2, 0, 1] == w[1, 0, 1, 2]


def test_onnx_tf_window() -> None:
    w = ac.onnx_tf_window([1, 3, 5, 5], [3, 3], "NOTSET", [1, 1, 1, 1], [2, 2])
    assert w["strides"] == [1, 2, 2, 1] and w["ksize"] == [1, 3, 3, 1] and w["out"] == [3, 3]
    assert w["paddings"].tolist() == [[0, 0], [1, 1], [1, 1], [0, 0]]
    same = ac.onnx_tf_window([1, 3, 4, 4], [3, 3], "SAME_UPPER", None, [2, 2])
    assert same["pads"] == [0, 0, 1, 1]
    assert ac.onnx_tf_window([1, 3, None, 4], [3, 3], "SAME_UPPER") is None          # unknown size, SAME
    assert ac.onnx_tf_window([1, 3, None, 4], [3, 3])["out"] == [None, 2]          # unknown size, no padding
    assert ac.onnx_tf_window([1, 3, 6, 6], [3, 3], strides=[2, 2], ceil_mode=1) is None   # ceil rounds up
    assert ac.onnx_tf_window([1, 3, 5, 5], [3, 3], strides=[2, 2], ceil_mode=1)["out"] == [2, 2]


def test_onnx_tf_conv_transpose() -> None:
    plan = ac.onnx_tf_conv_transpose([1, 1, 3, 3], [1, 2, 3, 3], 1, "NOTSET", [1, 2, 1, 2], [3, 2], None, [1, 1])
    # full: (3-1)*3+3 = 9, (3-1)*2+3 = 7; + output_padding -> 10, 8; minus pads (1+1, 2+2) -> 8, 4
    assert plan["input_sizes"].tolist() == [1, 9, 7, 2]
    assert plan["paddings"].tolist() == [[0, 0], [0, 1], [0, 1], [0, 0]]
    assert plan["begin"].tolist() == [0, 1, 2, 0] and plan["end"].tolist() == [1, 9, 6, 2]
    assert ac.onnx_tf_conv_transpose([1, 1, 3, 3], [1, 2, 3, 3], 2) is None             # groups
    assert ac.onnx_tf_conv_transpose([1, 1, 3, 3], [1, 2, 3, 3], dilations=[2, 2]) is None
    assert ac.onnx_tf_conv_transpose([1, 1, 3], [1, 2, 3]) is None                      # 1-D


def test_port_fed() -> None:
    op = SimpleNamespace(input_ports={"X": SimpleNamespace(source=object()), "B": SimpleNamespace(source=None)})
    assert ac.port_fed(op, "X") and not ac.port_fed(op, "B") and not ac.port_fed(op, "C")


def test_fill_scalar_lowest() -> None:
    assert ac.onnx_fill_value(None).dtype == np.float32 and ac.onnx_fill_value(None).shape == ()
    assert ac.onnx_fill_value(np.array([7], np.int32)).tolist() == 7
    with pytest.raises(ValueError):
        ac.onnx_fill_value(np.array([1, 2]))
    assert ac.tf_scalar(2, "float64").dtype == np.float64
    assert ac.tf_lowest("float32") == -np.inf and ac.tf_lowest("uint8") == 0 and ac.tf_lowest("int8") == -128


def test_avgpool_divisor() -> None:
    window = ac.onnx_tf_window([1, 1, 3, 3], [3, 3], "NOTSET", [1, 1, 1, 1])
    share = ac.avgpool_divisor([1, 1, 3, 3], window)
    assert share.shape == (1, 3, 3, 1)
    # corner windows see 2 x 2 of 3 x 3 inputs, edges 2 x 3, the centre all 9
    assert share[0, 0, 0, 0] == pytest.approx(4 / 9) and share[0, 0, 1, 0] == pytest.approx(6 / 9)
    assert share[0, 1, 1, 0] == pytest.approx(1.0)
    assert ac.avgpool_divisor([1, 1, None, 3], ac.onnx_tf_window([1, 1, None, 3], [3, 3])) is None


def test_unsqueeze_plan() -> None:
    plan = ac.unsqueeze_plan([0, -1], 2)
    assert plan["indices"].reshape(-1).tolist() == [1, 2] and plan["size"].tolist() == [4]
    assert plan["ones"].tolist() == [1, 0, 0, 1]
    shape = np.zeros(4, np.int64)
    shape[plan["indices"].reshape(-1)] = [5, 6]
    assert (shape + plan["ones"]).tolist() == [1, 5, 6, 1]
    assert ac.unsqueeze_plan([1, 1], 2) is None and ac.unsqueeze_plan([7], 2) is None


def test_tensor_elem() -> None:
    class Bad:
        def canonical_dtype(self) -> str:
            raise ValueError("seq(tensor(float)) is not a tensor type")

    assert ac.tensor_elem(SimpleNamespace(dtype=Bad(), is_input=False)) is None
    assert ac.tensor_elem(SimpleNamespace(dtype=None, is_input=False)) is None
    assert ac.tensor_elem(SimpleNamespace(dtype="seq(tensor(float))", is_input=False)) is None
    fed = SimpleNamespace(dtype=None, is_input=True, source=SimpleNamespace(dtype="float32[4,6]"))
    assert ac.tensor_elem(fed) == "float32"
