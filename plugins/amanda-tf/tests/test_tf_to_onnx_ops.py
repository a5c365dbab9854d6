"""Per op: one small TF graph per op type the ``tf-to-onnx`` table maps (several attribute settings: strides,
paddings, data formats, dtypes), converted to ONNX with the plugin's tables and passes and run in onnxruntime
against TensorFlow on the same inputs.

``test_every_mapped_op_type_has_a_case`` reads the op types the table's rules match from its YAML parts and checks
that the graphs of the cases below (as imported) hold each of them, so a rule added without a case fails here.
Never imports torch (this process imports TensorFlow).
"""

from __future__ import annotations

import glob
import os
from typing import Any, Callable

import numpy as np
import pytest
import yaml

tf = pytest.importorskip("tensorflow")

TOL = 1e-5
TABLES = os.path.join(os.path.dirname(__file__), "..", "amanda_tf", "tables")
R = np.random.default_rng(0)


def _f(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (R.standard_normal(shape) * scale).astype(np.float32)


def _i(*shape: int, low: int = -9, high: int = 10, dtype: Any = np.int32) -> np.ndarray:
    return R.integers(low, high, shape).astype(dtype)


IMG = _f(2, 9, 10, 4)
VOL = _f(2, 5, 6, 7, 3)
W2 = _f(3, 3, 4, 6)
W3 = _f(2, 3, 2, 3, 4)

CASES: dict[str, tuple[Callable[..., Any], dict[str, np.ndarray], list[int | None] | None]] = {}
"""name -> (body, inputs by name, the first input's shape in the signature when not its exact shape)."""


def case(name: str, body: Callable[..., Any], batch: bool = False, **inputs: np.ndarray) -> None:
    """A case: ``body`` over named inputs; with ``batch`` every input's first dim is symbolic."""
    CASES[name] = (body, inputs, [None] if batch else None)


# ------------------------------------------------------------------ convolutions
for _s, _p, _d in [(1, "SAME", 1), (2, "SAME", 1), (2, "VALID", 1), (1, "VALID", 2), (1, "SAME", 2),
                   (3, "SAME", 1), (1, [[0, 0], [1, 2], [0, 3], [0, 0]], 1)]:
    case(f"Conv2D-s{_s}-{_p if isinstance(_p, str) else 'explicit'}-d{_d}",
         lambda x, s=_s, p=_p, d=_d: tf.nn.conv2d(x, W2, s, p, dilations=d), batch=True, x=IMG)
case("Conv2D-grouped", lambda x: tf.raw_ops.Conv2D(input=x, filter=_f(3, 3, 2, 6), strides=[1, 1, 1, 1],
                                                   padding="SAME"), x=IMG)
for _s, _p, _m in [(1, "SAME", 1), (2, "VALID", 2), (2, "SAME", 3)]:
    case(f"DepthwiseConv2dNative-s{_s}-{_p}-m{_m}",
         lambda x, s=_s, p=_p, m=_m: tf.nn.depthwise_conv2d(x, _f(3, 3, 4, m), [1, s, s, 1], p), batch=True, x=IMG)
for _s, _p in [(1, "SAME"), (2, "VALID"), (2, "SAME")]:
    case(f"Conv3D-s{_s}-{_p}", lambda x, s=_s, p=_p: tf.nn.conv3d(x, W3, [1, s, s, s, 1], p), batch=True, x=VOL)
for _s, _p, _out in [(2, "SAME", (10, 12)), (2, "VALID", (11, 13)), (1, "SAME", (5, 6)), (3, "VALID", (15, 18)),
                     (2, "SAME", (9, 11))]:
    case(f"Conv2DBackpropInput-s{_s}-{_p}-{_out[0]}x{_out[1]}",
         lambda x, s=_s, p=_p, o=_out: tf.nn.conv2d_transpose(x, _f(3, 3, 2, 4), [2, *o, 2], s, p), x=_f(2, 5, 6, 4))
case("Conv3DBackpropInputV2-s2-SAME",
     lambda x: tf.nn.conv3d_transpose(x, _f(3, 3, 3, 2, 3), [2, 10, 12, 14, 2], [1, 2, 2, 2, 1], "SAME"), x=VOL)
for _d, _p in [(2, "SAME"), (3, "VALID"), ([2, 3], "SAME")]:
    case(f"SpaceToBatchND-conv2d-d{_d}-{_p}",
         lambda x, d=_d, p=_p: tf.nn.convolution(x, W2, padding=p, dilations=d), batch=True, x=IMG)
case("SpaceToBatchND-conv1d-d2", lambda x: tf.nn.convolution(x, _f(3, 4, 5), padding="SAME", dilations=2),
     batch=True, x=_f(2, 11, 4))

# ------------------------------------------------------------------ pooling, batch norm
for _k, _s, _p in [(2, 2, "VALID"), (3, 2, "SAME"), (3, 1, "SAME")]:
    case(f"MaxPool-k{_k}-s{_s}-{_p}", lambda x, k=_k, s=_s, p=_p: tf.nn.max_pool2d(x, k, s, p), batch=True, x=IMG)
    case(f"AvgPool-k{_k}-s{_s}-{_p}", lambda x, k=_k, s=_s, p=_p: tf.nn.avg_pool2d(x, k, s, p), batch=True, x=IMG)
    case(f"MaxPool3D-k{_k}-s{_s}-{_p}", lambda x, k=_k, s=_s, p=_p: tf.nn.max_pool3d(x, k, s, p), x=VOL)
    case(f"AvgPool3D-k{_k}-s{_s}-{_p}", lambda x, k=_k, s=_s, p=_p: tf.nn.avg_pool3d(x, k, s, p), x=VOL)
_BN = [_f(4, scale=0.5) + 1.0, _f(4), _f(4), np.abs(_f(4)) + 0.5]
for _v in ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"):
    case(_v, lambda x, v=_v: getattr(tf.raw_ops, v)(x=x, scale=_BN[0], offset=_BN[1], mean=_BN[2], variance=_BN[3],
                                                     epsilon=0.01, is_training=False)[0], batch=True, x=IMG)

# ------------------------------------------------------------------ elementwise
_UNARY = ["Relu", "Sigmoid", "Tanh", "Exp", "Log", "Neg", "Abs", "Sqrt", "Floor", "Ceil", "Erf", "Softplus",
          "Softsign", "Selu", "Sin", "Cos", "Reciprocal", "Inv", "Sign", "Round", "Elu", "Relu6", "Rsqrt", "Square"]
_POS = {"Log", "Sqrt", "Rsqrt"}
_FEATURES = {"Relu", "Relu6", "Elu", "Selu", "Softplus", "Softsign"}


def _unary(x: Any, ops: list[str]) -> tuple[Any, ...]:
    return tuple(getattr(tf.raw_ops, u)(features=x) if u in _FEATURES else
                 getattr(tf.raw_ops, u)(x=tf.abs(x) + 0.1 if u in _POS else x) for u in ops)


for _k in range(0, len(_UNARY), 6):
    case("-".join(_UNARY[_k:_k + 6]), lambda x, ops=_UNARY[_k:_k + 6]: _unary(x, ops), batch=True,
         x=_f(3, 7, scale=3))
case("Round-halves", lambda x: tf.raw_ops.Round(x=x), x=np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49], np.float32))
for _a in (0.2, 0.01):
    case(f"LeakyRelu-{_a}", lambda x, a=_a: tf.nn.leaky_relu(x, a), x=_f(3, 7, scale=3))
