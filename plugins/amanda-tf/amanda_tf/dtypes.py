"""TensorFlow element types: the ``DataType`` table and the port dtype strings.

The table
---------
:data:`DTYPES` lists every value of TensorFlow's ``DataType`` enum
(``tensorflow/core/framework/types.proto``) except ``DT_INVALID``: its number,
the name TensorFlow prints (``tf.float32.name == "float32"``) and the numpy
element type that holds its values.  Reference types (``DT_FLOAT_REF``, the
type of a ``VariableV2`` output) are the base number plus 100 and print as
``float32_ref``.  Invariants, checked against the installed TensorFlow by the
tests: names and numbers are unique and agree with ``tf.as_dtype``; the numpy
name of a quantized type (``qint8``) is its storage type (``int8``); ``string``
is held in numpy ``object`` arrays of ``bytes``; ``resource`` and ``variant``
have no numpy type.  The table needs no TensorFlow at run time.

Port dtype strings
------------------
A port's dtype in the IR is a string (as in examples/seed and examples/schemas/tensorflow-1.13.1.yaml):

=======================  =================================================
``float32``              a float32 tensor of unknown shape
``float32_ref``          a reference to a float32 variable (``Ref(T)``)
``float32[1,784]``       a float32 tensor of shape (1, 784)
``float32[?,784]``       the first dimension is unknown
``float32[]``            a scalar
``float32_ref[784,10]``  a reference with a known shape
=======================  =================================================

The grammar is ``NAME ["_ref"] ["[" [DIM {"," DIM}] "]"]`` with ``DIM`` a
non-negative integer or ``?``; no shape part means the rank is unknown.
:func:`parse_dtype` turns such a string into a :class:`TFDType`, whose
``str()`` gives the canonical text back (no spaces), so
``str(parse_dtype(s)) == s`` for every canonical ``s``.
"""

from __future__ import annotations

__all__ = [
    "DTYPES",
    "REF_OFFSET",
    "DTypeError",
    "DTypeInfo",
    "TFDType",
    "dtype_enum",
    "dtype_from_enum",
    "dtype_from_numpy",
    "dtype_names",
    "is_dtype_name",
    "numpy_dtype",
    "parse_dtype",
]

import re
from typing import Any

import attrs
import numpy as np

from amanda_core.errors import FormatError

REF_OFFSET = 100
"""``DT_<X>_REF == DT_<X> + 100`` in TensorFlow's ``DataType`` enum."""


class DTypeError(FormatError, ValueError):
    """A dtype name or port dtype string that is not TensorFlow's."""


@attrs.frozen
class DTypeInfo:
    """One row of the ``DataType`` table.

    ``numpy`` is the numpy element type name that holds values of this type
    (``None`` for ``resource`` and ``variant``); ``quantized`` marks the
    ``q*`` types whose numpy name is only their storage type.
    """

    enum: int
    name: str
    numpy: str | None
    quantized: bool = False


DTYPES: tuple[DTypeInfo, ...] = (
    DTypeInfo(1, "float32", "float32"),
    DTypeInfo(2, "float64", "float64"),
    DTypeInfo(3, "int32", "int32"),
    DTypeInfo(4, "uint8", "uint8"),
    DTypeInfo(5, "int16", "int16"),
    DTypeInfo(6, "int8", "int8"),
    DTypeInfo(7, "string", "object"),
    DTypeInfo(8, "complex64", "complex64"),
    DTypeInfo(9, "int64", "int64"),
    DTypeInfo(10, "bool", "bool"),
    DTypeInfo(11, "qint8", "int8", quantized=True),
    DTypeInfo(12, "quint8", "uint8", quantized=True),
    DTypeInfo(13, "qint32", "int32", quantized=True),
    DTypeInfo(14, "bfloat16", "bfloat16"),
    DTypeInfo(15, "qint16", "int16", quantized=True),
    DTypeInfo(16, "quint16", "uint16", quantized=True),
    DTypeInfo(17, "uint16", "uint16"),
    DTypeInfo(18, "complex128", "complex128"),
    DTypeInfo(19, "float16", "float16"),
    DTypeInfo(20, "resource", None),
    DTypeInfo(21, "variant", None),
    DTypeInfo(22, "uint32", "uint32"),
    DTypeInfo(23, "uint64", "uint64"),
    DTypeInfo(24, "float8_e5m2", "float8_e5m2"),
    DTypeInfo(25, "float8_e4m3fn", "float8_e4m3fn"),
    DTypeInfo(26, "float8_e4m3fnuz", "float8_e4m3fnuz"),
    DTypeInfo(27, "float8_e4m3b11fnuz", "float8_e4m3b11fnuz"),
    DTypeInfo(28, "float8_e5m2fnuz", "float8_e5m2fnuz"),
    DTypeInfo(29, "int4", "int4"),
    DTypeInfo(30, "uint4", "uint4"),
    DTypeInfo(31, "int2", "int2"),
    DTypeInfo(32, "uint2", "uint2"),
    DTypeInfo(33, "float4_e2m1fn", "float4_e2m1fn"),
)

_BY_NAME: dict[str, DTypeInfo] = {d.name: d for d in DTYPES}
_BY_ENUM: dict[int, DTypeInfo] = {d.enum: d for d in DTYPES}
_REF = "_ref"


def dtype_names(*, refs: bool = False) -> list[str]:
    """Every dtype name in enum order (with the ``_ref`` names after them if ``refs``)."""
    names = [d.name for d in DTYPES]
    return names + [n + _REF for n in names] if refs else names


