"""The ONNX opset tables: what they hold, how they are generated, and each written rule on a model built for it.

Upgrades are checked by running the converted model in onnxruntime against a NumPy reference (models of opsets
onnxruntime no longer runs) or against the original model; downgrades against the original model.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from typing import Any

import numpy as np
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import pytest
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import amanda_onnx  # noqa: E402
from amanda_core import hookimpl  # noqa: E402
from amanda_core.mapping import Conversion, ConversionError, convert, table_to_dict  # noqa: E402
from amanda_onnx import opset  # noqa: E402
from amanda_onnx.opset.diff import AttrInfo, OpChange, PortInfo, step_changes  # noqa: E402
from amanda_onnx.opset.generate import downgrade_rule, load_policy, upgrade_rule  # noqa: E402

F = TensorProto.FLOAT


# --------------------------------------------------------------------------- helpers


def model(nodes: list[Any], inputs: list[tuple[str, int, list[int] | None]],
          outputs: list[tuple[str, int, list[int] | None]], version: int, inits: dict[str, np.ndarray] | None = None,
          ir: int = 7) -> Any:
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        initializer=[numpy_helper.from_array(v, k) for k, v in (inits or {}).items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", version)], ir_version=ir)


def registry() -> Any:
    from amanda_core.plugin.manager import registry as current

    return current().namespaces


def convert_model(m: Any, target: int) -> tuple[Any, Conversion]:
    graph = amanda_onnx.load_model(m)
    result = convert(graph, f"amanda/onnx/{target}", opset.tables(), registry(), copy=False)
    return amanda_onnx.to_model(result.graph), result


def rules_used(result: Conversion) -> set[str]:
    return {r.rule for report in result.reports for r in report.rules if r.matches}


def run(m: Any, feeds: dict[str, np.ndarray]) -> list[Any]:
    options = ort.SessionOptions()
    options.log_severity_level = 4
    session = ort.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def opset_of(m: Any) -> int:
    return next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))


RNG = np.random.default_rng(7)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


# --------------------------------------------------------------------------- the tables


def test_one_table_per_step_and_direction_with_carry():
    first, last = 1, opset.newest_opset()
    ups, downs = opset.upgrade_tables(), opset.downgrade_tables()
    assert [(t.src, t.dst) for t in ups] == [(f"amanda/onnx/{n}", f"amanda/onnx/{n + 1}") for n in range(first, last)]
    assert [(t.src, t.dst) for t in downs] == [(f"amanda/onnx/{n + 1}", f"amanda/onnx/{n}")
                                               for n in range(first, last)]
    assert all(t.carry == "unchanged" for t in ups + downs)
    assert opset.tables() == ups + downs
    names = [t.name for t in ups + downs]
    assert len(set(names)) == len(names) and names[11] == "onnx-opset-12-to-13"


def test_tables_import_no_onnx_once_the_schemas_are_cached():
    opset.tables()  # warms the cache this process and the child share (AMANDA_CACHE_DIR)
    code = textwrap.dedent("""
        import sys
        from amanda_onnx import opset
        tables = opset.tables()
        assert len(tables) == 2 * (opset.newest_opset() - 1), len(tables)
        print("onnx" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ),
                         check=True)
    assert out.stdout.strip() == "False"


def test_every_upgrade_change_has_a_rule_but_the_documented_ones():
    assert [(n, op) for n, op, _ in opset.missing("upgrade")] == [(5, "Tile")]
    by_step = {int(t.src.rsplit("/", 1)[1]): t for t in opset.upgrade_tables()}
    for n, changes in step_changes().items():
        matched = {v for r in by_step[n].rules.values() for p in r.src.ops.values()
                   for v in (p.type.value if isinstance(p.type.value, list) else [p.type.value])}
        for c in changes:
            assert c.op in matched or (n, c.op) == (5, "Tile"), (n, c.op)


def test_written_rules_come_first_and_generated_ones_are_grouped():
    t = next(t for t in opset.upgrade_tables() if t.name == "onnx-opset-12-to-13")
    names = list(t.rules)
    assert names[:2] == ["softmax_last_axis", "softmax_coerced_2d"]
    same = t.rules["same_meaning"]
    types = same.src.ops["$op"].type.value
    assert "Add" in types and "Softmax" not in types and "Squeeze" not in types
    assert "Erf" in t.rules  # lost its integer types: a rule of its own with a type condition
    assert t.source and t.source.endswith("rules/upgrade/12.yaml")
    data = table_to_dict(t)["table"]
    assert data["carry"] == "unchanged" and "same_meaning" in data["rules"]


def test_every_step_of_the_semantic_list_is_not_generated():
    policy = load_policy()
    for n, changes in step_changes().items():
        for c in changes:
            if (n, c.op) in policy.written:
                assert upgrade_rule(c, policy)[0] is None
                assert downgrade_rule(c, policy)[0] is None


# --------------------------------------------------------------------------- the generator


