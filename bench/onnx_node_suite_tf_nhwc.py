"""The ONNX node suite converted to TensorFlow with the layout pass ``tf-layout-nhwc`` run after each conversion.

``bench/onnx_node_suite_tf.py`` converts each case with the ONNX -> TF tables and passes but the layout pass; this
runs the same suite with ``amanda_tf.layout_tf.optimize`` applied to every converted graph (what ``amanda convert``
does), so that a rewrite of the pass that changed a result shows as a wrong or failing case, and prints the
transposes the pass found and left over all cases.  Takes the same arguments:

    .venv/bin/python bench/onnx_node_suite_tf_nhwc.py [-v] [-k WORD ...] [case ...]

This process imports TensorFlow, so it must not import torch.
"""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    path = Path(__file__).resolve().parent / "onnx_node_suite_tf.py"
    spec = importlib.util.spec_from_file_location("onnx_node_suite_tf", path)
    suite = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = suite
    spec.loader.exec_module(suite)
    from amanda_tf.layout_tf import optimize

    stats: Counter[str] = Counter()
    to_tf = suite.to_tf

    def to_tf_nhwc(model):  # type: ignore[no-untyped-def]
        graph = to_tf(model)
        report = optimize(graph)
        stats["transposes before"] += report.transposes_before
        stats["transposes after"] += report.transposes_after
        stats["graphs changed"] += report.transposes_before != report.transposes_after
        return graph

    suite.to_tf = to_tf_nhwc
    code = suite.main(argv)
    print(f"layout pass: transposes {stats['transposes before']} -> {stats['transposes after']} "
          f"({stats['graphs changed']} graph(s) changed)")
    return code


if __name__ == "__main__":
    sys.exit(main())
