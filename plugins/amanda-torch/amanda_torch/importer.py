"""PyTorch programs -> Amanda graphs in ``amanda/pytorch/<installed torch>`` (the representation of ``docs/torch.md``).

Entry points: :func:`load_model` (a path, a live module, an ``ExportedProgram``, a TorchScript module) and
:func:`is_torch_program`.  Two paths:

* **torch.export** (:class:`_FxImporter`): a live ``nn.Module`` is exported with its example inputs (or inputs
  made from ``InputSpec``s, symbolic dims as ``torch.export.Dim``), a ``.pt2`` file is read with
  ``torch.export.load``; the ``ExportedProgram``'s FX graph becomes ops of the ATen overloads it calls.
* **TorchScript** (:mod:`amanda_torch.torchscript`): ``.pt`` files and scripted or traced modules.

Torch is imported inside the functions, never when this module is imported by the plugin.
"""

from __future__ import annotations

__all__ = ["load_model", "is_torch_program", "torch_namespace", "value_type_text", "tensor_value",
           "plain_literal"]

import contextlib
import mmap
import operator
import os
import re
import threading
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from amanda_core.errors import AmandaError, FormatError, Location, first_line
from amanda_core.ir import Graph, OutputPort, bulk_build

from .scalar_types import LAYOUTS, MEMORY_FORMATS, lookup_enum, lookup_scalar_type
from .schemas import FAMILY, TorchNamespaces, installed_torch_version, namespace_version

_NAMESPACES = TorchNamespaces()
_NAME = re.compile(r"[^A-Za-z0-9_]+")

DROPPED_TARGETS = (
    "aten::_assert_tensor_metadata", "aten::_assert_scalar", "aten::_assert_async", "aten::sym_constrain_range",
    "aten::sym_constrain_range_for_size", "aten::_functional_assert_scalar", "aten::_functional_assert_async",
    "aten::_functional_sym_constrain_range", "aten::_functional_sym_constrain_range_for_size",
)
"""Runtime assertions torch.export records (``torch._check``, metadata and range checks): they compute nothing,
return nothing a graph uses, and are left out of the graph (docs/torch.md)."""


class TorchImportError(FormatError):
    """A PyTorch program that cannot be read or exported."""


def torch_namespace() -> str:
    """``amanda/pytorch/<installed torch version>``."""
    full = installed_torch_version()
    if full is None:
        raise AmandaError("torch is not installed")
    return f"{FAMILY}/{namespace_version(full)}"


def is_torch_program(obj: Any) -> bool:
    """True for a live ``nn.Module`` (scripted and traced ones too), ``ExportedProgram``, TorchScript function,
    or a ``(module, example_inputs)`` pair."""
    import torch

    if isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[0], torch.nn.Module):
        return True
    return isinstance(obj, (torch.nn.Module, torch.export.ExportedProgram, torch.jit.ScriptFunction))


# --------------------------------------------------------------------------- entry point


