"""The protobuf wire format of ONNX models, read and rewritten without parsing tensor data.

A model's weights are the ``raw_data`` fields of its ``TensorProto`` messages.  Handing the whole file to
protobuf copies every one of them into memory.  :func:`rewrite` walks the messages that can hold tensors
(model -> graph -> initializer, node -> attribute -> tensor, subgraphs) straight from the file's bytes and lets a
callback replace each ``raw_data`` field; the enclosing messages' length prefixes are re-encoded.  The importer
uses it to parse a *weightless* copy of the model (each large ``raw_data`` replaced by a short reference to its
byte range in the file, which stays memory-mapped); the exporter uses it the other way round, to write a model
serialized with such references as the full file, streaming each tensor's bytes into place.

Only length-delimited fields on the path to a tensor are decoded (and only those long enough, or holding a
reference, to matter); every other byte is copied as it is, so the result is the same message.
"""

from __future__ import annotations

__all__ = ["PLACEHOLDER_LEN", "Piece", "is_placeholder", "placeholder", "placeholder_index", "rewrite",
           "encode_varint"]

import struct
from typing import Any, Callable, Union

MAGIC = b"\x00amanda-tensor-ref\x00"
PLACEHOLDER_LEN = len(MAGIC) + 8
_MAGIC_LEN = len(MAGIC)
_INDEX = struct.Struct("<Q")


def placeholder(index: int) -> bytes:
    """The bytes standing for tensor number ``index`` in a weightless message."""
    return MAGIC + _INDEX.pack(index)


def is_placeholder(raw: Any) -> bool:
    return len(raw) == PLACEHOLDER_LEN and raw[:_MAGIC_LEN] == MAGIC


def placeholder_index(raw: Any) -> int:
    return int(_INDEX.unpack(raw[_MAGIC_LEN:])[0])


# message kinds on the way to a tensor: {field number: kind of the sub-message}
_MODEL, _GRAPH, _NODE, _ATTR, _TENSOR, _FUNC, _TRAIN, _SPARSE = range(8)
_CHILDREN: dict[int, dict[int, int]] = {
    _MODEL: {7: _GRAPH, 20: _TRAIN, 25: _FUNC},
    _GRAPH: {1: _NODE, 5: _TENSOR, 15: _SPARSE},
    _NODE: {5: _ATTR},
    _ATTR: {5: _TENSOR, 6: _GRAPH, 10: _TENSOR, 11: _GRAPH, 22: _SPARSE, 23: _SPARSE},
    _FUNC: {7: _NODE, 11: _ATTR},
    _TRAIN: {1: _GRAPH, 2: _GRAPH},
    _SPARSE: {1: _TENSOR},
}
RAW_DATA = 9
_RAW_TAG = bytes((RAW_DATA << 3 | 2,))

