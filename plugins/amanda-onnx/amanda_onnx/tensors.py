"""``TensorProto`` <-> numpy arrays and lazy tensors, losslessly.

Reading
-------
A tensor whose data is in ``raw_data`` becomes ``numpy.frombuffer(raw_data)`` reshaped: one copy, the one
protobuf makes when it hands out ``raw_data``; the array is read-only.  Data in a typed field (``float_data``,
``int32_data`` ...) is decoded as ONNX specifies for the element type (``float16`` bit patterns in
``int32_data``, packed 4-bit pairs ...).  Data in an external file (``data_location: EXTERNAL``) becomes an
:class:`ExternalTensor`, a lazy :class:`amanda_core.ir.Tensor` whose loader memory-maps the file on first use;
the file must exist and be long enough when the model is read.

What the array cannot say goes into *extras*, a dict the importer keeps in the op's ``meta``; a key is there
only when the tensor differs from the plain form (``raw_data``, name as expected, nothing else):

==================  ==========================================================================================
``name``            the tensor's own name, when the holder does not imply it (``None``: the field is absent)
``storage``         the field that held the data: ``float_data``, ``int32_data``, ``string_data``,
                    ``int64_data``, ``double_data``, ``uint64_data``, or ``none`` (no data field: empty tensor)
``verbatim``        the data field exactly as stored, when ONNX's canonical encoding of the values would give
                    other contents (non-zero padding bits of packed 4/2/6-bit data, ``int32_data`` entries with
                    stray high bits); written back only while the value still decodes from it bit for bit
``doc_string``, ``segment``, ``metadata_props``, ``data_location``, ``external_data``   as in the proto
                    (sub-messages as plain data, see :mod:`amanda_onnx.plain`)
==================  ==========================================================================================

Writing
-------
:func:`encode_tensor` fills a ``TensorProto`` from a value and its extras.  An array that is a view of a
``bytes`` object (what reading made) hands that object to protobuf without another copy.
"""

from __future__ import annotations

__all__ = [
    "ExternalTensor",
    "TensorReader",
    "encode_tensor",
    "elem_number_of",
    "packed_bytes",
    "raw_bytes",
    "tensor_nbytes_packed",
]

import math
import os
import sys
from typing import Any, Callable

import numpy as np
import onnx

from amanda_core.errors import FormatError, Location
from amanda_core.ir import Tensor
from amanda_core.ir.tensor import FileTensor, MappedFile

from .dtypes import ELEM_TYPES, numpy_dtype
from .plain import entries_to_plain, fill_entries, message_to_plain, plain_to_message
from .wire import MAGIC, PLACEHOLDER_LEN, placeholder_index

_F = onnx.TensorProto.DESCRIPTOR.fields_by_name
F_DIMS = _F["dims"]
F_DT = _F["data_type"]
F_NAME = _F["name"]
F_RAW = _F["raw_data"]
F_DOC = _F["doc_string"]
F_SEGMENT = _F["segment"]
F_META = _F["metadata_props"]
F_LOC = _F["data_location"]
F_EXT = _F["external_data"]
_TYPED = {_F[n]: n for n in ("float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data")}

EXTERNAL = 1
_BIG_ENDIAN = sys.byteorder == "big"
_MAGIC_LEN = len(MAGIC)

# element type number -> storage field for typed data
_FIELD = {1: "float_data", 2: "int32_data", 3: "int32_data", 4: "int32_data", 5: "int32_data", 6: "int32_data",
          7: "int64_data", 8: "string_data", 9: "int32_data", 10: "int32_data", 11: "double_data",
          12: "uint64_data", 13: "uint64_data", 14: "float_data", 15: "double_data", 16: "int32_data"}
for _n in (17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28):
    _FIELD[_n] = "int32_data"

