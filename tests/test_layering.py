"""Layers of amanda_core look down only, and the core imports no framework (import-linter contracts)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CONTRACTS = """\
[importlinter]
root_package = amanda_core
include_external_packages = True
exclude_type_checking_imports = True

[importlinter:contract:layers]
name = amanda_core layers look down only
type = layers
layers =
    amanda_core.cli
    amanda_core.check | amanda_core.io
    amanda_core.mapping
    amanda_core.regex
    amanda_core.matching | amanda_core.plugin
    amanda_core.namespace
    amanda_core.serialization
    amanda_core.ir
    amanda_core.errors

[importlinter:contract:frameworks]
name = amanda_core imports no framework
type = forbidden
source_modules = amanda_core
forbidden_modules =
    torch
    tensorflow
    keras
    onnx
    onnxruntime
    onnx_ir
    jax
"""


def _lint(tmp_path: Path, contracts: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("import-linter is not installed (pip install -c constraints.txt import-linter)")
    cfg = tmp_path / "importlinter.ini"
    cfg.write_text(contracts)
    return subprocess.run([exe, "--config", str(cfg), "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_layers_look_down_and_the_core_imports_no_framework(tmp_path):
    done = _lint(tmp_path, CONTRACTS)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Contracts: 2 kept, 0 broken." in done.stdout


def test_the_contract_fails_on_an_upward_import(tmp_path):
    # the same layers read upside down must break: the test can fail
    upside_down = CONTRACTS.replace("    amanda_core.ir\n    amanda_core.errors\n",
                                    "    amanda_core.errors\n    amanda_core.ir\n")
    done = _lint(tmp_path, upside_down)
    assert done.returncode != 0 and "amanda_core.ir is not allowed to import amanda_core.errors" in done.stdout