def _change(**kw: Any) -> OpChange:
    port = PortInfo("X", False, False, ("tensor(float)",), "T")
    out = PortInfo("Y", False, False, ("tensor(float)",), "T")
    base: dict[str, Any] = dict(op="Op", step=30, old_inputs=(port,), new_inputs=(port,), old_outputs=(out,),
                                new_outputs=(out,), old_attrs=(), new_attrs=())
    base.update(kw)
    return OpChange(**base)


def test_generated_upgrade_writes_out_a_changed_default_and_drops_hints():
    c = _change(old_attrs=(AttrInfo("alpha", "onnx.FLOAT", False, 1.5), AttrInfo("consumed_inputs", "onnx.INTS",
                                                                                   False, None)),
                new_attrs=(AttrInfo("alpha", "onnx.FLOAT", False, 2.0),))
    rule, _ = upgrade_rule(c, load_policy())
    assert rule == {"src": {"ops": {"$op": {"type": "Op", "attrs": {"alpha": "$alpha"}}}},
                    "dst": {"ops": {"$op": {"keep_attrs": ["alpha"], "attrs": {"alpha": "$alpha"}}}}}


def test_generated_upgrade_refuses_what_it_cannot_know():
    policy = load_policy()
    removed = _change(old_attrs=(AttrInfo("broadcast", "onnx.INT", False, 0),))
    assert upgrade_rule(removed, policy) == (None, "attribute 'broadcast' removed")
    became = _change(old_attrs=(AttrInfo("axis", "onnx.INT", False, None),),
                     new_attrs=(AttrInfo("axis", "onnx.INT", False, 0),))
    assert "got a default" in upgrade_rule(became, policy)[1]
    renamed = _change(new_inputs=(PortInfo("input", False, False, ("tensor(float)",), "T"),))
    assert "became 'input'" in upgrade_rule(renamed, policy)[1]
    required_input = _change(new_inputs=(PortInfo("X", False, False, ("tensor(float)",), "T"),
                                         PortInfo("K", False, False, ("tensor(int64)",), "")))
    assert upgrade_rule(required_input, policy)[1] == "new required input 'K'"


def test_generated_upgrade_checks_dropped_types_where_the_graph_knows_them():
    narrow = PortInfo("X", False, False, ("tensor(float)",), "T")
    c = _change(old_inputs=(PortInfo("X", False, False, ("tensor(float)", "tensor(int32)"), "T"),),
                new_inputs=(narrow,))
    rule, _ = upgrade_rule(c, load_policy())
    assert "tensor(int32)" in rule["src"]["where"]


def test_generated_downgrade_needs_new_attributes_at_their_default_and_known_types():
    c = _change(new_attrs=(AttrInfo("mode", "onnx.STRING", False, "a"), AttrInfo("dil", "onnx.INTS", False, None)),
                new_inputs=(PortInfo("X", False, False, ("tensor(float)", "tensor(int8)"), "T"),
                            PortInfo("extra", True, False, ("tensor(int64)",), "")))
    rule, _ = downgrade_rule(c, load_policy())
    src = rule["src"]
    assert src["ops"]["$op"]["attrs"] == {"mode": "a", "dil": "${value is None}"}
    assert "len(op.inputs) <= 1" in src["where"] and "('tensor(float)',)" in src["where"]
    assert rule["dst"] == {"ops": {"$op": {"keep_attrs": []}}}
    assert downgrade_rule(_change(), load_policy())[1].startswith("the newer version changed only")


# --------------------------------------------------------------------------- written upgrade rules


def test_softmax_12_off_the_last_axis_becomes_flatten_softmax_reshape():
    x = rand(2, 3, 4)
    m = model([helper.make_node("Softmax", ["x"], ["y"], axis=1)], [("x", F, [2, 3, 4])], [("y", F, [2, 3, 4])],
              12)
    up, result = convert_model(m, 13)
    assert "softmax_coerced_2d" in rules_used(result)
    assert sorted(n.op_type for n in up.graph.node) == ["Flatten", "Reshape", "Shape", "Softmax"]
    rows = x.reshape(2, 12)
    ref = (np.exp(rows) / np.exp(rows).sum(axis=1, keepdims=True)).reshape(2, 3, 4)
    np.testing.assert_allclose(run(up, {"x": x})[0], ref, rtol=1e-5)
    np.testing.assert_allclose(run(up, {"x": x})[0], run(m, {"x": x})[0], rtol=1e-5)


def test_softmax_12_on_the_last_axis_stays_one_op():
    m = model([helper.make_node("LogSoftmax", ["x"], ["y"], axis=2)], [("x", F, [2, 3, 4])],
              [("y", F, [2, 3, 4])], 12)
    up, result = convert_model(m, 13)
    assert "softmax_last_axis" in rules_used(result)
    assert [(n.op_type, n.attribute[0].i) for n in up.graph.node] == [("LogSoftmax", 2)]
    x = rand(2, 3, 4)
    np.testing.assert_allclose(run(up, {"x": x})[0], run(m, {"x": x})[0], rtol=1e-5)


