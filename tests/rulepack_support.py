"""Shared by the rule-pack and lock tests: the example pack's module and a model holding its ops."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACK = ROOT / "examples" / "rulepack"


def pack_plugin():
    """The example pack's plugin module, imported from the checkout (as if installed)."""
    if str(PACK) not in sys.path:
        sys.path.insert(0, str(PACK))
    return importlib.import_module("amanda_ort_contrib.plugin")


def contrib_model(path: Path, opset: int = 17) -> Path:
    """x -> MatMul -> com.microsoft BiasGelu -> com.microsoft Gelu -> y, as an ONNX file."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("BiasGelu", ["h", "b"], ["g"], name="biasgelu", domain="com.microsoft"),
             helper.make_node("Gelu", ["g"], ["y"], name="gelu", domain="com.microsoft")]
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 4], np.linspace(-1, 1, 16).astype("float32").tolist())
    b = helper.make_tensor("b", TensorProto.FLOAT, [4], [0.1, -0.2, 0.3, -0.4])
    g = helper.make_graph(nodes, "contrib", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [w, b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path
