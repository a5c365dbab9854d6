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
