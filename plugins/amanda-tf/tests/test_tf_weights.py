"""Weights of TensorFlow models are never copied: a SavedModel's variables are read from its mapped checkpoint,
a live model's share TensorFlow's storage, and the SavedModel exporter writes large constants as variables,
tensor by tensor, into the checkpoint (``amanda_tf.checkpoint``)."""

from __future__ import annotations

import os

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from amanda_core.errors import AmandaError, FormatError  # noqa: E402
from amanda_core.ir.tensor import FileTensor, Tensor  # noqa: E402
from amanda_tf import checkpoint  # noqa: E402
from amanda_tf.exporter import save_model  # noqa: E402
from amanda_tf.importer import load_model  # noqa: E402
from amanda_tf.runner import run  # noqa: E402


def _dense_saved_model(path, width=48, layers=3):
    keras.utils.set_random_seed(7)
    x = keras.Input((width,), name="x")
    h = x
    for i in range(layers):
        h = keras.layers.Dense(width, activation="tanh" if i % 2 else None, name=f"d{i}")(h)
    model = keras.Model(x, h)
    tf.saved_model.save(model, str(path))
    return model


@pytest.fixture(scope="module")
def dense_saved(tmp_path_factory):
    """A SavedModel of three 48x48 Dense layers (made once) and the Keras model it was saved from."""
    path = tmp_path_factory.mktemp("dense") / "src"
    return path, _dense_saved_model(path)