def is_dtype_name(name: object, *, ref: bool | None = False) -> bool:
    """True if ``name`` is a dtype name; ``ref``: False (plain only), True (``_ref`` only), None (either)."""
    if not isinstance(name, str):
        return False
    if name.endswith(_REF):
        return ref is not False and name[: -len(_REF)] in _BY_NAME
    return ref is not True and name in _BY_NAME


def _info(name: str) -> tuple[DTypeInfo, bool]:
    is_ref = name.endswith(_REF)
    info = _BY_NAME.get(name[: -len(_REF)] if is_ref else name)
    if info is None:
        raise DTypeError(f"unknown TensorFlow dtype {name!r}{_suggest(name)}")
    return info, is_ref


def dtype_enum(name: str) -> int:
    """TensorFlow's ``DataType`` number of ``name`` (``float32`` -> 1, ``float32_ref`` -> 101)."""
    info, is_ref = _info(name)
    return info.enum + (REF_OFFSET if is_ref else 0)


def dtype_from_enum(number: int) -> str:
    """The dtype name of a ``DataType`` number (1 -> ``float32``, 101 -> ``float32_ref``)."""
    is_ref = number > REF_OFFSET
    info = _BY_ENUM.get(number - REF_OFFSET if is_ref else number)
    if info is None:
        raise DTypeError(f"unknown TensorFlow DataType number {number}")
    return info.name + (_REF if is_ref else "")


def numpy_dtype(name: str) -> np.dtype[Any] | None:
    """The numpy dtype holding values of ``name`` (ref or not); None for ``resource``/``variant``.

    ``bfloat16``, ``float8_*``, ``int4`` and the like come from :mod:`ml_dtypes`."""
    info, _ = _info(name)
    if info.numpy is None:
        return None
    from amanda_core.ir.tensor import resolve_dtype

    return resolve_dtype(info.numpy)


_FROM_NUMPY: dict[str, str] = {d.numpy: d.name for d in DTYPES if d.numpy is not None and not d.quantized}


def dtype_from_numpy(dtype: Any) -> str:
    """The TensorFlow dtype name of a numpy dtype (``object`` and ``bytes_`` give ``string``)."""
    try:
        nd = np.dtype(dtype)
    except TypeError:
        raise DTypeError(f"{dtype!r} is not a numpy dtype") from None
    if nd.kind in "OSU":
        return "string"
    name = _FROM_NUMPY.get(nd.name)
    if name is None:
        raise DTypeError(f"numpy dtype {nd.name!r} has no TensorFlow counterpart")
    return name


def _suggest(name: str) -> str:
    import difflib

    close = difflib.get_close_matches(name, dtype_names(refs=True), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


# --------------------------------------------------------------------------- port dtype strings


@attrs.frozen
class TFDType:
    """A parsed port dtype: element type, reference-ness and (maybe) shape.

    ``shape`` is None when the rank is unknown; otherwise a tuple whose items
    are sizes or None for unknown dimensions.  ``str()`` is the canonical text.
    """

    name: str
    is_ref: bool = False
    shape: tuple[int | None, ...] | None = None

    def __attrs_post_init__(self) -> None:
        if self.name not in _BY_NAME:
            raise DTypeError(f"unknown TensorFlow dtype {self.name!r}{_suggest(self.name)}")

    @property
    def full_name(self) -> str:
        """The dtype name with reference-ness (``float32_ref``), without the shape."""
        return self.name + (_REF if self.is_ref else "")

    @property
    def enum(self) -> int:
        """TensorFlow's ``DataType`` number (ref types included)."""
        return dtype_enum(self.full_name)

    @property
    def numpy_dtype(self) -> np.dtype[Any] | None:
        return numpy_dtype(self.name)

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def base(self) -> TFDType:
        """The same element type, not a reference, shape dropped."""
        return TFDType(self.name)

    def shape_list(self) -> list[int] | None:
        """The shape as Amanda holds TF shape attributes: ints with -1 for unknown dims, None for unknown rank."""
        return None if self.shape is None else [-1 if d is None else d for d in self.shape]

    def __str__(self) -> str:
        if self.shape is None:
            return self.full_name
        return f"{self.full_name}[{','.join('?' if d is None else str(d) for d in self.shape)}]"


_DTYPE_RE = re.compile(r"^\s*([a-z][a-z0-9_]*?)(_ref)?\s*(?:\[([^\[\]]*)\])?\s*$")


def parse_dtype(text: str) -> TFDType:
    """Parse a port dtype string (see the module docs); raises :class:`DTypeError` saying what is wrong."""
    if isinstance(text, TFDType):
        return text
    if not isinstance(text, str):
        raise DTypeError(f"a TensorFlow port dtype is a string such as 'float32', got {type(text).__name__} "
                         f"{text!r}")
    m = _DTYPE_RE.match(text)
    if m is None:
        raise DTypeError(f"cannot read TensorFlow dtype {text!r}: expected NAME, NAME_ref, NAME[d0,d1,...] "
                         "with '?' for an unknown dimension")
    name, ref, dims = m.group(1), m.group(2), m.group(3)
    if name not in _BY_NAME:
        raise DTypeError(f"unknown TensorFlow dtype {name + (ref or '')!r} in {text!r}{_suggest(name)}")
    shape: tuple[int | None, ...] | None = None
    if dims is not None:
        parts = [p.strip() for p in dims.split(",")] if dims.strip() else []
        out: list[int | None] = []
        for p in parts:
            if p == "?":
                out.append(None)
            elif p.isdigit():
                out.append(int(p))
            elif p.lstrip("-").isdigit():
                raise DTypeError(f"dimension {p!r} in {text!r}: write '?' for an unknown dimension")
            else:
                raise DTypeError(f"dimension {p!r} in {text!r} is neither a size nor '?'")
        shape = tuple(out)
    return TFDType(name, ref is not None, shape)
