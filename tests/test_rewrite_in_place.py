"""Rewrites that keep every matched op and write no edge (a retyping, constants fed to the op's inputs) take a
short path, and rules whose rewrites cannot close a cycle are not followed by a sort of the graph to find one.
Both must leave exactly the graph the general path leaves."""

from __future__ import annotations

import sys
from typing import Any

import attrs
import pytest

from amanda_core import Graph
from amanda_core.mapping import MappingError, apply_table, rewrite

from .mapping_support import toy_chain
from .test_mapping_consts import graph_with_split, reg_with_constants, table

IN_PLACE = {
    # a constant input read into an attribute, the constant swept
    "add_const": {"src": {"ops": {"$add": {"type": "Add", "consts": {"b": "$k"}}}},
                  "dst": {"ops": {"$add": {"type": "Permute", "attrs": {"dims": "${[k, k]}"},
                                           "input_ports": ["input"]}}}},
    # a retyping with meta and a constant fed to a new input
    "relu": {"src": {"ops": {"$r": {"type": "Relu"}}},
             "dst": {"ops": {"$r": {"type": "AddV2", "meta": {"was": "${r.type}"}, "consts": {"y": 0.5}}}}},
}


def general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every mapper take the general path (as before the short one existed)."""
    shape_of = rewrite._shape_of
    monkeypatch.setattr(rewrite, "_shape_of", lambda t, keys: attrs.evolve(shape_of(t, keys), in_place=False,
                                                                          acyclic=False))


@pytest.mark.parametrize("make, rules", [
    (toy_chain, IN_PLACE),
    (lambda: graph_with_split("const"), {"split": {"src": {"ops": {"$s": {"type": "Split",
                                                                          "consts": {"split": "$sizes"}}}},
                                                   "dst": {"ops": {"$s": {"meta": {"sizes": "$sizes"}}}}}}),
    (lambda: graph_with_split(None), {"r": {"src": {"ops": {"$s": {"type": "Split"}}},
                                            "dst": {"ops": {"$s": {"consts": {"split": [1, 4]}}}}}}),
])
def test_the_short_path_leaves_the_graph_the_general_path_leaves(monkeypatch, make, rules):
    dst = "amanda/toy/2" if "r" in rules or "split" in rules else "amanda/other/1"
    reg = reg_with_constants()
    short = make()
    short_report = apply_table(short, table(rules, dst=dst), reg)
    general_path(monkeypatch)
    general = make()
    general_report = apply_table(general, table(rules, dst=dst), reg)
    assert short == general
    assert [(r.rule, r.matches, r.removed, dict(r.produced)) for r in short_report.rules] == \
        [(r.rule, r.matches, r.removed, dict(r.produced)) for r in general_report.rules]
    assert any(r.matches for r in short_report.rules)


def sorts_by_rule(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record each sort of a graph the engine asks for after a rule (its check for a cycle the rule made)."""
    calls: list[str] = []
    order = Graph.topological_order

    def spy(self: Graph, *args: Any, **kwargs: Any) -> Any:
        if sys._getframe(1).f_code.co_name == "_apply_rule_to":
            calls.append(self.namespace or "")
        return order(self, *args, **kwargs)

    monkeypatch.setattr(Graph, "topological_order", spy)
    return calls


def test_rules_that_cannot_close_a_cycle_are_not_followed_by_a_sort(monkeypatch):
    calls = sorts_by_rule(monkeypatch)
    g = toy_chain()
    report = apply_table(g, table(IN_PLACE), reg_with_constants())
    assert sum(r.matches for r in report.rules) == 2
    assert calls == []


def test_a_rule_that_writes_edges_is_still_checked_for_cycles(monkeypatch):
    calls = sorts_by_rule(monkeypatch)
    g = toy_chain()
    rules = {"relu_as_add": {"src": {"ops": {"$relu": {"type": "Relu"}}},
                             "dst": {"ops": {"add2": {"type": "AddV2", "consts": {"y": 0.5}}},
                                     "edges": ["$relu.x -> add2.x", "add2.z -> $relu.y"]}}}
    apply_table(g, table(rules), reg_with_constants())
    assert len(calls) == 1
    cyclic = {"loop": {"src": {"ops": {"$a": {"type": "Add"}}},
                       "dst": {"ops": {"$a": {}}, "edges": ["$a.y -> $a.a"]}}}
    with pytest.raises(MappingError, match="made a cycle"):
        apply_table(toy_chain(), table(cyclic, dst="amanda/toy/1"), reg_with_constants())