_PACK4 = frozenset({21, 22, 23})  # uint4, int4, float4e2m1: two per byte
_PACK2 = frozenset({25, 26})  # uint2, int2: four per byte
_PACK6 = frozenset({27, 28})  # float6e2m3, float6e3m2: four per three bytes
_BITS16 = frozenset({10, 16})  # float16, bfloat16: bit patterns in int32_data
_BITS8 = frozenset({17, 18, 19, 20, 24})  # float8 kinds: bit patterns in int32_data
_NARROW = frozenset({2, 3, 4, 5, 9})  # uint8, int8, uint16, int16, bool: values in int32_data
_EXACT = frozenset({1, 6, 7, 8, 11, 13, 14, 15})  # typed data that decodes and re-encodes one to one

_DTYPES: dict[int, np.dtype[Any]] = {}
_NUMBERS: dict[Any, int] = {}


def _dtype(number: int) -> np.dtype[Any]:
    dt = _DTYPES.get(number)
    if dt is None:
        dt = _DTYPES[number] = numpy_dtype(number)
    return dt


def _init_numbers() -> None:
    for e in ELEM_TYPES:
        if e.numpy == "object":
            continue
        try:
            dt = numpy_dtype(e.number)
        except ValueError:
            continue
        _NUMBERS[dt] = e.number
        _NUMBERS[dt.name] = e.number
    _NUMBERS["object"] = 8


_init_numbers()

# fast path: element types whose raw data is one numpy item per element
_FAST: dict[int, tuple[np.dtype[Any], int, str]] = {}  # number -> (dtype, item size, dtype name)
for _e in ELEM_TYPES:
    if _e.number in _PACK4 or _e.number in _PACK2 or _e.number in _PACK6 or _e.number == 8:
        continue
    try:
        _d = numpy_dtype(_e.number)
    except ValueError:
        continue
    _FAST[_e.number] = (_d, _d.itemsize, _d.name)


def plain_layout(number: int) -> int | None:
    """The item size of element type ``number`` when its raw data is one plain little-endian item per element
    (what can be viewed in place), else None."""
    if _BIG_ENDIAN:
        return None
    fast = _FAST.get(number)
    return fast[1] if fast is not None else None


def elem_number_of(value: Any) -> int:
    """The ONNX element type number of an array's or Tensor's dtype; ValueError if there is none."""
    dt = value.dtype
    n = _NUMBERS.get(dt)
    if n is not None:
        return n
    name = dt if isinstance(dt, str) else dt.name
    n = _NUMBERS.get(name)
    if n is not None:
        return n
    if not isinstance(dt, str) and dt.kind in "OSU":
        return 8
    if name in ("str", "bytes") or name.startswith(("str", "bytes", "<U", "|S")):
        return 8
    raise ValueError(f"numpy dtype {name!r} has no ONNX element type")


