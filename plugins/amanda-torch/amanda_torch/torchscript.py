"""TorchScript -> Amanda graph (``docs/torch.md``): ``.pt`` files of ``torch.jit.save``, scripted and traced modules.

A module is frozen first (``torch.jit.freeze`` without the numerics-changing passes), so parameters and buffers
become ``prim::Constant`` tensors and submodule calls are inlined.  Every node with an operator schema is typed by
its overload (``node.schema()``: ``aten::add.Tensor``), as the torch.export path types it, with ports named after
the schema's arguments; other nodes keep their kind (``prim::Constant``, ``prim::ListConstruct`` ...).

Blocks: ``prim::If`` holds graphs ``then_block`` and ``else_block`` (no inputs besides captured values; outputs
``outputs_<i>``), ``prim::Loop`` a graph ``body`` (inputs ``iteration``, ``carried_<i>``; outputs ``condition``,
``carried_<i>``).  A value of an enclosing graph used inside a block is *captured*: the op holding the block gets
an input ``captured_<k>`` fed by that value, and each of its block graphs an input port ``captured_<k>``
(edges never cross graphs).  Constants are not captured: a block that reads one gets its own ``prim::Constant``
op (a tensor constant shares its array).
"""

from __future__ import annotations

__all__ = ["load_script", "import_script"]

import os
import re
from typing import Any, Sequence

from amanda_core.errors import AmandaError, Location
from amanda_core.ir import Graph, OutputPort, bulk_build

from .importer import TorchImportError, literal_type_text, plain_literal, tensor_value, torch_namespace
from .scalar_types import LAYOUTS, MEMORY_FORMATS, lookup_enum, lookup_scalar_type
from .schema_text import parse_function_schema
from .schemas import TorchNamespaces

_NAMESPACES = TorchNamespaces()
_DEBUG_SUFFIX = re.compile(r"\.\d+$")
_NAME = re.compile(r"[^A-Za-z0-9_]+")


def load_script(path: str | os.PathLike[str]) -> Any:
    """``torch.jit.load`` of a file; a one-line error naming the file when it is not TorchScript."""
    import torch

    path = os.fspath(path)
    try:
        return torch.jit.load(path, map_location="cpu")
    except Exception as e:  # noqa: BLE001 - any failure of torch's reader means the same thing here
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        hint = ""
        try:
            import zipfile

            if zipfile.is_zipfile(path):
                with zipfile.ZipFile(path) as z:
                    if any(n.endswith("data.pkl") for n in z.namelist()):
                        hint = " (a torch.save checkpoint or state dict, not a torch.jit.save module)"
        except OSError:
            pass
        raise TorchImportError(f"not a TorchScript file{hint}: {first[:160]}", Location(path)) from None


def _clean(name: str) -> str:
    name = _DEBUG_SUFFIX.sub("", name)
    return _NAME.sub("_", name).strip("_") or "v"


class _Scope:
    """A graph being built: TorchScript values to ports, and what the block captures from outside."""

    def __init__(self, graph: Graph, parent: _Scope | None, importer: _ScriptImporter) -> None:
        self.graph = graph
        self.importer = importer
        self.parent = parent
        self.values: dict[Any, OutputPort] = {}
        self.captures: list[Any] = []  # outer values captured, in order: block input captured_<k>
        self.capture_ports: dict[Any, OutputPort] = {}

    def lookup(self, value: Any, where: str) -> OutputPort:
        port = self.values.get(value)
        if port is not None:
            return port
        if self.parent is None:
            raise AmandaError(f"{where}: value %{value.debugName()} is used before it is defined")
        if value.node().kind() == "prim::Constant":  # a block makes its own copy (tensors are shared, not copied)
            self.importer.constant(value.node(), self)
            return self.values[value]
        port = self.capture_ports.get(value)
        if port is None:
            k = len(self.captures)
            self.captures.append(value)
            port = self.graph.add_input_port(f"captured_{k}", _type_text(value))
            self.capture_ports[value] = port
        return port


def _type_text(value: Any) -> str | None:
    t = str(value.type())
    return t if t else None


