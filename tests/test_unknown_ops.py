"""Ops no table converts, kept by ``--allow-partial``: in ONNX as nodes of a custom domain named after their
framework, in torch as a call that raises naming the op, refused by a format that cannot hold them; listed by
``--explain`` and ``amanda coverage``.  (torch and ONNX run in this process; TensorFlow only in a child.)"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from amanda_core.cli.main import main  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

# torch has these two ops; no torch -> ONNX rule converts them (amanda coverage says NOT COVERED)
TORCH_MODEL = textwrap.dedent("""
    import torch

    class Bessel(torch.nn.Module):
        def forward(self, x):
            y = torch.special.bessel_j0(torch.relu(x))
            return torch.special.i0e(y) + 1.0

    def build():
        return Bessel().eval(), (torch.randn(2, 3),)
""")


@pytest.fixture
def torch_model(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    (tmp_path / "bessel_model.py").write_text(TORCH_MODEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "bessel_model:build"


def test_a_torch_op_no_rule_maps_is_a_custom_domain_node_in_onnx(torch_model, tmp_path, capsys):
    out = tmp_path / "bessel.onnx"
    assert main(["convert", torch_model, "--to", "amanda/onnx", "-o", str(out), "--allow-partial",
                 "--explain"]) == 0
    text = capsys.readouterr()
    assert "left unconverted:" in text.out and "aten::special_bessel_j0.default" in text.out
    assert "kept unconverted (--allow-partial):" in text.out
    assert "special_bessel_j0: aten::special_bessel_j0.default (amanda/pytorch/" in text.out
    assert "kept as aten_special_bessel_j0_default (amanda/onnx/amanda.pytorch/1)" in text.out
    assert "2 op(s) of another framework kept for onnx" in text.err
    model = onnx.load(str(out))
    onnx.checker.check_model(model, full_check=True)
    opsets = {o.domain: o.version for o in model.opset_import}
    assert opsets.get("amanda.pytorch") == 1
    custom = {n.name: n for n in model.graph.node if n.domain == "amanda.pytorch"}
    assert set(custom) == {"special_bessel_j0", "special_i0e"}
    node = custom["special_bessel_j0"]
    assert node.op_type == "aten_special_bessel_j0_default"
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["amanda_op_type"] == b"aten::special_bessel_j0.default"
    assert attrs["amanda_namespace"].startswith(b"amanda/pytorch/")
    assert attrs["amanda_inputs"] == [b"self"]
    relu = next(n for n in model.graph.node if n.op_type == "Relu")
    assert list(node.input) == list(relu.output)  # in its place, between the converted ops
    assert list(custom["special_i0e"].input) == list(node.output)
    # the file reads back: the node is an op of the custom domain
    assert main(["coverage", str(out), "--to", "amanda/onnx", "--json"]) == 1
    rows = {r["op_type"]: r for r in json.loads(capsys.readouterr().out)["op_types"]}
    assert rows["aten_special_bessel_j0_default"]["uncovered"] == 1


def test_coverage_lists_the_torch_op_no_rule_maps(torch_model, capsys):
    assert main(["coverage", torch_model, "--to", "amanda/onnx", "--json"]) == 1
    rows = {r["op_type"]: r for r in json.loads(capsys.readouterr().out)["op_types"]}
    assert not rows["aten::special_bessel_j0.default"]["covered"]
    assert rows["aten::special_bessel_j0.default"]["uncovered_ops"] == ["special_bessel_j0"]
    assert rows["aten::relu.default"]["covered"]


def test_without_allow_partial_nothing_is_written(torch_model, tmp_path, capsys):
    out = tmp_path / "bessel.onnx"
    assert main(["convert", torch_model, "--to", "amanda/onnx", "-o", str(out)]) != 0
    err = capsys.readouterr().err
    assert "aten::special_bessel_j0.default" in err and "--allow-partial" in err
    assert not out.exists()


def _custom_model(path: Path) -> None:
    """Relu -> a node of domain amanda.tensorflow (as a partial TF -> ONNX conversion writes one) -> Neg."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("MatrixLogarithm", ["r"], ["m"], name="logm", domain="amanda.tensorflow",
                              amanda_op_type="MatrixLogarithm", amanda_namespace="amanda/tensorflow/2.21.0",
                              T="float32"),
             helper.make_node("Neg", ["m"], ["y"], name="neg")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("amanda.tensorflow", 1)])
    onnx.save(model, str(path))


