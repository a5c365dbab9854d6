"""The engine's index of ops by type outlives a keep-only rule (it changes no type and no edge) and is rebuilt
after a rule that does change them."""

from amanda_core import Graph
from amanda_core.mapping import apply_table, engine, table_from_dict
from amanda_core.namespace import NamespaceRegistry, load_schema

SCHEMA = """
namespace_schema:
  namespace: t/idx/{v}
  op_schemas:
    - {{type: Relu, input_ports: [x], output_ports: [y]}}
    - {{type: Mul, input_ports: [a, b], output_ports: [y]}}
    - {{type: Add, input_ports: [a, b], output_ports: [y]}}
    - {{type: MulAdd, input_ports: [a, b, c], output_ports: [y]}}
    - {{type: Rare, input_ports: [x], output_ports: [y]}}
"""

TABLE = {"table": {"name": "idx", "src": "t/idx/1", "dst": "t/idx/2", "carry": "unchanged", "rules": {
    "relu": {"src": {"ops": {"$r": {"type": "Relu"}}}, "dst": {"ops": {"$r": {}}}},
    "mul_add": {"src": {"ops": {"$m": {"type": "Mul"}, "$a": {"type": "Add"}}, "edges": ["$m.y -> $a.a"]},
                "dst": {"ops": {"$a": {"type": "MulAdd"}}, "edges": ["$m.a -> $a.a", "$m.b -> $a.c"]}},
    "never": {"src": {"ops": {"$x": {"type": "Rare"}}}, "dst": {"remove": True}},
}}}


def test_index_by_type_kept_through_a_keep_only_rule(monkeypatch):
    reg = NamespaceRegistry()
    for v in (1, 2):
        reg.add_schema(load_schema(SCHEMA.format(v=v)))
    g = Graph("t/idx/1")
    x = g.add_input_port("x")
    r = g.add_op("Relu", "r", inputs=["x"], outputs=["y"])
    m = g.add_op("Mul", "m", inputs=["a", "b"], outputs=["y"])
    a = g.add_op("Add", "a", inputs=["a", "b"], outputs=["y"])
    g.connect(x, r.input_ports["x"])
    g.connect(r.output_ports["y"], m.input_ports["a"])
    g.connect(x, m.input_ports["b"])
    g.connect(m.output_ports["y"], a.input_ports["a"])
    g.connect(x, a.input_ports["b"])
    g.connect(a.output_ports["y"], g.add_output_port("y"))
    built = []
    real = engine.type_index
    monkeypatch.setattr(engine, "type_index", lambda graph: built.append(graph.version) or real(graph))
    v0 = g.version
    report = apply_table(g, table_from_dict(TABLE), reg)
    assert {rr.rule: rr.matches for rr in report.rules} == {"relu": 1, "mul_add": 1, "never": 0}
    assert g.version > v0 and g.ops["r"].namespace is None and g.namespace == "t/idx/2"
    assert g.ops["a"].type == "MulAdd" and "m" not in g.ops
    # built for the first rule, reused by the second after the keep-only one, built again after the rewrite
    assert len(built) == 2
