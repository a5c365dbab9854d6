"""TF -> ONNX: Amanda against tf2onnx on the Keras models of the amanda-tf suites, in one run.

    .venv/bin/python bench/tf_onnx.py [mobilenet_v2 resnet50 inception_v3 text_model] [--repeat N]

For each model: TensorFlow's own steps as Amanda runs them (tracing the Keras call and freezing the variables:
``amanda_tf.importer.load_model``), Amanda's part (the ``tf-to-onnx`` table, the layout pass and writing the
``ModelProto``), and ``tf2onnx.convert.from_keras(model, opset=17)`` (which traces and freezes too); then the node
and ``Transpose`` counts of both ONNX graphs (initializers not counted as nodes).  Times are wall time and CPU
time (``time.process_time``: this process, every thread); on a machine shared with other work the CPU time is the
steadier figure.  The schemas (ONNX's and TensorFlow's op registry) are built once per process, before the
first model, and reported as setup.  Models are built with random
weights (nothing is downloaded).  Never imports torch.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "plugins", "amanda-tf", "tests"))


def _counts(model: Any) -> tuple[int, int]:
    nodes = [n for n in model.graph.node if n.op_type != "Constant"]
    return len(nodes), sum(1 for n in model.graph.node if n.op_type == "Transpose")


def bench(name: str, repeat: int) -> dict[str, Any]:
    import tensorflow as tf
    import tf2onnx
    import tf_models as models  # plugins/amanda-tf/tests/tf_models.py

    import amanda_onnx
    from amanda_core.plugin import registry
    from amanda_tf.importer import load_model
    from amanda_tf.layout import tf_to_onnx_tables, to_onnx

    t = time.perf_counter()
    reg = registry()  # plugins, schemas and tables: once per process, not per model
    reg.namespaces.schema("amanda/onnx/18")
    reg.namespaces.schema(reg.namespaces.resolve("amanda/tensorflow"))  # TF's op registry as a schema
    tf_to_onnx_tables()
    setup = time.perf_counter() - t
    model, _ = models.KERAS_MODELS[name](batch=1)
    row: dict[str, Any] = {"model": name, "setup": setup}
    best = {k: float("inf") for k in ("tf", "amanda", "tf2onnx", "tf_cpu", "amanda_cpu", "tf2onnx_cpu")}
    clock = time.process_time  # CPU time of this process, every thread (TensorFlow's included)
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), clock()
        graph = load_model(model)
        t1, c1 = time.perf_counter(), clock()
        onnx_graph, report = to_onnx(graph, reg)
        proto = amanda_onnx.to_model(onnx_graph)
        t2, c2 = time.perf_counter(), clock()
        spec = [tf.TensorSpec(i.shape, i.dtype, name=i.name) for i in model.inputs]
        t3, c3 = time.perf_counter(), clock()
        theirs, _ = tf2onnx.convert.from_keras(model, input_signature=spec, opset=17)
        t4, c4 = time.perf_counter(), clock()
        for key, wall, cpu in (("tf", t1 - t0, c1 - c0), ("amanda", t2 - t1, c2 - c1), ("tf2onnx", t4 - t3, c4 - c3)):
            best[key] = min(best[key], wall)
            best[key + "_cpu"] = min(best[key + "_cpu"], cpu)
    row.update(best)
    row["ours_nodes"], row["ours_transposes"] = _counts(proto)
    row["their_nodes"], row["their_transposes"] = _counts(theirs)
    row["layout"] = report.summary() if report is not None else ""
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=["mobilenet_v2", "resnet50", "inception_v3"])
    ap.add_argument("--repeat", type=int, default=1, help="runs per model; the best time of each is reported")
    args = ap.parse_args(argv)
    print(f"{'model':14} {'TF trace+freeze':>15} {'Amanda':>8} {'tf2onnx':>8} {'Amanda/tf2onnx':>15} "
          f"{'(TF+Amanda)/tf2onnx':>20} {'nodes':>11} {'transposes':>11}   (wall time; CPU time below)")
    for name in args.models:
        try:
            r = bench(name, args.repeat)
        except Exception as e:  # one model failing does not hide the others' figures
            print(f"{name:14} failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            continue
        print(f"{r['model']:14} {r['tf']:14.2f}s {r['amanda']:7.2f}s {r['tf2onnx']:7.2f}s "
              f"{r['amanda'] / r['tf2onnx']:15.3f} {(r['tf'] + r['amanda']) / r['tf2onnx']:20.3f} "
              f"{r['ours_nodes']:>5}/{r['their_nodes']:<5} {r['ours_transposes']:>5}/{r['their_transposes']:<5}")
        print(f"{'':14} {r['tf_cpu']:14.2f}s {r['amanda_cpu']:7.2f}s {r['tf2onnx_cpu']:7.2f}s "
              f"{r['amanda_cpu'] / r['tf2onnx_cpu']:15.3f} {(r['tf_cpu'] + r['amanda_cpu']) / r['tf2onnx_cpu']:20.3f}"
              f"   (CPU time)")
        print(f"{'':14} {r['layout']}; setup (plugins, schemas, tables; once per process) {r['setup']:.2f}s")
    print("nodes and transposes: Amanda/tf2onnx (Constant nodes and initializers not counted); CPU time: this "
          "process's, every thread")
    return 0


if __name__ == "__main__":
    sys.exit(main())