_BIN = ["AddV2", "Add", "Sub", "Mul", "RealDiv", "Div", "Maximum", "Minimum", "SquaredDifference"]
case("binary-float32", lambda x, y: tuple(getattr(tf.raw_ops, b)(x=x, y=y) for b in _BIN), x=_f(3, 4),
     y=_f(4) + 3.0)
_BIN_INT = ["AddV2", "Sub", "Mul", "Maximum", "Minimum", "FloorDiv", "FloorMod", "TruncateDiv", "Div"]
case("binary-int32", lambda x, y: tuple(getattr(tf.raw_ops, b)(x=x, y=y) for b in _BIN_INT),
     x=_i(3, 4, low=0, high=50), y=_i(3, 4, low=1, high=7))
case("FloorDiv-int64-negative", lambda x, y: tf.math.floordiv(x, y), x=_i(3, 4, low=0, high=40, dtype=np.int64),
     y=_i(3, 4, low=1, high=6, dtype=np.int64))
case("Pow", lambda x, y: tf.pow(x, y), x=np.abs(_f(3, 4)) + 0.5, y=_f(3, 4))
_CMP = ["Greater", "Less", "Equal", "GreaterEqual", "LessEqual"]
case("comparisons-int32", lambda x, y: tuple(getattr(tf.raw_ops, c)(x=x, y=y) for c in _CMP),
     x=_i(3, 4, low=0, high=4), y=_i(3, 4, low=0, high=4))
