"""The graph passes after torch -> ONNX (amanda_torch/onnx_passes.py): node counts of the section-5 models against
torch.onnx's dynamo export, the facts behind them (no BatchNormalization, no Pad before a Conv, no Constant
node, Gelu at opset 20), numbers against torch eager, and the cases each fold must leave alone."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import models  # noqa: E402 - the shared factories beside this file
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from amanda_core.mapping import convert, registered_tables  # noqa: E402
from amanda_core.plugin import registry  # noqa: E402
from amanda_core.plugin.passes import registered_passes  # noqa: E402

TOL = 1e-4

# Nodes of torch.onnx.export(dynamo=True) (torch 2.13, onnxscript 0.7.2, its default opset 20, optimizer on) on the
# same factories, as `python bench/torch_onnx.py` counts them.  The target: Amanda writes no more.
DYNAMO_NODES = {"small_cnn": 8, "resnet": 15, "mobilenet_v2": 99, "vit": 81, "bert": 86}


def to_onnx(module: Any, args: tuple[Any, ...], target: str = "amanda/onnx/18", passes: bool = True,
            **options: Any) -> Any:
    import amanda_onnx
    from amanda_torch.importer import load_model

    graph = load_model(module, example_inputs=args, **options)
    graph = convert(graph, target, registered_tables(), registry().namespaces,
                    passes=registered_passes() if passes else ()).graph
    model = amanda_onnx.to_model(graph)
    onnx.checker.check_model(model, full_check=True)
    return model


def run_onnx(model: Any, feeds: dict[str, np.ndarray] | tuple[Any, ...]) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    if isinstance(feeds, tuple):
        feeds = {i.name: a.numpy() for i, a in zip(sess.get_inputs(), feeds)}
    return sess.run(None, feeds)


def eager(module: Any, args: tuple[Any, ...]) -> list[np.ndarray]:
    with torch.no_grad():
        out = module(*args)
    if isinstance(out, torch.Tensor):
        out = [out]
    elif hasattr(out, "to_tuple"):
        out = list(out.to_tuple())
    return [o.numpy() for o in out]


def assert_close(got: list[np.ndarray], want: list[np.ndarray], tol: float = TOL) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape, (g.shape, w.shape)
        scale = max(float(np.abs(w).max()), 1e-30)
        err = float(np.abs(g.astype(np.float64) - w.astype(np.float64)).max())
        assert err / scale <= tol and err <= tol * max(1.0, scale), \
            f"max abs diff {err:.3g}, relative to the largest reference value {err / scale:.3g}"


def op_types(model: Any) -> list[str]:
    return [n.op_type for n in model.graph.node]


def producers(model: Any) -> dict[str, Any]:
    return {o: n for n in model.graph.node for o in n.output}


# ---------------------------------------------------------------------------------------------- the models
@pytest.mark.parametrize("name", sorted(DYNAMO_NODES))
def test_model_has_no_more_nodes_than_dynamo_and_matches_eager(name: str) -> None:
    module, args = models.FACTORIES[name]()
    model = to_onnx(module, args)
    types = op_types(model)
    assert len(types) <= DYNAMO_NODES[name], sorted(types)
    assert "Constant" not in types and "BatchNormalization" not in types
    prod = producers(model)
    for n in model.graph.node:
        if n.op_type == "Conv":
            assert n.input[0] not in prod or prod[n.input[0]].op_type != "Pad", n.name
    assert_close(run_onnx(model, args), eager(module, args))


@pytest.mark.parametrize("name", ["vit", "bert"])
def test_gelu_at_opset_20(name: str) -> None:
    module, args = models.FACTORIES[name]()
    model = to_onnx(module, args, "amanda/onnx/20")
    types = op_types(model)
    assert types.count("Gelu") == 2 and "Erf" not in types
    assert len(types) < DYNAMO_NODES[name]
    assert_close(run_onnx(model, args), eager(module, args))


def test_without_the_passes_the_graph_is_larger() -> None:
    module, args = models.mobilenet_v2()
    plain = op_types(to_onnx(module, args, passes=False))
    folded = op_types(to_onnx(module, args))
    assert plain.count("BatchNormalization") == plain.count("Pad") == 52
    assert len(folded) == len(plain) - 52 - 52 - plain.count("Constant")


@pytest.mark.parametrize("target", ["amanda/onnx/13", "amanda/onnx/18"])
def test_folded_cnn_with_a_dynamic_batch_at_other_opsets(target: str) -> None:
    module, args = models.small_cnn()
    batch = torch.export.Dim("batch", min=1, max=64)
    model = to_onnx(module, args, target, dynamic_shapes={"x": {0: batch}})
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert "BatchNormalization" not in op_types(model) and len(model.graph.node) <= DYNAMO_NODES["small_cnn"]
    for n in (1, 3):
        x = models.images(5, n)
        assert_close(run_onnx(model, (x,)), eager(module, (x,)))


def test_the_passes_are_registered_after_their_tables() -> None:
    by_name = {p.name: p for p in registered_passes()}
    assert by_name["torch-onnx-fold"].tables == ("torch-to-onnx",)
    assert by_name["torch-onnx-gelu"].tables == ("onnx-opset-19-to-20",)


class TanhGelu(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(self.fc(x), approximate="tanh") + 1.0


def test_tanh_gelu_at_opset_20_and_18() -> None:
    torch.manual_seed(0)
    module, args = TanhGelu().eval(), (torch.randn(3, 8),)
    model = to_onnx(module, args, "amanda/onnx/20")
    gelus = [n for n in model.graph.node if n.op_type == "Gelu"]
    assert len(gelus) == 1 and helper.get_attribute_value(gelus[0].attribute[0]) == b"tanh"
    assert "Tanh" not in op_types(model)
    assert_close(run_onnx(model, args), eager(module, args))
    at18 = to_onnx(module, args)
    assert "Gelu" not in op_types(at18) and "Tanh" in op_types(at18)
    assert_close(run_onnx(at18, args), eager(module, args))


class ConvBnInPlaces(torch.nn.Module):
    """A Conv2d without bias into BatchNorm, a Conv1d with bias into BatchNorm, and F.pad before a convolution."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 6, 3, bias=False, groups=1)
        self.bn = torch.nn.BatchNorm2d(6)
        self.conv1 = torch.nn.Conv1d(6, 4, 3, padding=1, dilation=1)
        self.bn1 = torch.nn.BatchNorm1d(4, eps=1e-3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn(self.conv(torch.nn.functional.pad(x, (1, 2, 0, 1))))
        y = y.mean(dim=3)
        return self.bn1(self.conv1(y))


def test_batch_norm_and_pad_folds_are_exact_on_other_shapes() -> None:
    torch.manual_seed(0)
    module = ConvBnInPlaces()
    models.calibrate_batchnorm(module, torch.randn(4, 3, 10, 10))
    with torch.no_grad():  # statistics far from 0/1, so the fold is checked on real numbers
        module.bn.weight.uniform_(0.5, 2.0)
        module.bn.bias.uniform_(-1.0, 1.0)
    args = (torch.randn(2, 3, 10, 10),)
    model = to_onnx(module, args)
    types = op_types(model)
    assert types.count("Conv") == 2 and "Pad" not in types and "BatchNormalization" not in types
    conv = next(n for n in model.graph.node if n.op_type == "Conv" and len(n.input) == 3
                and "pads" in [a.name for a in n.attribute] and helper.get_attribute_value(
                    next(a for a in n.attribute if a.name == "pads")) == [0, 1, 1, 2])
    assert conv is not None
    assert_close(run_onnx(model, args), eager(module, args))


# ---------------------------------------------------------------------------------------------- what stays
def _fold_onnx(model: Any) -> tuple[Any, str]:
    import amanda_onnx
    from amanda_torch.onnx_passes import fold

    graph = amanda_onnx.load_model(model)
    summary = fold(graph).summary()
    return amanda_onnx.to_model(graph), summary


def _conv_bn(training_mode: int = 0, stats_as_inputs: bool = False, extra_reader: bool = False) -> Any:
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "B"),
             numpy_helper.from_array(rng.uniform(0.5, 2, 4).astype(np.float32), "scale"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "beta")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])]
    stats = [numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "mean"),
             numpy_helper.from_array(rng.uniform(0.5, 2, 4).astype(np.float32), "var")]
    if stats_as_inputs:
        inputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4]) for n in ("mean", "var")]
    else:
        inits += stats
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "beta", "mean", "var"], ["y"], epsilon=1e-3,
                              **({"training_mode": 1} if training_mode else {}))]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if extra_reader:
        nodes.append(helper.make_node("Relu", ["c"], ["r"]))
        outputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_conv_batch_norm_fold_matches_onnxruntime() -> None:
    model = _conv_bn()
    folded, summary = _fold_onnx(model)
    assert op_types(folded) == ["Conv"], summary
    x = {"x": np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)}
    assert_close(run_onnx(folded, x), run_onnx(model, x), 1e-5)


