"""Attribute conversions that mapping expressions call by name.

These cover the deeplearning4j attribute-rule catalogue (rename, constant, string-equals-to-bool, a list element
chosen by a layout attribute, tensor to int list and back, dtype mapping between type systems), plus padding and
NHWC/NCHW axis and permutation helpers that layout-changing conversions need.  Renames and constants need no
function in a table: ``attrs: {axes: $axis}`` renames, ``attrs: {group: 1}`` sets a constant.

Functions whose work can be undone name their inverse in :data:`INVERSES`; a table declared ``bidirectional``
derives its reverse rules through them (``docs/mapping-tables.md``).
"""

from __future__ import annotations

__all__ = [
    "str_equals",
    "bool_to_str",
    "by_layout",
    "spatial",
    "with_layout",
    "tensor_to_ints",
    "tensor_to_floats",
    "tensor_to_list",
    "ints_to_tensor",
    "floats_to_tensor",
    "scalar",
    "normalize_axis",
    "normalize_axes",
    "nhwc_to_nchw_axis",
    "nchw_to_nhwc_axis",
    "perm_to_nchw",
    "perm_to_nhwc",
    "inverse_perm",
    "compose_perms",
    "is_identity_perm",
    "nhwc_to_nchw_shape",
    "nchw_to_nhwc_shape",
    "same_pads",
    "pads_begin_end",
    "pads_from_pairs",
    "pads_to_pairs",
    "auto_pad_from_padding",
    "padding_from_auto_pad",
    "LIBRARY",
    "INVERSES",
    "library_for",
]

from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from ..ir.tensor import as_array, is_tensor

if TYPE_CHECKING:
    from ..namespace.types import TypeSystemRegistry


# --------------------------------------------------------------------------- strings and flags