case("comparisons-float32", lambda x, y: tuple(getattr(tf.raw_ops, c)(x=x, y=y) for c in _CMP),
     x=np.round(_f(3, 4)), y=np.round(_f(3, 4)))
case("LogicalAnd-Or-Not", lambda x, y: (tf.logical_and(x > 0, y > 0), tf.logical_or(x > 0, y > 0),
                                        tf.logical_not(x > 0)), x=_f(3, 4), y=_f(3, 4))
case("IsNan-IsFinite", lambda x: (tf.math.is_nan(x), tf.math.is_finite(x)),
     x=np.array([0.0, np.nan, np.inf, -np.inf, 1.0], np.float32))
case("SelectV2", lambda c, x, y: tf.where(c > 0, x, y), c=_f(3, 1), x=_f(3, 4), y=_f(4))
for _n, _fmt in [("NHWC", "NHWC"), ("default", None)]:
    case(f"BiasAdd-{_n}", lambda x, f=_fmt: tf.nn.bias_add(x, _f(4), data_format=f), batch=True, x=IMG)
case("Cast-float-int", lambda x: (tf.cast(x, tf.int32), tf.cast(x, tf.int64), tf.cast(x > 0, tf.float32)),
     x=_f(3, 4, scale=5))
case("Cast-int-float", lambda x: tf.cast(x, tf.float32) * 0.5, x=_i(3, 4))
for _v in ("Identity", "StopGradient", "Snapshot", "PreventGradient", "CheckNumerics", "EnsureShape"):
    kw: dict[str, Any] = {"message": "m"} if _v in ("PreventGradient", "CheckNumerics") else {}
    if _v == "EnsureShape":
        kw = {"shape": [3, 4]}
    case(_v, lambda x, v=_v, kw=kw: getattr(tf.raw_ops, v)(input=x * 2.0, **kw) + 1.0 if v != "CheckNumerics"
         else tf.raw_ops.CheckNumerics(tensor=x * 2.0, **kw) + 1.0, x=_f(3, 4))
case("IdentityN", lambda x: tf.raw_ops.IdentityN(input=[x * 2.0, x])[0] + 1.0, x=_f(3, 4))
case("Erfc-refused-by-default", lambda x: tf.math.erfc(x), x=_f(3, 4))

# ------------------------------------------------------------------ softmax, matmul, einsum
for _ax in (-1, 1):
    case(f"Softmax-LogSoftmax-axis{_ax}", lambda x, a=_ax: (tf.nn.softmax(x, a), tf.nn.log_softmax(x, a)),
         x=_f(2, 5, 6, scale=3))