def test_folded_weights_keep_their_names_and_a_new_bias_is_named_as_torch_names_one() -> None:
    """The state_dict of a folded model reads like its convolutions' (``features.0.weight``,
    ``features.0.bias``), not like a fold's bookkeeping; a weight another node still reads keeps its name and
    value, and the folded copy gets a name of its own."""
    module, args = models.resnet()  # transformers' convolutions have no bias: each gets one from its batch norm
    keys = set(module.state_dict())
    model = to_onnx(module, args)
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    assert len(convs) == 6
    for n in convs:
        weight, bias = n.input[1:]
        assert weight in keys and weight.endswith(".weight") and bias == weight[:-len("weight")] + "bias", n.input
        assert bias not in keys and weight.replace("convolution.weight", "normalization.weight") in keys
    assert all("/" not in i.name for i in model.graph.initializer)

    shared = _conv_bn()  # the weight read by a second convolution, the bias by a Neg: both stay as they are
    g = shared.graph
    g.node.append(helper.make_node("Conv", ["x", "W"], ["c2"], pads=[1, 1, 1, 1]))
    g.node.append(helper.make_node("Neg", ["B"], ["z"]))
    g.output.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, None))
    folded, summary = _fold_onnx(shared)
    assert "BatchNormalization" not in op_types(folded), summary
    first = next(n for n in folded.graph.node if n.op_type == "Conv" and n.output[0] != "c2")
    assert list(first.input[1:]) == ["W_folded", "B_folded"]
    inits = {i.name: numpy_helper.to_array(i) for i in folded.graph.initializer}
    before = {i.name: numpy_helper.to_array(i) for i in shared.graph.initializer}
    np.testing.assert_array_equal(inits["W"], before["W"])
    np.testing.assert_array_equal(inits["B"], before["B"])
    x = {"x": np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)}
    assert_close(run_onnx(folded, x), run_onnx(shared, x), 1e-5)


