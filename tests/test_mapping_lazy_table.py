"""Lazy mapping tables (:meth:`MappingTable.lazy`): a header now, the rules on first read, checked against it."""

from __future__ import annotations

import copy
import threading

import pytest

from amanda_core.mapping import TableError, table_from_dict
from amanda_core.mapping.planner import plan
from amanda_core.mapping.table import MappingTable, dump_table

RULES = {"rename": {"src": {"ops": {"$a": {"type": "A"}}}, "dst": {"ops": {"$a": {"type": "B"}}}}}


def whole(name: str = "t", src: str = "x/1", dst: str = "x/2", **extra: object) -> MappingTable:
    return table_from_dict({"name": name, "src": src, "dst": dst, "rules": RULES,
                            "description": "renames A", **extra})


class Counting:
    def __init__(self, table: MappingTable) -> None:
        self.table = table
        self.calls = 0

    def __call__(self) -> MappingTable:
        self.calls += 1
        return self.table


def test_rules_are_built_on_first_read_once() -> None:
    build = Counting(whole())
    lazy = MappingTable.lazy("t", "x/1", "x/2", build)
    assert not lazy.built and build.calls == 0
    assert (lazy.name, lazy.src, lazy.dst, lazy.carry) == ("t", "x/1", "x/2", "none")
    assert "rules not built yet" in repr(lazy) and build.calls == 0
    assert list(lazy.rules) == ["rename"] and lazy.built and build.calls == 1
    assert [r.name for r in lazy.ordered_rules()] == ["rename"] and lazy.raw["rules"] == RULES
    assert build.calls == 1
    assert lazy == whole() and lazy.description == "renames A"  # (not given to lazy(): the built table's)
    assert dump_table(lazy) == dump_table(whole())


def test_raw_builds_too() -> None:
    build = Counting(whole())
    lazy = MappingTable.lazy("t", "x/1", "x/2", build)
    assert lazy.has_expressions() is False and build.calls == 1 and lazy.built


def test_planning_reads_headers_only() -> None:
    builds = [Counting(whole("a", "x/1", "x/2")), Counting(whole("b", "x/2", "x/3")),
              Counting(whole("c", "x/3", "x/1"))]
    tables = [MappingTable.lazy(b.table.name, b.table.src, b.table.dst, b) for b in builds]
    steps = plan("x/1", "x/3", tables)
    assert [s.table.name for s in steps] == ["a", "b"]
    assert [b.calls for b in builds] == [0, 0, 0]


@pytest.mark.parametrize("attr, value", [("name", "other"), ("src", "x/0"), ("dst", "x/9"), ("carry", "unchanged"),
                                         ("tags", ("t1",))])
def test_a_build_that_disagrees_with_the_header_is_an_error(attr: str, value: object) -> None:
    header = {"name": "t", "src": "x/1", "dst": "x/2", "carry": "none", "tags": ()}
    header[attr] = value
    name, src, dst = header.pop("name"), header.pop("src"), header.pop("dst")
    lazy = MappingTable.lazy(name, src, dst, lambda: whole(), **header)  # type: ignore[arg-type]
    with pytest.raises(TableError, match=f"built for {attr}"):
        lazy.rules  # noqa: B018
    assert not lazy.built


def test_a_failed_build_keeps_nothing_and_raises_again() -> None:
    calls = []

    def broken() -> MappingTable:
        calls.append(1)
        return table_from_dict({"name": "t", "src": "x/1", "dst": "x/2", "rules": {"r": {"src": {}}}})

    lazy = MappingTable.lazy("t", "x/1", "x/2", broken)
    for _ in range(2):
        with pytest.raises(TableError):
            lazy.rules  # noqa: B018
    assert len(calls) == 2 and not lazy.built


def test_a_copy_before_the_build_builds_on_its_own() -> None:
    build = Counting(whole())
    lazy = MappingTable.lazy("t", "x/1", "x/2", build)
    other = copy.copy(lazy)
    other.plugin = "p"
    assert other.rules.keys() == {"rename"} and not lazy.built and lazy.plugin is None


def test_threads_build_once() -> None:
    started = threading.Event()
    build = Counting(whole())

    def slow() -> MappingTable:
        started.set()
        return build()

    lazy = MappingTable.lazy("t", "x/1", "x/2", slow)
    seen: list[object] = []
    threads = [threading.Thread(target=lambda: seen.append(lazy.rules)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert build.calls == 1 and all(s is seen[0] for s in seen)


def test_setting_rules_replaces_the_build() -> None:
    build = Counting(whole())
    lazy = MappingTable.lazy("t", "x/1", "x/2", build)
    lazy.rules = {}
    assert lazy.built and lazy.rules == {} and lazy.raw == {} and build.calls == 0
