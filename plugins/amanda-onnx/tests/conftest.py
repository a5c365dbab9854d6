"""Fixtures for the amanda-onnx tests."""

import pytest
from amanda_onnx import plugin
from amanda_onnx.schemas import clear_memo

from amanda_core.namespace import NamespaceRegistry, PythonTypeSystem, TypeSystemRegistry


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
