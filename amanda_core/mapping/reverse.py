"""Deriving the reverse of a ``bidirectional`` table.

A rule can be reversed when it renames one op into one op and converts attributes in ways that can be undone:

* the matcher is one op with a literal type, attributes that are literals or ``$captures``, no edges, no
  ``where``, no listed ports;
* the mapper is one op with a literal type, no edges, and attributes that are literals, ``$captures``, or one
  call ``${f($v, ...)}`` of a library function with a declared inverse (``nhwc_to_nchw_axis`` /
  ``nchw_to_nhwc_axis``, ``perm_to_nchw`` / ``perm_to_nhwc``, ``tensor_to_ints`` / ``ints_to_tensor``,
  ``spatial`` / ``with_layout``, ``pads_to_pairs`` / ``pads_from_pairs``, ``auto_pad_from_padding`` /
  ``padding_from_auto_pad``, ``bool_to_str`` -> ``str_equals``, and ``convert_dtype(v, a, b)`` undone by
  ``convert_dtype(v, b, a)``) whose other arguments are literals.

The reverse rule matches the target op (literal attributes must match, converted ones are captured) and turns it
back into the source op in place (same name and edges; its literal attributes set, captured ones converted
back).  Any other rule in a bidirectional table
is an error naming it.
"""

from __future__ import annotations

__all__ = ["reverse_table"]

import ast
from typing import Any

from .attrconv import INVERSES
from .table import MappingTable, Rule, TableError, ValueSpec, table_from_dict


def _call(spec: ValueSpec) -> tuple[str, str, list[Any]] | None:
    """``${f($v, 1, 'x')}`` -> ("f", "v", [1, "x"])."""
    src = spec.value.source.strip()
    if src.startswith("${") and src.endswith("}"):
        src = src[2:-1]
    src = src.strip().replace("$", "")
    try:
        tree = ast.parse(src, mode="eval")
    except SyntaxError:
        return None
    node = tree.body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.keywords:
        return None
    if not node.args or not isinstance(node.args[0], ast.Name):
        return None
    rest = []
    for a in node.args[1:]:
        try:
            rest.append(ast.literal_eval(a))
        except ValueError:
            return None
    return node.func.id, node.args[0].id, rest


def _inverse_call(fn: str, var: str, args: list[Any]) -> str | None:
    inv = INVERSES.get(fn)
    if inv is None:
        return None
    if fn == "convert_dtype":
        if len(args) != 2:
            return None
        args = [args[1], args[0]]
    elif fn == "str_equals":
        return None  # which string stands for false is not known
    elif fn == "bool_to_str":
        args = args[:1]
    elif fn in ("ints_to_tensor", "floats_to_tensor", "tensor_to_ints", "tensor_to_floats"):
        args = []
    return f"${{{inv}({var}{''.join(', ' + repr(a) for a in args)})}}"


def _reverse_rule(rule: Rule) -> dict[str, Any]:
    def refuse(why: str) -> TableError:
        return TableError(f"cannot be reversed: {why} (a bidirectional table holds only one-op renames with "
                          "attribute conversions that have inverses)", None, rule.name)

    src, dst = rule.src, rule.dst
    if src.query is not None or len(src.ops) != 1 or src.edges or src.where is not None:
        raise refuse("the matcher is not a single op without edges or conditions")
    if dst.transform is not None or len(dst.ops) != 1 or dst.edges:
        raise refuse("the mapper is not a single op without edges")
    (pkey, pat), = src.ops.items()
    (tkey, tpl), = dst.ops.items()
    if pat.type is None or pat.type.kind != "literal" or isinstance(pat.type.value, list):
        raise refuse("the matched op type is not one literal")
    if tpl.type is None or tpl.type.kind != "literal":
        raise refuse("the mapped op type is not a literal")
    if pat.inputs or pat.outputs or tpl.inputs or tpl.outputs or pat.name is not None or tpl.name is not None:
        raise refuse("it lists ports or names")
    captured = {}
    new_src_attrs: dict[str, Any] = {}
    for name, spec in pat.attrs.items():
        if spec.kind == "literal":
            new_src_attrs[name] = spec.value
        elif spec.kind == "var":
            captured[spec.value] = name
        else:
            raise refuse(f"matcher attribute {name!r} is an expression")
    match_attrs: dict[str, Any] = {}
    for name, spec in tpl.attrs.items():
        if spec.kind == "literal":
            match_attrs[name] = spec.value
        elif spec.kind == "var":
            if spec.value not in captured:
                raise refuse(f"mapper attribute {name!r} uses ${spec.value}, which the matcher does not capture")
            match_attrs[name] = f"${spec.value}"
            new_src_attrs[captured[spec.value]] = f"${spec.value}"
        else:
            call = _call(spec)
            if call is None:
                raise refuse(f"mapper attribute {name!r} is not a call of a library function on a capture")
            fn, var, args = call
            if var not in captured:
                raise refuse(f"mapper attribute {name!r} converts {var!r}, which the matcher does not capture")
            inverse = _inverse_call(fn, var, args)
            if inverse is None:
                raise refuse(f"mapper attribute {name!r}: {fn} has no inverse that can be written")
            match_attrs[name] = f"${var}"
            new_src_attrs[captured[var]] = inverse
    key = "$op"
    raw: dict[str, Any] = {
        "src": {"ops": {key: {"type": tpl.type.value, **({"attrs": match_attrs} if match_attrs else {})}}},
        "dst": {"ops": {key: {"type": pat.type.value,
                                     **({"attrs": new_src_attrs} if new_src_attrs else {})}}},
    }
    if rule.tags:
        raw["tags"] = list(rule.tags)
    del pkey, tkey
    return raw


def reverse_table(table: MappingTable) -> MappingTable:
    """The reverse of a ``bidirectional`` table (named ``<name>.reverse``)."""
    rules = {}
    for rule in table.rules.values():
        try:
            rules[rule.name] = _reverse_rule(rule)
        except TableError as e:
            raise TableError(e.reason, None, rule.name, table.name) from None
    data = {"name": f"{table.name}.reverse", "src": table.dst, "dst": table.src, "rules": rules}
    if table.carry != "none":
        data["carry"] = table.carry
    reversed_table = table_from_dict({"table": data}, trusted=True, source=table.source)
    reversed_table.plugin = table.plugin
    return reversed_table