class _ScriptImporter:
    def __init__(self, where: str | None) -> None:
        self.where = where
        self.ns = torch_namespace()
        self.schema = _NAMESPACES.schema(None)
        self.op_types: dict[str, str] = {}

    def error(self, message: str) -> AmandaError:
        return TorchImportError(message, Location(self.where)) if self.where else AmandaError(message)

    def run(self, tsgraph: Any, output_names: Sequence[str] | None, skip_self: bool) -> Graph:
        g = Graph(self.ns, {"source": "torchscript"})
        scope = _Scope(g, None, self)
        inputs = list(tsgraph.inputs())
        if skip_self and inputs and inputs[0].type().kind() == "ClassType":
            if inputs[0].uses():
                raise self.error("the frozen module still reads attributes of self (prim::GetAttr); "
                                 "only frozen modules are read")
            inputs = inputs[1:]
        taken: list[str] = []
        for v in inputs:
            name = _unique(_clean(v.debugName()), taken)
            taken.append(name)
            scope.values[v] = g.add_input_port(name, _type_text(v))
        self.nodes(tsgraph.nodes(), scope)
        outs = list(tsgraph.outputs())
        results = outs
        if len(outs) == 1 and outs[0].node().kind() == "prim::TupleConstruct" and len(outs[0].uses()) == 1:
            results = list(outs[0].node().inputs())
            tuple_op = scope.values[outs[0]].op
            if tuple_op is not None:
                for p in list(tuple_op.input_ports):
                    g.disconnect(p)
                g.remove_op(tuple_op)
        if output_names:
            names = [str(n) for n in output_names]
        else:
            names = ["output"] if len(results) == 1 else [f"out{i}" for i in range(len(results))]
        if len(names) != len(results):
            raise self.error(f"{len(names)} output name(s) given for {len(results)} output(s)")
        for v, name in zip(results, names):
            src = scope.lookup(v, "graph output")
            g.connect(src, g.add_output_port(name, src.dtype))
        return g

    def nodes(self, nodes: Any, scope: _Scope) -> None:
        for node in nodes:
            self.node(node, scope)

    def op_name(self, node: Any, g: Graph) -> str:
        outs = list(node.outputs())
        base = _clean(outs[0].debugName()) if outs else _clean(node.kind().split("::")[-1])
        if base.isdigit() or base == "v":
            base = _clean(node.kind().split("::")[-1]).lower() + (f"_{base}" if base.isdigit() else "")
        return g.unique_name(base)

    def node(self, node: Any, scope: _Scope) -> None:
        kind = node.kind()
        g = scope.graph
        if kind == "prim::Constant":
            self.constant(node, scope)
            return
        if kind == "prim::If":
            self.if_node(node, scope)
            return
        if kind == "prim::Loop":
            self.loop_node(node, scope)
            return
        if kind in ("prim::GetAttr", "prim::SetAttr", "prim::CallMethod"):
            raise self.error(f"node {kind} ({node.s('name') if node.hasAttribute('name') else ''}): module "
                             "attribute access left after freezing; script and freeze the module in eval mode")
        ins = list(node.inputs())
        outs = list(node.outputs())
        where = f"node %{outs[0].debugName() if outs else kind} ({kind})"
        op_type, in_names, out_names = self.signature(node, kind, len(ins), len(outs), where)
        ports: list[str] = []
        srcs: list[OutputPort] = []
        for v, name in zip(ins, in_names):
            if v.node().kind() == "prim::Constant" and str(v.type()) == "NoneType" and op_type != kind:
                continue  # None argument: the port is absent, as on the torch.export path
            ports.append(name)
            srcs.append(scope.lookup(v, where))
        op = g.add_op(op_type, self.op_name(node, g), inputs=ports,
                      outputs=[(n, _type_text(v)) for n, v in zip(out_names, outs)], sources=srcs)
        for v, p in zip(outs, op.output_ports):
            scope.values[v] = p

    def signature(self, node: Any, kind: str, n_in: int, n_out: int, where: str
                  ) -> tuple[str, list[str], list[str]]:
        """The op type (the overload when the node has a schema) and its input and output port names."""
        op_type = kind
        try:
            text = node.schema()
        except RuntimeError:
            text = "(no schema)"
        if text and text != "(no schema)":
            op_type = self.op_types.get(text)
            if op_type is None:
                parsed = parse_function_schema(text)
                op_type = f"{parsed.name}.{parsed.overload or 'default'}"
                self.op_types[text] = op_type
        s = self.schema.get(op_type)
        if s is None:
            raise self.error(f"{where}: {op_type} is not in {self.ns}")
        return op_type, _names(s.input_ports, n_in, "in"), _names(s.output_ports, n_out, "out")

    def constant(self, node: Any, scope: _Scope) -> None:
        out = node.output()
        g = scope.graph
        attrs: dict[str, Any] = {}
        type_text = _type_text(out)
        if node.hasAttribute("value"):
            ivalue = out.toIValue()
            where = f"constant %{out.debugName()}"
            import torch

            if isinstance(ivalue, torch.Tensor):
                attrs["value"] = tensor_value(ivalue, where)
            else:
                try:
                    attrs["value"] = plain_literal(ivalue)
                except AmandaError:
                    raise self.error(f"{where}: a constant of type {type_text} cannot be represented") from None
                if type_text is None:
                    type_text = literal_type_text(attrs["value"])
        elif node.hasAttribute("name"):
            raise self.error(f"constant %{out.debugName()}: function constants are not supported")
        op = g.add_op("prim::Constant", self.op_name(node, g), outputs=[("output", type_text)], attrs=attrs)
        scope.values[out] = op.output_ports[0]

    def block(self, block: Any, scope: _Scope, in_names: list[str], out_names: list[str], where: str
              ) -> tuple[Graph, _Scope]:
        sub = Graph()
        inner = _Scope(sub, scope, self)
        for v, name in zip(block.inputs(), in_names):
            inner.values[v] = sub.add_input_port(name, _type_text(v))
        self.nodes(block.nodes(), inner)
        for v, name in zip(block.outputs(), out_names):
            src = inner.lookup(v, where)
            sub.connect(src, sub.add_output_port(name, src.dtype))
        return sub, inner

    def _captured(self, scopes: list[_Scope], scope: _Scope, where: str) -> list[OutputPort]:
        """Make every block take every value any of them captures (same names, same order)."""
        order: list[Any] = []
        for s in scopes:
            for v in s.captures:
                if v not in order:
                    order.append(v)
        for s in scopes:
            # rename to the shared numbering: move ports to temporary names first, then to their places
            for v, port in list(s.capture_ports.items()):
                _rename_graph_input(s.graph, port.name, f"tmp_capture_{order.index(v)}")
            for v in order:
                if v not in s.capture_ports:
                    s.capture_ports[v] = s.graph.add_input_port(f"tmp_capture_{order.index(v)}", _type_text(v))
            for k in range(len(order)):
                _rename_graph_input(s.graph, f"tmp_capture_{k}", f"captured_{k}")
        return [scope.lookup(v, where) for v in order]

    def if_node(self, node: Any, scope: _Scope) -> None:
        outs = list(node.outputs())
        where = f"node %{outs[0].debugName() if outs else 'if'} (prim::If)"
        blocks = list(node.blocks())
        out_names = [f"outputs_{i}" for i in range(len(outs))]
        then_g, then_s = self.block(blocks[0], scope, [], out_names, f"{where} then block")
        else_g, else_s = self.block(blocks[1], scope, [], out_names, f"{where} else block")
        captured = self._captured([then_s, else_s], scope, where)
        cond = scope.lookup(node.input(), where)
        g = scope.graph
        op = g.add_op("prim::If", self.op_name(node, g),
                      inputs=["cond", *[f"captured_{k}" for k in range(len(captured))]],
                      outputs=[(n, _type_text(v)) for n, v in zip(out_names, outs)],
                      attrs={"then_block": then_g, "else_block": else_g}, sources=[cond, *captured])
        for v, p in zip(outs, op.output_ports):
            scope.values[v] = p

    def loop_node(self, node: Any, scope: _Scope) -> None:
        outs = list(node.outputs())
        ins = list(node.inputs())
        where = f"node %{outs[0].debugName() if outs else 'loop'} (prim::Loop)"
        carried = [f"carried_{i}" for i in range(len(outs))]
        (body,) = list(node.blocks())
        body_g, body_s = self.block(body, scope, ["iteration", *carried], ["condition", *carried], f"{where} body")
        captured = self._captured([body_s], scope, where)
        srcs = [scope.lookup(v, where) for v in ins]
        g = scope.graph
        op = g.add_op("prim::Loop", self.op_name(node, g),
                      inputs=["max_trip_count", "start_condition", *carried,
                              *[f"captured_{k}" for k in range(len(captured))]],
                      outputs=[(n, _type_text(v)) for n, v in zip(carried, outs)],
                      attrs={"body": body_g}, sources=[*srcs, *captured])
        for v, p in zip(outs, op.output_ports):
            scope.values[v] = p


