"""Tables of torch's enumerations: ScalarType, Layout, MemoryFormat, QScheme.

Each row ties together the spellings one value has across the stack:

* ``ScalarType``: the TorchScript / C++ name printed in graph value types
  (``Float``), the ``torch.dtype`` name (``float32``, also numpy's name when
  numpy has the type), the numpy (or :mod:`ml_dtypes`) name or ``None`` when
  numpy has no such type, and the enum number TorchScript uses for a dtype
  value (``prim::Constant[value=6]`` is ``float32``);
* ``Layout`` and ``MemoryFormat``: C++ name, ``torch.`` attribute name and the
  enum number TorchScript uses;
* ``QScheme``: C++ name, ``torch.`` attribute name and enum number.

Invariant: within one table every number, every C++ name and every torch name
is unique, and the tables are written out here (not read from torch), so they
are available without importing torch.  ``tests/test_torch_types.py`` checks
them against the installed torch.
"""

from __future__ import annotations

__all__ = [
    "ScalarTypeInfo",
    "EnumInfo",
    "SCALAR_TYPES",
    "LAYOUTS",
    "MEMORY_FORMATS",
    "QSCHEMES",
    "scalar_type",
    "lookup_scalar_type",
    "lookup_enum",
]

from typing import Any, NamedTuple


class ScalarTypeInfo(NamedTuple):
    """One element type: enum number, TorchScript name, torch dtype name, numpy name."""

    number: int
    script_name: str
    torch_name: str
    numpy_name: str | None
    itemsize: int
    is_floating_point: bool = False
    is_complex: bool = False


class EnumInfo(NamedTuple):
    """One value of a small torch enumeration (Layout, MemoryFormat, QScheme)."""

    number: int
    cpp_name: str
    torch_name: str


_S = ScalarTypeInfo
SCALAR_TYPES: tuple[ScalarTypeInfo, ...] = (
    _S(0, "Byte", "uint8", "uint8", 1),
    _S(1, "Char", "int8", "int8", 1),
    _S(2, "Short", "int16", "int16", 2),
    _S(3, "Int", "int32", "int32", 4),
    _S(4, "Long", "int64", "int64", 8),
    _S(5, "Half", "float16", "float16", 2, True),
    _S(6, "Float", "float32", "float32", 4, True),
    _S(7, "Double", "float64", "float64", 8, True),
    _S(8, "ComplexHalf", "complex32", None, 4, False, True),
    _S(9, "ComplexFloat", "complex64", "complex64", 8, False, True),
    _S(10, "ComplexDouble", "complex128", "complex128", 16, False, True),
    _S(11, "Bool", "bool", "bool", 1),
    _S(12, "QInt8", "qint8", None, 1),
    _S(13, "QUInt8", "quint8", None, 1),
    _S(14, "QInt32", "qint32", None, 4),
    _S(15, "BFloat16", "bfloat16", "bfloat16", 2, True),
    _S(16, "QUInt4x2", "quint4x2", None, 1),
    _S(17, "QUInt2x4", "quint2x4", None, 1),
    _S(18, "Bits1x8", "bits1x8", None, 1),
    _S(19, "Bits2x4", "bits2x4", None, 1),
    _S(20, "Bits4x2", "bits4x2", None, 1),
    _S(21, "Bits8", "bits8", None, 1),
    _S(22, "Bits16", "bits16", None, 2),
    _S(23, "Float8_e5m2", "float8_e5m2", "float8_e5m2", 1, True),
    _S(24, "Float8_e4m3fn", "float8_e4m3fn", "float8_e4m3fn", 1, True),
    _S(25, "Float8_e5m2fnuz", "float8_e5m2fnuz", "float8_e5m2fnuz", 1, True),
    _S(26, "Float8_e4m3fnuz", "float8_e4m3fnuz", "float8_e4m3fnuz", 1, True),
    _S(27, "UInt16", "uint16", "uint16", 2),
    _S(28, "UInt32", "uint32", "uint32", 4),
    _S(29, "UInt64", "uint64", "uint64", 8),
    _S(30, "UInt1", "uint1", None, 1),
    _S(31, "UInt2", "uint2", "uint2", 1),
    _S(32, "UInt3", "uint3", None, 1),
    _S(33, "UInt4", "uint4", "uint4", 1),
    _S(34, "UInt5", "uint5", None, 1),
    _S(35, "UInt6", "uint6", None, 1),
    _S(36, "UInt7", "uint7", None, 1),
    _S(37, "Int1", "int1", None, 1),
    _S(38, "Int2", "int2", "int2", 1),
    _S(39, "Int3", "int3", None, 1),
    _S(40, "Int4", "int4", "int4", 1),
    _S(41, "Int5", "int5", None, 1),
    _S(42, "Int6", "int6", None, 1),
    _S(43, "Int7", "int7", None, 1),
    _S(44, "Float8_e8m0fnu", "float8_e8m0fnu", "float8_e8m0fnu", 1, True),
    _S(45, "Float4_e2m1fn_x2", "float4_e2m1fn_x2", None, 1, True),
)

