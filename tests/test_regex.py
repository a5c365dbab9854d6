"""Graph regular expressions (amanda_core.regex): the language of the Aidge seed, one operator at a time, then the
search (preference, non-overlapping selection, bounds on large graphs), schemas and namespaces, mapping tables and
the ``amanda match`` command."""

import json
import time
import warnings

import numpy as np
import pytest

from amanda_core import FormatError, Graph, NamespaceRegistry, NamespaceSchema, OpSchema, hookimpl
from amanda_core.cli import match as regex_cli
from amanda_core.ir import bulk_build
from amanda_core.mapping.engine import apply_table
from amanda_core.mapping.match import MatchContext
from amanda_core.mapping.table import table_from_dict
from amanda_core.mapping.views import OpView
from amanda_core.namespace import StaticNamespaces
from amanda_core.namespace.schema import AttrSchema
from amanda_core.regex import (
    Query,
    QueryError,
    QueryLimitWarning,
    SearchLimits,
    compile_query,
    match,
    query_matches,
    register_function,
    unregister_function,
)
from amanda_core.serialization import save_graph

NS = "amanda/example/1"


def build(*ops, ns=NS):
    """ops: (name, type, [producer names], attrs?); an op without producers reads the graph input."""
    g = Graph(namespace=ns)
    x = g.add_input_port("x")
    for entry in ops:
        name, op_type, srcs, *rest = entry
        o = g.add_op(op_type, name, inputs=max(len(srcs), 1), outputs=1, attrs=rest[0] if rest else None)
        if not srcs:
            g.connect(x, o.input_ports[0])
        for i, s in enumerate(srcs):
            g.connect(g.ops[s].output_ports[0], o.input_ports[i])
    return g


def chain(*types, ns=NS):
    """t0 -> t1 -> ... named <type lowercased><index>."""
    ops, prev = [], []
    for i, t in enumerate(types):
        name = f"{t.lower()}{i}"
        ops.append((name, t, prev))
        prev = [name]
    return build(*ops, ns=ns)


def found(g, q, **kw):
    """Each match as {key: op name}."""
    return [{k: op.name for k, op in m.ops.items()} for m in match(g, q, **kw)]


def names(g, q, **kw):
    """Each match as the list of its op names in key order."""
    return [[op.name for op in m.ops.values()] for m in match(g, q, **kw)]


# --------------------------------------------------------------------------- sequence and quantifiers


def test_sequence_follows_data_edges_forwards():
    g = chain("Conv", "Relu", "Add")
    assert found(g, "Conv -> Relu") == [{"_0": "conv0", "_1": "relu1"}]
    assert found(g, "Conv -> Relu -> Add") == [{"_0": "conv0", "_1": "relu1", "_2": "add2"}]
    assert found(g, "Relu -> Conv") == []  # edges have a direction
    assert found(g, "Conv -> Add") == []  # no edge skips an op
    assert names(g, ". -> Add") == [["relu1", "add2"]]
    assert names(g, "Conv -> .") == [["conv0", "relu1"]]


def test_control_edges_are_not_data_edges():
    g = chain("Conv", "Relu")
    s = g.add_op("Sigmoid", "sig", inputs=1, outputs=1)
    g.connect(g.input_ports["x"], s.input_ports[0])
    g.connect_control(g.ops["relu1"], s)
    assert names(g, "Relu -> Sigmoid") == []
    g.connect(g.ops["relu1"].output_ports[0], s.input_ports[0], replace=True)
    assert names(g, "Relu -> Sigmoid") == [["relu1", "sig"]]


def test_edge_from_any_output_to_any_input():
    g = Graph(namespace=NS)
    a = g.add_op("Split", "split", inputs=0, outputs=["first", "second"])
    b = g.add_op("Concat", "cat", inputs=["x", "y", "z"], outputs=1)
    g.connect(a.output_ports["second"], b.input_ports["z"])
    assert names(g, "Split -> Concat") == [["split", "cat"]]


def test_plus_takes_the_whole_run():
    g = chain("Conv", "Transpose", "Transpose", "Transpose", "Relu")
    assert names(g, "Transpose+") == [["transpose1", "transpose2", "transpose3"]]
    assert names(g, "Conv -> Transpose+ -> Relu") == [["conv0", "transpose1", "transpose2", "transpose3", "relu4"]]
    assert names(g, "Conv -> Relu+") == []  # + needs one at least
    assert names(chain("Conv", "Relu"), "Conv -> Transpose+ -> Relu") == []


def test_star_allows_none():
    assert names(chain("Conv", "Add"), "Conv -> Relu* -> Add") == [["conv0", "add1"]]
    assert names(chain("Conv", "Relu", "Relu", "Add"), "Conv -> Relu* -> Add") == [
        ["conv0", "relu1", "relu2", "add3"]]
    assert names(chain("Conv", "Sigmoid", "Add"), "Conv -> Relu* -> Add") == []


def test_optional():
    q = "Conv -> BatchNormalization? -> Relu"
    assert names(chain("Conv", "BatchNormalization", "Relu"), q) == [["conv0", "batchnormalization1", "relu2"]]
    assert names(chain("Conv", "Relu"), q) == [["conv0", "relu1"]]
    assert names(chain("Conv", "BatchNormalization", "BatchNormalization", "Relu"), q) == []


