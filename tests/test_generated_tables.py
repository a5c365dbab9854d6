"""Tables written by a script are the script's output: a hand edit of the YAML (or of the script without running
it) is caught here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script(name: str):  # noqa: ANN202 - a module loaded from a path
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_tf_attention_table_is_what_its_script_writes() -> None:
    gen = _script("gen_tf_attention_table")
    assert gen.OUT.read_text() == gen.emit(), (
        f"{gen.OUT.relative_to(ROOT)} differs from what scripts/gen_tf_attention_table.py writes: edit the script "
        "and run it")
