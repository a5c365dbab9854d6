"""Writing ``amanda/pytorch`` graphs: a ``GraphModule``, a ``.pt2`` file (``torch.export``) or a readable ``.py``
module with its weights in a ``.safetensors`` file beside it.

Every output is made whole in memory (module built, program exported, source and weights serialised) before
anything is written, and written atomically: on failure no file is left, and a ``.py`` and its weights appear
together or not at all.
"""

from __future__ import annotations

__all__ = ["save_model", "to_module", "export_program", "dynamic_shapes"]

import io
import os
import warnings
from pathlib import Path
from typing import Any, Mapping

from amanda_core import Graph
from amanda_core.errors import AmandaError, first_line
from amanda_core.serialization.files import atomic_write, atomic_write_many

from .module import build_module, to_module
from .program import Program, lower
from .valuetypes import TensorValueType

_FIRST_HINT = 2


def _symbols(program: Program) -> dict[str, int]:
    """Each symbolic dimension name of the inputs, in order of appearance, with its position."""
    found: dict[str, int] = {}
    for _, _, dtype in program.inputs:
        if isinstance(dtype, TensorValueType):
            for d in dtype.symbolic_sizes() or ():
                if isinstance(d, str) and d not in found:
                    found[d] = len(found)
    return found


def dynamic_shapes(program: Program, dims: Mapping[str, int] | None = None) -> tuple[tuple[Any, ...], list[Any]]:
    """Example arguments for ``torch.export`` and its ``dynamic_shapes``: a ``torch.export.Dim`` per symbolic
    dimension name (one object per name, so dimensions named alike stay equal), ``Dim.AUTO`` for unknown
    (``*``) dimensions.  A symbolic dimension's example size is ``dims[name]``, else 2, 3, 4 ... in order of
    appearance (distinct, and never 0 or 1, which torch.export would specialise)."""
    import numpy as np
    import torch

    from .runner import _numpy_dtype, _random
    from .tensors import to_torch

    dims = dict(dims or {})
    symbols = _symbols(program)
    objects = {name: torch.export.Dim(_dim_name(name, i)) for name, i in symbols.items()}
    rng = np.random.default_rng(0)
    args: list[Any] = []
    specs: list[Any] = []
    for name, _, dtype in program.inputs:
        if not isinstance(dtype, TensorValueType) or dtype.symbolic_sizes() is None:
            raise AmandaError(f"graph input {name!r} is {dtype or 'untyped'}: torch.export needs a tensor type "
                              "of known rank for each input")
        shape: list[int] = []
        spec: dict[int, Any] = {}
        for axis, d in enumerate(dtype.symbolic_sizes() or ()):
            if isinstance(d, int):
                shape.append(d)
            elif d is None:
                shape.append(_FIRST_HINT)
                spec[axis] = torch.export.Dim.AUTO
            else:
                shape.append(int(dims.get(d, _FIRST_HINT + symbols[d])))
                spec[axis] = objects[d]
        args.append(to_torch(_random(rng, _numpy_dtype(dtype.scalarType(), name), shape)))
        specs.append(spec or None)
    return tuple(args), specs


def _dim_name(name: str, i: int) -> str:
    ident = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return ident if ident and not ident[0].isdigit() else f"d{i}_{ident}"


def export_program(graph: Graph, *, dims: Mapping[str, int] | None = None, strict: bool = False) -> Any:
    """``torch.export.export`` of the graph's module, with dynamic dimensions for the symbolic ones."""
    import torch

    program = lower(graph)
    module = build_module(program)
    args, specs = dynamic_shapes(program, dims)
    try:
        try:
            return torch.export.export(module, args, dynamic_shapes=tuple(specs), strict=strict)
        except Exception as e:  # noqa: BLE001 - narrowed below: only torch's suggested ranges are taken
            from .importer import refined_ranges

            refined = refined_ranges(e, tuple(specs), "the graph's module")
            if refined is None:
                raise
            return torch.export.export(module, args, dynamic_shapes=refined, strict=strict)
    except AmandaError:
        raise
    except Exception as e:  # torch.export raises many kinds; its first line says what failed
        readers = sizes_from_tensors(graph)
        why = ""
        if readers:
            shown = ", ".join(readers[:5]) + (f" and {len(readers) - 5} more" if len(readers) > 5 else "")
            why = (f" (it cannot trace a size read from a tensor's values: {shown}; the module runs eagerly: "
                   "write a .py file instead)")
        raise AmandaError(f"torch.export cannot export the graph: {first_line(e)}{why}") from None


_SIZE_TYPES = frozenset({"torch.SymInt[]", "torch.int[]", "torch.SymInt", "torch.int", "torch.SymInt[]?",
                         "torch.int[]?", "torch.SymInt?", "torch.int?"})


def sizes_from_tensors(graph: Graph) -> list[str]:
    """The ops of ``graph`` that take a size or a size list from a tensor's values (``aten::reshape.default``
    whose ``shape`` an ``aten::where.self`` computes, as the general ONNX Reshape rule writes a shape computed at
    run time), as ``name (type reads port from producer)``: torch runs them eagerly, but torch.export cannot
    trace a size that depends on data."""
    from amanda_core.plugin import registry

    try:
        schema = registry().namespaces.schema(graph.namespace or "")
    except AmandaError:
        return []
    found = []
    for op in graph.topological_order():
        own = schema.get(op.type) if op.type else None
        if own is None:
            continue
        for p in op.input_ports:
            slot = own.input(p.name)
            src = p.source
            if slot is None or slot.type not in _SIZE_TYPES or src is None or src.op is None:
                continue
            producer = src.op
            made = schema.get(producer.type) if producer.type else None
            out = made.output(src.name) if made is not None else None
            if out is not None and out.type == "torch.Tensor":
                found.append(f"{op.name} ({op.type} reads {p.name!r} from {producer.name}, a tensor)")
    return found


