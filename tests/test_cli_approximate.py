"""Issue 13, item 12: ONNX downgrades through decompositions exact up to rounding (Gelu 20 -> 19,
LayerNormalization 17 -> 16, Reshape allowzero 14 -> 13) behind --allow-approximate, --explain up to a failure,
and --allow-partial refused before writing an ONNX file that cannot hold its result."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto as T  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

from amanda_core.cli.main import main  # noqa: E402


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def onnx_only(amanda_isolated):
    from amanda_onnx import plugin

    amanda_isolated(plugin, "amanda-onnx")


def _save(path, nodes, inputs, outputs, opset, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), str(path))
    return path


def gelu_model(path, approximate="none"):
    return _save(path, [helper.make_node("Gelu", ["x"], ["y"], approximate=approximate)],
                 [helper.make_tensor_value_info("x", T.FLOAT, [4, 50])],
                 [helper.make_tensor_value_info("y", T.FLOAT, [4, 50])], 20)


def layer_norm_model(path, bias=True, axis=-1):
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "s")]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b"))
    ins = ["x", "s", "b"] if bias else ["x", "s"]
    return _save(path, [helper.make_node("LayerNormalization", ins, ["y"], axis=axis, epsilon=1e-3)],
                 [helper.make_tensor_value_info("x", T.FLOAT, [2, 3, 16])],
                 [helper.make_tensor_value_info("y", T.FLOAT, [2, 3, 16])], 17, inits)


def test_gelu_needs_the_explicit_choice(tmp_path, capsys, onnx_only):
    src, out = gelu_model(tmp_path / "g.onnx"), tmp_path / "g19.onnx"
    rc, stdout, err = run(capsys, "convert", src, "--to", "amanda/onnx/19", "-o", out, "--explain")
    assert rc == 2 and not out.exists()
    assert "1 x Gelu (amanda/onnx/20" in err and "--allow-approximate converts Gelu" in err
    assert "table onnx-opset-20-to-19: amanda/onnx/20 -> amanda/onnx/19" in stdout  # --explain up to the failure


@pytest.mark.parametrize("approximate, rule", [("none", "gelu_erf"), ("tanh", "gelu_tanh")])
def test_gelu_decomposed_and_checked(tmp_path, capsys, onnx_only, approximate, rule):
    src, out = gelu_model(tmp_path / "g.onnx", approximate), tmp_path / "g19.onnx"
    rc, stdout, err = run(capsys, "convert", src, "--to", "amanda/onnx/19", "-o", out, "--allow-approximate",
                          "--explain", "--check")
    assert rc == 0, err
    assert f"approximate: onnx-opset-20-to-19, rule {rule} (1 match(es)): Gelu(x" in stdout
    assert "worst-case difference" in stdout
    assert "1 op(s) by approximate decompositions (--allow-approximate)" in stdout
    assert "same outputs" in stdout
    model = onnx.load(out)
    assert [o.version for o in model.opset_import] == [19]
    assert "Gelu" not in {n.op_type for n in model.graph.node}


@pytest.mark.parametrize("bias, axis", [(True, -1), (False, 2), (True, 1)])
def test_layer_normalization_decomposed_and_checked(tmp_path, capsys, onnx_only, bias, axis):
    src, out = layer_norm_model(tmp_path / "ln.onnx", bias, axis), tmp_path / "ln16.onnx"
    if axis == 1:  # normalizing over [3, 16]: Scale must broadcast to them
        model = onnx.load(src)
        model.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.ones((3, 16), np.float32) * 0.5, "s"))
        model.graph.initializer[1].CopyFrom(numpy_helper.from_array(np.ones((3, 16), np.float32), "b"))
        onnx.save(model, str(src))
    rc, _, err = run(capsys, "convert", src, "--to", "amanda/onnx/16", "-o", out)
    assert rc == 2 and "LayerNormalization" in err and not out.exists()
    rc, stdout, err = run(capsys, "convert", src, "--to", "amanda/onnx/16", "-o", out, "--allow-approximate",
                          "--check", "--json")
    assert rc == 0, err
    assert '"match": true' in stdout
    assert "LayerNormalization" not in {n.op_type for n in onnx.load(out).graph.node}


def _reshape_model(path, constant_shape):
    nodes, inits, inputs = [], [], [helper.make_tensor_value_info("x", T.FLOAT, [2, 6])]
    if constant_shape:
        inits.append(numpy_helper.from_array(np.array([3, 4], np.int64), "shape"))
    else:
        inputs.append(helper.make_tensor_value_info("shape", T.INT64, [2]))
    nodes.append(helper.make_node("Reshape", ["x", "shape"], ["y"], allowzero=1))
    return _save(path, nodes, inputs, [helper.make_tensor_value_info("y", T.FLOAT, None)], 14, inits)


def test_reshape_allowzero(tmp_path, capsys, onnx_only):
    exact = _reshape_model(tmp_path / "const.onnx", True)
    rc, stdout, err = run(capsys, "convert", exact, "--to", "amanda/onnx/13", "-o", tmp_path / "c13.onnx",
                          "--explain", "--check")
    assert rc == 0, err  # a constant shape without 0: exact, no flag needed
    assert "reshape_allowzero_constant_shape: 1 match(es)" in stdout and "approximate:" not in stdout
    dynamic = _reshape_model(tmp_path / "dyn.onnx", False)
    rc, _, err = run(capsys, "convert", dynamic, "--to", "amanda/onnx/13", "-o", tmp_path / "d13.onnx")
    assert rc == 2 and "--allow-approximate converts Reshape" in err
    rc, stdout, err = run(capsys, "convert", dynamic, "--to", "amanda/onnx/13", "-o", tmp_path / "d13.onnx",
                          "--allow-approximate", "--explain")
    assert rc == 0, err
    assert "approximate: onnx-opset-14-to-13, rule reshape_allowzero (1 match(es)): Reshape(allowzero=1)" in stdout
    np.save(tmp_path / "shape.npy", np.array([3, 4], np.int64))
    rc, stdout, err = run(capsys, "check", dynamic, tmp_path / "d13.onnx", "--input-data",
                          f"shape={tmp_path / 'shape.npy'}")
    assert rc == 0, err


def test_allow_partial_into_onnx_is_refused_before_writing(tmp_path, capsys, onnx_only):
    src = gelu_model(tmp_path / "g.onnx")
    out = tmp_path / "g19.onnx"
    rc, _, err = run(capsys, "convert", src, "--to", "amanda/onnx/19", "-o", out, "--allow-partial")
    assert rc == 2 and not out.exists() and err.count("\n") == 1
    assert "--allow-partial left 1 x Gelu (amanda/onnx/20)" in err and "holds one version of amanda/onnx" in err
    rc, _, err = run(capsys, "convert", src, "--to", "amanda/onnx/19", "-o", tmp_path / "g19.yaml",
                     "--allow-partial")
    assert rc == 0 and "left unconverted" in err