# ``torch.float`` and friends: other names torch gives the same dtype.
_TORCH_ALIASES = {
    "float": "float32", "double": "float64", "half": "float16", "long": "int64", "int": "int32",
    "short": "int16", "cfloat": "complex64", "cdouble": "complex128", "chalf": "complex32",
}

LAYOUTS: tuple[EnumInfo, ...] = (
    EnumInfo(0, "Strided", "strided"),
    EnumInfo(1, "Sparse", "sparse_coo"),
    EnumInfo(2, "SparseCsr", "sparse_csr"),
    EnumInfo(3, "Mkldnn", "_mkldnn"),
    EnumInfo(4, "SparseCsc", "sparse_csc"),
    EnumInfo(5, "SparseBsr", "sparse_bsr"),
    EnumInfo(6, "SparseBsc", "sparse_bsc"),
    EnumInfo(7, "Jagged", "jagged"),
)

MEMORY_FORMATS: tuple[EnumInfo, ...] = (
    EnumInfo(0, "Contiguous", "contiguous_format"),
    EnumInfo(1, "Preserve", "preserve_format"),
    EnumInfo(2, "ChannelsLast", "channels_last"),
    EnumInfo(3, "ChannelsLast3d", "channels_last_3d"),
)

QSCHEMES: tuple[EnumInfo, ...] = (
    EnumInfo(0, "PER_TENSOR_AFFINE", "per_tensor_affine"),
    EnumInfo(1, "PER_CHANNEL_AFFINE", "per_channel_affine"),
    EnumInfo(2, "PER_TENSOR_SYMMETRIC", "per_tensor_symmetric"),
    EnumInfo(3, "PER_CHANNEL_SYMMETRIC", "per_channel_symmetric"),
    EnumInfo(4, "PER_CHANNEL_AFFINE_FLOAT_QPARAMS", "per_channel_affine_float_qparams"),
)

_BY_SCRIPT = {s.script_name: s for s in SCALAR_TYPES}
_BY_TORCH = {s.torch_name: s for s in SCALAR_TYPES}
_BY_NUMBER = {s.number: s for s in SCALAR_TYPES}


def scalar_type(script_name: str) -> ScalarTypeInfo | None:
    """The row of a TorchScript scalar type name (``Float``), or None."""
    return _BY_SCRIPT.get(script_name)


def lookup_scalar_type(value: Any) -> ScalarTypeInfo | None:
    """The row a ScalarType value stands for, or None.

    Accepted: the enum number (``6``), the TorchScript name (``Float``), the
    torch dtype name with or without ``torch.`` (``float32``, ``torch.float``),
    a numpy dtype or numpy type (``np.float32``), a ``torch.dtype`` object.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return _BY_NUMBER.get(value)
    if not isinstance(value, str):
        name = getattr(value, "name", None)  # numpy dtype
        if isinstance(name, str) and type(value).__module__.startswith("numpy"):
            value = name
        elif isinstance(value, type) and value.__module__ == "numpy":
            value = value.__name__
        elif type(value).__name__ == "dtype" and type(value).__module__ == "torch":
            value = str(value)
        else:
            return None
    assert isinstance(value, str)
    if value in _BY_SCRIPT:
        return _BY_SCRIPT[value]
    name = value[len("torch."):] if value.startswith("torch.") else value
    name = _TORCH_ALIASES.get(name, name)
    if name in _BY_TORCH:
        return _BY_TORCH[name]
    return None


def lookup_enum(table: tuple[EnumInfo, ...], value: Any) -> EnumInfo | None:
    """The row of ``table`` that ``value`` (number, C++ name, torch name, ``torch.`` name or object) stands for."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        for row in table:
            if row.number == value:
                return row
        return None
    if not isinstance(value, str):
        if type(value).__module__ == "torch":  # torch.layout / torch.memory_format / torch.qscheme objects
            value = str(value)
        else:
            return None
    name = value[len("torch."):] if value.startswith("torch.") else value
    for row in table:
        if name in (row.cpp_name, row.torch_name):
            return row
    return None
