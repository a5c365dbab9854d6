"""The YAML path is lossless too: ONNX -> Amanda -> YAML (``save_graph``, tensors in the sidecar file) -> load
-> ONNX gives the same model (byte-identical deterministic serialization), on a sample of onnx's node cases
(every 7th, plus every case with a subgraph, a sparse tensor or a string tensor) and on every light model."""

import glob
import os
import warnings

import numpy as np
import onnx
import pytest
from onnx.backend.test.loader import load_model_tests
from onnx_suite_support import proto_diff

import amanda_onnx
from amanda_core.serialization import dump_graph, load_graph, save_graph, sidecar_path
from amanda_onnx import SparseTensor

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    _NODE = load_model_tests(kind="node")


def _interesting(model):
    for n in model.graph.node:
        for a in n.attribute:
            if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.SPARSE_TENSOR, onnx.AttributeProto.GRAPHS):
                return True
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == onnx.TensorProto.STRING:
                return True
    return False


# An op attribute named `type` (ONNX's Optional has a TYPE_PROTO one) needs the op's own `type:` key beside it
# (docs/yaml-format.md, "Names and edges"): the sample takes every case with one.
def _has_type_attr(graph):
    for n in graph.node:
        for a in n.attribute:
            if a.name == "type" or any(_has_type_attr(g) for g in [a.g] * a.HasField("g") + list(a.graphs)):
                return True
    return False


_TYPE_ATTR = {c.name for c in _NODE if _has_type_attr(c.model.graph)}

SAMPLE = [pytest.param(c, id=c.name) for i, c in enumerate(_NODE)
          if i % 7 == 0 or _interesting(c.model) or c.name in _TYPE_ATTR]
DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
LIGHT = sorted(glob.glob(os.path.join(DATA, "light", "*.onnx")))


def through_yaml(model, tmp_path):
    graph = amanda_onnx.load_model(model)
    path = tmp_path / "model.yaml"
    written = save_graph(graph, path)
    back = load_graph(path)
    assert graph.diff(back) == []
    return amanda_onnx.to_model(back), written


def test_the_sample_covers_subgraphs_and_sparse_tensors():
    names = {p.id for p in SAMPLE}
    assert len(SAMPLE) >= 300
    assert {"test_if", "test_loop11", "test_scan_sum", "test_constant"} & names


@pytest.mark.slow
@pytest.mark.parametrize("case", SAMPLE)
def test_node_case_through_yaml(case, tmp_path):
    out, _ = through_yaml(case.model, tmp_path)
    assert out.SerializeToString(deterministic=True) == case.model.SerializeToString(deterministic=True), \
        proto_diff(case.model, out)


@pytest.mark.slow
@pytest.mark.parametrize("path", LIGHT, ids=os.path.basename)
def test_light_model_through_yaml(path, tmp_path):
    original = onnx.load(path)
    out, written = through_yaml(path, tmp_path)
    assert out.SerializeToString(deterministic=True) == original.SerializeToString(deterministic=True), \
        proto_diff(original, out)
    if any(len(t.raw_data) > 64 for t in original.graph.initializer):
        assert str(sidecar_path(tmp_path / "model.yaml")) in written  # tensors went to the sidecar file


def test_sparse_tensors_have_a_yaml_form():
    from amanda_core import Graph

    g = Graph("amanda/onnx/17")
    st = SparseTensor(np.array([1.5, 2.5], np.float32), np.array([0, 3], np.int64), [2, 2])
    g.add_op("SparseInitializer", "s", outputs=["output"], attrs={"value": st})
    text = dump_graph(g)
    assert "!onnx.sparse_tensor" in text
    back = load_graph(text).ops["s"].attrs["value"]
    assert isinstance(back, SparseTensor) and back == st and back.to_dense().tolist() == [[1.5, 0], [0, 2.5]]