def _rename_graph_input(graph: Graph, old: str, new: str) -> None:
    if old == new:
        return
    port = graph.input_ports[old]
    graph.input_ports._rename(port, new)


def _names(ports: Sequence[Any], count: int, prefix: str) -> list[str]:
    """Port names for ``count`` positional ports of a schema (variadic ones numbered)."""
    out: list[str] = []
    variadic = next((p for p in ports if p.variadic), None)
    i = 0
    for p in ports:
        if p.variadic:
            break
        if i == count:
            return out
        out.append(p.name)
        i += 1
    k = 0
    while i < count:
        if variadic is None:
            out.append(f"{prefix}{i}")
        else:
            out.append(f"{variadic.name}_{k}")
            k += 1
        i += 1
    return out


def _unique(name: str, taken: Sequence[str]) -> str:
    out, n = name, 1
    while out in taken:
        out = f"{name}_{n}"
        n += 1
    return out


_ENUM_PORTS = {"ScalarType": None, "Layout": LAYOUTS, "MemoryFormat": MEMORY_FORMATS}


def _name_enum_constants(graph: Graph, schema: Any) -> None:
    """Integer constants that only feed ``ScalarType``/``Layout``/``MemoryFormat`` ports hold names, as on the
    torch.export path (TorchScript stores them as numbers)."""
    for op in graph.walk():
        if op.type != "prim::Constant" or not isinstance(op.attrs.get("value"), int) \
                or isinstance(op.attrs.get("value"), bool):
            continue
        kinds = set()
        for c in op.output_ports[0].consumers:
            owner = c.op
            s = schema.get(owner.type) if owner is not None else None
            port_schema = next((p for p in s.input_ports if p.accepts_name(c.name)), None) if s else None
            kinds.add(str(port_schema.type).replace("torch.", "").rstrip("?") if port_schema else None)
        if len(kinds) != 1:
            continue
        (kind,) = kinds
        if kind not in _ENUM_PORTS:
            continue
        value = op.attrs["value"]
        table = _ENUM_PORTS[kind]
        row = lookup_scalar_type(value) if table is None else lookup_enum(table, value)
        if row is not None:
            op.attrs["value"] = row.torch_name
            op.output_ports[0].dtype = kind


