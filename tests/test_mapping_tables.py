import textwrap

import pytest

from amanda_core.mapping import (
    ExpressionError,
    TableError,
    check_table,
    compile_expression,
    dump_table,
    load_table,
    reverse_table,
    table_from_dict,
)

from .mapping_support import SEED, registry

SEED_TABLES = sorted((SEED / "tables").glob("*.yaml"))


@pytest.mark.parametrize("path", SEED_TABLES, ids=lambda p: p.name)
def test_seed_tables_load_and_round_trip(path):
    table = load_table(path, trusted=True)
    assert table.src == "amanda/pytorch/1.4.0" and table.dst == "amanda/tensorflow/1.13.1"
    text = dump_table(table)
    again = load_table(text, filename="again.yaml", trusted=True)
    assert again == table
    assert dump_table(again) == text


@pytest.mark.parametrize("path", SEED_TABLES, ids=lambda p: p.name)
def test_seed_tables_check_against_the_seed_schemas(path):
    errors, notes = check_table(load_table(path, trusted=True), registry())
    assert errors == [] and notes == []


def test_seed_table_grammar_pieces():
    table = load_table(SEED / "tables" / "convert_t_matmul.yaml", trusted=True)
    rule = table.rules["convert_matmul"]
    assert list(rule.src.ops) == ["$t", "$matmul"] and rule.src.ops["$t"].var == "t"
    (edge,) = rule.src.edges
    assert (edge.src.op, edge.src.port, edge.dst.op, edge.dst.port) == ("$t", "out0", "$matmul", "in0")
    mapped = rule.dst.ops["dense/MatMul"]
    assert mapped.var is None and mapped.type.value == "MatMul"
    assert mapped.attrs["transpose_a"].value is True and mapped.attrs["T"].kind == "expr"