PROVENANCE_FILE = "amanda_provenance.json"
"""The extra file of a ``.pt2`` archive that records what made it (``amanda inspect`` shows it)."""


def _provenance_text(graph: Graph) -> str | None:
    """The provenance a conversion recorded in ``graph.attrs["amanda_provenance"]``, as compact sorted JSON."""
    import json

    record = graph.attrs.get("amanda_provenance")
    if record is None:
        return None
    return record if isinstance(record, str) else json.dumps(record, sort_keys=True, separators=(",", ":"))


DIMS_FILE = "amanda_dims.json"
"""The extra file of a ``.pt2`` archive that names its inputs' symbolic dimensions (``{"x": {"0": "batch"}}``):
torch.export keeps only its own symbols (``s77``), so without it a ``.pt2`` read back would not know ``batch``
(and ``--dim batch=3`` would name nothing)."""


def _dims_text(program: Any, graph: Graph) -> str | None:
    """What :data:`DIMS_FILE` holds for ``program``, exported from ``graph``: each user input's named symbolic
    dims by position (the graph's inputs are the program's user inputs, in order)."""
    import json

    from .valuetypes import parse_value_type

    placeholders = [s.arg.name for s in program.graph_signature.input_specs
                    if s.kind.name == "USER_INPUT" and hasattr(s.arg, "name")]
    out: dict[str, dict[str, str]] = {}
    for placeholder, port in zip(placeholders, graph.input_ports):
        dtype = parse_value_type(str(port.dtype)) if port.dtype is not None else None
        if not isinstance(dtype, TensorValueType):
            continue
        sizes = dtype.symbolic_sizes() or ()
        named = {str(i): d for i, d in enumerate(sizes) if isinstance(d, str) and d.isidentifier()}
        if named:
            out[placeholder] = named
    return json.dumps(out, sort_keys=True) if out else None


def _save_pt2(graph: Graph, path: str, dims: Mapping[str, int] | None) -> Any:
    import torch

    program = export_program(graph, dims=dims)
    buffer = io.BytesIO()
    record = _provenance_text(graph)
    extra = {PROVENANCE_FILE: record} if record is not None else {}
    named = _dims_text(program, graph)
    if named is not None:
        extra[DIMS_FILE] = named
    with warnings.catch_warnings():
        # weights that are views of one buffer (a TF model's constants): torch saves the first view's storage,
        # which holds every byte here (the tensors are on the CPU), and says so in a warning a user cannot act on
        warnings.filterwarnings("ignore", message="No complete tensor found in the group")
        torch.export.save(program, buffer, extra_files=extra or None)
    with atomic_write(path, "wb") as f:
        f.write(buffer.getvalue())
    return program


def _save_py(graph: Graph, path: str, weights: str | None, class_name: str | None) -> str:
    from .codegen import module_source, weight_values
    from .safetensors_writer import write_safetensors

    stem = Path(path).stem
    weights_file = weights or f"{stem}.safetensors"
    if os.path.basename(weights_file) != weights_file or weights_file in ("", ".", ".."):
        raise AmandaError(f"the weights file must be a file name beside {path}, got {weights_file!r}")
    program = lower(graph)
    name = class_name or str(graph.attrs.get("name") or "Model")
    source = module_source(program, weights_file, name, title=os.path.basename(path))
    record = _provenance_text(graph)
    if record is not None:  # what made the file, in a comment after the module's docstring and in the weights
        head, sep, rest = source.partition('"""\n\n')
        line = f"# amanda provenance: {record}\n"
        source = f"{head}{sep}{line}{rest}" if sep else line + source
    compile(source, path, "exec")  # a generated module that does not parse is a bug here, not a file to leave
    metadata = {"format": "pt", "namespace": program.namespace}
    if record is not None:
        metadata["amanda.provenance"] = record
    target = os.path.join(os.path.dirname(os.path.abspath(path)), weights_file)
    with atomic_write_many([path, target], "wb") as (py, st):  # both appear together, or neither
        py.write(source.encode("utf-8"))
        write_safetensors(st, weight_values(program), metadata)  # streamed: the weights are never gathered
    return source


def save_model(graph: Graph, target: str | os.PathLike[str] | None = None, *,
               dims: Mapping[str, int] | None = None, weights: str | None = None,
               class_name: str | None = None, copy: bool = False) -> Any:
    """Write ``graph`` (in ``amanda/pytorch/<version>``) to ``target``.

    * ``.pt2``: ``torch.export.save`` of the ``ExportedProgram`` of the graph's module, with a
      ``torch.export.Dim`` for each symbolic input dimension (``Float(batch, 3, 224, 224)``); ``dims`` gives
      the example sizes used while exporting (default 2, 3 ... per name).  Returns the program.
    * ``.py``: a module file with one ``torch.nn.Module`` class (``class_name``, default the graph's ``name``
      attribute or ``Model``) and its weights in ``weights`` (a file name beside it, default
      ``<stem>.safetensors``), which the class loads by a path relative to the module file.  Returns the source.

    Without ``target``: the ``torch.fx.GraphModule`` (:func:`amanda_torch.module.to_module`; ``copy`` as there).
    """
    if target is None:
        return to_module(graph, copy=copy)
    path = os.fspath(target)
    lowered = path.lower()
    if lowered.endswith(".pt2"):
        return _save_pt2(graph, path, dims)
    if lowered.endswith(".py"):
        return _save_py(graph, path, weights, class_name)
    raise AmandaError(f"the torch exporter writes .pt2 and .py files, not {os.path.basename(path)}")
