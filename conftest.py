"""Shared by every test directory (core and plugins).

Reports: a test or a conftest adds figures with the ``amanda_report`` fixture (or
:func:`add_report` on the pytest config); they are printed after the run, in the terminal summary, never in
the middle of the progress dots.  Each report has a short summary, always printed, and optional details (the
cases one by one), printed with ``-v`` and otherwise written to ``.pytest_cache/d/amanda/details.txt`` (the
summary says where).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import pytest


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Generated schemas go to one cache directory per test session (so each framework's schemas are generated
    once per run, never read from the user's cache) unless a test sets its own."""
    if "AMANDA_CACHE_DIR" not in os.environ:
        monkeypatch.setenv("AMANDA_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "amanda-cache"))
    yield


def pytest_configure(config: pytest.Config) -> None:
    config.amanda_reports = []  # type: ignore[attr-defined]


def add_report(config: pytest.Config, section: str, summary: Sequence[str], details: Sequence[str] = ()) -> None:
    """Print ``summary`` under ``section`` after the run; ``details`` with -v, else into the details file."""
    reports = getattr(config, "amanda_reports", None)
    if reports is None:  # pragma: no cover - configured by this conftest
        reports = config.amanda_reports = []  # type: ignore[attr-defined]
    reports.append((section, list(summary), list(details)))


@pytest.fixture(scope="session")
def amanda_report(request: pytest.FixtureRequest) -> Any:
    """``amanda_report(section, summary_lines, detail_lines=())``: see the module's doc.  Session-scoped, so a
    module fixture that computes a suite's figures can report them without a test that only prints."""

    def report(section: str, summary: Sequence[str], details: Sequence[str] = ()) -> None:
        add_report(request.config, section, summary, details)

    return report


def _details_file(config: pytest.Config) -> Path:
    cache = getattr(config, "cache", None)
    if cache is not None:
        return Path(cache.mkdir("amanda")) / "details.txt"
    return Path(config.rootpath) / ".pytest_cache" / "amanda" / "details.txt"


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    reports = getattr(config, "amanda_reports", None)
    if not reports:
        return
    tr = terminalreporter
    verbose = config.option.verbose > 0
    detail_text: list[str] = []
    for section, summary, details in reports:
        tr.section(section, sep="-")
        for line in summary:
            tr.write_line(line)
        if details and verbose:
            for line in details:
                tr.write_line(line)
        elif details:
            detail_text += [f"== {section}", *details, ""]
    if detail_text:
        path = _details_file(config)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(detail_text) + "\n", encoding="utf-8")
        except OSError as e:  # pragma: no cover - a read-only checkout
            tr.write_line(f"(details not written: {e}; run with -v to see them)")
        else:
            shown = os.path.relpath(path) if not os.path.relpath(path).startswith("..") else str(path)
            tr.write_line(f"details of the reports above: {shown} (or run with -v)")