def test_quantified_groups():
    g = chain("MatMul", "Add", "MatMul", "Add", "Relu")
    assert names(g, "(MatMul -> Add)+ -> Relu") == [["matmul0", "add1", "matmul2", "add3", "relu4"]]
    assert names(g, "(MatMul -> Add)* -> Relu") == [["matmul0", "add1", "matmul2", "add3", "relu4"]]
    assert names(g, "MatMul -> (Add -> MatMul)? -> Add", non_overlapping=True) == [
        ["matmul0", "add1", "matmul2", "add3"]]
    assert names(chain("MatMul", "Add", "MatMul", "Relu"), "(MatMul -> Add)+ -> Relu") == []
    assert names(chain("Relu"), "(MatMul -> Add)* -> Relu") == [["relu0"]]


def test_alternatives():
    g = build(("c", "Conv", []), ("r1", "Relu", ["c"]), ("m", "Gemm", []), ("r2", "Relu", ["m"]),
              ("s", "Sigmoid", []), ("r3", "Relu", ["s"]))
    assert names(g, "(Conv | Gemm) -> Relu") == [["c", "r1"], ["m", "r2"]]
    assert names(g, "Conv | Gemm") == [["c"], ["m"]]  # at the top of a branch, without parentheses
    assert names(g, "(Conv -> Relu | Sigmoid)") == [["c", "r1"], ["s"]]
    # -> binds tighter than |
    assert names(g, "Conv -> Relu | Gemm") == [["c", "r1"], ["m"]]


def test_seed_node_regex_examples():
    # "Conv or BatchNorm or FC", "convolutions with 3x3 kernels", a lambda such as getType, True/False
    g = build(("c3", "Conv", [], {"kernel_shape": [3, 3], "bias": True}), ("b", "BatchNorm", ["c3"]),
              ("fc", "FC", ["b"]), ("c1", "Conv", ["fc"], {"kernel_shape": [1, 1], "bias": False}),
              ("s", "Softmax", ["c1"]))
    assert names(g, "(Conv | BatchNorm | FC)") == [["c3"], ["b"], ["fc"], ["c1"]]
    assert names(g, "Conv[kernel_shape == [3, 3]]") == [["c3"]]
    assert names(g, ".[getType($) == 'FC' || bias == False]", functions={"getType": lambda op: op.type}) == [
        ["fc"], ["c1"]]
    assert names(g, "(Conv | BatchNorm | FC)+ -> Softmax", non_overlapping=True) == [["c3", "b", "fc", "c1", "s"]]


def test_longest_way_to_take_an_op_is_preferred():
    g = chain("Conv", "Relu")
    for nov in (True, False):
        assert names(g, "(Conv | Conv -> Relu)", non_overlapping=nov) == [["conv0", "relu1"]]
        assert names(chain("Conv", "Add"), "(Conv | Conv -> Relu)", non_overlapping=nov) == [["conv0"]]
        # two alternatives taking the same op give one match
        assert names(g, "(Relu | .)", non_overlapping=nov) == [["conv0"], ["relu1"]]
    # a quantifier goes on rather than stop; different ops at a fan-out are all listed
    g = chain("MatMul", "Add", "MatMul", "Add", "Relu")
    assert names(g, "MatMul -> (Add -> MatMul)? -> Add") == [["matmul0", "add1", "matmul2", "add3"],
                                                              ["matmul2", "add3"]]


def test_fan_out_all_matches_and_one_non_overlapping():
    g = build(("c", "Conv", []), ("r1", "Relu", ["c"]), ("r2", "Relu", ["c"]), ("r3", "Relu", ["c"]))
    assert names(g, "Conv -> Relu") == [["c", "r1"], ["c", "r2"], ["c", "r3"]]
    assert names(g, "Conv -> Relu", non_overlapping=True) == [["c", "r1"]]


def test_a_tail_of_a_listed_match_is_not_listed_again():
    g = chain("Relu", "Relu", "Relu", "Relu")
    assert names(g, "Relu+") == [["relu0", "relu1", "relu2", "relu3"]]
    assert names(g, "Relu -> Relu") == [["relu0", "relu1"], ["relu1", "relu2"], ["relu2", "relu3"]]
    assert names(g, "Relu -> Relu", non_overlapping=True) == [["relu0", "relu1"], ["relu2", "relu3"]]
    # relu1 alone as the last Relu is another way to take relu1, whose preferred way is inside the first match
    assert names(g, "Relu* -> Relu") == [["relu0", "relu1", "relu2", "relu3"]]


# --------------------------------------------------------------------------- anchors and branches


def test_anchor_branches_the_seed_example():
    g = build(("c1", "Conv", []), ("r1", "Relu", ["c1"]), ("a1", "Add", ["c1"]),
              ("c2", "Conv", ["a1"]), ("r2", "Relu", ["c2"]))
    assert found(g, "Conv#1 -> Relu; Conv#1 -> Add") == [{"#1": "c1", "_0": "r1", "_1": "a1"}]
    assert found(g, "Conv#1 -> Relu; #1 -> Add") == [{"#1": "c1", "_0": "r1", "_1": "a1"}]
    assert found(g, "Conv#1 -> Relu") == [{"#1": "c1", "_0": "r1"}, {"#1": "c2", "_0": "r2"}]


def test_named_anchor_keys_and_single_branch():
    g = chain("Transpose", "Transpose", "Transpose")
    assert found(g, "Transpose#first -> Transpose#second") == [
        {"$first": "transpose0", "$second": "transpose1"}, {"$first": "transpose1", "$second": "transpose2"}]
    assert found(g, "Transpose#first -> Transpose#second", non_overlapping=True) == [
        {"$first": "transpose0", "$second": "transpose1"}]
    assert found(g, "Transpose#a[@name == 'transpose1']") == [{"$a": "transpose1"}]


