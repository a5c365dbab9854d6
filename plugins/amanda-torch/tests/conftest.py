"""Fixtures for the amanda-torch tests.

The namespace schema is generated once per test session into the session's cache directory (the one the
repository's root ``conftest.py`` gives every test), so later tests and child processes find it warm.
"""

import os
from typing import Any

import pytest

from amanda_core.namespace import NamespaceRegistry, PythonTypeSystem, TypeSystemRegistry
from amanda_torch import plugin
from amanda_torch.schemas import TorchNamespaces


@pytest.fixture(scope="session")
def torch_cache_dir(tmp_path_factory):
    """The cache directory of this session (same rule as the root conftest's autouse fixture)."""
    return os.environ.get("AMANDA_CACHE_DIR") or str(tmp_path_factory.getbasetemp() / "amanda-cache")


@pytest.fixture(scope="session")
def torch_schema(torch_cache_dir):
    """The namespace schema of the installed torch (generated on first use, then cached)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AMANDA_CACHE_DIR", torch_cache_dir)
        return TorchNamespaces().schema(None)


@pytest.fixture
def torch_registry(torch_schema):
    """A registry holding only what the amanda-torch plugin registers (through its hooks)."""
    types = TypeSystemRegistry([PythonTypeSystem(), *plugin.amanda_type_systems()])
    reg = NamespaceRegistry(types)
    for provider in plugin.amanda_namespaces():
        reg.add(provider, "amanda-torch")
    return reg


@pytest.fixture
def torch_plugin_loaded(amanda_plugin):
    """The process-wide plugin manager with amanda-torch in it (its entry point, or registered for the test)."""
    from amanda_core.plugin import get_manager

    manager = get_manager()
    manager.load()
    if not manager.pluggy.is_registered(plugin):
        amanda_plugin(plugin, "amanda-torch")
    return manager


@pytest.fixture(scope="session")
def load_bench() -> Any:
    """A loader of the repository's ``bench/`` scripts as modules: ``load_bench("onnx_torch.py")``."""
    import importlib.util
    import sys
    from pathlib import Path

    def load(script: str) -> Any:
        path = Path(__file__).resolve().parents[3] / "bench" / script
        spec = importlib.util.spec_from_file_location(f"{path.stem}_bench", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture(scope="session")
def bench(load_bench: Any) -> Any:
    """``bench/onnx_torch.py`` (the ONNX node suite to torch) as a module, loaded once per session: the node-case
    tests convert and run cases as the bench does (a test file may give its own ``bench`` for another script)."""
    return load_bench("onnx_torch.py")


@pytest.fixture(scope="session")
def tables(bench: Any) -> list[Any]:
    """The registered tables as the bench reads them (parsed once per session)."""
    return bench.amanda_tables()
