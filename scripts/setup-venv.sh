#!/usr/bin/env bash
# Create .venv (if needed) and install Amanda, its three framework plugins,
# the frameworks and the test tools, all pinned by constraints.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
extra=()
# A CPU build of torch lies in /opt/wheels on the reference machines; prefer it.
[ -d /opt/wheels ] && extra+=(--find-links /opt/wheels)
.venv/bin/python -m pip install --quiet --disable-pip-version-check "${extra[@]}" -c constraints.txt \
  -r requirements-frameworks.txt \
  -e '.[test]' -e plugins/amanda-onnx -e plugins/amanda-tf -e plugins/amanda-torch