def test_branch_joined_in_its_middle_matches_backwards():
    # a residual block: the Conv feeds the Add directly and through the Relu
    g = build(("c", "Conv", []), ("r", "Relu", ["c"]), ("a", "Add", ["r", "c"]), ("o", "Relu", []),
              ("b", "Add", ["o", "o"]))
    assert found(g, "Conv#c -> Relu -> Add#a; #c -> #a") == [{"$c": "c", "_0": "r", "$a": "a"}]
    assert found(g, "Add#sum; Conv -> #sum; Relu -> #sum") == [{"$sum": "a", "_0": "c", "_1": "r"}]
    # the part before the anchor goes through producers
    assert found(g, "Relu#r -> Add; Conv -> #r") == [{"$r": "r", "_0": "a", "_1": "c"}]


def test_ops_are_shared_only_through_anchors():
    g = build(("c", "Conv", []), ("r1", "Relu", ["c"]))
    assert found(g, "Conv#1 -> Relu; #1 -> Relu") == []
    g2 = build(("c", "Conv", []), ("r1", "Relu", ["c"]), ("r2", "Relu", ["c"]))
    assert found(g2, "Conv#1 -> Relu; #1 -> Relu") == [{"#1": "c", "_0": "r1", "_1": "r2"},
                                                        {"#1": "c", "_0": "r2", "_1": "r1"}]


def test_search_backtracks_into_earlier_branches():
    # the first branch prefers b1 (the first consumer), but only b2 is also fed through the Cast
    g = build(("a", "Split", []), ("b1", "Add", ["a"]), ("k", "Cast", ["a"]), ("b2", "Add", ["a", "k"]))
    assert found(g, "Split#s -> Add#x; #s -> Cast -> #x") == [{"$s": "a", "$x": "b2", "_0": "k"}]


def test_quantifier_gives_back_ops_when_a_branch_needs_it():
    g = build(("r0", "Relu", []), ("r1", "Relu", ["r0"]), ("r2", "Relu", ["r1"]), ("r3", "Relu", ["r2"]),
              ("s", "Sigmoid", ["r2"]))
    assert found(g, "Relu+ -> Relu#end; #end -> Sigmoid", non_overlapping=True) == [
        {"_0": "r0", "_1": "r1", "$end": "r2", "_2": "s"}]


def test_anchor_predicates_add_up_over_occurrences():
    g = build(("c1", "Conv", [], {"group": 1}), ("r1", "Relu", ["c1"]), ("a1", "Add", ["c1"]),
              ("c2", "Conv", [], {"group": 2}), ("r2", "Relu", ["c2"]), ("a2", "Add", ["c2"]))
    assert found(g, "Conv#1 -> Relu; #1[group == 2] -> Add") == [{"#1": "c2", "_0": "r2", "_1": "a2"}]
    assert found(g, "Conv#1[group == 1] -> Relu; .#1 -> Add") == [{"#1": "c1", "_0": "r1", "_1": "a1"}]


@pytest.mark.parametrize("text, message", [
    ("Conv#1 -> Relu; Relu#1 -> Add", "anchor #1 is a 'Conv' at column 1 but a 'Relu' here"),
    ("(Conv#1 -> Relu)+", "under a quantifier"),
    ("Conv#a? -> Relu", "under a quantifier"),
    ("(Conv#1 | Gemm) -> Relu", "one arm of an alternative"),
    ("Relu#1 -> Relu -> #1", "appears twice in this branch"),
    ("Conv -> Relu; Add", "shares no anchor with the branches before it"),
    ("Relu*", "can match no op at all"),
    ("(A? -> B*)", "can match no op at all"),
])
def test_anchor_and_branch_rules(text, message):
    with pytest.raises(QueryError) as info:
        compile_query(text)
    assert message in str(info.value)


def test_disconnected_branch_error_points_at_the_branch():
    with pytest.raises(QueryError) as info:
        compile_query("Conv#1 -> Relu; #1 -> Add; Sigmoid")
    assert (info.value.line, info.value.column) == (1, 28)


# --------------------------------------------------------------------------- node predicates

ATTR_GRAPH = (
    ("c1", "Conv", [], {"group": 1, "kernel_shape": (3, 3), "pads": [0, 0, 0, 0], "mode": "same",
                        "w": np.eye(2, dtype=np.float32), "bias": True}),
    ("c2", "Conv", ["c1"], {"group": 2, "kernel_shape": [1, 1], "alpha": 0.5, "mode": "valid"}),
    ("r", "Relu", ["c2"]),
)


