"""Mapping tables: declarative rules, as data (``docs/mapping-tables.md``).

The YAML form (``docs/mapping-tables.md`` has the whole grammar with examples)::

    table:
      name: torch-to-tf                 # optional (default: the file's name)
      src: amanda/pytorch/>=2.0         # namespace or version range the rules match in
      dst: amanda/tensorflow/>=2.15     # namespace or version range they write to
      tags: [inference]                 # optional: tags of every rule
      carry: unchanged                  # optional: ops no rule matched move to dst if their schema is the same
      bidirectional: false              # optional: derive the reverse table (renames with inverses only)
      rules:
        convert_matmul:
          apply_after: [other_rule]     # optional
          tags: [...]                   # optional
          src:                          # matcher
            ops:
              $matmul: {type: aten::matmul}
          dst:                          # mapper
            ops:
              $matmul:
                type: MatMul
                attrs: {T: "${dtype_name(matmul.outputs[0].dtype)}"}

A rule is an immutable value; a table keeps its rules in declaration order.  Everything refers back to the
file and line it came from, and every problem found while loading says file, line and rule.
"""

from __future__ import annotations

__all__ = [
    "ValueSpec",
    "PortPattern",
    "OpPattern",
    "EdgeRef",
    "EdgeSpec",
    "Pattern",
    "OpTemplate",
    "Template",
    "Rule",
    "MappingTable",
    "TableError",
    "load_table",
    "table_from_dict",
    "table_to_dict",
    "dump_table",
    "merge_parts",
]

import os
import re
import threading
from typing import Any, Callable, Iterable, Mapping

from attrs import define, field, frozen

from ..errors import AmandaError, FormatError, Location
from ..ir.edges import is_control, split_edge, split_end
from .expr import Expression, ExpressionError, compile_expression, is_expression


class TableError(AmandaError):
    """A malformed, unsafe or inconsistent mapping table; says file, line and rule."""

    def __init__(self, message: str, location: Location | None = None, rule: str | None = None,
                 table: str | None = None) -> None:
        self.reason = message
        self.location = location
        self.rule = rule
        self.table = table
        where = f"{location}: " if location is not None else ""
        what = f"table {table!r}" if table else ""
        if rule:
            what = f"{what}, rule {rule!r}" if what else f"rule {rule!r}"
        super().__init__(f"{where}{what + ': ' if what else ''}{message}")


_VAR = re.compile(r"^\$([A-Za-z_][A-Za-z0-9_]*)$")
_PORT_GROUP = re.compile(r"^(\$?[A-Za-z_][A-Za-z0-9_.]*)\*$")


def variable(text: Any) -> str | None:
    """``$name`` -> ``name``; anything else -> None."""
    if isinstance(text, str):
        m = _VAR.match(text)
        if m:
            return m.group(1)
    return None


@frozen
class ValueSpec:
    """A value in a matcher or mapper: a literal, a ``${...}`` expression, or a ``$variable``.

    In a matcher a variable captures the value (the same variable twice must see equal values); in a mapper it
    gives the captured value back.
    """

    kind: str  # "literal" | "expr" | "var"
    value: Any = field(eq=False)
    text: Any = None

    @property
    def is_literal(self) -> bool:
        return self.kind == "literal"


@frozen
class PortPattern:
    """A port listed by a matcher (``- X``, ``- $x``, ``- X: float32``, ``- B?`` optional, ``- inputs*``)."""

    name: str | None  # literal port name; None when ``var`` binds the port at this position
    var: str | None
    position: int
    dtype: ValueSpec | None = None
    optional: bool = False
    group: bool = False


@frozen
class OpPattern:
    key: str
    var: str | None
    type: ValueSpec | None
    name: ValueSpec | None
    attrs: Mapping[str, ValueSpec]
    inputs: tuple[PortPattern, ...] | None
    outputs: tuple[PortPattern, ...] | None
    commutative: bool | tuple[str, ...] = False
    line: int | None = field(default=None, eq=False)
    body: Pattern | None = None
    """Ops and edges that must match somewhere in the op's body (the op contains a graph)."""
    consts: Mapping[str, ValueSpec] = field(factory=dict)
    """Input ports whose value must be a constant (fed by a constant op, or absent and taking its schema default),
    and what that value must be or is captured as."""


@frozen
class EdgeRef:
    """One end of an edge in a rule: an op key and a port (a literal name, ``$var`` or a group ``name*``)."""

    op: str
    port: str
    port_var: str | None = None
    group: bool = False

    def __str__(self) -> str:
        port = f"${self.port_var}" if self.port_var else self.port
        return f"{self.op}.{port}{'*' if self.group else ''}"