def _copy(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return dst


def _serve(path, x):
    fn = tf.saved_model.load(str(path)).signatures["serving_default"]
    (name,) = fn.structured_input_signature[1]
    return {k: v.numpy() for k, v in fn(**{name: tf.constant(x)}).items()}


def _assert_same_served(got, want):
    """Outputs of two SavedModels served by TensorFlow: bit for bit without oneDNN; with it (TensorFlow's
    default on x86), kernels chosen per graph may differ in the last bits."""
    if os.environ.get("TF_ENABLE_ONEDNN_OPTS") == "0":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _consts(graph):
    return {op.name: op.attrs["value"] for op in graph if op.type == "Const"}


def _graph_consts_bytes(saved):
    """The largest Const tensor anywhere in a SavedModel's graphs and functions (bytes)."""
    from tensorflow.core.protobuf import saved_model_pb2

    sm = saved_model_pb2.SavedModel()
    with open(os.path.join(saved, "saved_model.pb"), "rb") as f:
        sm.ParseFromString(f.read())
    largest = 0
    for mg in sm.meta_graphs:
        nodes = list(mg.graph_def.node) + [n for fn in mg.graph_def.library.function for n in fn.node_def]
        for n in nodes:
            if n.op == "Const":
                largest = max(largest, len(n.attr["value"].tensor.tensor_content))
    return largest


def test_saved_model_weights_are_mapped_from_the_checkpoint(dense_saved):
    src, model = dense_saved
    g = load_model(str(src))
    consts = _consts(g)
    mapped = [v for v in consts.values() if isinstance(v, FileTensor)]
    assert len(mapped) == 3  # the three 48x48 kernels (9 KB each); the 192-byte biases are small arrays
    data = os.path.realpath(src / "variables" / "variables.data-00000-of-00001")
    for t in mapped:
        assert os.path.realpath(t.path) == data and not t.is_loaded  # nothing read while importing
    reader = tf.train.load_checkpoint(str(src / "variables" / "variables"))
    stored = sorted(reader.get_tensor(k).tobytes() for k in reader.get_variable_to_shape_map()
                    if k.endswith("VARIABLE_VALUE"))
    assert sorted(np.asarray(v).tobytes() for v in consts.values() if np.asarray(v).size >= 48) == stored
    x = np.random.default_rng(0).standard_normal((2, 48)).astype(np.float32)
    live = load_model(model)  # the same model imported live: its weights share the Keras variables' storage
    (want,) = run(live, {"x": x}).values()
    (got,) = run(g, {g.input_ports.names()[0]: x}).values()
    np.testing.assert_array_equal(got, want)
    (served,) = _serve(src, x).values()
    _assert_same_served(got, served)


def test_saved_model_round_trip_writes_variables_bit_exact(tmp_path, dense_saved):
    src, _ = dense_saved
    out = tmp_path / "out.savedmodel"
    save_model(load_model(str(src)), str(out))
    # the weights are variables of the checkpoint, not constants of the graph
    assert _graph_consts_bytes(str(out)) < checkpoint.MAPPED_BYTES
    reader = tf.train.load_checkpoint(str(out / "variables" / "variables"))
    kept = sorted(reader.get_tensor(k).tobytes() for k in reader.get_variable_to_shape_map()
                  if k.endswith("VARIABLE_VALUE"))
    src_reader = tf.train.load_checkpoint(str(src / "variables" / "variables"))
    big = sorted(src_reader.get_tensor(k).tobytes() for k in src_reader.get_variable_to_shape_map()
                 if k.endswith("VARIABLE_VALUE") and src_reader.get_tensor(k).nbytes >= 1024)
    assert kept == big
    x = np.random.default_rng(1).standard_normal((3, 48)).astype(np.float32)
    (want,) = _serve(src, x).values()
    (got,) = _serve(out, x).values()  # TensorFlow's own loader restores the variables
    _assert_same_served(got, want)
    # and back again: the re-exported SavedModel's variables are mapped as well, same graph, same outputs
    g1, g2 = load_model(str(src)), load_model(str(out))
    assert sum(isinstance(v, FileTensor) for v in _consts(g2).values()) == 3
    (before,) = run(g1, {g1.input_ports.names()[0]: x}).values()
    (again,) = run(g2, {g2.input_ports.names()[0]: x}).values()
    np.testing.assert_array_equal(again, before)


def test_writer_groups_tensors_into_bundles_merged_into_one_checkpoint(tmp_path, monkeypatch):
    src = tmp_path / "src"
    _dense_saved_model(src, width=40, layers=4)
    monkeypatch.setattr(checkpoint, "GROUP_BYTES", 7000)  # a 40x40 kernel (6,400 bytes) per group
    out = tmp_path / "out"
    save_model(load_model(str(src)), str(out) + "/")
    files = sorted(os.listdir(out / "variables"))
    assert files == [f"variables.data-0000{i}-of-00005" for i in range(5)] + ["variables.index"]
    assert not os.path.exists(out / "variables" / ".amanda_parts")
    x = np.random.default_rng(2).standard_normal((2, 40)).astype(np.float32)
    (want,) = _serve(src, x).values()
    (got,) = _serve(out, x).values()
    _assert_same_served(got, want)


def test_bundle_reader_agrees_with_tensorflow_for_every_dtype(tmp_path):
    prefix = str(tmp_path / "ckpt")
    rng = np.random.default_rng(3)
    values = {
        "f32": rng.standard_normal((33, 17)).astype(np.float32),
        "f16": rng.standard_normal((700,)).astype(np.float16),
        "i64": rng.integers(-9, 9, (5, 60)).astype(np.int64),
        "u8": rng.integers(0, 255, (2000,)).astype(np.uint8),
        "bool": rng.integers(0, 2, (1500,)).astype(bool),
        "small": np.arange(6, dtype=np.int32),
        "bf16": tf.cast(tf.constant(rng.standard_normal((600,)).astype(np.float32)), tf.bfloat16),
        "text": tf.constant([b"a", b"bc"]),
    }
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=list(values), shape_and_slices=[""] * len(values),
                      tensors=[tf.convert_to_tensor(v) for v in values.values()])
    bundle = checkpoint.Bundle(prefix)
    reader = tf.train.load_checkpoint(prefix)
    for key in values:
        t = bundle.tensor(key)
        want = reader.get_tensor(key)
        if key == "small":
            assert isinstance(t, np.ndarray)
        elif key == "text":
            assert type(t) is Tensor and not t.is_loaded  # read through TensorFlow, when asked
        else:
            assert isinstance(t, FileTensor), key
        got = np.asarray(t)
        assert got.dtype == want.dtype and got.shape == want.shape, key
        assert got.tobytes() == want.tobytes() if key != "text" else list(got) == list(want)