@pytest.mark.parametrize("query, expected", [
    ("Conv[group == 1]", ["c1"]),
    ("Conv[group != 1]", ["c2"]),
    ("Conv[kernel_shape == [3, 3]]", ["c1"]),  # a tuple attribute equals a list
    ("Conv[group == 1 && kernel_shape == [3, 3]]", ["c1"]),
    ("Conv[group == 1 && kernel_shape == [1, 1]]", []),
    ("Conv[group == 2 || mode == 'same']", ["c1", "c2"]),
    ("Conv[!(group == 1)]", ["c2"]),
    ("Conv[!bias]", ["c2"]),
    ("Conv[(group == 1 || group == 2) && !(mode == \"valid\")]", ["c1"]),
    ("Conv[alpha == 0.5]", ["c2"]),
    ("Conv[group == 1.0]", ["c1"]),  # numbers by value
    ("Conv[bias == true]", ["c1"]),
    ("Conv[bias == 1]", []),  # true is not 1
    ("Conv[bias == True]", ["c1"]),
    ("Conv[alpha == null]", ["c1"]),  # a missing attribute is null
    ("Conv[alpha != None]", ["c2"]),
    ("Conv[alpha]", ["c2"]),
    ("Conv[group > 1]", ["c2"]),
    ("Conv[group >= 1]", ["c1", "c2"]),
    ("Conv[group < 2]", ["c1"]),
    ("Conv[group <= 0]", []),
    ("Conv[mode < 'v']", ["c1"]),
    ("Conv[alpha < 1]", ["c2"]),  # null is not ordered
    ("Conv[w == [[1, 0], [0, 1]]]", ["c1"]),  # tensors by their elements
    ("Conv[pads == [0, 0, 0, 0]]", ["c1"]),
    ("Conv[kernel_shape == [-1, 3]]", []),
    ("Conv[@type == 'Conv' && @name == 'c2']", ["c2"]),
    ("Conv[@namespace == 'amanda/example/1']", ["c1", "c2"]),
    (".[@type != 'Conv']", ["r"]),
    ("Conv[has($, 'alpha')]", ["c2"]),
    ("Conv[attr($, 'group') == 2]", ["c2"]),
    ("Conv[len(pads) == 4]", ["c1"]),
    ("Conv[len(mode) == 4]", ["c1"]),
    ("Conv[len(nothing) == 0]", ["c1", "c2"]),
    ("Conv[consumers($) == 1 && startswith(@name, 'c')]", ["c1", "c2"]),
    ("Conv[startswith(mode, 'va')]", ["c2"]),
    ("Conv[$ == $]", ["c1", "c2"]),
])
def test_predicate_operators(query, expected):
    g = build(*ATTR_GRAPH)
    assert [n for (n,) in names(g, query)] == expected


def test_missing_attribute_takes_the_schema_default():
    g = build(*ATTR_GRAPH)
    schema = NamespaceSchema(NS, [OpSchema("Conv", attrs=(AttrSchema("dilations", "ints", default=[1, 1]),
                                                          AttrSchema("alpha", "float", default=0.25))),
                                  OpSchema("Relu")])
    assert names(g, "Conv[dilations == [1, 1]]") == []
    assert names(g, "Conv[dilations == [1, 1]]", schema=schema) == [["c1"], ["c2"]]
    assert names(g, "Conv[alpha == 0.25]", schema=schema) == [["c1"]]
    assert names(g, "Conv[attr($, 'alpha') == 0.25]", schema=schema) == [["c1"]]
    assert names(g, "Conv[has($, 'alpha')]", schema=schema) == [["c2"]]
    ctx = MatchContext(schema_of=lambda op: schema.get(op.type))
    assert names(g, "Conv[dilations == [1, 1]]", ctx=ctx) == [["c1"], ["c2"]]


def test_quoted_and_namespaced_types():
    g = build(("a", "aten::add.Tensor", []), ("r", "aten::relu", ["a"]), ("m", "com.microsoft::Fused", ["r"]))
    assert names(g, "'aten::add.Tensor' -> aten::relu -> \"com.microsoft::Fused\"") == [["a", "r", "m"]]
    assert names(g, "aten::relu") == [["r"]]
    assert names(g, "aten::add") == []


# --------------------------------------------------------------------------- functions


def test_registered_function_gets_an_op_view():
    seen = []

    def is_identity(op):
        seen.append(op)
        perm = list(op.attr("perm") or [])
        return perm == list(range(len(perm)))

    g = build(("t1", "Transpose", [], {"perm": [0, 1]}), ("t2", "Transpose", ["t1"], {"perm": [1, 0]}))
    register_function("is_identity", is_identity)
    try:
        assert names(g, "Transpose[!is_identity($)]") == [["t2"]]
        assert names(g, "Transpose[is_identity($)] -> Transpose") == [["t1", "t2"]]
    finally:
        unregister_function("is_identity")
    assert seen and all(isinstance(v, OpView) for v in seen)
    with pytest.raises(QueryError, match="unknown function 'is_identity'"):
        compile_query("Transpose[is_identity($)]")


def test_function_arguments_and_results():
    g = build(*ATTR_GRAPH)
    calls = []

    def fused(op, n, label=None):
        calls.append((op.name, n, label))
        return op.attr("group") >= n

    assert names(g, "Conv[fused($, 2) || @name != 'c1']", functions={"fused": fused}) == [["c2"]]
    assert ("c1", 2, None) in calls
    # attributes and literals come as values; a result may be compared
    got = names(g, "Conv[size(kernel_shape, 'x') == 9]",
                functions={"size": lambda shape, tag: shape[0] * shape[1] if tag == "x" else 0})
    assert got == [["c1"]]
    # a Query compiled with functions keeps them; functions given to match() are added
    q = compile_query("Conv[f($)]", functions={"f": lambda op: op.name == "c1"})
    assert names(g, q) == [["c1"]]
    assert names(g, q, functions={"f": lambda op: op.name == "c2"}) == [["c2"]]


