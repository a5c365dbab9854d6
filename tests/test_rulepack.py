"""The example rule pack (examples/rulepack) registered in-process: listed, checked, used by convert; choice between
tables covering one step; --exclude-table; tables whose ranges admit no installed namespace."""

from __future__ import annotations

import json

import pytest

from amanda_core.cli.main import main
from amanda_core.mapping import load_table
from amanda_core.mapping.planner import ConversionError, exclude_tables, order_tables, plan
from amanda_core.mapping.registry import unusable_reason
from amanda_core.namespace import NamespaceRegistry

from .rulepack_support import contrib_model, pack_plugin

pytest.importorskip("amanda_onnx")
pytest.importorskip("onnx")


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def pack(amanda_plugin):
    amanda_plugin(pack_plugin(), "ort-contrib")


def test_tables_lists_and_checks_the_pack(capsys, pack):
    code, out, _ = run(capsys, "tables", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["ort-contrib-to-onnx"]["plugin"] == "ort-contrib"
    assert rows["ort-contrib-to-onnx"]["unused"] is None
    code, out, _ = run(capsys, "tables")
    assert "ort-contrib-to-onnx: amanda/onnx/com.microsoft/1 -> amanda/onnx/>=20" in out


def test_convert_uses_the_pack_and_explains(tmp_path, capsys, pack):
    src = contrib_model(tmp_path / "m.onnx")
    out_path = tmp_path / "o.onnx"
    code, out, err = run(capsys, "convert", src, "--to", "amanda/onnx/20", "-o", out_path, "--explain")
    assert code == 0, err
    assert "table ort-contrib-to-onnx: amanda/onnx/com.microsoft/1 -> amanda/onnx/20" in out
    assert "rule bias_gelu: 1 match(es) -> produced 1 Add, 1 Gelu" in out
    import onnx

    m = onnx.load(str(out_path))
    assert sorted(n.op_type for n in m.graph.node) == ["Add", "Gelu", "Gelu", "MatMul"]
    assert all(n.domain in ("", "ai.onnx") for n in m.graph.node)


def test_exclude_table_leaves_the_contrib_ops(tmp_path, capsys, pack):
    src = contrib_model(tmp_path / "m.onnx")
    out_path = tmp_path / "o.onnx"
    code, _, err = run(capsys, "convert", src, "--to", "amanda/onnx/20", "-o", out_path,
                       "--exclude-table", "ort-contrib-to-onnx")
    assert code == 2 and "BiasGelu (amanda/onnx/com.microsoft/1)" in err and not out_path.exists()
    code, _, err = run(capsys, "convert", src, "--to", "amanda/onnx/20", "-o", out_path, "--exclude-table", "nope")
    assert code == 2 and "--exclude-table nope: no such table" in err


TABLE = """
table:
  name: {name}
  src: {src}
  dst: {dst}
  rules:
    r: {{src: {{ops: {{$a: {{type: Relu}}}}}}, dst: {{ops: {{$a: {{type: Relu}}}}}}}}
"""


def _table(name, src, dst, plugin):
    t = load_table(TABLE.format(name=name, src=src, dst=dst))
    t.plugin = plugin
    return t


def test_choice_between_tables_is_deterministic_and_explained():
    reg = NamespaceRegistry()
    broad = _table("broad", "amanda/x/>=1", "amanda/y/1", "pack-a")
    exact = _table("exact", "amanda/x/1", "amanda/y/1", "pack-z")
    given = _table("given", "amanda/x", "amanda/y/1", None)
    for tables in ([broad, exact], [exact, broad]):
        (step,) = plan("amanda/x/1", "amanda/y/1", tables, reg)
        assert step.table is exact and step.over == (broad,)
        assert "amanda/x/1 is an exact namespace, more specific than broad's amanda/x/>=1" in step.reason
    (step,) = plan("amanda/x/1", "amanda/y/1", [broad, exact, given], reg)
    assert step.table is given and "given with --table" in step.reason
    same = _table("same", "amanda/x/>=1", "amanda/y/1", "pack-b")
    assert order_tables([same, broad])[0] is same  # equally specific: the order given (plugin order)
    assert [t.name for t in exclude_tables([broad, exact], ["pack-z:exact"])] == ["broad"]
    with pytest.raises(ConversionError, match="no such table"):
        exclude_tables([broad], ["exact"])


def test_a_range_that_admits_no_installed_version_is_named(capsys, amanda_plugin):
    from amanda_core.plugin.manager import registry

    ns = registry().namespaces
    newest = max(int(v) for v in ns.versions("amanda/onnx"))
    beyond = _table("beyond", f"amanda/onnx/>{newest}", "amanda/onnx/1", "p")
    why = unusable_reason(beyond, ns)
    assert why is not None and "admits no installed version of amanda/onnx" in why
    nowhere = _table("nowhere", "amanda/onnx/13", "amanda/nosuchframework/>=2", "p")
    assert "no installed plugin registers" in unusable_reason(nowhere, ns)
    assert unusable_reason(_table("fine", "amanda/onnx/com.microsoft/1", "amanda/onnx/>=13", "p"), ns) is None

    class Plugin:
        from amanda_core import hookimpl

        @hookimpl
        def amanda_mapping_tables(self):
            return [beyond]

    amanda_plugin(Plugin(), "out-of-range")
    code, out, _ = run(capsys, "tables")
    line = next(ln for ln in out.splitlines() if ln.startswith("beyond:"))
    assert "not used: its src" in line