@frozen
class EdgeSpec:
    src: EdgeRef
    dst: EdgeRef
    control: bool = False
    line: int | None = field(default=None, eq=False)

    def __str__(self) -> str:
        return f"{self.src} -> {self.dst}"


@frozen
class Pattern:
    """A matcher: ops and edges between them, an optional ``where`` condition, or a graph regex ``query``."""

    ops: Mapping[str, OpPattern]
    edges: tuple[EdgeSpec, ...] = ()
    where: Expression | None = field(default=None, eq=False)
    query: str | None = None

    def var_of(self, key: str) -> str | None:
        op = self.ops.get(key)
        return op.var if op is not None else None


@frozen
class OpTemplate:
    """An op in a mapper: a new op, or (same key as in the matcher) the matched op updated."""

    key: str
    var: str | None
    type: ValueSpec | None
    name: ValueSpec | None
    attrs: Mapping[str, ValueSpec]
    keep_attrs: bool | tuple[str, ...] | None
    inputs: tuple[tuple[str, ValueSpec | None], ...] | None
    outputs: tuple[tuple[str, ValueSpec | None], ...] | None
    meta: Mapping[str, ValueSpec] = field(factory=dict)
    line: int | None = field(default=None, eq=False)
    body: Template | None = None
    """Ops and edges of the graph a new op contains (edges name the op's own ports as ``graph.<port>``)."""
    consts: Mapping[str, ValueSpec] = field(factory=dict)
    """Input ports fed by a new constant op of the target namespace, with the value each is given."""


@frozen
class Template:
    """A mapper: ops, edges, or one of the transformations (``remove``, ``fuse``, ``inline``)."""

    ops: Mapping[str, OpTemplate]
    edges: tuple[EdgeSpec, ...] = ()
    transform: str | None = None
    transform_args: Mapping[str, ValueSpec] = field(factory=dict)


@frozen
class Rule:
    name: str
    src: Pattern
    dst: Template
    apply_after: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    commutative: bool = False
    repeat: bool = False
    line: int | None = field(default=None, eq=False)
    raw: Mapping[str, Any] = field(factory=dict, eq=False, repr=False)
    source: str | None = field(default=None, eq=False)
    """The file the rule was read from (a table merged from parts has rules from several files)."""
    anchors: Any = field(init=False, eq=False, repr=False, default=None)
    """Filled by the engine the first time it applies the rule: the op types its search can start from."""
    keeps_ops: bool = field(init=False, eq=False, repr=False)
    """The mapper keeps every matched op as it is (``$op: {}`` for each, nothing else): a rewrite only moves the
    ops to the target namespace, as a version step does for an op whose schema changed but not its meaning."""

    @keeps_ops.default
    def _keeps_ops(self) -> bool:
        t = self.dst
        return (t.transform is None and not t.edges and self.src.query is None and set(t.ops) == set(self.src.ops)
                and all(tpl.type is None and tpl.name is None and not tpl.attrs and tpl.keep_attrs is None
                        and tpl.inputs is None and tpl.outputs is None and not tpl.meta and tpl.body is None
                        and not tpl.consts for tpl in t.ops.values())
                and not any(p.consts for p in self.src.ops.values()))


_BUILDING = threading.RLock()
"""Held while a lazy table builds its rules (:meth:`MappingTable.lazy`): each is built once, whichever thread
asks first."""


