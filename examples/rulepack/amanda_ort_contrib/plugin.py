"""The pack's one hook: the YAML tables shipped beside this module (no Python rules)."""

from __future__ import annotations

from pathlib import Path

from amanda_core import hookimpl


@hookimpl
def amanda_mapping_tables() -> list[Path]:
    return sorted((Path(__file__).parent / "tables").glob("*.yaml"))
