"""The schema cache: generated once per onnx release, read back without importing onnx."""

import json
import os
import subprocess
import sys
from importlib import metadata

import pytest

from amanda_core.errors import NamespaceError
from amanda_onnx import schemas
from amanda_onnx.schemas import clear_memo, index, namespace_providers

LIST_AND_LOAD = """
import json, sys, time
t0 = time.perf_counter()
from amanda_onnx import plugin
from amanda_core.namespace import NamespaceRegistry, PythonTypeSystem, TypeSystemRegistry
imported_at_load = "onnx" in sys.modules
reg = NamespaceRegistry(TypeSystemRegistry([PythonTypeSystem(), *plugin.amanda_type_systems()]))
for provider in plugin.amanda_namespaces():
    reg.add(provider, "amanda-onnx")
names = [n for n, _ in reg.namespaces()]
t1 = time.perf_counter()
schema = reg.schema("amanda/onnx")
squeeze = reg.schema("amanda/onnx/13")["Squeeze"]
t2 = time.perf_counter()
print(json.dumps({"imported_at_load": imported_at_load, "onnx_imported": "onnx" in sys.modules,
                  "namespaces": len(names), "ops": len(schema), "squeeze_inputs": [p.name for p in squeeze.input_ports],
                  "list_s": t1 - t0, "schema_s": t2 - t1}))
"""


def run_python(code, cache, **env):
    full_env = {**os.environ, "AMANDA_CACHE_DIR": str(cache), **env}
    full_env.pop("AMANDA_NO_CACHE", None)
    out = subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_warm_cache_lists_and_builds_without_importing_onnx(tmp_path):
    cold = run_python(LIST_AND_LOAD, tmp_path)
    assert not cold["imported_at_load"]
    assert cold["onnx_imported"]  # generation needed onnx
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([
        f"onnx-index-onnx{metadata.version('onnx')}-gen{schemas.GENERATOR_VERSION}.json",
        f"onnx-defs-ai.onnx-onnx{metadata.version('onnx')}-gen{schemas.GENERATOR_VERSION}.json"])
    warm = run_python(LIST_AND_LOAD, tmp_path)
    assert not warm["onnx_imported"]
    assert (warm["namespaces"], warm["ops"]) == (cold["namespaces"], cold["ops"])
    assert warm["squeeze_inputs"] == ["data", "axes"]


def test_entry_point_plugin_with_warm_cache_does_not_import_onnx(tmp_path):
    eps = [ep for ep in metadata.entry_points(group="amanda") if ep.name == "amanda-onnx"]
    if not eps:
        pytest.skip("amanda-onnx is not installed (no entry point)")
    code = """
import json, sys
from amanda_core.plugin import registry
reg = registry().namespaces
names = [n for n, _ in reg.namespaces()]
schema = reg.schema("amanda/onnx/13")
print(json.dumps({"onnx_imported": "onnx" in sys.modules, "onnx13": "amanda/onnx/13" in names,
                  "type_systems": registry().type_systems.names(), "ops": len(schema)}))
"""
    run_python(code, tmp_path, AMANDA_PLUGINS="amanda-onnx")
    warm = run_python(code, tmp_path, AMANDA_PLUGINS="amanda-onnx")
    assert warm["onnx13"] and "onnx" in warm["type_systems"] and warm["ops"] > 100
    assert not warm["onnx_imported"]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AMANDA_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("AMANDA_NO_CACHE", raising=False)
    clear_memo()
    yield tmp_path
    clear_memo()


def _index_file(cache):
    (path,) = cache.glob("onnx-index-*.json")
    return path


def test_second_build_reads_the_cache(cache):
    first = index()
    path = _index_file(cache)
    data = json.loads(path.read_text())
    assert data == first
    data["domains"][0]["last"] = 5  # what the cache says is what is used
    path.write_text(json.dumps(data))
    clear_memo()
    (default,) = [p for p in namespace_providers() if p.family == "amanda/onnx"]
    assert default.versions() == ["1", "2", "3", "4", "5"]


def test_cache_key_has_onnx_version_and_generator(cache, monkeypatch):
    index()
    monkeypatch.setattr(schemas, "onnx_version", lambda: "0.0.1")
    clear_memo()
    index()
    assert (cache / f"onnx-index-onnx0.0.1-gen{schemas.GENERATOR_VERSION}.json").exists()
    monkeypatch.setattr(schemas, "GENERATOR_VERSION", "test")
    clear_memo()
    index()
    assert (cache / "onnx-index-onnx0.0.1-gentest.json").exists()
    assert len(list(cache.glob("onnx-index-*.json"))) == 3


def test_no_cache_writes_nothing(cache, monkeypatch):
    monkeypatch.setenv("AMANDA_NO_CACHE", "1")
    providers = namespace_providers()
    assert providers[0].schema(13)["Squeeze"].input("axes") is not None
    assert list(cache.iterdir()) == []


def test_malformed_cache_is_reported(cache):
    (provider,) = [p for p in namespace_providers() if p.family == "amanda/onnx"]
    key = f"onnx-defs-ai.onnx-onnx{schemas.onnx_version()}-gen{schemas.GENERATOR_VERSION}.json"
    (cache / key).write_text(json.dumps({"domain": "ai.onnx", "ops": {"Add": [{"since": 1}]}}))
    clear_memo()
    with pytest.raises(NamespaceError, match="malformed .* delete that file"):
        provider.schema(1)


def test_missing_onnx_is_a_clear_error(monkeypatch):
    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(schemas.metadata, "version", missing)
    clear_memo()  # (the version is read once per process)
    with pytest.raises(NamespaceError, match="onnx package is not installed"):
        schemas.onnx_version()
