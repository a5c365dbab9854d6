"""The ONNX -> torch tables (``tables/onnx_to_torch_*.yaml``, split by op family) as one table.

All of them read ``amanda/onnx/18`` and write ``amanda/pytorch``; a conversion applies them as one step, the
constant rules (``onnx_to_torch_constants.yaml``) last, after every rule that reads constant inputs.
"""

from __future__ import annotations

__all__ = ["onnx_to_torch_files", "onnx_to_torch_table"]

from functools import lru_cache
from pathlib import Path

from amanda_core.mapping import MappingTable, load_table

_TABLES = Path(__file__).resolve().parent / "tables"


def onnx_to_torch_files() -> list[Path]:
    """The table files, in application order (constants last)."""
    files = sorted(_TABLES.glob("onnx_to_torch*.yaml"))
    return sorted(files, key=lambda p: p.name == "onnx_to_torch_constants.yaml")


@lru_cache(maxsize=1)
def onnx_to_torch_table() -> MappingTable:
    """Every ONNX -> torch rule in one table named ``onnx-to-torch``."""
    tables = [load_table(p, trusted=True) for p in onnx_to_torch_files()]
    rules = {}
    for t in tables:
        for name, rule in t.rules.items():
            if name in rules:
                raise ValueError(f"rule {name!r} of table {t.name!r} is also in another ONNX -> torch table")
            rules[name] = rule
    first = tables[0]
    return MappingTable(name="onnx-to-torch", src=first.src, dst=first.dst, rules=rules,
                        description="ONNX (opset 18) to torch ATen, all op families",
                        source=str(_TABLES), raw={"tables": [t.raw for t in tables]})