def str_equals(value: Any, expected: str, *, case: bool = True) -> bool:
    """A string attribute compared with a constant (``padding == "SAME"`` -> ``is_same_mode``)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str):
        return False
    return value == expected if case else value.lower() == expected.lower()


def bool_to_str(flag: Any, if_true: str, if_false: str) -> str:
    """The inverse of :func:`str_equals`: a flag back to one of two strings."""
    return if_true if flag else if_false


# --------------------------------------------------------------------------- layouts


def by_layout(values: Sequence[Any], layout: str, dim: str) -> Any:
    """The element of ``values`` for dimension letter ``dim`` in ``layout``: strides ``[1, 2, 3, 1]`` with
    ``"NHWC"`` and ``"H"`` gives 2."""
    layout = _layout(layout)
    if len(values) != len(layout):
        raise ValueError(f"{len(values)} values for layout {layout!r}")
    if dim not in layout:
        raise ValueError(f"layout {layout!r} has no dimension {dim!r}")
    return values[layout.index(dim)]


def spatial(values: Sequence[Any], layout: str) -> list[Any]:
    """The spatial elements of a per-dimension list (every dimension but N and C), in layout order."""
    layout = _layout(layout)
    if len(values) != len(layout):
        raise ValueError(f"{len(values)} values for layout {layout!r}")
    return [v for v, d in zip(values, layout) if d not in "NC"]


def with_layout(spatial_values: Sequence[Any], layout: str, fill: Any = 1) -> list[Any]:
    """The inverse of :func:`spatial`: a full per-dimension list with ``fill`` for N and C."""
    layout = _layout(layout)
    it = iter(spatial_values)
    out = [fill if d in "NC" else next(it) for d in layout]
    if next(it, None) is not None:
        raise ValueError(f"too many spatial values for layout {layout!r}")
    return out


def _layout(layout: Any) -> str:
    if isinstance(layout, bytes):
        layout = layout.decode()
    if not isinstance(layout, str) or not layout.isalpha():
        raise ValueError(f"not a layout: {layout!r}")
    return layout.upper()


# --------------------------------------------------------------------------- tensors


def tensor_to_list(t: Any) -> list[Any]:
    """A tensor (array, lazy tensor, or a list already) as a flat Python list."""
    if is_tensor(t):
        return as_array(t).reshape(-1).tolist()  # type: ignore[no-any-return]
    if isinstance(t, (list, tuple)):
        return list(t)
    if isinstance(t, (int, float, bool)):
        return [t]
    raise TypeError(f"not a tensor: {type(t).__name__}")


def tensor_to_ints(t: Any) -> list[int]:
    """An integer tensor (``axes``, ``shape`` inputs) as a list of ints."""
    return [int(v) for v in tensor_to_list(t)]


def tensor_to_floats(t: Any) -> list[float]:
    return [float(v) for v in tensor_to_list(t)]


def ints_to_tensor(values: Any, dtype: str = "int64", shape: Sequence[int] | None = None) -> np.ndarray:
    """A list of ints as a 1-D tensor (or of ``shape``); a single int gives a 0-d tensor."""
    arr = np.array(values, dtype=dtype)
    return arr.reshape(shape) if shape is not None else arr


def floats_to_tensor(values: Any, dtype: str = "float32", shape: Sequence[int] | None = None) -> np.ndarray:
    arr = np.array(values, dtype=dtype)
    return arr.reshape(shape) if shape is not None else arr


def scalar(t: Any) -> Any:
    """The single value of a one-element tensor or list."""
    values = tensor_to_list(t)
    if len(values) != 1:
        raise ValueError(f"expected one value, got {len(values)}")
    return values[0]


# --------------------------------------------------------------------------- axes and permutations


def normalize_axis(axis: int, rank: int) -> int:
    """``-1`` -> ``rank - 1``; out of range is an error."""
    a = int(axis)
    if not -rank <= a < rank:
        raise ValueError(f"axis {axis} out of range for rank {rank}")
    return a + rank if a < 0 else a


def normalize_axes(axes: Sequence[int], rank: int) -> list[int]:
    return [normalize_axis(a, rank) for a in axes]


def perm_to_nchw(rank: int) -> list[int]:
    """The permutation taking an NHWC (channels-last) tensor to NCHW: ``[0, 3, 1, 2]`` for rank 4."""
    if rank < 3:
        return list(range(rank))
    return [0, rank - 1, *range(1, rank - 1)]


def perm_to_nhwc(rank: int) -> list[int]:
    """The permutation taking an NCHW tensor to NHWC: ``[0, 2, 3, 1]`` for rank 4."""
    if rank < 3:
        return list(range(rank))
    return [0, *range(2, rank), 1]


def inverse_perm(perm: Sequence[int]) -> list[int]:
    out = [0] * len(perm)
    for i, p in enumerate(perm):
        out[int(p)] = i
    if sorted(int(p) for p in perm) != list(range(len(perm))):
        raise ValueError(f"not a permutation: {list(perm)}")
    return out


def compose_perms(first: Sequence[int], then: Sequence[int]) -> list[int]:
    """The one transpose equal to transposing by ``first`` and then by ``then``."""
    if len(first) != len(then):
        raise ValueError("permutations of different rank")
    return [int(first[int(t)]) for t in then]


def is_identity_perm(perm: Sequence[int]) -> bool:
    return [int(p) for p in perm] == list(range(len(perm)))


def nhwc_to_nchw_axis(axis: int, rank: int) -> int:
    """Where axis ``axis`` of an NHWC tensor lands in its NCHW transpose."""
    return perm_to_nchw(rank).index(normalize_axis(axis, rank))


def nchw_to_nhwc_axis(axis: int, rank: int) -> int:
    return perm_to_nhwc(rank).index(normalize_axis(axis, rank))


def nhwc_to_nchw_shape(shape: Sequence[int]) -> list[int]:
    return [shape[i] for i in perm_to_nchw(len(shape))]


def nchw_to_nhwc_shape(shape: Sequence[int]) -> list[int]:
    return [shape[i] for i in perm_to_nhwc(len(shape))]


# --------------------------------------------------------------------------- padding


def same_pads(input_shape: Sequence[int], kernel: Sequence[int], strides: Sequence[int] | None = None,
              dilations: Sequence[int] | None = None, upper: bool = True) -> list[int]:
    """Explicit pads ``[x1_begin, x2_begin, ..., x1_end, x2_end]`` (ONNX order) that make a convolution or pooling
    window keep ``ceil(size / stride)`` outputs, as TensorFlow's SAME (``upper``: the odd pixel at the end, as
    SAME_UPPER; otherwise at the start, as SAME_LOWER).  ``input_shape`` holds the spatial sizes."""
    n = len(kernel)
    strides = list(strides or [1] * n)
    dilations = list(dilations or [1] * n)
    if len(input_shape) != n:
        raise ValueError(f"{len(input_shape)} spatial sizes for a {n}-d kernel")
    begin, end = [], []
    for size, k, s, d in zip(input_shape, kernel, strides, dilations):
        if size is None or int(size) < 0:
            raise ValueError("SAME padding needs known spatial sizes")
        out = -(-int(size) // int(s))
        total = max((out - 1) * int(s) + (int(k) - 1) * int(d) + 1 - int(size), 0)
        small, big = total // 2, total - total // 2
        begin.append(small if upper else big)
        end.append(big if upper else small)
    return begin + end


def pads_begin_end(pads: Sequence[int]) -> tuple[list[int], list[int]]:
    half = len(pads) // 2
    if len(pads) % 2:
        raise ValueError("pads need an even number of values")
    return list(pads[:half]), list(pads[half:])


def pads_to_pairs(pads: Sequence[int]) -> list[list[int]]:
    """ONNX pads ``[b1, b2, e1, e2]`` -> ``[[b1, e1], [b2, e2]]`` (TensorFlow's explicit paddings order)."""
    begin, end = pads_begin_end(pads)
    return [[b, e] for b, e in zip(begin, end)]


def pads_from_pairs(pairs: Sequence[Sequence[int]]) -> list[int]:
    """The inverse of :func:`pads_to_pairs`."""
    return [int(p[0]) for p in pairs] + [int(p[1]) for p in pairs]


def auto_pad_from_padding(padding: Any) -> str:
    """TensorFlow ``padding`` -> ONNX ``auto_pad``: SAME -> SAME_UPPER, VALID -> VALID, EXPLICIT -> NOTSET."""
    p = padding.decode() if isinstance(padding, bytes) else str(padding)
    table = {"SAME": "SAME_UPPER", "VALID": "VALID", "EXPLICIT": "NOTSET"}
    if p not in table:
        raise ValueError(f"unknown padding {padding!r}")
    return table[p]


def padding_from_auto_pad(auto_pad: Any) -> str:
    """ONNX ``auto_pad`` -> TensorFlow ``padding``; SAME_LOWER has no TensorFlow equivalent."""
    p = auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad)
    table = {"SAME_UPPER": "SAME", "VALID": "VALID", "NOTSET": "EXPLICIT"}
    if p not in table:
        raise ValueError(f"auto_pad {auto_pad!r} has no TensorFlow padding")
    return table[p]


