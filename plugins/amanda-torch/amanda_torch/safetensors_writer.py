"""A ``.safetensors`` file written tensor by tensor, never holding the weights in memory.

``safetensors.torch.save`` builds the whole file as one ``bytes`` object from a dict of torch tensors: the
weights twice over (the tensors, the blob), and a copy of every read-only array (a memory-mapped weight file)
to make it a torch tensor first.  The format does not need that.  A file is an 8-byte little-endian header size,
a JSON header (``{"__metadata__": {...}, name: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}}``,
offsets relative to the end of the header, padded with spaces to a multiple of 8 bytes), then the tensors' raw
little-endian bytes back to back.  Everything in the header follows from each tensor's element type and shape,
so :func:`write_safetensors` writes the header first and then streams each tensor's bytes: by the OS's file copy
for a tensor still in the file it was read from (:class:`amanda_core.ir.tensor.FileTensor`: an ONNX model's
weights), in chunks of its memory for an array or a torch tensor.  No tensor is converted to torch.
"""

from __future__ import annotations

__all__ = ["write_safetensors", "SAFETENSORS_DTYPES"]

import json
import struct
import sys
from typing import IO, Any, Iterable, Mapping

import numpy as np

from amanda_core.errors import AmandaError
from amanda_core.ir.tensor import FileTensor, Tensor, resolve_dtype

SAFETENSORS_DTYPES = {
    "float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16",
    "int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8",
    "uint64": "U64", "uint32": "U32", "uint16": "U16", "uint8": "U8", "bool": "BOOL",
    "float8_e4m3fn": "F8_E4M3", "float8_e4m3fnuz": "F8_E4M3FNUZ", "float8_e5m2": "F8_E5M2",
    "float8_e5m2fnuz": "F8_E5M2FNUZ", "complex64": "C64",
}
"""numpy (and ``ml_dtypes``) element type names -> the safetensors dtype codes ``safetensors.torch`` reads."""

_CHUNK = 16 * 2**20
_WRITEBACK_EVERY = 64 * 2**20


class _Entry:
    __slots__ = ("name", "value", "dtype", "shape", "nbytes", "from_file")

    def __init__(self, name: str, value: Any) -> None:
        self.name = name
        if not isinstance(value, (np.ndarray, Tensor)):
            value = _torch_to_numpy(value, name)
        dtype_name = value.dtype if isinstance(value, Tensor) else value.dtype.name
        code = SAFETENSORS_DTYPES.get(dtype_name)
        if code is None:
            raise AmandaError(f"tensor {name!r}: safetensors has no element type for {dtype_name}")
        self.dtype = code
        self.shape = [int(d) for d in value.shape]
        itemsize = resolve_dtype(dtype_name).itemsize if isinstance(value, Tensor) else value.dtype.itemsize
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * itemsize
        # a tensor still in its file, one little-endian item per element: copied by the OS, never read here
        self.from_file = (isinstance(value, FileTensor) and value.length == self.nbytes
                          and (itemsize == 1 or (resolve_dtype(dtype_name).byteorder != ">"
                                                 and sys.byteorder == "little")))
        self.value = value


def _torch_to_numpy(value: Any, name: str) -> np.ndarray:
    if type(value).__module__.startswith("torch"):
        from .tensors import to_numpy

        return to_numpy(value)
    try:
        return np.asarray(value)
    except Exception as e:  # noqa: BLE001 - anything numpy cannot take is not a tensor here
        raise AmandaError(f"tensor {name!r}: {type(value).__name__} is not a tensor") from e


def _header(entries: list[_Entry], metadata: Mapping[str, str] | None) -> bytes:
    head: dict[str, Any] = {}
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise AmandaError(f"safetensors metadata must map strings to strings, got {k!r}: {v!r}")
        head["__metadata__"] = dict(metadata)
    pos = 0
    for e in entries:
        if e.name in head:
            raise AmandaError(f"tensor {e.name!r} is written twice")
        head[e.name] = {"dtype": e.dtype, "shape": e.shape, "data_offsets": [pos, pos + e.nbytes]}
        pos += e.nbytes
    text = json.dumps(head, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text


def _write_array(f: IO[bytes], arr: np.ndarray, nbytes: int, name: str) -> None:
    if arr.dtype.byteorder == ">" or (sys.byteorder == "big" and arr.dtype.itemsize > 1):
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)  # one tensor's copy at most
    flat = arr.reshape(-1).view(np.uint8)
    if flat.size != nbytes:
        raise AmandaError(f"tensor {name!r}: {flat.size} bytes of data for {nbytes} expected")
    for pos in range(0, nbytes, _CHUNK):
        f.write(memoryview(flat[pos:pos + _CHUNK]))


def write_safetensors(f: IO[bytes], tensors: Iterable[tuple[str, Any]],
                      metadata: Mapping[str, str] | None = None) -> int:
    """Write a safetensors file to the binary file ``f`` (at its start; an :func:`atomic_write` file, say) from
    ``(name, tensor)`` pairs in that order: numpy arrays, :class:`amanda_core.ir.Tensor`\\ s (lazy ones are read
    only as far as needed: a :class:`FileTensor` not at all) or torch tensors.  Returns the bytes written.  Raises
    a one-line AmandaError naming the tensor for an element type safetensors lacks, a name given twice, or a file
    tensor whose file has become shorter."""
    from amanda_core.serialization.files import start_writeback

    entries = [_Entry(name, value) for name, value in tensors]
    head = _header(entries, metadata)
    f.write(head)
    total = len(head)
    unsynced = 0
    for e in entries:
        if e.from_file:
            e.value.copy_to(f)
        else:
            arr = e.value.numpy() if isinstance(e.value, Tensor) else e.value
            _write_array(f, arr, e.nbytes, e.name)
        total += e.nbytes
        unsynced += e.nbytes
        if unsynced >= _WRITEBACK_EVERY:  # the atomic write's fsync then overlaps the writing
            start_writeback(f)
            unsynced = 0
    return total
