"""The command line's part of locked, recorded conversion and of table choice: ``amanda lock``,
``amanda convert --lock FILE`` and ``--exclude-table NAME``, the provenance ``convert`` records and ``inspect``
shows, and why ``amanda tables`` does not use a table (see :mod:`amanda_core.lock`)."""

from __future__ import annotations

__all__ = ["add_lock_command", "add_convert_options", "check_lock", "choose_tables", "record_provenance",
           "provenance_info", "print_provenance", "unused_reason"]

import argparse
import json
import sys
from typing import Any, Sequence

from ..errors import AmandaError


def add_lock_command(sub: Any) -> None:
    """``amanda lock [-o FILE] [--print]``."""
    p = sub.add_parser("lock", help="write what decides a conversion (versions of Amanda, plugins, frameworks; "
                                    "table hashes) to a lock file",
                       description="Write a lock file: Amanda's version, every loaded plugin and its version, every "
                                   "framework behind a namespace and its version, every namespace family and its "
                                   "versions, and a content hash of every mapping table. amanda convert --lock FILE "
                                   "then refuses to run where any of it differs.")
    p.add_argument("-o", dest="lock_file", default="amanda.lock", metavar="FILE",
                   help="the lock file to write (default amanda.lock)")
    p.add_argument("--print", dest="print_lock", action="store_true", help="print the lock instead of writing it")
    p.set_defaults(func=cmd_lock)


def cmd_lock(args: argparse.Namespace) -> int:
    from ..lock import environment, write_lock

    env = environment()
    if args.print_lock:
        sys.stdout.write(json.dumps(env, indent=2, sort_keys=True) + "\n")
        return 0
    path = write_lock(args.lock_file, env)
    print(f"wrote {path}: amanda-core {env['amanda']}, {len(env['plugins'])} plugin(s), "
          f"{len(env['frameworks'])} framework(s), {len(env['tables'])} table(s)")
    return 0


def add_convert_options(p: argparse.ArgumentParser) -> None:
    """``convert``'s ``--lock FILE`` and ``--exclude-table NAME``."""
    p.add_argument("--lock", metavar="FILE",
                   help="refuse to convert unless this environment matches the lock file (amanda lock writes one); "
                        "every difference is listed")
    p.add_argument("--exclude-table", action="append", metavar="NAME",
                   help="do not use this installed table (its name, or PLUGIN:NAME; repeatable); --explain says "
                        "which table won where several cover the same step")


def check_lock(args: argparse.Namespace, reg: Any) -> None:
    """With ``--lock FILE``: an error listing every difference between the lock and this environment."""
    path = getattr(args, "lock", None)
    if not path:
        return
    from ..lock import differences, environment, read_lock

    locked = read_lock(path)
    diff = differences(locked, environment(reg))
    if diff:
        raise AmandaError(f"this environment does not match {path} ({len(diff)} difference(s)); nothing was "
                          "converted:\n" + "\n".join(diff))


def choose_tables(args: argparse.Namespace, tables: Sequence[Any]) -> list[Any]:
    """The tables a conversion may use: all but those ``--exclude-table`` names (a name no table has is an
    error).  Tables whose ranges admit no installed namespace stay: the planner never reaches them."""
    from ..mapping.planner import exclude_tables

    return exclude_tables(tables, getattr(args, "exclude_table", None))


def record_provenance(args: argparse.Namespace, result: Any) -> None:
    """A conversion (``--to``) records its provenance in the output graph (:func:`amanda_core.lock.attach_provenance`);
    a re-export without ``--to`` leaves the model as it was."""
    if not getattr(args, "to", None):
        return
    from ..ir.layout import layout_record
    from ..lock import attach_provenance, provenance

    record = provenance(result, result.source)
    record.update(layout_record(result.graph))  # (a layout pass moved the interface: amanda check reads it)
    attach_provenance(result.graph, record)


def provenance_info(graph: Any) -> dict[str, Any] | None:
    from ..lock import read_provenance

    return read_provenance(graph)


def print_provenance(graph: Any) -> None:
    """``amanda inspect``'s lines on how a model was converted (nothing for one Amanda did not convert)."""
    from ..lock import provenance_lines, read_provenance

    record = read_provenance(graph)
    if record is not None:
        for line in provenance_lines(record):
            print(line)


def unused_reason(reg: Any, table: Any) -> str | None:
    """Why ``amanda tables`` lists ``table`` as not used (its ranges admit no installed namespace), or None."""
    from ..mapping.registry import unusable_reason

    return unusable_reason(table, reg.namespaces)