for _ta, _tb in [(False, False), (True, False), (False, True), (True, True)]:
    case(f"MatMul-ta{int(_ta)}-tb{int(_tb)}",
         lambda x, ta=_ta, tb=_tb: tf.matmul(x, _f(6, 4) if tb else _f(4, 6), transpose_a=ta, transpose_b=tb),
         x=_f(4, 3) if _ta else _f(3, 4))
for _v in ("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"):
    for _ax, _ay in [(False, False), (True, False), (False, True)]:
        kw = {"Tout": tf.float32} if _v == "BatchMatMulV3" else {}
        case(f"{_v}-adj{int(_ax)}{int(_ay)}",
             lambda x, y, v=_v, ax=_ax, ay=_ay, kw=kw: getattr(tf.raw_ops, v)(x=x, y=y, adj_x=ax, adj_y=ay, **kw),
             x=_f(2, 4, 3) if _ax else _f(2, 3, 4), y=_f(2, 5, 4) if _ay else _f(2, 4, 5))
for _eq, _shapes in [("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ij,kj->ik", [(3, 4), (5, 4)]),
                     ("abc,cd->abd", [(2, 3, 4), (4, 5)])]:
    case(f"Einsum-{_eq}", lambda x, y, e=_eq: tf.einsum(e, x, y), x=_f(*_shapes[0]), y=_f(*_shapes[1]))

# ------------------------------------------------------------------ reductions
_RED = ("Mean", "Sum", "Max", "Min", "Prod")
for _keep in (False, True):
    case(f"reductions-keep{int(_keep)}", lambda x, k=_keep: tuple(getattr(tf.raw_ops, r)(input=x, axis=[1, -1],
                                                                                          keep_dims=k) for r in _RED),
         batch=True, x=_f(2, 3, 4))
    case(f"Any-All-keep{int(_keep)}", lambda x, k=_keep: (tf.raw_ops.Any(input=x > 0, axis=[1], keep_dims=k),
                                                          tf.raw_ops.All(input=x > 0, axis=[1], keep_dims=k)),
         x=_f(3, 4, 2))
case("reductions-int32", lambda x: tuple(getattr(tf.raw_ops, r)(input=x, axis=1, keep_dims=False) for r in _RED),
     x=_i(3, 4, 2))
case("Any-All-empty-axis", lambda x: (tf.raw_ops.Any(input=x > 0, axis=[1], keep_dims=False),
                                      tf.raw_ops.All(input=x > 0, axis=[1], keep_dims=False)), x=_f(3, 0, 2))
case("ArgMax-ArgMin", lambda x: tuple(getattr(tf.raw_ops, r)(input=x, dimension=d, output_type=t)
                                      for r in ("ArgMax", "ArgMin") for t in (tf.int64, tf.int32) for d in (1, -1)),
     x=_f(3, 5, 2))

# ------------------------------------------------------------------ shapes and data movement
case("Transpose", lambda x: tf.transpose(x, [2, 0, 1]), x=_f(2, 3, 4))
case("Transpose-int32", lambda x: tf.transpose(x, [1, 0]), x=_i(3, 4))
case("Reshape-const", lambda x: tf.reshape(x, [4, -1]), x=_f(2, 3, 4))
case("Reshape-runtime", lambda x: tf.reshape(x, [tf.shape(x)[0], -1]), batch=True, x=_f(2, 3, 4))
case("Reshape-runtime-int64", lambda x: tf.reshape(x, tf.cast(tf.stack([tf.shape(x)[0], 12]), tf.int64)),
     batch=True, x=_f(2, 3, 4))
