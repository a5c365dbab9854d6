"""scripts/setup-venv.sh skips pip install when nothing the install depends on changed (issue 13, item 14);
the README's usage and claims against the command line (item 17)."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INPUTS = ["pyproject.toml", "plugins/amanda-onnx/pyproject.toml", "plugins/amanda-tf/pyproject.toml",
          "plugins/amanda-torch/pyproject.toml", "constraints.txt", "requirements-frameworks.txt"]

FAKE_PYTHON = """#!/usr/bin/env bash
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then echo "pip $*" >> "$(dirname "$0")/../pip.log"; exit 0; fi
if [ "$1" = "-c" ]; then echo "3.11.7 (fake)"; exit 0; fi
exit 1
"""


@pytest.mark.skipif(shutil.which("sha256sum") is None, reason="needs coreutils")
def test_14_setup_skips_the_install_when_nothing_changed(tmp_path):
    for name in INPUTS + ["scripts/setup-venv.sh"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    python = tmp_path / ".venv" / "bin" / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    log = tmp_path / ".venv" / "pip.log"

    def setup(**env):
        p = subprocess.run(["bash", str(tmp_path / "scripts" / "setup-venv.sh")], capture_output=True, text=True,
                           env={**os.environ, **env}, timeout=60)
        assert p.returncode == 0, p.stderr
        return p.stderr, len(log.read_text().splitlines()) if log.exists() else 0

    assert setup()[1] == 1
    err, n = setup()
    assert n == 1 and ".venv is up to date" in err
    with open(tmp_path / "constraints.txt", "a") as f:
        f.write("# changed\n")
    assert setup()[1] == 2
    assert setup()[1] == 2
    assert setup(AMANDA_FORCE_INSTALL="1")[1] == 3