def load_model(source: Any, *, inputs: Any = None, outputs: Sequence[Any] | None = None,
               example_inputs: Any = None, dynamic_shapes: Any = None, strict: bool = False,
               freeze: bool = True, seed: int = 0, **options: Any) -> Graph:
    """Read a PyTorch program into a graph of ``amanda/pytorch/<installed torch>``.

    ``source``: a ``.pt2`` file (``torch.export.save``), a ``.pt``/``.pth`` TorchScript file
    (``torch.jit.save``), an ``ExportedProgram``, a ``ScriptModule``/``ScriptFunction``, a live ``nn.Module``,
    or a ``(module, example_inputs)`` pair as the test factories return.

    A live module is exported with ``torch.export.export``; its example inputs are ``example_inputs`` (a tuple
    of positional arguments or a dict of keyword arguments), or ``inputs``: either such a tuple/dict, or a list
    of input specs (objects with ``.name``, ``.dtype``, ``.shape``; a dim that is a string is symbolic and
    becomes a ``torch.export.Dim`` of that name), from which seeded random inputs are made.  ``dynamic_shapes``
    is passed to ``torch.export.export`` as is (it overrides what the specs say).  ``outputs``: names for the
    flattened outputs (default: the program's own names).  ``freeze`` (TorchScript): freeze eval-mode modules so
    parameters become constants.
    """
    if options:
        raise AmandaError(f"torch import: unknown option(s) {', '.join(sorted(options))}")
    import torch

    where = None
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        where = path
        if not os.path.exists(path):
            raise TorchImportError("no such file", Location(path))
        if path.lower().endswith(".pt2"):
            program, provenance, dim_names = _load_pt2(path)
            graph = _import_program(program, dim_names, outputs, path)
            if provenance:
                import json

                try:
                    graph.attrs["amanda_provenance"] = json.loads(provenance)
                except ValueError:
                    pass  # not a record Amanda wrote: leave it
        else:
            from .torchscript import import_script, load_script

            graph = import_script(load_script(path), freeze=freeze, where=path, output_names=outputs)
        return graph
    if isinstance(source, tuple) and len(source) == 2 and isinstance(source[0], torch.nn.Module) \
            and inputs is None and example_inputs is None:
        source, example_inputs = source
    if isinstance(source, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
        from .torchscript import import_script

        graph = import_script(source, freeze=freeze, where=where, output_names=outputs)
        given = example_inputs if example_inputs is not None else inputs
        if isinstance(given, (tuple, list)) and not _is_spec_list(given):
            from .script_types import type_script_graph

            type_script_graph(graph, tuple(given))  # TorchScript says "Tensor": the examples say what it holds
        return graph
    if isinstance(source, torch.export.ExportedProgram):
        return _import_program(source, None, outputs, where)
    if isinstance(source, torch.nn.Module):
        program, names = _export(source, inputs, example_inputs, dynamic_shapes, strict, seed)
        return _import_program(program, names, outputs, where)
    raise AmandaError(f"torch import: cannot read a {type(source).__name__} (expected a .pt2 or .pt file, an "
                      "nn.Module, an ExportedProgram or a TorchScript module)")


_PT2_LOCK = threading.Lock()


@contextlib.contextmanager
def _mapped_pt2_weights(path: str) -> Iterator[None]:
    """While ``torch.export.load`` reads the archive at ``path``, its weight and constant files (zip entries stored
    uncompressed, at offsets aligned to their element size) become tensors on one private (copy-on-write) map of
    the archive, as ``torch.load(mmap=True)`` maps a checkpoint, instead of copies read into memory: the weights
    stay the page cache's.  Any other entry is read as torch reads it."""
    import types
    import zipfile

    import torch

    try:
        from torch.export.pt2_archive import _package

        original = _package._build_file_map
        scalar_type, device_of = _package.deserialize_scalar_type, _package.deserialize_device
        with zipfile.ZipFile(path) as z:  # record names as torch's reader gives them: without the top folder
            stored = {i.filename.split("/", 1)[-1] for i in z.infolist() if i.compress_type == zipfile.ZIP_STORED}
    except (ImportError, AttributeError, OSError, zipfile.BadZipFile):
        yield  # another torch, or not a zip: torch's own reader says what is wrong
        return
    storage: list[Any] = []

    def mapped(meta: Any, reader: Any, base_dir: str) -> Any:
        if meta.use_pickle or meta.tensor_meta is None or device_of(meta.tensor_meta.device).type != "cpu":
            return None
        record = os.path.join(base_dir, meta.path_name)
        if record not in stored:
            return None
        dtype = scalar_type(meta.tensor_meta.dtype)
        size = torch._utils._element_size(dtype)
        nbytes, offset = reader.get_record_size(record), reader.get_record_offset(record)
        if nbytes == 0 or nbytes % size or offset % size:
            return None
        if not storage:
            with open(path, "rb") as f:
                storage.append(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY))
        # a storage of its own starting at the record (torch.as_strided then applies the weight's own offset)
        raw = np.frombuffer(storage[0], dtype=np.uint8, count=nbytes, offset=offset)
        tensor = torch.from_numpy(raw).view(dtype)
        if meta.tensor_meta.requires_grad:
            tensor.requires_grad_(True)
        return tensor

    def build_file_map(archive_reader: Any, config: Any, base_dir: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        rest = {}
        for key, meta in config.config.items():
            tensor = None if meta.path_name in out else mapped(meta, archive_reader.archive_file, base_dir)
            if tensor is not None:
                out[meta.path_name] = tensor
            elif meta.path_name not in out:
                rest[key] = meta
        out.update(original(archive_reader, types.SimpleNamespace(config=rest), base_dir))
        return out

    with _PT2_LOCK:
        _package._build_file_map = build_file_map
        try:
            yield
        finally:
            _package._build_file_map = original


def _load_pt2(path: str) -> tuple[Any, str, dict[Any, str]]:
    """The program, the provenance record and the names of the inputs' symbolic dims that Amanda wrote into the
    archive (``amanda_provenance.json``, ``amanda_dims.json``; empty when another writer made it)."""
    import json

    import torch

    extra = {"amanda_provenance.json": "", "amanda_dims.json": ""}  # filled in when the archive has them
    try:
        with _mapped_pt2_weights(path):
            program = torch.export.load(path, extra_files=extra)
    except Exception as e:  # noqa: BLE001 - any failure of torch's reader is a bad file
        raise TorchImportError(f"not a .pt2 file this torch ({torch.__version__}) can load: {_short(e)}",
                               Location(path)) from None
    positions: dict[tuple[str, int], str] = {}
    try:
        named = json.loads(extra["amanda_dims.json"]) if extra["amanda_dims.json"] else {}
        for placeholder, dims in named.items():
            for axis, name in dims.items():
                if isinstance(name, str) and name.isidentifier():
                    positions[(str(placeholder), int(axis))] = name
    except (ValueError, TypeError, AttributeError):
        positions = {}  # not a record Amanda wrote: torch's own symbols stay
    return program, extra["amanda_provenance.json"], _symbol_names(program, positions)


def _short(e: BaseException, limit: int = 200) -> str:
    """The first line of an exception's message, shortened."""
    text = first_line(e)
    text = f"{type(e).__name__}: {text}" if not text.startswith(type(e).__name__) else text
    return text if len(text) <= limit else text[:limit - 3] + "..."


# --------------------------------------------------------------------------- exporting a live module


_SPEC_DTYPES = {"float": "float32", "double": "float64", "half": "float16", "long": "int64", "int": "int32"}


def _spec_dtype(torch: Any, dtype: Any, name: str) -> Any:
    if isinstance(dtype, torch.dtype):
        return dtype
    row = lookup_scalar_type(_SPEC_DTYPES.get(str(dtype), str(dtype)))
    if row is None or not hasattr(torch, row.torch_name):
        raise AmandaError(f"--input {name}: unknown element type {dtype!r}")
    return getattr(torch, row.torch_name)


def _is_spec_list(inputs: Any) -> bool:
    return isinstance(inputs, (list, tuple)) and bool(inputs) and all(
        hasattr(s, "name") and hasattr(s, "dtype") and hasattr(s, "shape") and not hasattr(s, "detach")
        for s in inputs)


def _from_specs(torch: Any, module: Any, specs: Sequence[Any], seed: int) -> tuple[dict[str, Any], Any, dict]:
    """Seeded random keyword inputs from input specs, their dynamic shapes, and symbol names by Dim."""
    import inspect

    try:
        params = inspect.signature(module.forward).parameters
    except (TypeError, ValueError):
        params = {}
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    gen = torch.Generator().manual_seed(seed)
    kwargs: dict[str, Any] = {}
    dynamic: dict[str, Any] = {}
    dims: dict[str, Any] = {}
    dim_sizes: dict[str, int] = {}  # one example size per symbolic dim, whichever inputs share it
    for spec in specs:
        name = str(spec.name)
        if params and name not in params and not accepts_any:
            known = ", ".join(p for p in params if p != "self") or "none"
            raise AmandaError(f"--input {name}: {type(module).__name__}.forward has no argument {name!r} "
                              f"(its arguments: {known})")
        dtype = _spec_dtype(torch, spec.dtype, name)
        shape = list(spec.shape) if spec.shape is not None else []
        sizes: list[int] = []
        spec_dims: dict[int, Any] = {}
        for i, d in enumerate(shape):
            if isinstance(d, str) or d is None:
                dim_name = str(d) if d is not None else f"{name}_dim{i}"
                if not dim_name.isidentifier():
                    raise AmandaError(f"--input {name}: symbolic dim {dim_name!r} is not a name")
                if dim_name not in dims:
                    dims[dim_name] = torch.export.Dim(dim_name)
                    # small, distinct sizes above 1 (torch specializes 0 and 1, and takes dims of equal example
                    # sizes for one): 3, 4, 5 ...
                    dim_sizes[dim_name] = 2 + len(dims)
                spec_dims[i] = dims[dim_name]
                sizes.append(dim_sizes[dim_name])
            else:
                if int(d) < 0:
                    raise AmandaError(f"--input {name}: dim {i} is negative ({d})")
                sizes.append(int(d))
        if dtype.is_floating_point or dtype.is_complex:
            value = torch.randn(*sizes, generator=gen).to(dtype)
        elif dtype == torch.bool:
            value = torch.randint(0, 2, sizes, generator=gen).to(torch.bool)
        else:
            value = torch.randint(0, 8, sizes, generator=gen).to(dtype)
        kwargs[name] = value
        dynamic[name] = spec_dims or None
    return kwargs, (dynamic if any(v for v in dynamic.values()) else None), dims


def _export(module: Any, inputs: Any, example_inputs: Any, dynamic_shapes: Any, strict: bool,
            seed: int) -> tuple[Any, dict[Any, str]]:
    """``torch.export.export`` of a live module; returns the program and the user's names of symbolic dims
    (keyed by the symbols torch gave them)."""
    import torch

    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}
    dims: dict[str, Any] = {}
    given = example_inputs if example_inputs is not None else inputs
    if given is None:
        raise AmandaError(f"torch import: exporting a {type(module).__name__} needs example inputs "
                          "(--input name:dtype[shape], or example_inputs=)")
    if _is_spec_list(given):
        kwargs, spec_dynamic, dims = _from_specs(torch, module, given, seed)
        if dynamic_shapes is None:
            dynamic_shapes = spec_dynamic
    elif isinstance(given, dict):
        kwargs = dict(given)
    elif isinstance(given, (tuple, list)):
        args = tuple(given)
    else:
        args = (given,)
    if isinstance(module, torch.nn.Module) and module.training:
        module = module.eval()
    try:
        try:
            program = torch.export.export(module, args, kwargs or None, dynamic_shapes=dynamic_shapes,
                                          strict=strict)
        except Exception as e:  # noqa: BLE001 - narrowed below: only torch's suggested ranges are taken
            refined = refined_ranges(e, dynamic_shapes, type(module).__name__)
            if refined is None:
                raise
            program = torch.export.export(module, args, kwargs or None, dynamic_shapes=refined, strict=strict)
    except AmandaError:
        raise
    except Exception as e:  # noqa: BLE001 - torch.export raises many kinds; each is reported in one line
        # what the inputs say (sizes, ranges) is a user error; anything else is torch.export's own failure
        fits = isinstance(e, (RuntimeError, ValueError)) or type(e).__name__ in ("UserError",
                                                                                 "ConstraintViolationError")
        what = "the --input specs do not fit the module" if fits and (dims or _is_spec_list(given)) else \
            "torch.export cannot export it"
        raise AmandaError(f"torch import: {type(module).__name__}: {what}: {_short(e)}") from None
    import inspect

    try:
        arg_names = [p for p in inspect.signature(module.forward).parameters]
    except (TypeError, ValueError):
        arg_names = []
    return program, _symbol_names(program, _dim_positions(dynamic_shapes, arg_names))


