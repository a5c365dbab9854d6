"""torch -> ONNX for recurrent layers (tables/torch_to_onnx_rnn.yaml and the torch-rnn-layers pass): nn.GRU,
nn.LSTM and nn.RNN (tanh, relu) of one layer and several, forward and bidirectional, batch_first, with and without
biases and initial states, converted with the registered tables and passes, written as ONNX, checked by
onnx.checker and run in onnxruntime against torch eager (1e-5 relative to the largest reference value); the GRU
model of the command line end to end; refusals; and the way back to torch for the forms onnx-to-torch reads."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from torch import nn  # noqa: E402

from amanda_core.mapping import ConversionError, convert, registered_tables  # noqa: E402
from amanda_core.plugin import registry  # noqa: E402
from amanda_core.plugin.passes import registered_passes  # noqa: E402

# torch.export warns that nn.RNNBase's flattened weight list is assigned while it traces
pytestmark = pytest.mark.filterwarnings("ignore:The tensor attributes:UserWarning")

TOL = 1e-5
HIDDEN = 16
FEATURES = 8


class Recurrent(nn.Module):
    """A recurrent layer whose outputs are all returned: y, then h_n (and c_n for an LSTM)."""

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        self.rnn = layer

    def forward(self, x: Any, *state: Any) -> Any:
        if not state:
            y, h = self.rnn(x)
        else:
            y, h = self.rnn(x, tuple(state) if len(state) == 2 else state[0])
        return (y, *h) if isinstance(h, tuple) else (y, h)


def make(kind: str, layers: int = 1, bidirectional: bool = False, batch_first: bool = False,
         bias: bool = True) -> nn.Module:
    torch.manual_seed(0)
    kw = dict(num_layers=layers, bidirectional=bidirectional, batch_first=batch_first, bias=bias)
    if kind == "gru":
        layer = nn.GRU(FEATURES, HIDDEN, **kw)
    elif kind == "lstm":
        layer = nn.LSTM(FEATURES, HIDDEN, **kw)
    else:
        layer = nn.RNN(FEATURES, HIDDEN, nonlinearity=kind.split("_")[1], **kw)
    return Recurrent(layer).eval()


def inputs(kind: str, layers: int, bidirectional: bool, batch_first: bool, state: bool,
           batch: int = 2) -> tuple[Any, ...]:
    torch.manual_seed(1)
    x = torch.randn(batch, 5, FEATURES) if batch_first else torch.randn(5, batch, FEATURES)
    if not state:
        return (x,)
    shape = (layers * (2 if bidirectional else 1), batch, HIDDEN)
    return (x, *(torch.randn(*shape) for _ in range(2 if kind == "lstm" else 1)))


def import_graph(module: nn.Module, args: tuple[Any, ...], **options: Any) -> Any:
    from amanda_torch.importer import load_model

    return load_model(module, example_inputs=args, **options)


def to_onnx_graph(graph: Any) -> Any:
    return convert(graph, "amanda/onnx/18", registered_tables(), registry().namespaces,
                   passes=registered_passes()).graph


def to_model(graph: Any) -> Any:
    import amanda_onnx

    model = amanda_onnx.to_model(to_onnx_graph(graph))
    onnx.checker.check_model(model, full_check=True)
    return model


def run_onnx(model: Any, args: tuple[Any, ...]) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: a.numpy() for i, a in zip(sess.get_inputs(), args)})


def eager(module: nn.Module, args: tuple[Any, ...]) -> list[np.ndarray]:
    with torch.no_grad():
        return [t.numpy() for t in module(*args)]


def assert_close(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape, (g.shape, w.shape)
        scale = max(float(np.abs(w).max()), 1e-30)
        err = float(np.abs(g.astype(np.float64) - w.astype(np.float64)).max())
        assert err / scale <= TOL, f"max abs diff {err:.3g}, relative {err / scale:.3g}"


def op_types(model: Any) -> list[str]:
    return [n.op_type for n in model.graph.node]


ONNX_OP = {"gru": "GRU", "lstm": "LSTM", "rnn_tanh": "RNN", "rnn_relu": "RNN"}

# (kind, layers, bidirectional, batch_first, bias, initial state given)
CASES = [
    ("gru", 1, False, False, True, False),
    ("gru", 1, True, True, True, True),
    ("gru", 1, False, True, False, True),
    ("gru", 3, True, False, True, True),
    ("gru", 2, False, True, False, False),
    ("lstm", 1, False, False, True, True),
    ("lstm", 1, True, True, False, False),
    ("lstm", 1, False, True, True, False),
    ("lstm", 2, True, False, False, True),
    ("lstm", 3, False, True, True, True),
    ("rnn_tanh", 1, True, False, True, False),
    ("rnn_tanh", 2, False, True, True, True),
    ("rnn_relu", 1, False, True, False, True),
    ("rnn_relu", 2, True, False, True, False),
]


@pytest.mark.parametrize("kind,layers,bi,bf,bias,state", CASES,
                         ids=[f"{k}-{n}l-{'bi' if b else 'fw'}-{'bf' if f else 'sf'}-{'bias' if c else 'nobias'}-"
                              f"{'hx' if s else 'nohx'}" for k, n, b, f, c, s in CASES])
def test_recurrent_layer_matches_eager(kind: str, layers: int, bi: bool, bf: bool, bias: bool, state: bool) -> None:
    module = make(kind, layers, bi, bf, bias)
    args = inputs(kind, layers, bi, bf, state)
    model = to_model(import_graph(module, args))
    types = op_types(model)
    assert types.count(ONNX_OP[kind]) == layers  # one ONNX op per layer, chained
    assert types.count("Transpose") == layers * (2 if bf else 1)
    assert_close(run_onnx(model, args), eager(module, args))


def test_gru_attributes_and_gate_order() -> None:
    """One GRU: linear_before_reset = 1 and W's gate blocks in ONNX's z, r, h order (torch's r, z, n)."""
    module = make("gru", bidirectional=True)
    model = to_model(import_graph(module, inputs("gru", 1, True, False, False)))
    node = next(n for n in model.graph.node if n.op_type == "GRU")
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["linear_before_reset"] == 1 and attrs["direction"] == b"bidirectional"
    assert attrs["hidden_size"] == HIDDEN
    weights = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    w = weights[node.input[0 + 1]]
    torch_w = module.rnn.weight_ih_l0.detach().numpy()
    r, z, n = np.split(torch_w, 3)
    np.testing.assert_array_equal(w[0], np.concatenate([z, r, n]))


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_dynamic_batch_with_and_without_initial_state(kind: str) -> None:
    """A dynamic batch: the zero initial states torch writes (aten::zeros of a run-time size) and given ones."""
    module = make(kind, layers=2, bidirectional=True, batch_first=kind == "gru")
    batch = torch.export.Dim.DYNAMIC
    axis = 0 if kind == "gru" else 1
    for state in (False, True):
        args = inputs(kind, 2, True, kind == "gru", state)
        shapes: tuple[Any, ...] = ({axis: batch},)
        if state:
            shapes += (tuple({1: batch} for _ in args[1:]),)
        model = to_model(import_graph(module, args, dynamic_shapes=shapes))
        for b in (1, 7):
            run_args = inputs(kind, 2, True, kind == "gru", state, batch=b)
            assert_close(run_onnx(model, run_args), eager(module, run_args))


def test_lstm_with_projections_is_refused() -> None:
    module = make("lstm")
    module.rnn = nn.LSTM(FEATURES, HIDDEN, proj_size=4)
    with pytest.raises(ConversionError, match=r"aten::lstm\.input"):
        to_onnx_graph(import_graph(module.eval(), inputs("lstm", 1, False, False, False)))


def _set_literal(graph: Any, port: str, value: Any) -> None:
    op = next(o for o in graph if o.type in ("aten::gru.input", "aten::lstm.input"))
    op.input_ports[port].source.op.attrs = {"value": value}


def test_dropout_between_layers_in_training_is_refused() -> None:
    """Dropout applies between layers in training mode only: refused there, converted when it is 0 or one layer."""
    module = Recurrent(nn.GRU(FEATURES, HIDDEN, num_layers=2, dropout=0.5)).eval()
    args = inputs("gru", 2, False, False, False)
    graph = import_graph(module, args)
    _set_literal(graph, "train", True)
    with pytest.raises(ConversionError, match=r"aten::gru\.input"):
        to_onnx_graph(graph)
    graph = import_graph(module, args)
    _set_literal(graph, "train", True)
    _set_literal(graph, "dropout", 0.0)
    model = to_model(graph)
    assert_close(run_onnx(model, args), eager(module, args))
    module = Recurrent(nn.GRU(FEATURES, HIDDEN, num_layers=1)).eval()
    graph = import_graph(module, args)
    _set_literal(graph, "train", True)
    _set_literal(graph, "dropout", 0.5)
    assert_close(run_onnx(to_model(graph), args), eager(module, args))


MYMODELS = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(8, 16, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y[:, -1])


def make():
    torch.manual_seed(0)
    return Net().eval()
'''


def test_gru_model_through_the_command_line(tmp_path, monkeypatch, capsys) -> None:
    from amanda_core.cli.main import main

    (tmp_path / "rnnmodels_cli.py").write_text(MYMODELS)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("rnnmodels_cli", None)
    out = tmp_path / "gru.onnx"
    assert main(["convert", "rnnmodels_cli:make", "--input", "x:float32[2,5,8]", "--to", "amanda/onnx",
                 "-o", str(out)]) == 0, capsys.readouterr().err
    model = onnx.load(str(out))
    onnx.checker.check_model(model, full_check=True)
    assert "GRU" in op_types(model)
    import rnnmodels_cli

    module = rnnmodels_cli.make()
    x = torch.randn(2, 5, 8)
    assert_close(run_onnx(model, (x,)), eager(lambda t: (module(t),), (x,)))  # type: ignore[arg-type]


@pytest.mark.parametrize("kind,layers,bi,bf", [("gru", 1, True, True), ("lstm", 2, True, False),
                                               ("rnn_tanh", 2, False, True)])
def test_back_to_torch(kind: str, layers: int, bi: bool, bf: bool) -> None:
    """The ONNX written converts back to torch (GRU through the onnx-unroll pass, LSTM and RNN-tanh whole) and
    gives torch's numbers; an ONNX RNN with Relu has no onnx-to-torch rule and is refused by name."""
    import amanda_onnx
    from amanda_torch.runner import run

    module = make(kind, layers, bi, bf)
    args = inputs(kind, layers, bi, bf, True)
    graph = amanda_onnx.load_model(to_model(import_graph(module, args)))
    amanda_onnx.infer_types(graph)
    back = convert(graph, "amanda/pytorch", registered_tables(), registry().namespaces,
                   passes=registered_passes()).graph
    got = run(back, {p.name: a.numpy() for p, a in zip(back.input_ports, args)})
    assert_close(list(got.values()), eager(module, args))


def test_a_gru_that_resets_before_the_recurrent_product_is_not_torchs_gru() -> None:
    """ONNX's GRU with linear_before_reset = 0 applies the reset gate to the state before its product with R:
    not what aten::gru computes, so the GRU rules leave it (the unrolling pass computes it step by step), and the
    module matches onnxruntime on that model."""
    module = make("gru")
    args = inputs("gru", 1, False, False, False)
    model = to_model(import_graph(module, args))
    node = next(n for n in model.graph.node if n.op_type == "GRU")
    for a in node.attribute:
        if a.name == "linear_before_reset":
            a.i = 0
    back = back_to_torch(model)
    assert "aten.gru" not in back.code
    with torch.no_grad():
        got = back(*args)
    assert_close([g.numpy() for g in (got if isinstance(got, (tuple, list)) else [got])], run_onnx(model, args))


def back_to_torch(model: Any) -> Any:
    """The ONNX model as the module ``amanda convert --to amanda/pytorch`` makes of it."""
    import amanda_onnx
    from amanda_torch.module import to_module

    graph = amanda_onnx.load_model(model)
    amanda_onnx.infer_types(graph)
    return to_module(convert(graph, "amanda/pytorch", registered_tables(), registry().namespaces,
                             passes=registered_passes()).graph)


@pytest.mark.parametrize("kind,layers,bi,bf,bias,state", CASES,
                         ids=[f"{k}-{n}l-{'bi' if b else 'fw'}-{'bf' if f else 'sf'}-{'bias' if c else 'nobias'}-"
                              f"{'hx' if s else 'nohx'}" for k, n, b, f, c, s in CASES])
def test_recurrent_layer_comes_back_to_torch(kind: str, layers: int, bi: bool, bf: bool, bias: bool,
                                             state: bool) -> None:
    """torch -> ONNX -> torch: the module made of the ONNX computes what the original does."""
    module = make(kind, layers, bi, bf, bias)
    args = inputs(kind, layers, bi, bf, state)
    back = back_to_torch(to_model(import_graph(module, args)))
    if kind in ("gru", "rnn_relu"):  # each layer as one op, not unrolled step by step
        assert back.code.count(f"aten.{kind}.input") == layers
    with torch.no_grad():
        got = back(*args)
    assert_close([g.numpy() for g in (got if isinstance(got, (tuple, list)) else [got])], eager(module, args))
