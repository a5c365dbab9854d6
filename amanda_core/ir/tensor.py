"""Tensors held by attributes.

An attribute may hold a plain :class:`numpy.ndarray`; Amanda never copies it.
:class:`Tensor` adds two things a bare array cannot carry: *laziness* (the data
lives in a sidecar file and is mapped into memory on first use) and an element
type name that numpy may not know natively (``bfloat16``, ``float8e4m3fn``,
``int4``; the array then holds the raw storage, see :mod:`ml_dtypes`).

Tensors are treated as immutable: copying a graph shares them.

:class:`FileTensor` is a lazy tensor whose bytes are a range of a file (an ONNX external data file, the
``raw_data`` of a tensor inside a model file): the file is opened when the tensor is made (so replacing the file
afterwards, even by the model being written from it, does not change what the tensor reads), memory-mapped on
first use, and its bytes can be copied to another file without passing through the process's memory
(:meth:`FileTensor.copy_to`).
"""

from __future__ import annotations

__all__ = ["Tensor", "FileTensor", "MappedFile", "as_array", "is_tensor", "tensor_nbytes", "resolve_dtype"]

import mmap
import os
import threading
from typing import IO, Any, Callable

import numpy as np


def resolve_dtype(name: str) -> np.dtype[Any]:
    """The numpy dtype called ``name``, importing :mod:`ml_dtypes` if needed."""
    try:
        return np.dtype(name)
    except TypeError:
        pass
    try:
        import ml_dtypes  # noqa: F401  (registers bfloat16, float8_*, int4 ...)

        return np.dtype(getattr(ml_dtypes, name))
    except (ImportError, AttributeError, TypeError):
        raise TypeError(f"unknown tensor element type {name!r}") from None


class Tensor:
    """A tensor whose data may be loaded lazily.

    ``Tensor(array)`` wraps an array without copying it.  ``Tensor(loader=f,
    dtype=..., shape=...)`` defers reading until :meth:`numpy` is first called;
    ``f`` must return an array of that dtype and shape.
    """

    __slots__ = ("_array", "_loader", "dtype", "shape")

    def __init__(
        self,
        array: np.ndarray | None = None,
        *,
        dtype: str | None = None,
        shape: tuple[int, ...] | None = None,
        loader: Callable[[], np.ndarray] | None = None,
    ) -> None:
        if array is None and loader is None:
            raise ValueError("Tensor needs an array or a loader")
        if array is not None:
            array = np.asarray(array)
            dtype = dtype or array.dtype.name
            shape = tuple(array.shape) if shape is None else tuple(shape)
        if dtype is None or shape is None:
            raise ValueError("a lazy Tensor needs its dtype and shape")
        self._array = array
        self._loader = loader
        self.dtype: str = dtype
        self.shape: tuple[int, ...] = tuple(int(d) for d in shape)

    @property
    def is_loaded(self) -> bool:
        return self._array is not None

    def numpy(self) -> np.ndarray:
        """The data as an array (loaded on first call; never a copy after that)."""
        if self._array is None:
            assert self._loader is not None
            array = self._loader()
            if tuple(array.shape) != self.shape:
                raise ValueError(f"tensor data has shape {array.shape}, expected {self.shape}")
            self._array = array
        return self._array

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        if self._array is not None:
            return int(self._array.nbytes)
        try:
            return self.size * resolve_dtype(self.dtype).itemsize
        except TypeError:
            return 0

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __repr__(self) -> str:
        state = "" if self.is_loaded else ", lazy"
        return f"Tensor({self.dtype}, shape={list(self.shape)}{state})"

    def __eq__(self, other: object) -> bool:
        if not is_tensor(other):
            return NotImplemented
        return tensors_equal(self, other)

    __hash__ = None  # type: ignore[assignment]


class MappedFile:
    """One file that lazy tensors read from: opened now (its inode is pinned for as long as a tensor refers to
    it), memory-mapped read-only on first use, shared by every tensor of the file."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file = open(path, "rb")  # noqa: SIM115 - kept open while tensors refer to it
        self._map: mmap.mmap | None = None
        self._lock = threading.Lock()

    @property
    def fd(self) -> int:
        return self._file.fileno()

    def size(self) -> int:
        """The file's size now (it may have been truncated since it was opened)."""
        return os.fstat(self._file.fileno()).st_size

    def map(self) -> mmap.mmap | None:
        """The read-only map of the whole file (None for an empty file)."""
        if self._map is None:
            with self._lock:
                if self._map is None and self.size():
                    self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
        return self._map

    def check_range(self, offset: int, length: int, what: str) -> None:
        """Raise a one-line error naming ``what`` and the file when it is shorter than ``offset + length``."""
        size = self.size()
        if offset < 0 or offset + length > size:
            from ..errors import AmandaError

            raise AmandaError(f"{what}: the file {self.path} has {size} bytes, the tensor needs bytes {offset} to "
                              f"{offset + length}")

    def __repr__(self) -> str:
        return f"MappedFile({self.path!r})"


