"""A graph in ``amanda/pytorch`` as a straight list of calls: what the exporter turns into an FX graph
(:mod:`amanda_torch.module`) or into Python source (:mod:`amanda_torch.codegen`).

Lowering resolves everything both outputs need, once: each op's ATen overload and its arguments in schema
order (a port fed by a literal ``prim::Constant`` becomes the literal, converted to the torch object its schema
type asks for; ``prim::ListConstruct`` becomes a Python list; ``prim::ListUnpack`` and the output ports of an op
with several returns become ``operator.getitem``), the tensors the module holds (parameters and buffers under
their FQNs, other tensor constants), the Python names of values, and the graph's inputs and outputs.  Every
problem is found here, before anything is built or written: an op type that is no torch operator, a port its
overload has no argument for, a required argument not given, a graph outside ``amanda/pytorch``.
"""

from __future__ import annotations

__all__ = ["Ref", "Attr", "Call", "Sub", "Program", "lower", "resolve_overload", "convert_literal", "is_tensor_type"]

import builtins
import keyword
import operator
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from amanda_core import Graph
from amanda_core.errors import AmandaError
from amanda_core.ir.graph import Op, OutputPort
from amanda_core.ir.tensor import is_tensor

from .foreign import UNCONVERTED, unconverted, unconverted_message
from .scalar_types import LAYOUTS, MEMORY_FORMATS, QSCHEMES, lookup_enum, lookup_scalar_type
from .schema_text import ParsedSchema, parse_function_schema
from .valuetypes import TensorValueType, ValueType, parse_value_type

FAMILY_PREFIX = "amanda/pytorch/"


@dataclass(frozen=True)
class Ref:
    """A value computed by an earlier step, or a graph input; ``name`` is its Python identifier."""

    name: str


@dataclass
class Attr:
    """A tensor the module holds: a parameter, a buffer (persistent or not) or a constant."""

    target: str
    value: Any
    kind: str
    ref: Ref
    persistent: bool = True
    requires_grad: bool = True
    op: str = ""


@dataclass
class Call:
    """``ref = fn(*args, **kwargs)``; ``qualname`` names ``fn`` (``aten::conv2d.default``, ``getitem``)."""

    fn: Any
    qualname: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    ref: Ref
    op: str = ""


@dataclass
class Sub:
    """A branch or loop body (``higher_order::cond`` / ``while_loop``) passed to a higher-order operator:
    ``name`` is its Python name; ``tuple_output``: it returns a tuple even of one value."""

    program: Program
    name: str
    tuple_output: bool = True


@dataclass
class Program:
    """A graph lowered to calls.  ``inputs``: (graph port name, value, dtype); ``outputs``: (port name, value),
    where a value is a :class:`Ref`, a literal or a list of them."""

    namespace: str
    inputs: list[tuple[str, Ref, ValueType | None]] = field(default_factory=list)
    attrs: list[Attr] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    outputs: list[tuple[str, Any, ValueType | None]] = field(default_factory=list)


# --------------------------------------------------------------------------- names

_RESERVED = set(keyword.kwlist) | set(keyword.softkwlist) | set(dir(builtins)) | {
    "self", "torch", "F", "operator", "math", "Path", "load_file", "args", "kwargs"}
_NOT_IDENT = re.compile(r"[^0-9A-Za-z_]+")


class _Names:
    """Unique Python identifiers made from op, port and FQN names."""

    def __init__(self) -> None:
        self.taken: set[str] = set(_RESERVED)

    def make(self, text: str) -> str:
        if text.isascii() and text.isidentifier() and text[0] != "_" and text[-1] != "_":
            base = text  # what the rules below leave as it is
        else:
            base = _NOT_IDENT.sub("_", text).strip("_") or "v"
            if base[0].isdigit():
                base = "v" + base
        name, n = base, 0
        while name in self.taken:
            n += 1
            name = f"{base}_{n}"
        self.taken.add(name)
        return name


# --------------------------------------------------------------------------- overloads


@dataclass(frozen=True)
class _Overload:
    fn: Any
    qualname: str
    schema: ParsedSchema
    in_ports: dict[str, int]
    out_ports: dict[str, int]
    in_names: tuple[str, ...]  # the keys of in_ports
    required: tuple[str, ...]  # the arguments without default that are not optional, in order
    one_return: bool  # returns one value (not a list of them)
    converts: tuple[str | None, ...]  # per argument, the base type its literals are converted to, if any