@pytest.mark.parametrize("node, shape, out", [
    (helper.make_node("Squeeze", ["x"], ["y"], axes=[1]), [2, 1, 3], [2, 3]),
    (helper.make_node("Squeeze", ["x"], ["y"]), [2, 1, 3], [2, 3]),
    (helper.make_node("Unsqueeze", ["x"], ["y"], axes=[0, 3]), [2, 3], [1, 2, 3, 1]),
    (helper.make_node("ReduceSum", ["x"], ["y"], axes=[0, 2], keepdims=0), [2, 3, 4], [3]),
    (helper.make_node("ReduceSum", ["x"], ["y"]), [2, 3, 4], [1, 1, 1]),
])
def test_axes_attributes_become_inputs_at_13(node, shape, out):
    m = model([node], [("x", F, shape)], [("y", F, out)], 12)
    up, _ = convert_model(m, 13)
    x = rand(*shape)
    got = run(up, {"x": x})[0]
    assert list(got.shape) == out
    np.testing.assert_allclose(got, run(m, {"x": x})[0], rtol=1e-6)


def test_split_sizes_to_input_at_13_and_num_outputs_at_18():
    sized = model([helper.make_node("Split", ["x"], ["a", "b"], axis=1, split=[1, 3])], [("x", F, [2, 4])],
                  [("a", F, None), ("b", F, None)], 12)
    equal = model([helper.make_node("Split", ["x"], ["a", "b"], axis=1)], [("x", F, [2, 4])],
                  [("a", F, None), ("b", F, None)], 12)
    x = rand(2, 4)
    for m in (sized, equal):
        up, result = convert_model(m, 18)
        split = next(n for n in up.graph.node if n.op_type == "Split")
        if m is equal:
            assert {a.name: a.i for a in split.attribute} == {"axis": 1, "num_outputs": 2}
            assert "split_equal_parts" in rules_used(result)
        else:
            assert len(split.input) == 2
        for got, ref in zip(run(up, {"x": x}), run(m, {"x": x})):
            np.testing.assert_array_equal(got, ref)


def test_reductions_take_axes_as_input_at_18():
    m = model([helper.make_node("ReduceMean", ["x"], ["y"], axes=[1]),
               helper.make_node("ReduceMax", ["y"], ["z"])], [("x", F, [2, 3, 4])], [("z", F, None)], 17)
    up, result = convert_model(m, 18)
    assert {"reduce_axes", "reduce_all_axes"} <= rules_used(result)
    x = rand(2, 3, 4)
    np.testing.assert_allclose(run(up, {"x": x})[0], run(m, {"x": x})[0], rtol=1e-6)


def test_clip_pad_resize_scatter_at_11():
    clip = model([helper.make_node("Clip", ["x"], ["y"], min=-0.5)], [("x", F, [3, 4])], [("y", F, [3, 4])], 10)
    pad = model([helper.make_node("Pad", ["x"], ["y"], pads=[0, 1, 1, 0], value=1.5)], [("x", F, [2, 2])],
                [("y", F, [3, 3])], 10)
    resize = model([helper.make_node("Resize", ["x", "s"], ["y"], mode="nearest")], [("x", F, [1, 1, 2, 2])],
                   [("y", F, None)], 10, inits={"s": np.array([1, 1, 2, 3], np.float32)})
    linear = model([helper.make_node("Resize", ["x", "s"], ["y"], mode="linear")], [("x", F, [1, 1, 2, 2])],
                   [("y", F, None)], 10, inits={"s": np.array([1, 1, 2, 2], np.float32)})
    scatter = model([helper.make_node("Scatter", ["x", "i", "u"], ["y"], axis=1)], [("x", F, [2, 3])],
                    [("y", F, [2, 3])], 10, inits={"i": np.array([[2], [0]], np.int64),
                                                   "u": np.array([[5.0], [6.0]], np.float32)})
    for m, shape in ((clip, [3, 4]), (pad, [2, 2]), (resize, [1, 1, 2, 2]), (linear, [1, 1, 2, 2]),
                     (scatter, [2, 3])):
        up, _ = convert_model(m, 11)
        x = rand(*shape)
        np.testing.assert_allclose(run(up, {"x": x})[0], run(m, {"x": x})[0], rtol=1e-6)
    up, _ = convert_model(scatter, 11)
    assert [n.op_type for n in up.graph.node] == ["ScatterElements"]
    up, _ = convert_model(resize, 11)
    attrs = {a.name: a.s for a in up.graph.node[-1].attribute}
    assert attrs["coordinate_transformation_mode"] == b"asymmetric" and attrs["nearest_mode"] == b"floor"


def test_clip_of_an_untyped_value_is_not_guessed():
    m = model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Clip", ["r"], ["y"], max=1.0)],
              [("x", F, [2])], [("y", F, [2])], 10)
    graph = amanda_onnx.load_model(m)
    graph.ops[next(n for n, op in graph.ops.items() if op.type == "Relu")].output_ports[0].dtype = None
    graph.output_ports["y"].dtype = None
    with pytest.raises(ConversionError, match="Clip"):
        convert(graph, "amanda/onnx/11", opset.tables(), registry())