def test_function_errors():
    g = build(*ATTR_GRAPH)
    with pytest.raises(QueryError) as info:
        match(g, "Conv[boom($)]", functions={"boom": lambda op: 1 / 0})
    err = str(info.value)
    assert "function boom() failed on op 'c1' (Conv): ZeroDivisionError" in err
    assert (info.value.line, info.value.column) == (1, 6)
    with pytest.raises(QueryError, match=r"unknown function 'fusd' \(did you mean fused\?\)"):
        compile_query("Conv[fusd($)]", functions={"fused": lambda op: True})
    with pytest.raises(QueryError, match=r"has\(\) takes 2 argument"):
        compile_query("Conv[has($)]")
    with pytest.raises(ValueError, match="built-in"):
        register_function("attr", lambda op: True)
    with pytest.raises(ValueError, match="identifier"):
        register_function("not a name", lambda op: True)
    with pytest.raises(TypeError, match="not callable"):
        register_function("f", 3)
    with pytest.raises(QueryError, match="built-in"):
        match(g, "Conv", functions={"len": len})
    with pytest.raises(QueryError, match=r"len\(\) failed on op 'c2' \(Conv\): TypeError: len\(\) of float"):
        match(g, "Conv[len(alpha) == 0]")


# --------------------------------------------------------------------------- non-overlapping selection


def test_non_overlapping_prefers_bigger_matches():
    g = chain("A", "B", "C", "D")
    q = "(A -> B) | (B -> C -> D)"
    assert names(g, q) == [["a0", "b1"], ["b1", "c2", "d3"]]
    assert names(g, q, non_overlapping=True) == [["b1", "c2", "d3"]]


def test_non_overlapping_ties_go_to_the_topologically_first():
    g = chain("Transpose", "Transpose", "Transpose")
    assert names(g, "Transpose -> Transpose", non_overlapping=True) == [["transpose0", "transpose1"]]


def test_non_overlapping_retries_refused_start_ops_around_taken_ops():
    # a1 -> b1; a2 -> b1 and a2 -> b2: a2 prefers b1 (its first consumer), which a1's match took
    g = build(("a1", "A", []), ("a2", "A", []), ("b1", "B", ["a1", "a2"]), ("b2", "B", ["a2"]))
    assert names(g, "A -> B") == [["a1", "b1"], ["a2", "b1"], ["a2", "b2"]]
    assert names(g, "A -> B", non_overlapping=True) == [["a1", "b1"], ["a2", "b2"]]


def test_non_overlapping_multi_branch_and_result_order():
    g = build(("c1", "Conv", []), ("r1", "Relu", ["c1"]), ("a1", "Add", ["c1"]),
              ("c2", "Conv", ["a1"]), ("r2", "Relu", ["c2"]), ("a2", "Add", ["c2", "r1"]))
    got = found(g, "Conv#1 -> Relu; #1 -> Add", non_overlapping=True)
    assert got == [{"#1": "c1", "_0": "r1", "_1": "a1"}, {"#1": "c2", "_0": "r2", "_1": "a2"}]
    ops = [set(m.all_ops) for m in match(g, "Conv#1 -> Relu; #1 -> Add", non_overlapping=True)]
    assert not ops[0] & ops[1]


# --------------------------------------------------------------------------- large graphs


def big_chain(n, op_type="Relu"):
    g = Graph(namespace=NS)
    with bulk_build():
        prev = g.add_input_port("x")
        for i in range(n):
            o = g.add_op(op_type, f"n{i}", inputs=1, outputs=1)
            g.connect(prev, o.input_ports[0])
            prev = o.output_ports[0]
    return g


def timed(fn):
    """``fn()`` and the CPU time it took: this process's own time, which other work on a shared machine does not
    stretch as it stretches wall time (the bounds below are for an algorithm that would blow up, not a benchmark)."""
    start = time.process_time()
    result = fn()
    return result, time.process_time() - start


def test_20k_chain_is_fast():
    g = big_chain(20_000)
    ms, dt = timed(lambda: match(g, "Relu+", non_overlapping=True))
    assert len(ms) == 1 and len(ms[0].ops) == 20_000 and dt < 5
    ms, dt = timed(lambda: match(g, "Relu+"))
    assert len(ms) == 1 and dt < 5
    ms, dt = timed(lambda: match(g, "Relu#a -> Relu#b", non_overlapping=True))
    assert len(ms) == 10_000 and ms[0].ops["$a"].name == "n0" and dt < 5
    ms, dt = timed(lambda: match(g, "Relu -> Relu"))
    assert len(ms) == 19_999 and dt < 5
    ms, dt = timed(lambda: query_matches(g, "Relu#a -> Relu; #a -> Relu", MatchContext()))
    assert ms == [] and dt < 5


def test_wide_fan_out_is_fast_and_bounded():
    n = 20_000
    g = Graph(namespace=NS)
    with bulk_build():
        x = g.add_input_port("x")
        c = g.add_op("Conv", "c", inputs=1, outputs=1)
        g.connect(x, c.input_ports[0])
        for i in range(n):
            r = g.add_op("Relu", f"r{i}", inputs=1, outputs=1)
            g.connect(c.output_ports[0], r.input_ports[0])
            a = g.add_op("Add", f"a{i}", inputs=1, outputs=1)
            g.connect(r.output_ports[0], a.input_ports[0])
    ms, dt = timed(lambda: match(g, "Conv -> Relu -> Add", non_overlapping=True))
    assert names_of(ms) == [["c", "r0", "a0"]] and dt < 5
    ms, dt = timed(lambda: match(g, ".+", non_overlapping=True))
    assert len(ms) == n and dt < 5  # c -> r0 -> a0, then each other Relu -> Add
    ms, dt = timed(lambda: match(g, "Relu -> Add"))
    assert len(ms) == n and dt < 5
    with pytest.warns(QueryLimitWarning, match="max_matches_per_start=100"):
        ms, dt = timed(lambda: match(g, "Conv -> Relu -> Add", limits=SearchLimits(max_matches_per_start=100)))
    assert len(ms) == 100 and dt < 5
    with pytest.warns(QueryLimitWarning, match="stopped after max_steps=500"):
        ms, dt = timed(lambda: match(g, "Conv#c -> Relu; #c -> Relu -> Add", limits=SearchLimits(max_steps=500)))
    assert 0 < len(ms) < 500 and dt < 5


