"""Fixtures of the amanda-tf tests.

The TensorFlow schema is generated once per test session into the session's cache directory (the one the
repository's root ``conftest.py`` gives every test), so later tests and subprocesses find it warm.
"""

from __future__ import annotations

import os

import pytest

import amanda_tf.plugin
from amanda_core.namespace import NamespaceSchema
from amanda_core.plugin import PluginManager
from amanda_core.plugin.manager import Registry
from amanda_tf.namespace import TensorFlowNamespaces


@pytest.fixture(scope="session")
def tf_cache_dir(tmp_path_factory) -> str:
    return os.environ.get("AMANDA_CACHE_DIR") or str(tmp_path_factory.getbasetemp() / "amanda-cache")


@pytest.fixture(scope="session")
def tf_version() -> str:
    found = TensorFlowNamespaces().installed()
    if found is None:
        pytest.fail("TensorFlow is not installed; the amanda-tf tests need it (pip install amanda-tf[cpu])")
    return found[1]


@pytest.fixture(scope="session")
def tf_schema(tf_cache_dir, tf_version) -> NamespaceSchema:
    """The generated schema of the installed TensorFlow (cold on first use in a session)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AMANDA_CACHE_DIR", tf_cache_dir)
        mp.delenv("AMANDA_NO_CACHE", raising=False)
        return TensorFlowNamespaces().schema(tf_version)


@pytest.fixture
def tf_registry(tf_schema) -> Registry:
    """Everything the amanda-tf plugin module registers (plus the core's ``python``), through its hooks."""
    pm = PluginManager(autoload=False)
    pm.register(amanda_tf.plugin, "amanda-tf")
    return pm.registry()


@pytest.fixture(scope="module")
def plugins(tf_schema) -> PluginManager:
    """A plugin manager with amanda-tf and amanda-onnx only, for TF -> ONNX conversions whatever else is installed
    (amanda-onnx is imported only when a test asks for this fixture)."""
    import amanda_onnx.plugin

    pm = PluginManager(autoload=False)
    pm.register(amanda_tf.plugin, "amanda-tf")
    pm.register(amanda_onnx.plugin, "amanda-onnx")
    return pm


@pytest.fixture(scope="session")
def op_list(tf_schema):
    """TensorFlow's own ``OpList`` (imports TensorFlow)."""
    from amanda_tf.schema import read_op_list

    return read_op_list()


BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench", "onnx_node_suite_tf.py")


@pytest.fixture(scope="session")
def bench():
    """``bench/onnx_node_suite_tf.py`` as a module: its ``attempt(case)`` converts one ONNX node case to TF, runs
    it and compares (the node-suite tests call the bench, so the two cannot drift apart)."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("onnx_node_suite_tf", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def cases(request):
    """The ONNX node cases of the onnx test-case modules the test module lists in ``MODULES``, by name."""
    import importlib
    import warnings

    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for m in request.module.MODULES:
            importlib.import_module(f"onnx.backend.test.case.node.{m}")
    return {c.name: c for c in node._NodeTestCases}