def _port_names(args: Any, prefix: str) -> dict[str, int]:
    """Port name -> position, named as the namespace names them (``amanda_torch.schemas``)."""
    out: dict[str, int] = {}
    for i, a in enumerate(args):
        name = a.name or f"{prefix}{i}"
        if name in out:
            name = f"{prefix}{i}"
        out[name] = i
    return out


_OVERLOADS: dict[Any, _Overload] = {}


def _overload(fn: Any) -> _Overload:
    """The parsed schema of an ``OpOverload`` (parsed once per overload: torch's overload objects live as long
    as the process)."""
    found = _OVERLOADS.get(fn)
    if found is None:
        schema = parse_function_schema(str(fn._schema))
        in_ports = _port_names(schema.args, "in")
        required = tuple(name for name, i in in_ports.items()
                         if schema.args[i].default is None and not schema.args[i].type.endswith("?"))
        found = _OVERLOADS[fn] = _Overload(
            fn, schema.qualified_name if schema.overload else f"{schema.name}.default", schema,
            in_ports, _port_names(schema.returns, "out"), tuple(in_ports), required,
            len(schema.returns) == 1 and not schema.varret,
            tuple(b if (b := _base_type(a.type)) in _CONVERTED else None for a in schema.args))
    return found


_RESOLVED: dict[str, tuple[Any, ...]] = {}


def resolve_overload(op_type: str) -> list[Any]:
    """The torch callables an op type names: one ``OpOverload`` for ``aten::conv2d.default``, every overload of
    a bare name (``aten::add``); empty when torch has no such operator."""
    found = _RESOLVED.get(op_type)
    if found is None:
        found = tuple(_resolve_overload(op_type))
        if found:  # a miss is not kept: an operator may be registered later (torch.library)
            _RESOLVED[op_type] = found
    return list(found)


def _resolve_overload(op_type: str) -> list[Any]:
    import torch

    if "::" not in op_type:
        return []
    ns, rest = op_type.split("::", 1)
    try:
        namespace = getattr(torch.ops, ns)
    except Exception:  # torch raises several kinds for unknown namespaces
        return []
    name, _, overload = rest.partition(".")
    try:
        packet = getattr(namespace, name)
    except Exception:
        return []
    if not hasattr(packet, "overloads"):
        return []
    if overload:
        try:
            return [getattr(packet, overload)]
        except Exception:
            return []
    found = []
    for o in packet.overloads():
        try:
            found.append(getattr(packet, o))
        except Exception:  # pragma: no cover - an overload listed but not loadable
            continue
    return found


# --------------------------------------------------------------------------- literals


@lru_cache(maxsize=1024)  # a schema's few type texts, read for every literal argument (each list element too)
def _base_type(type_text: str) -> str:
    t = type_text.strip()
    while t.endswith("?"):
        t = t[:-1]
    t = re.sub(r"\[\d*\]$", "", t)
    return t.rstrip("?")


_ENUM_TABLES = {"Layout": LAYOUTS, "MemoryFormat": MEMORY_FORMATS, "QScheme": QSCHEMES}
_CONVERTED = {"ScalarType", "Device", *_ENUM_TABLES}  # the base types whose literals become torch objects


def convert_literal(value: Any, type_text: str, where: str) -> Any:
    """The Python/torch value a literal stands for in an argument of schema type ``type_text``."""
    base = _base_type(type_text)
    if base in _CONVERTED:
        return _convert_literal(value, base, where)
    return _plain_literal(value)


