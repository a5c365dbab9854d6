"""Mapping tables (``docs/mapping-tables.md``): declarative rules that match
subgraphs in one namespace and rewrite them into another.

* :mod:`.table` - the table grammar, loading, dumping;  :mod:`.check` - checking tables against schemas;
* :mod:`.expr` - safe ``${...}`` expressions;  :mod:`.attrconv` - the attribute-conversion library;
* :mod:`.match` - the subgraph matcher;  :mod:`.rewrite` - applying a rule's mapper;
* :mod:`.transform` - remove / replace / expand / fuse / unfuse;
* :mod:`.engine` - applying a table;  :mod:`.planner` - chains of tables, ``convert`` and ``interpret``;
* :mod:`.reverse` - the reverse of a bidirectional table;  :mod:`.registry` - tables registered by plugins.
"""

from .check import check_table
from .engine import ApplyReport, Converter, RuleReport, apply_table
from .expr import Expression, ExpressionError, compile_expression
from .match import Match, MatchContext, find_matches
from .planner import Conversion, ConversionError, Step, convert, interpret, plan
from .registry import broken_tables, registered_tables, tables_between
from .reverse import reverse_table
from .rewrite import MappingError
from .table import (
    MappingTable,
    Rule,
    TableError,
    dump_table,
    load_table,
    merge_parts,
    table_from_dict,
    table_to_dict,
)
from .transform import expand, fuse, remove, replace, unfuse

__all__ = [
    "ApplyReport",
    "Conversion",
    "ConversionError",
    "Converter",
    "Expression",
    "ExpressionError",
    "MappingError",
    "MappingTable",
    "Match",
    "MatchContext",
    "Rule",
    "RuleReport",
    "Step",
    "TableError",
    "apply_table",
    "check_table",
    "compile_expression",
    "convert",
    "dump_table",
    "expand",
    "find_matches",
    "fuse",
    "interpret",
    "load_table",
    "merge_parts",
    "plan",
    "registered_tables",
    "broken_tables",
    "tables_between",
    "remove",
    "replace",
    "reverse_table",
    "table_from_dict",
    "table_to_dict",
    "unfuse",
]
