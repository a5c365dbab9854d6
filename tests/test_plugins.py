import subprocess
import sys
import textwrap

import pytest

from amanda_core import hookimpl
from amanda_core.errors import PluginError
from amanda_core.namespace import NamespaceSchema, OpSchema, StaticNamespaces, TypeSystem
from amanda_core.plugin import PluginManager, get_manager, hookspecs
from amanda_core.plugin.testing import registered_plugin


class ExamplePlugin:
    @hookimpl
    def amanda_namespaces(self):
        return [StaticNamespaces([NamespaceSchema("amanda/example/1.0", [OpSchema("Foo")])])]

    @hookimpl
    def amanda_type_systems(self):
        class Example(TypeSystem):
            name = "example"

        return [Example()]


def make_dist(tmp_path, dist, module, body, ep_name=None):
    """A tiny installed distribution on sys.path exposing an `amanda` entry point."""
    info = tmp_path / f"{dist.replace('-', '_')}-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text(f"[amanda]\n{ep_name or dist} = {module}\n")
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(body))


GOOD = """
from amanda_core import hookimpl
from amanda_core.namespace import NamespaceSchema, OpSchema, StaticNamespaces

@hookimpl
def amanda_namespaces():
    return [StaticNamespaces([NamespaceSchema("amanda/fake/2.0", [OpSchema("Bar")])])]
"""


def test_every_hook_is_documented():
    from amanda_core.plugin.manager import HOOK_NAMES

    assert "amanda_type_inferers" in HOOK_NAMES and "amanda_runners" in HOOK_NAMES
    for name in HOOK_NAMES:
        spec = getattr(hookspecs, name)
        assert spec.__doc__ and len(spec.__doc__.split()) > 5, name


def test_core_registers_python_type_system():
    pm = PluginManager(autoload=False)
    reg = pm.registry()
    assert "python" in reg.type_systems
    assert [p.name for p in pm.plugins()] == ["amanda-core"]


def test_in_process_plugin_registration_and_removal():
    pm = PluginManager(autoload=False)
    name = pm.register(ExamplePlugin(), "example")
    reg = pm.registry()
    assert ("amanda/example/1.0", "example") in reg.namespaces.namespaces()
    assert "example" in reg.type_systems
    info = {p.name: p for p in pm.plugins()}["example"]
    assert info.hooks == ("amanda_namespaces", "amanda_type_systems")
    pm.unregister(name)
    assert "amanda/example/1.0" not in [n for n, _ in pm.registry().namespaces.namespaces()]


def test_fixture_registers_for_one_test(amanda_plugin):
    amanda_plugin(ExamplePlugin(), "example-fixture")
    assert "amanda/example/1.0" in [n for n, _ in get_manager().registry().namespaces.namespaces()]


def test_fixture_unregisters_when_the_test_ends():
    # the fixture's own function, driven as pytest drives it: set up, the test registers, tear down (no reliance
    # on the order tests run in)
    from amanda_core.plugin.testing import _amanda_plugin

    fixture = _amanda_plugin()
    register = next(fixture)
    register(ExamplePlugin(), "example-teardown")
    assert "example-teardown" in [p.name for p in get_manager().plugins()]
    with pytest.raises(StopIteration):
        next(fixture)
    assert "example-teardown" not in [p.name for p in get_manager().plugins()]
    assert "amanda/example/1.0" not in get_manager().registry().namespaces


def test_context_manager_helper():
    with registered_plugin(ExamplePlugin(), "ctx") as name:
        assert name == "ctx"
        assert "amanda/example/1.0" in get_manager().registry().namespaces
    assert "amanda/example/1.0" not in get_manager().registry().namespaces


def test_duplicate_registration_is_an_error():
    pm = PluginManager(autoload=False)
    p = ExamplePlugin()
    pm.register(p, "one")
    with pytest.raises(PluginError):
        pm.register(p, "two")


def test_bad_registration_names_the_plugin():
    class Bad:
        @hookimpl
        def amanda_namespaces(self):
            return ["not a provider"]

    pm = PluginManager(autoload=False)
    pm.register(Bad(), "bad-plugin")
    with pytest.raises(PluginError, match="bad-plugin"):
        pm.registry()