def test_slice_topk_upsample_at_10():
    sl = model([helper.make_node("Slice", ["x"], ["y"], starts=[1, 0], ends=[3, 100], axes=[0, 1])],
               [("x", F, [4, 3])], [("y", F, None)], 9)
    topk = model([helper.make_node("TopK", ["x"], ["v", "i"], k=2)], [("x", F, [3, 5])],
                 [("v", F, None), ("i", TensorProto.INT64, None)], 9)
    up_nearest = model([helper.make_node("Upsample", ["x", "s"], ["y"])], [("x", F, [1, 1, 2, 2])],
                       [("y", F, None)], 9, inits={"s": np.array([1, 1, 2, 2], np.float32)})
    for m, shape in ((sl, [4, 3]), (topk, [3, 5]), (up_nearest, [1, 1, 2, 2])):
        up, _ = convert_model(m, 10)
        x = rand(*shape)
        for got, ref in zip(run(up, {"x": x}), run(m, {"x": x})):
            np.testing.assert_array_equal(got, ref)
    up, _ = convert_model(up_nearest, 10)
    assert [n.op_type for n in up.graph.node] == ["Resize"]


def test_dropout_ratio_at_12_and_batchnorm_at_14():
    drop = model([helper.make_node("Dropout", ["x"], ["y"], ratio=0.2)], [("x", F, [2, 3])], [("y", F, [2, 3])],
                 11)
    up, _ = convert_model(drop, 12)
    ratio = next(n for n in up.graph.node if n.op_type == "Constant")
    assert float(numpy_helper.to_array(ratio.attribute[0].t)) == pytest.approx(0.2)
    x = rand(2, 3)
    np.testing.assert_array_equal(run(up, {"x": x})[0], x)
    stats = {"s": rand(3), "b": rand(3), "m": rand(3), "v": np.abs(rand(3)) + 0.5}
    bn = model([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])], [("x", F, [2, 3, 4])],
               [("y", F, None)], 13, inits=stats)
    up, result = convert_model(bn, 14)
    assert "batchnorm_inference" in rules_used(result)
    assert list(up.graph.node[0].input) == ["x", "s", "b", "m", "v"]
    x = rand(2, 3, 4)
    np.testing.assert_allclose(run(up, {"x": x})[0], run(bn, {"x": x})[0], rtol=1e-6)


def test_batchnorm_training_outputs_at_14():
    stats = {"s": rand(3), "b": rand(3), "m": rand(3), "v": np.abs(rand(3)) + 0.5}
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"], momentum=0.8)
    m = model([node], [("x", F, [2, 3, 4])], [("y", F, None), ("rm", F, None), ("rv", F, None)], 13, inits=stats)
    up, result = convert_model(m, 14)
    assert "batchnorm_training" in rules_used(result)
    bn = up.graph.node[0]
    assert {a.name: (a.i if a.type == 2 else round(a.f, 6)) for a in bn.attribute} == {
        "epsilon": 1e-05, "momentum": 0.8, "training_mode": 1}
    assert list(bn.output) == ["y", "rm", "rv"] and bn.name == (node.name or bn.name)
    # saved statistics that something reads have no opset-14 equivalent: not converted
    read = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv", "sm", "sv"])
    m5 = model([read], [("x", F, [2, 3, 4])], [("y", F, None), ("sm", F, None)], 13, inits=stats)
    with pytest.raises(ConversionError, match="BatchNormalization"):
        convert_model(m5, 14)


def test_roialign_keeps_its_coordinates_at_16():
    m = model([helper.make_node("RoiAlign", ["x", "r", "i"], ["y"], output_height=2, output_width=2)],
              [("x", F, [1, 1, 4, 4])], [("y", F, None)], 15,
              inits={"r": np.array([[0.5, 0.5, 2.5, 2.5]], np.float32), "i": np.array([0], np.int64)})
    up, _ = convert_model(m, 16)
    attrs = {a.name: a for a in up.graph.node[0].attribute}
    assert attrs["coordinate_transformation_mode"].s == b"output_half_pixel"
    x = rand(1, 1, 4, 4)
    np.testing.assert_allclose(run(up, {"x": x})[0], run(m, {"x": x})[0], rtol=1e-5)


