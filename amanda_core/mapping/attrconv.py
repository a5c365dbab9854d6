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
    "value_dtype",
    "port_shape",
    "port_rank",
    "static_shape",
    "onnx_elem_dtype",
    "onnx_conv_pads",
    "symmetric_pads",
    "torch_pad_order",
    "conv_transpose_padding",
    "conv_transpose_auto_pads",
    "slice_plan",
    "broadcast_shape",
    "onnx_constant_value",
    "onnx_dim_slice",
    "onnx_int_literal",
    "onnx_size_expr",
    "torch_size_arith",
    "onnx_size_list",
    "onnx_size_range",
    "onnx_size_element",
    "onnx_size_int",
    "split_sizes",
    "elem_kind",
    "value_elem",
    "shape_size", "array_elem",
    "is_tensor_value",
    "is_number",
    "tensor_dtype",
    "same_tensor_dtype",
    "as_tensor",
    "window",
    "conv_pads",
    "pads_from_torch",
    "expand_shape",
    "swap_perm",
    "flatten_target",
    "slice_bound",
    "arange_values",
    "full_values",
    "index_nd",
    "torch_reduce_axes",
    "unsqueezed",
    "LIBRARY",
    "INVERSES",
    "library_for",
]

import functools
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


# --------------------------------------------------------------------------- ONNX -> framework conversions
# (value types at ports, ONNX padding and slicing conventions, ONNX constant attributes; used by the ONNX -> torch
# tables of amanda-torch)


def value_dtype(port: Any) -> Any:
    """The parsed dtype of the value at ``port``: an output port's own, an input port's producer's (None when the
    port is unfed or the value untyped)."""
    if port is None:
        return None
    dtype = getattr(port, "dtype", None)
    if dtype is None and getattr(port, "is_input", False):
        src = port.source
        dtype = src.dtype if src is not None else None
    return dtype


def port_shape(port: Any, dtype_of: Callable[[Any], Any] = value_dtype) -> list[Any] | None:
    """The shape of the value at ``port`` as a list (ints for known sizes, None for symbolic ones); None when the
    rank is unknown.  Reads parsed dtypes that have a ``shape`` (ONNX) or ``sizes()`` (torch)."""
    dtype = dtype_of(port)
    if dtype is None:
        return None
    shape = getattr(dtype, "shape", None)
    if shape is None and callable(getattr(dtype, "sizes", None)):
        shape = dtype.sizes()
    if shape is None or callable(shape):
        return None
    return [int(d) if isinstance(d, (int, np.integer)) and int(d) >= 0 else None for d in shape]


def port_rank(port: Any, dtype_of: Callable[[Any], Any] = value_dtype) -> int | None:
    shape = port_shape(port, dtype_of)
    return None if shape is None else len(shape)


def static_shape(port: Any, dtype_of: Callable[[Any], Any] = value_dtype) -> list[int] | None:
    """The shape at ``port`` when every size is known, else None."""
    shape = port_shape(port, dtype_of)
    if shape is None or any(d is None for d in shape):
        return None
    return [int(d) for d in shape]


_ONNX_ELEM_TYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
                    8: "string", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
                    14: "complex64", 15: "complex128", 16: "bfloat16", 17: "float8_e4m3fn", 18: "float8_e4m3fnuz",
                    19: "float8_e5m2", 20: "float8_e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4_e2m1fn",
                    24: "float8_e8m0fnu", 25: "uint2", 26: "int2", 27: "float6_e2m3fn", 28: "float6_e3m2fn"}


def onnx_elem_dtype(code: Any) -> str:
    """An ONNX ``TensorProto.DataType`` number (Cast's ``to``) as the canonical element type name (1 -> float32)."""
    try:
        return _ONNX_ELEM_TYPES[int(code)]
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"unknown ONNX element type {code!r}") from None


def onnx_conv_pads(auto_pad: Any, pads: Sequence[int] | None, spatial_shape: Sequence[Any] | None,
                   kernel: Sequence[int], strides: Sequence[int] | None = None,
                   dilations: Sequence[int] | None = None) -> list[int] | None:
    """The explicit ONNX pads ``[b1, ..., e1, ...]`` of a convolution or pooling window: ``pads`` (zeros when
    absent) for NOTSET, zeros for VALID, and for SAME_UPPER/SAME_LOWER the pads computed from the spatial sizes;
    None when they depend on sizes that are not known."""
    n = len(kernel)
    mode = auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad or "NOTSET")
    if mode == "NOTSET":
        return [int(p) for p in pads] if pads else [0] * (2 * n)
    if mode == "VALID":
        return [0] * (2 * n)
    if mode not in ("SAME_UPPER", "SAME_LOWER"):
        raise ValueError(f"unknown auto_pad {auto_pad!r}")
    if spatial_shape is None or len(spatial_shape) != n or any(s is None for s in spatial_shape):
        return None
    return same_pads(spatial_shape, kernel, strides, dilations, upper=mode == "SAME_UPPER")


def symmetric_pads(pads: Sequence[int] | None) -> list[int] | None:
    """The per-axis padding of ONNX pads whose begin and end agree (``[1, 2, 1, 2]`` -> ``[1, 2]``), else None."""
    if pads is None:
        return None
    begin, end = pads_begin_end(pads)
    return [int(b) for b in begin] if begin == end else None


def torch_pad_order(pads: Sequence[int], rank: int | None = None, axes: Sequence[int] | None = None) -> list[int]:
    """ONNX pads ``[b_a1, b_a2, ..., e_a1, e_a2, ...]`` (over ``axes``, default all ``rank`` axes) as the list
    ``torch.nn.functional.pad`` takes: last axis first, ``[b_last, e_last, b_prev, e_prev, ...]``, down to the
    first axis with a non-zero pad."""
    begin, end = pads_begin_end(pads)
    if axes is None:
        axes = list(range(len(begin)))
        rank = len(begin) if rank is None else rank
    if rank is None:
        raise ValueError("torch_pad_order needs the rank when axes are given")
    axes = normalize_axes(axes, rank)
    per_axis = {a: (0, 0) for a in range(rank)}
    for a, b, e in zip(axes, begin, end):
        per_axis[a] = (int(b), int(e))
    first = next((a for a in range(rank) if per_axis[a] != (0, 0)), rank - 1)
    out: list[int] = []
    for a in range(rank - 1, first - 1, -1):
        out.extend(per_axis[a])
    return out


def conv_transpose_padding(pads: Sequence[int], output_padding: Sequence[int] | None, strides: Sequence[int],
                           dilations: Sequence[int]) -> tuple[list[int], list[int]] | None:
    """torch's ``(padding, output_padding)`` for an ONNX ConvTranspose with explicit ``pads`` and
    ``output_padding``: torch crops ``padding`` at both ends and adds ``output_padding`` at the end, so ONNX's
    ``[b, e]`` is padding ``b`` and output padding ``output_padding + b - e``; None when torch cannot say it (that
    output padding is negative or not below the stride or dilation)."""
    begin, end = pads_begin_end(pads)
    n = len(begin)
    extra = list(output_padding or [0] * n)
    padding, out_pad = [], []
    for b, e, o, s, d in zip(begin, end, extra, strides, dilations):
        q = int(o) + int(b) - int(e)
        if q < 0 or q >= max(int(s), int(d)):
            return None
        padding.append(int(b))
        out_pad.append(q)
    return padding, out_pad