def import_script(module: Any, *, freeze: bool = True, where: str | None = None,
                  output_names: Sequence[Any] | None = None) -> Graph:
    """A graph of a ``ScriptModule`` (frozen first, see the module doc) or ``ScriptFunction``."""
    import torch

    skip_self = False
    if isinstance(module, torch.jit.ScriptModule):
        skip_self = True
        if freeze:
            original, was_training = module, module.training
            original.eval()
            try:
                module = torch.jit.freeze(original, optimize_numerics=False)
            except Exception as e:  # noqa: BLE001 - freezing fails in many ways; each is one line
                first = (str(e).strip().splitlines() or [type(e).__name__])[0]
                raise (TorchImportError(f"cannot freeze the module: {first[:160]}", Location(where)) if where
                       else AmandaError(f"cannot freeze the TorchScript module: {first[:160]}")) from None
            finally:
                if was_training:
                    original.train()
        tsgraph = module.graph
    elif isinstance(module, torch.jit.ScriptFunction):
        tsgraph = module.graph
    else:
        raise AmandaError(f"not a TorchScript module or function: {type(module).__name__}")
    importer = _ScriptImporter(where)
    with bulk_build():
        graph = importer.run(tsgraph, [str(n) for n in output_names] if output_names else None, skip_self)
        _name_enum_constants(graph, importer.schema)
    return graph