def tensor_nbytes_packed(number: int, count: int) -> int:
    """Bytes of ``count`` elements of type ``number`` in ``raw_data`` (packed types take less than a byte)."""
    if number in _PACK4:
        return (count + 1) // 2
    if number in _PACK2:
        return (count + 3) // 4
    if number in _PACK6:
        return -(-count * 6 // 8)
    return count * _dtype(number).itemsize


# --------------------------------------------------------------------------- packing


def _unpack4(data: np.ndarray, count: int) -> np.ndarray:
    out = np.empty(data.size * 2, dtype=np.uint8)
    out[0::2] = data & 0x0F
    out[1::2] = data >> 4
    return out[:count]


def _pack4(codes: np.ndarray) -> np.ndarray:
    flat = codes.reshape(-1).view(np.uint8) & 0x0F
    if flat.size % 2:
        flat = np.concatenate([flat, np.zeros(1, np.uint8)])
    return (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8)


def _unpack2(data: np.ndarray, count: int) -> np.ndarray:
    out = np.empty(data.size * 4, dtype=np.uint8)
    for i in range(4):
        out[i::4] = (data >> (2 * i)) & 0x03
    return out[:count]


def _pack2(codes: np.ndarray) -> np.ndarray:
    flat = codes.reshape(-1).view(np.uint8) & 0x03
    pad = -flat.size % 4
    if pad:
        flat = np.concatenate([flat, np.zeros(pad, np.uint8)])
    return (flat[0::4] | (flat[1::4] << 2) | (flat[2::4] << 4) | (flat[3::4] << 6)).astype(np.uint8)


def _unpack6(data: np.ndarray, count: int) -> np.ndarray:
    groups = -(-count // 4)
    buf = np.zeros(groups * 3, dtype=np.uint8)
    buf[: min(data.size, buf.size)] = data[: buf.size]
    b0, b1, b2 = buf[0::3], buf[1::3], buf[2::3]
    out = np.empty((groups, 4), dtype=np.uint8)
    out[:, 0] = b0 & 0x3F
    out[:, 1] = (b0 >> 6) | ((b1 & 0x0F) << 2)
    out[:, 2] = (b1 >> 4) | ((b2 & 0x03) << 4)
    out[:, 3] = b2 >> 2
    return out.reshape(-1)[:count]


def _pack6(codes: np.ndarray) -> np.ndarray:
    flat = codes.reshape(-1).view(np.uint8) & 0x3F
    n = flat.size
    pad = -n % 4
    if pad:
        flat = np.concatenate([flat, np.zeros(pad, np.uint8)])
    v0, v1, v2, v3 = flat[0::4], flat[1::4], flat[2::4], flat[3::4]
    out = np.empty((v0.size, 3), dtype=np.uint8)
    out[:, 0] = v0 | ((v1 & 0x03) << 6)
    out[:, 1] = (v1 >> 2) | ((v2 & 0x0F) << 4)
    out[:, 2] = (v2 >> 4) | (v3 << 2)
    return out.reshape(-1)[: -(-n * 6 // 8)]


def _unpack(number: int, data: np.ndarray, count: int) -> np.ndarray:
    if number in _PACK4:
        return _unpack4(data, count)
    if number in _PACK2:
        return _unpack2(data, count)
    return _unpack6(data, count)


def _pack(number: int, arr: np.ndarray) -> np.ndarray:
    if number in _PACK4:
        return _pack4(arr)
    if number in _PACK2:
        return _pack2(arr)
    return _pack6(arr)


# --------------------------------------------------------------------------- typed fields


def _decode_typed(number: int, field: str, data: Any, shape: tuple[int, ...], count: int) -> np.ndarray:
    """Values of a typed data field as an array of the element type (shape ``shape``)."""
    dt = _dtype(number) if number != 8 else np.dtype(object)
    if number == 8:
        arr = np.empty(len(data), dtype=object)
        arr[:] = list(data)
    elif number in (14, 15):
        arr = np.array(data, dtype=np.float32 if number == 14 else np.float64).view(dt)
    elif number in _BITS16:
        arr = np.array(data, dtype=np.int64).astype(np.uint16).view(dt)
    elif number in _BITS8:
        arr = np.array(data, dtype=np.int64).astype(np.uint8).view(dt)
    elif number in _PACK6 or number in _PACK4 or number in _PACK2:
        raw = np.array(data, dtype=np.int64).astype(np.uint8)
        if number in _PACK6:  # one 6-bit code per int32 entry
            arr = (raw & 0x3F).view(dt)
        else:
            arr = _unpack(number, raw, count).view(dt)
    elif field == "uint64_data":
        arr = np.array(data, dtype=np.uint64).astype(dt)
    else:
        arr = np.array(data, dtype=np.int64 if field in ("int32_data", "int64_data") else None).astype(dt)
    if arr.size != count:
        raise ValueError(f"{field} has {arr.size} values, shape {list(shape)} needs {count}")
    return arr.reshape(shape)


def _encode_typed(number: int, arr: np.ndarray) -> list[Any]:
    """ONNX's canonical typed-field contents for ``arr`` (the inverse of :func:`_decode_typed`)."""
    flat = arr.reshape(-1)
    if number == 8:
        return [x.encode("utf-8") if isinstance(x, str) else bytes(x) for x in flat]
    if number in (14, 15):
        return flat.view(np.float32 if number == 14 else np.float64).tolist()
    if number in _BITS16:
        return flat.view(np.uint16).astype(np.int32).tolist()
    if number in _BITS8 or number in _PACK6:
        return flat.view(np.uint8).astype(np.int32).tolist()
    if number in _PACK4 or number in _PACK2:
        return _pack(number, flat).astype(np.int32).tolist()
    if number == 9:
        return flat.astype(np.int32).tolist()
    return flat.tolist()


# --------------------------------------------------------------------------- external data


class ExternalTensor(FileTensor):
    """A lazy tensor whose data lives in an ONNX external data file (memory-mapped on first use).

    ``path`` is the file, ``location`` the name the model gives it, ``offset``/``length`` the byte range."""

    __slots__ = ("location",)

    def __init__(self, file: MappedFile, offset: int, length: int, *, dtype: str, shape: tuple[int, ...],
                 location: str, decode: Callable[[np.ndarray], np.ndarray] | None = None,
                 label: str = "tensor") -> None:
        super().__init__(file, offset, length, dtype=dtype, shape=shape, decode=decode, label=label)
        self.location = location


class _MappedFiles:
    """The files tensors of one model read from, each opened once (when first named) and mapped on first use."""

    def __init__(self) -> None:
        self.files: dict[str, MappedFile] = {}

    def get(self, path: str) -> MappedFile:
        f = self.files.get(path)
        if f is None:
            f = self.files[path] = MappedFile(path)
        return f


def _packed_decoder(number: int, shape: tuple[int, ...], count: int) -> Callable[[np.ndarray], np.ndarray] | None:
    if number in _PACK4 or number in _PACK2 or number in _PACK6:
        def decode(data: np.ndarray) -> np.ndarray:
            return _unpack(number, data, count).view(_dtype(number)).reshape(shape)

        return decode
    return None


# --------------------------------------------------------------------------- reading


class TensorReader:
    """Decodes the tensors of one model; ``base_dir`` is where external data files are looked up and
    ``model_file`` names the model in error messages."""

    def __init__(self, base_dir: str | None, model_file: str | None,
                 inline: tuple[MappedFile, list[tuple[int, int]]] | None = None) -> None:
        self.base_dir = base_dir
        self.model_file = model_file
        self.files = _MappedFiles()
        # the model file and the byte ranges of the raw_data a weightless parse replaced by references
        self.inline = inline

    def error(self, message: str) -> FormatError:
        return FormatError(message, Location(self.model_file) if self.model_file else None)

    def read(self, t: Any, where: str) -> tuple[Any, dict[str, Any] | None, str | None]:
        """``(value, extras, name)``: the tensor's array (or lazy tensor), its extras (None when it has
        none) and its name (None when the field is absent)."""
        dims = name = raw = d = None
        number = 0
        for fd, v in t.ListFields():
            if fd is F_RAW:
                raw = v
            elif fd is F_DIMS:
                dims = v
            elif fd is F_DT:
                number = v
            elif fd is F_NAME:
                name = v
            else:
                if d is None:
                    d = {}
                d[fd] = v
        shape = tuple(dims) if dims is not None else ()
        if d is None and raw is not None:
            fast = _FAST.get(number)
            if fast is not None:
                inline = self.inline
                if inline is not None and len(raw) == PLACEHOLDER_LEN and raw[:_MAGIC_LEN] == MAGIC:
                    index = placeholder_index(raw)
                    file, ranges = inline
                    if index < len(ranges):
                        offset, length = ranges[index]
                        label = f"{where}{f' ({name!r})' if name else ''} in {self.model_file or file.path}"
                        return FileTensor(file, offset, length, dtype=fast[2], shape=shape, label=label), None, name
                count = math.prod(shape)
                if len(raw) == count * fast[1]:
                    arr = np.frombuffer(raw, dtype=fast[0])
                    if _BIG_ENDIAN:
                        arr = arr.byteswap().view(fast[0])
                        arr.flags.writeable = False
                    if len(shape) != 1:
                        arr = arr.reshape(shape)
                    return arr, None, name
        return self._read_general(d if d is not None else {}, number, name, raw, shape, where)

    def _read_general(self, d: dict[Any, Any], number: int, name: str | None, raw: bytes | None,
                      shape: tuple[int, ...], where: str) -> tuple[Any, dict[str, Any] | None, str | None]:
        label = f"{where}{f' ({name!r})' if name else ''}"
        if not number or (number != 8 and number not in _FIELD):
            raise self.error(f"tensor {label} has {'no' if not number else 'an unknown'} element type"
                             f"{'' if not number else f' ({number})'}")
        extras: dict[str, Any] = {}
        if F_DOC in d:
            extras["doc_string"] = d.pop(F_DOC)
        if F_SEGMENT in d:
            extras["segment"] = message_to_plain(d.pop(F_SEGMENT))
        if F_META in d:
            extras["metadata_props"] = entries_to_plain(d.pop(F_META))
        location = d.pop(F_LOC, None)
        if location is not None:
            extras["data_location"] = location
        ext = d.pop(F_EXT, None)
        if ext is not None:
            extras["external_data"] = entries_to_plain(ext)
        typed = [(fd, v) for fd, v in d.items() if fd in _TYPED]
        for fd in d:
            if fd not in _TYPED:  # a field this onnx knows but this reader does not handle
                raise self.error(f"tensor {label}: unsupported field {fd.name!r}")
        count = math.prod(shape)
        if location == EXTERNAL:
            if raw is not None or typed:
                raise self.error(f"tensor {label} is stored externally but also holds data in the model")
            return self._external(extras, number, shape, count, label), extras, name
        try:
            if raw is not None:
                if typed:
                    raise ValueError(f"it has both raw_data and {typed[0][0].name}")
                value = self._from_raw(number, raw, shape, count, extras)
            elif typed:
                if len(typed) > 1:
                    raise ValueError(f"it has data in both {typed[0][0].name} and {typed[1][0].name}")
                fd, data = typed[0]
                field = _TYPED[fd]
                if field != _FIELD[number]:
                    raise ValueError(f"its element type keeps values in {_FIELD[number]}, not {field}")
                if field != _default_storage(number):
                    extras["storage"] = field
                value = _decode_typed(number, field, data, shape, count)
                if number not in _EXACT:
                    original = list(data)
                    if _encode_typed(number, value) != original:
                        extras["verbatim"] = original
                value.flags.writeable = False
            else:
                if count:
                    raise ValueError(f"it has no data for {count} element(s)")
                extras["storage"] = "none"
                value = np.zeros(shape, dtype=_dtype(number) if number != 8 else object)
                value.flags.writeable = False
        except ValueError as e:
            raise self.error(f"tensor {label}: {e}") from None
        return value, extras or None, name

    def _from_raw(self, number: int, raw: bytes, shape: tuple[int, ...], count: int,
                  extras: dict[str, Any]) -> np.ndarray:
        if number == 8:
            raise ValueError("string tensors cannot use raw_data")
        expected = tensor_nbytes_packed(number, count)
        if len(raw) != expected:
            raise ValueError(f"raw_data has {len(raw)} bytes, shape {list(shape)} needs {expected}")
        dt = _dtype(number)
        if number in _PACK4 or number in _PACK2 or number in _PACK6:
            value = _unpack(number, np.frombuffer(raw, dtype=np.uint8), count).view(dt).reshape(shape)
            if _pack(number, value).tobytes() != raw:
                extras["verbatim"] = raw
            value.flags.writeable = False
            return value
        arr = np.frombuffer(raw, dtype=dt)
        if _BIG_ENDIAN:
            arr = arr.byteswap().view(dt)
            arr.flags.writeable = False
        return arr.reshape(shape)

    def _external(self, extras: dict[str, Any], number: int, shape: tuple[int, ...], count: int,
                  label: str) -> ExternalTensor:
        info = {e.get("key"): e.get("value") for e in extras.get("external_data", [])}
        location = info.get("location")
        if not location:
            raise self.error(f"tensor {label} is stored externally but names no location")
        if self.base_dir is None:
            raise self.error(f"tensor {label} is stored in the external file {location!r}; the model was not read "
                             "from a file, so pass base_dir= to say where that file is")
        if os.path.isabs(location) or ".." in location.replace("\\", "/").split("/"):
            raise self.error(f"tensor {label}: external data location {location!r} must be a relative path "
                             "inside the model's directory")
        path = os.path.join(self.base_dir, location)
        try:
            offset = int(info.get("offset") or 0)
            length = int(info["length"]) if info.get("length") else tensor_nbytes_packed(number, count)
        except ValueError:
            raise self.error(f"tensor {label}: malformed external data offset/length {info}") from None
        needed = tensor_nbytes_packed(number, count)
        if length != needed:
            raise self.error(f"tensor {label}: external data length {length} does not match its shape "
                             f"{list(shape)} ({needed} bytes)")
        try:
            file = self.files.get(path)
        except OSError as e:
            what = "not found" if isinstance(e, FileNotFoundError) else f"cannot be read ({e.strerror or e})"
            raise self.error(f"tensor {label}: external data file {path} {what}") from None
        size = file.size()
        if offset < 0 or offset + length > size:
            raise self.error(f"tensor {label}: external data file {path} has {size} bytes, the tensor needs "
                             f"bytes {offset} to {offset + length}")
        return ExternalTensor(file, offset, length, dtype=_dtype(number).name, shape=shape, location=location,
                              decode=_packed_decoder(number, shape, count),
                              label=f"tensor {label} (external data file {path})")


# --------------------------------------------------------------------------- writing


def raw_bytes(arr: np.ndarray) -> bytes:
    """The little-endian bytes of ``arr``; no copy when ``arr`` views a whole ``bytes`` object."""
    base = arr.base
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, bytes) and len(base) == arr.nbytes and arr.flags.c_contiguous and not _BIG_ENDIAN:
        return base
    if arr.dtype.byteorder == ">" or (_BIG_ENDIAN and arr.dtype.byteorder == "="):
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return arr.tobytes()


def packed_bytes(number: int, arr: np.ndarray) -> bytes:
    """The ``raw_data`` bytes of ``arr`` as element type ``number`` (sub-byte types packed)."""
    if number in _FAST:
        return raw_bytes(arr)
    return _pack(number, arr).tobytes()


def plain_tensor_fields(arr: np.ndarray) -> tuple[int, bytes] | None:
    """``(data_type, raw_data)`` of an array whose element type ONNX stores as plain little-endian bytes; None
    for any other (strings, sub-byte and ml_dtypes types take the general path of :func:`encode_tensor`)."""
    number = _NUMBERS.get(arr.dtype)
    if number is None or number not in _FAST:
        return None
    return number, raw_bytes(arr)


_HEADER_EXTRAS = frozenset({"doc_string", "segment", "metadata_props", "data_location", "external_data"})


def streamable_bytes(value: Any, extras: dict[str, Any] | None) -> int | None:
    """The number of raw bytes of ``value`` when they can be written as they are (plain little-endian items,
    or a file tensor's stored bytes) with the extras it has; None when the tensor needs the general encoding
    (strings, packed types held as arrays, typed storage, verbatim data)."""
    if extras is not None and not extras.keys() <= _HEADER_EXTRAS:
        return None
    if extras is not None and extras.get("data_location") not in (None, EXTERNAL):
        return None
    if isinstance(value, FileTensor):
        number = _NUMBERS.get(value.dtype)
        if number is None or number == 8:
            return None
        count = math.prod(value.shape)
        return value.length if value.length == tensor_nbytes_packed(number, count) else None
    if isinstance(value, np.ndarray):
        number = _NUMBERS.get(value.dtype)
        if number is None or number not in _FAST:
            return None
        return int(value.nbytes)
    return None


def encode_tensor_header(tp: Any, value: Any, extras: dict[str, Any] | None) -> int:
    """Fill ``tp``'s dims, data type, doc string, segment and metadata (everything but the data and where it
    is); returns the element type number.  For values :func:`streamable_bytes` accepts."""
    number = _NUMBERS[value.dtype]
    if value.shape:
        tp.dims.extend(value.shape)
    tp.data_type = number
    if extras:
        if "doc_string" in extras:
            tp.doc_string = extras["doc_string"]
        if "segment" in extras:
            plain_to_message(extras["segment"], tp.segment)
        if "metadata_props" in extras:
            fill_entries(tp.metadata_props, extras["metadata_props"])
    return number


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "O":
        return bool(np.array_equal(a, b))
    return a.tobytes() == b.tobytes()


def encode_tensor(tp: Any, value: Any, extras: dict[str, Any] | None, where: str,
                  keep_external: bool = True) -> np.ndarray | None:
    """Fill ``tp`` (dims, data type, data and the fields in ``extras``; not the name) from ``value``.

    Returns the array whose bytes must go to an external file when the extras say the tensor is external and it
    cannot keep its original reference (the caller lays out the file); None otherwise.  ``keep_external``:
    an :class:`ExternalTensor` still read from the file its extras name is written as that same reference."""
    if isinstance(value, Tensor):
        number = _NUMBERS.get(value.dtype)
        if number is None:
            number = elem_number_of(value.numpy())
        shape = value.shape
    elif isinstance(value, np.ndarray):
        number = _NUMBERS.get(value.dtype)
        if number is None:
            try:
                number = elem_number_of(value)
            except ValueError as e:
                raise ValueError(f"{where}: {e}") from None
        shape = value.shape
    else:
        raise ValueError(f"{where}: a tensor value must be a numpy array or amanda_core Tensor, "
                         f"got {type(value).__name__}")
    if shape:
        tp.dims.extend(shape)
    tp.data_type = number
    if extras is None:
        arr = value.numpy() if isinstance(value, Tensor) else value
        if number in _FAST:
            tp.raw_data = raw_bytes(arr)
        elif number == 8:
            tp.string_data.extend(_encode_typed(8, arr))
        else:
            tp.raw_data = _pack(number, arr).tobytes()
        return None
    if "doc_string" in extras:
        tp.doc_string = extras["doc_string"]
    if "segment" in extras:
        plain_to_message(extras["segment"], tp.segment)
    if "metadata_props" in extras:
        fill_entries(tp.metadata_props, extras["metadata_props"])
    if extras.get("data_location") == EXTERNAL:
        entries = extras.get("external_data", [])
        if keep_external and isinstance(value, ExternalTensor) and _refers_to(value, entries):
            fill_entries(tp.external_data, entries)
            tp.data_location = EXTERNAL
            return None
        return value.numpy() if isinstance(value, Tensor) else value
    if "data_location" in extras:
        tp.data_location = extras["data_location"]
    arr = value.numpy() if isinstance(value, Tensor) else value
    storage = extras.get("storage") or _default_storage(number)
    verbatim = extras.get("verbatim")
    if storage == "none":
        if arr.size:
            storage = "raw_data" if number != 8 else "string_data"
        else:
            return None
    if storage == "raw_data" and number != 8:
        if verbatim is not None and isinstance(verbatim, bytes) and _decodes_to(number, "raw", verbatim, arr):
            tp.raw_data = verbatim
        elif number in _FAST:
            tp.raw_data = raw_bytes(arr)
        else:
            tp.raw_data = _pack(number, arr).tobytes()
        return None
    field = _FIELD[number]
    if verbatim is not None and isinstance(verbatim, list) and _decodes_to(number, field, verbatim, arr):
        getattr(tp, field).extend(verbatim)
    else:
        getattr(tp, field).extend(_encode_typed(number, arr))
    return None


def _default_storage(number: int) -> str:
    return "string_data" if number == 8 else "raw_data"


def _refers_to(value: ExternalTensor, entries: list[dict[str, Any]]) -> bool:
    info = {e.get("key"): e.get("value") for e in entries}
    try:
        return info.get("location") == value.location and int(info.get("offset") or 0) == value.offset
    except ValueError:
        return False


def _decodes_to(number: int, field: str, verbatim: Any, arr: np.ndarray) -> bool:
    count = arr.size
    try:
        if field == "raw":
            back = _unpack(number, np.frombuffer(verbatim, dtype=np.uint8), count).view(_dtype(number))
        else:
            back = _decode_typed(number, field, verbatim, (count,), count)
    except (ValueError, TypeError):
        return False
    return _same_bits(back.reshape(arr.shape), arr)
