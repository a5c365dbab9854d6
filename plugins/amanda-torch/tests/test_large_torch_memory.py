"""Weights are never copied between torch and ONNX (issue: models of any size), measured on ~200 MB models.

* torch -> ONNX: the importer's parameters are numpy views of torch's storage and the ONNX exporter streams
  them into the file, so importing, converting and writing a live module adds no second copy of its weights;
* ONNX -> torch ``.py``: the ONNX file is mapped (page cache, not the process's memory) and the ``.safetensors``
  is written tensor by tensor from the mapped bytes, so the process's anonymous memory does not hold the weights.

Each case runs in a child process at two sizes (12 layers 2048x2048 float32 = 192 MiB, and 12 layers 64x64),
sampling ``RssAnon`` every 5 ms; what the big model adds over the small one must stay under half its weights (a
copy would add all of them).  Marked ``slow`` (1-2 minutes on an idle machine): ``.venv/bin/python -m pytest -q -m slow
plugins/amanda-torch/tests/test_large_torch_memory.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

pytestmark = pytest.mark.slow

_CHILD = textwrap.dedent("""
    import json, sys, threading, time
    import numpy as np

    def anon():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
        return 0

    peak = [0]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], anon())
            time.sleep(0.005)

    case, n, layers, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    import torch
    import amanda_onnx
    from amanda_core.mapping import convert, registered_tables
    from amanda_core.plugin import registry

    reg = registry()
    tables = registered_tables(reg)
    if case == "torch":
        from amanda_torch.importer import load_model

        torch.manual_seed(0)
        with torch.no_grad():
            model = torch.nn.Sequential(*[torch.nn.Linear(n, n, bias=False) for _ in range(layers)])
        x = torch.randn(2, n)
        base = anon()  # the module's weights are in this already
        threading.Thread(target=sample, daemon=True).start()
        g = load_model(model, example_inputs=(x,))
        g = convert(g, "amanda/onnx/18", tables, reg.namespaces).graph
        amanda_onnx.save_model(g, out)
    else:
        from onnx import TensorProto, helper, numpy_helper
        from amanda_torch.exporter import save_model

        rng = np.random.default_rng(0)
        inits = [numpy_helper.from_array(rng.standard_normal((n, n), dtype=np.float32), f"w{i}")
                 for i in range(layers)]
        nodes = [helper.make_node("MatMul", ["x" if i == 0 else f"h{i - 1}", f"w{i}"], [f"h{i}"])
                 for i in range(layers)]
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", n])],
                                  [helper.make_tensor_value_info(f"h{layers - 1}", TensorProto.FLOAT, ["N", n])],
                                  inits)
        with open(out + ".onnx", "wb") as f:
            f.write(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString())
        del inits, graph
        import gc

        gc.collect()
        base = anon()
        threading.Thread(target=sample, daemon=True).start()
        g = amanda_onnx.load_model(out + ".onnx")
        amanda_onnx.infer_types(g)
        g = convert(g, "amanda/pytorch", tables, reg.namespaces).graph
        save_model(g, out + ".py")
    stop.set()
    time.sleep(0.02)
    print(json.dumps({"added": max(peak[0], anon()) - base, "weights": layers * n * n * 4}))
""")


def _added(case: str, n: int, tmp_path) -> tuple[int, int]:
    out = tmp_path / f"{case}_{n}"
    proc = subprocess.run([sys.executable, "-c", _CHILD, case, str(n), "12", str(out)], capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    return r["added"], r["weights"]


@pytest.mark.parametrize("case", ["torch", "onnx"])
def test_weights_are_not_copied(case, tmp_path):
    small, _ = _added(case, 64, tmp_path)
    big, weights = _added(case, 2048, tmp_path)
    assert weights > 190 * 2**20
    grew = big - small
    print(f"{case}: {weights >> 20} MiB of weights; added RssAnon {big >> 20} MiB (small model {small >> 20} MiB)")
    assert grew < weights // 2, (f"{case}: the {weights >> 20} MiB model added {big >> 20} MiB of anonymous memory, "
                                 f"the small one {small >> 20} MiB: the weights were copied")