def write(tmp_path, text, name="t.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


BASE = """\
table:
  src: amanda/toy/1
  dst: amanda/other/1
  rules:
"""


@pytest.mark.parametrize("rules, message, line", [
    ("    r:\n      src: {ops: {$a: {type: Relu}}}\n", "a rule needs a mapper ('dst')", 5),
    ("    r:\n      src: {ops: {$a: {type: Relu, attr: {}}}}\n      dst: {ops: {$a: {type: ReLU}}}\n",
     "unknown key 'attr' in op matcher '$a'", 6),
    ("    r:\n      apply_after: [nope]\n      src: {ops: {$a: {type: Relu}}}\n      dst: {ops: {$a: {}}}\n",
     "apply_after names 'nope'", 6),
    ("    r:\n      apply_after: [s]\n      src: {ops: {$a: {type: Relu}}}\n      dst: {ops: {$a: {}}}\n"
     "    s:\n      apply_after: [r]\n      src: {ops: {$a: {type: Relu}}}\n      dst: {ops: {$a: {}}}\n",
     "apply_after cycle: r -> s -> r", 6),
    ("    r:\n      src:\n        ops: {$a: {type: Relu}}\n        edges: [$a.y -> $b.x]\n"
     "      dst: {ops: {$a: {}}}\n", "edge $a.y -> $b.x names '$b', which is not an op of the matcher", 8),
    ("    r:\n      src: {ops: {$a: {type: Relu}}}\n      dst:\n        ops: {n: {type: ReLU}}\n"
     "        edges: [$a.x -> m.features]\n", "names 'm', which is in neither the matcher nor the mapper", 9),
    ("    r:\n      src: {ops: {$a: {type: Relu}, $a: {type: Add}}}\n      dst: {ops: {}}\n",
     "found duplicate key '$a'", 6),
    ("    r:\n      src: {ops: {$a: {type: Relu}}}\n      dst: {ops: {$a: {attrs: {x: '${__import__(\"os\")}'}}}}\n",
     "expression refused: name '__import__' is not allowed", 7),
    ("    r:\n      src: {ops: {$a: {type: Relu}}}\n      dst: {ops: {$a: {attrs: {x: '${1 +}'}}}}\n",
     "not a valid Python expression", 7),
    ("    r:\n      src: {ops: {$a: {type: Relu}}}\n      dst: {remove: true, ops: {$a: {}}}\n",
     "'remove' stands alone in a mapper", 7),
])
def test_malformed_tables_say_file_line_and_rule(tmp_path, rules, message, line):
    path = write(tmp_path, BASE + rules)
    with pytest.raises(TableError) as info:
        load_table(path, trusted=True)
    text = str(info.value)
    assert message in text
    assert text.startswith(f"{path}:{line}:")
    assert "rule 'r'" in text or "rule 's'" in text or "duplicate key" in text


def test_a_table_is_parsed_once_and_its_expressions_know_their_lines(tmp_path, monkeypatch):
    """The text is not parsed a second time to place the expressions (hundreds per table), and each still names
    its own line; a text asked about again without being kept is parsed again."""
    import yaml

    from amanda_core.serialization import yamlio

    rules = ("    r:\n      src: {ops: {$a: {type: Relu}}}\n      dst: {ops: {$a: {attrs: {x: '${1 + 1}'}}}}\n"
             "    s:\n      src:\n        ops: {$a: {type: Add}}\n      dst:\n        ops:\n"
             "          $a: {attrs: {y: '${2}', z: '${3 * 4}'}}\n")
    path = write(tmp_path, BASE + rules)

    def no_second_parse(*args, **kwargs):
        raise AssertionError("the table's text was parsed a second time")

    monkeypatch.setattr(yaml, "compose", no_second_parse)
    table = load_table(path, trusted=True)
    lines = {name: rule.dst.ops["$a"].attrs for name, rule in table.rules.items()}
    assert {k: v.value.location.line for k, v in lines["r"].items()} == {"x": 7}
    assert {k: v.value.location.line for k, v in lines["s"].items()} == {"y": 13, "z": 13}
    monkeypatch.undo()
    text = open(path).read()
    yamlio._POSITIONS.clear()
    assert yamlio.locate(text, ("table", "rules", "s", "dst", "ops", "$a")).line == 13
    assert yamlio.locate(text, ("table", "rules", "s", "nope", "deeper")).line == 8  # the deepest that exists


def test_table_level_problems(tmp_path):
    with pytest.raises(TableError, match=r"t.yaml:2:.*'src' must be a namespace"):
        load_table(write(tmp_path, "table:\n  src: 3\n  dst: amanda/x/1\n  rules: {}\n"), trusted=True)
    with pytest.raises(TableError, match="a mapping table needs 'rules'"):
        load_table(write(tmp_path, "table:\n  src: amanda/x/1\n  dst: amanda/y/1\n"), trusted=True)
    with pytest.raises(TableError, match="malformed version range"):
        load_table(write(tmp_path, "table:\n  src: amanda/x/>=>1\n  dst: amanda/y/1\n  rules: {}\n"), trusted=True)


def test_untrusted_table_with_expressions_is_refused_and_says_why(tmp_path):
    path = write(tmp_path, BASE + "    r:\n      src: {ops: {$a: {type: Relu}}}\n"
                                  "      dst: {ops: {$a: {attrs: {x: '${1 + 1}'}}}}\n")
    with pytest.raises(TableError) as info:
        load_table(path)
    assert f"{path}:7:" in str(info.value) and "--trust-expressions" in str(info.value)
    assert load_table(path, trusted=True).rules["r"].dst.ops["$a"].attrs["x"].kind == "expr"
    plain = write(tmp_path, BASE + "    r:\n      src: {ops: {$a: {type: Relu}}}\n"
                                   "      dst: {ops: {$a: {type: ReLU}}}\n", "plain.yaml")
    assert load_table(plain).name == "plain"  # no expressions: no trust needed


def test_check_table_finds_unknown_types_attrs_and_ports_with_lines(tmp_path):
    path = write(tmp_path, BASE + """\
    r:
      src:
        ops:
          $a: {type: Relu, attrs: {alpha: 1}}
          $b: {type: Ad}
        edges: [$a.z -> $b.a]
      dst:
        ops:
          $a: {type: ReLU, input_ports: [feature]}
          n: {type: AddV2, attrs: {T: float32}}
""")
    errors, notes = check_table(load_table(path, trusted=True), registry())
    text = "\n".join(str(e) for e in errors)
    assert notes == []
    assert f"{path}:8: table 't', rule 'r': matcher op '$a': Relu has no attribute 'alpha'" in text
    assert f"{path}:9: table 't', rule 'r': matcher op '$b': amanda/toy/1 has no op type 'Ad' (did you mean 'Add'?)" \
        in text
    assert "matcher edge $a.z -> $b.a: Relu has no output port 'z'" in text
    assert f"{path}:13: table 't', rule 'r': mapper op '$a': ReLU has no input port 'feature' (did you mean " \
           "'features'?)" in text
    assert "mapper op 'n': AddV2 has no attribute 'T'" in text
    assert len(errors) == 5


def test_check_table_attribute_of_some_listed_types_is_read_as_absent_on_the_others(tmp_path):
    # Softmax has axis, Relu none: the matcher reads Relu's as absent (None), so a rule over both may ask for
    # it; an attribute none of the listed types has is a slip, as with one type
    path = write(tmp_path, BASE + """\
    r:
      src:
        ops:
          $a: {type: [Relu, Softmax], attrs: {axis: "${value in (None, -1)}"}}
      dst:
        ops:
          $a: {type: ReLU}
    s:
      src:
        ops:
          $a: {type: [Relu, Add], attrs: {axis: "${value in (None, -1)}"}}
      dst:
        ops:
          $a: {type: ReLU}
""")
    errors, _ = check_table(load_table(path, trusted=True), registry())
    assert [(e.rule, str(e).split(": ", 2)[-1]) for e in errors] == [
        ("s", "matcher op '$a': Relu has no attribute 'axis'"), ("s", "matcher op '$a': Add has no attribute 'axis'")]


def test_check_table_names_the_part_a_rule_is_in(tmp_path):
    from amanda_core.mapping.table import merge_parts

    head = "table:\n  name: {name}\n  part_of: whole\n  src: amanda/toy/1\n  dst: amanda/other/1\n  rules:\n"
    first = write(tmp_path, head.format(name="a") + "    r:\n      src: {ops: {$a: {type: Relu}}}\n"
                  "      dst: {ops: {$a: {type: ReLU}}}\n", "a.yaml")
    second = write(tmp_path, head.format(name="b") + "    s:\n      src: {ops: {$a: {type: Relu}}}\n"
                   "      dst: {ops: {$a: {type: Relux}}}\n", "b.yaml")
    (merged,) = merge_parts([load_table(first), load_table(second)])
    errors, _ = check_table(merged, registry())
    assert [str(e) for e in errors] == [
        f"{second}:9: table 'whole', rule 's': mapper op '$a': amanda/other/1 has no op type 'Relux'"]


def test_check_table_notes_namespaces_it_cannot_check(tmp_path):
    path = write(tmp_path, "table:\n  src: amanda/nowhere/1\n  dst: amanda/other/1\n  rules:\n"
                           "    r:\n      src: {ops: {$a: {type: X}}}\n      dst: {ops: {$a: {type: ReLU}}}\n")
    errors, notes = check_table(load_table(path), registry())
    assert errors == [] and "no schema is registered for amanda/nowhere/1" in notes[0]


# --------------------------------------------------------------------------- expressions

PAYLOADS = [
    "__import__('os').system('echo hi')",
    "().__class__.__bases__[0].__subclasses__()",
    "[c for c in ().__class__.__base__.__subclasses__()]",
    "getattr((), '__cl' + 'ass__')",
    "'{0.__class__}'.format(1)",
    "'{x.__init__.__globals__}'.format_map({'x': op})",
    "open('/etc/passwd').read()",
    "eval('1+1')",
    "exec('import os')",
    "compile('1', 'x', 'eval')",
    "globals()",
    "vars()",
    "(lambda: 0).__globals__",
    "type(op)",
    "(x for x in []).gi_frame.f_back",
    "op._op",
    "import os",
    "from os import system",
    "class A: pass",
    "def f(): return 1",
    "with open('x') as f: return 1",
    "global x\nreturn 1",
    "value.ctypes.data",
    "value.tofile('/tmp/x')",
    "'__class__'",
    "2 ** 100000000",
]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_known_sandbox_escapes_are_refused(payload):
    with pytest.raises(ExpressionError, match="refused|not a valid Python"):
        compile_expression("${" + payload + "}")


def test_expressions_evaluate_with_captures_and_bodies():
    e = compile_expression("${ $eps * 2 }")
    assert e.evaluate({"eps": 0.5}) == 1.0
    body = compile_expression("""${
        if x > 2:
            return "big"
        return "small"
    }""")
    assert body.evaluate({"x": 3}) == "big" and body.evaluate({"x": 1}) == "small"
    assert compile_expression("${'$notavar' + s}").evaluate({"s": "!"}) == "$notavar!"
    with pytest.raises(ExpressionError, match="must 'return'"):
        compile_expression("${\n x = 1\n}")
    with pytest.raises(ExpressionError, match="failed: ZeroDivisionError"):
        compile_expression("${1 / x}").evaluate({"x": 0})
    with pytest.raises(ExpressionError, match="NameError"):
        compile_expression("${open_file}").evaluate({})
    assert compile_expression("${len([1, 2]) + max(1, 2)}").evaluate({}) == 4


# --------------------------------------------------------------------------- bidirectional

BIDI = """\
table:
  name: toy-to-other
  src: amanda/toy/1
  dst: amanda/other/1
  bidirectional: true
  rules:
    relu:
      src: {ops: {$r: {type: Relu}}}
      dst: {ops: {$r: {type: ReLU}}}
    transpose:
      src: {ops: {$t: {type: Transpose, attrs: {perm: $p}}}}
      dst: {ops: {$t: {type: Permute, attrs: {dims: $p}}}}
    softmax:
      src: {ops: {$s: {type: Softmax, attrs: {axis: $a}}}}
      dst: {ops: {$s: {type: SoftmaxNCHW, attrs: {dim: "${nhwc_to_nchw_axis($a, 4)}"}}}}
"""


def test_bidirectional_table_derives_its_reverse():
    table = load_table(BIDI, filename="bidi.yaml", trusted=True)
    back = reverse_table(table)
    assert (back.name, back.src, back.dst) == ("toy-to-other.reverse", "amanda/other/1", "amanda/toy/1")
    soft = back.rules["softmax"]
    (pat,) = soft.src.ops.values()
    assert pat.type.value == "SoftmaxNCHW" and pat.attrs["dim"].kind == "var"
    (tpl,) = soft.dst.ops.values()
    assert tpl.type.value == "Softmax" and tpl.attrs["axis"].text == "${nchw_to_nhwc_axis(a, 4)}"
    assert back.rules["transpose"].dst.ops["$op"].attrs["perm"].text == "$p"
    errors, _ = check_table(back, registry())
    assert errors == []


def test_bidirectional_refuses_rules_that_cannot_be_reversed():
    text = BIDI + """\
    fused:
      src:
        ops: {$a: {type: Relu}, $b: {type: Add}}
        edges: [$a.y -> $b.a]
      dst: {ops: {$b: {type: AddV2}}}
"""
    with pytest.raises(TableError, match="rule 'fused': cannot be reversed: the matcher is not a single op"):
        reverse_table(load_table(text, filename="bidi.yaml", trusted=True))
    lossy = BIDI.replace("${nhwc_to_nchw_axis($a, 4)}", "${$a + 1}")
    with pytest.raises(TableError, match="rule 'softmax': cannot be reversed: mapper attribute 'dim' is not a call"):
        reverse_table(load_table(lossy, filename="bidi.yaml", trusted=True))


def test_table_from_dict_and_generated_tables_dump():
    table = table_from_dict({"table": {"name": "gen", "src": "amanda/toy/1", "dst": "amanda/toy/2",
                                       "carry": "unchanged", "tags": ["upgrade"],
                                       "rules": {"r": {"src": {"ops": {"$a": {"type": "Relu"}}},
                                                       "dst": {"ops": {"$a": {}}}, "tags": ["extra"]}}}})
    assert table.rules["r"].tags == ("upgrade", "extra")
    again = load_table(dump_table(table), filename="gen.yaml", trusted=True)
    assert again == table and again.carry == "unchanged"
