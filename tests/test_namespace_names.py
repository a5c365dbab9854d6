import pytest

from amanda_core.errors import NamespaceError
from amanda_core.namespace import is_within, parse_namespace, parse_spec
from amanda_core.namespace.names import normalize_version


@pytest.mark.parametrize(
    "text,family,version",
    [
        ("amanda/onnx/13", "amanda/onnx", "13"),
        ("amanda/onnx/ai.onnx.ml/3", "amanda/onnx/ai.onnx.ml", "3"),
        ("amanda/tensorflow/2.21.0", "amanda/tensorflow", "2.21.0"),
        ("amanda/example", "amanda/example", None),
        ("/amanda/pytorch/2.13.0/", "amanda/pytorch", "2.13.0"),
    ],
)
def test_parse_namespace(text, family, version):
    n = parse_namespace(text)
    assert (n.family, n.version) == (family, version)


@pytest.mark.parametrize("bad", ["", "amanda//x", "amanda/te nsor", 3])
def test_malformed_namespace(bad):
    with pytest.raises(NamespaceError):
        parse_namespace(bad)


def test_hierarchy():
    assert is_within("amanda/tensorflow/2.21.0", "amanda/tensorflow")
    assert is_within("amanda/tensorflow", "amanda")
    assert not is_within("amanda/tensorflowx/1", "amanda/tensorflow")
    assert not is_within("amanda", "amanda/tensorflow")


def test_exact_spec_uses_pep440_equality():
    spec = parse_spec("amanda/pytorch/2.13")
    assert spec.matches("amanda/pytorch/2.13.0")
    assert spec.matches("amanda/pytorch/2.13.0+cpu")  # a local label is ignored
    assert not spec.matches("amanda/pytorch/2.13.1")
    assert not spec.matches("amanda/tensorflow/2.13.0")
    assert normalize_version("2.13.0+cpu") == "2.13.0"


def test_range_spec_selects_newest_in_range():
    spec = parse_spec("amanda/onnx/>=11,<14")
    assert spec.family == "amanda/onnx"
    assert spec.matches("amanda/onnx/13") and not spec.matches("amanda/onnx/14")
    assert spec.select([str(v) for v in range(1, 22)]) == "13"
    assert parse_spec("amanda/onnx").select(["1", "9", "10"]) == "10"
    assert parse_spec("amanda/tensorflow/==2.*").matches("amanda/tensorflow/2.21.0")
    assert str(parse_spec("amanda/onnx/>=13")) == "amanda/onnx/>=13"


def test_malformed_range():
    with pytest.raises(NamespaceError, match="malformed version range"):
        parse_spec("amanda/onnx/>=x")