def test_grid_sample_modes_and_dft_axis_at_20():
    g = model([helper.make_node("GridSample", ["x", "grid"], ["y"], mode="bilinear")],
              [("x", F, [1, 1, 3, 3]), ("grid", F, [1, 2, 2, 2])], [("y", F, None)], 19)
    up, _ = convert_model(g, 20)
    assert up.graph.node[0].attribute[0].s == b"linear"
    feeds = {"x": rand(1, 1, 3, 3), "grid": np.clip(rand(1, 2, 2, 2), -1, 1)}
    np.testing.assert_allclose(run(up, feeds)[0], run(g, feeds)[0], rtol=1e-5)
    d = model([helper.make_node("DFT", ["x"], ["y"])], [("x", F, [1, 4, 1])], [("y", F, None)], 19)
    up, _ = convert_model(d, 20)
    axis = next(n for n in up.graph.node if n.op_type == "Constant")
    assert int(numpy_helper.to_array(axis.attribute[0].t)) == 1
    x = rand(1, 4, 1)
    np.testing.assert_allclose(run(up, {"x": x})[0], run(d, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_group_normalization_scale_per_channel_at_21():
    x, scale, bias = rand(2, 4, 3), np.array([2.0, 3.0], np.float32), np.array([0.5, -1.0], np.float32)
    m = model([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2)],
              [("x", F, [2, 4, 3])], [("y", F, None)], 20, inits={"s": scale, "b": bias})
    up, _ = convert_model(m, 21)
    groups = x.reshape(2, 2, -1)
    norm = ((groups - groups.mean(-1, keepdims=True)) / np.sqrt(groups.var(-1, keepdims=True) + 1e-5))
    ref = norm.reshape(2, 4, 3) * np.repeat(scale, 2)[None, :, None] + np.repeat(bias, 2)[None, :, None]
    np.testing.assert_allclose(run(up, {"x": x})[0], ref, rtol=1e-4, atol=1e-5)


# opsets onnxruntime does not run any more: NumPy references


def test_legacy_broadcast_at_7():
    a, b = rand(2, 3, 4, 5), rand(3, 4)
    m = model([helper.make_node("Add", ["a", "b"], ["y"], broadcast=1, axis=1)],
              [("a", F, [2, 3, 4, 5]), ("b", F, [3, 4])], [("y", F, None)], 6)
    up, result = convert_model(m, 7)
    assert "binary_broadcast_axis" in rules_used(result)
    np.testing.assert_allclose(run(up, {"a": a, "b": b})[0], a + b[None, :, :, None], rtol=1e-6)
    c = rand(5)
    trailing = model([helper.make_node("Mul", ["a", "c"], ["y"], broadcast=1)], [("a", F, [2, 3, 4, 5]),
                                                                              ("c", F, [5])], [("y", F, None)], 6)
    up, result = convert_model(trailing, 7)
    assert "binary_broadcast_trailing" in rules_used(result) and len(up.graph.node) == 1
    np.testing.assert_allclose(run(up, {"a": a, "c": c})[0], a * c, rtol=1e-6)
    unknown = model([helper.make_node("Sub", ["a", "c"], ["y"], broadcast=1, axis=1)],
                    [("a", F, None), ("c", F, None)], [("y", F, None)], 6)
    with pytest.raises(ConversionError, match="Sub"):
        convert_model(unknown, 7)


def test_gemm_batchnorm_dropout_upsample_at_7():
    a, b, c = rand(2, 3), rand(3, 4), rand(4)
    gemm = model([helper.make_node("Gemm", ["a", "b", "c"], ["y"], broadcast=1)],
                 [("a", F, [2, 3]), ("b", F, [3, 4]), ("c", F, [4])], [("y", F, None)], 6)
    up, _ = convert_model(gemm, 7)
    np.testing.assert_allclose(run(up, {"a": a, "b": b, "c": c})[0], a @ b + c, rtol=1e-5)
    stats = {"s": rand(3), "b": rand(3), "m": rand(3), "v": np.abs(rand(3)) + 0.5}
    bn = model([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], is_test=1)],
               [("x", F, [2, 3, 4])], [("y", F, None)], 6, inits=stats)
    up, _ = convert_model(bn, 9)
    x = rand(2, 3, 4)
    sh = (1, 3, 1)
    ref = (x - stats["m"].reshape(sh)) / np.sqrt(stats["v"].reshape(sh) + 1e-5) * stats["s"].reshape(sh) + \
        stats["b"].reshape(sh)
    np.testing.assert_allclose(run(up, {"x": x})[0], ref, rtol=1e-5)
    training = model([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])],
                     [("x", F, [2, 3, 4])], [("y", F, None)], 6, inits=stats)
    with pytest.raises(ConversionError, match="BatchNormalization"):
        convert_model(training, 7)  # is_test = 0 with Y alone: training with batch statistics, no equivalent
    drop = model([helper.make_node("Dropout", ["x"], ["y"], is_test=1, ratio=0.3)], [("x", F, [2, 3])],
                 [("y", F, None)], 6)
    up, _ = convert_model(drop, 7)
    x = rand(2, 3)
    np.testing.assert_array_equal(run(up, {"x": x})[0], x)
    ups = model([helper.make_node("Upsample", ["x"], ["y"], height_scale=2.0, width_scale=3.0)],
                [("x", F, [1, 1, 2, 2])], [("y", F, None)], 6)
    up, _ = convert_model(ups, 7)
    x = rand(1, 1, 2, 2)
    np.testing.assert_array_equal(run(up, {"x": x})[0], x.repeat(2, axis=2).repeat(3, axis=3))


