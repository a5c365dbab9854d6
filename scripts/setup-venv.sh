#!/usr/bin/env bash
# Create .venv (if needed) and install Amanda, its three framework plugins,
# the frameworks and the test tools, all pinned by constraints.txt.
#
# The install is skipped when nothing it depends on changed since the last one that succeeded: the stamp
# .venv/.amanda-install-stamp holds a hash of the pyproject files, constraints.txt, requirements-frameworks.txt,
# this script and the Python version. AMANDA_FORCE_INSTALL=1 installs anyway.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.amanda-install-stamp
inputs=(pyproject.toml plugins/amanda-onnx/pyproject.toml plugins/amanda-tf/pyproject.toml
        plugins/amanda-torch/pyproject.toml constraints.txt requirements-frameworks.txt scripts/setup-venv.sh)
want="$( { sha256sum "${inputs[@]}"; .venv/bin/python -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1)"
if [ "${AMANDA_FORCE_INSTALL:-0}" != "1" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo ".venv is up to date (nothing the install depends on changed; AMANDA_FORCE_INSTALL=1 reinstalls)" >&2
  exit 0
fi
extra=()
# A CPU build of torch lies in /opt/wheels on the reference machines; prefer it.
[ -d /opt/wheels ] && extra+=(--find-links /opt/wheels)
rm -f "$stamp"
.venv/bin/python -m pip install --quiet --disable-pip-version-check "${extra[@]}" -c constraints.txt \
  -r requirements-frameworks.txt \
  -e '.[test]' -e plugins/amanda-onnx -e plugins/amanda-tf -e plugins/amanda-torch
echo "$want" > "$stamp"