@pytest.mark.parametrize("case", ["training", "statistics computed", "conv read elsewhere"])
def test_batch_norm_fold_refuses(case: str) -> None:
    model = _conv_bn(training_mode=case == "training", stats_as_inputs=case == "statistics computed",
                     extra_reader=case == "conv read elsewhere")
    folded, summary = _fold_onnx(model)
    assert op_types(folded) == op_types(model), summary


def _pad_conv(mode: str = "constant", value: float | None = None, pads: list[int] | None = None,
              conv_auto_pad: str | None = None) -> Any:
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W"),
             numpy_helper.from_array(np.asarray(pads or [0, 0, 1, 0, 0, 0, 2, 1], np.int64), "pads")]
    pad_inputs = ["x", "pads"]
    if value is not None:
        inits.append(numpy_helper.from_array(np.asarray(value, np.float32), "value"))
        pad_inputs.append("value")
    conv_attrs = {"auto_pad": conv_auto_pad} if conv_auto_pad else {"pads": [0, 1, 0, 1]}
    nodes = [helper.make_node("Pad", pad_inputs, ["p"], mode=mode),
             helper.make_node("Conv", ["p", "W"], ["y"], **conv_attrs)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_zero_pad_folds_into_conv_pads() -> None:
    model = _pad_conv(value=0.0)
    folded, summary = _fold_onnx(model)
    assert op_types(folded) == ["Conv"], summary
    pads = helper.get_attribute_value(next(a for a in folded.graph.node[0].attribute if a.name == "pads"))
    assert pads == [1, 1, 2, 2]
    x = {"x": np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)}
    assert_close(run_onnx(folded, x), run_onnx(model, x), 1e-6)


@pytest.mark.parametrize("kw", [dict(value=1.0), dict(mode="reflect"), dict(pads=[0, 1, 1, 0, 0, 0, 1, 0]),
                                dict(pads=[0, 0, -1, 0, 0, 0, 1, 1]), dict(conv_auto_pad="SAME_UPPER")],
                         ids=["nonzero value", "reflect", "channel axis", "negative", "auto_pad"])
def test_pad_fold_refuses(kw: dict[str, Any]) -> None:
    model = _pad_conv(**kw)
    folded, summary = _fold_onnx(model)
    assert op_types(folded) == ["Pad", "Conv"], summary


def test_constant_subgraphs_fold_and_constants_become_initializers() -> None:
    c = [helper.make_node("Constant", [], ["start"], value=numpy_helper.from_array(np.asarray(2, np.int64))),
         helper.make_node("Constant", [], ["limit"], value=numpy_helper.from_array(np.asarray(14, np.int64))),
         helper.make_node("Constant", [], ["delta"], value=numpy_helper.from_array(np.asarray(3, np.int64))),
         helper.make_node("Constant", [], ["unread"], value=numpy_helper.from_array(np.asarray(3, np.int64))),
         helper.make_node("Range", ["start", "limit", "delta"], ["r"]),
         helper.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
         helper.make_node("Slice", ["rf", "s0", "s1"], ["sl"]),
         helper.make_node("Mul", ["x", "sl"], ["y"]),
         helper.make_node("Exp", ["sl"], ["e"]),  # left to the runtime: its rounding is not numpy's
         helper.make_node("Add", ["y", "e"], ["z"])]
    inits = [numpy_helper.from_array(np.asarray([-3], np.int64), "s0"),
             numpy_helper.from_array(np.asarray([np.iinfo(np.int64).max], np.int64), "s1")]
    graph = helper.make_graph(c, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    folded, summary = _fold_onnx(model)
    assert sorted(op_types(folded)) == ["Add", "Exp", "Mul"], summary
    x = {"x": np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)}
    assert_close(run_onnx(folded, x), run_onnx(model, x), 0.0)


def test_hand_written_gelu_is_not_fused() -> None:
    """Only the GELU subgraphs torch-to-onnx wrote become Gelu: an ONNX model's own graph is kept."""
    import amanda_onnx
    from amanda_torch.onnx_passes import fuse_gelu

    consts = {"sqrt2": np.float32(np.sqrt(2)), "one": np.float32(1), "half": np.float32(0.5)}
    nodes = [helper.make_node("Div", ["x", "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["a"]), helper.make_node("Mul", ["x", "a"], ["m"]),
             helper.make_node("Mul", ["m", "half"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()])
    g = amanda_onnx.load_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]))
    assert "no rewrites" in fuse_gelu(g).summary()
