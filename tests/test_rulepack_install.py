"""Installing only what is needed: a fresh environment with the core and amanda-onnx only (from this checkout, with
constraints.txt) plus the example rule pack built as a wheel.  Neither torch nor tensorflow is importable there;
amanda plugins/tables list the pack (its torch table as not used, with the reason); tables --check passes; convert
uses the pack and converts an ONNX model.

Needs pip and the package registry (the wheel cache makes reruns quick; /opt/wheels is used when it exists).
AMANDA_SKIP_INSTALL_TESTS=1 skips it (offline)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from .rulepack_support import PACK, ROOT, contrib_model

pytestmark = pytest.mark.skipif(os.environ.get("AMANDA_SKIP_INSTALL_TESTS", "") not in ("", "0"),
                                reason="AMANDA_SKIP_INSTALL_TESTS is set (offline)")


def _pip(python: Path, *args: str) -> None:
    links = ["--find-links", "/opt/wheels"] if os.path.isdir("/opt/wheels") else []
    proc = subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", *args, *links],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        pytest.fail(f"pip {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


@pytest.fixture(scope="module")
def onnx_only(tmp_path_factory):
    pytest.importorskip("onnx")
    root = tmp_path_factory.mktemp("onnx-only")
    wheels = root / "wheels"
    source = root / "pack"  # a copy: building writes egg-info and build/ beside the sources, which must stay clean
    shutil.copytree(PACK, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    _pip(Path(sys.executable), "wheel", "--no-deps", "-q", "-w", str(wheels), str(source))
    (wheel,) = wheels.glob("amanda_ort_contrib-*.whl")
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    _pip(python, "install", "-q", "-c", str(ROOT / "constraints.txt"), "-e", str(ROOT),
         "-e", str(ROOT / "plugins" / "amanda-onnx"), str(wheel))
    model = contrib_model(root / "contrib.onnx")
    return python, env_dir / "bin" / "amanda", model, root


def _run(cmd, cwd):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AMANDA_PLUGINS", "PYTHONPATH", "VIRTUAL_ENV"))}
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def test_only_the_core_and_amanda_onnx(onnx_only):
    python, amanda, model, root = onnx_only
    probe = _run([python, "-c", "import importlib.util as u; print(u.find_spec('torch'), u.find_spec('tensorflow'))"],
                 root)
    assert probe.stdout.split() == ["None", "None"], probe.stdout + probe.stderr
    plugins = _run([amanda, "plugins", "--json"], root)
    assert plugins.returncode == 0, plugins.stderr
    names = {p["name"]: p for p in json.loads(plugins.stdout)}
    assert set(names) == {"amanda-core", "amanda-onnx", "ort-contrib"}
    assert names["ort-contrib"]["distribution"] == "amanda-ort-contrib"
    tables = _run([amanda, "tables"], root)
    assert "ort-contrib-to-onnx: amanda/onnx/com.microsoft/1 -> amanda/onnx/>=20" in tables.stdout
    torch_line = next(ln for ln in tables.stdout.splitlines() if ln.startswith("ort-contrib-to-torch:"))
    assert "not used: its dst amanda/pytorch/>=2.1,<3 names amanda/pytorch, which no installed plugin registers" \
        in torch_line
    check = _run([amanda, "tables", "--check"], root)
    assert check.returncode == 0 and "no problems" in check.stdout, check.stdout + check.stderr
    out = root / "out.onnx"
    conv = _run([amanda, "convert", model, "--to", "amanda/onnx/20", "-o", out, "--explain"], root)
    assert conv.returncode == 0, conv.stderr
    assert "table ort-contrib-to-onnx: amanda/onnx/com.microsoft/1 -> amanda/onnx/20" in conv.stdout
    inspect = _run([amanda, "inspect", out], root)
    assert "table ort-contrib-to-onnx (ort-contrib)" in inspect.stdout
    small = _run([amanda, "convert", ROOT / "examples" / "onnx" / "small_cnn_opset11.onnx", "--to", "amanda/onnx/13",
                  "-o", root / "small.onnx"], root)
    assert small.returncode == 0 and (root / "small.onnx").exists(), small.stderr