def _plain_literal(value: Any) -> Any:
    """A literal of a type torch takes as is: lists (and tuples) as lists, numpy scalars as Python numbers."""
    if isinstance(value, (list, tuple)):
        return [_plain_literal(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _convert_literal(value: Any, base: str, where: str) -> Any:
    import torch

    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [_convert_literal(v, base, where) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if base == "ScalarType":
        info = lookup_scalar_type(value)
        if info is None:
            raise AmandaError(f"op {where}: {value!r} is not a torch element type")
        return getattr(torch, info.torch_name)
    if base in _ENUM_TABLES:
        row = lookup_enum(_ENUM_TABLES[base], value)
        if row is None:
            raise AmandaError(f"op {where}: {value!r} is not a torch {base}")
        return getattr(torch, row.torch_name)
    if base == "Device" and isinstance(value, str):
        return torch.device(value)
    return value


# --------------------------------------------------------------------------- lowering


_LIST_PORT = re.compile(r"^(.*)_(\d+)$")


def _indexed(ports: Any, prefix: str) -> list[Any]:
    """Ports named ``prefix_0``, ``prefix_1`` ... in index order."""
    found = []
    for p in ports:
        m = _LIST_PORT.match(p.name)
        if m and m.group(1) == prefix:
            found.append((int(m.group(2)), p))
    return [p for _, p in sorted(found, key=lambda x: x[0])]


def _dtype(port: Any) -> ValueType | None:
    if port.dtype is None:
        return None
    try:
        return parse_value_type(str(port.dtype))
    except AmandaError:
        return None


class _Lowering:
    def __init__(self, graph: Graph, namespace: str | None = None) -> None:
        ns = namespace or graph.namespace or ""
        if not ns.startswith(FAMILY_PREFIX):
            raise AmandaError(f"the torch exporter writes graphs in amanda/pytorch, not in {ns or 'no namespace'}")
        self.graph = graph
        self.program = Program(ns)
        self.names = _Names()
        self.values: dict[OutputPort, Any] = {}
        self.targets: set[str] = set()

    def run(self) -> Program:
        g = self.graph
        for port in g.input_ports:
            ref = Ref(self.names.make(port.name))
            self.program.inputs.append((port.name, ref, _dtype(port)))
            self.values[port] = ref
        for op in g.topological_order():
            self.lower_op(op)
        for port in g.output_ports:
            if port.source is None:
                raise AmandaError(f"graph output {port.name!r} is not fed by any op")
            self.program.outputs.append((port.name, self.value(port.source, f"graph output {port.name!r}"),
                                         _dtype(port)))
        return self.program

    def value(self, src: OutputPort, where: str | Op) -> Any:
        """What ``src`` computes; ``where`` (text, or the reading op) names the reader if nothing does."""
        found = self.values.get(src, _MISSING)
        if found is _MISSING:
            if isinstance(where, Op):
                where = f"op {where.path!r}"
            raise AmandaError(f"{where}: the value {src.qualified_name} is not computed by any op")
        return found

    # -- ops
    def lower_op(self, op: Op) -> None:
        t = op.type or ""
        if t == "prim::Constant":
            self.constant(op)
        elif t == "prim::ListConstruct" or t == "prim::TupleConstruct":
            items = [self.input_value(op, p) for p in _indexed(op.input_ports, "elements")]
            if len(items) != len(op.input_ports):
                raise AmandaError(f"op {op.path!r} ({t}): its inputs are not elements_0 ... elements_<n-1>")
            for q in op.output_ports:
                self.values[q] = items if t == "prim::ListConstruct" else tuple(items)
        elif t in ("prim::ListUnpack", "prim::TupleUnpack"):
            self.unpack(op)
        elif t in ("higher_order::cond", "higher_order::while_loop"):
            self.higher_order(op)
        elif t in ("prim::If", "prim::Loop"):
            self.script_control(op)
        elif t == "aten::Bool.Tensor" and _only_conditions(op):
            pass  # prim::If reads the tensor itself (torch.cond while tracing): no .item() to trace
        elif t.startswith("prim::") and t in _UNSUPPORTED_PRIM:
            raise AmandaError(f"op {op.path!r}: {t} cannot be exported to a torch module")
        elif t == UNCONVERTED:
            self.unconverted(op)
        elif t == "aten::sym_size.int" and self.constant_size(op):
            pass
        elif t in PY_OPERATORS and len(op.output_ports) == 1:
            self.python_operator(op, PY_OPERATORS[t])
        else:
            self.call(op)

    def python_operator(self, op: Op, fn: Any) -> None:
        """Arithmetic and comparison of numbers (``aten::mul.int`` ...) as the Python operator torch.export writes
        for them: called on a SymInt, ``torch.ops.aten.mul.int`` makes torch.export fix that size (a dynamic batch
        times the heads would export only at the example's batch); ``operator.mul`` keeps it symbolic."""
        names = ("self",) if fn is operator.neg else ("a", "b")
        ports = op.input_ports
        if len(ports) != len(names) or any(p.name not in names or p.source is None for p in ports):
            self.call(op)  # not the plain form: the schema's own checks and messages
            return
        args = []
        for name in names:
            v = self.input_value(op, ports[name])
            args.append(v if v.__class__ is Ref else _resolve_plain(v))
        ref = Ref(self.names.make(op.name))
        self.program.calls.append(Call(fn, op.type or "", tuple(args), {}, ref, op.path))
        self.values[op.output_ports[0]] = ref

    def constant_size(self, op: Op) -> bool:
        """``aten::sym_size.int`` of a tensor a ``prim::Constant`` holds, at a literal dim: its value is the number
        (a size read at run time would leave torch.export a read of the constant that nothing uses, which its
        ``lift_constants_pass`` cannot take).  False, and nothing done, for any other."""
        ports = list(op.input_ports)
        if len(ports) != 2 or any(p.source is None or p.source.op is None for p in ports):
            return False
        held, dim = (p.source.op for p in ports)  # type: ignore[union-attr]
        if held.type != "prim::Constant" or dim.type != "prim::Constant":
            return False
        value, d = held.attrs.get("value"), dim.attrs.get("value")
        shape = getattr(value, "shape", None)
        if not isinstance(d, int) or isinstance(d, bool) or shape is None or not -len(shape) <= d < len(shape):
            return False
        size = _Literal(int(shape[d]))
        for q in op.output_ports:
            self.values[q] = size
        return True

    def unconverted(self, op: Op) -> None:
        """An op a partial conversion kept (:mod:`amanda_torch.foreign`): a call that raises, naming it."""
        a = op.attrs
        message = unconverted_message(str(a.get("op_name") or op.path), str(a.get("op_type") or "?"),
                                      str(a.get("namespace") or "?"), str(a.get("stands_for") or ""))
        inputs = tuple(plain(self.input_value(op, p)) for p in op.input_ports if p.source is not None)
        ref = Ref(self.names.make(op.name))
        self.program.calls.append(Call(unconverted, UNCONVERTED, (message, *inputs), {}, ref, op.path))
        outs = list(op.output_ports)
        for i, q in enumerate(outs):
            if len(outs) == 1:
                self.values[q] = ref
            elif q.has_consumers() or any(gp.source is q for gp in self.graph.output_ports):
                item = Ref(self.names.make(f"{op.name}_{q.name}"))
                self.program.calls.append(Call(operator.getitem, "getitem", (ref, i), {}, item, op.path))
                self.values[q] = item

    def input_value(self, op: Op, port: Any) -> Any:
        if port.source is None:
            raise AmandaError(f"op {op.path!r} ({op.type}): input {port.name!r} is not fed")
        return self.value(port.source, op)

    def constant(self, op: Op) -> None:
        if op.attrs.get("name") is not None:
            raise AmandaError(f"op {op.path!r}: a function constant ({op.attrs['name']}) cannot be exported")
        value = op.attrs.get("value")  # absent: None, as TorchScript's NoneType constant
        out = op.output_ports
        if value.__class__ not in _LITERAL_TYPES and (is_tensor(value) or _is_torch_tensor(value)):
            role = op.meta.get("role") or "constant"
            if role not in ("parameter", "buffer", "constant"):
                raise AmandaError(f"op {op.path!r}: meta.role {role!r} is not parameter, buffer or constant")
            target = op.meta.get("target") or op.name
            if not isinstance(target, str) or "" in target.split("."):
                raise AmandaError(f"op {op.path!r}: meta.target {target!r} is not a dotted attribute name")
            if role == "constant":
                target = self.names.make("_const_" + target.replace(".", "_"))
            if target in self.targets:
                raise AmandaError(f"op {op.path!r}: a second tensor is held as {target!r}")
            self.targets.add(target)
            ref = Ref(self.names.make(target))
            attr = Attr(target, value, role, ref, persistent=bool(op.meta.get("persistent", True)),
                        requires_grad=bool(op.meta.get("requires_grad", role == "parameter")), op=op.path)
            self.program.attrs.append(attr)
            for q in out:
                self.values[q] = ref
        else:
            if isinstance(value, np.generic):
                value = value.item()
            literal = _Literal(value)
            for q in out:
                self.values[q] = literal

    def unpack(self, op: Op) -> None:
        ports = list(op.input_ports)
        if len(ports) != 1:
            raise AmandaError(f"op {op.path!r} ({op.type}) must have one input")
        src = self.input_value(op, ports[0])
        outs = _indexed(op.output_ports, "elements")
        if len(outs) != len(op.output_ports):
            raise AmandaError(f"op {op.path!r} ({op.type}): its outputs are not elements_0 ... elements_<n-1>")
        for i, q in enumerate(outs):
            if isinstance(src, (list, tuple)):
                if i >= len(src):
                    raise AmandaError(f"op {op.path!r}: unpacks {len(outs)} values from a list of {len(src)}")
                self.values[q] = src[i]
            elif q.has_consumers():
                ref = Ref(self.names.make(f"{op.name}_{i}"))
                self.program.calls.append(Call(operator.getitem, "getitem", (plain(src), i), {}, ref, op.path))
                self.values[q] = ref

    def sub(self, op: Op, attr: str, inputs: list[str], outputs: list[str] | None, tuple_output: bool) -> Sub:
        body = op.attrs.get(attr)
        if not isinstance(body, Graph):
            raise AmandaError(f"op {op.path!r} ({op.type}) has no graph in attribute {attr!r}")
        if body.input_ports.names() != inputs or (outputs is not None and body.output_ports.names() != outputs):
            raise AmandaError(f"op {op.path!r} ({op.type}): {attr} has ports {body.input_ports.names()} -> "
                              f"{body.output_ports.names()}, expected {inputs} -> {outputs}")
        program = lower(body, self.program.namespace)
        return Sub(program, self.names.make(f"{op.name}_{attr}"), tuple_output)

    def higher_order(self, op: Op) -> None:
        import torch

        ins = op.input_ports.names()
        outs = op.output_ports.names()
        if op.type == "higher_order::cond":
            operands = _indexed(op.input_ports, "operands")
            if ins != ["pred"] + [p.name for p in operands]:
                raise AmandaError(f"op {op.path!r} (higher_order::cond): inputs must be pred, operands_0 ...")
            names = [p.name for p in operands]
            args: tuple[Any, ...] = (self.input_value(op, op.input_ports["pred"]),
                                     self.sub(op, "true_graph", names, outs, True),
                                     self.sub(op, "false_graph", names, outs, True),
                                     tuple(self.input_value(op, p) for p in operands))
            fn = torch.ops.higher_order.cond
        else:
            carried = _indexed(op.input_ports, "carried_inputs")
            extra = _indexed(op.input_ports, "additional_inputs")
            names = [p.name for p in carried + extra]
            if ins != names:
                raise AmandaError(f"op {op.path!r} (higher_order::while_loop): inputs must be carried_inputs_<i> "
                                  "then additional_inputs_<j>")
            args = (self.sub(op, "cond_graph", names, ["pred"], False),
                    self.sub(op, "body_graph", names, outs, True),
                    tuple(self.input_value(op, p) for p in carried),
                    tuple(self.input_value(op, p) for p in extra))
            fn = torch.ops.higher_order.while_loop
        ref = Ref(self.names.make(op.name))
        self.program.calls.append(Call(fn, op.type or "", tuple(plain(a) for a in args), {}, ref, op.path))
        for i, q in enumerate(_indexed(op.output_ports, "outputs")):
            if q.has_consumers():
                item = Ref(self.names.make(f"{op.name}_{i}"))
                self.program.calls.append(Call(operator.getitem, "getitem", (ref, i), {}, item, op.path))
                self.values[q] = item

    def script_control(self, op: Op) -> None:
        from .control import run_if, run_loop

        captured = _indexed(op.input_ports, "captured")
        cap_names = [p.name for p in captured]
        outs = op.output_ports.names()
        if op.type == "prim::If":
            if op.input_ports.names() != ["cond", *cap_names]:
                raise AmandaError(f"op {op.path!r} (prim::If): inputs must be cond, captured_0 ...")
            cond_port = op.input_ports["cond"]
            producer = cond_port.source.op if cond_port.source is not None else None
            if producer is not None and producer.type == "aten::Bool.Tensor":
                cond = self.input_value(producer, producer.input_ports[0])  # the tensor: torch.cond when tracing
            else:
                cond = self.input_value(op, cond_port)
            args: tuple[Any, ...] = (cond, self.sub(op, "then_block", cap_names, outs, True),
                                     self.sub(op, "else_block", cap_names, outs, True),
                                     tuple(self.input_value(op, p) for p in captured))
            fn: Any = run_if
            items = _indexed(op.output_ports, "outputs")
        else:
            carried = _indexed(op.input_ports, "carried")
            names = ["max_trip_count", "start_condition", *[p.name for p in carried], *cap_names]
            if op.input_ports.names() != names:
                raise AmandaError(f"op {op.path!r} (prim::Loop): inputs must be max_trip_count, start_condition, "
                                  "carried_<i>, captured_<k>")
            body_in = ["iteration", *[p.name for p in carried], *cap_names]
            args = (self.input_value(op, op.input_ports["max_trip_count"]),
                    self.input_value(op, op.input_ports["start_condition"]),
                    self.sub(op, "body", body_in, ["condition", *outs], True),
                    tuple(self.input_value(op, p) for p in carried),
                    tuple(self.input_value(op, p) for p in captured))
            fn = run_loop
            items = _indexed(op.output_ports, "carried")
        if len(items) != len(op.output_ports):
            raise AmandaError(f"op {op.path!r} ({op.type}): unexpected output ports {outs}")
        ref = Ref(self.names.make(op.name))
        self.program.calls.append(Call(fn, op.type or "", tuple(plain(a) for a in args), {}, ref, op.path))
        for i, q in enumerate(items):
            if q.has_consumers():
                item = Ref(self.names.make(f"{op.name}_{i}"))
                self.program.calls.append(Call(operator.getitem, "getitem", (ref, i), {}, item, op.path))
                self.values[q] = item

    def call(self, op: Op) -> None:
        t = op.type or ""
        fns = resolve_overload(t)
        if not fns:
            raise AmandaError(f"op {op.path!r}: {t or 'an op without type'} is not an operator of the installed "
                              f"torch ({self.program.namespace})")
        overloads = [_overload(f) for f in fns]
        problems: list[str] = []
        for ov in overloads:
            problem = self.fits(op, ov)
            if problem is None:
                self.emit(op, ov)
                return
            problems.append(problem)
        if len(overloads) == 1:
            raise AmandaError(f"op {op.path!r} ({t}): {problems[0]}")
        raise AmandaError(f"op {op.path!r} ({t}): its ports fit none of the {len(overloads)} overloads")

    def fits(self, op: Op, ov: _Overload) -> str | None:
        for p in op.input_ports:
            if p.name not in ov.in_ports:
                return f"{ov.qualname} has no argument {p.name!r} (arguments: {', '.join(ov.in_ports) or 'none'})"
        if ov.required:
            given = {p.name for p in op.input_ports if p.source is not None}
            for name in ov.required:
                if name not in given:
                    return f"argument {name!r} of {ov.qualname} is not given"
        for q in op.output_ports:
            if q.name not in ov.out_ports:
                return (f"{ov.qualname} has no return {q.name!r} "
                        f"(returns: {', '.join(ov.out_ports) or 'none'})")
        return None

    def emit(self, op: Op, ov: _Overload) -> None:
        given: dict[int, Any] = {}
        path = op.path
        schema_args = ov.schema.args
        for p in op.input_ports:
            src = p.source
            if src is None:
                continue
            i = ov.in_ports[p.name]
            v = self.values.get(src, _MISSING)
            if v is _MISSING:
                v = self.value(src, op)  # raises
            if v.__class__ is not Ref:
                base = ov.converts[i]
                v = _resolve_plain(v) if base is None else _resolve(v, base, path)
                if v is None and schema_args[i].default == "None":
                    continue  # an explicit None where the schema's default is None anyway
            given[i] = v
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        gap = False
        names = ov.in_names
        for i, arg in enumerate(schema_args):
            if arg.kwarg_only:
                gap = True
            if i not in given:
                if arg.default is None:  # an optional argument without default: torch wants it passed
                    if gap:
                        kwargs[arg.name or names[i]] = None
                    else:
                        args.append(None)
                    continue
                gap = True
                continue
            if gap and arg.name and names[i] == arg.name:
                kwargs[arg.name] = given[i]
            elif gap:
                raise AmandaError(f"op {op.path!r} ({ov.qualname}): argument {names[i]!r} can only be passed by "
                                  "position, but an argument before it is not given")
            else:
                args.append(given[i])
        ref = Ref(self.names.make(op.name))
        self.program.calls.append(Call(ov.fn, ov.qualname, tuple(args), kwargs, ref, path))
        if ov.one_return:
            for q in op.output_ports:
                self.values[q] = ref
            return
        for q in op.output_ports:
            if not q.has_consumers():
                continue
            item = Ref(self.names.make(f"{op.name}_{q.name}"))
            self.program.calls.append(Call(operator.getitem, "getitem", (ref, ov.out_ports[q.name]), {}, item,
                                           op.path))
            self.values[q] = item


PY_OPERATORS: dict[str, Any] = {
    f"aten::{name}.{overload}": fn
    for name, fn in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                     ("floordiv", operator.floordiv), ("div", operator.truediv), ("remainder", operator.mod),
                     ("eq", operator.eq), ("ne", operator.ne), ("lt", operator.lt), ("le", operator.le),
                     ("gt", operator.gt), ("ge", operator.ge))
    for overload in ("int", "float", "int_float", "float_int")
}
"""The number ops the importer makes of Python arithmetic on sizes (torch.export's ``operator.mul`` ...), and
the same ops from other sources (TorchScript, the ONNX size rules), lowered to those Python operators: each gives
what its ATen overload gives (``div`` a float, ``remainder`` Python's modulo, ``floordiv`` the floor), and on a
SymInt it keeps the size symbolic.  ``pow`` is not among them: ``aten::pow.int`` gives a float, Python's an int."""
PY_OPERATORS["aten::neg.int"] = PY_OPERATORS["aten::neg.float"] = operator.neg


_UNSUPPORTED_PRIM = {"prim::GetAttr", "prim::SetAttr", "prim::CallMethod", "prim::CallFunction",
                     "prim::CreateObject", "prim::fork", "prim::awaitable", "prim::Param", "prim::Return",
                     "prim::DictConstruct", "prim::Enter", "prim::Exit", "prim::isinstance"}


_MISSING = object()


@dataclass(frozen=True)
class _Literal:
    """A literal constant's value before its consumer's schema type converts it."""

    value: Any


_LITERAL_TYPES = {type(None), bool, int, float, str, list, tuple}  # constant values that are no tensor


def _resolve(value: Any, base: str, where: str) -> Any:
    """``value`` with its literals converted to the torch objects of schema base type ``base``."""
    if isinstance(value, _Literal):
        return _convert_literal(value.value, base, where)
    if isinstance(value, list):
        return [_resolve(v, base, where) for v in value]
    if isinstance(value, tuple):
        return tuple([_resolve(v, base, where) for v in value])
    return value


def _resolve_plain(value: Any) -> Any:
    """``value`` with its literals made plain: for an argument whose schema type needs no conversion."""
    if isinstance(value, _Literal):
        return _plain_literal(value.value)
    if isinstance(value, list):
        return [_resolve_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple([_resolve_plain(v) for v in value])
    return value


def plain(value: Any) -> Any:
    """A value with literals that no schema type converted (graph outputs, list elements) made plain."""
    if isinstance(value, _Literal):
        return value.value
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(plain(v) for v in value)
    return value


def _is_torch_tensor(value: Any) -> bool:
    return type(value).__module__.startswith("torch") and type(value).__name__ in ("Tensor", "Parameter")


def lower(graph: Graph, namespace: str | None = None) -> Program:
    """The calls ``graph`` makes, resolved against the installed torch; an :class:`AmandaError` naming the op
    for anything torch cannot run.  ``namespace``: that of a nested graph's enclosing graph."""
    program = _Lowering(graph, namespace).run()
    program.outputs = [(n, plain(v), t) for n, v, t in program.outputs]
    return program


def is_tensor_type(t: ValueType | None) -> bool:
    return isinstance(t, TensorValueType)


def _only_conditions(op: Op) -> bool:
    """True when every reader of the op's output is the condition of a ``prim::If``."""
    readers = [c for q in op.output_ports for c in q.consumers]
    return bool(readers) and all(c.name == "cond" and c.op is not None and c.op.type == "prim::If" for c in readers)