@define(eq=False)
class MappingTable:
    """Rules that rewrite graphs from namespace ``src`` to ``dst`` (either may be a version range).

    A table made by :meth:`lazy` knows its header (name, namespaces, carry, ...) from the start and builds its
    rules the first time they are read: planning a conversion reads headers only, so a plugin can register many
    tables and pay for those a conversion applies."""

    name: str
    src: str
    dst: str
    _rules: dict[str, Rule] | None
    tags: tuple[str, ...] = ()
    carry: str = "none"  # "none" | "unchanged"
    bidirectional: bool = False
    source: str | None = None
    trusted: bool = True
    plugin: str | None = None
    description: str = ""
    _raw: dict[str, Any] | None = field(factory=dict, repr=False)
    _order: Any = field(default=None, init=False, repr=False, eq=False)
    _build: Callable[[], MappingTable] | None = field(default=None, init=False, repr=False, eq=False)
    part_of: str | None = None
    """The table this one is a part of: parts (files) with the same ``part_of`` are merged into one table of that
    name (:func:`merge_parts`), so a large conversion can be written as one file per op family."""
    ahead: bool = False
    """A table that converts some ops only, where they stand, ahead of the chain (docs/mapping-tables.md, "Tables
    that go ahead"): never a step of a chain by itself; the planner applies it first when its ``src`` admits the
    graph's namespace and its ``dst`` the target (ops that exist only in newer opsets, converted before the
    opset chain would have to bring them down)."""

    @classmethod
    def lazy(cls, name: str, src: str, dst: str, build: Callable[[], MappingTable], *, tags: Iterable[str] = (),
             carry: str = "none", bidirectional: bool = False, ahead: bool = False, trusted: bool = True,
             source: str | None = None, plugin: str | None = None, description: str = "") -> MappingTable:
        """A table whose rules ``build()`` makes the first time :attr:`rules` (or :attr:`raw`) is read.

        ``build`` returns the whole table; it must agree with the header given here (name, ``src``, ``dst``,
        tags, ``carry``, ``bidirectional``, ``ahead``, ``trusted``), or reading the rules raises
        :class:`TableError`.  A ``description`` or ``source`` not given here is the built table's.  A build that
        fails raises each time the rules are read; nothing is kept."""
        if carry not in ("none", "unchanged"):
            raise TableError("'carry' is 'none' or 'unchanged'", table=name)
        table = cls(name, src, dst, None, tuple(tags), carry, bidirectional, source, trusted, plugin, description,
                    None, ahead=ahead)
        table._build = build
        return table

    @property
    def rules(self) -> dict[str, Rule]:
        """The rules by name, in declaration order (built now if the table is :meth:`lazy` and not built yet)."""
        rules = self._rules
        if rules is None:
            self._materialize()
            rules = self._rules
            assert rules is not None
        return rules

    @rules.setter
    def rules(self, value: dict[str, Rule]) -> None:
        self._rules = value
        if self._raw is None:
            self._raw = {}
        self._build = None

    @property
    def raw(self) -> dict[str, Any]:
        """The table's YAML form as read (or as a generator built it)."""
        raw = self._raw
        if raw is None:
            self._materialize()
            raw = self._raw
            assert raw is not None
        return raw

    @raw.setter
    def raw(self, value: dict[str, Any]) -> None:
        self._raw = value

    @property
    def built(self) -> bool:
        """Whether the rules exist yet (always, except for a :meth:`lazy` table whose rules nobody read)."""
        return self._rules is not None

    def _materialize(self) -> None:
        with _BUILDING:
            if self._rules is not None:
                return
            if self._build is None:
                raise TableError("the table has neither rules nor a way to build them", table=self.name)
            made = self._build()
            if not isinstance(made, MappingTable):
                raise TableError(f"building its rules gave {type(made).__name__}, not a MappingTable",
                                 table=self.name)
            for attr in ("name", "src", "dst", "tags", "carry", "bidirectional", "ahead", "part_of", "trusted"):
                if getattr(made, attr) != getattr(self, attr):
                    raise TableError(f"its rules were built for {attr} {getattr(made, attr)!r}, but the table was "
                                     f"registered with {attr} {getattr(self, attr)!r}", table=self.name)
            if not self.description:
                self.description = made.description
            if self.source is None:
                self.source = made.source
            self._raw = made.raw
            self._rules = made.rules
            self._build = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MappingTable):
            return NotImplemented
        return (self.name, self.src, self.dst, list(self.rules.items()), self.tags, self.carry,
                self.bidirectional, self.ahead) == (other.name, other.src, other.dst, list(other.rules.items()),
                                                    other.tags, other.carry, other.bidirectional, other.ahead)

    def ordered_rules(self) -> list[Rule]:
        """Rules in application order: ``apply_after`` first, then declaration order (worked out once for the
        rules the table holds; a table is applied to many graphs)."""
        key = tuple(self.rules)
        cached = self._order
        if cached is None or cached[0] != key or any(a is not b for a, b in zip(cached[1], self.rules.values())):
            cached = self._order = (key, tuple(self.rules.values()), order_rules(self.rules, self.name))
        return list(cached[2])

    def has_expressions(self) -> bool:
        return _has_expressions(self.raw)

    def __repr__(self) -> str:
        count = f"{len(self._rules)} rules" if self._rules is not None else "rules not built yet"
        return f"<MappingTable {self.name}: {self.src} -> {self.dst}, {count}>"


