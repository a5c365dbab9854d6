import os

import pytest

pytest_plugins = ["amanda_core.plugin.testing"]


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Schema caches go to one temporary directory per test session unless a test sets its own."""
    if "AMANDA_CACHE_DIR" not in os.environ:
        monkeypatch.setenv("AMANDA_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "amanda-cache"))
    yield
