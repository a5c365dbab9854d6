"""The torch runner through the plugin's hook (the Runner contract ``amanda check`` uses)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from test_torch_export import Builder, cnn  # noqa: E402

from amanda_core.errors import AmandaError  # noqa: E402
from amanda_torch import plugin  # noqa: E402


def runner():
    (r,) = plugin.amanda_runners()
    return r


def test_hook_runs_a_graph_with_example_inputs():
    g, reference = cnn()
    r = runner()
    assert r.handles_namespace(g.namespace) and not r.handles_namespace("amanda/onnx/18")
    inputs = r.example_inputs(g, 5, {"batch": 3})
    assert inputs["x"].shape == (3, 3, 8, 8)
    out = r.run(g, inputs)
    import torch

    assert list(out) == ["logits"]
    assert np.array_equal(out["logits"], reference(torch.from_numpy(inputs["x"])).numpy())


def test_missing_input_and_failing_run_are_one_line_errors():
    g, _ = cnn()
    with pytest.raises(AmandaError, match="no value given for graph input"):
        runner().run(g, {})
    with pytest.raises(AmandaError, match="torch failed to run the graph") as e:
        runner().run(g, {"x": np.zeros((2, 5, 8, 8), np.float32)})  # 5 channels where the conv wants 3
    assert "\n" not in str(e.value)


def test_untyped_input_cannot_be_made_up():
    b = Builder()
    b.output("y", b.input("x", None))
    with pytest.raises(AmandaError, match="'x' has no type"):
        runner().example_inputs(b.g, 0, None)
