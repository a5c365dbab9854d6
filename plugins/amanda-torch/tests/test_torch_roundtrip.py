"""torch -> Amanda -> torch: a model imported with torch.export and exported again as a GraphModule, a ``.pt2``
and a ``.py`` module gives bit-identical outputs, keeps the original's ``state_dict`` keys (in order) and can
be traced by ``torch.export`` again."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from models import FACTORIES  # noqa: E402
from test_torch_export import run_generated  # noqa: E402

from amanda_torch.exporter import save_model, to_module  # noqa: E402
from amanda_torch.importer import load_model  # noqa: E402
from amanda_torch.runner import run  # noqa: E402

SLOW = pytest.mark.slow  # 5-25 s each on a loaded 2-core machine
MODELS = ["small_cnn", "bert", pytest.param("resnet", marks=SLOW), pytest.param("mobilenet_v2", marks=SLOW),
          pytest.param("vit", marks=SLOW)]


def leaves(value):
    """The tensors of a model's output (a tensor, tuple, dict or transformers ``ModelOutput``), flattened."""
    from torch.utils._pytree import tree_leaves

    if hasattr(value, "to_tuple"):
        value = value.to_tuple()
    return [v for v in tree_leaves(value) if isinstance(v, torch.Tensor)]


def same(a, b) -> bool:
    a, b = leaves(a), leaves(b)
    return len(a) == len(b) and all(x.dtype == y.dtype and torch.equal(x, y) for x, y in zip(a, b))


@pytest.fixture(scope="module")
def imported():
    """Each model, its example inputs and its graph, built and imported once per module."""
    made = {}

    def get(name):
        if name not in made:
            model, args = FACTORIES[name](0)
            made[name] = (model, args, load_model(model, example_inputs=args))
        return made[name]

    return get


@pytest.mark.parametrize("name", MODELS)
def test_module_round_trip(name, imported):
    if name != "small_cnn":
        pytest.importorskip("transformers")
    model, args, graph = imported(name)
    module = to_module(graph)
    with torch.no_grad():
        assert same(module(*args), model(*args))
    assert list(module.state_dict()) == list(model.state_dict())
    program = torch.export.export(module, args)
    with torch.no_grad():
        assert same(program.module()(*args), model(*args))


def test_runner_gives_the_eager_outputs(imported):
    model, args, graph = imported("bert")
    out = run(graph, {p.name: a.numpy() for p, a in zip(graph.input_ports, args)})
    with torch.no_grad():
        expected = leaves(model(*args))
    assert list(out) == ["last_hidden_state", "pooler_output"]
    assert all(np.array_equal(o, e.numpy()) for o, e in zip(out.values(), expected))


def test_dynamic_batch_round_trips_through_pt2(tmp_path):
    model, (x,) = FACTORIES["small_cnn"](0, batch=2)
    graph = load_model(model, example_inputs=(x,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    assert str(graph.input_ports[0].dtype).startswith("Float(batch, 3, ")
    save_model(graph, tmp_path / "cnn.pt2")
    loaded = torch.export.load(str(tmp_path / "cnn.pt2")).module()
    for batch in (1, 3):
        _, (x,) = FACTORIES["small_cnn"](1, batch=batch)
        with torch.no_grad():
            assert torch.equal(loaded(x), model(x))


@pytest.mark.parametrize("negative", [False, True])
def test_cond_round_trip(negative, tmp_path, monkeypatch):
    model, (x,) = FACTORIES["cond_module"](0, negative=negative)
    graph = load_model(model, example_inputs=(x,))
    assert any(op.type == "higher_order::cond" for op in graph)
    _, (other,) = FACTORIES["cond_module"](0, negative=not negative)
    module = to_module(graph)
    with torch.no_grad():
        for inp in (x, other):  # each input takes a different branch
            assert torch.equal(module(inp), model(inp))
    program = torch.export.export(module, (x,))
    with torch.no_grad():
        assert torch.equal(program.module()(other), model(other))
    path = tmp_path / f"cond_{int(negative)}.py"
    save_model(graph, path)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    generated = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, path.stem, generated)  # torch.cond traces its branches by module name
    spec.loader.exec_module(generated)
    with torch.no_grad():
        assert torch.equal(generated.Model()(other), model(other))


def test_python_module_of_bert_runs_standalone(imported, tmp_path):
    pytest.importorskip("transformers")
    model, args, graph = imported("bert")
    path = tmp_path / "bert_model.py"
    source = save_model(graph, path)
    assert "F.scaled_dot_product_attention(" in source or "scaled_dot_product" not in source
    inputs = {p.name: a.numpy() for p, a in zip(graph.input_ports, args)}
    outputs, keys = run_generated(path, "Model", inputs, tmp_path)
    with torch.no_grad():
        expected = leaves(model(*args))
    assert [o.shape for o in outputs] == [tuple(e.shape) for e in expected]
    assert all(np.array_equal(o, e.numpy()) for o, e in zip(outputs, expected))
    assert keys == list(model.state_dict())


def test_scripted_loop_round_trip(tmp_path, monkeypatch):
    model, (x,) = FACTORIES["scripted_loop"](0)
    graph = load_model(model)
    assert any(op.type == "prim::Loop" for op in graph)
    module = to_module(graph)
    path = tmp_path / "loop_model.py"
    save_model(graph, path)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    generated = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, path.stem, generated)
    spec.loader.exec_module(generated)
    written = generated.Model()
    for scale in (0.01, 1.0, 100.0):  # many, some and no iterations
        _, (x,) = FACTORIES["scripted_loop"](0, scale=scale)
        with torch.no_grad():
            expected = model(x)
            assert torch.equal(module(x), expected)
            assert torch.equal(written(x), expected)
