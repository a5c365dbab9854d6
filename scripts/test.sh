#!/usr/bin/env bash
# The whole test suite. pytest's exit code 5 (no tests collected) is a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh
set +e
.venv/bin/python -m pytest -q "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "error: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