def test_legacy_attributes_before_7():
    x = rand(2, 3)
    cast = model([helper.make_node("Cast", ["x"], ["y"], to="INT32")], [("x", F, [2, 3])],
                 [("y", TensorProto.INT32, None)], 5)
    up, _ = convert_model(cast, 7)
    assert up.graph.node[0].attribute[0].i == TensorProto.INT32
    np.testing.assert_array_equal(run(up, {"x": x})[0], x.astype(np.int32))
    reshape = model([helper.make_node("Reshape", ["x"], ["y"], shape=[3, -1], consumed_inputs=[0])],
                    [("x", F, [2, 3])], [("y", F, None)], 4)
    up, _ = convert_model(reshape, 7)
    np.testing.assert_array_equal(run(up, {"x": x})[0], x.reshape(3, 2))
    concat = model([helper.make_node("Concat", ["x", "x"], ["y"])], [("x", F, [2, 3])], [("y", F, None)], 3)
    up, _ = convert_model(concat, 7)
    np.testing.assert_array_equal(run(up, {"x": x})[0], np.concatenate([x, x], axis=1))
    relu = model([helper.make_node("Relu", ["x"], ["y"], consumed_inputs=[0])], [("x", F, [2, 3])],
                 [("y", F, None)], 5)
    up, _ = convert_model(relu, 7)
    assert not up.graph.node[0].attribute
    np.testing.assert_array_equal(run(up, {"x": x})[0], np.maximum(x, 0))
    selu = model([helper.make_node("Selu", ["x"], ["y"])], [("x", F, [2, 3])], [("y", F, None)], 5)
    up, _ = convert_model(selu, 7)
    attrs = {a.name: a.f for a in up.graph.node[0].attribute}
    assert attrs == pytest.approx({"alpha": 1.6732, "gamma": 1.0507}, rel=1e-6)


def test_opset_1_attributes():
    x = rand(1, 2, 3, 3)
    pad = model([helper.make_node("Pad", ["x"], ["y"], paddings=[0, 0, 1, 0, 0, 0, 0, 2])],
                [("x", F, [1, 2, 3, 3])], [("y", F, None)], 1)
    up, _ = convert_model(pad, 11)
    np.testing.assert_array_equal(run(up, {"x": x})[0], np.pad(x, [(0, 0), (0, 0), (1, 0), (0, 2)]))
    lp = model([helper.make_node("GlobalLpPool", ["x"], ["y"], p=2.0)], [("x", F, [1, 2, 3, 3])],
               [("y", F, None)], 1)
    up, _ = convert_model(lp, 7)
    assert up.graph.node[0].attribute[0].type == onnx.AttributeProto.INT
    np.testing.assert_allclose(run(up, {"x": x})[0], np.sqrt((x ** 2).sum(axis=(2, 3), keepdims=True)), rtol=1e-5)
    split = model([helper.make_node("Split", ["x"], ["a", "b"], axis=2, split=[1, 2])], [("x", F, [1, 2, 3, 3])],
                  [("a", F, None), ("b", F, None)], 1)
    up, _ = convert_model(split, 7)
    a, b = run(up, {"x": x})
    np.testing.assert_array_equal(a, x[:, :, :1])
    np.testing.assert_array_equal(b, x[:, :, 1:])
    gru = amanda_onnx.load_model(model([helper.make_node("GRU", ["x", "w", "r"], ["y", "h"], hidden_size=2)],
                                       [("x", F, [1, 1, 2]), ("w", F, [1, 6, 2]), ("r", F, [1, 6, 2])],
                                       [("h", F, None)], 2))
    out = convert(gru, "amanda/onnx/3", opset.tables(), registry()).graph
    assert next(op for op in out if op.type == "GRU").attrs["direction"] == "forward"


def test_tile_before_6_is_not_converted():
    m = model([helper.make_node("Tile", ["x", "t", "a"], ["y"])], [("x", F, [2]), ("t", F, []), ("a", F, [])],
              [("y", F, None)], 5)
    with pytest.raises(ConversionError, match=r"Tile \(amanda/onnx/5\)"):
        convert_model(m, 6)


# --------------------------------------------------------------------------- written downgrade rules


def _down(m: Any, target: int, feeds: dict[str, np.ndarray], rule: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        down, result = convert_model(m, target)
    # a constant that only the rewritten op read is swept by the engine with it, before `unread_constant` runs
    assert rule in rules_used(result) or rule == "unread_constant", rules_used(result)
    assert opset_of(down) == target
    for got, ref in zip(run(down, feeds), run(m, feeds)):
        np.testing.assert_array_equal(got, ref)
    return down


def test_downgrades_take_constant_inputs_back_to_attributes():
    x = rand(3, 4)
    clip = model([helper.make_node("Constant", [], ["lo"], value=numpy_helper.from_array(np.float32(-0.3))),
                  helper.make_node("Clip", ["x", "lo"], ["y"])], [("x", F, [3, 4])], [("y", F, [3, 4])], 11)
    down = _down(clip, 10, {"x": x}, "clip_constant_bounds")
    assert [n.op_type for n in down.graph.node] == ["Clip"]
    topk = model([helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.array([2], np.int64))),
                  helper.make_node("TopK", ["x", "k"], ["v", "i"])], [("x", F, [3, 4])],
                 [("v", F, None), ("i", TensorProto.INT64, None)], 10)
    _down(topk, 9, {"x": x}, "topk_constant_k")
    consts = {n: numpy_helper.from_array(np.array(v, np.int64)) for n, v in
              (("st", [1]), ("en", [3]), ("ax", [1]))}
    sl = model([helper.make_node("Constant", [], [n], value=t) for n, t in consts.items()]
               + [helper.make_node("Slice", ["x", "st", "en", "ax"], ["y"])], [("x", F, [3, 4])], [("y", F, None)], 10)
    _down(sl, 9, {"x": x}, "slice_constant_bounds")


