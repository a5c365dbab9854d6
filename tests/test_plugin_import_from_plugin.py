"""``import_from_plugin``: one plugin's use of another's module, without a dependency on it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from amanda_core.errors import PluginError
from amanda_core.plugin import import_from_plugin


def test_an_installed_module_is_imported() -> None:
    assert import_from_plugin("amanda_core.mapping", "amanda-core", "anything") is sys.modules["amanda_core.mapping"]


@pytest.mark.parametrize("module", ["amanda_not_installed_xyz.passes", "amanda_core.no_such_module_xyz"])
def test_a_missing_plugin_names_what_needs_it_and_how_to_install_it(module: str) -> None:
    with pytest.raises(PluginError) as err:
        import_from_plugin(module, "amanda-xyz", "converting XYZ to TensorFlow")
    assert str(err.value) == "converting XYZ to TensorFlow needs the amanda-xyz plugin (pip install amanda-xyz)"


def test_a_missing_import_inside_the_plugin_is_not_taken_for_a_missing_plugin(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "amanda_fake_plugin_xyz"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "passes.py").write_text("import a_dependency_nobody_installed_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="a_dependency_nobody_installed_xyz"):
        import_from_plugin("amanda_fake_plugin_xyz.passes", "amanda-fake", "converting")


@pytest.mark.parametrize("plugin", ["amanda_tf.plugin", "amanda_torch.plugin"])
def test_the_backends_say_so_when_amanda_onnx_is_missing(plugin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module = pytest.importorskip(plugin)
    monkeypatch.setitem(sys.modules, "amanda_onnx", None)  # as if it were not installed
    monkeypatch.delitem(sys.modules, "amanda_onnx.unroll", raising=False)
    with pytest.raises(PluginError, match=r"needs the amanda-onnx plugin \(pip install amanda-onnx\)"):
        module._onnx_pass("unroll")
