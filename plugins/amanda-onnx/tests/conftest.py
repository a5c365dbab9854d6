"""Fixtures for the amanda-onnx tests."""

import pytest

from amanda_core.namespace import NamespaceRegistry, PythonTypeSystem, TypeSystemRegistry
from amanda_onnx import plugin
from amanda_onnx.schemas import clear_memo


@pytest.fixture
def onnx_registry():
    """A registry holding only what the amanda-onnx plugin registers (built through its hooks)."""
    clear_memo()
    types = TypeSystemRegistry([PythonTypeSystem(), *plugin.amanda_type_systems()])
    reg = NamespaceRegistry(types)
    for provider in plugin.amanda_namespaces():
        reg.add(provider, "amanda-onnx")
    return reg


@pytest.fixture
def onnx_plugin_loaded(amanda_plugin):
    """The process-wide plugin manager with amanda-onnx in it (through its entry point when installed,
    else registered for this test)."""
    from amanda_core.plugin import get_manager

    manager = get_manager()
    manager.load()
    if not manager.pluggy.is_registered(plugin):
        amanda_plugin(plugin, "amanda-onnx")
    return manager


@pytest.hookimpl(tryfirst=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One line per ONNX suite that ran (round-trip passes, cases onnxruntime cannot run, failures); the cases
    onnxruntime cannot run, one by one, are details (``-v``, or the details file the root conftest names)."""
    import sys

    support = sys.modules.get("onnx_suite_support")
    if support is None or not support.OUTCOMES:
        return
    summary = [f"{suite}: {counts.get('pass', 0)} round-trip pass, {counts.get('runtime unavailable', 0)} runtime "
               f"unavailable (structure and checker verified), {counts.get('fail', 0)} failures"
               for suite, counts in sorted(support.OUTCOMES.items())]
    details = []
    for suite, cases in sorted(support.UNAVAILABLE.items()):
        details.append(f"{suite}: onnxruntime cannot run {len(cases)} original model(s):")
        details.extend(f"  {line}" for line in cases)
    add = getattr(config, "amanda_reports", None)
    if add is not None:  # the root conftest prints it after the run, with the other reports
        add.append(("ONNX round-trip suites", summary, details))
        return
    tr = terminalreporter  # run from the plugin's folder alone
    tr.section("ONNX round-trip suites", sep="-")
    for line in summary + (details if config.option.verbose > 0 else []):
        tr.write_line(line)
