"""Freezing a function must not change how TensorFlow runs its control flow.

TensorFlow's freezing (``lower_control_flow=False``) marks every ``If``/``While`` with
``_lower_using_switch_merge = False``; a function built by ``tf.function`` marks them true.  The mark decides
whether TensorFlow inlines the op's functions as ``Switch``/``Merge`` or calls them, and so which kernels grappler
fuses in the body: on some CPUs a loop body's ``tanh(x @ w + b)`` then differs in the last bit.  The importer
gives each op back the source's mark, and the exporters write it.
"""

import pytest

tf = pytest.importorskip("tensorflow")

import numpy as np  # noqa: E402
import tf_models as models  # noqa: E402

from amanda_tf.exporter import save_model  # noqa: E402
from amanda_tf.importer import load_model  # noqa: E402
from amanda_tf.runner import run  # noqa: E402

MARK = "_lower_using_switch_merge"


def _marks(graph):
    """``{op type: mark}`` of every control-flow op, at any depth."""
    found = {}
    for g in [graph] + [n.graph for n in graph.nested_graphs()]:
        for op in g:
            if op.type in ("StatelessWhile", "While", "StatelessIf", "If"):
                found[op.type] = op.meta.get("attrs", {}).get(MARK)
    return found


def _source_marks(fn):
    gd = fn.get_concrete_function().graph.as_graph_def()
    nodes = list(gd.node) + [n for f in gd.library.function for n in f.node_def]
    return {n.op: n.attr[MARK].b for n in nodes if MARK in n.attr}


def test_control_flow_keeps_the_source_lowering_mark(tmp_path):
    fn, xs = models.while_function(steps=3)
    source = _source_marks(fn)
    assert source == {"StatelessWhile": True, "StatelessIf": True}
    g = load_model(fn)
    assert _marks(g) == source
    pb, saved = tmp_path / "m.pb", tmp_path / "m.savedmodel"
    save_model(g, str(pb))
    save_model(g, str(saved))
    again = [load_model(str(pb), inputs=["x", "n"], outputs=["output_0"]), load_model(str(saved))]
    for g2 in again:
        assert _marks(g2) == source
    # TensorFlow itself runs the written SavedModel bit for bit as the source function
    loaded = tf.saved_model.load(str(saved)).signatures["serving_default"]
    (got,) = loaded(**{k: tf.constant(v) for k, v in xs.items()}).values()
    np.testing.assert_array_equal(got.numpy(), fn(**xs).numpy())
    np.testing.assert_array_equal(run(g, xs)["output_0"], fn(**xs).numpy())
