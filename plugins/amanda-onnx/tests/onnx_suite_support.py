"""Support for the suites that round-trip ONNX's own test models: run a model with onnxruntime, compare outputs
bit for bit, read test data sets, count outcomes for the summary line.

Outputs are compared as raw bits: a tensor by element type, shape and bytes (so NaN payloads and signed zeros
count), a string tensor element by element, sequences and maps item by item, an empty optional as None.
"""

from __future__ import annotations

import ctypes
import glob
import os
from collections import Counter
from typing import Any

import numpy as np
import onnx
import onnx.numpy_helper

# outcome counters, printed by conftest.pytest_terminal_summary
OUTCOMES: dict[str, Counter] = {}
UNAVAILABLE: dict[str, list[str]] = {}


def record(suite: str, outcome: str, case: str = "", reason: str = "") -> None:
    OUTCOMES.setdefault(suite, Counter())[outcome] += 1
    if outcome == "runtime unavailable":
        UNAVAILABLE.setdefault(suite, []).append(f"{case}: {reason}")


class RuntimeUnavailable(Exception):
    """onnxruntime cannot run the original model (so there is nothing to compare)."""


def _ort():
    import onnxruntime as ort

    ort.set_default_logger_severity(4)
    return ort


def session(model_bytes: bytes) -> Any:
    ort = _ort()
    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    return ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])


def _as_feed(value: Any) -> Any:
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    if isinstance(value, np.generic):
        return np.asarray(value)
    if isinstance(value, list):
        return [_as_feed(v) for v in value]
    return value


_EXOTIC_VIEW = {1: np.uint8, 2: np.uint16}


def _ort_value(value: np.ndarray, elem_type: int) -> Any:
    ort = _ort()
    arr = np.ascontiguousarray(value)
    if arr.dtype.type.__module__ == "numpy":  # not an ml_dtypes type (bfloat16, float8 ...)
        return ort.OrtValue.ortvalue_from_numpy(arr)
    view = _EXOTIC_VIEW.get(arr.dtype.itemsize, np.uint8)
    return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(arr.view(view), elem_type)


def _ort_output(v: Any) -> Any:
    """An OrtValue output as comparable data: ('tensor', type, shape, bytes)."""
    if not v.is_tensor():
        raise RuntimeUnavailable("a non-tensor output of an exotic element type")
    shape = tuple(v.shape())
    t = v.data_type()
    try:
        arr = v.numpy()
        return ("tensor", t, shape, _bits(arr))
    except Exception:  # noqa: BLE001 - element types numpy bindings lack: read the raw buffer
        pass
    count = int(np.prod(shape, dtype=np.int64))
    width = {"tensor(bfloat16)": 2, "tensor(float16)": 2}.get(t, 1)
    if any(k in t for k in ("int4", "uint4", "float4")):
        nbytes = (count + 1) // 2
    elif any(k in t for k in ("int2", "uint2")):
        nbytes = (count + 3) // 4
    else:
        nbytes = count * width
    return ("tensor", t, shape, ctypes.string_at(v.data_ptr(), nbytes) if nbytes else b"")


def _bits(arr: Any) -> Any:
    arr = np.asarray(arr)
    if arr.dtype.kind == "O" or arr.dtype.kind in "SU":
        return ("strings", arr.shape, [x if isinstance(x, bytes) else str(x) for x in arr.reshape(-1).tolist()])
    return (arr.dtype.str, arr.shape, np.ascontiguousarray(arr).tobytes())


def comparable(out: Any) -> Any:
    if out is None:
        return None
    if isinstance(out, tuple) and out and out[0] == "tensor":
        return out
    if isinstance(out, list):
        return ["list", [comparable(x) for x in out]]
    if isinstance(out, dict):
        return ["dict", sorted((repr(k), comparable(v)) for k, v in out.items())]
    return _bits(out)


def graph_input_names(model: Any) -> list[str]:
    inits = {t.name for t in model.graph.initializer} | {s.values.name for s in model.graph.sparse_initializer}
    return [i.name for i in model.graph.input if i.name not in inits]


def run(model: Any, model_bytes: bytes, inputs: list[Any]) -> list[Any]:
    """Outputs of the model on ``inputs`` (in graph input order, initializer inputs left out), comparable."""
    sess = session(model_bytes)
    names = graph_input_names(model)
    feeds = {n: _as_feed(v) for n, v in zip(names, inputs)}
    try:
        return [comparable(o) for o in sess.run(None, feeds)]
    except Exception as e:  # noqa: BLE001 - maybe element types the numpy bindings cannot carry
        first = e
    if not all(isinstance(v, np.ndarray) for v in feeds.values()):
        raise first
    types = {i.name: i.type.tensor_type.elem_type for i in model.graph.input}
    values = {n: _ort_value(v, types[n]) for n, v in feeds.items()}
    try:
        outs = sess.run_with_ort_values(None, values)
    except Exception:  # noqa: BLE001
        raise first from None
    return [_ort_output(o) for o in outs]


