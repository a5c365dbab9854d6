"""The planner prefers a direct table between two families to a chain through a third one, and says why."""

from __future__ import annotations

import textwrap

import attrs

from amanda_core.mapping import convert, load_table, plan

from .mapping_support import registry, toy_chain


def _table(name: str, src: str, dst: str, plugin: str | None) -> object:
    text = f"""\
    table:
      name: {name}
      src: {src}
      dst: {dst}
      rules:
        relu:
          src: {{ops: {{$r: {{type: Relu}}}}}}
          dst: {{ops: {{$r: {{type: ReLU}}}}}}
    """
    return attrs.evolve(load_table(textwrap.dedent(text), filename=f"{name}.yaml", trusted=True), plugin=plugin)


def test_a_direct_table_is_chosen_over_the_chain_through_a_third_family_and_explain_says_why():
    reg = registry()
    to_mid = _table("toy-to-torch", "amanda/toy/1", "amanda/pytorch/1.4.0", "first")
    mid_to_other = _table("torch-to-other", "amanda/pytorch/1.4.0", "amanda/other/1", "first")
    direct = _table("toy-to-other", "amanda/toy/1", "amanda/other/1", "zlast")  # an installed table, given last

    chain = plan("amanda/toy/1", "amanda/other/1", [to_mid, mid_to_other], reg)
    assert [s.table.name for s in chain] == ["toy-to-torch", "torch-to-other"]
    assert all(not s.detour for s in chain)  # nothing shorter to be chosen over

    steps = plan("amanda/toy/1", "amanda/other/1", [to_mid, mid_to_other, direct], reg)
    assert [s.table.name for s in steps] == ["toy-to-other"]
    assert [t.name for t in steps[0].detour] == ["toy-to-torch", "torch-to-other"]

    text = convert(toy_chain(), "amanda/other/1", [to_mid, mid_to_other, direct], reg, allow_partial=True).explain()
    assert "table toy-to-other: amanda/toy/1 -> amanda/other/1" in text
    assert ("chosen (plugin zlast) over the chain toy-to-torch -> torch-to-other (2 tables between the same "
            "namespaces): one table is fewer") in text
    assert "--exclude-table toy-to-other takes the longer one" in text
    assert "table toy-to-torch" not in text
