"""A chain planned once is planned again only when something it depends on changed: the namespaces registered,
the tables given (which, and in what order), or what the planner reads of a table (src, dst, plugin, ahead)."""

from __future__ import annotations

import pytest

from amanda_core.mapping import plan, planner
from amanda_core.namespace import load_schema

from .mapping_support import registry
from .test_planner_direct import _table


@pytest.fixture
def walks(monkeypatch):
    """How many times the planner searched."""
    count = [0]
    shortest = planner._shortest

    def counting(*args, **kwargs):
        count[0] += 1
        return shortest(*args, **kwargs)

    monkeypatch.setattr(planner, "_shortest", counting)
    monkeypatch.setattr(planner, "_PLANS", {})
    return count


def test_a_chain_is_planned_once_for_the_same_tables_and_namespaces(walks):
    reg = registry()
    to_mid = _table("toy-to-torch", "amanda/toy/1", "amanda/pytorch/1.4.0", "first")
    mid_to_other = _table("torch-to-other", "amanda/pytorch/1.4.0", "amanda/other/1", "first")
    first = plan("amanda/toy/1", "amanda/other/1", [to_mid, mid_to_other], reg)
    searched = walks[0]
    again = plan("amanda/toy/1", "amanda/other/1", [to_mid, mid_to_other], reg)
    assert again == first and again is not first and walks[0] == searched
    again.pop()  # the caller's list is its own
    assert len(plan("amanda/toy/1", "amanda/other/1", [to_mid, mid_to_other], reg)) == 2


def test_changed_tables_or_namespaces_are_planned_again(walks):
    reg = registry()
    to_mid = _table("toy-to-torch", "amanda/toy/1", "amanda/pytorch/1.4.0", "first")
    mid_to_other = _table("torch-to-other", "amanda/pytorch/1.4.0", "amanda/other/1", "first")
    direct = _table("toy-to-other", "amanda/toy/1", "amanda/other/1", "zlast")
    assert len(plan("amanda/toy/1", "amanda/other/1", [to_mid, mid_to_other], reg)) == 2
    assert [s.table.name for s in plan("amanda/toy/1", "amanda/other/1", [to_mid, mid_to_other, direct], reg)] \
        == ["toy-to-other"]
    n = walks[0]
    direct.dst = "amanda/toy/2"  # what the planner reads of a table changed
    assert len(plan("amanda/toy/1", "amanda/other/1", [to_mid, mid_to_other, direct], reg)) == 2
    assert walks[0] > n
    n = walks[0]
    plan("amanda/toy/1", "amanda/other/1", [to_mid, mid_to_other, direct], reg)
    assert walks[0] == n
    reg.add_schema(load_schema("namespace_schema:\n  namespace: amanda/toy/3\n  op_schemas: []\n"))
    plan("amanda/toy/1", "amanda/other/1", [to_mid, mid_to_other, direct], reg)
    assert walks[0] > n  # a namespace registered since: what a name resolves to may differ
    n = walks[0]
    plan("amanda/toy/1", "amanda/other/1", [to_mid, mid_to_other, direct], registry())
    assert walks[0] > n  # another registry
