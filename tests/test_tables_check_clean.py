"""Every table the installed plugins register checks clean against the schemas of its namespaces, as
``amanda tables --check`` reports it: each op type, attribute and port a rule names exists in its version."""

from amanda_core.mapping import check_table
from amanda_core.mapping.registry import registered_tables
from amanda_core.plugin import registry


def test_registered_tables_check_clean():
    tables = registered_tables()
    assert tables, "no plugin registered a table"
    problems = []
    for table in tables:
        errors, _ = check_table(table, registry().namespaces)
        problems += [str(e) for e in errors]
    assert problems == []


def test_shipped_yaml_parses_without_libyaml():
    """The tables and graphs shipped here are plain YAML: PyYAML's pure-Python loader reads them as libyaml does
    (libyaml accepts a few things YAML does not, such as ``[$y, $ix?]`` unquoted)."""
    from pathlib import Path

    import yaml

    from amanda_core.serialization.yamlio import safe_load

    root = Path(__file__).resolve().parents[1]
    paths = sorted(root.glob("plugins/*/amanda_*/**/*.yaml")) + sorted(root.glob("examples/**/*.yaml"))
    assert len(paths) > 50
    for path in paths:
        text = path.read_text()
        assert yaml.load(text, Loader=yaml.SafeLoader) == safe_load(text, str(path)), path