def names_of(ms):
    return [[op.name for op in m.ops.values()] for m in ms]


def test_diamonds_do_not_blow_up():
    # 2^2000 paths through 2000 diamonds
    g = Graph(namespace=NS)
    with bulk_build():
        prev = g.add_input_port("x")
        for i in range(2000):
            s = g.add_op("Split", f"s{i}", inputs=1, outputs=1)
            g.connect(prev, s.input_ports[0])
            b = g.add_op("Relu", f"b{i}", inputs=1, outputs=1)
            c = g.add_op("Sigmoid", f"c{i}", inputs=1, outputs=1)
            g.connect(s.output_ports[0], b.input_ports[0])
            g.connect(s.output_ports[0], c.input_ports[0])
            d = g.add_op("Add", f"d{i}", inputs=2, outputs=1)
            g.connect(b.output_ports[0], d.input_ports[0])
            g.connect(c.output_ports[0], d.input_ports[1])
            prev = d.output_ports[0]
    ms, dt = timed(lambda: match(g, "(Split -> (Relu | Sigmoid) -> Add)+", non_overlapping=True))
    assert len(ms) == 1 and len(ms[0].ops) == 6000 and dt < 5
    with pytest.warns(QueryLimitWarning):
        ms, dt = timed(lambda: match(g, ".+", limits=SearchLimits(max_steps=20_000, max_total_ops=100_000)))
    assert ms and sum(len(m.ops) for m in ms) <= 100_000 + 6000 and dt < 10
    ms, dt = timed(lambda: match(g, "Split#s -> Relu -> Add#d; #s -> Sigmoid -> #d", non_overlapping=True))
    assert len(ms) == 2000 and dt < 5


def test_graph_with_a_cycle():
    g = Graph(namespace=NS)
    a = g.add_op("A", "a", inputs=2, outputs=1)
    b = g.add_op("B", "b", inputs=1, outputs=1)
    c = g.add_op("C", "c", inputs=1, outputs=1)
    g.connect(a.output_ports[0], b.input_ports[0])
    g.connect(b.output_ports[0], a.input_ports[0])
    g.connect(b.output_ports[0], c.input_ports[0])
    assert names(g, "(A -> B)+") == [["a", "b"]]  # a path never comes back to an op
    assert names(g, "A -> B -> C") == [["a", "b", "c"]]
    assert found(g, "B#x -> A; #x -> C") == [{"$x": "b", "_0": "a", "_1": "c"}]
    assert names(g, ". -> . -> .") == [["a", "b", "c"]]


def test_only_the_graphs_own_ops():
    g = chain("Conv", "Relu", "Relu")
    g.make_subgraph([g.ops["relu1"], g.ops["relu2"]], "block", "Block")
    assert names(g, "Relu") == []
    assert names(g, "Conv -> Block") == [["conv0", "block"]]


# --------------------------------------------------------------------------- syntax errors


@pytest.mark.parametrize("text, line, column, expected", [
    ("Conv -> (Relu ; Add", 1, 15, "')'"),
    ("Conv ->", 1, 8, "an op type"),
    ("Conv -> -> Relu", 1, 9, "an op type"),
    ("Conv[group = 1]", 1, 12, None),
    ("Conv[group == 1", 1, 16, "']'"),
    ("Conv[group == ]", 1, 15, "a value"),
    ("Conv[]", 1, 6, "a condition"),
    ("Conv[a == 1 == 2]", 1, 13, None),
    ("Conv[a and b]", 1, 8, "']'"),
    ("Conv#", 1, 6, "an anchor id"),
    ("Conv#1.5", 1, 6, "an anchor id"),
    ("+Conv", 1, 1, "an op type"),
    ("Conv++", 1, 6, None),
    ("()", 1, 2, "an op type"),
    ("Conv)", 1, 5, "'->'"),
    ("aten::add.Tensor", 1, 10, "a quoted name"),
    ("'aten::add", 1, 1, "a closing '"),
    ("Conv[f($, ]", 1, 11, "a value"),
    ("Conv[@kind == 1]", 1, 7, "@type"),
    ("Conv[x == [1, 2]", 1, 17, "']'"),
    ("Conv ~ Relu", 1, 6, None),
    ("", 1, 1, "an op type"),
    ("Conv ->\n  (Relu ; Add", 2, 9, "')'"),
])
def test_syntax_errors_say_where_and_what(text, line, column, expected):
    with pytest.raises(QueryError) as info:
        compile_query(text)
    err = info.value
    assert isinstance(err, FormatError)
    assert (err.line, err.column) == (line, column), str(err)
    assert str(err).startswith(f"query:{line}:{column}: ")
    if expected is not None:
        assert err.expected is not None and expected in err.expected
        assert f"expected {err.expected}" in str(err) or "quote" in str(err) or "closing" in str(err)