def test_downgrades_of_13_and_18_drop_the_constant_they_read():
    x = rand(2, 1, 3)
    axes = numpy_helper.from_array(np.array([1], np.int64))
    sq = model([helper.make_node("Constant", [], ["ax"], value=axes), helper.make_node("Squeeze", ["x", "ax"], ["y"])],
               [("x", F, [2, 1, 3])], [("y", F, None)], 13)
    down = _down(sq, 12, {"x": x}, "axes_constant_owned")
    assert [n.op_type for n in down.graph.node] == ["Squeeze"]
    shared = model([helper.make_node("Constant", [], ["ax"], value=axes),
                    helper.make_node("Squeeze", ["x", "ax"], ["y"]),
                    helper.make_node("ReduceMean", ["x", "ax"], ["z"])],
                   [("x", F, [2, 1, 3])], [("y", F, None), ("z", F, None)], 18)
    down = _down(shared, 17, {"x": x}, "reduce_constant_axes_shared")  # Squeeze still reads the Constant
    assert sorted(n.op_type for n in down.graph.node) == ["Constant", "ReduceMean", "Squeeze"]
    down = _down(shared, 12, {"x": x}, "axes_constant_owned")  # ... until opset 12, where it is its last reader
    assert sorted(n.op_type for n in down.graph.node) == ["ReduceMean", "Squeeze"]
    twice = model([helper.make_node("Constant", [], ["ax"], value=axes),
                   helper.make_node("Squeeze", ["x", "ax"], ["y"]), helper.make_node("Unsqueeze", ["y", "ax"], ["z"])],
                  [("x", F, [2, 1, 3])], [("z", F, None)], 13)
    down = _down(twice, 12, {"x": x}, "axes_constant_shared")
    assert sorted(n.op_type for n in down.graph.node) == ["Squeeze", "Unsqueeze"]


def test_resize_10_is_upsample_9_and_softmax_13_on_the_last_axis_is_softmax_12():
    resize = model([helper.make_node("Resize", ["x", "s"], ["y"])], [("x", F, [1, 1, 2, 2])], [("y", F, None)], 10,
                   inits={"s": np.array([1, 1, 2, 2], np.float32)})
    down = _down(resize, 9, {"x": rand(1, 1, 2, 2)}, "resize_to_upsample")
    assert [n.op_type for n in down.graph.node] == ["Upsample"]
    soft = model([helper.make_node("Softmax", ["x"], ["y"])], [("x", F, [2, 3, 4])], [("y", F, None)], 13)
    _down(soft, 12, {"x": rand(2, 3, 4)}, "softmax_last_axis")
    middle = model([helper.make_node("Softmax", ["x"], ["y"], axis=1)], [("x", F, [2, 3, 4])], [("y", F, None)],
                   13)
    with pytest.raises(ConversionError, match="Softmax"):
        convert_model(middle, 12)


def _const(name: str, value: Any, dtype: Any = np.int64) -> Any:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(value, dtype)))


STATS = {"s": np.array([1.0, 2.0, 0.5], np.float32), "b": np.array([0.1, 0.2, 0.3], np.float32),
         "m": np.array([0.0, 1.0, -1.0], np.float32), "v": np.array([1.0, 0.5, 2.0], np.float32)}

DOWNGRADES = [
    ("dropout_ratio", 12, {"x": [2, 3]},
     [_const("r", 0.25, np.float32), helper.make_node("Dropout", ["x", "r"], ["y"])], None),
    ("reduce_sum_all_axes", 13, {"x": [2, 3]}, [helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0)], None),
    ("reduce_sum_constant_owned", 13, {"x": [2, 3]},
     [_const("a", [1]), helper.make_node("ReduceSum", ["x", "a"], ["y"])], None),
    ("reduce_sum_constant_shared", 13, {"x": [2, 3]},
     [_const("a", [1]), helper.make_node("ReduceSum", ["x", "a"], ["y"]),
      helper.make_node("ReduceSum", ["x", "a"], ["z"], keepdims=0)], None),
    ("split_constant_owned", 13, {"x": [2, 5]},
     [_const("sp", [2, 3]), helper.make_node("Split", ["x", "sp"], ["y", "z"], axis=1)], None),
    ("split_constant_shared", 13, {"x": [2, 5]},
     [_const("sp", [2, 3]), helper.make_node("Split", ["x", "sp"], ["y", "z"], axis=1),
      helper.make_node("Split", ["x", "sp"], ["w", "v"], axis=1)], None),
    ("squeeze_without_axes", 13, {"x": [2, 1, 3]}, [helper.make_node("Squeeze", ["x"], ["y"])], None),
    ("unread_constant", 13, {"x": [2, 1, 3]},
     [_const("a", [1]), helper.make_node("Squeeze", ["x", "a"], ["y"]),
      helper.make_node("Unsqueeze", ["y", "a"], ["z"])], None),
    ("batchnorm_inference", 14, {"x": [2, 3, 4]},
     [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])], STATS),
    ("reduce_constant_axes_owned", 18, {"x": [2, 3]},
     [_const("a", [0]), helper.make_node("ReduceMax", ["x", "a"], ["y"])], None),
    ("roi_align_output_half_pixel", 16, {"x": [1, 1, 4, 4]},
     [_const("r", [[0.5, 0.5, 2.5, 2.5]], np.float32), _const("i", [0]),
      helper.make_node("RoiAlign", ["x", "r", "i"], ["y"], coordinate_transformation_mode="output_half_pixel")],
     None),
    ("grid_sample_modes", 20, {"x": [1, 1, 3, 3], "g": [1, 2, 2, 2]},
     [helper.make_node("GridSample", ["x", "g"], ["y"], mode="linear")], None),
    ("batchnorm_spatial", 9, {"x": [2, 3, 4]},
     [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])], STATS),
]


