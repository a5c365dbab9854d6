"""TensorFlow AttrValue messages as Python values, and their JSON form."""

from __future__ import annotations

import json
import math

import ml_dtypes
import numpy as np
import pytest

from amanda_core.ir.tensor import Tensor
from amanda_tf.attrs import decode_attr_value, decode_float, decode_json, encode_json
from amanda_tf.types import TFTypeSystem


@pytest.fixture(scope="module")
def pb():
    from tensorflow.core.framework import attr_value_pb2, tensor_shape_pb2, types_pb2

    return attr_value_pb2, tensor_shape_pb2, types_pb2


def av(pb, **fields):
    return pb[0].AttrValue(**fields)


def test_scalars(pb):
    assert decode_attr_value(av(pb, s=b"SAME")) == "SAME"
    assert decode_attr_value(av(pb, s="é".encode())) == "é"
    assert decode_attr_value(av(pb, s=b"\xff\x00")) == b"\xff\x00"
    assert decode_attr_value(av(pb, i=-7)) == -7
    assert decode_attr_value(av(pb, b=True)) is True
    assert decode_attr_value(av(pb, type=pb[2].DT_HALF)) == "float16"
    assert decode_attr_value(av(pb, type=pb[2].DT_FLOAT_REF)) == "float32_ref"
    assert decode_attr_value(av(pb)) is None


def test_floats_are_shortest_float32_decimals(pb):
    assert decode_attr_value(av(pb, f=1e-4)) == 0.0001
    assert decode_attr_value(av(pb, f=0.1)) == 0.1
    assert decode_attr_value(av(pb, f=float("-inf"))) == -math.inf
    assert math.isnan(decode_attr_value(av(pb, f=float("nan"))))
    assert decode_float(9.999999747378752e-05) == 0.0001 and decode_float(3.0) == 3.0


def test_shapes(pb):
    shape = pb[1].TensorShapeProto
    dim = pb[1].TensorShapeProto.Dim
    assert decode_attr_value(av(pb, shape=shape(unknown_rank=True))) is None
    assert decode_attr_value(av(pb, shape=shape(dim=[dim(size=-1), dim(size=3)]))) == [-1, 3]
    assert decode_attr_value(av(pb, shape=shape())) == []


def test_lists(pb):
    lv = pb[0].AttrValue.ListValue
    assert decode_attr_value(av(pb, list=lv(i=[1, 2, 2, 1]))) == [1, 2, 2, 1]
    assert decode_attr_value(av(pb, list=lv(s=[b"a", b"\xff"]))) == ["a", b"\xff"]
    assert decode_attr_value(av(pb, list=lv(f=[0.5, 1e-5]))) == [0.5, 1e-05]
    assert decode_attr_value(av(pb, list=lv(b=[True, False]))) == [True, False]
    assert decode_attr_value(av(pb, list=lv(type=[1, 3]))) == ["float32", "int32"]
    assert decode_attr_value(av(pb, list=lv(shape=[pb[1].TensorShapeProto(unknown_rank=True)]))) == [None]
    assert decode_attr_value(av(pb, list=lv())) == []
    assert decode_attr_value(av(pb, list=lv()), "list(type)") == []
    # the attr type picks the field even when another one is set
    assert decode_attr_value(av(pb, list=lv(i=[1], type=[1])), "list(type)") == ["float32"]


def test_tensors(pb):
    import tensorflow as tf

    t = decode_attr_value(av(pb, tensor=tf.make_tensor_proto(np.array([[1, 2], [3, 4]], np.int64))))
    assert isinstance(t, Tensor) and t.dtype == "int64" and t.shape == (2, 2)
    np.testing.assert_array_equal(t.numpy(), [[1, 2], [3, 4]])
    s = decode_attr_value(av(pb, tensor=tf.make_tensor_proto([b"a", b"bc"])))
    assert s.numpy().tolist() == [b"a", b"bc"]
    q = decode_attr_value(av(pb, tensor=tf.make_tensor_proto(np.array([1, -2], np.int8), dtype=tf.qint8)))
    assert q.dtype == "int8" and q.numpy().tolist() == [1, -2]
    b = decode_attr_value(av(pb, tensor=tf.make_tensor_proto(np.array([1.5], ml_dtypes.bfloat16))))
    assert b.dtype == "bfloat16" and float(b.numpy()[0]) == 1.5


def test_funcs_and_placeholders(pb):
    inner = pb[0].NameAttrList(name="cond_fn", attr={"T": av(pb, type=1), "n": av(pb, i=2)})
    assert decode_attr_value(av(pb, func=inner)) == {"name": "cond_fn", "attr": {"T": "float32", "n": 2}}
    lv = pb[0].AttrValue.ListValue(func=[pb[0].NameAttrList(name="f")])
    assert decode_attr_value(av(pb, list=lv)) == [{"name": "f", "attr": {}}]
    assert decode_attr_value(av(pb, placeholder="T")) == {"placeholder": "T"}
    assert TFTypeSystem().check_value("func", decode_attr_value(av(pb, func=inner))) is None


# --------------------------------------------------------------------------- JSON form


@pytest.mark.parametrize("value", [
    None, True, 3, -0.5, "SAME", b"\xff\x00", [1, 2], [[], [1], None], {"name": "f", "attr": {"x": [1.5]}},
    float("inf"),
])
def test_plain_values_round_trip_through_json(value):
    back = decode_json(json.loads(json.dumps(encode_json(value))))
    assert back == value and type(back) is type(value)


@pytest.mark.parametrize("array", [
    np.arange(6, dtype=np.float32).reshape(2, 3),
    np.array(7, dtype=np.int32),
    np.array([1.5, -2], dtype=ml_dtypes.bfloat16),
    np.array([b"a", b"\xff"], dtype=object),
    np.array([True, False]),
    np.zeros((0, 3), np.int64),
])
def test_tensors_round_trip_through_json(array):
    for value in (array, Tensor(array)):
        back = decode_json(json.loads(json.dumps(encode_json(value))))
        assert isinstance(back, Tensor) and back == Tensor(array)


def test_tuples_come_back_as_lists_and_bad_values_are_refused():
    assert decode_json(encode_json((1, (2, 3)))) == [1, [2, 3]]
    with pytest.raises(ValueError, match="mapping key '\\$bytes'"):
        encode_json({"$bytes": "x"})
    with pytest.raises(ValueError, match="cannot store a value of type set"):
        encode_json({1, 2})