def test_syntax_error_message_shows_the_place():
    with pytest.raises(QueryError) as info:
        compile_query("Conv -> (Relu ; Add")
    assert str(info.value) == ("query:1:15: expected ')', got ';' (to close the '(' at column 9)\n"
                               "  Conv -> (Relu ; Add\n"
                               "                ^")


def test_compile_query_returns_a_reusable_query():
    q = compile_query("Conv#c[group == 1] -> Relu+; #c -> 'Add'")
    assert isinstance(q, Query)
    assert q.op_types == ("Conv", "Relu", "Add")
    assert set(q.anchors) == {"$c"}
    g = build(("c", "Conv", [], {"group": 1}), ("r", "Relu", ["c"]), ("a", "Add", ["c"]))
    assert found(g, q) == found(g, q.text) == [{"$c": "c", "_0": "r", "_1": "a"}]


# --------------------------------------------------------------------------- schemas and namespaces


def example_schema():
    return NamespaceSchema(NS, [OpSchema("Transpose", attrs=(AttrSchema("perm", "ints", default=None),)),
                                OpSchema("Relu"), OpSchema("Identity"), OpSchema("Sigmoid")])


def test_unknown_op_type_with_a_schema_is_an_error():
    g = chain("Transpose", "Relu")
    with pytest.raises(QueryError) as info:
        match(g, "Relu#r; Transpos -> #r", schema=example_schema())
    assert str(info.value).startswith("query:1:9: op type 'Transpos' is not in namespace amanda/example/1")
    with pytest.raises(QueryError) as info:
        match(g, "Relu -> Transpos", schema=example_schema())
    msg = str(info.value)
    assert "op type 'Transpos' is not in namespace amanda/example/1 (did you mean 'Transpose'?)" in msg
    assert (info.value.line, info.value.column) == (1, 9)
    with pytest.raises(QueryError, match="'relu'.*did you mean 'Relu'"):
        match(g, "relu", schema=example_schema())
    # without a schema, op types are strings: nothing matches, no error
    assert match(g, "Relu -> Transpos") == []
    assert names(g, "Transpose -> Relu", schema=example_schema()) == [["transpose0", "relu1"]]


def test_namespace_filtering_through_a_match_context():
    g = chain("Relu", "Relu", "Relu", "Relu")
    g.ops["relu2"].namespace = "amanda/other/1"
    ctx = MatchContext(in_namespace=lambda op: op.effective_namespace == NS)
    assert names(g, "Relu+", ctx=ctx) == [["relu0", "relu1"], ["relu3"]]
    assert names(g, ". -> .", ctx=ctx) == [["relu0", "relu1"]]
    ms = query_matches(g, "Relu -> Relu", ctx)
    assert names_of(ms) == [["relu0", "relu1"]]
    assert names_of(query_matches(g, "Relu -> Relu", MatchContext())) == [["relu0", "relu1"], ["relu2", "relu3"]]


def test_query_matches_for_a_rule():
    table = table_from_dict({"table": {"name": "t", "src": NS, "dst": NS, "rules": {
        "fold": {"src": {"query": "Transpose#first -> Transpose#second"}, "dst": {"remove": True}}}}},
        trusted=True)
    rule = table.rules["fold"]
    g = chain("Transpose", "Transpose", "Transpose", "Transpose", "Transpose")
    ms = query_matches(g, rule.src.query, MatchContext(), rule=rule)
    assert [m.rule for m in ms] == [rule, rule]
    assert [(m.ops["$first"].name, m.ops["$second"].name) for m in ms] == [
        ("transpose0", "transpose1"), ("transpose2", "transpose3")]
    env = MatchContext().env(g, ms[0], rule.src)
    assert env["first"].name == "transpose0" and env["second"].name == "transpose1"
    with pytest.raises(QueryError) as info:
        query_matches(g, "Transpose -> (", MatchContext(), rule=rule)
    assert str(info.value).startswith("rule 'fold': query:1:15: expected")
    with pytest.raises(QueryError, match="^rule 'fold': query:1:1: op type 'Transpos'"):
        query_matches(g, "Transpos", MatchContext(), rule=rule, schema=example_schema())


# --------------------------------------------------------------------------- mapping tables


def transposes_graph():
    g = Graph(namespace=NS)
    x = g.add_input_port("x")
    y = g.add_output_port("y")
    prev = x
    for i, t in enumerate(["Relu", "Transpose", "Transpose", "Transpose", "Transpose", "Transpose", "Sigmoid"]):
        o = g.add_op(t, f"n{i}", inputs=1, outputs=1, attrs={"perm": [1, 0]} if t == "Transpose" else None)
        g.connect(prev, o.input_ports[0])
        prev = o.output_ports[0]
    g.connect(prev, y)
    return g


def test_mapping_rule_with_a_query_removes_transpose_pairs():
    table = table_from_dict({"table": {"name": "fold-transposes", "src": NS, "dst": NS, "rules": {
        "cancel": {"src": {"query": "Transpose#first -> Transpose#second"}, "dst": {"remove": True}}}}},
        trusted=True)
    g = transposes_graph()
    report = apply_table(g, table)
    assert [op.name for op in g] == ["n0", "n5", "n6"]  # n1,n2 and n3,n4 cancelled; n5 stays
    assert g.ops["n5"].input_ports[0].source is g.ops["n0"].output_ports[0]
    assert g.ops["n6"].input_ports[0].source is g.ops["n5"].output_ports[0]
    assert g.output_ports["y"].source is g.ops["n6"].output_ports[0]
    assert report.rules[0].matches == 2 and report.rules[0].removed == 4
    assert not g.verify()