@pytest.mark.parametrize("rule, version, shapes, nodes, inits", DOWNGRADES, ids=[d[0] for d in DOWNGRADES])
def test_written_downgrade(rule, version, shapes, nodes, inits):
    outs = [o for n in nodes for o in n.output if not any(o in m.input for m in nodes)]
    m = model(nodes, [(k, F, v) for k, v in shapes.items()], [(o, F, None) for o in outs], version, inits=inits)
    feeds = {k: np.clip(rand(*v), -1, 1) for k, v in shapes.items()}
    down = _down(m, version - 1, feeds, rule)
    if not rule.endswith("shared") and rule != "roi_align_output_half_pixel":
        assert "Constant" not in [n.op_type for n in down.graph.node]  # the Constant it read went with it


def test_downgrades_below_onnxruntime():
    x = rand(2, 3)
    reshape = model([_const("s", [3, 2]), helper.make_node("Reshape", ["x", "s"], ["y"])], [("x", F, [2, 3])],
                    [("y", F, None)], 5)
    down, result = convert_model(reshape, 4)
    assert "reshape_constant_shape" in rules_used(result)
    node = next(n for n in down.graph.node if n.op_type == "Reshape")
    assert list(node.input) == ["x"] and list(node.attribute[0].ints) == [3, 2]
    concat = model([helper.make_node("Concat", ["x", "x"], ["y"], axis=0)], [("x", F, [2, 3])], [("y", F, None)], 4)
    down, result = convert_model(concat, 3)
    assert "concat_float" in rules_used(result) and down.graph.node[0].attribute[0].i == 0
    ints = model([helper.make_node("Concat", ["x", "x"], ["y"], axis=0)], [("x", TensorProto.INT32, [2, 3])],
                 [("y", TensorProto.INT32, None)], 4)
    with pytest.raises(ConversionError, match="Concat"):
        convert_model(ints, 3)  # Concat-1 has float types only
    np.testing.assert_array_equal(run(convert_model(concat, 7)[0], {"x": x})[0], np.concatenate([x, x]))


def test_no_downgrade_for_types_the_graph_does_not_show():
    m = model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Relu", ["r"], ["y"])], [("x", F, [2])],
              [("y", F, [2])], 14)
    graph = amanda_onnx.load_model(m)
    out = convert(graph, "amanda/onnx/13", opset.tables(), registry()).graph  # float: Relu-13 takes it
    assert out.namespace == "amanda/onnx/13"
    m8 = model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Relu", ["r"], ["y"])],
               [("x", TensorProto.INT8, [2])], [("y", TensorProto.INT8, [2])], 14)
    with pytest.raises(ConversionError, match="Relu"):
        convert_model(m8, 13)  # Relu-14 added int8


# --------------------------------------------------------------------------- the command line


class OpsetTablesPlugin:
    @hookimpl
    def amanda_mapping_tables(self) -> list[Any]:
        return opset.tables()


def test_amanda_convert_upgrades_a_model_file(tmp_path, onnx_plugin_loaded, amanda_plugin, capsys):
    from amanda_core.cli.main import main
    from amanda_core.mapping import registered_tables
    from amanda_core.plugin.manager import registry as current

    if not any(t.name == "onnx-opset-12-to-13" for t in registered_tables(current())):
        amanda_plugin(OpsetTablesPlugin(), "amanda-onnx-opset-tables")
    m = model([helper.make_node("Unsqueeze", ["x"], ["u"], axes=[0]), helper.make_node("Softmax", ["u"], ["y"])],
              [("x", F, [2, 3])], [("y", F, None)], 11)
    src, dst = tmp_path / "model.onnx", tmp_path / "out.onnx"
    onnx.save(m, str(src))
    assert main(["convert", str(src), "--to", "amanda/onnx/18", "-o", str(dst)]) == 0
    assert "amanda/onnx/11 -> amanda/onnx/18 (7 tables)" in capsys.readouterr().out
    out = onnx.load(str(dst))
    assert opset_of(out) == 18
    x = rand(2, 3)
    np.testing.assert_allclose(run(out, {"x": x})[0], run(m, {"x": x})[0], rtol=1e-6)