case("Shape", lambda x: (tf.shape(x), tf.shape(x, out_type=tf.int64)), batch=True, x=_f(2, 3, 4))
case("Squeeze", lambda x: (tf.squeeze(x, [1]), tf.squeeze(x)), x=_f(2, 1, 4, 1))
case("ExpandDims", lambda x: (tf.expand_dims(x, 0), tf.expand_dims(x, -1)), x=_f(2, 3))
case("ConcatV2", lambda x, y: (tf.concat([x, y], 1), tf.concat([x, x, y], -1)), x=_f(2, 3), y=_f(2, 4))
case("Pack", lambda x, y: (tf.stack([x, y], 0), tf.stack([x, y], axis=-1)), x=_f(2, 3), y=_f(2, 3))
case("Pad", lambda x: tf.pad(x, [[0, 0], [1, 2], [3, 0]]), x=_f(2, 3, 4))
case("PadV2", lambda x: tf.pad(x, [[1, 0], [2, 2]], constant_values=-1.5), x=_f(3, 4))
case("PadV2-int32", lambda x: tf.pad(x, [[1, 1], [0, 2]], constant_values=7), x=_i(3, 4))
case("MirrorPad-REFLECT", lambda x: tf.pad(x, [[0, 0], [1, 2], [2, 1]], "REFLECT"), x=_f(2, 4, 5))
case("MirrorPad-SYMMETRIC", lambda x: tf.pad(x, [[0, 0], [1, 3], [0, 0], [2, 1]], "SYMMETRIC"), batch=True,
     x=_f(2, 3, 2, 4))
case("MirrorPad-SYMMETRIC-int32", lambda x: tf.pad(x, [[0, 0], [4, 4]], "SYMMETRIC"), x=_i(2, 4))
case("GatherV2", lambda x, i: (tf.gather(x, i, axis=1), tf.gather(x, [2, 0], axis=0)), x=_f(3, 5, 2),
     i=np.array([[0, 4], [2, 2]], np.int32))
case("Tile", lambda x: tf.tile(x, [2, 1, 3]), x=_f(2, 3, 1))
case("Tile-runtime", lambda x: tf.tile(x, tf.stack([1, tf.shape(x)[0], 2])), batch=True, x=_f(2, 3, 1))
case("Split", lambda x: tf.split(x, 3, axis=1), x=_f(2, 6, 2))
case("SplitV", lambda x: tf.split(x, [1, -1, 2], axis=-1), x=_f(2, 7))
case("ReverseV2", lambda x: tf.reverse(x, [1]), x=_f(2, 5))
for _n, _fn in [("basic", lambda x: x[:, 1:4]), ("negative-step", lambda x: x[:, ::-2, 1:]),
                ("shrink", lambda x: x[:, 2]), ("shrink-last", lambda x: x[-1]),
                ("ellipsis", lambda x: x[..., 1:3, 0]), ("new-axis", lambda x: x[:, None, 1, ::2]),
                ("ellipsis-new-axis", lambda x: x[None, ..., -1])]:
    case(f"StridedSlice-{_n}", _fn, batch=True, x=_f(3, 6, 5))
case("StridedSlice-of-constant", lambda x: x * tf.cast(tf.shape(tf.zeros([4, 7]))[1], tf.float32), x=_f(2))

# ------------------------------------------------------------------ resize
_RESIZE = {"bilinear": tf.raw_ops.ResizeBilinear, "nearest": tf.raw_ops.ResizeNearestNeighbor,
           "bicubic": tf.raw_ops.ResizeBicubic}
for _m in ("bilinear", "nearest", "bicubic"):
    for _size in ((10, 13), (3, 4), (7, 7)):
        case(f"Resize-{_m}-{_size[0]}x{_size[1]}", lambda x, m=_m, s=_size: tf.image.resize(x, s, m), batch=True,
             x=_f(2, 5, 6, 3))
    for _ac in (True, False):
        op = _RESIZE[_m]
        case(f"Resize-{_m}-legacy-ac{int(_ac)}",
             lambda x, op=op, ac=_ac: op(images=x, size=[9, 11], align_corners=ac, half_pixel_centers=False),
             x=_f(2, 5, 6, 3))


_TRACED: dict[str, tuple[Any, dict[str, np.ndarray], list[np.ndarray]]] = {}