def refined_ranges(error: BaseException, dynamic_shapes: Any, what: str) -> Any:
    """The dynamic shapes with the ranges torch.export found a symbolic dimension must keep to (BERT's length at
    most its 512 positions: ``Constraints violated (seq)``, with ``Suggested fixes: seq = Dim('seq', max=512)``),
    or None when the error suggests none.  A dimension torch can only export as one size is an error naming it:
    the user asked for it to vary."""
    if dynamic_shapes is None:
        return None
    text = str(error)
    head, found, tail = text.partition("Suggested fixes:")
    if not found:
        return None
    fixes = []
    for line in tail.splitlines()[1:]:
        if not line.strip():
            break
        fixes.append(line)
    specialized = [f.split("=", 1)[0].strip() for f in fixes if "Dim(" not in f and "=" in f]
    if specialized:
        sizes = ", ".join(f.strip() for f in fixes if "Dim(" not in f)
        raise AmandaError(f"torch import: {what}: the module can be exported only with "
                          f"{', '.join(specialized)} fixed ({sizes}): give that size instead of a name")
    from torch.export.dynamic_shapes import refine_dynamic_shapes_from_suggested_fixes

    try:
        return refine_dynamic_shapes_from_suggested_fixes(head + found + "\n" + "\n".join(fixes), dynamic_shapes)
    except Exception:  # noqa: BLE001 - a suggestion this torch cannot read back: the first error stands
        return None