def test_an_onnx_custom_domain_node_becomes_a_torch_call_that_raises(tmp_path, capsys, monkeypatch):
    torch = pytest.importorskip("torch")
    src = tmp_path / "custom.onnx"
    _custom_model(src)
    out = tmp_path / "custom_model.py"
    assert main(["convert", str(src), "--to", "amanda/pytorch", "-o", str(out), "--allow-partial",
                 "--explain"]) == 0
    text = capsys.readouterr()
    assert "left unconverted:" in text.out and "MatrixLogarithm (amanda/onnx/amanda.tensorflow/1)" in text.out
    assert "logm: MatrixLogarithm (amanda/onnx/amanda.tensorflow/1) kept as amanda::unconverted" in text.out
    source = out.read_text()
    assert "def _unconverted(message, *inputs):" in source
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("custom_model")
    classes = [v for v in vars(module).values() if isinstance(v, type) and issubclass(v, torch.nn.Module)]
    model = classes[0]()  # the module builds and its weights load
    with pytest.raises(NotImplementedError) as info:
        model(torch.ones(2, 3))
    message = str(info.value)
    assert "'logm'" in message and "MatrixLogarithm of amanda/tensorflow/2.21.0" in message
    assert "--allow-partial" in message


def test_a_torch_program_file_cannot_hold_the_call_that_raises(tmp_path, capsys):
    pytest.importorskip("torch")
    src = tmp_path / "custom.onnx"
    _custom_model(src)
    out = tmp_path / "custom.pt2"
    assert main(["convert", str(src), "--to", "amanda/pytorch", "-o", str(out), "--allow-partial"]) != 0
    err = capsys.readouterr().err
    assert "torch.export cannot export the graph" in err and "'logm'" in err
    assert not out.exists()


def test_a_saved_model_refuses_ops_it_cannot_keep(tmp_path):
    """The TensorFlow exporter keeps no foreign op: the command refuses, naming them, and writes nothing."""
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("tensorflow is not installed")
    src = tmp_path / "custom.onnx"
    _custom_model(src)
    out = tmp_path / "custom.savedmodel"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "amanda_core", "convert", str(src), "--to", "amanda/tensorflow",
                        "-o", f"{out}/", "--allow-partial"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode != 0
    assert "1 x MatrixLogarithm" in r.stderr and "cannot keep ops it has no conversion for" in r.stderr
    assert "nothing was written" in r.stderr and not out.exists()


def test_attributes_onnx_cannot_say_are_listed_by_name(tmp_path):
    """A foreign op's attributes become ONNX attributes where ONNX can say them; the others are named in
    amanda_dropped_attributes.  The op's family needs no plugin: only its namespace is read."""
    from amanda_core.cli.main import _registry
    from amanda_core.foreign import FOREIGN_KEY, keep_foreign_ops
    from amanda_core.ir import Graph
    from amanda_onnx.exporter import save_model
    from amanda_onnx.foreign import keep_foreign

    g = Graph("amanda/onnx/18")
    x = g.add_input_port("x", "tensor(float)[2,3]")
    relu = g.add_op("Relu", "relu", inputs=[("X", None)], outputs=[("Y", "tensor(float)[2,3]")])
    odd = g.add_op("Odd>Op.v2", "odd", namespace="amanda/example/7",
                   attrs={"alpha": 0.5, "sizes": [1, 2], "mode": "wrap", "nothing": None, "nested": [[1], [2]],
                          "table": np.arange(4, dtype=np.float32)},
                   inputs=[("data", None)], outputs=[("result", "tensor(float)[2,3]"), ("extra", None)])
    g.connect(x, relu.input_ports["X"])
    g.connect(relu.output_ports["Y"], odd.input_ports["data"])
    g.connect(odd.output_ports["result"], g.add_output_port("y", "tensor(float)[2,3]"))
    kept = keep_foreign_ops(g, "amanda/onnx/18", _registry().namespaces, keep_foreign)
    assert [(k.path, k.type, k.namespace) for k in kept] == [("odd", "Odd>Op.v2", "amanda/example/7")]
    assert odd.meta[FOREIGN_KEY]["type"] == "Odd>Op.v2"
    assert odd.namespace == "amanda/onnx/amanda.example/1" and odd.type == "Odd_Op_v2"
    model = save_model(g)
    onnx.checker.check_model(model, full_check=True)
    node = next(n for n in model.graph.node if n.domain == "amanda.example")
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["alpha"] == pytest.approx(0.5) and attrs["sizes"] == [1, 2] and attrs["mode"] == b"wrap"
    assert onnx.numpy_helper.to_array(attrs["table"]).tolist() == [0, 1, 2, 3]
    assert attrs["amanda_dropped_attributes"] == [b"nothing", b"nested"]
    assert attrs["amanda_outputs"] == [b"result", b"extra"]
    assert len(node.output) == 2
