"""The layouts a conversion records for a graph's inputs and outputs (``amanda_core.ir.layout``): where they are
read from, how a second change composes with the first, and what the provenance keeps."""

from __future__ import annotations

import json

import numpy as np

from amanda_core.ir import Graph
from amanda_core.ir.layout import io_layouts, layout_record, record_input_layout, record_output_layout


def test_layouts_are_read_from_the_graph_the_onnx_metadata_and_the_provenance():
    g = Graph("amanda/onnx/18")
    assert io_layouts(g) == ({}, {})
    g.attrs["model_metadata_props"] = [{"key": "amanda.input_layout.image", "value": "0,3,1,2"},
                                       {"key": "amanda.provenance",
                                        "value": json.dumps({"output_layout": {"y": "0,2,3,1"}})},
                                       {"key": "amanda.input_layout.bad", "value": "0,0,1"}]  # not a permutation
    assert io_layouts(g) == ({"image": [0, 3, 1, 2]}, {"y": [0, 2, 3, 1]})
    g.attrs["amanda_provenance"] = {"input_layout": {"ids": "1,0"}}
    assert io_layouts(g)[0] == {"ids": [1, 0], "image": [0, 3, 1, 2]}


def test_a_second_layout_change_composes_with_the_first():
    g = Graph("amanda/tensorflow/2.21.0")
    first = [0, 2, 3, 1]
    assert record_input_layout(g, "x", first) == first
    second = [0, 3, 1, 2]  # the next conversion moves it back
    assert record_input_layout(g, "x", second) == [0, 1, 2, 3]
    assert io_layouts(g)[0] == {}  # back to the first model's layout: nothing to permute
    assert g.attrs["amanda.input_layout"] == {"x": "0,1,2,3"}  # (kept, so that it overrides an older record)
    record_input_layout(g, "z", [1, 0, 2])
    record_input_layout(g, "z", [0, 2, 1])
    total = io_layouts(g)[0]["z"]
    cube = np.arange(24).reshape(2, 3, 4)
    assert np.array_equal(np.transpose(np.transpose(cube, [1, 0, 2]), [0, 2, 1]), np.transpose(cube, total))
    # outputs: transpose(new, q) gives the old output; two moves compose to what gives the first model's
    record_output_layout(g, "y", [0, 3, 1, 2])  # the second model gives NHWC where the first gave NCHW
    record_output_layout(g, "y", [0, 1, 3, 2])  # a third gives the second's with its last two axes swapped
    q = io_layouts(g)[1]["y"]
    third = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    first = np.transpose(np.transpose(third, [0, 1, 3, 2]), [0, 3, 1, 2])
    assert np.array_equal(np.transpose(third, q), first)
    assert layout_record(g) == {"input_layout": {"z": ",".join(map(str, total))},
                                "output_layout": {"y": ",".join(map(str, q))}}