def test_missing_or_short_data_file_names_tensor_and_file(tmp_path, dense_saved):
    src = _copy(dense_saved[0], tmp_path / "src")
    data = src / "variables" / "variables.data-00000-of-00001"
    size = os.path.getsize(data)
    with open(data, "r+b") as f:
        f.truncate(size // 2)
    short = r"checkpoint tensor '.*': the file .*variables\.data-00000-of-00001 has \d+ bytes"
    with pytest.raises(AmandaError, match=short):
        load_model(str(src))
    os.unlink(data)
    with pytest.raises(FormatError, match=r"cannot open .*variables\.data-00000-of-00001"):
        load_model(str(src))


def test_broken_index_is_a_format_error(tmp_path, dense_saved):
    src = _copy(dense_saved[0], tmp_path / "src")
    (src / "variables" / "variables.index").write_bytes(b"\0" * 100)
    with pytest.raises(FormatError, match=r"variables\.index: not a checkpoint index"):
        checkpoint.Bundle(str(src / "variables" / "variables"))


def test_large_constants_of_a_function_become_variables_small_ones_stay(tmp_path):
    w = np.random.default_rng(4).standard_normal((32, 32)).astype(np.float32)

    @tf.function(input_signature=[tf.TensorSpec([None, 32], tf.float32, name="x")])
    def f(x):
        return tf.matmul(x, tf.constant(w)) + tf.constant(np.float32(0.5))

    g = load_model(f)
    out = tmp_path / "f.savedmodel"
    save_model(g, str(out))
    reader = tf.train.load_checkpoint(str(out / "variables" / "variables"))
    shapes = {k: v for k, v in reader.get_variable_to_shape_map().items() if k.endswith("VARIABLE_VALUE")}
    assert list(shapes.values()) == [[32, 32]]  # the 4 KB weight; the scalar stays in the graph
    x = np.random.default_rng(5).standard_normal((2, 32)).astype(np.float32)
    (got,) = _serve(out, x).values()
    _assert_same_served(got, f(tf.constant(x)).numpy())


def test_rewriting_a_saved_model_in_place_reads_the_old_checkpoint_to_the_end(tmp_path, dense_saved):
    src = _copy(dense_saved[0], tmp_path / "src")
    x = np.random.default_rng(6).standard_normal((2, 48)).astype(np.float32)
    (want,) = _serve(src, x).values()
    g = load_model(str(src))  # its weights are the files about to be replaced
    save_model(g, str(src) + "/")
    assert sorted(os.listdir(tmp_path)) == ["src"]  # no temporary folder left beside it
    (got,) = _serve(src, x).values()
    _assert_same_served(got, want)
    assert _graph_consts_bytes(str(src)) < checkpoint.MAPPED_BYTES


def test_a_saved_model_cnn_converts_to_onnx_with_rules_reading_mapped_weights(tmp_path, tf_schema):
    """Rules that read a weight (``consts:``, the Conv2D filter transposed to OIHW) get it as an array: a view of
    the mapped checkpoint, read only then; a weight only moved stays a file tensor (the ONNX writer copies it
    file to file)."""
    import onnxruntime as ort

    import amanda_onnx
    import amanda_onnx.plugin
    import amanda_tf.plugin
    from amanda_core.plugin import PluginManager
    from amanda_tf.layout import to_onnx

    pm = PluginManager(autoload=False)
    pm.register(amanda_tf.plugin, "amanda-tf")
    pm.register(amanda_onnx.plugin, "amanda-onnx")
    keras.utils.set_random_seed(8)
    x_in = keras.Input((12, 12, 3), name="image")
    h = keras.layers.Conv2D(16, 3, padding="same", activation="relu", name="conv")(x_in)
    h = keras.layers.Flatten()(h)
    model = keras.Model(x_in, keras.layers.Dense(10, name="head")(h))
    src = tmp_path / "cnn"
    tf.saved_model.save(model, str(src))
    g = load_model(str(src))
    assert sum(isinstance(v, FileTensor) for v in _consts(g).values()) == 2  # conv kernel 1.7 KB, head 92 KB
    onnx_graph, _ = to_onnx(g, pm.registry())
    out = str(tmp_path / "cnn.onnx")
    amanda_onnx.save_model(onnx_graph, out)
    x = np.random.default_rng(9).standard_normal((2, 12, 12, 3)).astype(np.float32)
    sess = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {sess.get_inputs()[0].name: x})
    (want,) = _serve(src, x).values()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