def order_rules(rules: Mapping[str, Rule], table: str | None = None) -> list[Rule]:
    """Topological order of ``apply_after`` (ties in declaration order); an unknown name or a cycle is an error."""
    index = {name: i for i, name in enumerate(rules)}
    for rule in rules.values():
        for dep in rule.apply_after:
            if dep not in rules:
                raise TableError(f"apply_after names {dep!r}, which is not a rule of this table", None, rule.name,
                                 table)
    done: dict[str, None] = {}
    visiting: list[str] = []

    def visit(name: str) -> None:
        if name in done:
            return
        if name in visiting:
            cycle = visiting[visiting.index(name):] + [name]
            raise TableError("apply_after cycle: " + " -> ".join(cycle), None, name, table)
        visiting.append(name)
        for dep in sorted(rules[name].apply_after, key=index.__getitem__):
            visit(dep)
        visiting.pop()
        done[name] = None

    for name in rules:
        visit(name)
    return [rules[n] for n in done]


def _pattern_vars(ops: Mapping[str, OpPattern]) -> list[str]:
    """Op variables of a matcher, those of nested body matchers included (all share one scope)."""
    out = []
    for o in ops.values():
        if o.var:
            out.append(o.var)
        if o.body is not None:
            out.extend(_pattern_vars(o.body.ops))
    return out


