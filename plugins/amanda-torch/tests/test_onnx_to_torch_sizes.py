"""ONNX -> torch: sizes computed at run time become torch's SymInts and ints, so that the module traces with a
dynamic size: a Shape slice of one dimension and one-element int64 literals, concatenated and read as the shape of
Reshape or Expand, or squeezed as the limit of Range from 0 by 1. When any of them cannot (the Shape is read by
something else too, a literal 0 ONNX would copy, an Expand's 1 over an unknown size), none of them does, and the
general run-time rules convert them (the module runs eagerly)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import models  # noqa: E402 - the shared factories beside this file
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _i64(name: str, values: list[int]) -> Any:
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _model(tail: list[int], *, allowzero: int = 0, shape_also_added: bool = False, expand: bool = False) -> Any:
    """x: [batch, 4, 6] -> Reshape(x, Concat(Shape(x)[0:1], tail)) (or Expand of a [1, 4, 1] slice to
    Concat(Shape(x)[0:1], tail)); arange over the batch as a second output."""
    names = [f"t{i}" for i in range(len(tail))]  # one one-element constant per literal, as Amanda writes them
    nodes = [helper.make_node("Shape", ["x"], ["b"], start=0, end=1),
             helper.make_node("Concat", ["b", *names], ["size"], axis=0),
             helper.make_node("Squeeze", ["b"], ["b0"]),
             helper.make_node("Range", ["zero", "b0", "one"], ["ids"])]
    if expand:
        nodes += [helper.make_node("Slice", ["x", "s0", "s1", "s2"], ["x1"]),
                  helper.make_node("Expand", ["x1", "size"], ["y"])]
    else:
        nodes.append(helper.make_node("Reshape", ["x", "size"], ["y"], allowzero=allowzero))
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
               helper.make_tensor_value_info("ids", TensorProto.INT64, None)]
    if shape_also_added:
        nodes.append(helper.make_node("Add", ["b", "b"], ["bb"]))
        outputs.append(helper.make_tensor_value_info("bb", TensorProto.INT64, None))
    inits = [*(_i64(n, [v]) for n, v in zip(names, tail)), numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array(1, np.int64), "one"),
             _i64("s0", [0]), _i64("s1", [1]), _i64("s2", [2])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 6])],
                              outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


_module = models.onnx_module


def _same_as_onnxruntime(model: Any, module: Any, batches: tuple[int, ...] = (1, 3)) -> None:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for n in batches:
        x = np.random.default_rng(n).standard_normal((n, 4, 6)).astype(np.float32)
        want = sess.run(None, {"x": x})
        with torch.no_grad():
            got = module(torch.from_numpy(x))
        if isinstance(got, torch.Tensor):
            got = [got]
        for w, g in zip(want, got):
            np.testing.assert_array_equal(g.detach().numpy(), w)


@pytest.mark.parametrize("tail, allowzero, expand", [([2, -1], 0, False), ([4, 3, 2], 1, False),
                                                     ([4, 6], 0, True), ([-1], 0, False)])
def test_sizes_become_symbolic_and_the_module_traces(tail: list[int], allowzero: int, expand: bool) -> None:
    model = _model(tail, allowzero=allowzero, expand=expand)
    module = _module(model)
    assert "sym_size" in module.code and "_shape_as_tensor" not in module.code and "arange" in module.code
    _same_as_onnxruntime(model, module)
    program = torch.export.export(module, (torch.zeros(2, 4, 6),),
                                  dynamic_shapes=[{0: torch.export.Dim("batch", min=1, max=1024)}])
    _same_as_onnxruntime(model, program.module())


@pytest.mark.parametrize("tail, allowzero, also", [([0, -1], 0, False), ([2, -1], 0, True)])
def test_all_or_none_of_the_sizes_are_symbolic(tail: list[int], allowzero: int, also: bool) -> None:
    """A literal 0 ONNX copies (allowzero 0), or the Shape read by an Add too: nothing becomes a SymInt (the
    Range over the same Shape included), and the general rules give a module that runs eagerly."""
    model = _model(tail, allowzero=allowzero, shape_also_added=also)
    module = _module(model)
    assert "sym_size" not in module.code and "_shape_as_tensor" in module.code
    _same_as_onnxruntime(model, module)


def test_a_literal_read_by_other_ops_too_is_copied_for_the_size_list() -> None:
    """ONNX writers share a constant among its readers: the size list's [2] is also what an Add adds. The
    ``onnx-size-literals`` pass gives the list its own copy, so the sizes still become SymInts and ints."""
    model = _model([2, -1])
    g = model.graph
    g.node.append(helper.make_node("Add", ["t0", "t0"], ["b2"]))
    g.output.append(helper.make_tensor_value_info("b2", TensorProto.INT64, None))
    module = _module(model)
    assert "sym_size" in module.code and "reshape.default(x, [" in module.code.replace("\n", "")
    _same_as_onnxruntime(model, module)
    torch.export.export(module, (torch.zeros(2, 4, 6),), dynamic_shapes=[{0: torch.export.Dim("batch", max=1024)}])


def _arith_model(kind: str) -> Any:
    """x: [batch, 4, 6] -> Reshape(x, Concat(size, ...)) where the size is arithmetic on Shape(x)[0:1]:
    ``mul`` batch * 4 (-> [4 * batch, 6]), ``floordiv`` (batch * 24) / 6 (-> [4 * batch, 6]), ``negative``
    (batch - 8) / 2 + 4 + batch ... a Div whose dividend may be negative (truncation is not torch's floor),
    ``unflatten`` Reshape [0, 0, 2, 3] over [batch, 4, 6] (the leading sizes kept, the last split)."""
    nodes = [] if kind == "unflatten" else [helper.make_node("Shape", ["x"], ["b"], start=0, end=1)]
    inits = [_i64("four", [4]), _i64("six", [6]), _i64("twentyfour", [24]), _i64("eight", [8]), _i64("two", [2])]
    if kind == "mul":
        nodes += [helper.make_node("Mul", ["b", "four"], ["n"]),
                  helper.make_node("Concat", ["n", "six"], ["size"], axis=0)]
    elif kind == "floordiv":
        nodes += [helper.make_node("Mul", ["b", "twentyfour"], ["m"]), helper.make_node("Div", ["m", "six"], ["n"]),
                  helper.make_node("Concat", ["n", "six"], ["size"], axis=0)]
    elif kind == "negative":  # (batch - 8) / 2 * 0 + 4 * batch: 4 * batch, through a quotient of a difference
        inits.append(_i64("zero1", [0]))
        nodes += [helper.make_node("Sub", ["b", "eight"], ["d"]), helper.make_node("Div", ["d", "two"], ["q"]),
                  helper.make_node("Mul", ["q", "zero1"], ["z"]), helper.make_node("Mul", ["b", "four"], ["m"]),
                  helper.make_node("Add", ["z", "m"], ["n"]),
                  helper.make_node("Concat", ["n", "six"], ["size"], axis=0)]
    else:
        inits.append(_i64("size", [0, 0, 2, 3]))
    nodes.append(helper.make_node("Reshape", ["x", "size"], ["y"]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("kind", ["mul", "floordiv", "unflatten"])
def test_arithmetic_on_sizes_stays_symbolic(kind: str) -> None:
    """Mul, Add, Sub and Div of sizes read by a size list become torch's number arithmetic on SymInts (Python
    operators in the module's code, as torch.export writes them), so the module traces with the batch dynamic;
    a Reshape keeping leading sizes of which one is symbolic and splitting the last is torch's unflatten."""
    model = _arith_model(kind)
    module = _module(model)
    assert "_shape_as_tensor" not in module.code
    if kind == "unflatten":
        assert "unflatten" in module.code
    else:
        assert "sym_size" in module.code and " * " in module.code
        assert (" // " in module.code) == (kind == "floordiv")
    _same_as_onnxruntime(model, module, (1, 3))
    program = torch.export.export(module, (torch.zeros(2, 4, 6),),
                                  dynamic_shapes=[{0: torch.export.Dim("batch", min=1, max=1024)}])
    _same_as_onnxruntime(model, program.module(), (1, 3, 5))


def test_a_quotient_onnx_truncates_otherwise_than_torch_floors_stays_a_tensor() -> None:
    """ONNX's Div of integers truncates; torch's // floors: they differ for a negative dividend (batch - 8), so
    that arithmetic, and everything joined to it, stays tensor arithmetic (the module runs eagerly)."""
    model = _arith_model("negative")
    module = _module(model)
    assert "sym_size" not in module.code and "_shape_as_tensor" in module.code
    _same_as_onnxruntime(model, module, (1, 3))


def test_a_pt2_of_a_size_read_from_a_tensor_names_the_op(tmp_path: Any) -> None:
    """Such a module runs eagerly, but torch.export cannot trace a reshape by a tensor's values: writing a .pt2
    fails with a message that names the op and its port (torch's own says only that data is not allocated), and
    leaves no file."""
    import amanda_onnx
    from amanda_core.errors import AmandaError
    from amanda_core.mapping import convert, registered_tables
    from amanda_core.plugin import registry
    from amanda_core.plugin.passes import registered_passes
    from amanda_torch.exporter import save_model

    graph = amanda_onnx.load_model(_arith_model("negative"))
    amanda_onnx.infer_types(graph)
    graph = convert(graph, "amanda/pytorch", registered_tables(), registry().namespaces,
                    passes=registered_passes()).graph
    path = tmp_path / "negative.pt2"
    with pytest.raises(AmandaError) as e:
        save_model(graph, path)
    assert "aten::reshape.default reads 'shape' from" in str(e.value) and ".py" in str(e.value)
    assert not path.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("mode", ["reflect", "edge", "wrap"])
def test_pad_and_flatten_beside_a_symbolic_batch(mode: str) -> None:
    """Pad in reflect, edge or wrap mode needs the padded axes' sizes only, and Flatten at axis 1 is torch's
    flatten from 1: both convert with the batch symbolic, and the module traces with it dynamic."""
    nodes = [helper.make_node("Pad", ["x", "pads"], ["p"], mode=mode),
             helper.make_node("Flatten", ["p"], ["y"], axis=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [_i64("pads", [0, 0, 1, 0, 0, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    module = _module(model)
    assert "aten.pad.default" in module.code and "flatten" in module.code
    _same_as_onnxruntime(model, module, (1, 3))
    program = torch.export.export(module, (torch.zeros(2, 4, 6),),
                                  dynamic_shapes=[{0: torch.export.Dim("batch", min=1, max=1024)}])
    _same_as_onnxruntime(model, program.module(), (1, 5))


def _shape_slices_model() -> Any:
    """x: [batch, 4, 6], as torch.onnx writes size lists: Slices of the whole Shape(x) (one size, or several),
    and Shape(x) itself as an Expand's shape.
    y = Reshape(x, Concat([-1], Shape(x)[-2:-1], Shape(x)[-1:]))             -> [batch, 4, 6]
    t = Reshape(Transpose(x), Concat(Shape(x)[:-2], Shape(x)[-1:], Shape(x)[-2:-1]))  -> [batch, 6, 4]
    e = Expand(c, Shape(x)) with c [1, 4, 6]                                    -> [batch, 4, 6]
    e2 = Expand(c2, Shape(x)), the same Shape, with c2 [1, 1, 6]                -> [batch, 4, 6]"""
    big, small = 2**63 - 1, -(2**63)
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=0),
             helper.make_node("Slice", ["s", "m2", "m1"], ["s_m2"]),
             helper.make_node("Slice", ["s", "m1", "end"], ["s_m1"]),
             helper.make_node("Slice", ["s", "begin", "m2"], ["s_lead"]),
             helper.make_node("Concat", ["m1", "s_m2", "s_m1"], ["size_y"], axis=0),
             helper.make_node("Reshape", ["x", "size_y"], ["y"]),
             helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
             helper.make_node("Concat", ["s_lead", "s_m1", "s_m2"], ["size_t"], axis=0),
             helper.make_node("Reshape", ["xt", "size_t"], ["t"]),
             helper.make_node("Shape", ["x"], ["s_all"]),
             helper.make_node("Expand", ["c", "s_all"], ["e"]),
             helper.make_node("Expand", ["c2", "s_all"], ["e2"])]
    inits = [_i64("m1", [-1]), _i64("m2", [-2]), _i64("end", [big]), _i64("begin", [small]),
             numpy_helper.from_array(np.arange(24, dtype=np.float32).reshape(1, 4, 6), "c"),
             numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(1, 1, 6), "c2")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "t", "e", "e2")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 6])],
                              outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_slices_of_the_whole_shape_are_split_into_one_size_each_and_the_module_traces() -> None:
    """torch.onnx reads sizes as Slices of the whole Shape (``x.shape[-2:]``, ``x.shape[:-2]``) and Expands to a
    whole Shape; the ``onnx-size-literals`` pass splits each read into one size per dimension (a literal where the
    type knows it, a one-dimension Shape where not), so the sizes become SymInts and ints and torch.export traces
    the module with the batch dynamic."""
    import amanda_onnx
    from amanda_torch.onnx_sizes import split_shape_reads

    model = _shape_slices_model()
    graph = amanda_onnx.load_model(model)
    amanda_onnx.infer_types(graph)
    # the five slices of the two lists, and the Shape the two Expands read, once for each
    assert split_shape_reads(graph) == 7
    # the four known sizes of the lists and each Expand's two as literals, the batch as three one-dimension Shapes
    # (one per list); the slices, the whole Shapes and the Slices' bounds gone (the [-1] the first list reads stays)
    assert sorted(op.type for op in graph) == sorted(
        ["Constant"] * 8 + ["Shape"] * 3 + ["Concat"] * 4 + ["Reshape", "Reshape", "Transpose", "Expand", "Expand"]
        + ["Initializer"] * 3)
    assert all(op.attrs.get("end") == op.attrs.get("start", 0) + 1 for op in graph if op.type == "Shape")
    module = _module(model)
    assert "sym_size" in module.code and "_shape_as_tensor" not in module.code, module.code
    _same_as_onnxruntime(model, module)
    program = torch.export.export(module, (torch.zeros(2, 4, 6),),
                                  dynamic_shapes=[{0: torch.export.Dim("batch", min=1, max=1024)}])
    _same_as_onnxruntime(model, program.module())


