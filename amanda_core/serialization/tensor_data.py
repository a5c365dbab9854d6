"""The tensor data of graph files: ``!tensor`` values inline (``data`` or ``base64``) and the sidecar file beside
the YAML file (raw little-endian C-order bytes, each tensor 64-byte aligned, mapped into memory and read lazily,
never pickle)."""

from __future__ import annotations

import base64
import mmap
import os
from typing import Any, Callable

import numpy as np

from ..errors import FormatError
from ..ir.tensor import Tensor, resolve_dtype
from .value_tags import Flow

__all__ = ["INLINE_LIMIT", "Sidecar", "inline_tensor", "read_tensor", "sidecar_path", "write_chunks"]

INLINE_LIMIT = 64
"""Tensors of at most this many bytes are written inline; larger ones go to the sidecar file."""

ALIGN = 64
NAN = float("nan")


class Sidecar:
    """The tensor data file beside a YAML file, mapped into memory once."""

    def __init__(self, path: str, err: FormatError) -> None:
        self.path = path
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                self.map: mmap.mmap | None = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        except OSError as e:
            raise FormatError(f"{err.reason}: cannot open {path}: {e.strerror}", err.location) from None
        self.size = size
        self.tensors: dict[tuple[int, str, tuple[int, ...]], Tensor] = {}

    def check(self, offset: int, nbytes: int, err: FormatError) -> None:
        if offset + nbytes > self.size:
            raise err

    def loader(self, offset: int, dtype: np.dtype[Any], shape: list[int]) -> Callable[[], np.ndarray]:
        def load() -> np.ndarray:
            count = int(np.prod(shape, dtype=np.int64))
            if count == 0 or self.map is None:
                return np.zeros(shape, dtype=dtype)
            arr = np.frombuffer(self.map, dtype=dtype.newbyteorder("<"), count=count, offset=offset)
            if arr.dtype != dtype:  # a big-endian machine: convert once
                arr = arr.astype(dtype)
            return arr.reshape(shape)

        return load


def dtype_of(name: str) -> np.dtype[Any]:
    if name in ("object", "str", "bytes"):
        return np.dtype(object)
    return resolve_dtype(name)


def array_from_list(data: list[Any], dtype: np.dtype[Any]) -> np.ndarray:
    if dtype.kind == "O":
        arr = np.empty(len(data), dtype=object)
        for i, x in enumerate(data):
            if not isinstance(x, (bytes, str)):
                raise ValueError(f"element {i} of an object tensor must be bytes or str, got {type(x).__name__}")
            arr[i] = x
        return arr
    if dtype.kind == "f" or dtype.name in FLOATISH:
        return np.array([float_of(x) for x in data], dtype=np.float64).astype(dtype)
    return np.array(data, dtype=dtype)


FLOATISH = {"bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
             "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn", "float8_e4m3b11fnuz", "float8_e3m4", "float8_e4m3"}


def float_of(x: Any) -> Any:
    if isinstance(x, str):  # YAML writes .nan / .inf, but accept the spellings numpy prints too
        x = float(x.replace(".inf", "inf").replace(".nan", "nan"))
    if x != x:  # PyYAML reads .nan as a NaN with the sign bit set; use the canonical quiet NaN
        return NAN
    return x


def dtype_text(dtype: np.dtype[Any]) -> str:
    if dtype.kind in "SU":
        return str(dtype.str)
    return "object" if dtype.kind == "O" else str(dtype.name)


def sidecar_path(path: str | os.PathLike[str]) -> str:
    """The tensor data file written beside a YAML file: ``model.yaml`` -> ``model.tensors``."""
    p = os.fspath(path)
    root, ext = os.path.splitext(p)
    return (root if ext.lower() in (".yaml", ".yml") else p) + ".tensors"


