#!/usr/bin/env bash
# The peer converters the benches compare against, into .venv (after scripts/setup-venv.sh).
# onnx2tf and nobuco pin other TensorFlow versions: the benches that use them say how to make their own venvs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -c constraints.txt -r requirements-bench.txt
.venv/bin/python - <<'PY'
from importlib.metadata import version

for name in ("onnx2torch", "onnxscript", "tf2onnx"):
    print(name, version(name))
PY
