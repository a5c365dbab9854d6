"""numpy arrays <-> torch tensors, without copying where torch allows it.

Element types numpy does not have natively (``bfloat16``, the float8 types: :mod:`ml_dtypes` arrays) cross
through an integer view of the same bytes.  A read-only array (a memory-mapped weight file, say) is copied:
torch tensors are writable, and a write through one (fine-tuning updates parameters in place) into read-only
memory would crash the process.
"""

from __future__ import annotations

__all__ = ["to_torch", "to_numpy", "torch_dtype"]

from functools import lru_cache
from typing import Any

import numpy as np

from amanda_core.errors import AmandaError
from amanda_core.ir.tensor import as_array

from .scalar_types import lookup_scalar_type

# ml_dtypes element types torch has, and the integer type of the same width their bytes cross through
_VIEWED = {
    "bfloat16": ("bfloat16", np.int16),
    "float8_e4m3fn": ("float8_e4m3fn", np.uint8),
    "float8_e4m3fnuz": ("float8_e4m3fnuz", np.uint8),
    "float8_e5m2": ("float8_e5m2", np.uint8),
    "float8_e5m2fnuz": ("float8_e5m2fnuz", np.uint8),
    "float8_e8m0fnu": ("float8_e8m0fnu", np.uint8),
}


@lru_cache(maxsize=256)  # a numpy dtype's name is made by Python code on every read
def _viewed(dtype: np.dtype) -> tuple[str, Any] | None:
    """The ``_VIEWED`` row of an element type, or None."""
    return _VIEWED.get(dtype.name)


def torch_dtype(value: Any) -> Any:
    """The ``torch.dtype`` a ScalarType value stands for (``float32``, ``Float``, ``6``, a numpy dtype)."""
    import torch

    info = lookup_scalar_type(value)
    if info is None:
        raise AmandaError(f"{value!r} is not a torch element type")
    return getattr(torch, info.torch_name)


def to_torch(value: Any, *, copy: bool = False) -> Any:
    """A torch tensor over the same memory as ``value`` (a numpy array or an :class:`amanda_core.ir.Tensor`);
    a copy when ``copy`` is true or the array is read-only."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.clone() if copy else value
    array = as_array(value)
    viewed = _viewed(array.dtype)
    if viewed is not None:
        torch_name, raw = viewed
        return to_torch(array.view(raw), copy=copy).view(getattr(torch, torch_name))
    if not array.flags.writeable or copy:
        array = np.array(array, copy=True)
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("="))
    try:
        return torch.from_numpy(array)
    except TypeError:
        raise AmandaError(f"torch has no tensor type for numpy {array.dtype}") from None


def to_numpy(value: Any) -> np.ndarray:
    """A numpy array over the same memory as the torch tensor ``value`` (detached, on the CPU); plain Python
    numbers (sizes, ``item()`` results) become 0-dimensional arrays."""
    import torch

    if not isinstance(value, torch.Tensor):
        return np.asarray(value)
    t = value.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    name = str(t.dtype).removeprefix("torch.")
    for np_name, (torch_name, raw) in _VIEWED.items():
        if torch_name == name:
            from amanda_core.ir.tensor import resolve_dtype

            raw_t = t.view(torch.int16 if raw is np.int16 else torch.uint8)
            return raw_t.numpy().view(resolve_dtype(np_name))
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    return t.numpy()