def read_tensor(spec: Any, sidecar: Sidecar | None, fail: Callable[[str], FormatError]) -> Any:
    """The value of a ``!tensor`` mapping: an array (inline ``data`` or ``base64``) or a lazy :class:`Tensor` over
    the sidecar file (``offset``); ``fail(message)`` makes the error to raise, with the caller's location."""
    if not isinstance(spec, dict) or "dtype" not in spec or "shape" not in spec:
        raise fail("!tensor needs 'dtype' and 'shape'")
    extra = set(spec) - {"dtype", "shape", "data", "base64", "offset"}
    if extra:
        raise fail(f"!tensor has unknown keys {sorted(extra)}")
    shape = spec["shape"]
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise fail(f"!tensor shape must be a list of non-negative ints, got {shape!r}")
    dtype_name = str(spec["dtype"])
    try:
        dtype = dtype_of(dtype_name)
    except TypeError as e:
        raise fail(str(e)) from None
    count = int(np.prod(shape, dtype=np.int64))
    if "offset" in spec:
        if sidecar is None:
            raise fail("!tensor refers to the tensor data file but the graph names none ('tensor_data')")
        offset = spec["offset"]
        if not isinstance(offset, int) or offset < 0:
            raise fail(f"!tensor offset must be a non-negative int, got {offset!r}")
        nbytes = count * dtype.itemsize
        sidecar.check(offset, nbytes, fail(
            f"!tensor at offset {offset} ({nbytes} bytes) lies beyond the end of the tensor data file"))
        key = (offset, dtype_name, tuple(shape))
        shared = sidecar.tensors.get(key)  # one object per stored tensor keeps sharing as it was
        if shared is None:
            shared = Tensor(dtype=dtype_name, shape=tuple(shape), loader=sidecar.loader(offset, dtype, shape))
            sidecar.tensors[key] = shared
        return shared
    try:
        if "base64" in spec:
            raw = base64.b64decode(spec["base64"], validate=True)
            if len(raw) != count * dtype.itemsize:
                raise ValueError(f"{len(raw)} bytes for {count} elements of {dtype_name}")
            arr = np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(dtype, copy=False)
        else:
            data = spec.get("data", [])
            if not isinstance(data, list):
                data = [data]
            if len(data) != count:
                raise ValueError(f"{len(data)} values for shape {shape}")
            arr = array_from_list(data, dtype)
        return arr.reshape(shape)
    except (ValueError, TypeError, OverflowError) as e:
        raise fail(f"bad !tensor data: {e}") from None


def inline_tensor(arr: np.ndarray, dtype_name: str, shape: list[int]) -> dict[str, Any]:
    """The ``!tensor`` mapping of ``arr`` with its data inline: a flat ``data`` list when reading it back gives
    the same bits, else ``base64`` of the little-endian bytes."""
    d: dict[str, Any] = {"dtype": dtype_name, "shape": Flow(shape)}
    flat = arr.reshape(-1)
    if arr.dtype.kind == "O":
        for x in flat:
            if not isinstance(x, (bytes, str)):
                raise FormatError(f"cannot write an object tensor holding {type(x).__name__}")
        d["data"] = list(flat)
        return d
    if arr.dtype.kind in "SU":
        d["data"] = [x.item() for x in flat]
        return d
    if arr.dtype.kind in "biu":
        d["data"] = Flow(flat.tolist())
        return d
    # what YAML gives back: every NaN becomes the canonical NaN
    as_list = [x if x == x else NAN for x in flat.astype(np.float64).tolist()] if arr.dtype.kind != "c" else None
    if as_list is not None and array_from_list(list(as_list), arr.dtype).tobytes() == flat.tobytes():
        d["data"] = Flow(as_list)
    else:
        le = np.ascontiguousarray(flat).astype(arr.dtype.newbyteorder("<"), copy=False)
        d["base64"] = base64.b64encode(le.tobytes()).decode("ascii")
    return d

def write_chunks(f: Any, chunks: list[tuple[int, Any]]) -> None:
    """Write the sidecar file: each array's raw little-endian bytes at its offset, zeros between."""
    pos = 0
    for offset, arr in chunks:
        if offset > pos:
            f.write(b"\0" * (offset - pos))
        le = np.ascontiguousarray(arr)
        if le.dtype.byteorder == ">":
            le = le.astype(le.dtype.newbyteorder("<"))
        f.write(le.reshape(-1).view(np.uint8).data if le.size else b"")
        pos = offset + arr.nbytes