for _size in ((10, 13), (3, 4), (7, 7), (2, 3)):
    case(f"ResizeArea-{_size[0]}x{_size[1]}", lambda x, s=_size: tf.image.resize(x, s, "area"), batch=True,
         x=_f(2, 5, 6, 3))
case("ResizeArea-align-corners", lambda x: tf.raw_ops.ResizeArea(images=x, size=[3, 4], align_corners=True),
     x=_f(2, 7, 9, 3))
case("ResizeArea-int32", lambda x: tf.raw_ops.ResizeArea(images=x, size=[4, 3]), x=_i(2, 9, 7, 2))


def _graph_and_refs(name: str) -> tuple[Any, dict[str, np.ndarray], list[np.ndarray]]:
    """The case's imported graph (traced once per process: conversions copy it), inputs and TF's outputs."""
    if name not in _TRACED:
        _TRACED[name] = _trace(name)
    return _TRACED[name]


def _trace(name: str) -> tuple[Any, dict[str, np.ndarray], list[np.ndarray]]:
    from amanda_tf.importer import load_model

    body, inputs, first = CASES[name]
    sig = [tf.TensorSpec([None, *v.shape[1:]] if first is not None else v.shape, tf.as_dtype(v.dtype), name=k)
           for k, v in inputs.items()]
    fn = tf.function(body, input_signature=sig)
    out = fn(**inputs)
    refs = [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]
    return load_model(fn), inputs, refs


def _convert(graph: Any, pm: Any, tags: tuple[str, ...] = ()) -> Any:
    from amanda_core.mapping import convert, registered_tables
    from amanda_core.plugin.passes import registered_passes

    tables = [t for t in registered_tables(pm.registry()) if t.name == "tf-to-onnx"]
    return convert(graph, "amanda/onnx/18", tables, pm.registry().namespaces, passes=registered_passes(pm),
                   include_tags=tags).graph


def _run(onnx_graph: Any, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnx
    import onnxruntime as ort

    import amanda_onnx

    model = amanda_onnx.to_model(onnx_graph)
    onnx.checker.check_model(model)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: inputs[i.name] for i in sess.get_inputs()})


def _compare(got: list[np.ndarray], refs: list[np.ndarray]) -> None:
    assert len(got) == len(refs)
    for g, r in zip(got, refs):
        assert g.shape == r.shape and g.dtype == r.dtype, (g.shape, g.dtype, r.shape, r.dtype)
        if r.dtype.kind in "biu":
            np.testing.assert_array_equal(g, r)
        else:
            np.testing.assert_array_equal(np.isnan(g), np.isnan(r))
            diff = float(np.nanmax(np.abs(g.astype(np.float64) - r))) if r.size else 0.0
            scale = max(1.0, float(np.nanmax(np.abs(np.where(np.isinf(r), 0, r))))) if r.size else 1.0
            assert diff <= TOL * scale, f"max abs diff {diff} (largest reference value {scale})"


@pytest.mark.parametrize("name", [n for n in CASES if "refused" not in n])
def test_op(name: str, plugins: Any) -> None:
    graph, inputs, refs = _graph_and_refs(name)
    _compare(_run(_convert(graph, plugins), inputs), refs)


def test_erfc_is_refused_unless_approximate_rules_are_allowed(plugins: Any) -> None:
    from amanda_core.mapping import ConversionError

    graph, inputs, refs = _graph_and_refs("Erfc-refused-by-default")
    with pytest.raises(ConversionError, match="Erfc"):
        _convert(graph, plugins)
    got = _run(_convert(graph, plugins, tags=("approximate",)), inputs)
    assert float(np.abs(got[0] - refs[0]).max()) <= 1.2e-7


def _mapped_types() -> set[str]:
    types: set[str] = set()
    for path in glob.glob(os.path.join(TABLES, "*.yaml")):
        table = yaml.safe_load(open(path))["table"]
        if table.get("part_of") != "tf-to-onnx" and table.get("name") != "tf-to-onnx":
            continue
        for rule in table["rules"].values():
            for matcher in ((rule.get("src") or {}).get("ops") or {}).values():
                t = matcher.get("type")
                types.update(t if isinstance(t, list) else [t] if t else [])
    return types


