"""Collect every operator schema the installed torch registers (run with torch importable).

``python -m amanda_torch._generate OUT.json`` writes the raw records that
:mod:`amanda_torch.schemas` turns into the namespace schema.  It runs in a
child process so that what the namespace holds depends only on the installed
torch, never on what the calling process imported or registered.

What is collected:

1. ``import torch``: every ``FunctionSchema`` in
   ``torch._C._jit_get_all_schemas()``.  That list is the operator registry
   seen by TorchScript; it also holds the dispatcher's operators (``aten::``,
   ``prims::``, ``quantized::``, custom namespaces registered in C++), and it
   follows later registrations made with ``torch.library``.
2. torch's own Python modules that register operators with ``torch.library``
   (``c10d_functional::``, ``quantized_decomposed::``, ``onnx::`` ...) do so
   only when imported.  They are found by scanning the installed package's
   sources for ``Library(``, ``custom_op``, ``library.define(`` and
   ``triton_op(``, and imported one by one (test-only packages excepted:
   ``torch/testing``, ``torch/test``); each schema that appears is attributed
   to the module whose import registered it.  Modules that fail to import
   are listed with the error.
3. As a check, every name in the dispatcher (``_dispatch_get_all_op_names``)
   must be among the collected schemas; a missing one is fetched from the
   dispatcher directly and counted in ``dispatcher_only``.

Invariant: each record is one registered ``(name, overload)`` pair, listed
once, with ``str(schema)`` as torch prints it and the Python values of its
argument defaults in argument order (``null`` where there is none; see
``has_default``).
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from typing import Any

GENERATOR_VERSION = "1"
_REGISTERS_OPS = re.compile(r"Library\(|custom_op\b|library\.define\(|triton_op\(")
_SKIP_DIRS = ("testing", "test")


def _json_value(value: Any, where: str) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return {"float": repr(value)}  # inf / nan: JSON has no literal for them
    if isinstance(value, (list, tuple)):
        return [_json_value(v, where) for v in value]
    if isinstance(value, complex):
        return {"complex": [value.real, value.imag]}
    raise TypeError(f"{where}: default value {value!r} of type {type(value).__name__} cannot be stored")


def _record(schema: Any, module: str | None) -> dict[str, Any]:
    text = str(schema)
    defaults = []
    has_default = []
    for a in schema.arguments:
        has = bool(a.has_default_value())
        has_default.append(has)
        defaults.append(_json_value(a.default_value, f"{text} argument {a.name}") if has else None)
    rec: dict[str, Any] = {"schema": text, "defaults": defaults, "has_default": has_default}
    if module:
        rec["module"] = module
    return rec


def _key(schema: Any) -> tuple[str, str]:
    return schema.name, schema.overload_name


def registering_modules(torch_dir: str) -> list[str]:
    """Modules of the torch package whose source registers operators through ``torch.library``."""
    found = []
    for root, dirs, files in os.walk(torch_dir):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("__"))
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            path = os.path.join(root, f)
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
            except OSError:
                continue
            if not _REGISTERS_OPS.search(text):
                continue
            rel = os.path.relpath(path, os.path.dirname(torch_dir))[:-3].replace(os.sep, ".")
            if rel.endswith(".__init__"):
                rel = rel[: -len(".__init__")]
            found.append(rel)
    return found


def collect() -> dict[str, Any]:
    """Every operator schema of the installed torch, as JSON-ready records."""
    import importlib
    import warnings

    warnings.simplefilter("ignore")
    start = time.perf_counter()
    import torch

    records: dict[tuple[str, str], dict[str, Any]] = {}
    for s in torch._C._jit_get_all_schemas():
        records.setdefault(_key(s), _record(s, None))
    imported, failed = [], {}
    for module in registering_modules(os.path.dirname(torch.__file__)):
        try:
            importlib.import_module(module)
        except BaseException as e:  # any failure is recorded; none stops the collection
            failed[module] = f"{type(e).__name__}: {e}"[:300]
            continue
        imported.append(module)
        for s in torch._C._jit_get_all_schemas():
            if _key(s) not in records:
                records[_key(s)] = _record(s, module)
    dispatcher_only = []
    for full in torch._C._dispatch_get_all_op_names():
        name, _, overload = full.partition(".")
        if (name, overload) not in records:
            s = torch._C._dispatch_find_schema_or_throw(name, overload).schema()
            records[(name, overload)] = _record(s, None)
            dispatcher_only.append(full)
    from importlib.metadata import version

    return {
        "generator": GENERATOR_VERSION,
        "torch_version": version("torch"),
        "torch_runtime_version": torch.__version__,
        "modules_imported": imported,
        "modules_failed": failed,
        "dispatcher_only": dispatcher_only,
        "seconds": round(time.perf_counter() - start, 3),
        "schemas": [records[k] for k in sorted(records)],
    }


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m amanda_torch._generate OUT.json", file=sys.stderr)
        return 2
    data = collect()
    tmp = argv[0] + ".part"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(tmp, argv[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
