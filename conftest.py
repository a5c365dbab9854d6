"""Shared by every test directory (core and plugins)."""

import os

import pytest


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Generated schemas go to one cache directory per test session (so each framework's schemas are generated
    once per run, never read from the user's cache) unless a test sets its own."""
    if "AMANDA_CACHE_DIR" not in os.environ:
        monkeypatch.setenv("AMANDA_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "amanda-cache"))
    yield