def _dim_positions(dynamic_shapes: Any, arg_names: Sequence[str]) -> dict[tuple[str, int], str]:
    """``(input name, dim index) -> Dim name`` of the dynamic shapes given per top-level input (a dict by
    argument name, or a tuple in argument order, each ``{dim: Dim}`` or a list of Dims/None)."""
    out: dict[tuple[str, int], str] = {}
    if isinstance(dynamic_shapes, dict):
        items = list(dynamic_shapes.items())
    elif isinstance(dynamic_shapes, (list, tuple)):
        items = list(zip(arg_names, dynamic_shapes))
    else:
        return out
    for name, spec in items:
        pairs = spec.items() if isinstance(spec, dict) else enumerate(spec) if isinstance(spec, (list, tuple)) \
            else ()
        for i, d in pairs:
            dim_name = getattr(d, "__name__", None)
            if isinstance(i, int) and isinstance(dim_name, str):
                out[(str(name), i)] = dim_name
    return out


def _symbol_names(program: Any, positions: dict[tuple[str, int], str]) -> dict[Any, str]:
    """The user's Dim name of each symbol that sizes a dim the user declared dynamic."""
    out: dict[Any, str] = {}
    if not positions:
        return out
    for node in program.graph.nodes:
        if node.op != "placeholder":
            continue
        for i, d in enumerate(getattr(node.meta.get("val"), "shape", ()) or ()):
            expr = getattr(getattr(d, "node", None), "expr", None)
            name = positions.get((node.name, i))
            if name is not None and expr is not None and getattr(expr, "is_Symbol", False):
                out.setdefault(expr, name)
    return out


# --------------------------------------------------------------------------- value types and values


_SCRIPT_NAMES: dict[str, str] = {}


def _scalar_script_name(dtype: Any) -> str:
    key = str(dtype)
    name = _SCRIPT_NAMES.get(key)
    if name is None:
        row = lookup_scalar_type(dtype)
        name = row.script_name if row is not None else "Tensor"
        _SCRIPT_NAMES[key] = name
    return name


def _dim_text(d: Any, names: dict[Any, str]) -> str:
    if isinstance(d, int):
        return str(d)
    node = getattr(d, "node", None)
    expr = getattr(node, "expr", None)
    if expr is None:
        return str(d)
    if getattr(expr, "is_Integer", False):
        return str(int(expr))
    if names:
        import sympy

        expr = expr.xreplace({s: sympy.Symbol(n) for s, n in names.items() if s in expr.free_symbols})
    return str(expr)


def value_type_text(val: Any, names: dict[Any, str] | None = None) -> str | None:
    """The TorchScript value type text of an FX ``meta['val']`` (a fake tensor, SymInt, number, list ...)."""
    import torch

    names = names or {}
    if isinstance(val, torch.Tensor):
        dims = ", ".join(_dim_text(d, names) for d in val.shape)
        return f"{_scalar_script_name(val.dtype)}({dims})"
    if isinstance(val, (torch.SymBool, bool)):
        return "bool"
    if isinstance(val, (torch.SymInt, int)):
        return "int"
    if isinstance(val, (torch.SymFloat, float)):
        return "float"
    if isinstance(val, (list, tuple)):
        if val and all(isinstance(v, torch.Tensor) for v in val):
            return "Tensor[]"
        if val and all(isinstance(v, (torch.SymInt, int)) and not isinstance(v, bool) for v in val):
            return "int[]"
        return None
    return None


def tensor_value(t: Any, where: str) -> np.ndarray:
    """A numpy view of a CPU tensor's storage (no copy); bfloat16 and float8 as :mod:`ml_dtypes` arrays."""
    import torch

    t = t.detach()
    if t.device.type != "cpu":
        raise AmandaError(f"{where}: tensor on {t.device} (only CPU tensors are read; move the module to the CPU)")
    if t.is_quantized or t.layout != torch.strided:
        raise AmandaError(f"{where}: {t.layout} / quantized tensors are not supported")
    try:
        return t.numpy()
    except TypeError:
        pass
    row = lookup_scalar_type(t.dtype)
    if row is None or row.numpy_name is None:
        raise AmandaError(f"{where}: tensor element type {t.dtype} has no numpy counterpart")
    from amanda_core.ir.tensor import resolve_dtype

    target = resolve_dtype(row.numpy_name)
    raw = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.view(raw).numpy().view(target)


