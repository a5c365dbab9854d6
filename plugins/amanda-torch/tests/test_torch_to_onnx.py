"""torch -> ONNX through the mapping tables (amanda_torch/tables/torch_to_onnx.yaml): the section-5 models and
small modules per op family, converted, written as ONNX, checked by onnx.checker and run in onnxruntime against
torch eager (within 1e-4, absolute and relative to the largest reference magnitude)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import models  # noqa: E402 - the shared factories beside this file

from amanda_core.errors import AmandaError  # noqa: E402
from amanda_core.mapping import ConversionError, convert, registered_tables  # noqa: E402
from amanda_core.plugin import registry  # noqa: E402

TOL = 1e-4


def to_onnx(module: Any, args: tuple[Any, ...], target: str = "amanda/onnx/18", **options: Any) -> Any:
    """``module`` exported by torch.export, imported, converted to ``target`` and written as a ModelProto."""
    import amanda_onnx
    from amanda_torch.importer import load_model

    graph = load_model(module, example_inputs=args, **options)
    graph = convert(graph, target, registered_tables(), registry().namespaces).graph
    model = amanda_onnx.to_model(graph)
    onnx.checker.check_model(model, full_check=True)
    return model


def run_onnx(model: Any, args: tuple[Any, ...]) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return sess.run(None, {n: a.numpy() for n, a in zip(names, args)})


def eager(module: Any, args: tuple[Any, ...]) -> list[np.ndarray]:
    with torch.no_grad():
        out = module(*args)
    if isinstance(out, torch.Tensor):
        out = [out]
    elif hasattr(out, "to_tuple"):
        out = list(out.to_tuple())
    elif isinstance(out, dict):
        out = list(out.values())
    return [o.numpy() for o in out]


def assert_close(got: list[np.ndarray], want: list[np.ndarray], tol: float = TOL) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape, (g.shape, w.shape)
        if w.dtype == np.bool_ or np.issubdtype(w.dtype, np.integer):
            np.testing.assert_array_equal(g, w)
            continue
        # relative to the largest reference magnitude always (outputs near 1e-14 are checked too), and absolute
        # up to unit scale
        scale = max(float(np.abs(w).max()), 1e-30)
        err = float(np.abs(g.astype(np.float64) - w.astype(np.float64)).max())
        assert err / scale <= tol and err <= tol * max(1.0, scale), \
            f"max abs diff {err:.3g}, relative to the largest reference value {err / scale:.3g}"


def check(module: Any, args: tuple[Any, ...], target: str = "amanda/onnx/18") -> Any:
    module.eval()
    model = to_onnx(module, args, target)
    assert_close(run_onnx(model, args), eager(module, args))
    return model


def op_types(model: Any) -> list[str]:
    return [n.op_type for n in model.graph.node]


# ---------------------------------------------------------------------------------------------- the models

MODELS = ["small_cnn", "resnet", "mobilenet_v2", "vit", "bert"]


@pytest.mark.parametrize("name", MODELS)
def test_model_converts_and_matches_eager(name: str) -> None:
    module, args = models.FACTORIES[name]()
    model = check(module, args)
    assert not any(t.startswith(("aten", "prim")) for t in op_types(model))


# ONNX has LayerNormalization from opset 17 only, and the opset tables do not yet decompose it: the transformers
# go down to 17, the CNNs to 13.
@pytest.mark.parametrize("name, target", [("resnet", "amanda/onnx/13"), ("mobilenet_v2", "amanda/onnx/13"),
                                          ("vit", "amanda/onnx/17"), ("vit", "amanda/onnx/28"),
                                          ("bert", "amanda/onnx/28")])
def test_other_opsets_through_the_opset_tables(name: str, target: str) -> None:
    module, args = models.FACTORIES[name]()
    model = check(module, args, target)
    opset = {o.domain: o.version for o in model.opset_import}[""]
    assert opset == int(target.rsplit("/", 1)[1])


def test_parameters_become_initializers_without_copies() -> None:
    import amanda_onnx  # noqa: F401
    from amanda_torch.importer import load_model

    module, args = models.small_cnn()
    graph = load_model(module, example_inputs=args)
    arrays = {op.name: op.attrs["value"] for op in graph.ops.values()
              if op.type == "prim::Constant" and isinstance(op.attrs.get("value"), np.ndarray)}
    graph = convert(graph, "amanda/onnx/18", registered_tables(), registry().namespaces).graph
    inits = {op.name: op.attrs["value"] for op in graph.ops.values() if op.type == "Initializer"}
    moved = [n for n, a in arrays.items() if n in inits and inits[n] is a]
    assert moved and "conv1.weight" in moved


def test_dynamic_batch_cnn_runs_at_batch_1_and_3() -> None:
    module, args = models.small_cnn()
    batch = torch.export.Dim("batch", min=1, max=64)
    model = to_onnx(module, args, dynamic_shapes={"x": {0: batch}})
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "batch"
    for n in (1, 3):
        x = models.images(5, n)
        assert_close(run_onnx(model, (x,)), eager(module, (x,)))


class RunTimeSizes(torch.nn.Module):
    """Sizes read from the input at run time: view, reshape and expand (with a -1, "keep") over x.shape[0] and
    x.shape[1], and arange over x.shape[1]."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, n = x.shape[0], x.shape[1]
        z = x.view(b, -1, 4).reshape(b, n, 8)
        return z + z[:, :1, :].expand(b, n, -1), torch.arange(n)


