import pytest

from amanda_core.namespace import PythonTypeSystem, TypeSystemRegistry
from amanda_core.namespace.types import TypeExprError, split_type_expr

ts = PythonTypeSystem()


@pytest.mark.parametrize(
    "expr,good,bad",
    [
        ("int", [0, -3], [1.5, True, "1", None]),
        ("float", [1.0, 2, -0.5], ["x", False]),
        ("str", ["", "a"], [b"a", 1]),
        ("bool", [True, False], [0, 1]),
        ("bytes", [b"x"], ["x"]),
        ("None", [None], [0]),
        ("Any", [None, 1, object()], []),
        ("List[int]", [[], [1, 2], (3,)], [[1.5], "ab", None]),
        ("List[List[float]]", [[[1.0], [2, 3]]], [[1.0]]),
        ("Optional[int]", [None, 3], ["3"]),
        ("Union[int, str]", [1, "a"], [1.0, None]),
        ("Dict[str, int]", [{}, {"a": 1}], [{"a": "b"}, {1: 1}, []]),
        ("Tuple[int, str]", [(1, "a"), [1, "a"]], [(1,), ("a", 1)]),
        ("Tuple[int, ...]", [(), (1, 2, 3)], [(1, "a")]),
        ("typing.List[str]", [["a"]], [[1]]),
    ],
)
def test_python_types(expr, good, bad):
    for v in good:
        assert ts.check_value(expr, v) is None, (expr, v)
    for v in bad:
        reason = ts.check_value(expr, v)
        assert reason and expr in reason, (expr, v)


@pytest.mark.parametrize("expr", ["List[", "Foo", "int[str]", "Dict[str]", "List[int]]", "List[int,,]"])
def test_bad_type_expressions(expr):
    with pytest.raises(TypeExprError):
        ts.check_value(expr, 1)


def test_qualified_names_resolve_to_their_system():
    reg = TypeSystemRegistry([ts])
    assert split_type_expr("python.int", None) == ("python", "int")
    assert split_type_expr("tf.DType", "python") == ("tf", "DType")
    assert split_type_expr("List[int]", "python") == ("python", "List[int]")
    assert split_type_expr("typing.List[int]", "python") == ("python", "typing.List[int]")
    system, local = reg.resolve("python.List[int]", None)
    assert system is ts and local == "List[int]"
    system, local = reg.resolve("str", "python")
    assert system is ts and local == "str"
    assert reg.resolve("tf.DType", "python")[0] is None