def test_entry_point_discovery(tmp_path, monkeypatch):
    make_dist(tmp_path, "amanda-fake", "amanda_fake_plugin", GOOD)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("AMANDA_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.delenv("AMANDA_PLUGINS", raising=False)
    pm = PluginManager()
    info = {p.name: p for p in pm.plugins()}["amanda-fake"]
    assert (info.distribution, info.version) == ("amanda-fake", "1.2.3")
    assert ("amanda/fake/2.0", "amanda-fake") in pm.registry().namespaces.namespaces()


def test_autoload_can_be_disabled(tmp_path, monkeypatch):
    make_dist(tmp_path, "amanda-fake", "amanda_fake_plugin2", GOOD)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("AMANDA_DISABLE_PLUGIN_AUTOLOAD", "1")
    assert [p.name for p in PluginManager().plugins()] == ["amanda-core"]


def test_only_named_plugins_load(tmp_path, monkeypatch):
    make_dist(tmp_path, "amanda-fake", "amanda_fake_plugin3", GOOD)
    make_dist(tmp_path, "amanda-other", "amanda_other_plugin", GOOD.replace("fake/2.0", "other/1"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("AMANDA_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.setenv("AMANDA_PLUGINS", "amanda-other")
    names = [p.name for p in PluginManager().plugins()]
    assert "amanda-other" in names and "amanda-fake" not in names
    monkeypatch.setenv("AMANDA_PLUGINS", "amanda-missing")
    with pytest.raises(PluginError, match="amanda-missing"):
        PluginManager().load()


def test_broken_plugin_error_names_it(tmp_path, monkeypatch):
    make_dist(tmp_path, "amanda-broken", "amanda_broken_plugin", "raise ImportError('needs libfoo')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("AMANDA_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.delenv("AMANDA_PLUGINS", raising=False)
    with pytest.raises(PluginError) as exc:
        PluginManager().load()
    msg = str(exc.value)
    assert "amanda-broken" in msg and "needs libfoo" in msg and "amanda_broken_plugin" in msg


def test_core_imports_no_framework():
    code = ("import sys, amanda_core, amanda_core.cli.main, amanda_core.plugin.manager; "
            "bad = [m for m in ('torch', 'tensorflow', 'onnx', 'onnxruntime') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_type_inferers_are_found_by_namespace():
    from amanda_core import Graph, TypeInferer

    def infer(graph):
        for op in graph:
            for q in op.output_ports:
                q.dtype = q.dtype or "float32"
        return 1

    class Inferring:
        @hookimpl
        def amanda_type_inferers(self):
            return [TypeInferer(name="example-types", namespace="amanda/example", infer=infer)]

    pm = PluginManager(autoload=False)
    pm.register(Inferring(), "inferring")
    reg = pm.registry()
    found = reg.type_inferer_for("amanda/example/1.0")
    assert found is not None and found.name == "example-types"
    assert reg.type_inferer_for("amanda/other/1.0") is None and reg.type_inferer_for(None) is None
    g = Graph("amanda/example/1.0")
    g.add_op("Foo", outputs=["y"])
    assert found.infer(g) == 1 and g.ops["foo"].output_ports[0].dtype == "float32"
    h = Graph("amanda/example/1.0")
    h.add_op("Foo", outputs=["y"])
    assert reg.infer_types(h, "amanda/example/1.0") == 1 and h.ops["foo"].output_ports[0].dtype == "float32"
    assert reg.infer_types(h, "amanda/other/1.0") == 0  # no inferer serves it: nothing typed


def test_a_type_inferer_of_the_wrong_kind_names_the_plugin():
    class Wrong:
        @hookimpl
        def amanda_type_inferers(self):
            return ["not an inferer"]

    pm = PluginManager(autoload=False)
    pm.register(Wrong(), "wrong-inferer")
    with pytest.raises(PluginError, match="wrong-inferer"):
        pm.registry()


def test_a_plugin_with_a_broken_table_has_its_tables_left_out_and_says_why(tmp_path):
    """A table that does not parse must not stop conversions that need none of its plugin's tables; the plugin's
    other tables go too (a table in parts with a part missing would convert less than it says), a lock refuses."""
    from amanda_core.errors import PluginError
    from amanda_core.mapping.registry import broken_tables, registered_tables

    good = tmp_path / "good.yaml"
    good.write_text("table: {name: good, src: amanda/toy/1, dst: amanda/other/1, rules: {}}\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("table: {name: bad, src: amanda/toy/1, dst: amanda/other/1, rules: {r: {src: {}}}}\n")

    class Registry:
        tables = [(str(good), "fine-plugin"), (str(bad), "broken-plugin"), (str(good), "broken-plugin")]

    reg = Registry()
    assert [(t.name, t.plugin) for t in registered_tables(reg)] == [("good", "fine-plugin")]
    (line,) = broken_tables(reg)
    assert "plugin 'broken-plugin' registered a broken table, so its tables are left out" in line
    assert "bad.yaml" in line and "rule 'r'" in line
    with pytest.raises(PluginError, match="broken-plugin"):
        registered_tables(reg, strict=True)


def test_a_conversion_reads_only_the_tables_on_a_path_that_enters_each_family_once(tmp_path):
    from amanda_core.mapping.registry import broken_tables, tables_between

    def table(name, src, dst, broken=False):
        path = tmp_path / f"{name}.yaml"
        rules = "{r: {src: {}}}" if broken else "{}"
        path.write_text(f"table:\n  name: {name}\n  src: {src}\n  dst: {dst}\n  rules: {rules}\n")
        return str(path)

    class Registry:
        tables = [(table("up", "amanda/toy/1", "amanda/toy/2"), "toy"),
                  (table("there", "amanda/toy/2", "amanda/other/1"), "other"),
                  (table("back", "amanda/other/1", "amanda/toy/2", broken=True), "other-back"),
                  (table("onward", "amanda/other/1", "amanda/third/1"), "third")]

    within = Registry()
    assert [t.name for t in tables_between(within, {"amanda/toy/1"}, "amanda/toy/2")] == ["up"]
    assert broken_tables(within) == []  # the broken table is on no such path: never read
    across = Registry()
    assert [t.name for t in tables_between(across, {"amanda/toy/1"}, "amanda/third/1")] == ["up", "there", "onward"]
    assert [t.name for t in tables_between(Registry(), {"amanda/other/1"}, "amanda/toy/2")] == ["up"]
    later = Registry()
    tables_between(later, {"amanda/other/1"}, "amanda/toy/2")
    assert len(broken_tables(later)) == 1 and "back.yaml" in broken_tables(later)[0]
