"""Tensors held by attributes.

An attribute may hold a plain :class:`numpy.ndarray`; Amanda never copies it.
:class:`Tensor` adds two things a bare array cannot carry: *laziness* (the data
lives in a sidecar file and is mapped into memory on first use) and an element
type name that numpy may not know natively (``bfloat16``, ``float8e4m3fn``,
``int4``; the array then holds the raw storage, see :mod:`ml_dtypes`).

Tensors are treated as immutable: copying a graph shares them.
"""

from __future__ import annotations

__all__ = ["Tensor", "as_array", "is_tensor", "tensor_nbytes", "resolve_dtype"]

from typing import Any, Callable

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
