"""The ONNX -> torch leg of the section-5 model round trips: each model (random weights, ``models.py``) exported by
torch.export, converted to ONNX opset 18 (the torch -> ONNX table), written as a ModelProto, read back, converted
to torch (the ONNX -> torch table) and exported as a ``torch.fx.GraphModule``.  The module matches torch eager
within 1e-4 (absolute, and relative to the largest reference value) and ``torch.export`` traces it.

The tables are the amanda-torch plugin's own and the ONNX opset tables (not every registered plugin's), so that
a table another plugin is changing does not stop these tests.  ResNet, MobileNetV2 and ViT are marked ``slow``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

import models  # noqa: E402 - the shared factories beside this file

SLOW = pytest.mark.slow
TOL = 1e-4


def _tables() -> list[Any]:
    import amanda_torch
    from amanda_core.mapping import load_table, merge_parts
    from amanda_onnx import opset

    files = sorted((Path(amanda_torch.__file__).resolve().parent / "tables").glob("*.yaml"))
    return [*merge_parts([load_table(p, trusted=True) for p in files]), *opset.tables()]


def _outputs(out: Any) -> list[np.ndarray]:
    if isinstance(out, torch.Tensor):
        out = [out]
    elif hasattr(out, "to_tuple"):
        out = list(out.to_tuple())
    return [o.detach().numpy() for o in out]


def round_trip(name: str) -> None:
    import amanda_onnx
    from amanda_core.mapping import convert
    from amanda_core.plugin.manager import registry
    from amanda_torch.exporter import to_module
    from amanda_torch.importer import load_model

    module, args = models.FACTORIES[name]()
    module.eval()
    tables, reg = _tables(), registry().namespaces
    graph = convert(load_model(module, example_inputs=args), "amanda/onnx/18", tables, reg).graph
    back = amanda_onnx.load_model(amanda_onnx.to_model(graph))
    amanda_onnx.infer_types(back)
    converted = convert(back, "amanda/pytorch", tables, reg).graph
    assert all(op.type.startswith(("aten::", "prim::")) for op in converted.topological_order())
    rebuilt = to_module(converted)
    with torch.no_grad():
        want, got = _outputs(module(*args)), _outputs(rebuilt(*args))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        scale = max(float(np.abs(w).max()), 1e-30)
        err = float(np.abs(g.astype(np.float64) - w.astype(np.float64)).max())
        assert err / scale <= TOL and err <= TOL * max(1.0, scale), (name, err, scale)
    program = torch.export.export(rebuilt, args)
    with torch.no_grad():
        again = _outputs(program.module()(*args))
    for g, w in zip(again, got):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("name", ["small_cnn", "bert"])
def test_round_trip(name: str) -> None:
    round_trip(name)


@SLOW
@pytest.mark.parametrize("name", ["resnet", "mobilenet_v2", "vit"])
def test_round_trip_vision_models(name: str) -> None:
    round_trip(name)