Piece = Union[bytes, memoryview, Any]
"""A part of the rewritten message: bytes, or whatever a tensor callback puts in place of a ``raw_data`` value
(the caller knows its length)."""


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message."""


_ONE_BYTE = [bytes((i,)) for i in range(0x80)]


def encode_varint(n: int) -> bytes:
    if 0 <= n < 0x80:
        return _ONE_BYTE[n]
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _varint(buf: Any, pos: int, end: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise WireError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise WireError("varint too long")


def _skip(buf: Any, wire: int, pos: int, end: int) -> int:
    if wire == 0:
        return _varint(buf, pos, end)[1]
    if wire == 1:
        return pos + 8
    if wire == 5:
        return pos + 4
    if wire == 2:
        n, pos = _varint(buf, pos, end)
        return pos + n
    raise WireError(f"unsupported wire type {wire}")


class TensorInfo:
    """What a tensor callback learns of one ``TensorProto``: its fields' numbers, element type, dims and the
    byte range of its ``raw_data`` value (``None`` when it has none)."""

    __slots__ = ("fields", "data_type", "dims", "raw")

    def __init__(self) -> None:
        self.fields: set[int] = set()
        self.data_type = 0
        self.dims: list[int] = []
        self.raw: tuple[int, int, int] | None = None  # (tag start, value start, value length)


TensorCallback = Callable[[Any, TensorInfo], "tuple[list[Piece], int] | None"]
"""``(buf, info) -> (pieces, length)`` standing for the ``raw_data`` *value* (the tag and length prefix are
written by :func:`rewrite`), or None to keep the field as it is."""


def _tensor(buf: Any, start: int, end: int) -> TensorInfo:
    info = TensorInfo()
    fields = info.fields
    dims = info.dims
    pos = start
    while pos < end:
        field_start = pos
        key = buf[pos]
        if key < 0x80:  # (a one-byte varint, as every TensorProto field key is)
            pos += 1
        else:
            key, pos = _varint(buf, pos, end)
        field, wire = key >> 3, key & 7
        fields.add(field)
        if wire == 2:
            if pos < end and buf[pos] < 0x80:
                n = buf[pos]
                pos += 1
            else:
                n, pos = _varint(buf, pos, end)
            if field == RAW_DATA:
                info.raw = (field_start, pos, n)
                pos += n
            elif field == 1:
                stop = pos + n
                while pos < stop:
                    d = buf[pos]
                    if d < 0x80:
                        pos += 1
                    else:
                        d, pos = _varint(buf, pos, stop)
                    dims.append(d)
            else:
                pos += n
        elif wire == 0:
            if pos < end and buf[pos] < 0x80:
                value = buf[pos]
                pos += 1
            else:
                value, pos = _varint(buf, pos, end)
            if field == 2:
                info.data_type = value
            elif field == 1:
                dims.append(value)
        else:
            pos = _skip(buf, wire, pos, end)
        if pos > end:
            raise WireError("a field runs past the end of its message")
    return info


def rewrite(buf: Any, on_tensor: TensorCallback, descend: Callable[[int, int], bool]) -> tuple[list[Piece], int]:
    """The pieces of the ``ModelProto`` in ``buf`` with ``raw_data`` values replaced as ``on_tensor`` says, and
    their total length.  ``descend(start, end)`` tells whether a sub-message on the way to tensors can hold one
    that matters (the importer: it is long enough; the exporter: it holds a reference)."""
    changed, pieces, length = _message(buf, 0, len(buf), _MODEL, on_tensor, descend)
    if not changed:
        return [buf], len(buf)
    return pieces, length


def _message(buf: Any, start: int, end: int, kind: int, on_tensor: TensorCallback,
             descend: Callable[[int, int], bool]) -> tuple[bool, list[Piece], int]:
    """``(changed, pieces, length)`` of one message's contents."""
    if kind == _TENSOR:
        info = _tensor(buf, start, end)
        if info.raw is None:
            return False, [], 0
        replaced = on_tensor(buf, info)
        if replaced is None:
            return False, [], 0
        value, n = replaced
        tag_start, raw_start, raw_len = info.raw
        head = _RAW_TAG + encode_varint(n)
        pieces: list[Piece] = [buf[start:tag_start], head, *value, buf[raw_start + raw_len:end]]
        return True, pieces, (tag_start - start) + len(head) + n + (end - raw_start - raw_len)
    children = _CHILDREN[kind]
    pieces = []
    length = 0
    changed = False
    copied = start  # bytes from here to the current field are copied unchanged
    pos = start
    while pos < end:
        field_start = pos
        key = buf[pos]
        if key < 0x80:  # (one-byte varints, the common case, are read here rather than by _varint)
            pos += 1
        else:
            key, pos = _varint(buf, pos, end)
        if key & 7 != 2:
            pos = _skip(buf, key & 7, pos, end)
            if pos > end:
                raise WireError("a field runs past the end of its message")
            continue
        if pos + 1 < end and buf[pos + 1] < 0x80:  # a length of one or two bytes
            n = buf[pos]
            if n < 0x80:
                value_start = pos + 1
            else:
                n = (n & 0x7F) | buf[pos + 1] << 7
                value_start = pos + 2
        else:
            n, value_start = _varint(buf, pos, end)
        value_end = value_start + n
        sub = children.get(key >> 3)
        if sub is None:
            if value_end > end:
                raise WireError("a field runs past the end of its message")
            pos = value_end
            continue
        if value_end > end:
            raise WireError("a field runs past the end of its message")
        pos = value_end
        if not descend(value_start, value_end):
            continue
        sub_changed, sub_pieces, sub_len = _message(buf, value_start, value_end, sub, on_tensor, descend)
        if not sub_changed:
            continue
        changed = True
        if field_start > copied:
            pieces.append(buf[copied:field_start])
            length += field_start - copied
        head = encode_varint(key) + encode_varint(sub_len)
        pieces.append(head)
        pieces.extend(sub_pieces)
        length += len(head) + sub_len
        copied = value_end
    if not changed:
        return False, [], 0
    if end > copied:
        pieces.append(buf[copied:end])
        length += end - copied
    return True, pieces, length