_COPY_CHUNK = 64 * 2**20


class FileTensor(Tensor):
    """A lazy tensor whose little-endian bytes are ``length`` bytes at ``offset`` of a :class:`MappedFile`.

    ``decode`` (optional) turns the mapped bytes (a read-only ``uint8`` array) into the tensor's array, for
    storage that is not one element per item (packed 4-bit types); by default the bytes are viewed as ``dtype``
    (no copy).  ``label`` names the tensor in error messages."""

    __slots__ = ("file", "offset", "length", "label")

    def __init__(self, file: MappedFile, offset: int, length: int, *, dtype: str, shape: tuple[int, ...],
                 decode: Callable[[np.ndarray], np.ndarray] | None = None, label: str = "tensor") -> None:
        self.file = file
        self.offset = int(offset)
        self.length = int(length)
        self.label = label
        super().__init__(dtype=dtype, shape=shape, loader=self._make_loader(decode))

    def _make_loader(self, decode: Callable[[np.ndarray], np.ndarray] | None) -> Callable[[], np.ndarray]:
        def load() -> np.ndarray:
            self.file.check_range(self.offset, self.length, self.label)
            mm = self.file.map()
            data = np.frombuffer(mm, dtype=np.uint8, count=self.length, offset=self.offset) \
                if mm is not None and self.length else np.zeros(0, np.uint8)
            if decode is not None:
                return decode(data)
            dt = resolve_dtype(self.dtype)
            if data.size == 0:
                arr = np.zeros(self.shape, dtype=dt)
                arr.flags.writeable = False
                return arr
            arr = data.view(dt)
            if dt.byteorder == ">" or (np.little_endian is False and dt.itemsize > 1):
                arr = arr.byteswap().view(dt)
                arr.flags.writeable = False
            return arr.reshape(self.shape)

        return load

    @property
    def path(self) -> str:
        return self.file.path

    def copy_to(self, out: IO[bytes]) -> None:
        """Write the tensor's bytes to the binary file ``out`` at its current position, by the OS's file copy
        call where there is one (the bytes never enter the process), else in chunks from the map.  Raises a
        one-line AmandaError naming the tensor and file when the file has become shorter than the range."""
        from ..errors import AmandaError

        self.file.check_range(self.offset, self.length, self.label)
        out.flush()
        copy_range = getattr(os, "copy_file_range", None)
        src, dst = self.file.fd, out.fileno()
        done = 0
        if copy_range is not None:
            dst_pos = os.lseek(dst, 0, os.SEEK_CUR)
            try:
                while done < self.length:
                    n = copy_range(src, dst, min(self.length - done, 2**30), self.offset + done, dst_pos + done)
                    if n == 0:
                        raise AmandaError(f"{self.label}: the file {self.path} ended before byte "
                                          f"{self.offset + self.length}")
                    done += n
            except OSError:
                if done:
                    raise
                copy_range = None  # not supported between these files: copy through the map
            else:
                out.seek(dst_pos + done)
                return
        mm = self.file.map()
        view = memoryview(mm) if mm is not None else memoryview(b"")  # type: ignore[arg-type]
        try:
            for pos in range(self.offset, self.offset + self.length, _COPY_CHUNK):
                out.write(view[pos:min(pos + _COPY_CHUNK, self.offset + self.length)])
        finally:
            view.release()


def is_tensor(value: object) -> bool:
    return isinstance(value, (np.ndarray, Tensor))


def as_array(value: np.ndarray | Tensor) -> np.ndarray:
    return value.numpy() if isinstance(value, Tensor) else value


def tensor_dtype(value: np.ndarray | Tensor) -> str:
    return value.dtype if isinstance(value, Tensor) else value.dtype.name


def tensor_nbytes(value: np.ndarray | Tensor) -> int:
    return int(value.nbytes)


def tensors_equal(a: Any, b: Any) -> bool:
    """Same element type, same shape, same values (NaN equals NaN, bit-exact otherwise)."""
    if tensor_dtype(a) != tensor_dtype(b):
        return False
    if tuple(a.shape) != tuple(b.shape):
        return False
    x, y = as_array(a), as_array(b)
    if x.dtype.kind in "fc":
        return bool(np.array_equal(x, y, equal_nan=True))
    if x.dtype.kind in "biuSUO" or x.dtype.fields is None:
        try:
            return bool(np.array_equal(x, y))
        except TypeError:
            pass
    return x.tobytes() == y.tobytes()
