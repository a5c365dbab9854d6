"""Regressions of the mapping engine found while writing version-to-version tables (ONNX opsets).

* An op updated in place whose port names are not slots of the target schema (a newer version renamed a formal
  parameter, or a variadic group) takes the target's slot names by position, as an op whose type changes does.
* A new op whose ``name`` is that of an op the same rewrite removes takes that name, not ``name_1``.
* A new op's variadic output group joined to a matched op's group (``new.outputs* -> $s.outputs*``) gets one port
  per element, as an input group already did.
* In a chain of version steps, an op that one step cannot convert leaves the graph mixed, and each op is pinned to
  its namespace.  Ops carried by a later step move on even when they were pinned: they used to keep the namespace
  of the step before and stop there.
"""

from __future__ import annotations

import textwrap

from amanda_core import Graph
from amanda_core.mapping import apply_table, load_table
from amanda_core.namespace import NamespaceRegistry, PythonTypeSystem, TypeSystemRegistry, load_schema

V1 = """
namespace_schema:
  namespace: amanda/hist/1
  default_type_system: python
  op_schemas:
    - type: Norm
      input_ports: [X, mean, var]
      output_ports: [Y, "mean?", "var?"]
    - type: Split
      attrs: {axis: int = 0}
      input_ports: [input]
      output_ports: ["outputs...+"]
    - type: Softmax
      attrs: {axis: int = 1}
      input_ports: [input]
      output_ports: [output]
    - type: Chunk
      input_ports: [input]
      output_ports: [outputs+]
"""

V2 = """
namespace_schema:
  namespace: amanda/hist/2
  default_type_system: python
  op_schemas:
    - type: Norm
      input_ports: [X, input_mean, input_var]
      output_ports: [Y, "running_mean?", "running_var?"]
    - type: Split
      attrs: {axis: int = 0, parts: int = 0}
      input_ports: [input]
      output_ports: ["outputs+"]
    - type: Softmax
      attrs: {axis: int = -1}
      input_ports: [input]
      output_ports: [output]
    - type: Chunk
      attrs: {parts: int = 0}
      input_ports: [input]
      output_ports: [outputs+]
"""


def registry() -> NamespaceRegistry:
    reg = NamespaceRegistry(TypeSystemRegistry([PythonTypeSystem()]))
    reg.add_schema(load_schema(V1))
    reg.add_schema(load_schema(V2))
    return reg


def table(rules: str):
    text = "table:\n  name: hist\n  src: amanda/hist/1\n  dst: amanda/hist/2\n  carry: unchanged\n  rules:\n"
    return load_table(text + textwrap.indent(textwrap.dedent(rules), "    "), filename="hist.yaml", trusted=True)


def norm_graph() -> Graph:
    g = Graph("amanda/hist/1")
    x, m, v = g.add_input_port("x"), g.add_input_port("m"), g.add_input_port("v")
    n = g.add_op("Norm", "norm", inputs=["X", "mean", "var"], outputs=["Y", "mean"])
    for src, port in ((x, "X"), (m, "mean"), (v, "var")):
        g.connect(src, n.input_ports[port])
    g.connect(n.output_ports["Y"], g.add_output_port("y"))
    g.connect(n.output_ports["mean"], g.add_output_port("running"))
    return g


def test_an_in_place_update_renames_ports_the_target_schema_does_not_have():
    g = norm_graph()
    report = apply_table(g, table("norm: {src: {ops: {$n: {type: Norm}}}, dst: {ops: {$n: {}}}}"), registry())
    assert report.matches == 1
    n = g.ops["norm"]
    assert n.input_ports.names() == ["X", "input_mean", "input_var"]
    assert n.output_ports.names() == ["Y", "running_mean"]
    assert n.input_ports["input_mean"].source is g.input_ports["m"]
    assert g.output_ports["running"].source is n.output_ports["running_mean"]
    assert g.namespace == "amanda/hist/2" and g.verify() == []


def test_ports_that_fit_the_target_schema_keep_their_names():
    g = Graph("amanda/hist/1")
    s = g.add_op("Softmax", "s", inputs=["input"], outputs=["output"])
    g.connect(g.add_input_port("x"), s.input_ports["input"])
    apply_table(g, table("sm: {src: {ops: {$s: {type: Softmax}}}, dst: {ops: {$s: {attrs: {axis: 1}}}}}"), registry())
    assert s.input_ports.names() == ["input"] and s.output_ports.names() == ["output"]
    assert s.attrs == {"axis": 1}


def test_variadic_ports_take_the_renamed_group():
    g = Graph("amanda/hist/1")
    s = g.add_op("Split", "split", inputs=["input"], outputs=["outputs..._0", "outputs..._1"])
    g.connect(g.add_input_port("x"), s.input_ports["input"])
    g.connect(s.output_ports[1], g.add_output_port("b"))
    apply_table(g, table("split: {src: {ops: {$s: {type: Split}}}, dst: {ops: {$s: {}}}}"), registry())
    assert s.output_ports.names() == ["outputs_0", "outputs_1"]
    assert g.output_ports["b"].source is s.output_ports["outputs_1"]