def plain_literal(value: Any) -> Any:
    """A literal argument as a plain Python value (dtypes, layouts, memory formats by name, devices as text)."""
    import torch

    if value is None or isinstance(value, (bool, int, float, str, complex)):
        return value
    if isinstance(value, torch.dtype):
        row = lookup_scalar_type(value)
        return row.torch_name if row else str(value)
    if isinstance(value, torch.device):
        return str(value)
    if isinstance(value, torch.layout):
        enum = lookup_enum(LAYOUTS, value)
        return enum.torch_name if enum else str(value)
    if isinstance(value, torch.memory_format):
        enum = lookup_enum(MEMORY_FORMATS, value)
        return enum.torch_name if enum else str(value)
    if isinstance(value, (list, tuple)):
        return [plain_literal(v) for v in value]
    if isinstance(value, torch.Tensor):
        return tensor_value(value, "literal")
    raise AmandaError(f"cannot represent literal {value!r} ({type(value).__name__})")


def literal_type_text(value: Any) -> str | None:
    """The TorchScript value type of a plain literal (``int``, ``float[]``, ``ScalarType`` ...)."""
    if value is None:
        return "NoneType"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, complex):
        return "complex"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        kinds = {literal_type_text(v) for v in value}
        if len(kinds) == 1:
            (k,) = kinds
            return f"{k}[]" if k in ("int", "float", "bool", "str") else None
        if kinds <= {"int", "float"}:
            return "float[]"
        return None
    return None


def _name(text: str) -> str:
    out = _NAME.sub("_", text).strip("_")
    return out or "v"


# --------------------------------------------------------------------------- torch.export -> graph


_BUILTIN_OPS: dict[Any, str] = {
    operator.add: "add", operator.sub: "sub", operator.mul: "mul", operator.floordiv: "floordiv",
    operator.truediv: "div", operator.mod: "remainder", operator.pow: "pow", operator.eq: "eq",
    operator.ne: "ne", operator.lt: "lt", operator.le: "le", operator.gt: "gt", operator.ge: "ge",
    operator.neg: "neg",
}


def _scalar_kind(val: Any) -> str:
    import torch

    if isinstance(val, (bool, torch.SymBool)):
        return "bool"
    if isinstance(val, (int, torch.SymInt)):
        return "int"
    if isinstance(val, (float, torch.SymFloat)):
        return "float"
    return "?"