@pytest.mark.parametrize("name", ["vit", "bert"])
def test_torch_onnx_models_with_a_dynamic_batch_come_back_as_programs_that_trace(name: str) -> None:
    """The files torch.onnx.export(dynamo=True) writes for ViT and BERT with a dynamic batch (attention reshapes
    reading ``x.shape[-2:]`` as Slices of the whole Shape; BERT's mask unsqueezed at two axes and expanded, twice,
    to one Shape) convert to modules torch.export traces with the batch dynamic, which match onnxruntime at batch 1
    and 3."""
    import warnings

    pytest.importorskip("onnxscript", reason="torch.onnx.export(dynamo=True) needs onnxscript: "
                                             "bash scripts/setup-bench.sh installs it")
    module, args = models.FACTORIES[name]()
    batch = torch.export.Dim("batch", min=1, max=64)
    dynamic = tuple({0: batch} for _ in args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = torch.onnx.export(module, args, dynamo=True, verbose=False, dynamic_shapes=dynamic).model_proto
    converted = _module(model)
    assert "_shape_as_tensor" not in converted.code
    exported = torch.export.export(converted, args, dynamic_shapes=list(dynamic)).module()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for n in (1, 3):
        feeds = [np.repeat(a.numpy()[:1], n, axis=0) for a in args]
        if name == "vit":
            feeds = [np.random.default_rng(n).standard_normal(feeds[0].shape).astype(np.float32)]
        want = sess.run(None, {i.name: f for i, f in zip(sess.get_inputs(), feeds)})
        with torch.no_grad():
            got = exported(*[torch.from_numpy(f) for f in feeds])
        got = [got] if isinstance(got, torch.Tensor) else list(got.values() if isinstance(got, dict) else got)
        assert len(got) == len(want)
        for w, g in zip(want, got):
            w = np.asarray(w)
            assert np.abs(g.detach().numpy() - w).max() <= 1e-4 * max(np.abs(w).max(), 1e-30)


def test_two_constant_axes_of_unsqueeze_over_a_dynamic_size_are_two_unsqueezes() -> None:
    """Unsqueeze by constant axes [1, -1] of a [batch] tensor (output [batch, 1, 1], the batch unknown):
    two ``aten::unsqueeze`` with the axes made non-negative, not dims read from a tensor."""
    nodes = [helper.make_node("Shape", ["x"], ["b"], start=0, end=1),
             helper.make_node("Squeeze", ["b"], ["b0"]),
             helper.make_node("Range", ["zero", "b0", "one"], ["ids"]),
             helper.make_node("Unsqueeze", ["ids", "axes"], ["u"]),
             helper.make_node("Cast", ["u"], ["uf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["x", "uf"], ["y"])]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"), numpy_helper.from_array(np.array(1, np.int64),
                                                                                           "one"),
             _i64("axes", [1, -1])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    module = _module(model)
    code = module.code.replace("\n", " ")
    assert code.count("torch.ops.aten.unsqueeze.default") == 2 and ", 1)" in code and ", 2)" in code, module.code
    _same_as_onnxruntime(model, module)
    program = torch.export.export(module, (torch.zeros(2, 4, 6),),
                                  dynamic_shapes=[{0: torch.export.Dim("batch", min=1, max=1024)}])
    _same_as_onnxruntime(model, program.module())
