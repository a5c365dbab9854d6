"""TensorFlow attribute values as Amanda holds them.

=================  ======================================================  ==========================
OpDef attr type    Python value                                            example
=================  ======================================================  ==========================
``string``         ``str`` (``bytes`` when not valid UTF-8)                ``"SAME"``
``int``            ``int``                                                 ``3``
``float``          ``float`` (the shortest decimal that reads back as      ``0.0001``
                   the same float32)
``bool``           ``bool``                                                ``False``
``type``           dtype name                                              ``"float32"``
``shape``          list of ints, -1 for an unknown dimension; ``None``     ``[1, 784]``, ``[-1, 3]``
                   for an unknown rank
``tensor``         :class:`amanda_core.ir.Tensor` (or a numpy array)       ``Tensor(uint8, [4])``
``func``           ``{"name": str, "attr": {...}}`` or a function name     ``{"name": "f", "attr": {}}``
``list(X)``        list of the values above                                ``[1, 2, 2, 1]``
=================  ======================================================  ==========================

:func:`decode_attr_value` turns an ``AttrValue`` protocol buffer into such a
value.  It reads the message through its fields only, so this module never
imports TensorFlow; decoding a ``tensor`` value uses TensorFlow's own
``MakeNdarray`` (TensorFlow is necessarily loaded when its protocol buffers
are).  :func:`encode_json` / :func:`decode_json` store these values in JSON
(for the schema cache) without loss: bytes and tensors are tagged objects
``{"$bytes": base64}`` and ``{"$tensor": {...}}``.
"""

from __future__ import annotations

__all__ = ["decode_attr_value", "decode_float", "decode_shape", "decode_string", "decode_json", "encode_json"]

import base64
from typing import Any

import numpy as np

from amanda_core.ir.tensor import Tensor, as_array, is_tensor, resolve_dtype

from .dtypes import dtype_from_enum

# ListValue field that holds the items of each list(...) attr type.
_LIST_FIELD = {"string": "s", "int": "i", "float": "f", "bool": "b", "type": "type", "shape": "shape",
               "tensor": "tensor", "func": "func"}


def decode_string(raw: bytes) -> str | bytes:
    """A ``string`` attr value: text when it is UTF-8, else the bytes themselves."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return bytes(raw)


def decode_float(value: float) -> float:
    """The shortest decimal that reads back as the same float32 (AttrValue floats are float32):
    ``9.999999747378752e-05`` -> ``0.0001``."""
    return float(str(np.float32(value)))


def decode_shape(shape: Any) -> list[int] | None:
    """A ``TensorShapeProto``: None for an unknown rank, else the sizes (-1 unknown)."""
    if shape.unknown_rank:
        return None
    return [int(d.size) for d in shape.dim]


def decode_tensor(proto: Any) -> Tensor:
    """A ``TensorProto`` as a :class:`~amanda_core.ir.Tensor` (quantized types as their storage type)."""
    from tensorflow.python.framework import tensor_util  # TensorFlow is loaded: `proto` is its message

    array = tensor_util.MakeNdarray(proto)
    if array.dtype.fields:  # qint8 & co. come as one-field records
        (storage, _), = array.dtype.fields.values()
        array = array.view(storage)
    return Tensor(array)


def _decode_func(func: Any) -> dict[str, Any]:
    return {"name": func.name, "attr": {k: decode_attr_value(func.attr[k]) for k in sorted(func.attr)}}


def _decode_item(kind: str, item: Any) -> Any:
    if kind == "s":
        return decode_string(item)
    if kind == "i":
        return int(item)
    if kind == "f":
        return decode_float(item)
    if kind == "b":
        return bool(item)
    if kind == "type":
        return dtype_from_enum(int(item))
    if kind == "shape":
        return decode_shape(item)
    if kind == "tensor":
        return decode_tensor(item)
    if kind == "func":
        return _decode_func(item)
    raise ValueError(f"unknown AttrValue field {kind!r}")


def decode_attr_value(value: Any, attr_type: str | None = None) -> Any:
    """An ``AttrValue`` message as a Python value (table above).

    ``attr_type`` (the OpDef type, ``list(int)``) picks the kind of an empty
    list; without it an empty list is ``[]`` all the same.  An unset
    AttrValue is None; a ``placeholder`` (inside function bodies) is
    ``{"placeholder": name}``.
    """
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "list":
        lv = value.list
        if attr_type and attr_type.startswith("list(") and attr_type[5:-1] in _LIST_FIELD:
            field = _LIST_FIELD[attr_type[5:-1]]
            return [_decode_item(field, x) for x in getattr(lv, field)]
        for descriptor, items in lv.ListFields():
            return [_decode_item(descriptor.name, x) for x in items]
        return []
    if kind == "placeholder":
        return {"placeholder": value.placeholder}
    return _decode_item(kind, getattr(value, kind))


# --------------------------------------------------------------------------- JSON form


def encode_json(value: Any) -> Any:
    """``value`` as plain JSON data; :func:`decode_json` gives it back (lists for tuples)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, bytes):
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    if is_tensor(value):
        array = as_array(value)
        name = value.dtype if isinstance(value, Tensor) else array.dtype.name
        body: dict[str, Any] = {"dtype": name, "shape": list(array.shape)}
        if array.dtype.kind == "O":
            body["items"] = [encode_json(x) for x in array.reshape(-1).tolist()]
        else:
            body["data"] = base64.b64encode(np.ascontiguousarray(array).tobytes()).decode("ascii")
        return {"$tensor": body}
    if isinstance(value, (list, tuple)):
        return [encode_json(v) for v in value]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str) or k.startswith("$"):
                raise ValueError(f"cannot store a mapping key {k!r} (keys are strings not starting with '$')")
            out[k] = encode_json(v)
        return out
    raise ValueError(f"cannot store a value of type {type(value).__name__} in JSON: {value!r}")


def decode_json(data: Any) -> Any:
    """The value :func:`encode_json` stored."""
    if isinstance(data, list):
        return [decode_json(v) for v in data]
    if isinstance(data, dict):
        if len(data) == 1 and "$bytes" in data:
            return base64.b64decode(data["$bytes"])
        if len(data) == 1 and "$tensor" in data:
            t = data["$tensor"]
            shape = tuple(t["shape"])
            if "items" in t:
                array = np.empty(len(t["items"]), dtype=object)
                array[:] = [decode_json(x) for x in t["items"]]
                return Tensor(array.reshape(shape))
            array = np.frombuffer(base64.b64decode(t["data"]), dtype=resolve_dtype(t["dtype"])).reshape(shape)
            return Tensor(array.copy())
        return {k: decode_json(v) for k, v in data.items()}
    return data