def test_mapping_rule_names_anchors_as_variables():
    table = table_from_dict({"table": {"name": "ids", "src": NS, "dst": NS, "rules": {
        "relu_id": {"src": {"query": "Sigmoid#s[@name == 'n6']"},
                    "dst": {"ops": {"$s": {"type": "Identity", "name": "${s.name + '_id'}"}}}}}}}, trusted=True)
    g = transposes_graph()
    apply_table(g, table)
    assert g.ops["n6_id"].type == "Identity"
    assert g.ops["n6_id"].provenance == ("ids", "relu_id")
    assert g.output_ports["y"].source is g.ops["n6_id"].output_ports[0]


def test_mapping_rule_query_is_checked_against_the_source_schema():
    registry = NamespaceRegistry()
    registry.add_schema(example_schema())
    table = table_from_dict({"table": {"name": "bad", "src": NS, "dst": NS, "rules": {
        "typo": {"src": {"query": "Transpos#a"}, "dst": {"remove": True}}}}}, trusted=True)
    with pytest.raises(QueryError, match="rule 'typo'.*'Transpos' is not in namespace amanda/example/1"):
        apply_table(transposes_graph(), table, registry)


# --------------------------------------------------------------------------- command line


def run_cli(capsys, *argv):
    rc = regex_cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "model.yaml"
    save_graph(transposes_graph(), path)
    return str(path)


class ExampleSchemas:
    @hookimpl
    def amanda_namespaces(self):
        return [StaticNamespaces([example_schema()])]


def test_cli_lists_matches(capsys, model, amanda_isolated):
    rc, out, err = run_cli(capsys, model, "Transpose#first -> Transpose#second")
    assert rc == 0
    assert out.splitlines() == ["$first=n1 (Transpose), $second=n2 (Transpose)",
                                "$first=n3 (Transpose), $second=n4 (Transpose)"]
    assert "not checked against a schema" in err
    rc, out, _ = run_cli(capsys, model, "Transpose -> Transpose", "--all")
    assert rc == 0 and len(out.splitlines()) == 4
    rc, out, _ = run_cli(capsys, model, "Relu -> Transpose+", "--json")
    data = json.loads(out)
    assert rc == 0 and len(data) == 1
    assert [o["name"] for o in data[0]["ops"]] == ["n0", "n1", "n2", "n3", "n4", "n5"]
    assert data[0]["ops"][0] == {"key": "_0", "name": "n0", "type": "Relu"}


def test_cli_exit_status(capsys, model, amanda_isolated, tmp_path):
    rc, out, err = run_cli(capsys, model, "Conv -> Relu")
    assert rc == 1 and out == "" and "no match" in err
    rc, out, _ = run_cli(capsys, model, "Conv -> Relu", "--json")
    assert rc == 1 and json.loads(out) == []
    rc, _, err = run_cli(capsys, model, "Transpose -> (")
    assert rc == 2 and "query:1:15: expected" in err
    rc, _, err = run_cli(capsys, str(tmp_path / "missing.yaml"), "Relu")
    assert rc == 2 and "no such file" in err


def test_cli_checks_types_against_the_namespace_schema(capsys, model, amanda_isolated):
    amanda_isolated(ExampleSchemas(), "example-schemas")
    rc, _, err = run_cli(capsys, model, "Transpos -> Relu")
    assert rc == 2 and "op type 'Transpos' is not in namespace amanda/example/1" in err
    rc, _, _ = run_cli(capsys, model, "Transpos -> Relu", "--no-schema")
    assert rc == 1
    rc, out, err = run_cli(capsys, model, "Relu -> Transpose")
    assert rc == 0 and "not checked" not in err


def test_cli_functions(capsys, model, amanda_isolated, tmp_path, monkeypatch):
    (tmp_path / "mypreds.py").write_text("def named(op, name):\n    return op.name == name\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    rc, out, _ = run_cli(capsys, model, "Transpose[named($, 'n3')] -> Transpose", "--function", "named=mypreds:named")
    assert rc == 0 and out.splitlines() == ["_0=n3 (Transpose), _1=n4 (Transpose)"]
    rc, _, err = run_cli(capsys, model, "Transpose", "--function", "named=mypreds")
    assert rc == 2 and "NAME=MODULE:ATTRIBUTE" in err
    rc, _, err = run_cli(capsys, model, "Transpose", "--function", "named=nomodule_xyz:f")
    assert rc == 2 and "cannot import module" in err


def test_add_match_command_registers_on_a_parser():
    import argparse

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    regex_cli.add_match_command(sub)
    args = parser.parse_args(["match", "m.yaml", "Relu", "--all", "--json", "--function", "f=m:f"])
    assert args.func is regex_cli.cmd_match
    assert (args.file, args.query, args.all, args.json, args.function) == ("m.yaml", "Relu", True, True, ["f=m:f"])


def test_limits_are_checked():
    with pytest.raises(ValueError):
        SearchLimits(max_steps=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert names(chain("Relu", "Relu"), "Relu+", limits=SearchLimits(max_steps=1)) == [["relu0", "relu1"]]
