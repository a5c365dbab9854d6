"""The opset tables are registered lazily: planning reads their headers, a conversion builds the steps it applies.

A conversion from opset 13 to 21 takes 8 of the 54 steps; the other 46 tables are never built.  Listings that read
every table's rules (``amanda tables``, :func:`amanda_onnx.opset.missing`) build them all, as before.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from onnx import TensorProto, helper

import amanda_onnx
from amanda_core.mapping import convert, plan, tables_between
from amanda_core.mapping.table import MappingTable
from amanda_onnx import opset, plugin
from amanda_onnx.opset.diff import step_changes

STEPS_13_TO_21 = [f"onnx-opset-{n}-to-{n + 1}" for n in range(13, 21)]


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """The opset tables made anew for the test (the process keeps one set, which other tests may have built)."""
    monkeypatch.setattr(opset, "_built", {})


def namespaces() -> Any:
    from amanda_core.plugin.manager import registry

    return registry().namespaces


def softmax_13() -> Any:
    """A model of opset 13 whose op (Softmax) no step from 13 to 21 changes: every step carries it."""
    g = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=-1)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def built(tables: list[MappingTable]) -> list[str]:
    return [t.name for t in tables if t.built]


def test_registered_tables_are_not_built(fresh: None) -> None:
    tables = plugin.amanda_mapping_tables()
    assert len(tables) == 2 * (opset.newest_opset() - 1)
    assert built(tables) == []
    assert all(isinstance(t, MappingTable) and t.carry == "unchanged" for t in tables)
    assert "rules not built yet" in repr(tables[0]) and not tables[0].built  # (repr builds nothing)


def test_planning_builds_nothing_and_converting_builds_the_steps_taken(fresh: None) -> None:
    tables = opset.tables()
    steps = plan("amanda/onnx/13", "amanda/onnx/21", tables, namespaces())
    assert [s.table.name for s in steps] == STEPS_13_TO_21
    assert built(tables) == []
    result = convert(amanda_onnx.load_model(softmax_13()), "amanda/onnx/21", tables, namespaces(), copy=False)
    assert [s.table.name for s in result.steps] == STEPS_13_TO_21
    assert sorted(built(tables)) == sorted(STEPS_13_TO_21)
    assert {op.type for op in result.graph} >= {"Softmax"} and result.graph.namespace == "amanda/onnx/21"


def test_the_command_lines_table_choice_builds_only_the_steps_taken(fresh: None) -> None:
    """``amanda convert --to`` gathers the plugins' tables through :func:`tables_between` (headers, parts,
    bidirectional reverses): none is built before the conversion applies it."""
    registered = plugin.amanda_mapping_tables()
    reg = SimpleNamespace(tables=[(t, "amanda-onnx") for t in registered])
    chosen = tables_between(reg, {"amanda/onnx/13"}, "amanda/onnx/21")
    assert len(chosen) == len(registered) and built(registered) == []
    convert(amanda_onnx.load_model(softmax_13()), "amanda/onnx/21", chosen, namespaces(), copy=False)
    assert sorted(built(registered)) == sorted(STEPS_13_TO_21)


def test_a_lazy_step_equals_the_step_built_at_once(fresh: None) -> None:
    lazy = {t.name: t for t in opset.tables()}
    for direction, n in (("upgrade", 13), ("downgrade", 13), ("upgrade", 20)):
        now = opset.step_table(direction, n, step_changes().get(n, []))  # (every step's changes read at once)
        table = lazy[now.name]
        assert not table.built
        assert table == now and table.built  # (equality reads the rules)
        assert table.description == now.description and table.source == now.source
        assert table.raw["rules"].keys() == now.raw["rules"].keys()


def test_listings_build_every_table(fresh: None) -> None:
    tables = opset.tables()
    assert sum(len(t.rules) for t in tables) > 0
    assert len(built(tables)) == len(tables)


def test_op_schemas_are_made_when_first_looked_up(onnx_registry: Any) -> None:
    """An opset's schema lists every op at once; each op's schema is made from the cache when first asked for
    (a conversion through nine opsets looks up the few op types its graph holds)."""
    from amanda_onnx.schemas import DEFAULT_DOMAIN, _op_schema, domain_data, in_force

    schema = onnx_registry.schema("amanda/onnx/21")
    ops = schema.op_schemas
    assert "Softmax" in schema and "Initializer" in schema and "NoSuchOp" not in schema
    before = set(ops._built)
    assert len(before) < 10 and "Softmax" not in before  # (the structural ops, made up front)
    softmax = schema["Softmax"]
    assert set(ops._built) == before | {"Softmax"}
    assert softmax == _op_schema(in_force(domain_data(DEFAULT_DOMAIN)["ops"]["Softmax"], 21), DEFAULT_DOMAIN)
    assert schema.get("NoSuchOp") is None
    names = [s.type for s in schema]  # iterating makes them all, in the order an eager schema had
    assert names == sorted(n for n in names if n in ops._entries) + [n for n in names if n not in ops._entries]
    assert len(names) == len(schema) and len(ops._built) == len(schema)


_COMMAND = """
import json, sys
from amanda_core.cli.main import main
code = main(["convert", "--quiet", sys.argv[1], "--to", "amanda/onnx/21", "-o", sys.argv[2]])
from amanda_onnx import opset
print(json.dumps({"code": code, "built": sorted(t.name for t in opset.tables() if t.built),
                  "frameworks": sorted(m for m in ("torch", "tensorflow") if m in sys.modules)}))
"""


def test_the_command_builds_the_steps_it_takes_and_imports_no_framework(tmp_path: Any) -> None:
    """``amanda convert m.onnx --to amanda/onnx/21`` in a process of its own (every installed plugin loaded):
    the 8 steps are built, no other table, and neither torch nor TensorFlow is imported."""
    import json
    import os
    import subprocess
    import sys

    import onnx

    src, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(softmax_13(), str(src))
    from amanda_core.plugin.manager import ENV_DISABLE, ENV_ONLY

    env = {k: v for k, v in os.environ.items() if k not in (ENV_DISABLE, ENV_ONLY)}
    res = subprocess.run([sys.executable, "-c", _COMMAND, str(src), str(out)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout.strip().splitlines()[-1])
    assert report["code"] == 0 and out.exists()
    assert report["built"] == sorted(STEPS_13_TO_21)
    assert report["frameworks"] == []