LIBRARY: dict[str, Callable[..., Any]] = {name: globals()[name] for name in __all__
                                          if name not in ("LIBRARY", "INVERSES", "library_for")}
"""Every function above, by name, as expressions see them."""

INVERSES: dict[str, str] = {
    "str_equals": "bool_to_str",
    "bool_to_str": "str_equals",
    "spatial": "with_layout",
    "with_layout": "spatial",
    "tensor_to_ints": "ints_to_tensor",
    "ints_to_tensor": "tensor_to_ints",
    "tensor_to_floats": "floats_to_tensor",
    "floats_to_tensor": "tensor_to_floats",
    "nhwc_to_nchw_axis": "nchw_to_nhwc_axis",
    "nchw_to_nhwc_axis": "nhwc_to_nchw_axis",
    "perm_to_nchw": "perm_to_nhwc",
    "perm_to_nhwc": "perm_to_nchw",
    "nhwc_to_nchw_shape": "nchw_to_nhwc_shape",
    "nchw_to_nhwc_shape": "nhwc_to_nchw_shape",
    "pads_to_pairs": "pads_from_pairs",
    "pads_from_pairs": "pads_to_pairs",
    "auto_pad_from_padding": "padding_from_auto_pad",
    "padding_from_auto_pad": "auto_pad_from_padding",
    "convert_dtype": "convert_dtype",
}
"""Functions with an inverse, for tables declared ``bidirectional`` (``convert_dtype(v, a, b)`` is undone by
``convert_dtype(v, b, a)``; ``str_equals(v, s)`` by ``bool_to_str(v, s, <other>)``)."""


def library_for(type_systems: TypeSystemRegistry | None) -> dict[str, Callable[..., Any]]:
    """The functions expressions see, with the dtype helpers bound to the registered type systems:

    * ``dtype_name(dtype)`` - the numpy-style name (``float32``) of a dtype of any type system;
    * ``convert_dtype(value, src, dst)`` - a dtype written in type system ``src`` (``"torch"``) written in ``dst``
      (``"tf"``): ``convert_dtype("Float", "torch", "tf")`` -> ``"float32"``.
    """
    lib = dict(LIBRARY)

    def dtype_name(dtype: Any, system: str | None = None) -> str:
        if dtype is None:
            raise ValueError("no dtype")
        canonical = getattr(dtype, "canonical_dtype", None)
        if callable(canonical):
            return str(canonical())
        inner = getattr(dtype, "dtype", None)  # parsed dtypes that know their numpy-style element type
        if isinstance(inner, str) and inner:
            return inner
        if type_systems is not None:
            names = [system] if system else type_systems.names()
            for name in names:
                ts = type_systems.get(name)
                if ts is None:
                    continue
                c = ts.canonical_dtype(dtype)
                if c is not None:
                    return c
        text = str(dtype)
        try:
            return str(np.dtype(text).name)
        except TypeError:
            raise ValueError(f"cannot tell the element type of dtype {text!r}") from None

    def convert_dtype(value: Any, src: str, dst: str) -> Any:
        if type_systems is None:
            raise ValueError("no type systems are registered")
        a, b = type_systems[src], type_systems[dst]
        c = a.canonical_dtype(value)
        if c is None:
            raise ValueError(f"type system {src!r} does not know the dtype {value!r}")
        out = b.from_canonical_dtype(c)
        if out is None:
            raise ValueError(f"type system {dst!r} has no dtype for {c!r} (from {value!r})")
        return out

    lib["dtype_name"] = dtype_name
    lib["convert_dtype"] = convert_dtype
    return lib