def conv_transpose_auto_pads(spatial: Sequence[int], kernel: Sequence[int], strides: Sequence[int] | None,
                             dilations: Sequence[int] | None, output_padding: Sequence[int] | None,
                             output_shape: Sequence[int] | None, auto_pad: str | None) -> list[int]:
    """The ``[begin..., end...]`` pads of an ONNX ConvTranspose given ``output_shape`` or ``auto_pad`` SAME_*: the
    total ``stride * (in - 1) + output_padding + (kernel - 1) * dilation + 1 - out`` (``out`` = ``in * stride``
    without an output_shape) split as ONNX says, the odd one at the end for SAME_UPPER, at the start otherwise (a
    negative total lengthens the output)."""
    n = len(spatial)
    strides = list(strides or [1] * n)
    dilations = list(dilations or [1] * n)
    extra = list(output_padding or [0] * n)
    out = list(output_shape) if output_shape else [int(spatial[i]) * strides[i] for i in range(n)]
    out = out[-n:]
    total = [strides[i] * (int(spatial[i]) - 1) + int(extra[i]) + (int(kernel[i]) - 1) * dilations[i] + 1 - int(out[i])
             for i in range(n)]
    if auto_pad == "SAME_UPPER":
        return [t // 2 for t in total] + [t - t // 2 for t in total]
    return [t - t // 2 for t in total] + [t // 2 for t in total]


def slice_plan(shape: Sequence[int], starts: Sequence[int], ends: Sequence[int], axes: Sequence[int] | None = None,
               steps: Sequence[int] | None = None) -> dict[str, Any]:
    """An ONNX Slice over a tensor of known ``shape`` as ``flip`` (axes to reverse first, for negative steps) and
    per-axis ``(start, end, step)`` with positive steps on the flipped tensor: ``{"flip": [...], "dims": [...],
    "starts": [...], "ends": [...], "steps": [...]}`` (only axes that change), plus the ``shape`` of the result and,
    for a contiguous copy of the flipped tensor, the ``sizes``, ``strides`` and ``offset`` of one strided view."""
    rank = len(shape)
    axes = list(axes) if axes is not None else list(range(len(starts)))
    steps = list(steps) if steps is not None else [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ValueError("starts, ends, axes and steps differ in length")
    out_shape = [int(d) for d in shape]
    flip, dims, s_out, e_out, st_out = [], [], [], [], []
    begin = [0] * rank
    step_of = [1] * rank
    for a, s, e, st in zip(normalize_axes(axes, rank), starts, ends, steps):
        dim, s, e, st = int(shape[a]), int(s), int(e), int(st)
        if st == 0:
            raise ValueError("a slice step of 0")
        s = s + dim if s < 0 else s
        e = e + dim if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), dim), min(max(e, 0), dim)
        else:
            s, e = min(max(s, 0), dim - 1), min(max(e, -1), dim - 1)
            flip.append(a)
            s, e, st = dim - 1 - s, dim - 1 - e, -st
        count = max(0, -(-(e - s) // st))
        out_shape[a] = count
        begin[a], step_of[a] = s, st
        if (s, e, st) != (0, dim, 1):
            dims.append(a)
            s_out.append(s)
            e_out.append(e)
            st_out.append(st)
    contiguous = [1] * rank
    for i in range(rank - 2, -1, -1):
        contiguous[i] = contiguous[i + 1] * max(int(shape[i + 1]), 1)
    return {"flip": flip, "dims": dims, "starts": s_out, "ends": e_out, "steps": st_out, "shape": out_shape,
            "sizes": out_shape, "strides": [c * st for c, st in zip(contiguous, step_of)],
            "offset": sum(b * c for b, c in zip(begin, contiguous))}


def broadcast_shape(a: Sequence[int], b: Sequence[int]) -> list[int]:
    """The numpy broadcast of two shapes (ONNX Expand's output shape); an error when they do not broadcast."""
    a, b = [int(x) for x in a], [int(x) for x in b]
    n = max(len(a), len(b))
    a, b = [1] * (n - len(a)) + a, [1] * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise ValueError(f"shapes {a} and {b} do not broadcast")
        out.append(y if x == 1 else x)
    return out


def split_sizes(dim: int | None, count: int, split: Sequence[int] | None = None) -> list[int] | None:
    """The sizes of an ONNX Split of an axis of size ``dim`` into ``count`` outputs: ``split`` when given, else
    ``ceil(dim / count)`` each and the remainder last (opset 18's ``num_outputs``); None when ``dim`` is unknown."""
    if split is not None and len(split):
        return [int(s) for s in split]
    if dim is None or count <= 0:
        return None
    chunk = -(-int(dim) // count)
    sizes = [chunk] * (count - 1) + [int(dim) - chunk * (count - 1)]
    return sizes if all(s >= 0 for s in sizes) else None


def onnx_constant_value(attrs: Any) -> Any:
    """The tensor an ONNX ``Constant`` op holds, whichever attribute gives it (``value``, ``value_float``,
    ``value_floats``, ``value_int``, ``value_ints``; ``value_string(s)`` as object arrays of bytes)."""
    if attrs.get("value") is not None:
        return attrs["value"]
    for key, dtype in (("value_float", "float32"), ("value_floats", "float32"), ("value_int", "int64"),
                       ("value_ints", "int64")):
        if attrs.get(key) is not None:
            return np.array(attrs[key], dtype=dtype)
    for key in ("value_string", "value_strings"):
        if attrs.get(key) is not None:
            v = attrs[key]
            items = [x.encode() if isinstance(x, str) else x for x in (v if isinstance(v, list) else [v])]
            arr = np.array(items, dtype=object)
            return arr if isinstance(v, list) else arr.reshape(())
    raise ValueError("a Constant with no value attribute (a sparse_value is not a dense tensor)")


def onnx_dim_slice(op: Any) -> int | None:
    """The one dimension an ONNX ``Shape`` op gives (``start`` and ``end`` one apart, or ``start`` -1 to the end),
    as the index ``aten::sym_size.int`` takes (negative counts from the end); None for any other op or slice."""
    if op is None or op.type != "Shape":
        return None
    start, end = op.attrs.get("start"), op.attrs.get("end")
    start = 0 if start is None else int(start)
    if end is None:
        return -1 if start == -1 else None
    end = int(end)
    if end == start + 1 and (start >= 0 or end < 0):
        return start
    return -1 if start == -1 and end >= 2**62 else None


def _int64_of(op: Any, shape: tuple[int, ...]) -> int | None:
    """The int a constant op (ONNX ``Constant`` or ``Initializer``, torch ``prim::Constant``) holds as one int64
    element of ``shape``; None for any other op or value."""
    if op is None or op.type not in ("Constant", "Initializer", "prim::Constant"):
        return None
    value = onnx_constant_value(op.attrs) if op.type == "Constant" else op.attrs.get("value")
    if value is None or not is_tensor(value) or tuple(value.shape) != shape:
        return None  # (shape first: a weight of the model is not loaded to be told apart)
    arr = as_array(value)
    return int(arr.reshape(-1)[0]) if arr.dtype == np.int64 else None


def onnx_int_literal(op: Any) -> int | None:
    """The int an ONNX constant of one int64 element holds (``Constant``, ``Initializer``, shape ``[1]``), or
    None for any other op or value."""
    return _int64_of(op, (1,)) if op is not None and op.type != "prim::Constant" else None


_SIZE_ARITH = ("Add", "Sub", "Mul", "Div")
_TORCH_SIZE_ARITH = ("aten::add.int", "aten::sub.int", "aten::mul.int", "aten::floordiv.int")


def _size_sign(op: Any, depth: int = 32) -> str | None:
    """The sign of a size expression known at run time, in either direction's form: ``pos`` or ``nonneg`` for
    a literal of that sign, ``nonneg`` for a one-dimension Shape slice (or ``aten::sym_size.int``) and for sums,
    products and quotients of such, ``any`` for a negative literal or a difference; None when ``op`` is no such
    expression: an ONNX op of another type or not over int64, a quotient whose truncating ONNX ``Div`` might
    differ from torch's floor (a dividend that may be negative) or whose divisor is not a positive literal, or a
    chain deeper than ``depth``."""
    if op is None or depth <= 0:
        return None
    t = op.type
    if t == "aten::sym_size.int" or onnx_dim_slice(op) is not None:
        return "nonneg"
    if t == "prim::Constant":
        v = op.attrs.get("value")
        if not isinstance(v, int) or isinstance(v, bool):
            return None
    else:
        v = onnx_int_literal(op)
    if v is not None:
        return "pos" if v > 0 else "nonneg" if v == 0 else "any"
    if t in _SIZE_ARITH:
        dtype = op.outputs[0].dtype_text if len(op.outputs) == 1 else None
        if dtype is None or not dtype.startswith("tensor(int64)"):
            return None
    elif t not in _TORCH_SIZE_ARITH:
        return None
    if len(op.inputs) != 2:
        return None
    a, b = (_size_sign(p.producer, depth - 1) for p in op.inputs)
    if a is None or b is None:
        return None
    if t in ("Div", "aten::floordiv.int") and (a == "any" or b != "pos"):
        return None
    if t in ("Sub", "aten::sub.int") or "any" in (a, b):
        return "any"
    return "nonneg"


def onnx_size_expr(op: Any, depth: int = 32) -> str | None:
    """Whether ``op`` makes a one-element size known at run time, and its sign: ``nonneg`` for a one-dimension
    Shape slice, a literal >= 0, and Add, Mul or Div of such (what ``x.shape[0] * 4`` becomes), ``any`` for a
    negative literal or a Sub; None for anything else (or a chain deeper than ``depth``).  The arithmetic must be
    on int64 (the one-element int64 tensors sizes are here)."""
    if op is None or op.type.startswith(("aten::", "prim::")):
        return None
    sign = _size_sign(op, depth)
    return "nonneg" if sign == "pos" else sign


def torch_size_arith(op: Any) -> tuple[str, str] | None:
    """For a torch int op (``aten::add.int``, ``sub``, ``mul``, ``floordiv``) on sizes known at run time, what
    each operand is: ``size`` (a value :func:`onnx_size_expr` accepts: a Shape slice, or such arithmetic already
    made ONNX) or ``literal`` (an int ``prim::Constant``); None when the op is no such arithmetic: an operand
    of another kind, two literals, a reader that is neither a ``prim::ListConstruct`` nor more such arithmetic,
    or a ``//`` whose result ONNX's truncating Div might not give (a dividend that may be negative) or whose
    divisor is not a positive literal (torch raises ZeroDivisionError on a size of 0; ONNX's integer division by
    zero is undefined)."""
    if op is None or op.type not in _TORCH_SIZE_ARITH:
        return None
    readers = [r.op for r in op.outputs[0].consumers] if op.outputs else []
    if any(r is None or (r.type != "prim::ListConstruct" and r.type not in _TORCH_SIZE_ARITH) for r in readers):
        return None  # (none at all: torch.export leaves arithmetic it simplified away, read by nothing)
    kinds: list[str] = []
    for name in ("a", "b"):
        port = op.input_ports.get(name)
        producer = port.producer if port is not None else None
        if producer is not None and producer.type == "prim::Constant":
            v = producer.attrs.get("value")
            if not isinstance(v, int) or isinstance(v, bool) or not -2**63 <= v < 2**63:
                return None
            kinds.append("literal")
        elif onnx_size_expr(producer) is not None:
            kinds.append("size")
        else:
            return None
    if kinds == ["literal", "literal"] or _size_sign(op) is None:  # (the signs // needs: _size_sign's to say)
        return None
    return kinds[0], kinds[1]


def _size_element(op: Any) -> tuple[str, int] | None:
    """An element of a size list: ("dim", index) for a one-dimension Shape slice (or the ``aten::sym_size.int`` a
    rule made of it), ("int", value) for a one-element int64 constant (or the int ``prim::Constant`` made of it),
    ("expr", 0) for arithmetic on such (:func:`_size_sign`; ONNX ``Mul`` ... or the ``aten::mul.int`` ... made
    of it)."""
    if op is None:
        return None
    if op.type == "aten::sym_size.int":
        return "dim", 0
    if op.type == "prim::Constant":
        v = op.attrs.get("value")
        return ("int", v) if isinstance(v, int) and not isinstance(v, bool) else None
    d = onnx_dim_slice(op)
    if d is not None:
        return "dim", d
    v = onnx_int_literal(op)
    if v is not None:
        return "int", v
    if op.type in _SIZE_ARITH or op.type in _TORCH_SIZE_ARITH:  # x.shape[0] * heads
        return None if _size_sign(op) is None else ("expr", 0)
    return None


def _size_list_values(op: Any, dtype_of: Callable[[Any], Any] = value_dtype) -> list[int | None] | None:
    """For a Concat that is a size list by itself: what each element stands for in torch (the int a literal
    becomes, None for a size read at run time), or None when it is no such list.  A literal 1 read by Expand where
    the input's size is known and not 1 is torch's -1 ("keep": ONNX's broadcasting keeps that size); where the
    input's size is 1, or before its first axis, it stays 1."""
    if op is None or op.type != "Concat" or op.attrs.get("axis") not in (0, -1):
        return None
    elements = [_size_element(p.producer) for p in op.inputs]
    if not elements or any(e is None for e in elements):
        return None
    readers = op.outputs[0].consumers
    if len(readers) != 1:
        return None  # (one rewrite replaces a list and its reader: a list two ops read stays a tensor)
    n = len(elements)
    found: list[int | None] | None = None
    for r in readers:
        reader = r.op
        if reader is None or (r.name, reader.type) not in (("shape", "Reshape"), ("shape", "Expand"),
                                                           ("input", "ConstantOfShape")):
            return None
        values: list[int | None] = [e[1] if e is not None and e[0] == "int" else None for e in elements]
        # a literal a rule already made a torch int holds torch's value (an Expand's -1, "keep"): checked when
        # it was made, taken as it is (arithmetic on sizes is converted after the literals it reads)
        done = [p.producer is not None and p.producer.type == "prim::Constant" for p in op.inputs]
        if reader.type == "ConstantOfShape":  # the sizes of a new tensor, torch's full(): none below 0
            if any(v is not None and v < 0 for v in values):
                return None
        elif reader.type == "Reshape":
            if reader.attrs.get("allowzero") != 1 and any(v == 0 and not d for v, d in zip(values, done)):
                return None  # ONNX's 0 copies a size there
        elif any(v is not None and not d for v, d in zip(values, done)):
            shape = port_shape(reader.inputs[0], dtype_of)
            if shape is None or len(shape) > n:
                return None
            for i, v in enumerate(values):
                j = i - (n - len(shape))  # the input's axis this size meets, right-aligned
                if v is None or done[i]:
                    continue
                if v < 1:
                    return None
                if v == 1 and j >= 0 and shape[j] != 1:
                    if shape[j] is None:
                        return None  # keep or make 1: unknown
                    values[i] = -1
        if found is not None and found != values:
            return None  # readers that need other literals
        found = values
    return found


def _size_list_here(op: Any, dtype_of: Callable[[Any], Any] = value_dtype) -> bool:
    """The conditions :func:`onnx_size_list` asks of one Concat alone."""
    return _size_list_values(op, dtype_of) is not None


def onnx_size_int(op: Any, dtype_of: Callable[[Any], Any] = value_dtype) -> int | None:
    """The int a one-element int64 constant becomes in the size lists that read it (:func:`_size_list_values`:
    its value, or -1 where Expand keeps a size); None when they need different ones."""
    found: set[int] = set()
    for q in op.outputs:
        for r in q.consumers:
            c = r.op
            if c is not None and c.type in _SIZE_ARITH:
                v = onnx_int_literal(op)  # an operand of arithmetic on sizes: its own value
                if v is None:
                    return None
                found.add(v)
                continue
            values = _size_list_values(c, dtype_of) if c is not None else None
            if values is None:
                return None
            for p, v in zip(c.inputs, values):
                if p.name == r.name and v is not None:
                    found.add(v)
    return found.pop() if len(found) == 1 else None


def _size_range_here(op: Any) -> bool:
    """The conditions :func:`onnx_size_range` asks of one Squeeze alone."""
    if op is None or op.type != "Squeeze" or not op.inputs:
        return False
    element = _size_element(op.inputs[0].producer)
    if element is None or element[0] != "dim":
        return False
    readers = op.outputs[0].consumers
    if len(readers) != 1 or readers[0].op is None or readers[0].op.type != "Range" or readers[0].name != "limit":
        return False
    rng = readers[0].op
    return _scalar_int(rng.input_ports["start"].producer) == 0 and _scalar_int(rng.input_ports["delta"].producer) == 1


def _size_slice_here(op: Any) -> bool:
    """An ONNX ``Slice`` of one axis whose ``ends`` is a one-dimension Shape slice (``x[:, :n]`` with ``n`` known
    at run time), its starts, axes and steps one-element int64 constants, the step positive."""
    if op is None or op.type != "Slice":
        return False
    ports = {p.name: p.producer for p in op.inputs}
    end = _size_element(ports.get("ends"))
    if end is None or end[0] != "dim":
        return False
    start, axis = onnx_int_literal(ports.get("starts")), onnx_int_literal(ports.get("axes"))
    step = onnx_int_literal(ports.get("steps")) if ports.get("steps") is not None else 1
    return start is not None and axis is not None and step is not None and step > 0


def _sizes_together(op: Any, dtype_of: Callable[[Any], Any] = value_dtype) -> bool:
    """Whether every size list, size range and element joined to ``op`` (through the elements they share)
    meets its conditions: then all of them become torch sizes, or none does (a Shape turned into a SymInt must
    not be left feeding a Concat that stays an ONNX op)."""
    seen: set[str] = set()
    todo = [op]
    while todo:
        x = todo.pop()
        if x is None or x.name in seen:
            continue
        seen.add(x.name)
        if x.type == "Concat":
            if not _size_list_here(x, dtype_of):
                return False
            todo.extend(p.producer for p in x.inputs)
        elif x.type == "Squeeze":
            if not _size_range_here(x):
                return False
            todo.append(x.inputs[0].producer)
        elif x.type == "Slice":
            if not _size_slice_here(x):
                return False
            todo.append(x.input_ports["ends"].producer)
        elif x.type in ("Shape", "Constant", "Initializer"):
            readers = [r.op for q in x.outputs for r in q.consumers]
            if not readers or any(r is None for r in readers):
                return False
            if x.type != "Shape" and any(r.type != "Concat" and r.type not in _SIZE_ARITH for r in readers):
                return False
            if x.type != "Shape" and (x.attrs.get("graph_input") or onnx_size_int(x, dtype_of) is None):
                return False
            todo.extend(readers)
        elif x.type in _SIZE_ARITH:  # arithmetic on sizes, read by size lists or more of it (or by nothing:
            readers = [r.op for q in x.outputs for r in q.consumers]  # torch.export leaves some it simplified)
            if _size_sign(x) is None or any(
                    r is None or (r.type != "Concat" and r.type not in _SIZE_ARITH) for r in readers):
                return False
            todo.extend(p.producer for p in x.inputs)
            todo.extend(readers)
        elif x.type not in ("aten::sym_size.int", "prim::Constant") and x.type not in _TORCH_SIZE_ARITH:
            return False
    return True


def onnx_size_list(op: Any, dtype_of: Callable[[Any], Any] = value_dtype) -> bool:
    """An ONNX ``Concat`` (axis 0) of one-dimension ``Shape`` slices and one-element int64 constants, read only
    as the shape of one ``Reshape``, ``Expand`` or ``ConstantOfShape``: a size list torch can hold as SymInts and
    ints, so that the module it becomes traces with a dynamic size (``aten::reshape`` of ``[sym_size(x, 0), -1,
    64]``).  Its elements must be read by nothing but such lists (and :func:`onnx_size_range`), and so on through
    what they share.  A literal 0 is refused unless every Reshape reading it has ``allowzero`` (ONNX's 0
    otherwise copies a size); an Expand reader takes a literal 1 only where torch's ``expand`` means the same: a
    new leading size, or a size that is 1 in its input (ONNX's 1 keeps the input's size, torch's would have to
    be -1); a ConstantOfShape reader takes no negative literal."""
    return op is not None and op.type == "Concat" and _sizes_together(op, dtype_of)


def onnx_size_range(op: Any, dtype_of: Callable[[Any], Any] = value_dtype) -> bool:
    """An ONNX ``Squeeze`` of a one-dimension ``Shape`` slice (or the ``aten::sym_size.int`` made of it), read
    only as the ``limit`` of a ``Range`` from 0 by 1 over int64: ``torch.arange`` of a size."""
    return op is not None and op.type == "Squeeze" and _sizes_together(op, dtype_of)


def onnx_size_element(op: Any, dtype_of: Callable[[Any], Any] = value_dtype) -> bool:
    """An ONNX one-dimension ``Shape`` slice, one-element int64 constant or arithmetic on such (``Mul`` ...,
    :func:`_size_sign`) read only by size lists and ranges (:func:`onnx_size_list`, :func:`onnx_size_range`) and
    such arithmetic, all of which meet their conditions."""
    return op is not None and op.type in ("Shape", "Constant", "Initializer", *_SIZE_ARITH) \
        and _size_element(op) is not None and _sizes_together(op, dtype_of)


def _scalar_int(op: Any) -> int | None:
    """The int a 0-d int64 ONNX constant (or an int ``prim::Constant``) holds, else None."""
    if op is not None and op.type == "prim::Constant":
        v = op.attrs.get("value")
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return _int64_of(op, ())


def elem_kind(value: Any) -> str:
    """The kind of a tensor's or a dtype name's elements: ``float`` (float16/32/64, bfloat16, the float8 ...
    kinds), ``int``, ``uint``, ``bool``, ``complex``, ``string`` or ``other``."""
    name = getattr(value, "dtype", value)
    name = _np_name(name) if isinstance(name, np.dtype) else str(getattr(name, "name", name))
    if name.startswith(("float", "bfloat")):
        return "float"
    if name.startswith(("int", "uint")):
        return "uint" if name.startswith("uint") else "int"
    if name in ("bool", "complex64", "complex128"):
        return "bool" if name == "bool" else "complex"
    if name in ("object", "string", "str") or name.startswith(("<U", "|S")):
        return "string"
    return "other"


def value_elem(port: Any, dtype_of: Callable[[Any], Any] = value_dtype) -> str | None:
    """The canonical element type name (``float32``, ``int64``) of the value at ``port``; None when unknown."""
    return _elem_of(dtype_of(port))


def _elem_of(dtype: Any) -> str | None:
    if dtype is None or isinstance(dtype, str):
        return None
    canonical = getattr(dtype, "canonical_dtype", None)
    if callable(canonical):
        c = canonical()
        return None if c is None else str(c)
    np_dtype = getattr(dtype, "numpy_dtype", None)
    if np_dtype is not None:
        try:
            return _np_name(np_dtype)
        except (TypeError, ValueError):
            return None
    inner = getattr(dtype, "dtype", None)  # a parsed type that names its element type (torch's: ``float32``)
    if isinstance(inner, str) and inner:
        return inner
    return None


def _np_name(np_dtype: Any) -> str:
    """``np.dtype(np_dtype).name``, remembered (numpy works the name out anew each time it is asked)."""
    try:
        return _np_name_cached(np_dtype)
    except TypeError:  # not hashable: not remembered
        return str(np.dtype(np_dtype).name)


@functools.lru_cache(maxsize=256)
def _np_name_cached(np_dtype: Any) -> str:
    return str(np.dtype(np_dtype).name)


def array_elem(value: Any) -> str | None:
    """The element type name (``float32``, ``int64``, ``bfloat16``) of a constant's array; None for no array."""
    dtype = getattr(value, "dtype", None)
    return None if dtype is None else str(getattr(dtype, "name", dtype))


def shape_size(shape: Sequence[int]) -> int:
    """The number of elements of a tensor of ``shape`` (1 for a scalar's ``[]``)."""
    n = 1
    for d in shape:
        n *= int(d)
    return n


# --------------------------------------------------------------------------- end of ONNX -> framework conversions


# --------------------------------------------------------------------------- framework -> ONNX conversions
# (literal arguments of torch ops as ONNX attributes and constant inputs; used by the torch -> ONNX tables of
# amanda-torch)

_INT64_MAX = 2**63 - 1


def is_tensor_value(value: Any) -> bool:
    """Whether a constant's value is a tensor (an array or a lazy tensor), not a plain Python literal."""
    return is_tensor(value)


def is_number(value: Any) -> bool:
    """A Python or numpy int or float (not a bool)."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def tensor_dtype(port: Any) -> str | None:
    """The element type name (``float32``) of the tensor at ``port``; None when the value is not a tensor or its
    element type is unknown.  (Expressions see the version of :func:`library_for`, which also reads dtypes left
    as text by another type system.)"""
    return _tensor_dtype_of(value_dtype(port))


def _tensor_dtype_of(dtype: Any) -> str | None:
    if dtype is None or isinstance(dtype, str) or not getattr(dtype, "is_tensor", True):
        return None
    name = getattr(dtype, "dtype", None)
    if isinstance(name, str) and name:
        return name
    elem = getattr(dtype, "elem_type", None)
    return str(elem) if isinstance(elem, str) and elem else None


def _shape_of(dtype: Any) -> list[Any] | None:
    if dtype is None or isinstance(dtype, str):
        return None
    shape = getattr(dtype, "shape", None)
    if shape is None and callable(getattr(dtype, "sizes", None)):
        shape = dtype.sizes()
    if shape is None or callable(shape):
        return None
    return [int(d) if isinstance(d, (int, np.integer)) and int(d) >= 0 else None for d in shape]


def same_tensor_dtype(*ports: Any) -> bool:
    """Whether every port carries a tensor of one known element type."""
    names = [tensor_dtype(p) for p in ports]
    return bool(names) and names[0] is not None and all(n == names[0] for n in names)


def as_tensor(value: Any, dtype: str = "float32") -> np.ndarray:
    """A Python value (number, bool, nested list) or array as a numpy array of ``dtype``."""
    return np.asarray(value, dtype=dtype)


def window(value: Any, n: int, default: Any = None) -> list[int]:
    """A torch window argument (``kernel_size``, ``stride``, ``padding``, ``dilation``) as ``n`` ints: an int or a
    one-element list is repeated; an empty list or None gives ``default`` (itself a window argument)."""
    if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
        if default is None:
            raise ValueError("no window value and no default")
        return window(default, n)
    if isinstance(value, (int, np.integer)):
        return [int(value)] * n
    values = [int(v) for v in value]
    if len(values) == 1:
        return values * n
    if len(values) != n:
        raise ValueError(f"{len(values)} values for a {n}-d window")
    return values


def conv_pads(padding: Any, n: int) -> list[int]:
    """torch's symmetric ``padding`` of a convolution or pooling (an int or per-axis ints) as ONNX ``pads``
    ``[b1, ..., bn, e1, ..., en]``."""
    p = window(padding, n)
    return p + p


def pads_from_torch(pad: Sequence[int], rank: int) -> list[int]:
    """``torch.nn.functional.pad``'s list (last axis first: ``[b_last, e_last, b_prev, e_prev, ...]``) as ONNX
    ``pads`` over all ``rank`` axes (``[b_0, ..., b_{r-1}, e_0, ..., e_{r-1}]``)."""
    pad = [int(p) for p in pad]
    if len(pad) % 2 or len(pad) // 2 > rank:
        raise ValueError(f"pad of length {len(pad)} for a rank-{rank} tensor")
    begin, end = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):
        axis = rank - 1 - i
        begin[axis], end[axis] = pad[2 * i], pad[2 * i + 1]
    return begin + end


def expand_shape(size: Sequence[int]) -> list[int]:
    """torch ``expand``'s sizes as ONNX Expand's shape: ``-1`` (keep the size) becomes 1, which broadcasting keeps."""
    return [1 if int(s) == -1 else int(s) for s in size]


def swap_perm(rank: int, dim0: int, dim1: int) -> list[int]:
    """The permutation of ``torch.transpose(x, dim0, dim1)`` for a rank-``rank`` tensor."""
    perm = list(range(rank))
    a, b = normalize_axis(dim0, rank), normalize_axis(dim1, rank)
    perm[a], perm[b] = perm[b], perm[a]
    return perm


def flatten_target(rank: int, start: int, end: int) -> list[int]:
    """ONNX Reshape's shape for ``torch.flatten(x, start, end)``: 0 (copy) for the kept axes, -1 for the merged
    ones.  A rank-0 input flattens to one element."""
    if rank == 0:
        return [1]
    s, e = normalize_axis(start, rank), normalize_axis(end, rank)
    if s > e:
        raise ValueError(f"flatten start {start} after end {end}")
    return [0] * s + [-1] + [0] * (rank - 1 - e)


def slice_bound(value: Any, default: int) -> int:
    """A torch slice bound (None: from the start or to the end) as an ONNX Slice bound, clamped to int64."""
    if value is None:
        return default
    return max(min(int(value), _INT64_MAX), -_INT64_MAX - 1)


def arange_values(start: Any, end: Any, step: Any, dtype: str) -> np.ndarray:
    """``torch.arange(start, end, step)`` as an array of ``dtype``."""
    return np.arange(start, end, step).astype(dtype)


def full_values(size: Sequence[int], fill: Any, dtype: str) -> np.ndarray:
    """``torch.full(size, fill)`` as an array of ``dtype`` (one value broadcast: no copy per element)."""
    return np.broadcast_to(np.asarray(fill, dtype=dtype), tuple(int(s) for s in size))


def index_nd(indices: Sequence[Any], sizes: Sequence[int]) -> np.ndarray:
    """Advanced-indexing index tensors on the leading axes (``x[i0, i1]``) as ONNX GatherND's ``indices``: broadcast
    together and stacked on a new last axis, negative indices wrapped by the indexed axes' ``sizes``."""
    arrays = np.broadcast_arrays(*[np.asarray(i, dtype=np.int64) for i in indices])
    wrapped = [np.where(a < 0, a + int(n), a) for a, n in zip(arrays, sizes)]
    return np.stack(wrapped, axis=-1).astype(np.int64)


def torch_reduce_axes(dim: Any) -> np.ndarray | None:
    """A torch reduction's ``dim`` (an int, a list, or None/empty for all axes) as ONNX's ``axes`` input (None:
    leave it unfed, which reduces every axis)."""
    if dim is None:
        return None
    if isinstance(dim, (int, np.integer)):
        return np.asarray([int(dim)], dtype=np.int64)
    if len(dim) == 0:
        return None
    return np.asarray([int(d) for d in dim], dtype=np.int64)


def unsqueezed(value: Any, dim: int) -> np.ndarray:
    """``torch.unsqueeze(value, dim)`` of a constant array (a view: no copy)."""
    arr = as_array(value) if is_tensor(value) else np.asarray(value)
    return np.expand_dims(arr, normalize_axis(dim, arr.ndim + 1))


# --------------------------------------------------------------------------- torch -> ONNX: series, spectra, pooling
# (constant tables for cumulative ops, real DFTs, shifts, histogram edges and ceil-mode pooling)

__all__ += ["cumulative_mask", "real_irfft_matrix", "flat_roll_indices", "torch_linspace", "ceil_pool_pads",
            "torch_avg_pool_plan"]


def cumulative_mask(n: int, trailing: int = 0) -> np.ndarray:
    """The ``(n, n)`` boolean table ``j <= i`` (row i: the positions a cumulative op's output i reads), with
    ``trailing`` axes of size 1 after it, so it broadcasts over the axes after the scanned one."""
    i = np.arange(int(n))
    return (i[None, :] <= i[:, None]).reshape((int(n), int(n)) + (1,) * int(trailing))


def real_irfft_matrix(m: int, n: int, norm: str | None = None, hermitian: bool = False) -> np.ndarray:
    """The ``(m, n)`` float64 matrix ``M`` with ``x @ M == torch.fft.irfft(x, n, norm=norm)`` for a *real* ``x``
    of ``m`` values on the transformed axis (``hermitian``: ``torch.fft.hfft``, the same sum scaled the other
    way).  The half spectrum ``x`` is read as ``n // 2 + 1`` values (cut, or padded with zeros); each value
    ``0 < k < n/2`` stands for itself and its mirror ``n - k``, so it counts twice: ``M[k, t] = c_k cos(2 pi k t /
    n) * scale``.  ``norm``: None/"backward", "ortho" or "forward", as torch reads them."""
    m, n = int(m), int(n)
    if n < 1 or m < 1:
        raise ValueError(f"a real inverse DFT of {m} values to {n}")
    modes = {None: 0, "backward": 0, "ortho": 1, "forward": 2}
    if norm not in modes:
        raise ValueError(f"unknown DFT norm {norm!r}")
    k = np.arange(min(m, n // 2 + 1))
    t = np.arange(n)
    weight = np.where((k == 0) | (2 * k == n), 1.0, 2.0)
    table = np.zeros((m, n))
    table[: len(k)] = weight[:, None] * np.cos(2.0 * np.pi * np.outer(k, t) / n)
    mode = modes[norm]
    if hermitian:  # hfft scales by 1, 1/sqrt(n), 1/n where irfft scales by 1/n, 1/sqrt(n), 1
        mode = 2 - mode
    return table * [1.0 / n, 1.0 / np.sqrt(n), 1.0][mode]


def flat_roll_indices(shape: Sequence[int], shifts: Sequence[int], dims: Sequence[int]) -> np.ndarray:
    """For ``torch.roll(x, shifts, dims)`` of a tensor of static ``shape``: the index into the flattened input of
    each output element, shaped like the output (a Gather of the flattened input by it is the roll; a dim named
    twice rolls twice, as torch does)."""
    shape = [int(v) for v in shape]
    index = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
    for shift, dim in zip(shifts, dims):
        index = np.roll(index, int(shift), axis=normalize_axis(int(dim), len(shape)))
    return index


def torch_linspace(start: Any, end: Any, steps: int, dtype: str = "float32") -> np.ndarray:
    """``torch.linspace(start, end, steps)`` as torch's CPU kernel computes it, in the arithmetic of ``dtype``: the
    step ``(end - start) / (steps - 1)``, then ``start + i step`` for the first ``steps // 2`` values and
    ``end - (steps - 1 - i) step`` for the rest (so both ends are exact), each a fused multiply-add (rounded once)
    for float32, as the compiled kernel does it."""
    steps = int(steps)
    kind = np.dtype(dtype).type
    a, b = kind(start), kind(end)
    if steps == 1:
        return np.asarray([a], dtype=dtype)
    step = kind((b - a) / kind(steps - 1))
    i = np.arange(steps)
    half = steps // 2
    wide = np.float64 if np.dtype(dtype).itemsize < 8 else np.dtype(dtype).type  # float32 products are exact here
    low = wide(a) + wide(step) * i.astype(wide)
    high = wide(b) - wide(step) * (steps - 1 - i).astype(wide)
    return np.where(i < half, low, high).astype(dtype)


def ceil_pool_pads(sizes: Sequence[int], kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                   dilation: Sequence[int]) -> list[int] | None:
    """ONNX ``pads`` with which a floor-mode MaxPool gives torch's ``ceil_mode=True`` max pooling over spatial
    ``sizes``: torch's output size (the last window must start inside the input or its left padding), reached by
    padding the end of each axis further (padded places never win a max).  None when that extra padding would
    reach the kernel size (ONNX Runtime refuses such pads)."""
    begin, end = [], []
    for size, k, s, p, d in zip(sizes, kernel, stride, padding, dilation):
        span = d * (k - 1) + 1
        out = -(-(size + 2 * p - span) // s) + 1
        if (out - 1) * s >= size + p:
            out -= 1
        extra = max(0, (out - 1) * s + span - (size + 2 * p))
        if (size + 2 * p + extra - span) // s + 1 != out or p + extra >= k or p >= k:
            return None
        begin.append(p)
        end.append(p + extra)
    return begin + end


def torch_avg_pool_plan(sizes: Sequence[int], kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                        ceil_mode: bool = False, count_include_pad: bool = True,
                        divisor_override: int | None = None) -> dict[str, Any] | None:
    """torch's average pooling over spatial ``sizes`` as a zero Pad, an ONNX AveragePool without pads (the window
    sum over its size) and a product with a constant: ``{"pads": [b1.., e1..], "scale": array}`` where ``scale`` (of
    the output's spatial shape, float64) is the kernel size over torch's divisor at each place -- the window clipped
    to the padded input (``count_include_pad``), to the input itself, or ``divisor_override``.  ``ceil_mode`` sizes
    the output as torch does (the last window starts inside the input or its left padding).  None when the sizes
    give no output."""
    begin, end, divisors = [], [], []
    total = 1
    for size, k, s, p in zip(sizes, kernel, stride, padding):
        size, k, s, p = int(size), int(k), int(s), int(p)
        total *= k
        if ceil_mode:
            out = -(-(size + 2 * p - k) // s) + 1
            if (out - 1) * s >= size + p:
                out -= 1
        else:
            out = (size + 2 * p - k) // s + 1
        if out < 1:
            return None
        extra = max(0, (out - 1) * s + k - (size + 2 * p))
        if (size + 2 * p + extra - k) // s + 1 != out:
            return None
        start = np.arange(out) * s - p
        stop = np.minimum(start + k, size + p)
        padded = stop - start
        inside = np.minimum(stop, size) - np.maximum(start, 0)
        begin.append(p)
        end.append(p + extra)
        divisors.append(padded if count_include_pad else np.maximum(inside, 1))
    if divisor_override:
        divisor = np.full([len(d) for d in divisors], float(divisor_override))
    else:
        divisor = np.ones([1] * 0)
        for d in divisors:
            divisor = np.multiply.outer(divisor, d.astype(np.float64))
    return {"pads": begin + end, "scale": total / divisor}


# --------------------------------------------------------------------------- end of framework -> ONNX conversions


# --------------------------------------------------------------------------- ONNX -> TensorFlow conversions
# (element types TensorFlow's kernels take, constant operands of TF ops; used by the ONNX -> TF tables of amanda-tf)

__all__ += ["tf_castable", "onnx_to_tf_pads", "onnx_perm", "onnx_reduce_axes", "tf_int_tensor"]

_TF_CASTABLE = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                          "float16", "bfloat16", "float32", "float64"})


def tf_castable(dtype: Any) -> bool:
    """Whether TensorFlow's ``Cast`` kernel on the CPU reads and writes this element type (by name)."""
    return str(dtype) in _TF_CASTABLE


def onnx_to_tf_pads(pads: Sequence[int], rank: int, layout: str = "NCHW") -> np.ndarray:
    """ONNX pads ``[b_0, ..., b_{r-1}, e_0, ..., e_{r-1}]`` (all ``rank`` axes, or only the spatial ones when
    ``len(pads) == 2 * (rank - 2)``) as TensorFlow ``Pad``'s ``paddings``, an int64 ``[rank, 2]`` array: axes in
    ``layout`` order, ``NCHW`` (as given) or ``NHWC`` (the channel axis moved last)."""
    pads = [int(p) for p in pads]
    n = len(pads) // 2
    begin, end = pads[:n], pads[n:]
    if n == rank - 2:
        begin, end = [0, 0] + begin, [0, 0] + end
    elif n != rank:
        raise ValueError(f"{len(pads)} pads for a rank-{rank} tensor")
    pairs = [[b, e] for b, e in zip(begin, end)]
    if layout == "NHWC":
        pairs = [pairs[0], *pairs[2:], pairs[1]]
    return np.asarray(pairs, dtype=np.int64).reshape(rank, 2)


def onnx_perm(perm: Sequence[int] | None, rank: int) -> np.ndarray:
    """ONNX Transpose's ``perm`` (None: reverse the axes) as TensorFlow ``Transpose``'s int32 ``perm`` input."""
    values = list(range(rank))[::-1] if perm is None else normalize_axes(perm, rank)
    return np.asarray(values, dtype=np.int32)


def onnx_reduce_axes(axes: Any, rank: int, noop_with_empty_axes: int = 0) -> np.ndarray | None:
    """An ONNX reduction's axes (an attribute list, an ``axes`` input array, or None) as TensorFlow's int64
    ``reduction_indices``: all axes when none are given (None instead when ``noop_with_empty_axes`` is set: the
    op is then an identity)."""
    values = [] if axes is None else [int(a) for a in np.asarray(axes).reshape(-1)]
    if not values:
        return None if noop_with_empty_axes else np.arange(rank, dtype=np.int64)
    return np.asarray(normalize_axes(values, rank), dtype=np.int64)


def tf_int_tensor(values: Any, dtype: str = "int64") -> np.ndarray:
    """Ints (a list, an array, a number) as a one-dimensional array of ``dtype`` (a TF shape or index operand)."""
    return np.asarray(values, dtype=dtype).reshape(-1)


_TF_CONST_DTYPES = _TF_CASTABLE | {"complex64", "complex128"}

__all__ += ["tf_const_dtype", "onnx_strided_slice", "onnx_pad_pairs", "onnx_tf_window", "tf_nhwc_perm",
            "tf_filter_perm"]


def tf_const_dtype(value: Any) -> str | None:
    """The TensorFlow dtype name a ``Const`` holding ``value`` (a numpy array) takes (``object``/bytes arrays:
    ``string``); None when TensorFlow has no such element type."""
    try:
        dtype = np.dtype(getattr(value, "dtype", None))
    except (KeyError, TypeError, ValueError):   # no dtype, or one numpy does not know
        return None
    if getattr(value, "dtype", None) is None:
        return None
    if dtype.kind in "OSU":
        return "string"
    return dtype.name if dtype.name in _TF_CONST_DTYPES else None


def onnx_strided_slice(starts: Any, ends: Any, axes: Any, steps: Any, rank: int) -> dict[str, Any] | None:
    """An ONNX Slice with constant ``starts``/``ends`` (``axes``, ``steps`` optional) on a tensor of ``rank`` as
    TensorFlow ``StridedSlice`` operands: int64 ``begin``, ``end``, ``strides`` over every axis and the
    ``begin_mask``/``end_mask`` bits of the axes the slice leaves whole.  Both clamp out-of-range bounds the way
    Python slicing does, so the values pass as they are; None when an axis repeats or a step is 0."""
    st = [int(v) for v in np.asarray(starts).reshape(-1)]
    en = [int(v) for v in np.asarray(ends).reshape(-1)]
    ax = list(range(len(st))) if axes is None else [int(v) for v in np.asarray(axes).reshape(-1)]
    sp = [1] * len(st) if steps is None else [int(v) for v in np.asarray(steps).reshape(-1)]
    if not len(st) == len(en) == len(ax) == len(sp) or 0 in sp:
        return None
    try:
        ax = normalize_axes(ax, rank)
    except ValueError:
        return None
    if len(set(ax)) != len(ax):
        return None
    begin, end, strides = [0] * rank, [0] * rank, [1] * rank
    mask = (1 << rank) - 1
    for a, b, e, s in zip(ax, st, en, sp):
        begin[a], end[a], strides[a] = b, e, s
        mask &= ~(1 << a)
    return {"begin": np.asarray(begin, np.int64), "end": np.asarray(end, np.int64),
            "strides": np.asarray(strides, np.int64), "begin_mask": mask, "end_mask": mask}


def onnx_pad_pairs(pads: Any, rank: int, axes: Any = None) -> np.ndarray | None:
    """ONNX Pad's ``pads`` (``[b..., e...]`` over ``axes``, default every axis) as TensorFlow's int64
    ``paddings`` ``[rank, 2]``; None when they do not fit the rank, an axis repeats or a pad is negative
    (TensorFlow's Pad does not crop)."""
    values = [int(v) for v in np.asarray(pads).reshape(-1)]
    ax = list(range(rank)) if axes is None else [int(v) for v in np.asarray(axes).reshape(-1)]
    if len(values) != 2 * len(ax) or any(v < 0 for v in values):
        return None
    try:
        ax = normalize_axes(ax, rank)
    except ValueError:
        return None
    if len(set(ax)) != len(ax):
        return None
    out = np.zeros((rank, 2), np.int64)
    n = len(ax)
    for i, a in enumerate(ax):
        out[a] = (values[i], values[n + i])
    return out


# --------------------------------------------------------------------------- ONNX Attention, op by op

__all__ += ["attention_dims"]


def attention_dims(op: Any, dtype_of: Callable[[Any], Any] = value_dtype) -> dict[str, Any] | None:
    """The sizes of an ONNX ``Attention`` op whose Q, K, V (and past_key, attn_mask when fed) have static shapes, as
    the reference reads them; None when a shape is unknown or they do not fit together.  Keys: ``rank`` (3 or 4),
    ``q4``/``k4``/``v4`` (the 4-D shapes before the head axis moves: a 3-D input's ``[batch, seq, heads, size]``, a
    4-D input's own), ``perm`` (the permutation to ``[batch, heads, seq, size]`` and back), ``hq``/``hk`` (heads),
    ``groups`` (query heads per key head), ``sq`` (query length), ``past``, ``total`` (past + new keys), ``mask``
    (the mask's shape or None) and ``scale_root`` (the square root of the scale, rounded to the input's element
    type: the reference scales Q and K by it, each)."""
    def shape(name: str) -> list[int] | None:
        return static_shape(op.input_ports[name], dtype_of) if port_fed(op, name) else None

    attrs = op.attrs
    q, k, v = shape("Q"), shape("K"), shape("V")
    if q is None or k is None or v is None or len(q) not in (3, 4) or len(k) != len(q) or len(v) != len(q):
        return None
    if len(q) == 4:
        hq, hk = q[1], k[1]
        q4, k4, v4 = list(q), list(k), list(v)
        sq, skv, dq = q[2], k[2], q[3]
    else:
        hq, hk = attrs.get("q_num_heads"), attrs.get("kv_num_heads")
        if not hq or not hk or q[2] % hq or k[2] % hk or v[2] % hk:
            return None
        q4, k4, v4 = [q[0], q[1], hq, q[2] // hq], [k[0], k[1], hk, k[2] // hk], [v[0], v[1], hk, v[2] // hk]
        sq, skv, dq = q[1], k[1], q[2] // hq
    if hq % hk:
        return None
    past = 0
    if port_fed(op, "past_key"):
        pk = shape("past_key")
        if pk is None or len(pk) != 4:
            return None
        past = pk[2]
    mask = shape("attn_mask")
    scale = attrs.get("scale")
    scale = 1.0 / np.sqrt(dq) if scale is None else float(scale)
    elem = value_elem(op.input_ports["Q"], dtype_of) or "float32"
    return {"rank": len(q), "q4": q4, "k4": k4, "v4": v4, "perm": [0, 1, 2, 3] if len(q) == 4 else [0, 2, 1, 3],
            "hq": hq, "hk": hk, "groups": hq // hk, "sq": sq, "past": past, "total": past + skv, "mask": mask,
            "scale_root": float(np.asarray(np.sqrt(scale), dtype=elem))}


def tf_nhwc_perm(rank: int, to_nhwc: bool = True) -> np.ndarray:
    """The int32 ``perm`` of a TensorFlow Transpose from channels-first to channels-last (``to_nhwc``) or back."""
    return np.asarray(perm_to_nhwc(rank) if to_nhwc else perm_to_nchw(rank), np.int32)


def tf_filter_perm(rank: int) -> np.ndarray:
    """The int32 ``perm`` taking an ONNX filter ``[O, I, k1, ...]`` to TensorFlow's ``[k1, ..., I, O]``."""
    return np.asarray([*range(2, rank), 1, 0], np.int32)


def onnx_tf_window(x_shape: Any, kernel: Sequence[int] | None, auto_pad: Any = "NOTSET", pads: Any = None,
                   strides: Any = None, dilations: Any = None, ceil_mode: int = 0) -> dict[str, Any] | None:
    """An ONNX convolution or pooling window over an input of shape ``x_shape`` (``[N, C, d1, ...]``) as
    channels-last TensorFlow operands: ``strides``/``dilations``/``ksize`` lists over ``[N, d1, ..., C]``,
    ``paddings`` (int64 ``[rank, 2]``, channels last) for an explicit Pad, ``pads`` (ONNX order) and the
    spatial ``out`` sizes.  None when the pads depend on unknown sizes or ``ceil_mode`` would give another output
    size than floor division (the window then reads past the padding)."""
    if x_shape is None or kernel is None:
        return None
    n = len(kernel)
    spatial_shape = list(x_shape)[2:]
    if len(spatial_shape) != n:
        return None
    strides = [int(s) for s in strides] if strides else [1] * n
    dilations = [int(d) for d in dilations] if dilations else [1] * n
    try:
        explicit = onnx_conv_pads(auto_pad, list(pads) if pads else None, spatial_shape, list(kernel), strides,
                                  dilations)
    except ValueError:
        return None
    if explicit is None or len(explicit) != 2 * n or any(int(p) < 0 for p in explicit):
        return None
    out: list[int | None] = []
    for i, (d, k, s, dl) in enumerate(zip(spatial_shape, kernel, strides, dilations)):
        if d is None:
            if ceil_mode:
                return None
            out.append(None)
            continue
        span = int(d) + int(explicit[i]) + int(explicit[n + i]) - ((int(k) - 1) * dl + 1)
        if span < 0:
            return None
        if ceil_mode and span % s:
            return None
        out.append(span // s + 1)
    return {"strides": [1, *strides, 1], "dilations": [1, *dilations, 1], "ksize": [1, *[int(k) for k in kernel], 1],
            "paddings": onnx_to_tf_pads(explicit, n + 2, "NHWC"), "pads": [int(p) for p in explicit], "out": out}


__all__ += ["onnx_fill_value", "tf_scalar"]


def onnx_fill_value(value: Any) -> np.ndarray:
    """ConstantOfShape's ``value`` (a one-element tensor; absent: float32 0) as the 0-d array TF's Fill takes."""
    if value is None:
        return np.zeros((), np.float32)
    arr = np.asarray(value)
    if arr.size != 1:
        raise ValueError(f"a ConstantOfShape value of {arr.size} elements")
    return arr.reshape(())


def tf_scalar(value: Any, dtype: str) -> np.ndarray:
    """``value`` as a 0-d array of ``dtype`` (a scalar operand of a TF op)."""
    return np.asarray(value, dtype=dtype).reshape(())


__all__ += ["port_fed", "onnx_gru_torch_form", "tf_filter", "onnx_tf_conv_transpose"]


def port_fed(op: Any, name: str) -> bool:
    """Whether ``op`` has an input port ``name`` that something feeds (an optional ONNX input given)."""
    ports = op.input_ports
    try:
        port = ports[name]
    except (KeyError, IndexError, TypeError):
        return False
    return port is not None and port.source is not None


def _constant_array(op: Any, name: str) -> Any:
    """The array a constant (``Initializer`` or ``Constant``) feeding input ``name`` of ``op`` holds, else None."""
    try:
        port = op.input_ports[name]
    except (KeyError, IndexError, TypeError):
        return None
    producer = port.producer if port is not None else None
    if producer is None or producer.type not in ("Initializer", "Constant"):
        return None
    value = onnx_constant_value(producer.attrs) if producer.type == "Constant" else producer.attrs.get("value")
    return value if is_tensor(value) else None


def onnx_gru_torch_form(op: Any) -> int:
    """The number of directions (1 or 2) of an ONNX GRU that torch's own GRU computes, 0 for any other:
    ``linear_before_reset = 1``, forward or bidirectional, ``layout`` 0, no ``clip``, the default activations,
    ``W``, ``R`` (and ``B``) float32 constants of the shapes ``hidden_size`` gives, an initial state given, no
    ``sequence_lens``, outputs ``Y`` and ``Y_h``.  Both the rules that make it ``aten::gru.input`` and the pass
    that would otherwise unroll it ask this."""
    attrs = op.attrs
    hs = attrs.get("hidden_size")
    direction = attrs.get("direction") or "forward"
    direction = direction.decode() if isinstance(direction, bytes) else direction
    n = {"forward": 1, "bidirectional": 2}.get(direction)
    act = attrs.get("activations")
    if (op.type != "GRU" or attrs.get("linear_before_reset") != 1 or n is None or not isinstance(hs, int)
            or attrs.get("layout") not in (None, 0) or attrs.get("clip") is not None
            or (act is not None and [str(a).lower() for a in act] != ["sigmoid", "tanh"] * n)
            or len(op.outputs) != 2 or not port_fed(op, "initial_h") or port_fed(op, "sequence_lens")):
        return 0
    w, r, b = (_constant_array(op, name) for name in ("W", "R", "B"))
    if w is None or r is None or (b is None and port_fed(op, "B")):
        return 0
    if array_elem(w) != "float32" or len(w.shape) != 3 or w.shape[0] != n or tuple(r.shape) != (n, 3 * hs, hs):
        return 0
    return n if b is None or tuple(b.shape) == (n, 6 * hs) else 0


def tf_filter(w: Any) -> np.ndarray:
    """An ONNX filter ``[O, I, k1, ...]`` as TensorFlow's ``[k1, ..., I, O]`` (a constant folded at conversion)."""
    arr = np.asarray(w)
    return np.ascontiguousarray(np.transpose(arr, tf_filter_perm(arr.ndim)))


def onnx_tf_conv_transpose(x_shape: Any, w_shape: Any, group: int = 1, auto_pad: Any = "NOTSET", pads: Any = None,
                           strides: Any = None, dilations: Any = None, output_padding: Any = None,
                           output_shape: Any = None) -> dict[str, Any] | None:
    """An ONNX ConvTranspose (2-D, one group, no dilation, explicit pads) on static shapes as a TensorFlow
    ``Conv2DBackpropInput`` with VALID padding (the full output, channels last: ``input_sizes``, ``strides``),
    then ``output_padding`` zeros added at the ends (``paddings``) and the ONNX pads cropped
    (``begin``/``end`` for a StridedSlice over ``[N, d1, ..., C]``); None otherwise."""
    if x_shape is None or w_shape is None or any(d is None for d in list(x_shape) + list(w_shape)):
        return None
    if len(x_shape) != 4 or len(w_shape) != 4 or int(group) != 1 or output_shape:
        return None
    mode = auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad or "NOTSET")
    if mode not in ("NOTSET", "VALID"):
        return None
    n = 2
    strides = [int(s) for s in strides] if strides else [1] * n
    if dilations and any(int(d) != 1 for d in dilations):
        return None
    pads = [int(p) for p in pads] if pads and mode == "NOTSET" else [0] * (2 * n)
    extra = [int(p) for p in output_padding] if output_padding else [0] * n
    if len(pads) != 2 * n or len(extra) != n or any(p < 0 for p in pads + extra):
        return None
    kernel = [int(k) for k in w_shape[2:]]
    full = [(int(d) - 1) * s + k for d, s, k in zip(x_shape[2:], strides, kernel)]
    padded = [f + e for f, e in zip(full, extra)]
    out = [p - pads[i] - pads[n + i] for i, p in enumerate(padded)]
    if any(o <= 0 for o in out):
        return None
    batch, c_out = int(x_shape[0]), int(w_shape[1])
    return {"input_sizes": np.asarray([batch, *full, c_out], np.int32), "strides": [1, *strides, 1],
            "paddings": np.asarray([[0, 0], *[[0, e] for e in extra], [0, 0]], np.int64),
            "begin": np.asarray([0, *pads[:n], 0], np.int64),
            "end": np.asarray([batch, *[pads[i] + out[i] for i in range(n)], c_out], np.int64)}


__all__ += ["tf_lowest", "avgpool_divisor"]


def tf_lowest(dtype: str) -> np.ndarray:
    """The lowest value of an element type as a 0-d array (-inf for floats): a padding no maximum picks."""
    nd = np.dtype(dtype)
    low = -np.inf if nd.kind == "f" else np.iinfo(nd).min
    return np.asarray(low, dtype=nd).reshape(())


def avgpool_divisor(x_shape: Any, window: dict[str, Any] | None, dtype: str = "float32") -> np.ndarray | None:
    """For an average pool that does not count padding (``count_include_pad = 0``): per output position, the
    share of the window that lies inside the input (``count / window size``), an array ``[1, o1, ..., 1]`` to
    divide the padded-with-zeros average by.  ``window`` is :func:`onnx_tf_window`'s; None when a size is
    unknown."""
    if window is None or x_shape is None:
        return None
    spatial = list(x_shape)[2:]
    n = len(spatial)
    if any(d is None for d in spatial) or any(o is None for o in window["out"]):
        return None
    kernel, strides, pads = window["ksize"][1:-1], window["strides"][1:-1], window["pads"]
    share = np.ones([1], np.float64)
    for i in range(n):
        d, k, s, b = int(spatial[i]), int(kernel[i]), int(strides[i]), int(pads[i])
        starts = np.arange(int(window["out"][i])) * s - b
        counts = np.minimum(starts + k, d) - np.maximum(starts, 0)
        share = np.multiply.outer(share, counts / k)
    return share.reshape([1, *[int(o) for o in window["out"]], 1]).astype(dtype)


__all__ += ["unsqueeze_plan"]


def unsqueeze_plan(axes: Any, rank: int) -> dict[str, np.ndarray] | None:
    """ONNX Unsqueeze of a rank-``rank`` tensor at ``axes`` (of the output) as a run-time shape: the input's sizes
    scattered to ``indices`` (int64 ``[rank, 1]``) of a zero vector of ``size`` (``[rank + len(axes)]``), plus
    ``ones`` (1 at the new axes); None when an axis repeats or is out of range."""
    values = [int(v) for v in np.asarray(axes).reshape(-1)]
    out_rank = rank + len(values)
    try:
        new = normalize_axes(values, out_rank)
    except ValueError:
        return None
    if len(set(new)) != len(new):
        return None
    keep = [j for j in range(out_rank) if j not in new]
    ones = np.zeros(out_rank, np.int64)
    ones[new] = 1
    return {"indices": np.asarray(keep, np.int64).reshape(-1, 1), "size": np.asarray([out_rank], np.int64),
            "ones": ones}


__all__ += ["tensor_elem"]


def tensor_elem(port: Any) -> str | None:
    """:func:`value_elem` of a tensor value, also when the value's dtype is text of another type system
    (``float32[4,6]`` on a port a TF op wrote); None for a sequence, an optional or an unknown type (which
    ``value_elem`` refuses with an error)."""
    try:
        elem = value_elem(port)
    except (TypeError, ValueError):
        elem = None
    if elem is not None:
        return elem
    # a dtype written by another type system (``float32[4,6]``, the text a TF op's port carries): its element name
    text = getattr(port, "dtype", None)
    if text is None and getattr(port, "is_input", False) and getattr(port, "source", None) is not None:
        text = port.source.dtype
    head = str(text).split("[", 1)[0] if text is not None else ""
    return head if head in _TF_CONST_DTYPES else None



def onnx_tfidf_plan(attrs: Any, length: Any) -> dict[str, Any] | None:
    """An ONNX TfIdfVectorizer over rows of ``length`` items as constants for a comparison of windows (None when
    the attributes are not a vectorizer this can compute):

    * ``pos`` [S, N]: the row positions of every window: each n-gram size n the pool holds within
      [min_gram_length, max_gram_length], each skip distance d (1 for n = 1, else 1 .. max_skip_count + 1), each
      start s with s + (n - 1) d inside the row (positions past n are 0);
    * ``grams`` [K, N]: the pool's n-grams (a repeated one keeps its last id, as ONNX's reference), ``free`` [K, N]:
      the positions past each n-gram's size, ``fits`` [S, K]: window s and n-gram k have one size;
    * ``index`` [K, out]: n-gram k counts at output ``ngram_indexes[id - 1]``; ``cap`` and ``weights`` [out]:
      the output is min(count, cap) * weights (TF: cap inf, weights 1; IDF: cap 1; TFIDF: cap inf)."""
    def text(v: Any) -> str:
        return v.decode() if isinstance(v, bytes) else str(v)

    get = attrs.get
    if length is None or int(length) < 1:
        return None
    length = int(length)
    lo, hi, skip = int(get("min_gram_length") or 0), int(get("max_gram_length") or 0), int(get("max_skip_count") or 0)
    counts = [int(c) for c in (get("ngram_counts") or [])]
    indexes = [int(i) for i in (get("ngram_indexes") or [])]
    ints, strings = get("pool_int64s"), get("pool_strings")
    pool = [int(v) for v in ints] if ints else [text(v).encode("utf-8") for v in (strings or [])]
    mode = text(get("mode") or "")
    weights = get("weights")
    if lo < 1 or hi < lo or skip < 0 or not pool or not counts or not indexes or mode not in ("TF", "IDF", "TFIDF"):
        return None
    out = max(indexes) + 1
    if min(indexes) < 0 or (weights is not None and len(weights) and len(weights) != out):
        return None
    ids: dict[tuple[Any, ...], int] = {}
    next_id = 1
    for size, start in enumerate(counts, 1):
        end = counts[size] if size < len(counts) else len(pool)
        if end < start or end > len(pool) or (end - start) % size:
            return None
        for g in range(start, end, size):
            if lo <= size <= hi:
                ids[tuple(pool[g:g + size])] = next_id
            next_id += 1
    if not ids or max(ids.values()) > len(indexes):
        return None
    grams = list(ids)
    width = max(len(g) for g in grams)
    windows: list[tuple[int, list[int]]] = []
    for size in sorted({len(g) for g in grams}):
        for d in ([1] if size == 1 else range(1, skip + 2)):
            for s in range(length - (size - 1) * d):
                windows.append((size, [s + j * d for j in range(size)] + [0] * (width - size)))
    if not windows:
        return None
    fill: Any = 0 if ints else b""
    return {
        "pos": np.asarray([w for _, w in windows], np.int64),
        "grams": np.asarray([list(g) + [fill] * (width - len(g)) for g in grams], np.int64 if ints else object),
        "free": np.asarray([[j >= len(g) for j in range(width)] for g in grams], bool),
        "fits": np.asarray([[n == len(g) for g in grams] for n, _ in windows], bool),
        "index": np.asarray([[1.0 if indexes[ids[g] - 1] == o else 0.0 for o in range(out)] for g in grams],
                            np.float32),
        "cap": np.float32(1.0 if mode == "IDF" else np.inf),
        "weights": np.asarray(weights if mode != "TF" and weights is not None and len(weights) else [1.0] * out,
                              np.float32),
        "width": width, "out": out, "strings": not ints,
    }


__all__ += ["onnx_tfidf_plan"]


def onnx_label_encoder(attrs: Any) -> dict[str, Any] | None:
    """An ONNX-ML LabelEncoder's map as arrays: ``keys`` [K] and ``values`` [K] (from ``keys_*``/``values_*`` or
    the tensor attributes), ``default`` (a 0-d array of the values' type: ``default_*``, else -1, "_Unused" or
    -0.0), ``kind`` ('string', 'int64', 'float32', ... of the keys).  None when the keys repeat or hold NaN (a
    lookup by equality could not tell them apart) or the lengths differ."""
    get = attrs.get

    def pick(prefix: str) -> np.ndarray | None:
        for suffix, dtype in (("strings", object), ("int64s", np.int64), ("floats", np.float32)):
            v = get(f"{prefix}_{suffix}")
            if v is not None and len(v):
                if dtype is object:
                    return np.asarray([w if isinstance(w, bytes) else str(w).encode() for w in v], object)
                return np.asarray(v, dtype)
        t = get(f"{prefix}_tensor")
        return None if t is None else np.asarray(t).reshape(-1)

    keys, values = pick("keys"), pick("values")
    if keys is None or values is None or len(keys) != len(values) or not len(keys):
        return None
    if len(set(keys.tolist())) != len(keys) or (keys.dtype.kind == "f" and bool(np.isnan(keys).any())):
        return None
    if values.dtype == object:
        values = np.asarray([w if isinstance(w, bytes) else str(w).encode() for w in values], object)
    d = get("default_tensor")
    if d is not None:
        default = np.asarray(d).reshape(-1)[0]
    elif values.dtype == object:
        default = get("default_string") if get("default_string") is not None else b"_Unused"
        default = default if isinstance(default, bytes) else str(default).encode()
    elif values.dtype.kind == "f":
        default = get("default_float") if get("default_float") is not None else -0.0
    else:
        default = get("default_int64") if get("default_int64") is not None else -1
    kind = "string" if keys.dtype == object else keys.dtype.name
    return {"keys": keys, "values": values, "default": np.asarray(default, values.dtype).reshape(()), "kind": kind,
            "value_kind": "string" if values.dtype == object else values.dtype.name}


__all__ += ["onnx_label_encoder"]

# --------------------------------------------------------------------------- end of ONNX -> TensorFlow conversions


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

    def parsed_value_type(port: Any) -> Any:
        # a dtype left as text (written in another type system than the port's namespace reads, as happens
        # while a conversion moves ops between families) is parsed by whichever registered system reads it
        dtype = value_dtype(port)
        if isinstance(dtype, str) and type_systems is not None:
            for name in type_systems.names():
                ts = type_systems.get(name)
                try:
                    parsed = ts.parse_dtype(dtype) if ts is not None else None
                except Exception:  # noqa: BLE001 - not a text this system reads
                    continue
                if parsed is not None and not isinstance(parsed, str):
                    return parsed
        return dtype

    def tensor_dtype(port: Any) -> str | None:
        """The element type name (``float32``) of the tensor at ``port``, whichever type system wrote its dtype;
        None when the value is not a tensor or its element type is unknown."""
        return _tensor_dtype_of(parsed_value_type(port))

    def shape_of(port: Any) -> list[Any] | None:
        """The shape at ``port`` (ints, None for unknown or symbolic sizes; None when the rank is unknown),
        whichever type system wrote its dtype."""
        return _shape_of(parsed_value_type(port))

    def rank_of(port: Any) -> int | None:
        shape = shape_of(port)
        return None if shape is None else len(shape)

    def static_shape_of(port: Any) -> list[int] | None:
        shape = shape_of(port)
        return None if shape is None or any(d is None for d in shape) else [int(d) for d in shape]

    def same_tensor_dtype(*ports: Any) -> bool:
        """Whether every port carries a tensor of one known element type."""
        names = [tensor_dtype(p) for p in ports]
        return bool(names) and names[0] is not None and all(n == names[0] for n in names)

    lib["dtype_name"] = dtype_name
    lib["convert_dtype"] = convert_dtype

    # value types at ports (ONNX -> framework conversions): a dtype string that the type system of the port's
    # current namespace cannot parse (a value made by an op a rule already converted) is parsed by the registered
    # type system that can
    def any_value_dtype(port: Any) -> Any:
        dtype = value_dtype(port)
        if isinstance(dtype, str) and type_systems is not None:
            for name in type_systems.names():
                ts = type_systems.get(name)
                try:
                    parsed = ts.parse_dtype(dtype) if ts is not None else None
                except Exception:  # noqa: BLE001 - not this type system's spelling
                    continue
                if _elem_of(parsed) is not None:
                    return parsed
        return dtype

    lib["value_dtype"] = any_value_dtype
    for helper in (port_shape, port_rank, static_shape, value_elem, attention_dims, onnx_size_list, onnx_size_range,
                   onnx_size_element, onnx_size_int):
        lib[helper.__name__] = functools.partial(helper, dtype_of=any_value_dtype)
    def tensor_type_of(value: Any, shape: Sequence[Any] | None = None, system: str = "onnx") -> str | None:
        """The port dtype text, in type system ``system``, of a tensor whose element type is that of the tensor at
        port ``value`` (or the element type name ``value``) and whose shape is ``shape`` (None: rank unknown), for
        the output ports of ops a rule makes."""
        elem = value if isinstance(value, str) else tensor_dtype(value)
        ts = type_systems.get(system) if type_systems is not None else None
        if elem is None or ts is None:
            return None
        return ts.make_tensor_type(elem, None if shape is None else tuple(shape))

    lib["tensor_dtype"] = tensor_dtype
    lib["tensor_type_of"] = tensor_type_of
    lib["shape_of"] = shape_of
    lib["rank_of"] = rank_of
    lib["static_shape_of"] = static_shape_of
    lib["same_tensor_dtype"] = same_tensor_dtype
    return lib