def _has_expressions(value: Any) -> bool:
    if isinstance(value, str):
        return is_expression(value)
    if isinstance(value, Mapping):
        return any(_has_expressions(k) or _has_expressions(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_has_expressions(v) for v in value)
    return False


# --------------------------------------------------------------------------- reading

_TABLE_KEYS = ("name", "src", "dst", "rules", "tags", "carry", "bidirectional", "description", "part_of", "ahead")
_RULE_KEYS = ("src", "dst", "apply_after", "tags", "commutative", "repeat", "description")
_MATCHER_KEYS = ("ops", "edges", "where", "query")
_OP_MATCHER_KEYS = ("type", "name", "attrs", "consts", "input_ports", "output_ports", "commutative", "ops",
                    "edges")
_MAPPER_KEYS = ("ops", "edges", "remove", "fuse", "inline")
_OP_MAPPER_KEYS = ("type", "name", "attrs", "consts", "keep_attrs", "input_ports", "output_ports", "meta", "ops",
                   "edges")


class _Parser:
    def __init__(self, text: str | None, filename: str | None, table: str | None, trusted: bool) -> None:
        self.text = text
        self.filename = filename
        self.table_name = table
        self.trusted = trusted
        self.rule_name: str | None = None

    def loc(self, path: tuple[Any, ...]) -> Location | None:
        if self.text is None:
            return Location(self.filename) if self.filename else None
        from ..serialization.yamlio import locate

        return locate(self.text, path, self.filename)

    def error(self, message: str, path: tuple[Any, ...]) -> TableError:
        return TableError(message, self.loc(path), self.rule_name, self.table_name)

    def mapping(self, value: Any, path: tuple[Any, ...], what: str, keys: Iterable[str] | None = None
                ) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.error(f"{what} must be a mapping", path)
        if keys is not None:
            allowed = tuple(keys)
            for k in value:
                if k not in allowed:
                    raise self.error(f"unknown key {k!r} in {what}; expected one of: {', '.join(allowed)}",
                                     path + (k,))
        return value

    def strings(self, value: Any, path: tuple[Any, ...], what: str) -> tuple[str, ...]:
        if value is None:
            return ()
        if isinstance(value, str):
            return (value,)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(f"{what} must be a list of names", path)
        return tuple(value)

    def value(self, v: Any, path: tuple[Any, ...]) -> ValueSpec:
        if is_expression(v):
            if not self.trusted:
                raise self.error("the table holds expressions (${...}), which run as Python code, and it was not "
                                 "loaded as trusted; tables given on the command line run expressions only with "
                                 "--trust-expressions (read the table first)", path)
            try:
                expr = compile_expression(v, self.loc(path), self.rule_name)
            except ExpressionError as e:
                raise TableError(e.reason, e.location, self.rule_name, self.table_name) from None
            return ValueSpec("expr", expr, v)
        var = variable(v)
        if var is not None:
            return ValueSpec("var", var, v)
        return ValueSpec("literal", v, v)

    def expression(self, v: Any, path: tuple[Any, ...], what: str) -> Expression:
        spec = self.value(v, path)
        if spec.kind != "expr":
            raise self.error(f"{what} must be an expression written ${{...}}", path)
        return spec.value  # type: ignore[no-any-return]

    # -- edges
    def edge_ref(self, text: str, path: tuple[Any, ...], edge: str) -> EdgeRef:
        try:
            op, port = split_end(text.strip(), edge=edge)
        except FormatError as e:
            raise self.error(e.reason, path) from None
        group = False
        m = _PORT_GROUP.match(port)
        if m:
            port, group = m.group(1), True
        pvar = variable(port)
        return EdgeRef(op, port if pvar is None else "", pvar, group)

    def edges(self, value: Any, path: tuple[Any, ...]) -> tuple[EdgeSpec, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.error("'edges' must be a list of 'op.port -> op.port'", path)
        out = []
        for i, text in enumerate(value):
            try:
                left, right = split_edge(text)
                src = self.edge_ref(left, path + (i,), text)
                dst = self.edge_ref(right, path + (i,), text)
                control = is_control(src.port, dst.port, text)
            except FormatError as e:
                raise self.error(e.reason, path + (i,)) from None
            line = self.loc(path + (i,))
            out.append(EdgeSpec(src, dst, control, line.line if line else None))
        return tuple(out)

    # -- matcher
    def port_patterns(self, value: Any, path: tuple[Any, ...]) -> tuple[PortPattern, ...] | None:
        if value is None:
            return None
        if not isinstance(value, list):
            raise self.error("ports are a list of '- name' or '- name: value'", path)
        out = []
        for i, item in enumerate(value):
            if isinstance(item, str):
                name, dt = item, None
            elif isinstance(item, Mapping) and len(item) == 1:
                ((name, dt),) = item.items()
                name = str(name)
            else:
                raise self.error(f"a port is '- name' or '- name: value', got {item!r}", path + (i,))
            optional = name.endswith("?")
            group = name.endswith("*")
            name = name.rstrip("?*")
            var = variable(name)
            dtype = self.value(dt, path + (i,)) if dt is not None else None
            out.append(PortPattern(None if var else name, var, i, dtype, optional, group))
        return tuple(out)

    def op_pattern(self, key: str, spec: Any, path: tuple[Any, ...]) -> OpPattern:
        spec = self.mapping(spec, path, f"op matcher {key!r}", _OP_MATCHER_KEYS)
        attrs_d = self.mapping(spec.get("attrs"), path + ("attrs",), "attrs")
        consts_d = self.mapping(spec.get("consts"), path + ("consts",), "consts")
        comm = spec.get("commutative", False)
        if not isinstance(comm, bool):
            comm = self.strings(comm, path + ("commutative",), "commutative")
        line = self.loc(path)
        body = None
        if "ops" in spec or "edges" in spec:
            body = self.pattern({"ops": spec.get("ops"), "edges": spec.get("edges")}, path)
        return OpPattern(
            key=key, var=variable(key),
            type=self.value(spec["type"], path + ("type",)) if "type" in spec else None,
            name=self.value(spec["name"], path + ("name",)) if "name" in spec else None,
            attrs={str(k): self.value(v, path + ("attrs", k)) for k, v in attrs_d.items()},
            inputs=self.port_patterns(spec.get("input_ports"), path + ("input_ports",)),
            outputs=self.port_patterns(spec.get("output_ports"), path + ("output_ports",)),
            commutative=comm, line=line.line if line else None, body=body,
            consts={str(k): self.value(v, path + ("consts", k)) for k, v in consts_d.items()},
        )

    def pattern(self, spec: Any, path: tuple[Any, ...]) -> Pattern:
        spec = self.mapping(spec, path, "the matcher (src)", _MATCHER_KEYS)
        query = spec.get("query")
        if query is not None and not isinstance(query, str):
            raise self.error("'query' must be a graph regular expression string", path + ("query",))
        ops_d = self.mapping(spec.get("ops"), path + ("ops",), "ops")
        if not ops_d and query is None:
            raise self.error("the matcher has no ops (and no query)", path)
        if query is not None and (ops_d or spec.get("edges")):
            raise self.error("a matcher is either 'ops' and 'edges' or a 'query', not both", path + ("query",))
        ops = {str(k): self.op_pattern(str(k), v, path + ("ops", k)) for k, v in ops_d.items()}
        self.unique_vars(_pattern_vars(ops), path + ("ops",), "matcher")
        edges = self.edges(spec.get("edges"), path + ("edges",))
        for e, i in zip(edges, range(len(edges))):
            for end in (e.src, e.dst):
                if end.op not in ops:
                    raise self.error(f"edge {e} names {end.op!r}, which is not an op of the matcher",
                                     path + ("edges", i))
        where = self.expression(spec["where"], path + ("where",), "'where'") if "where" in spec else None
        return Pattern(ops, edges, where, query)

    def unique_vars(self, names: list[str], path: tuple[Any, ...], what: str) -> None:
        seen = set()
        for n in names:
            if n in seen:
                raise self.error(f"variable ${n} is declared twice in the {what}", path)
            seen.add(n)

    # -- mapper
    def port_templates(self, value: Any, path: tuple[Any, ...]) -> tuple[tuple[str, ValueSpec | None], ...] | None:
        if value is None:
            return None
        if not isinstance(value, list):
            raise self.error("ports are a list of '- name' or '- name: dtype'", path)
        out: list[tuple[str, ValueSpec | None]] = []
        for i, item in enumerate(value):
            if isinstance(item, str):
                out.append((item, None))
            elif isinstance(item, Mapping) and len(item) == 1:
                ((name, dt),) = item.items()
                out.append((str(name), self.value(dt, path + (i,)) if dt is not None else None))
            else:
                raise self.error(f"a port is '- name' or '- name: dtype', got {item!r}", path + (i,))
        return tuple(out)

    def op_template(self, key: str, spec: Any, path: tuple[Any, ...]) -> OpTemplate:
        spec = self.mapping(spec, path, f"op mapper {key!r}", _OP_MAPPER_KEYS)
        attrs_d = self.mapping(spec.get("attrs"), path + ("attrs",), "attrs")
        meta_d = self.mapping(spec.get("meta"), path + ("meta",), "meta")
        consts_d = self.mapping(spec.get("consts"), path + ("consts",), "consts")
        keep = spec.get("keep_attrs")
        if keep is not None and not isinstance(keep, bool):
            keep = self.strings(keep, path + ("keep_attrs",), "keep_attrs")
        line = self.loc(path)
        body = None
        if "ops" in spec or "edges" in spec:
            body = self.template({"ops": spec.get("ops"), "edges": spec.get("edges")}, path)
            for i, e in enumerate(body.edges):
                for end in (e.src, e.dst):
                    if end.op not in body.ops and end.op != "graph":
                        raise self.error(f"edge {e} in the body of {key!r} names {end.op!r}: body edges join the "
                                         "body's own ops and 'graph.<port>' (the op's ports)", path + ("edges", i))
        return OpTemplate(
            body=body,
            key=key, var=variable(key),
            type=self.value(spec["type"], path + ("type",)) if "type" in spec else None,
            name=self.value(spec["name"], path + ("name",)) if "name" in spec else None,
            attrs={str(k): self.value(v, path + ("attrs", k)) for k, v in attrs_d.items()},
            keep_attrs=keep,
            inputs=self.port_templates(spec.get("input_ports"), path + ("input_ports",)),
            outputs=self.port_templates(spec.get("output_ports"), path + ("output_ports",)),
            meta={str(k): self.value(v, path + ("meta", k)) for k, v in meta_d.items()},
            line=line.line if line else None,
            consts={str(k): self.value(v, path + ("consts", k)) for k, v in consts_d.items()},
        )

    def template(self, spec: Any, path: tuple[Any, ...]) -> Template:
        spec = self.mapping(spec, path, "the mapper (dst)", _MAPPER_KEYS)
        transforms = [k for k in ("remove", "fuse", "inline") if k in spec]
        if len(transforms) > 1:
            raise self.error(f"a mapper holds one transformation, got {', '.join(transforms)}", path)
        transform = transforms[0] if transforms else None
        args: dict[str, ValueSpec] = {}
        if transform is not None:
            if spec.get("ops") or spec.get("edges"):
                raise self.error(f"'{transform}' stands alone in a mapper (no ops or edges beside it)", path)
            raw = spec[transform]
            if transform == "fuse":
                raw = self.mapping(raw, path + ("fuse",), "fuse", ("type", "name", "attrs"))
                for k, v in raw.items():
                    args[k] = self.value(v, path + ("fuse", k))
            elif raw is not True:
                raise self.error(f"'{transform}' takes the value true", path + (transform,))
            return Template({}, (), transform, args)
        ops_d = self.mapping(spec.get("ops"), path + ("ops",), "ops")
        ops = {str(k): self.op_template(str(k), v, path + ("ops", k)) for k, v in ops_d.items()}
        edges = self.edges(spec.get("edges"), path + ("edges",))
        return Template(ops, edges)

    # -- rules and tables
    def rule(self, name: str, spec: Any, path: tuple[Any, ...], table_tags: tuple[str, ...]) -> Rule:
        self.rule_name = name
        spec = self.mapping(spec, path, f"rule {name!r}", _RULE_KEYS)
        if "src" not in spec:
            raise self.error("a rule needs a matcher ('src')", path)
        if "dst" not in spec:
            raise self.error("a rule needs a mapper ('dst')", path)
        src = self.pattern(spec["src"], path + ("src",))
        dst = self.template(spec["dst"], path + ("dst",))
        self.check_edges(src, dst, path + ("dst", "edges"))
        self.check_bodies(src, dst, path + ("dst",))
        comm = spec.get("commutative", False)
        repeat = spec.get("repeat", False)
        if not isinstance(comm, bool) or not isinstance(repeat, bool):
            raise self.error("'commutative' and 'repeat' are true or false", path)
        line = self.loc(path)
        rule = Rule(name, src, dst, self.strings(spec.get("apply_after"), path + ("apply_after",), "apply_after"),
                    tuple(dict.fromkeys(table_tags + self.strings(spec.get("tags"), path + ("tags",), "tags"))),
                    comm, repeat, line.line if line else None, dict(spec), self.filename)
        self.rule_name = None
        return rule

    def check_bodies(self, src: Pattern, dst: Template, path: tuple[Any, ...]) -> None:
        for key, tpl in dst.ops.items():
            if tpl.body is not None and key in src.ops:
                raise self.error(f"mapper op {key!r} updates a matched op, so it cannot be given a new body "
                                 "(a body is built for new ops only)", path + ("ops", key))

    def check_edges(self, src: Pattern, dst: Template, path: tuple[Any, ...]) -> None:
        for i, e in enumerate(dst.edges):
            for end in (e.src, e.dst):
                if end.op not in dst.ops and end.op not in src.ops:
                    raise self.error(f"edge {e} names {end.op!r}, which is in neither the matcher nor the mapper",
                                     path + (i,))
                if end.port_var is not None and end.op in src.ops:
                    bound = {p.var for o in [src.ops[end.op]] for p in (o.inputs or ()) + (o.outputs or ())}
                    if end.port_var not in bound:
                        raise self.error(f"edge {e}: port variable ${end.port_var} is not bound by the matcher's "
                                         f"op {end.op!r}", path + (i,))

    def table(self, data: Any, default_name: str | None) -> MappingTable:
        if isinstance(data, Mapping) and "table" in data:
            extra = [k for k in data if k != "table"]
            if extra:
                raise self.error(f"unexpected top-level key {extra[0]!r} beside 'table'", (extra[0],))
            data = data["table"]
            base: tuple[Any, ...] = ("table",)
        else:
            base = ()
        spec = self.mapping(data, base, "a mapping table", _TABLE_KEYS)
        for key in ("src", "dst", "rules"):
            if key not in spec:
                raise self.error(f"a mapping table needs '{key}'", base)
        name = spec.get("name", default_name)
        if not isinstance(name, str) or not name:
            raise self.error("a table needs a name (give 'name:', or load it from a file)", base)
        self.table_name = name
        for key in ("src", "dst"):
            if not isinstance(spec[key], str):
                raise self.error(f"'{key}' must be a namespace (or version range)", base + (key,))
            from ..errors import NamespaceError
            from ..namespace.names import parse_spec

            try:
                parse_spec(spec[key])
            except NamespaceError as e:
                raise self.error(str(e), base + (key,)) from None
        tags = self.strings(spec.get("tags"), base + ("tags",), "tags")
        rules_d = self.mapping(spec["rules"], base + ("rules",), "rules")
        rules: dict[str, Rule] = {}
        for rname, rspec in rules_d.items():
            rules[str(rname)] = self.rule(str(rname), rspec, base + ("rules", rname), tags)
        carry = spec.get("carry", "none")
        if carry not in ("none", "unchanged"):
            raise self.error("'carry' is 'none' or 'unchanged'", base + ("carry",))
        bidir = spec.get("bidirectional", False)
        if not isinstance(bidir, bool):
            raise self.error("'bidirectional' is true or false", base + ("bidirectional",))
        part_of = spec.get("part_of")
        if part_of is not None and (not isinstance(part_of, str) or not part_of):
            raise self.error("'part_of' names the table this file is a part of", base + ("part_of",))
        ahead = spec.get("ahead", False)
        if not isinstance(ahead, bool):
            raise self.error("'ahead' is true or false", base + ("ahead",))
        if ahead and bidir:
            raise self.error("a table that goes ahead converts some ops one way; it cannot be bidirectional",
                             base + ("ahead",))
        table = MappingTable(name, spec["src"], spec["dst"], rules, tags, carry, bidir, self.filename, self.trusted,
                             description=str(spec.get("description", "")), raw=dict(spec), part_of=part_of,
                             ahead=ahead)
        if part_of is not None:
            return table  # apply_after may name rules of the other parts: checked when the parts are merged
        try:
            order_rules(table.rules, table.name)
        except TableError as e:
            where = base + ("rules", e.rule, "apply_after") if e.rule else base
            raise TableError(e.reason, self.loc(where), e.rule, self.table_name) from None
        return table


def merge_parts(tables: Iterable[MappingTable]) -> list[MappingTable]:
    """Tables with the same ``part_of`` merged into one table of that name, where the first part stood; rules in
    the parts' order, then each part's declaration order.  The parts must agree on ``src``, ``dst``, ``carry``,
    ``bidirectional`` and ``ahead``, and rule names must be unique across them; ``apply_after`` may name a rule of
    any part."""
    out: list[MappingTable] = []
    groups: dict[str, MappingTable] = {}
    for t in tables:
        if t.part_of is None:
            out.append(t)
            continue
        merged = groups.get(t.part_of)
        if merged is None:
            merged = MappingTable(t.part_of, t.src, t.dst, {}, (), t.carry, t.bidirectional, t.source, t.trusted,
                                  t.plugin, t.description, {"parts": []}, ahead=t.ahead)
            groups[t.part_of] = merged
            out.append(merged)
        else:
            for attr in ("src", "dst", "carry", "bidirectional", "ahead"):
                if getattr(t, attr) != getattr(merged, attr):
                    raise TableError(f"is a part of {t.part_of!r}, whose other parts say {attr} "
                                     f"{getattr(merged, attr)!r}, not {getattr(t, attr)!r}",
                                     Location(t.source) if t.source else None, None, t.name)
            merged.trusted = merged.trusted and t.trusted
        for name, rule in t.rules.items():
            if name in merged.rules:
                raise TableError(f"rule {name!r} is also in another part of {t.part_of!r} ({merged.source})",
                                 Location(t.source) if t.source else None, name, t.name)
            merged.rules[name] = rule
        merged.raw["parts"].append(t.source or t.name)
    for merged in groups.values():
        order_rules(merged.rules, merged.name)
    return out


def table_from_dict(data: Mapping[str, Any], *, name: str | None = None, trusted: bool = True,
                    source: str | None = None, text: str | None = None) -> MappingTable:
    """Build a table from its parsed YAML form (``{"table": {...}}`` or the inner mapping)."""
    return _Parser(text, source, None, trusted).table(data, name)


def load_table(source: str | os.PathLike[str], *, filename: str | None = None, trusted: bool = False
               ) -> MappingTable:
    """Read a table from a YAML file (a path) or YAML text.

    ``trusted`` says whether the table may hold expressions: tables from plugins are trusted; a file named by a
    user runs expressions only when the user says so (``--trust-expressions``).
    """
    from ..errors import FormatError
    from ..serialization.graph_yaml import load_values
    from ..serialization.yamlio import read_yaml_text

    text, fname = read_yaml_text(source, filename)
    try:
        data = load_values(text, filename=fname, positions=True)
    except FormatError as e:
        raise TableError(e.reason, e.location) from None
    default = None
    if fname:
        default = os.path.basename(fname)
        for ext in (".yaml", ".yml"):
            if default.endswith(ext):
                default = default[: -len(ext)]
    return _Parser(text, fname, None, trusted).table(data, default)


def table_to_dict(table: MappingTable) -> dict[str, Any]:
    """The YAML form of a table (what it was loaded from, or what a generator built)."""
    body: dict[str, Any] = {"name": table.name, "src": table.src, "dst": table.dst}
    if table.description:
        body["description"] = table.description
    if table.tags:
        body["tags"] = list(table.tags)
    if table.carry != "none":
        body["carry"] = table.carry
    if table.bidirectional:
        body["bidirectional"] = True
    if table.ahead:
        body["ahead"] = True
    body["rules"] = {name: _rule_raw(rule, table.tags) for name, rule in table.rules.items()}
    return {"table": body}


def _rule_raw(rule: Rule, table_tags: tuple[str, ...]) -> dict[str, Any]:
    raw = dict(rule.raw)
    own = [t for t in rule.tags if t not in table_tags]
    if own:
        raw["tags"] = own
    else:
        raw.pop("tags", None)
    return raw


def dump_table(table: MappingTable) -> str:
    """YAML text of a table; loading it gives an equal table."""
    from ..serialization.graph_yaml import dump_values

    return dump_values(table_to_dict(table))