def test_a_new_op_named_after_the_op_it_replaces_keeps_the_name():
    g = Graph("amanda/hist/1")
    s = g.add_op("Softmax", "probs", inputs=["input"], outputs=["output"])
    g.connect(g.add_input_port("x"), s.input_ports["input"])
    g.connect(s.output_ports["output"], g.add_output_port("y"))
    t = table("""\
    rebuild:
      src: {ops: {$s: {type: Softmax}}}
      dst:
        ops:
          $again: {type: Softmax, name: "${s.name}", attrs: {axis: 1}}
        edges:
          - $s.input -> $again.input
          - $again.output -> $s.output
    """)
    apply_table(g, t, registry())
    assert list(g.ops) == ["probs"]
    new = g.ops["probs"]
    assert new is not s and new.attrs == {"axis": 1}
    assert g.output_ports["y"].source is new.output_ports["output"]
    assert new.input_ports["input"].source is g.input_ports["x"]


def test_a_name_held_by_an_op_that_stays_is_made_unique():
    g = Graph("amanda/hist/1")
    s = g.add_op("Softmax", "probs", inputs=["input"], outputs=["output"])
    g.connect(g.add_input_port("x"), s.input_ports["input"])
    t = table("""\
    extra:
      src: {ops: {$s: {type: Softmax}}}
      dst:
        ops:
          $s: {}
          $copy: {type: Softmax, name: "${s.name}"}
        edges:
          - $s.output -> $copy.input
    """)
    apply_table(g, t, registry())
    assert sorted(g.ops) == ["probs", "probs_1"]
    assert g.ops["probs_1"].input_ports["input"].source is s.output_ports["output"]


def test_a_new_ops_output_group_grows_to_the_matched_group():
    g = Graph("amanda/hist/1")
    s = g.add_op("Chunk", "chunk", inputs=["input"], outputs=["outputs_0", "outputs_1", "outputs_2"])
    g.connect(g.add_input_port("x"), s.input_ports["input"])
    for i in range(3):
        g.connect(s.output_ports[i], g.add_output_port(f"o{i}"))
    t = table("""\
    rebuild:
      src: {ops: {$s: {type: Chunk}}}
      dst:
        ops:
          $parts: {type: Chunk, name: "${s.name}", attrs: {parts: "${len(s.outputs)}"}}
        edges:
          - $s.input -> $parts.input
          - $parts.outputs* -> $s.outputs*
    """)
    report = apply_table(g, t, registry())
    assert report.matches == 1
    new = g.ops["chunk"]
    assert new is not s and new.attrs == {"parts": 3}
    assert new.output_ports.names() == ["outputs_0", "outputs_1", "outputs_2"]
    for i in range(3):
        assert g.output_ports[f"o{i}"].source is new.output_ports[f"outputs_{i}"]
    assert g.verify() == []


def test_ops_pinned_by_a_mixed_step_are_carried_by_the_next_steps():
    from amanda_core.mapping import convert

    schemas = [
        f"namespace_schema:\n  namespace: amanda/chain/{v}\n  default_type_system: python\n  op_schemas:\n"
        "    - {type: Relu, input_ports: [x], output_ports: [y]}\n"
        + ("    - {type: Gelu, input_ports: [x], output_ports: [y]}\n" if v == 3 else "")
        for v in (1, 2, 3)
    ]
    reg = NamespaceRegistry(TypeSystemRegistry([PythonTypeSystem()]))
    for text in schemas:
        reg.add_schema(load_schema(text))
    tables = [load_table(f"table:\n  name: down{v}\n  src: amanda/chain/{v}\n  dst: amanda/chain/{v - 1}\n"
                         "  carry: unchanged\n  rules: {}\n", filename=f"down{v}.yaml", trusted=True)
              for v in (3, 2)]
    g = Graph("amanda/chain/3")
    x = g.add_input_port("x")
    r = g.add_op("Relu", "relu", inputs=["x"], outputs=["y"], sources=[x])
    gelu = g.add_op("Gelu", "gelu", inputs=["x"], outputs=["y"], sources=[r.output_ports[0]])  # nothing below 3
    r2 = g.add_op("Relu", "relu2", inputs=["x"], outputs=["y"], sources=[gelu.output_ports[0]])
    g.connect(r2.output_ports[0], g.add_output_port("y"))
    result = convert(g, "amanda/chain/1", tables, reg, allow_partial=True)
    ns = {op.name: op.effective_namespace for op in result.graph}
    assert ns == {"relu": "amanda/chain/1", "gelu": "amanda/chain/3", "relu2": "amanda/chain/1"}
    assert [(t, n) for t, n, _, _ in result.unconverted] == [("Gelu", "amanda/chain/3")]
