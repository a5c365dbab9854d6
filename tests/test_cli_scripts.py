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


# --------------------------------------------------------------------------- 17. the docs against the command line

README = (ROOT / "README.md").read_text()


def _usage_block() -> str:
    section = README.split("## Usage", 1)[1]
    return section.split("```", 2)[1]


def _command_usage(command: str) -> str:
    """The usage lines of one command: its own line and the indented lines after it."""
    out, taking = [], False
    for line in _usage_block().splitlines():
        if line.startswith("amanda "):
            taking = line.split()[1] == command
        if taking:
            out.append(line)
    return "\n".join(out)


def test_17_readme_usage_lists_every_option_of_every_command():
    import argparse

    from amanda_core.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = {}
    for name, p in sub.choices.items():
        usage = _command_usage(name)
        assert usage, f"the README's usage has no line for amanda {name}"
        for action in p._actions:
            if action.help == argparse.SUPPRESS:
                continue
            anywhere = ("--help", "--debug", "--quiet")
            longs = [o for o in action.option_strings if o.startswith("--") and o not in anywhere]
            shorts = [o for o in action.option_strings if not o.startswith("--") and o != "-h"]
            if not (longs or shorts):
                continue
            if not any(re.search(re.escape(o) + r"(?![\w-])", usage) for o in longs + shorts):
                missing.setdefault(name, []).append((longs + shorts)[0])
    assert not missing, f"options missing from the README's usage: {missing}"
    for option in ("--debug", "--quiet"):  # taken anywhere on the line, described once below the usage
        assert f"`{option}`" in README, option


def _yaml_blocks() -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", README, flags=re.S)


def _without_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")).strip() + "\n"


def test_17_readme_graph_is_the_example_file_and_reads_without_warnings():
    from amanda_core.serialization import load_graph

    graph_block = next(b for b in _yaml_blocks() if b.startswith("graph:"))
    path = ROOT / "examples" / "pytorch_single_layer.yaml"
    assert "`examples/pytorch_single_layer.yaml`" in README
    assert graph_block == _without_comments(path.read_text())
    warnings = []
    graph = load_graph(str(path), warnings=warnings)
    assert warnings == [] and sorted(graph.ops) == ["matmul", "param", "relu", "t"]
    # examples/seed/pytorch_single_layer.yaml writes ports as a mapping and still warns, as the README says
    seed = []
    load_graph(str(ROOT / "examples" / "seed" / "pytorch_single_layer.yaml"), warnings=seed)
    assert seed and "ports are written as a mapping" in seed[0]


def test_17_readme_table_is_the_table_file():
    table_block = next(b for b in _yaml_blocks() if b.startswith("table:"))
    name = re.search(r"completed: `(examples/seed/tables/[\w.]+)`", README).group(1)
    assert table_block == _without_comments((ROOT / name).read_text())


def test_17_check_help_describes_tolerances_and_json(capsys):
    from amanda_core.cli.main import main

    with pytest.raises(SystemExit):
        main(["check", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "relative tolerance" in out and "(default 1e-5)" in out
    assert "absolute tolerance (default 1e-5, torch.testing's for float32" in out
    assert "--json print a JSON report" in out


def test_17_plugin_readmes():
    tf = (ROOT / "plugins" / "amanda-tf" / "README.md").read_text()
    assert "pip install amanda-tf" not in tf and "-e 'plugins/amanda-tf[cpu]'" in tf
    onnx_readme = (ROOT / "plugins" / "amanda-onnx" / "README.md").read_text()
    plugin_src = (ROOT / "plugins" / "amanda-onnx" / "amanda_onnx" / "plugin.py").read_text()
    hooks = set(re.findall(r"@hookimpl\ndef (amanda_\w+)", plugin_src))
    sentence = onnx_readme.split("registers through the entry point", 1)[1].split("\n\n", 1)[0]
    assert hooks and set(re.findall(r"`(amanda_\w+)`", sentence)) == hooks
    words = {4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}
    assert f"with {words[len(hooks)]} hooks" in sentence


# --------------------------------------------------------------------------- 15. a passing run looks like one

REPORTING_TEST = '''
def test_one(amanda_report):
    amanda_report("toy suite", ["toy: 3 pass"], ["case a: slow", "case b: NOT_IMPLEMENTED"])

def test_two():
    pass
'''


@pytest.mark.parametrize("verbose", [False, True])
def test_15_reports_come_after_the_run_and_details_behind_v(tmp_path, verbose):
    import sys

    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_toy.py").write_text(REPORTING_TEST)
    args = [sys.executable, "-m", "pytest", "-p", "no:randomly", "-v" if verbose else "-q"]
    p = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "AMANDA_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    head = lines.index(next(ln for ln in lines if "toy suite" in ln))
    assert any("passed" in ln for ln in lines[head:])  # after the progress, before the closing line
    assert "toy: 3 pass" in [ln for ln in lines[head + 1:] if ln.strip()][0]
    details = tmp_path / ".pytest_cache" / "d" / "amanda" / "details.txt"
    if verbose:
        assert "case b: NOT_IMPLEMENTED" in p.stdout
    else:
        assert "NOT_IMPLEMENTED" not in p.stdout and "case b: NOT_IMPLEMENTED" in details.read_text()
        assert "details of the reports above: .pytest_cache/d/amanda/details.txt (or run with -v)" in p.stdout


def test_17_readme_python_example_runs(tmp_path):
    pytest.importorskip("onnx")
    import sys

    code = README.split("From Python:", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    code = code.replace('"out/small_cnn_18.onnx"', repr(str(tmp_path / "small_cnn_18.onnx")))
    code = code.replace('"examples/', repr(str(ROOT / "examples")) + ' + "/')
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env={**os.environ, "AMANDA_PLUGINS": "amanda-onnx"})
    assert p.returncode == 0, p.stderr[-2000:]
    assert "table onnx-opset-17-to-18" in p.stdout and (tmp_path / "small_cnn_18.onnx").exists()