def try_run(model: Any, inputs: list[Any]) -> list[Any]:
    """Like :func:`run` on the original model; RuntimeUnavailable with onnxruntime's message if it cannot."""
    try:
        return run(model, model.SerializeToString(), inputs)
    except RuntimeUnavailable:
        raise
    except Exception as e:  # noqa: BLE001 - any runtime failure means the runtime cannot run this model
        msg = " ".join(str(e).split())
        raise RuntimeUnavailable(f"{type(e).__name__}: {msg[:300]}") from None


# --------------------------------------------------------------------------- data sets on disk


def _read_proto(path: str, type_proto: Any) -> Any:
    with open(path, "rb") as f:
        data = f.read()
    which = type_proto.WhichOneof("value")
    if which == "sequence_type":
        p = onnx.SequenceProto()
        p.ParseFromString(data)
        return onnx.numpy_helper.to_list(p)
    if which == "optional_type":
        p = onnx.OptionalProto()
        p.ParseFromString(data)
        return onnx.numpy_helper.to_optional(p)
    if which == "map_type":
        p = onnx.MapProto()
        p.ParseFromString(data)
        return onnx.numpy_helper.to_dict(p)
    t = onnx.TensorProto()
    t.ParseFromString(data)
    return onnx.numpy_helper.to_array(t)


def data_set_inputs(model_dir: str, model: Any) -> list[Any]:
    """The inputs of ``test_data_set_0`` of an on-disk test case."""
    ds = sorted(glob.glob(os.path.join(model_dir, "test_data_set_*")))
    if not ds:
        return []
    by_name = {i.name: i for i in model.graph.input}
    names = graph_input_names(model)
    files = sorted(glob.glob(os.path.join(ds[0], "input_*.pb")), key=lambda p: int(p.rsplit("_", 1)[1][:-3]))
    return [_read_proto(p, by_name[n].type) for p, n in zip(files, names)]


def dummy_inputs(model: Any) -> list[Any]:
    """The inputs ONNX's runner makes for its light models: ``arange(n) / n`` in the input's shape
    (symbolic dims as 1)."""
    out = []
    for name in graph_input_names(model):
        vi = next(i for i in model.graph.input if i.name == name)
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim)
        n = int(np.prod(shape))
        out.append((np.arange(n).reshape(shape) / n).astype(np.float32))
    return out


def proto_diff(a: Any, b: Any, limit: int = 40) -> str:
    """A short unified diff of two messages' text forms."""
    import difflib

    lines = difflib.unified_diff(str(a).splitlines(), str(b).splitlines(), "original", "exported", lineterm="", n=2)
    out = list(lines)
    return "\n".join(out[:limit]) + ("\n..." if len(out) > limit else "")


def check_round_trip(original: Any, source: Any, inputs: Any, suite: str, label: str) -> None:
    """ONNX -> Amanda -> ONNX for one model, counted in ``suite``'s summary: byte-identical deterministic
    serialization; whenever the checker (full_check) passes on the original, the checker passing on the export and
    the imported graph validating against its namespace's schema; and bit-identical onnxruntime outputs on
    ``inputs`` (a list, or a function of the original model that makes it).  A model onnxruntime cannot run is
    skipped with the runtime's own message, after the other checks passed."""
    import onnx
    import onnx.checker
    import pytest

    import amanda_onnx
    from amanda_core.namespace.validate import validate
    from amanda_core.plugin.manager import registry

    outcome = "fail"
    try:
        graph = amanda_onnx.load_model(source)
        exported = amanda_onnx.to_model(graph)
        b = exported.SerializeToString(deterministic=True)
        assert original.SerializeToString(deterministic=True) == b, proto_diff(original, exported)
        try:
            onnx.checker.check_model(original, full_check=True)
            original_ok = True
        except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError):
            original_ok = False
        if original_ok:
            onnx.checker.check_model(exported, full_check=True)
            # the imported graph is valid in its namespace: every op in the schema, attributes and ports as the
            # schema says (a model the checker refuses may break its schema too)
            problems = [str(p) for p in validate(graph, registry().namespaces) if p.severity == "error"]
            assert not problems, "the imported graph breaks its schema:\n" + "\n".join(problems[:10])
        feed = inputs(original) if callable(inputs) else inputs
        try:
            want = try_run(original, feed)
        except RuntimeUnavailable as e:
            outcome = "runtime unavailable"
            record(suite, outcome, label, str(e))
            pytest.skip(f"onnxruntime cannot run the original model: {e}")
        got = run(exported, b, feed)
        assert got == want, "onnxruntime outputs differ between the original and the exported model"
        outcome = "pass"
    finally:
        if outcome != "runtime unavailable":
            record(suite, outcome)