@pytest.mark.parametrize("make", ["sizes", "bert", "vit", "bert_length", "bert_mask"])
def test_sizes_known_at_run_time(make: str) -> None:
    """With a dynamic batch (and length), a size read from the input becomes a Shape, the size lists a Concat of
    one-element tensors, and the model runs in onnxruntime at other sizes as torch does."""
    if make == "sizes":
        module: Any = RunTimeSizes().eval()
        args: tuple[Any, ...] = (torch.randn(2, 8, 8),)
        dyn: Any = {"x": {0: torch.export.Dim("batch", min=1, max=64), 1: torch.export.Dim("n", min=4, max=64)}}
        others = [(torch.randn(3, 8, 8),), (torch.randn(1, 12, 8),)]
    elif make == "bert_length":  # a dynamic length too: torch.export finds it must stay within BERT's 512
        module, args = models.bert()  # positions, and the import takes that range instead of failing
        args = args[:1]
        dyn = {"input_ids": {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq")}}
        others = [models.bert(batch=n, seq=t)[1][:1] for n, t in ((1, 5), (3, 21))]
    elif make == "bert_mask":  # the attention mask given, padded: transformers index it with aranges of the
        module, args = models.bert()  # batch and the length (aten::index.Tensor on run-time indices)
        batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq")
        dyn = {"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}}
        others = [models.bert(batch=n, seq=t)[1] for n, t in ((1, 5), (3, 21))]
    else:
        module, args = getattr(models, make)()
        args = args[:1]  # (BERT without its attention mask: the model makes one of ones)
        dyn = {"input_ids" if make == "bert" else "pixel_values": {0: torch.export.Dim("batch", min=1, max=64)}}
        others = [getattr(models, make)(batch=n)[1][:1] for n in (1, 3)]
    model = to_onnx(module, args, dynamic_shapes=dyn)
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    ops = {n.op_type for n in model.graph.node}
    assert "Shape" in ops and ("Concat" in ops or make == "vit")
    for other in others:
        assert_close(run_onnx(model, other), eager(module, other))
    # and back: the sizes become aten::sym_size.int and ints again, so torch.export traces the module with the
    # same dynamic sizes, and the program it writes runs at the other sizes
    back = models.onnx_module(model)
    code = back.code
    assert "sym_size" in code and "_shape_as_tensor" not in code
    if make.startswith("bert_"):  # BERT's 64 positions bound the length (torch.export asks it be said)
        seq = torch.export.Dim("seq", max=64)
        dyn = {k: {i: seq if d.__name__ == "seq" else d for i, d in v.items()} for k, v in dyn.items()}
    program = torch.export.export(back, args, dynamic_shapes=[spec for spec in dyn.values()])
    for other in others:
        assert_close([o.detach().numpy() for o in program.module()(*other)], eager(module, other))


class SizeArithmetic(torch.nn.Module):
    """Sizes computed from sizes read at run time, in a view, a reshape and expands: b * 2, (b + 3) // 4,
    2 * b - 1 (torch.export keeps what it cannot simplify, and some arithmetic nothing reads)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        b = x.shape[0]
        y = x.reshape(b * 2, -1)
        z = x.view(b + 1 - 1, 4, 4).view((b * 8) // 4, 8)
        return y, z, x[:1].expand((b + 3) // 4, 16), x[:1].expand(2 * b - 1, -1)


class HeadsLayer(torch.nn.Module):
    """PyTorch's own transformer encoder layer: its attention views its input as (length, batch * heads, dim)
    and unflattens the in-projection by (3, width) beside the run-time batch, then takes q, k, v by Gathers of
    one tensor."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


@pytest.mark.parametrize("make", ["arith", "encoder_layer"])
def test_arithmetic_on_run_time_sizes(make: str) -> None:
    """``x.shape[0] * 2`` and kin (aten::mul.int, add, sub, floordiv on sizes) become the same arithmetic on
    one-element int64 tensors inside the size list, so a view over the batch times the heads converts with a
    dynamic batch and runs in onnxruntime at other batches; nn.TransformerEncoderLayer converts so and loads
    in onnxruntime (its squeeze's axes are written under a name onnxruntime's Gather-to-Split fusion does not
    take for its own).  The way back keeps the batch dynamic: torch.export traces the module at other batches."""
    batch = torch.export.Dim("batch", min=5 if make == "arith" else 1, max=64)
    if make == "arith":
        module: Any = SizeArithmetic().eval()
        args: tuple[Any, ...] = (torch.randn(6, 16),)  # (from 5 on, no size computed here is 1)
        others = [(torch.randn(5, 16),), (torch.randn(9, 16),)]
    else:
        module = HeadsLayer().eval()
        args = (torch.randn(2, 5, 16),)
        others = [(torch.randn(1, 5, 16),), (torch.randn(3, 5, 16),)]
    model = to_onnx(module, args, dynamic_shapes={"x": {0: batch}})
    ops = [n.op_type for n in model.graph.node]
    assert "Shape" in ops and "Mul" in ops
    if make == "arith":
        assert {"Add", "Sub", "Div"} <= set(ops)
    for other in others:
        assert_close(run_onnx(model, other), eager(module, other))
    # and back: the arithmetic is torch's number arithmetic on SymInts again (Python operators in the module's
    # code, as torch.export writes them), so the module exports with the batch still dynamic
    back = models.onnx_module(model)
    assert "_shape_as_tensor" not in back.code and "sym_size" in back.code and " * " in back.code
    program = torch.export.export(back, args, dynamic_shapes=[{0: batch}])
    for other in others:
        got = program.module()(*other)
        assert_close([o.detach().numpy() for o in (got if isinstance(got, (tuple, list)) else [got])],
                     eager(module, other))


class Floors(torch.nn.Module):
    """A // that ONNX's truncating Div would get wrong (a dividend that may be negative), and a // by a size
    (zero at run time is torch's ZeroDivisionError, undefined in ONNX): neither converts."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b = x.shape[0]
        if self.how == "negative":
            return x[:1].expand((17 - b) // 2, -1)
        return x[:1].expand(16 // b, -1)


@pytest.mark.parametrize("how", ["negative", "by_size"])
def test_floor_division_of_sizes_only_where_onnx_gives_the_same(how: str) -> None:
    from amanda_torch.importer import load_model

    batch = torch.export.Dim("batch", min=2, max=8)
    graph = load_model(Floors(how).eval(), example_inputs=(torch.randn(4, 16),), dynamic_shapes={"x": {0: batch}})
    with pytest.raises(ConversionError) as e:
        convert(graph, "amanda/onnx/18", registered_tables(), registry().namespaces)
    assert "aten::floordiv.int" in str(e.value)


def test_unflatten_beside_a_run_time_size() -> None:
    class Split(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return x.unflatten(-1, (3, -1)), x.unflatten(1, (2, 6)).sum(-1)

    module = Split().eval()
    model = to_onnx(module, (torch.randn(2, 12),), dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
    for n in (1, 4):
        x = torch.randn(n, 12)
        assert_close(run_onnx(model, (x,)), eager(module, (x,)))


def test_an_op_without_rule_is_reported_by_name_and_count(tmp_path: Any) -> None:
    class Odd(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.special.i0(x) + torch.special.i0(x * 2)

    from amanda_torch.importer import load_model

    graph = load_model(Odd(), example_inputs=(torch.randn(3),))
    with pytest.raises(ConversionError) as e:
        convert(graph, "amanda/onnx/18", registered_tables(), registry().namespaces)
    assert "2 x aten::special_i0.default" in str(e.value)
    assert isinstance(e.value, AmandaError)


# ---------------------------------------------------------------------------------------------- per op family


class Fn(torch.nn.Module):
    def __init__(self, fn: Any) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


F = torch.nn.functional


def _x(*shape: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


ELEMENTWISE = {
    "relu": lambda x: torch.relu(x),
    "gelu": lambda x: F.gelu(x),
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": lambda x: F.silu(x),
    "sigmoid_tanh": lambda x: torch.sigmoid(x) + torch.tanh(x),
    "hardtanh": lambda x: F.hardtanh(x, -0.5, 0.7),
    "relu6": lambda x: F.relu6(x * 4),
    "hardswish": lambda x: F.hardswish(x * 3),
    "hardsigmoid": lambda x: F.hardsigmoid(x * 3),
    "leaky_relu": lambda x: F.leaky_relu(x, 0.2),
    "elu": lambda x: F.elu(x, 0.7),
    "clamp": lambda x: torch.clamp(x, min=-0.3, max=0.4) + torch.clamp(x, min=0.1),
    "arith": lambda x: (x + 1.5) * 2 - x / 3 - 0.25,
    "pow_rsqrt_sqrt": lambda x: x.pow(2) + torch.rsqrt(x.abs() + 1) + torch.sqrt(x.abs()),
    "exp_neg": lambda x: torch.exp(-x),
    "where_compare": lambda x: torch.where(x > 0.1, x, x * 0.5) + (x >= 0).float() + (x < x.mean()).float(),
    "masked_fill": lambda x: x.masked_fill(x < 0, -2.0),
    "softmax": lambda x: F.softmax(x, dim=-1) + F.log_softmax(x, dim=1),
}


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise(name: str) -> None:
    check(Fn(ELEMENTWISE[name]), (_x(2, 3, 5),))


SHAPES = {
    "view_reshape": lambda x: x.view(2, 15).reshape(5, -1),
    "flatten": lambda x: torch.flatten(x, 1) + 0,
    "flatten_middle": lambda x: torch.flatten(x, 1, 2).sum(-1),
    "permute_transpose": lambda x: x.permute(2, 0, 1).transpose(0, 2).contiguous(),
    "unsqueeze_squeeze": lambda x: x.unsqueeze(1).squeeze(1).unsqueeze(-1).squeeze(),
    "expand": lambda x: x[:, :1].expand(2, 3, 5),
    "slice_select": lambda x: x[:, 1:3, ::2] .sum() + x.select(1, 0),
    "cat_stack": lambda x: (torch.cat([x, x * 2], dim=1).sum(1, keepdim=True) + torch.stack([x, x], dim=1).sum(1)
                            + torch.stack([x, x], dim=-2).sum(-2)),
    "split_chunk": lambda x: sum(torch.split(x, 2, dim=2)[0:2], torch.zeros(2, 3, 2)) + torch.chunk(x, 5, 2)[1],
    "index_select": lambda x: torch.index_select(x, 2, torch.tensor([0, 4, 1])),
    "reductions": lambda x: x.mean(-1) + x.sum(dim=-1) + x.amax(-1),
    "mean_keepdim": lambda x: x - x.mean(dim=(1, 2), keepdim=True),
    "argmax": lambda x: torch.argmax(x, dim=1).float(),
    "cumsum": lambda x: torch.cumsum(x, dim=2),
    "topk": lambda x: torch.topk(x, 2, dim=-1).values,
    "t_mm": lambda x: x[0].t() @ x[1],
    "matmul_bmm": lambda x: torch.bmm(x, x.transpose(1, 2)) + x @ x.transpose(1, 2),
    "cast": lambda x: (x * 10).to(torch.int64).to(torch.float32),
    "arange_ones_full": lambda x: (x + torch.arange(5)) * torch.ones(5) + torch.full((5,), 0.5),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_shapes_and_indexing(name: str) -> None:
    check(Fn(SHAPES[name]), (_x(2, 3, 5),))


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1), dict(dilation=2, groups=2, padding=2),
                                dict(padding="same")])
def test_conv2d(kw: dict[str, Any]) -> None:
    torch.manual_seed(0)
    check(torch.nn.Conv2d(4, 6, 3, **kw), (_x(1, 4, 9, 9),))


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1, bias=False)])
def test_conv1d(kw: dict[str, Any]) -> None:
    torch.manual_seed(0)
    check(torch.nn.Conv1d(4, 6, 3, **kw), (_x(1, 4, 11),))


def test_norms_and_linear() -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(),
                              torch.nn.Linear(16, 4, bias=False))
    check(net, (_x(3, 5, 8),))
    check(net, (_x(3, 8),))


def test_batch_and_group_norm() -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU())
    models.calibrate_batchnorm(net, _x(4, 3, 8, 8, seed=3))
    check(net, (_x(2, 3, 8, 8),))


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1)])
def test_pooling(kw: dict[str, Any]) -> None:
    x = _x(1, 2, 8, 8)
    check(torch.nn.MaxPool2d(**kw), (x,))
    check(torch.nn.AvgPool2d(**kw), (x,))
    check(torch.nn.AdaptiveAvgPool2d(1), (x,))
    check(torch.nn.AdaptiveAvgPool2d(2), (x,))


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate"])
def test_pad(mode: str) -> None:
    check(Fn(lambda x: F.pad(x, (1, 2, 0, 1), mode=mode)), (_x(1, 2, 4, 4),))


def test_embedding() -> None:
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 4)
    check(emb, (torch.tensor([[1, 2, 9], [0, 0, 3]]),))


@pytest.mark.parametrize("masked", ["none", "bool", "float"])
def test_scaled_dot_product_attention(masked: str) -> None:
    q, k, v = _x(2, 3, 4, 8, seed=1), _x(2, 3, 5, 8, seed=2), _x(2, 3, 5, 8, seed=3)
    if masked == "none":
        check(Fn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v)), (q, k, v))
        return
    mask = torch.ones(4, 5, dtype=torch.bool).tril(1)
    if masked == "float":
        mask = torch.zeros(4, 5).masked_fill(~mask, -1e4)
    model = check(Fn(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)), (q, k, v, mask))
    assert op_types(model).count("Softmax") == 1


def test_dropout_is_identity_at_inference() -> None:
    net = torch.nn.Sequential(torch.nn.Dropout(0.5), torch.nn.ReLU()).eval()
    model = check(net, (_x(2, 3),))
    assert op_types(model) == ["Relu"]


class IndexByTensors(torch.nn.Module):
    """x[i] or x[i, j] with index tensors given at run time (negative ones too), broadcast against each other."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.count = count

    def forward(self, x: torch.Tensor, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        if self.count == 0:  # x[:, j]: the first axis whole
            return x[:, j] * 2
        return x[i] * 2 if self.count == 1 else x[i, j] * 2


@pytest.mark.parametrize("count", [0, 1, 2])
def test_index_by_run_time_tensors(count: int) -> None:
    module = IndexByTensors(count).eval()
    x = torch.randn(5, 6, 3)
    i = torch.tensor([[0], [-1], [3]])  # [3, 1] against j's [4]: x[i, j] is [3, 4, 3]
    j = torch.tensor([5, -6, 2, 0])
    model = to_onnx(module, (x, i, j))
    ops = {n.op_type for n in model.graph.node}
    assert ("GatherND" if count == 2 else "Gather") in ops
    assert_close(run_onnx(model, (x, i, j)), eager(module, (x, i, j)))
    other = (torch.randn(5, 6, 3), torch.tensor([[4], [-5], [1]]), torch.tensor([-1, 3, 1, 0]))
    assert_close(run_onnx(model, other), eager(module, other))


class Upsample(torch.nn.Module):
    def __init__(self, mode: str, align: bool | None, scale: float) -> None:
        super().__init__()
        self.mode, self.align, self.scale = mode, align, scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.interpolate(x, scale_factor=self.scale, mode=self.mode, align_corners=self.align)


@pytest.mark.parametrize("mode, align, scale", [("nearest", None, 2.0), ("nearest-exact", None, 1.5),
                                                ("bilinear", False, 2.0), ("bilinear", True, 0.5),
                                                ("bicubic", False, 1.5)])
def test_interpolate_by_a_scale_beside_a_dynamic_batch(mode: str, align: bool | None, scale: float) -> None:
    """``interpolate(scale_factor=...)`` with the batch symbolic: Resize by scales (ONNX uses them as torch does,
    for the output size and in the sampling), at other batches as eager."""
    module = Upsample(mode, align, scale).eval()
    batch = torch.export.Dim("batch")
    model = to_onnx(module, (torch.randn(2, 3, 8, 8),), dynamic_shapes={"x": {0: batch}})
    assert [n.op_type for n in model.graph.node].count("Resize") == 1
    for n in (1, 3):
        x = torch.randn(n, 3, 8, 8)
        assert_close(run_onnx(model, (x,)), eager(module, (x,)))
    if not align:  # and back (resize_scales_constant), the batch still dynamic
        back = models.onnx_module(model)
        assert "upsample" in back.code
        program = torch.export.export(back, (torch.randn(2, 3, 8, 8),), dynamic_shapes=[{0: batch}])
        for n in (1, 3):
            x = torch.randn(n, 3, 8, 8)
            assert_close([program.module()(x).detach().numpy()], eager(module, (x,)))


def test_interpolate_by_a_scale_float32_cannot_hold_is_refused() -> None:
    """torch computes the output size in double: a scale a float32 rounds (1.1) could give another size."""
    from amanda_torch.importer import load_model

    graph = load_model(Upsample("bilinear", False, 1.1).eval(), example_inputs=(torch.randn(2, 3, 10, 10),),
                       dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
    with pytest.raises(ConversionError, match=r"aten::upsample_bilinear2d\.vec"):
        convert(graph, "amanda/onnx/18", registered_tables(), registry().namespaces)
