"""TensorFlow -> torch end to end: Keras models converted to a torch ``.pt2`` by the command line and checked.

For each model (Keras applications with ``weights=None`` and seeded random weights, built small enough for these
machines, and the Keras text model Embedding + LSTM + Dense), this runs, in a child process as a user would::

    amanda convert MODULE:FACTORY --to amanda/pytorch -o model.pt2 --check

(the check runs Keras and the converted torch program on the same seeded inputs, each framework in its own
process), and prints the wall time, the largest absolute difference over the outputs and that difference relative
to the largest reference value, read from the check's report, and the ``permute`` ops left in the ``.pt2``'s
graph (the layout transposes: the torch program keeps Keras' NHWC interface and runs its convolutions NCHW).
``--input-layout channels-first`` passes that option to the conversion (the program then takes NCHW data; the
check feeds each side its own layout).  Nothing is downloaded.

    python bench/tf_torch.py [--models mobilenet_v2,resnet50,text_lstm] [--input-layout channels-first]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TESTS = os.path.join(ROOT, "plugins", "amanda-tf", "tests")

FACTORIES = textwrap.dedent('''
    """Keras models for bench/tf_torch.py (seeded random weights, no download)."""
    import keras
    import tf_models
    import lstm_models


    def mobilenet_v2():
        return tf_models.mobilenet_v2(size=96)[0]


    def resnet50():
        keras.utils.set_random_seed(0)
        return keras.applications.ResNet50(weights=None, input_shape=(64, 64, 3))


    def text_lstm():
        return lstm_models.text_lstm()
''')

MODELS = ["mobilenet_v2", "resnet50", "text_lstm"]
DIFF = re.compile(r"max abs diff ([0-9.e+-]+), ([0-9.e+-]+) of the largest reference value")


PERMUTES = ("import sys, torch; p = torch.export.load(sys.argv[1]); "
            "print(sum(1 for n in p.graph.nodes if n.op == 'call_function' and 'permute' in str(n.target)))")


def run(name: str, work: str, layout: list[str]) -> dict[str, object]:
    out = os.path.join(work, f"{name}.pt2")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([work, TESTS, ROOT]))
    start = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "amanda_core", "convert", f"bench_tf_torch_models:{name}",
                        "--to", "amanda/pytorch", "-o", out, "--check", *layout], cwd=work, env=env,
                       capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - start
    permutes = None
    if r.returncode == 0:
        c = subprocess.run([sys.executable, "-c", PERMUTES, out], env=env, capture_output=True, text=True,
                           timeout=600)
        permutes = int(c.stdout.strip().splitlines()[-1]) if c.returncode == 0 else None
    diffs = [(float(a), float(b)) for a, b in DIFF.findall(r.stdout)]
    bit = r.stdout.count("bit-identical")
    return {"model": name, "rc": r.returncode, "seconds": seconds,
            "max_abs": max((a for a, _ in diffs), default=0.0 if bit else None),
            "max_rel": max((b for _, b in diffs), default=0.0 if bit else None),
            "outputs": len(diffs) + bit, "permutes": permutes,
            "error": r.stderr.strip().splitlines()[-1] if r.returncode else ""}


def _fmt(value: object) -> str:
    if value is None:
        return "-"
    return "bit-identical" if value == 0.0 else f"{value:.2g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--input-layout", choices=("channels-first", "channels-last"))
    args = parser.parse_args()
    layout = ["--input-layout", args.input_layout] if args.input_layout else []
    with tempfile.TemporaryDirectory() as work:
        with open(os.path.join(work, "bench_tf_torch_models.py"), "w") as f:
            f.write(FACTORIES)
        print("| Keras model -> .pt2 | result | outputs | max abs diff | relative to the largest value | wall time "
              "| permutes left |")
        print("|---|---|---|---|---|---|---|")
        for name in args.models.split(","):
            row = run(name, work, layout)
            result = "ok" if row["rc"] == 0 else f"failed: {row['error']}"
            permutes = "-" if row["permutes"] is None else row["permutes"]
            print(f"| {name} | {result} | {row['outputs']} | {_fmt(row['max_abs'])} | {_fmt(row['max_rel'])} | "
                  f"{row['seconds']:.1f} s | {permutes} |", flush=True)


if __name__ == "__main__":
    main()