NOT_FROM_THE_IMPORTER = {"Identity"}
"""Mapped types no imported graph holds at the top level: the importer drops every ``Identity``
(docs/tensorflow.md, "Identity and NoOp: dropped")."""


def test_every_mapped_op_type_has_a_case(tf_schema) -> None:
    mapped = _mapped_types()
    assert len(mapped) > 100
    seen: set[str] = set()
    for name in CASES:
        graph, _, _ = _graph_and_refs(name)
        seen.update(op.type for op in graph.walk())
    missing = sorted(mapped - seen - NOT_FROM_THE_IMPORTER)
    assert not missing, f"mapped TF op types without a per-op case: {missing}"


ROUND_TRIP = ["Conv2D-s2-SAME-d1", "DepthwiseConv2dNative-s2-SAME-m3", "Conv3D-s2-SAME",
              "Conv2DBackpropInput-s2-SAME-10x12", "SpaceToBatchND-conv2d-d2-SAME", "MaxPool-k3-s2-SAME",
              "AvgPool3D-k3-s2-SAME", "FusedBatchNormV3", "binary-int32", "reductions-keep1", "Any-All-keep0",
              "ArgMax-ArgMin", "StridedSlice-ellipsis-new-axis", "Resize-bilinear-3x4", "SplitV", "Einsum-bij,bjk->bik",
              "BatchMatMulV3-adj01", "Reshape-runtime"]


@pytest.mark.parametrize("name", ROUND_TRIP)
def test_round_trip_through_tf_is_bit_exact(name: str, tmp_path) -> None:
    """TF -> Amanda -> TF (a frozen .pb; SavedModels: test_tf_export.py) gives the same outputs bit for bit."""
    from amanda_tf.exporter import save_model
    from amanda_tf.importer import load_model
    from amanda_tf.runner import run

    graph, inputs, refs = _graph_and_refs(name)
    want = run(graph, inputs)
    save_model(graph, str(tmp_path / "m.pb"))
    got = run(load_model(str(tmp_path / "m.pb"), outputs=list(want)), inputs)
    for key in want:
        np.testing.assert_array_equal(got[key], want[key])
    for w, r in zip(want.values(), refs):  # and the runner agrees with TF's own function
        np.testing.assert_allclose(w, r, rtol=1e-6, atol=1e-6)


def test_unknown_dims_stay_symbolic(plugins: Any) -> None:
    """Unknown dims (not only the batch) stay unknown through import and conversion: one ONNX model runs at
    several sizes."""
    import onnxruntime as ort

    import amanda_onnx
    from amanda_tf.importer import load_model

    fn = tf.function(lambda x: (tf.reduce_mean(tf.nn.conv2d(x, W2, 1, "SAME"), axis=[1, 2])
                                + tf.cast(tf.shape(x)[1], tf.float32)),
                     input_signature=[tf.TensorSpec([None, None, None, 4], tf.float32, name="x")])
    graph = load_model(fn)
    assert graph.input_ports[0].dtype == "float32[?,?,?,4]"
    onnx_graph = _convert(graph, plugins)
    sess = ort.InferenceSession(amanda_onnx.to_model(onnx_graph).SerializeToString(),
                                providers=["CPUExecutionProvider"])
    (dims,) = [[d.dim_value or d.dim_param or None for d in i.type.tensor_type.shape.dim]
               for i in amanda_onnx.to_model(onnx_graph).graph.input]
    assert dims[3] == 4 and not any(isinstance(d, int) for d in dims[:3])  # a name or no value: not fixed
    for shape in ((1, 5, 6, 4), (3, 9, 4, 4)):
        x = _f(*shape)
        _compare(sess.run(None, {"x": x}), [fn(x).numpy()])