class _FxImporter:
    """One ExportedProgram (or one branch graph of it) into one graph."""

    def __init__(self, program: Any, dim_names: dict[Any, str], where: str | None) -> None:
        self.program = program
        self.names = dim_names
        self.where = where
        self.ns = torch_namespace()
        self.schema = _NAMESPACES.schema(None)

    def error(self, message: str) -> AmandaError:
        return TorchImportError(message, Location(self.where)) if self.where else AmandaError(message)

    # -- ports and values
    def dtype(self, node: Any) -> str | None:
        return value_type_text(node.meta.get("val"), self.names)

    def constant(self, g: Graph, value: Any, base: str) -> OutputPort:
        plain = plain_literal(value)
        op = g.add_op("prim::Constant", g.unique_name(_name(base)), outputs=[("output", literal_type_text(plain))],
                      attrs={"value": plain})
        return op.output_ports[0]

    def port_names(self, op_type: str, count: int, schema_args: Sequence[Any]) -> list[str]:
        s = self.schema.get(op_type)
        if s is not None and len(s.input_ports) >= count and not any(p.variadic for p in s.input_ports[:count]):
            return [p.name for p in s.input_ports[:count]]
        return [a.name for a in schema_args[:count]]

    def output_names(self, op_type: str, returns: Sequence[Any]) -> list[str]:
        s = self.schema.get(op_type)
        if s is not None and len(s.output_ports) == len(returns) and not any(p.variadic for p in s.output_ports):
            return [p.name for p in s.output_ports]
        return [r.name or f"out{i}" for i, r in enumerate(returns)]

    # -- the graph
    def run(self, output_names: Sequence[str] | None) -> Graph:
        program = self.program
        g = Graph(self.ns, {"source": "torch.export"})
        values: dict[Any, Any] = {}
        sig = program.graph_signature
        state = program.state_dict
        constants = getattr(program, "constants", {}) or {}
        specs = {s.arg.name: s for s in sig.input_specs if hasattr(s.arg, "name")}
        input_names = self.user_input_names(program)
        placeholders = [n for n in program.graph.nodes if n.op == "placeholder"]
        user_i = 0
        for node in placeholders:
            spec = specs.get(node.name)
            kind = spec.kind.name if spec is not None else "USER_INPUT"
            if kind == "USER_INPUT":
                name = input_names[user_i] if user_i < len(input_names) else node.name
                user_i += 1
                if node.meta.get("val") is None and not node.users:
                    continue  # a constant argument (None, a number): specialized into the program
                values[node] = g.add_input_port(_unique(name, g.input_ports.names()), self.dtype(node))
                continue
            target = spec.target
            if kind in ("PARAMETER", "BUFFER"):
                tensor = state.get(target)
                if tensor is None and kind == "BUFFER":
                    tensor = constants.get(target)  # non-persistent buffers live with the constants
            elif kind == "CONSTANT_TENSOR":
                tensor = constants.get(target)
            else:
                raise self.error(f"input {node.name!r}: {kind.lower()} inputs ({target}) are not supported")
            if tensor is None:
                raise self.error(f"{kind.lower()} {target!r} is missing from the program")
            role = {"PARAMETER": "parameter", "BUFFER": "buffer"}.get(kind, "constant")
            op = g.add_op("prim::Constant", _unique(target, g.ops), outputs=[("output", self.dtype(node))],
                          attrs={"value": tensor_value(tensor, f"{role} {target}")})
            op.meta["role"] = role
            op.meta["target"] = target
            if kind == "BUFFER":
                op.meta["persistent"] = bool(spec.persistent)
            values[node] = op.output_ports[0]
        self.body(g, program.graph, values, program.graph_module)
        out_node = next(n for n in program.graph.nodes if n.op == "output")
        results = list(out_node.args[0]) if isinstance(out_node.args[0], (list, tuple)) else [out_node.args[0]]
        user_outputs = [s for s in sig.output_specs]
        kinds = [s.kind.name for s in user_outputs]
        if len(kinds) != len(results):
            raise self.error("the program's outputs do not match its signature")
        picked = [r for r, k in zip(results, kinds) if k == "USER_OUTPUT"]
        mutated = [k for k in kinds if k != "USER_OUTPUT"]
        if mutated:
            g.attrs["dropped_outputs"] = mutated  # buffer mutations (BatchNorm in training mode ...)
        names = list(output_names) if output_names else self.user_output_names(program, len(picked))
        if len(names) != len(picked):
            raise self.error(f"{len(names)} output name(s) given for {len(picked)} output(s)")
        taken: list[str] = []
        for r, name in zip(picked, names):
            name = _unique(_name(str(name)), taken)
            taken.append(name)
            src = self.source(g, r, values, f"output_{name}")
            port = g.add_output_port(name, src.dtype if isinstance(src, OutputPort) else None)
            g.connect(src, port)
        return g

    def user_input_names(self, program: Any) -> list[str]:
        import torch.utils._pytree as pytree

        call = program.module_call_graph[0].signature if program.module_call_graph else None
        if call is None or call.in_spec is None:
            return []
        arg_names = list(call.forward_arg_names or [])
        leaves = pytree.tree_unflatten(list(range(call.in_spec.num_leaves)), call.in_spec)
        out: list[str] = []
        for path, _ in pytree.tree_flatten_with_path(leaves)[0]:
            parts: list[str] = []
            if path and isinstance(path[0], pytree.SequenceKey) and len(path) > 1:
                top, rest = path[0].idx, path[1:]
                first = rest[0]
                if top == 0 and isinstance(first, pytree.SequenceKey):
                    parts.append(arg_names[first.idx] if first.idx < len(arg_names) else f"args_{first.idx}")
                elif isinstance(first, pytree.MappingKey):
                    parts.append(str(first.key))
                else:
                    parts.append(_key_text(first))
                parts += [_key_text(k) for k in rest[1:]]
            else:
                parts = [_key_text(k) for k in path] or ["input"]
            out.append(_name("_".join(parts)))
        return out

    def user_output_names(self, program: Any, count: int) -> list[str]:
        import torch.utils._pytree as pytree

        call = program.module_call_graph[0].signature if program.module_call_graph else None
        spec = call.out_spec if call is not None else None
        if spec is None or spec.num_leaves != count:
            return ["output"] if count == 1 else [f"out{i}" for i in range(count)]
        try:
            tree = pytree.tree_unflatten(list(range(count)), spec)
            paths = [p for p, _ in pytree.tree_flatten_with_path(tree)[0]]
        except Exception:  # noqa: BLE001 - a pytree node without key paths: positional names
            return ["output"] if count == 1 else [f"out{i}" for i in range(count)]
        names = []
        for path in paths:
            if not path:
                names.append("output")
            elif len(path) == 1 and isinstance(path[0], pytree.SequenceKey):
                names.append(f"out{path[0].idx}")
            else:
                names.append(_name("_".join(_key_text(k) for k in path)))
        return names

    def source(self, g: Graph, arg: Any, values: dict[Any, Any], base: str) -> OutputPort:
        """The port producing ``arg`` (an FX node or a literal, made a constant)."""
        import torch.fx

        if isinstance(arg, torch.fx.Node):
            v = values.get(arg)
            if v is None:
                raise self.error(f"node {arg.name!r} is used before it is computed, or produces no single value")
            if not isinstance(v, OutputPort):
                raise self.error(f"node {arg.name!r} produces several values; a single one is needed here")
            return v
        if isinstance(arg, (list, tuple)) and any(isinstance(a, torch.fx.Node) for a in arg):
            return self.list_construct(g, arg, values, base)
        return self.constant(g, arg, base)

    def list_construct(self, g: Graph, items: Sequence[Any], values: dict[Any, Any], base: str) -> OutputPort:
        srcs = [self.source(g, a, values, f"{base}_{i}") for i, a in enumerate(items)]
        kinds = {str(s.dtype) for s in srcs}
        dtype = "Tensor[]" if all(_is_tensor_text(s.dtype) for s in srcs) else \
            ("int[]" if kinds <= {"int"} else ("float[]" if kinds <= {"int", "float"} else None))
        op = g.add_op("prim::ListConstruct", g.unique_name(_name(base)),
                      inputs=[f"elements_{i}" for i in range(len(srcs))], outputs=[("list", dtype)],
                      sources=srcs)
        return op.output_ports[0]

    def body(self, g: Graph, fx_graph: Any, values: dict[Any, Any], owner_module: Any) -> None:
        for node in fx_graph.nodes:
            if node.op in ("placeholder", "output"):
                continue
            if node.op == "get_attr":
                values[node] = ("attr", getattr(owner_module, node.target))
                continue
            if node.op != "call_function":
                raise self.error(f"node {node.name!r}: {node.op} nodes are not supported")
            self.call(g, node, values, owner_module)

    def call(self, g: Graph, node: Any, values: dict[Any, Any], owner_module: Any) -> None:
        import torch

        target = node.target
        if target is operator.getitem:
            base, index = node.args
            produced = values.get(base)
            if isinstance(produced, list):
                values[node] = produced[index]
                return
            raise self.error(f"node {node.name!r}: getitem on {base.name!r}, which is not a list or tuple value")
        if isinstance(target, torch._ops.OpOverload):
            self.overload(g, node, values)
            return
        if isinstance(target, torch._ops.HigherOrderOperator):
            name = getattr(target, "__name__", str(target))
            if name == "cond":
                self.cond(g, node, values, owner_module)
                return
            if name == "while_loop":
                self.while_loop(g, node, values, owner_module)
                return
            raise self.error(f"node {node.name!r}: higher-order operator {name} is not supported")
        if target in _BUILTIN_OPS or target in (torch.sym_max, torch.sym_min, torch.sym_float, torch.sym_not):
            self.builtin(g, node, values)
            return
        label = getattr(target, "__qualname__", None) or str(target)
        module = getattr(target, "__module__", "") or ""
        raise self.error(f"node {node.name!r}: call to {module + '.' if module else ''}{label} is not an ATen "
                         "operator Amanda can represent")

    def overload(self, g: Graph, node: Any, values: dict[Any, Any]) -> None:
        target = node.target
        schema = target._schema
        base = schema.name
        if base in DROPPED_TARGETS:
            return
        op_type = f"{base}.{schema.overload_name or 'default'}"
        args = list(schema.arguments)
        given: dict[int, Any] = {}
        for i, a in enumerate(node.args):
            given[i] = a
        positions = {a.name: i for i, a in enumerate(args)}
        for k, v in node.kwargs.items():
            if k not in positions:
                raise self.error(f"node {node.name!r} ({op_type}): no argument {k!r} in the schema")
            given[positions[k]] = v
        count = len(args)
        names = self.port_names(op_type, count, args)
        ports: list[str] = []
        srcs: list[OutputPort] = []
        for i in sorted(given):
            value = given[i]
            if value is None:
                continue
            ports.append(names[i])
            srcs.append(self.source(g, value, values, f"{node.name}_{names[i]}"))
        returns = list(schema.returns)
        out_names = self.output_names(op_type, returns)
        val = node.meta.get("val")
        ret_type = str(returns[0].type) if len(returns) == 1 else ""
        list_return = "Tensor" in ret_type and (ret_type.endswith("[]") or ret_type.startswith("List["))
        if len(returns) == 1 and not list_return:
            outs = [(out_names[0], value_type_text(val, self.names))]
        else:
            vals = list(val) if isinstance(val, (list, tuple)) else [None] * len(returns)
            if list_return:
                outs = [(out_names[0], "Tensor[]")]
            else:
                outs = [(n, value_type_text(v, self.names)) for n, v in zip(out_names, vals)]
        op = g.add_op(op_type, _unique(node.name, g.ops), inputs=ports, outputs=outs, sources=srcs)
        if list_return:
            items = list(val) if isinstance(val, (list, tuple)) else []
            unpack = g.add_op("prim::ListUnpack", g.unique_name(f"{node.name}_unpack"), inputs=["list"],
                              outputs=[(f"elements_{i}", value_type_text(v, self.names)) for i, v in
                                       enumerate(items)], sources=[op.output_ports[0]])
            values[node] = list(unpack.output_ports)
        elif len(returns) == 1:
            values[node] = op.output_ports[0]
        else:
            values[node] = list(op.output_ports)

    def builtin(self, g: Graph, node: Any, values: dict[Any, Any]) -> None:
        """Python arithmetic on symbolic sizes as the namespace's scalar ops (``aten::mul.int`` ...)."""
        import torch

        target = node.target
        args = list(node.args)
        kinds = [_scalar_kind(a.meta.get("val") if isinstance(a, torch.fx.Node) else a) for a in args]
        if target is torch.sym_float:
            op_type, ports = "aten::Float.Scalar" if kinds[0] != "int" else "aten::Float.int", ["a"]
        elif target is torch.sym_not:
            op_type, ports = "aten::__not__.default", ["self"]
        elif target in (torch.sym_max, torch.sym_min):
            which = "max" if target is torch.sym_max else "min"
            op_type, ports = f"prim::{which}.{_pair_overload(kinds)}", ["a", "b"]
        else:
            name = _BUILTIN_OPS[target]
            if len(args) == 1:
                op_type, ports = f"aten::{name}.{kinds[0]}", ["a"]
            else:
                op_type, ports = f"aten::{name}.{_pair_overload(kinds)}", ["a", "b"]
        if op_type not in self.schema:
            raise self.error(f"node {node.name!r}: {getattr(target, '__name__', target)} on "
                             f"{', '.join(kinds)} has no operator in {self.ns} ({op_type})")
        out_names = [p.name for p in self.schema.get(op_type).output_ports]
        srcs = [self.source(g, a, values, f"{node.name}_{p}") for a, p in zip(args, ports)]
        op = g.add_op(op_type, _unique(node.name, g.ops), inputs=ports[:len(srcs)],
                      outputs=[(out_names[0], value_type_text(node.meta.get("val"), self.names))], sources=srcs)
        values[node] = op.output_ports[0]

    def branch(self, gm: Any, inputs: list[str], outputs: list[str] | None, where: str) -> Graph:
        """A subgraph module (a branch or loop body) as a graph with the given input and output names."""
        sub = Graph()
        values: dict[Any, Any] = {}
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(inputs):
            raise self.error(f"{where}: takes {len(placeholders)} input(s), given {len(inputs)}")
        for node, name in zip(placeholders, inputs):
            values[node] = sub.add_input_port(name, self.dtype(node))
        self.body(sub, gm.graph, values, gm)
        out_node = next(n for n in gm.graph.nodes if n.op == "output")
        results = out_node.args[0]
        results = list(results) if isinstance(results, (list, tuple)) else [results]
        names = outputs if outputs is not None else [f"outputs_{i}" for i in range(len(results))]
        if len(names) != len(results):
            raise self.error(f"{where}: returns {len(results)} value(s), expected {len(names)}")
        for r, name in zip(results, names):
            src = self.source(sub, r, values, f"output_{name}")
            sub.connect(src, sub.add_output_port(name, src.dtype))
        return sub

    def _graph_module(self, arg: Any, values: dict[Any, Any], what: str) -> Any:
        v = values.get(arg)
        if not (isinstance(v, tuple) and v and v[0] == "attr"):
            raise self.error(f"{what} is not a graph module")
        return v[1]

    def cond(self, g: Graph, node: Any, values: dict[Any, Any], owner_module: Any) -> None:
        pred, true_fn, false_fn, operands = node.args[:4]
        operands = list(operands)
        where = f"node {node.name!r} (torch.cond)"
        in_names = [f"operands_{i}" for i in range(len(operands))]
        val = node.meta.get("val")
        results = list(val) if isinstance(val, (list, tuple)) else [val]
        out_names = [f"outputs_{i}" for i in range(len(results))]
        true_graph = self.branch(self._graph_module(true_fn, values, f"{where}: true branch"), in_names, out_names,
                                 f"{where} true branch")
        false_graph = self.branch(self._graph_module(false_fn, values, f"{where}: false branch"), in_names,
                                  out_names, f"{where} false branch")
        srcs = [self.source(g, pred, values, f"{node.name}_pred")]
        srcs += [self.source(g, a, values, f"{node.name}_{n}") for a, n in zip(operands, in_names)]
        op = g.add_op("higher_order::cond", _unique(node.name, g.ops), inputs=["pred", *in_names],
                      outputs=[(n, value_type_text(v, self.names)) for n, v in zip(out_names, results)],
                      attrs={"true_graph": true_graph, "false_graph": false_graph}, sources=srcs)
        values[node] = list(op.output_ports)

    def while_loop(self, g: Graph, node: Any, values: dict[Any, Any], owner_module: Any) -> None:
        cond_fn, body_fn, carried, additional = node.args[:4]
        carried, additional = list(carried), list(additional)
        where = f"node {node.name!r} (while_loop)"
        c_names = [f"carried_inputs_{i}" for i in range(len(carried))]
        a_names = [f"additional_inputs_{i}" for i in range(len(additional))]
        val = node.meta.get("val")
        results = list(val) if isinstance(val, (list, tuple)) else [val]
        out_names = [f"outputs_{i}" for i in range(len(results))]
        cond_graph = self.branch(self._graph_module(cond_fn, values, f"{where}: cond_fn"), c_names + a_names,
                                 ["pred"], f"{where} cond_fn")
        body_graph = self.branch(self._graph_module(body_fn, values, f"{where}: body_fn"), c_names + a_names,
                                 out_names, f"{where} body_fn")
        srcs = [self.source(g, a, values, f"{node.name}_{n}") for a, n in zip(carried + additional,
                                                                              c_names + a_names)]
        op = g.add_op("higher_order::while_loop", _unique(node.name, g.ops), inputs=c_names + a_names,
                      outputs=[(n, value_type_text(v, self.names)) for n, v in zip(out_names, results)],
                      attrs={"cond_graph": cond_graph, "body_graph": body_graph}, sources=srcs)
        values[node] = list(op.output_ports)


def _pair_overload(kinds: Sequence[str]) -> str:
    a, b = kinds[0], kinds[1]
    return a if a == b else f"{a}_{b}"


def _is_tensor_text(dtype: Any) -> bool:
    text = str(dtype) if dtype is not None else ""
    head = text.split("(", 1)[0]
    return bool(text) and not text.endswith("[]") and head not in (
        "int", "float", "bool", "str", "NoneType", "complex", "ScalarType", "Device", "Layout", "MemoryFormat")


def _key_text(k: Any) -> str:
    for attr in ("key", "name", "idx"):
        if hasattr(k, attr):
            return str(getattr(k, attr))
    return str(k)


def _unique(name: str, taken: Iterable[str] | Any) -> str:
    out, n = name, 1
    while out in taken:
        out = f"{name}_{n}"
        n += 1
    return out


def _import_program(program: Any, dim_names: dict[Any, str] | None, output_names: Sequence[Any] | None,
                    where: str | None) -> Graph:
    with bulk_build():
        graph = _FxImporter(program, dim_names or {}, where).run([str(n) for n in output_names]
                                                                 if output_names else None)
    return graph
