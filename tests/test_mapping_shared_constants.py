"""A family whose constants may be shared (``ConstantOp.shared``, as torch's ``prim::Constant`` literals are) gets
one constant op per distinct plain literal a table application feeds, read by every input that asks for it; other
families, and values that are no plain literal, get one op per input.  Literals that Python's equality joins
(``True``, ``1``, ``1.0``; a list and a tuple) stay apart."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from amanda_core import Graph
from amanda_core.mapping import MappingError, apply_table
from amanda_core.mapping.rewrite import literal_key
from amanda_core.namespace import NamespaceRegistry, load_schema
from amanda_core.namespace.registry import ConstantOp

from .mapping_support import OTHER, TOY, registry
from .test_mapping_consts import OtherNamespaces, ToyNamespaces, table


class SharingNamespaces(OtherNamespaces):
    """The other family, whose constants inputs may share."""

    def make_constant(self, value: Any, version: str | None) -> ConstantOp:
        return ConstantOp("Constant", {"value": value}, "output", shared=True)


def reg(sharing: bool = True) -> NamespaceRegistry:
    fresh = NamespaceRegistry(registry().type_systems)
    fresh.add(ToyNamespaces([load_schema(TOY.format(v=v)) for v in (1, 2)]))
    fresh.add((SharingNamespaces if sharing else OtherNamespaces)([load_schema(OTHER)]))
    return fresh


def relus(n: int) -> Graph:
    """x -> Relu -> Relu -> ... (n of them) -> out."""
    g = Graph("amanda/toy/1")
    src = g.add_input_port("x")
    for i in range(n):
        op = g.add_op("Relu", f"r{i}", inputs=["x"], outputs=["y"])
        g.connect(src, op.input_ports["x"])
        src = op.output_ports["y"]
    g.connect(src, g.add_output_port("out"))
    return g


def as_add(value: str) -> dict[str, Any]:
    """Each Relu becomes AddV2(x, <value>), the value an expression of the op's name."""
    return {"relu": {"src": {"ops": {"$r": {"type": "Relu"}}},
                     "dst": {"ops": {"$r": {"type": "AddV2", "consts": {"y": value}}}}}}


def constants(g: Graph) -> list[Any]:
    return [op for op in g if op.type == "Constant"]


def test_inputs_asking_for_the_same_literal_read_one_constant():
    g = relus(4)
    report = apply_table(g, table(as_add("${[1, 2] if r.name in ('r0', 'r2') else 0.5}")), reg())
    consts = constants(g)
    assert sorted(str(c.attrs["value"]) for c in consts) == ["0.5", "[1, 2]"]
    pair = next(c for c in consts if c.attrs["value"] == [1, 2])
    assert sorted(p.op.name for p in pair.output_ports[0].consumers) == ["r0", "r2"]
    assert pair.name == "r0_y" and pair.provenance == ("t", "relu")
    assert report.rules[0].produced["Constant"] == 2 and report.rules[0].produced["AddV2"] == 4
    assert not g.verify()


@pytest.mark.parametrize("values", [
    ("True", "1", "1.0"),
    ("[1, 2]", "(1, 2)", "[1.0, 2]"),
    ("'1'", "1", "[1]"),
])
def test_literals_that_compare_equal_in_python_stay_apart(values):
    cases = ", ".join(f"'r{i}': {v}" for i, v in enumerate(values))
    g = relus(len(values))
    apply_table(g, table(as_add("${{" + cases + "}[r.name]}")), reg())
    consts = constants(g)
    assert len(consts) == len(values)
    for i, v in enumerate(values):
        fed = g.ops[f"r{i}"].input_ports["y"].source.op
        assert type(fed.attrs["value"]) is type(eval(v))  # noqa: S307 - the test's own literals


def test_arrays_nans_and_families_that_do_not_share_get_one_constant_per_input():
    assert literal_key(ConstantOp("Constant", {"value": np.zeros(2)}, "output", True)) is None
    assert literal_key(ConstantOp("Constant", {"value": [1, np.int64(2)]}, "output", True)) is None
    g = relus(3)
    apply_table(g, table(as_add("${float('nan')}")), reg())
    assert len(constants(g)) == 3  # NaN equals nothing, itself included
    g = relus(3)
    apply_table(g, table(as_add("0.5")), reg(sharing=False))
    assert len(constants(g)) == 3
    g = relus(3)
    apply_table(g, table(as_add("${[[0.5, 1]] * 2}")), reg())
    assert len(constants(g)) == 1  # nested lists are plain literals too


def test_constants_are_shared_across_the_rules_of_one_table_application_only():
    g = relus(2)
    rules = {
        "first": {"src": {"ops": {"$r": {"type": "Relu"}}, "where": "${r.name == 'r0'}"},
                  "dst": {"ops": {"$r": {"type": "AddV2", "consts": {"y": 7}}}}},
        "second": {"src": {"ops": {"$r": {"type": "Relu"}}},
                   "dst": {"ops": {"$r": {"type": "AddV2", "consts": {"y": 7}}}}},
    }
    apply_table(g, table(rules), reg())
    (const,) = constants(g)
    assert sorted(p.op.name for p in const.output_ports[0].consumers) == ["r0", "r1"]
    h = relus(2)
    rules["second"]["dst"]["ops"]["$r"]["attrs"] = {"k": "${1 // 0}"}
    with pytest.raises(MappingError, match="ZeroDivisionError"):  # the failing rule is undone, the first kept
        apply_table(h, table(rules), reg())
    (const,) = constants(h)
    assert [p.op.name for p in const.output_ports[0].consumers] == ["r0"]
    assert h.ops["r1"].type == "Relu" and h.ops["r1"].input_ports.names() == ["x"]
    assert not h.verify()


def test_a_constant_read_by_two_inputs_stays_while_one_still_reads_it():
    g = relus(2)
    apply_table(g, table(as_add("0.5")), reg())
    (const,) = constants(g)
    g.disconnect(g.ops["r0"].input_ports["y"])
    assert const.name in g.ops and len(const.output_ports[0].consumers) == 1
