"""Amanda graph -> ONNX model (the inverse of :mod:`amanda_onnx.importer`; see ``docs/onnx.md``).

Entry points: :func:`to_model` (a ``ModelProto`` in memory) and :func:`save_model` (also writes a file,
atomically, with an external data file when asked or when the model would not fit protobuf's 2 GB).

Every error names what is at fault: the op (by its path through subgraphs), the graph's namespace, the value
name produced twice, the ops of a cycle.
"""

from __future__ import annotations

__all__ = ["to_model", "save_model", "MAX_PROTO_SIZE"]

import bisect
import os
import sys
from typing import Any

import numpy as np
import onnx

from amanda_core import progress
from amanda_core.errors import GraphError, NamespaceError
from amanda_core.ir import Graph, GraphOutput, Op, OutputPort, Tensor, bulk_build
from amanda_core.ir.tensor import FileTensor
from amanda_core.serialization import atomic_write, atomic_write_many
from amanda_core.serialization.files import start_writeback

from .common import KIND_NUMBERS, PLANS, Plan, domain_component, infer_kind, namespace_domain
from .dtypes import type_proto_from_dtype
from .plain import fill_entries, plain_to_message
from .structural import INITIALIZER, OUTER_VALUE, STRUCTURAL_TYPES
from .tensors import (
    EXTERNAL,
    encode_tensor,
    encode_tensor_header,
    packed_bytes,
    plain_tensor_fields,
    streamable_bytes,
    tensor_nbytes_packed,
)
from .typesystem import SparseTensor
from .wire import MAGIC, is_placeholder, placeholder, placeholder_index, rewrite

MAX_PROTO_SIZE = 2**31 - 1
"""Protobuf cannot serialize a message larger than this; bigger models need external data."""
_HEADROOM = 64 * 2**20  # room for everything that is not tensor data
_ALIGN = 64
_DEFAULT_SIZE_THRESHOLD = 1024
_WRITE_CHUNK = 16 * 2**20
STREAM_MIN_BYTES = 1024
"""Plain tensors of at least this many bytes are streamed to the file rather than copied into the message."""
WEIGHTLESS_LOCATION = "amanda-weightless-copy"

_MODEL_KEYS = {"ir_version", "opset_import", "producer_name", "producer_version", "model_domain", "model_version",
               "model_doc_string", "model_metadata_props", "functions", "training_info", "configuration"}


class _NotSorted(Exception):
    """The ops' insertion order is not a topological order: write the graph again, sorted."""


class _Scope:
    """The ONNX names of one graph's values while it is written."""

    __slots__ = ("names", "producers", "parent", "namespace", "used", "where", "plans")

    def __init__(self, parent: _Scope | None, namespace: str, used: dict[str, tuple[int | None, str]],
                 where: str) -> None:
        self.names: dict[OutputPort, str] = {}
        self.producers: dict[str, Any] = {}
        self.parent = parent
        self.namespace = namespace
        self.used = used  # domain -> (opset, op that first used it)
        self.where = where
        # (namespace, op type) -> (plan, domain, opset); shared by the graphs of one model or function
        self.plans: dict[tuple[str, str], tuple[Plan, str, int | None]] = parent.plans if parent is not None \
            else {}

    def outer_has(self, name: str) -> bool:
        s = self.parent
        while s is not None:
            if name in s.producers:
                return True
            s = s.parent
        return False

    def taken_anywhere(self, name: str) -> bool:
        return name in self.producers or self.outer_has(name)


RUNTIME_TAKEN_NAMES = frozenset({"squeeze_axes"})
"""Initializer names onnxruntime's graph optimizers give tensors they add without looking for one of that name
already (1.32's GatherSliceToSplitFusion adds ``squeeze_axes`` when it turns Gathers of one tensor into a Split,
and the session then fails to load: "Attempt to replace the existing tensor").  In a graph made from another
framework (a torch ``squeeze`` op's ``axes``) such a constant is written under another name; the names of a graph
read from an ONNX file are kept, as every name of it is."""


def _free_name(op: Op, scope: _Scope) -> str:
    """``<op name>_<k>`` for the first k that no value of the scope and no op of the graph has."""
    ops = op.graph.ops if op.graph is not None else {}
    k = 1
    while scope.taken_anywhere(f"{op.name}_{k}") or f"{op.name}_{k}" in ops:
        k += 1
    return f"{op.name}_{k}"


def _op_path(op: Op, scope: _Scope) -> str:
    return f"{scope.where}/{op.name}" if scope.where else op.name


class _Exporter:
    def __init__(self, graph: Graph, *, keep_external: bool, threshold: int | None, stream: bool = False,
                 weightless: bool = False) -> None:
        self.graph = graph
        self.keep_external = keep_external
        self.threshold = threshold  # tensors this large go to the external file (None: only those that must)
        self.external: list[tuple[Any, Any, str]] = []  # (TensorProto, data: array or lazy Tensor, where)
        # stream: large plain tensors are not copied into the message; their raw_data is a reference (see
        # amanda_onnx.wire) to sources[i], whose bytes the writer streams into place
        self.stream = stream
        self.weightless = weightless  # large plain tensors get no data at all (for shape inference)
        self.sources: list[tuple[Any, Any, int, str]] = []  # (TensorProto, value, bytes, where)
        self.embedded = 0
        self.plans: dict[tuple[str, str], tuple[Plan, str, int | None]] = {}
        self.types: dict[str, Any] = {}
        # a graph read from an ONNX file (its ir_version recorded) keeps every name; one made from another
        # framework avoids the names in RUNTIME_TAKEN_NAMES
        self.read_from_onnx = "ir_version" in graph.attrs

    # -- model
    def model(self) -> Any:
        g = self.graph
        ns = g.namespace
        if ns is None:
            raise GraphError("the graph has no namespace; ONNX export needs an ONNX namespace (amanda/onnx/<opset>)")
        try:
            domain, _ = namespace_domain(ns)
        except NamespaceError:
            raise GraphError(f"the graph is in namespace {ns}, which is not an ONNX namespace (amanda/onnx/...); "
                             "convert it first") from None
        attrs = g.attrs
        m = onnx.ModelProto()
        used: dict[str, tuple[int | None, str]] = {}
        scope = _Scope(None, ns, used, "")
        self.top_scope = scope
        self.sub_scopes: list[_Scope] = []  # the scopes of If/Loop/Scan bodies, in export order
        self.graph_into(g, m.graph, scope)
        if "name" not in attrs and "ir_version" not in attrs:  # not read from ONNX: ONNX wants a graph name
            m.graph.name = "main_graph"
        for key, field in (("producer_name", "producer_name"), ("producer_version", "producer_version"),
                           ("model_domain", "domain"), ("model_version", "model_version"),
                           ("model_doc_string", "doc_string")):
            if key in attrs:
                setattr(m, field, attrs[key])
        if "model_metadata_props" in attrs:
            fill_entries(m.metadata_props, attrs["model_metadata_props"])
        if "functions" in attrs:
            for i, fg in enumerate(attrs["functions"]):
                if not isinstance(fg, Graph):
                    raise GraphError(f"graph attribute functions[{i}] is a {type(fg).__name__}, not a graph")
                self.function(fg, m.functions.add(), i)
        if "training_info" in attrs:
            for i, t in enumerate(attrs["training_info"]):
                self.training(t, m.training_info.add(), scope, i)
        if "configuration" in attrs:
            fill_entries(m.configuration, attrs["configuration"])
        recorded = attrs.get("opset_import")
        entries = self.opsets(recorded, used, ns if domain == "" else None, "the model")
        fill_entries(m.opset_import, entries)
        unchanged = entries == list(recorded or [])
        if "ir_version" in attrs and (unchanged or attrs["ir_version"] >= _min_ir_version(entries)):
            m.ir_version = attrs["ir_version"]  # as read (a model is written back exactly as it came)
        else:
            # a converted model whose opsets need a newer IR than the one it was read with
            m.ir_version = _min_ir_version(entries)
        return m

    def opsets(self, entries: Any, used: dict[str, tuple[int | None, str]], default_ns: str | None,
               where: str) -> list[dict[str, Any]]:
        """The opset_import entries: the recorded ones with versions brought in line with the namespaces the ops
        are in, plus one per domain used that has none."""
        out = [dict(e) for e in (entries or [])]
        if default_ns is not None:
            _, v = namespace_domain(default_ns)
            if v is not None and "" not in used:
                used = {**used, "": (v, "")}
        seen: set[str] = set()
        for e in out:
            dom = e.get("domain", "")
            key = "" if dom in ("", "ai.onnx") else dom
            # ops name a domain by its namespace component, which differs for domains a namespace cannot spell
            for k in (key, domain_component(key) if key else key):
                seen.add(k)
                found = used.get(k)
                if found is not None and found[0] is not None and e.get("version") != found[0]:
                    e["version"] = found[0]
        for dom, (version, op_path) in used.items():
            if dom in seen:
                continue
            if version is None:
                raise GraphError(f"op {op_path!r} is in ONNX domain {dom or 'ai.onnx'!r}, but its namespace gives no "
                                 f"opset version, so {where} cannot import that domain")
            out.append({"domain": dom, "version": version})
        return out

    # -- graphs
    def graph_into(self, g: Graph, gp: Any, scope: _Scope) -> None:
        """Write graph ``g`` into GraphProto ``gp``: in the ops' insertion order when that is a topological
        order (what an imported graph has), else in ``g.topological_order()``."""
        mark = (len(self.external), self.embedded, len(self.sources))
        try:
            self.graph_in_order(g, gp, scope, False)
        except _NotSorted:
            gp.Clear()
            del self.external[mark[0]:]
            self.embedded = mark[1]
            del self.sources[mark[2]:]
            scope.names.clear()
            scope.producers.clear()
            self.graph_in_order(g, gp, scope, True)

    def graph_in_order(self, g: Graph, gp: Any, scope: _Scope, sort: bool) -> None:
        attrs = g.attrs
        if "name" in attrs:
            gp.name = attrs["name"]
        if "doc_string" in attrs:
            gp.doc_string = attrs["doc_string"]
        port_info = attrs.get("port_info") or {}
        in_info = port_info.get("inputs") or {}
        out_info = port_info.get("outputs") or {}
        for p in g.input_ports:
            self.value_info(gp.input.add(), p.name, p.dtype, in_info.get(p.name))
        typed = self.body(g, scope, gp.node, gp.initializer, gp.sparse_initializer, sort)
        self.outputs(g, scope, gp.node)
        for p in g.output_ports:
            self.value_info(gp.output.add(), p.name, p.dtype, out_info.get(p.name))
        self.value_infos(g, attrs.get("value_info"), typed, gp.value_info, scope)
        if "quantization_annotation" in attrs:
            fill_entries(gp.quantization_annotation, attrs["quantization_annotation"])
        if "metadata_props" in attrs:
            fill_entries(gp.metadata_props, attrs["metadata_props"])

    def body(self, g: Graph, scope: _Scope, container: Any, inits: Any, sparse: Any,
             sort: bool) -> list[OutputPort]:
        """One pass over the ops of ``g``: name every value, write initializers to ``inits``/``sparse`` and
        nodes to ``container``.  Returns the node output ports that have a dtype.

        Without ``sort`` the ops go in insertion order, and :class:`_NotSorted` is raised as soon as an op reads
        a value whose producer comes later (or an op waits on a control edge from a later op); with ``sort``
        they go in topological order.  Raises GraphError for a cycle (naming its ops), a value named twice, an
        op outside ONNX."""
        order = g.topological_order() if sort else list(g)
        names = scope.names
        producers = scope.producers
        for p in g.input_ports:
            names[p] = p.name
            producers[p.name] = p
        plans = scope.plans
        snamespace = scope.namespace
        add = container.add
        typed: list[OutputPort] = []
        wanted: dict[OutputPort, str] | None = None
        done: set[Op] = set()
        for op in order:
            done.add(op)
            t = op.type
            ns = op.namespace
            if ns is None and t in STRUCTURAL_TYPES:
                self.structural(op, t, scope, inits, sparse)
                continue
            key = (ns or snamespace, t)
            entry = plans.get(key)
            if entry is None:
                entry = self.new_plan(op, key, scope)
            plan = entry[0]
            if op.body is not None:
                raise GraphError(f"op {_op_path(op, scope)!r} ({t}) contains a graph (a composite op); ONNX has no "
                                 "such ops: inline it first")
            meta = op.meta
            # output values: their recorded ONNX names, else generated ones
            out_meta = meta.get("outputs")
            out_values = []
            outs = op.output_ports
            out_pnames = outs.names()
            for q, pname in zip(outs, out_pnames):
                name = out_meta.get(pname) if out_meta is not None else None
                if name is None or (not name and q.has_consumers()):
                    if wanted is None:
                        wanted = self.wanted_names(g, scope)
                    name = self.new_name(op, q, wanted, scope)
                elif name:
                    old = producers.get(name)
                    if old is not None and old is not q:
                        raise GraphError(_twice(name, old, op, scope))
                    producers[name] = q
                names[q] = name
                out_values.append(name)
                if q.dtype is not None:
                    typed.append(q)
            if "name" in meta:
                node_name = meta["name"]
            else:
                node_name = op.name
            if "domain" in meta:
                domain = meta["domain"]
            else:
                domain = entry[1] or None
            if not sort and op.has_control_inputs() and any(c not in done for c in op.control_inputs):
                raise _NotSorted
            ins = op.input_ports
            if len(ins):
                try:
                    values = [names[src] if src is not None else "" for src in ins.sources()]
                except KeyError:
                    raise _NotSorted from None
                pnames = ins.names()
                if pnames != (plan._in_names.get(len(pnames)) or plan.input_names(len(pnames))):
                    values = _place(values, pnames, plan, True, op, scope)
            else:
                values = None
            if out_values:
                if out_pnames != (plan._out_names.get(len(out_pnames)) or plan.output_names(len(out_pnames))):
                    out_values = _place(out_values, out_pnames, plan, False, op, scope)
            # one call sets the plain fields (protobuf sets them in C); absent ones stay absent
            if node_name is None:
                node = add(op_type=t, input=values, output=out_values, domain=domain)
            else:
                node = add(op_type=t, name=node_name, input=values, output=out_values, domain=domain)
            if op.attrs or "attrs" in meta:
                self.attributes(op, node, plan, scope)
            if len(meta) > ("outputs" in meta) + ("name" in meta) + ("domain" in meta) + ("attrs" in meta) + (
                    "attr_order" in meta):
                self.node_extras(meta, node)
        return typed

    def new_plan(self, op: Op, key: tuple[str, str], scope: _Scope) -> tuple[Plan, str, int | None]:
        ns, t = key
        try:
            domain, version = namespace_domain(ns)
        except NamespaceError:
            raise GraphError(f"op {_op_path(op, scope)!r} ({t}) is in namespace {ns}, which is not an ONNX "
                             "namespace (amanda/onnx/...); convert it first") from None
        if not t:
            raise GraphError(f"op {_op_path(op, scope)!r} has no type")
        u = scope.used.get(domain)
        if u is None:
            scope.used[domain] = (version, _op_path(op, scope))
        elif u[0] != version:
            raise GraphError(f"op {_op_path(op, scope)!r} is in opset {version} of ONNX domain "
                             f"{domain or 'ai.onnx'!r}, but op {u[1]!r} is in opset {u[0]}: an ONNX model imports "
                             "one opset per domain")
        found = scope.plans[key] = (PLANS.plan(domain, version, t), domain, version)
        return found

    def structural(self, op: Op, t: str, scope: _Scope, inits: Any, sparse: Any) -> None:
        ports = op.output_ports
        if len(ports) != 1 or len(op.input_ports):
            raise GraphError(f"op {_op_path(op, scope)!r} ({t}) must have no input ports and one output port")
        q = ports[0]
        if t == OUTER_VALUE:
            name = op.attrs.get("name")
            if not isinstance(name, str) or not name:
                raise GraphError(f"op {_op_path(op, scope)!r} (OuterValue) needs attribute 'name', the value's ONNX "
                                 "name in the enclosing graph")
            if not scope.outer_has(name):
                raise GraphError(f"op {_op_path(op, scope)!r} refers to the outer value {name!r}, which no enclosing "
                                 "graph produces")
            old = scope.producers.get(name)
            if old is not None and old is not q:
                raise GraphError(_twice(name, old, op, scope))
            scope.names[q] = name
            scope.producers[name] = q
            return
        if inits is None:
            raise GraphError(f"op {_op_path(op, scope)!r} ({t}): a function cannot hold initializers")
        meta = op.meta
        if "name" in meta:
            name = meta["name"]
        elif op.name in RUNTIME_TAKEN_NAMES and not self.read_from_onnx:
            name = _free_name(op, scope)
        else:
            name = op.name
        scope.names[q] = name or ""
        if name:
            old = scope.producers.get(name)
            if op.attrs.get("graph_input"):
                if old is None or not isinstance(old, OutputPort) or old.op is not None:
                    raise GraphError(f"op {_op_path(op, scope)!r} is the default of graph input {name!r}, but the "
                                     "graph has no such input")
            elif old is not None and old is not q:
                raise GraphError(_twice(name, old, op, scope))
            else:
                scope.producers[name] = q
        if t == INITIALIZER:
            value = op.attrs.get("value")
            if "tensor" not in meta and value.__class__ is np.ndarray and not (
                    (self.stream or self.weightless) and value.nbytes >= STREAM_MIN_BYTES):
                plain = plain_tensor_fields(value)  # the common case, set in one call
                if plain is not None and (self.threshold is None or len(plain[1]) < self.threshold):
                    if name is None:
                        inits.add(dims=value.shape, data_type=plain[0], raw_data=plain[1])
                    else:
                        inits.add(name=name, dims=value.shape, data_type=plain[0], raw_data=plain[1])
                    self.embedded += value.nbytes
                    return
            self.initializer(op, inits.add(), scope)
        else:
            self.sparse_initializer(op, sparse.add(), scope)

    def wanted_names(self, g: Graph, scope: _Scope) -> dict[OutputPort, str]:
        """Values without a recorded ONNX name that feed a graph output take that output's name."""
        wanted: dict[OutputPort, str] = {}
        for go in g.output_ports:
            src = go.source
            if src is not None and src not in wanted and not scope.taken_anywhere(go.name):
                wanted[src] = go.name
        return wanted

    def new_name(self, op: Op, q: OutputPort, wanted: dict[OutputPort, str], scope: _Scope) -> str:
        name = wanted.get(q)
        if name is None or scope.taken_anywhere(name):
            base = f"{op.name}_{q.name}"
            name = base
            k = 0
            while scope.taken_anywhere(name):
                k += 1
                name = f"{base}_{k}"
        scope.producers[name] = q
        return name

    def outputs(self, g: Graph, scope: _Scope, container: Any) -> None:
        """Graph outputs must be values of their own name: an output fed by a value named otherwise gets an
        Identity node."""
        for go in g.output_ports:
            src = go.source
            if src is None:
                raise GraphError(f"{_where(scope)}output {go.name!r} is fed by nothing")
            name = scope.names.get(src)
            if name == go.name:
                continue
            if name is None or name == "":
                raise GraphError(f"{_where(scope)}output {go.name!r} is fed by a value with no ONNX name")
            old = scope.producers.get(go.name)
            if old is not None:
                raise GraphError(f"{_where(scope)}output {go.name!r} is fed by {name!r}, and another value already "
                                 f"has the name {go.name!r}")
            node = container.add()
            node.op_type = "Identity"
            node.name = f"{go.name}_identity"
            node.input.append(name)
            node.output.append(go.name)
            scope.producers[go.name] = go

    def node_extras(self, meta: dict[str, Any], node: Any) -> None:
        if "overload" in meta:
            node.overload = meta["overload"]
        if "doc_string" in meta:
            node.doc_string = meta["doc_string"]
        if "metadata_props" in meta:
            fill_entries(node.metadata_props, meta["metadata_props"])
        if "device_configurations" in meta:
            fill_entries(node.device_configurations, meta["device_configurations"])

    # -- attributes
    def attributes(self, op: Op, node: Any, plan: Plan, scope: _Scope) -> None:
        meta = op.meta
        infos = meta.get("attrs") or {}
        attrs = op.attrs
        order = meta.get("attr_order")
        if order is None:
            order = list(attrs)
            order.extend(k for k, v in infos.items() if k not in attrs and "ref_attr_name" in v)
        for name in order:
            info = infos.get(name)
            if name in attrs:
                self.attribute(node.attribute, name, attrs[name], info, plan, op, scope)
            elif info is not None and "ref_attr_name" in info:
                self.attribute(node.attribute, name, None, info, plan, op, scope)

    def attribute(self, container: Any, name: str, value: Any, info: dict[str, Any] | None, plan: Plan | None,
                  op: Op, scope: _Scope) -> None:
        ref = info is not None and "ref_attr_name" in info
        unset = info is not None and info.get("unset")
        if value is None and not ref and not unset:
            return
        kind = None
        untyped = False
        if info is not None:
            kind = info.get("untyped")
            untyped = kind is not None
            if kind is None:
                kind = info.get("type")
        if kind is None and plan is not None:
            kind = plan.attr_kinds.get(name)
        if kind is None:
            kind = infer_kind(value)
        if kind is None or kind not in KIND_NUMBERS:
            raise GraphError(f"op {_op_path(op, scope)!r} attribute {name!r}: cannot tell its ONNX attribute type from "
                             f"the value {value!r}; record it in op.meta['attrs'][{name!r}]['type']")
        a = container.add()
        a.name = name
        if not untyped:
            a.type = KIND_NUMBERS[kind]
        if info is not None:
            if "doc_string" in info:
                a.doc_string = info["doc_string"]
            if ref:
                a.ref_attr_name = info["ref_attr_name"]
                return
            if unset:
                return
        try:
            self.attr_value(a, kind, value, info, op, name, scope)
        except (TypeError, ValueError) as e:
            raise GraphError(f"op {_op_path(op, scope)!r} attribute {name!r} ({kind}): {e}") from None

    def attr_value(self, a: Any, kind: str, v: Any, info: dict[str, Any] | None, op: Op, name: str,
                   scope: _Scope) -> None:
        where = f"op {_op_path(op, scope)!r} attribute {name!r}"
        if kind == "INT":
            a.i = int(v)
        elif kind == "FLOAT":
            a.f = v
        elif kind == "STRING":
            a.s = v.encode("utf-8") if isinstance(v, str) else v
        elif kind == "INTS":
            a.ints.extend(int(x) for x in v)
        elif kind == "FLOATS":
            a.floats.extend(v)
        elif kind == "STRINGS":
            a.strings.extend(x.encode("utf-8") if isinstance(x, str) else x for x in v)
        elif kind == "TENSOR":
            self.tensor(a.t, v, info.get("tensor") if info else None, where)
        elif kind == "TENSORS":
            tinfos = (info or {}).get("tensors") or []
            for i, x in enumerate(v):
                self.tensor(a.tensors.add(), x, tinfos[i] if i < len(tinfos) else None, f"{where}[{i}]")
        elif kind == "GRAPH":
            self.subgraph(v, a.g, scope, f"{op.name}.{name}")
        elif kind == "GRAPHS":
            for i, x in enumerate(v):
                self.subgraph(x, a.graphs.add(), scope, f"{op.name}.{name}[{i}]")
        elif kind == "SPARSE_TENSOR":
            self.sparse(a.sparse_tensor, v, (info or {}).get("sparse_tensor"), where)
        elif kind == "SPARSE_TENSORS":
            sinfos = (info or {}).get("sparse_tensors") or []
            for i, x in enumerate(v):
                self.sparse(a.sparse_tensors.add(), x, sinfos[i] if i < len(sinfos) else None, f"{where}[{i}]")
        elif kind == "TYPE_PROTO":
            self.type_into(a.tp, v, (info or {}).get("type_proto"))
        elif kind == "TYPE_PROTOS":
            plains = (info or {}).get("type_protos") or []
            for i, x in enumerate(v):
                self.type_into(a.type_protos.add(), x, plains[i] if i < len(plains) else None)

    def subgraph(self, g: Any, gp: Any, scope: _Scope, label: str) -> None:
        if not isinstance(g, Graph):
            raise TypeError(f"expected a graph, got {type(g).__name__}")
        ns = g.namespace or scope.namespace
        where = f"{scope.where}/{label}" if scope.where else label
        inner = _Scope(scope, ns, scope.used, where)
        self.sub_scopes.append(inner)
        self.graph_into(g, gp, inner)

    # -- tensors
    def tensor(self, tp: Any, value: Any, info: dict[str, Any] | None, where: str) -> None:
        if info is not None and "name" in info:
            if info["name"] is not None:
                tp.name = info["name"]
        self.tensor_data(tp, value, info, where)

    def tensor_data(self, tp: Any, value: Any, extras: dict[str, Any] | None, where: str) -> None:
        if (self.stream or self.weightless) and self.deferred(tp, value, extras, where):
            return
        ext = encode_tensor(tp, value, extras, where, self.keep_external)
        if ext is not None:
            self.external.append((tp, ext, where))
            return
        if self.threshold is not None and tp.HasField("raw_data") and len(tp.raw_data) >= self.threshold:
            data = value.numpy() if isinstance(value, Tensor) else value
            tp.ClearField("raw_data")
            self.external.append((tp, data, where))
            return
        if tp.data_location != EXTERNAL:  # a kept reference to an external file holds no data here
            self.embedded += tp.ByteSize() if tp.data_type == 8 else value.nbytes

    def deferred(self, tp: Any, value: Any, extras: dict[str, Any] | None, where: str) -> bool:
        """Write a large plain tensor without its bytes: a reference to stream (or nothing, weightless); False
        when the tensor is small or not plain (the general path encodes it)."""
        if isinstance(value, Tensor) and not isinstance(value, FileTensor):
            return False  # a loader of unknown cost: the general path
        nbytes = streamable_bytes(value, extras)
        if nbytes is None or nbytes < STREAM_MIN_BYTES:
            return False
        if extras is not None and extras.get("data_location") == EXTERNAL and self.keep_external \
                and not self.weightless:
            return False  # may stay a reference to its file (to_model)
        encode_tensor_header(tp, value, extras)
        if self.weightless:
            tp.data_location = EXTERNAL
            e = tp.external_data.add()
            e.key, e.value = "location", WEIGHTLESS_LOCATION
            return True
        if (extras is not None and extras.get("data_location") == EXTERNAL) or \
                (self.threshold is not None and nbytes >= self.threshold):
            self.external.append((tp, value, where))
            return True
        tp.raw_data = placeholder(len(self.sources))
        self.sources.append((tp, value, nbytes, where))
        self.embedded += nbytes
        return True

    def initializer(self, op: Op, tp: Any, scope: _Scope) -> None:
        meta = op.meta
        name = meta["name"] if "name" in meta else op.name
        if name is not None:
            tp.name = name
        if "value" not in op.attrs:
            raise GraphError(f"op {_op_path(op, scope)!r} (Initializer) has no attribute 'value'")
        try:
            self.tensor_data(tp, op.attrs["value"], meta.get("tensor"), f"initializer {name!r}")
        except ValueError as e:
            raise GraphError(f"op {_op_path(op, scope)!r} (Initializer): {e}") from None

    def sparse_initializer(self, op: Op, sp: Any, scope: _Scope) -> None:
        meta = op.meta
        info = dict(meta.get("sparse_tensor") or {})
        name = meta["name"] if "name" in meta else op.name
        values = dict(info.get("values") or {})
        values["name"] = name
        info["values"] = values
        try:
            self.sparse(sp, op.attrs.get("value"), info, f"sparse initializer {name!r}")
        except (TypeError, ValueError) as e:
            raise GraphError(f"op {_op_path(op, scope)!r} (SparseInitializer): {e}") from None

    def sparse(self, sp: Any, value: Any, info: dict[str, Any] | None, where: str) -> None:
        if not isinstance(value, SparseTensor):
            raise TypeError(f"{where}: expected an amanda_onnx SparseTensor, got {type(value).__name__}")
        info = info or {}
        self.tensor(sp.values, value.values, info.get("values"), where + " values")
        self.tensor(sp.indices, value.indices, info.get("indices"), where + " indices")
        sp.dims.extend(value.dims)

    # -- types and value infos
    def type_into(self, tp: Any, dtype: Any, plain: dict[str, Any] | None) -> None:
        if plain is not None and plain.get("dtype") == (None if dtype is None else str(dtype)):
            plain_to_message(plain["type"], tp)
            return
        if dtype is None:
            tp.SetInParent()
            return
        key = str(dtype)
        cached = self.types.get(key)
        if cached is None:
            cached = self.types[key] = type_proto_from_dtype(key)
        tp.CopyFrom(cached)

    def value_info(self, vi: Any, name: str, dtype: Any, extra: dict[str, Any] | None) -> None:
        vi.name = name
        if extra is not None and "type" in extra and extra.get("dtype") == (None if dtype is None else str(dtype)):
            plain_to_message(extra["type"], vi.type)
        elif dtype is not None:
            self.type_into(vi.type, dtype, None)
        if extra is not None:
            if "doc_string" in extra:
                vi.doc_string = extra["doc_string"]
            if "metadata_props" in extra:
                fill_entries(vi.metadata_props, extra["metadata_props"])

    def value_infos(self, g: Graph, recorded: Any, typed: list[OutputPort], container: Any, scope: _Scope) -> None:
        """``value_info``: the recorded entries (a name: the type is its producer's dtype now), then every other
        typed node output that is not a graph input or output."""
        listed: set[str] = set()
        for entry in recorded or ():
            if isinstance(entry, str):
                port = scope.producers.get(entry)
                if port is None or port.dtype is None:
                    continue  # the value is gone, or no longer typed
                self.value_info(container.add(), entry, port.dtype, None)
                listed.add(entry)
            else:
                vi = plain_to_message(entry, container.add())
                listed.add(vi.name)
        if len(listed) == len(typed):
            return  # every typed port was listed (what an imported graph gives)
        boundary = {p.name for p in g.input_ports} | {p.name for p in g.output_ports}
        names = scope.names
        for q in typed:
            name = names[q]
            if name and name not in listed and name not in boundary:
                self.value_info(container.add(), name, q.dtype, None)
                listed.add(name)

    # -- functions, training
    def function(self, fg: Graph, f: Any, index: int) -> None:
        mark = (len(self.external), self.embedded, len(self.sources))
        try:
            self.function_in_order(fg, f, index, False)
        except _NotSorted:
            f.Clear()
            del self.external[mark[0]:]
            self.embedded = mark[1]
            del self.sources[mark[2]:]
            self.function_in_order(fg, f, index, True)

    def function_in_order(self, fg: Graph, f: Any, index: int, sort: bool) -> None:
        attrs = fg.attrs
        ns = fg.namespace or self.graph.namespace or "amanda/onnx"
        label = f"functions[{index}]"
        try:
            domain, _ = namespace_domain(ns)
        except NamespaceError:
            raise GraphError(f"{label} is in namespace {ns}, which is not an ONNX namespace") from None
        for key in ("name", "domain", "overload", "doc_string"):
            if key in attrs:
                setattr(f, key, attrs[key])
        used: dict[str, tuple[int | None, str]] = {}
        scope = _Scope(None, ns, used, f"function {attrs.get('name', index)}")
        f.input.extend(p.name for p in fg.input_ports)
        if "attribute" in attrs:
            f.attribute.extend(attrs["attribute"])
        if "attribute_proto" in attrs:
            infos = attrs.get("attribute_proto_info") or {}
            holder = Op("AttributeDefaults", "attribute_proto")
            for name, value in attrs["attribute_proto"].items():
                self.attribute(f.attribute_proto, name, value, infos.get(name), None, holder, scope)
        typed = self.body(fg, scope, f.node, None, None, sort)
        self.outputs(fg, scope, f.node)
        f.output.extend(p.name for p in fg.output_ports)
        self.value_infos(fg, attrs.get("value_info"), typed, f.value_info, scope)
        if "metadata_props" in attrs:
            fill_entries(f.metadata_props, attrs["metadata_props"])
        fill_entries(f.opset_import, self.opsets(attrs.get("opset_import"), used, ns if domain == "" else None,
                                                 label))

    def training(self, t: Any, tp: Any, main: _Scope, index: int) -> None:
        if not isinstance(t, dict):
            raise GraphError(f"graph attribute training_info[{index}] must be a mapping")
        for key in ("initialization", "algorithm"):
            if key in t:
                sub = t[key]
                if not isinstance(sub, Graph):
                    raise GraphError(f"training_info[{index}].{key} must be a graph")
                where = f"training_info[{index}].{key}"
                self.graph_into(sub, getattr(tp, key), _Scope(main, sub.namespace or main.namespace, main.used,
                                                              where))
        if "initialization_binding" in t:
            fill_entries(tp.initialization_binding, t["initialization_binding"])
        if "update_binding" in t:
            fill_entries(tp.update_binding, t["update_binding"])


def _place(values: list[str], pnames: list[str], plan: Plan, inputs: bool, op: Op, scope: _Scope) -> list[str]:
    """Values put at the positions their port names give (gaps become empty names)."""
    try:
        positions = plan.input_positions(tuple(pnames)) if inputs else plan.output_positions(tuple(pnames))
    except ValueError as e:
        raise GraphError(f"op {_op_path(op, scope)!r} ({op.type}): {'input' if inputs else 'output'} {e}") from None
    if positions is None:
        return values
    out = [""] * (max(positions) + 1)
    for pos, v in zip(positions, values):
        out[pos] = v
    return out


def _twice(name: str, old: Any, op: Op, scope: _Scope) -> str:
    first = f"op {old.op.name!r}" if getattr(old, "op", None) is not None else "a graph input"
    if isinstance(old, GraphOutput):
        first = "a graph output"
    return f"{_where(scope)}two producers of the ONNX value {name!r}: {first} and op {_op_path(op, scope)!r}"


def _where(scope: _Scope) -> str:
    return f"{scope.where}: " if scope.where else ""


def _min_ir_version(entries: list[dict[str, Any]]) -> int:
    try:
        from onnx.helper import find_min_ir_version_for, make_opsetid

        return int(find_min_ir_version_for([make_opsetid(e.get("domain", ""), e.get("version", 1))
                                            for e in entries], ignore_unknown=True))
    except Exception:  # noqa: BLE001 - an opset newer than the installed onnx knows
        return int(onnx.IR_VERSION)


# --------------------------------------------------------------------------- public API


def to_model(graph: Graph, *, external_data: bool | None = None, weightless: bool = False,
             value_names: dict[OutputPort, str] | None = None) -> Any:
    """The ``onnx.ModelProto`` of ``graph``.

    Tensors read from external data files stay references to those files (unless ``external_data=False``:
    then every tensor is embedded).  Raises GraphError for a model over 2 GB (save it to a file instead).
    ``weightless``: plain tensors of at least ``STREAM_MIN_BYTES`` keep their type and dims but no data (they
    say they are external, in a file that does not exist): the model for ``onnx.shape_inference``, made
    without reading a weight.  ``value_names``, when given, is filled with the ONNX value name of every output
    port of the graph and of the graphs its ops hold (names the model records, and those the export made up for
    the others)."""
    exp = _Exporter(graph, keep_external=external_data is not False, threshold=None, weightless=weightless)
    with bulk_build():  # nothing made here is cyclic garbage: spare the collector sweeps over the graph
        model = exp.model()
    if value_names is not None:
        value_names.update(exp.top_scope.names)
        for inner in exp.sub_scopes:
            value_names.update(inner.names)
    for tp, data, _ in exp.external:  # cannot keep the reference in memory: embed
        tp.ClearField("data_location")
        tp.ClearField("external_data")
        tp.raw_data = _data_bytes(tp, data)
        exp.embedded += len(tp.raw_data)
    if exp.embedded > MAX_PROTO_SIZE - _HEADROOM:
        raise GraphError(f"the model holds {exp.embedded} bytes of tensor data, more than a protobuf message can "
                         "(2 GB); save it to a file with save_model, which writes an external data file")
    return model


def _data_bytes(tp: Any, data: Any) -> bytes:
    arr = data.numpy() if isinstance(data, Tensor) else data
    if arr.dtype.kind in "OSU":
        raise ValueError("string tensors cannot be stored as raw or external data")
    return packed_bytes(tp.data_type, arr)


def save_model(graph: Graph, target: str | os.PathLike[str] | None = None, *, external_data: bool | None = None,
               external_data_location: str | None = None, size_threshold: int = _DEFAULT_SIZE_THRESHOLD,
               max_size: int = MAX_PROTO_SIZE) -> Any:
    """Write ``graph`` as an ONNX model; returns the ``ModelProto``.

    With ``target`` (a path) the file is written atomically: on any failure no file (and no partial external
    data file) is left.  External data goes to ``external_data_location`` (default ``<file name>.data``) beside
    the model when ``external_data=True`` (every tensor of at least ``size_threshold`` bytes), when the graph
    holds tensors read from external files (those; ``external_data=None``), or when the model would exceed
    ``max_size`` bytes (every tensor of at least ``size_threshold`` bytes; a notice says so).
    ``external_data=False`` embeds everything (refused over 2 GB).  Without ``target`` this is
    :func:`to_model`.

    The weights are never gathered in memory: the model is serialized with a reference in place of each large
    plain tensor and the file is written by streaming every tensor's bytes from its source (the OS's file copy
    for a tensor still in the file it was read from).  In the returned ``ModelProto`` those tensors, when
    written inline, have no ``raw_data`` (read the file for them)."""
    if target is None:
        return to_model(graph, external_data=external_data)
    path = os.fspath(target)
    location = external_data_location or os.path.basename(path) + ".data"
    if os.path.basename(location) != location or location in ("", ".", ".."):
        raise ValueError(f"external_data_location must be a file name beside the model, got {location!r}")
    threshold = size_threshold if external_data else None
    exp = _Exporter(graph, keep_external=False, threshold=threshold, stream=True)
    with bulk_build():
        model = exp.model()
        if external_data is None and exp.embedded > max_size - min(_HEADROOM, max_size // 4):
            too_big = exp.embedded
            exp = _Exporter(graph, keep_external=False, threshold=size_threshold, stream=True)
            model = exp.model()
            progress.notice(f"{path}: {_size(too_big)} of weights is over ONNX's 2 GB limit for one file"
                            f"{'' if max_size == MAX_PROTO_SIZE else f' (here {max_size} bytes)'}: written with "
                            f"external data in {location} beside it")
    if external_data is False and exp.external:
        for tp, data, where in exp.external:
            tp.ClearField("data_location")
            tp.ClearField("external_data")
            nbytes = streamable_bytes(data, None)
            if nbytes is not None and (isinstance(data, FileTensor) or not isinstance(data, Tensor)):
                tp.raw_data = placeholder(len(exp.sources))
                exp.sources.append((tp, data, tp_nbytes(tp), where))
                exp.embedded += tp_nbytes(tp)
            else:
                tp.raw_data = _data_bytes(tp, data)
        exp.external = []
    if external_data is False and exp.embedded > MAX_PROTO_SIZE - _HEADROOM:
        raise GraphError(f"{path}: the model holds {_size(exp.embedded)} of tensor data, over ONNX's 2 GB limit "
                         "for one file; save it with external data (external_data=None or True)")
    chunks = _layout(exp.external, location)
    text = model.SerializeToString()
    pieces: list[Any]
    if exp.sources:
        pieces = _expand(text, exp.sources)
    else:
        pieces = [text]
    total = sum(_piece_len(p) for p in pieces) + sum(len(c[3]) if isinstance(c[3], bytes) else c[2]
                                                   for c in chunks)
    data_path = os.path.join(os.path.dirname(os.path.abspath(path)), location)
    _unsynced.clear()
    with progress.task(f"writing {os.path.basename(path)}", total=total, unit="B") as bar:
        if chunks:
            with atomic_write_many([path, data_path], "wb") as fs:
                _write_pieces(fs[0], pieces, bar)
                pos = 0
                for offset, where, nbytes, data in chunks:
                    if offset > pos:
                        fs[1].write(b"\0" * (offset - pos))
                    _write_value(fs[1], data, nbytes, where)
                    _written(fs[1], nbytes)
                    bar.advance(nbytes)
                    pos = offset + nbytes
        else:
            with atomic_write(path, "wb") as f:
                _write_pieces(f, pieces, bar)
    _unsynced.clear()
    for tp, _, _, _ in exp.sources:
        tp.ClearField("raw_data")
    return model


def _size(n: int) -> str:
    return f"{n / 2**30:.2f} GB" if n >= 2**30 else f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n} bytes"


def tp_nbytes(tp: Any) -> int:
    return tensor_nbytes_packed(tp.data_type, int(np.prod(tuple(tp.dims), dtype=np.int64)))


class _Source:
    """A tensor whose bytes go where a reference stood in the serialized message."""

    __slots__ = ("value", "nbytes", "where")

    def __init__(self, value: Any, nbytes: int, where: str) -> None:
        self.value = value
        self.nbytes = nbytes
        self.where = where


def _piece_len(p: Any) -> int:
    return p.nbytes if isinstance(p, _Source) else len(p)


def _expand(text: bytes, sources: list[tuple[Any, Any, int, str]]) -> list[Any]:
    """The pieces of the full message: ``text`` with each reference replaced by its tensor's source."""
    marks: list[int] = []
    pos = text.find(MAGIC)
    while pos >= 0:
        marks.append(pos)
        pos = text.find(MAGIC, pos + 1)

    def descend(start: int, end: int) -> bool:
        i = bisect.bisect_left(marks, start)
        return i < len(marks) and marks[i] < end

    def on_tensor(buf: Any, info: Any) -> tuple[list[Any], int] | None:
        _, start, length = info.raw
        raw = buf[start:start + length]
        if not is_placeholder(raw):
            return None
        index = placeholder_index(raw)
        if index >= len(sources):
            return None
        _, value, nbytes, where = sources[index]
        return [_Source(value, nbytes, where)], nbytes

    view = memoryview(text)
    pieces, _ = rewrite(view, on_tensor, descend)
    return pieces


def _write_pieces(f: Any, pieces: list[Any], bar: Any) -> None:
    for p in pieces:
        if isinstance(p, _Source):
            _write_value(f, p.value, p.nbytes, p.where)
            _written(f, p.nbytes)
            bar.advance(p.nbytes)
        else:
            f.write(p)
            bar.advance(len(p))


_WRITEBACK_EVERY = 64 * 2**20
_unsynced: dict[int, int] = {}


def _written(f: Any, nbytes: int) -> None:
    """Count the tensor bytes written to ``f`` since its writeback last started; past 64 MB, start it, so that
    the atomic write's final fsync overlaps the writing rather than following it."""
    key = id(f)
    n = _unsynced.get(key, 0) + nbytes
    if n >= _WRITEBACK_EVERY:
        start_writeback(f)
        n = 0
    _unsynced[key] = n


def _write_value(f: Any, value: Any, nbytes: int, where: str) -> None:
    """Write a tensor's raw bytes (``nbytes`` of them) to ``f``: from its file when it is still there, else from
    the array in chunks."""
    if isinstance(value, bytes):
        f.write(value)
        return
    if isinstance(value, FileTensor) and value.length == nbytes:
        value.copy_to(f)
        return
    arr = value.numpy() if isinstance(value, Tensor) else value
    if not arr.flags.c_contiguous or arr.dtype.byteorder == ">" or sys.byteorder == "big":
        data = packed_bytes(_number(arr), arr)
        if len(data) != nbytes:
            raise GraphError(f"{where}: {len(data)} bytes of data for {nbytes} expected")
        f.write(data)
        return
    flat = arr.reshape(-1).view(np.uint8)
    if flat.size != nbytes:
        raise GraphError(f"{where}: {flat.size} bytes of data for {nbytes} expected")
    for pos in range(0, nbytes, _WRITE_CHUNK):
        f.write(memoryview(flat[pos:pos + _WRITE_CHUNK]))


def _number(arr: np.ndarray) -> int:
    from .tensors import elem_number_of

    return elem_number_of(arr)


def _layout(external: list[tuple[Any, Any, str]], location: str) -> list[tuple[int, str, int, Any]]:
    """Offsets in the external data file; fills each TensorProto's external_data entries.  Each chunk is
    ``(offset, where, bytes, data)``: data a source to stream (array or file tensor) or the packed bytes."""
    chunks: list[tuple[int, str, int, Any]] = []
    pos = 0
    for tp, data, where in external:
        expected = tp_nbytes(tp)
        if streamable_bytes(data, None) is not None and (isinstance(data, FileTensor) or
                                                          not isinstance(data, Tensor)):
            size, source = streamable_bytes(data, None), data
        else:
            try:
                source = _data_bytes(tp, data)
            except ValueError as e:
                raise GraphError(f"{where}: {e}") from None
            size = len(source)
        if size != expected:
            raise GraphError(f"{where}: {size} bytes of data for {expected} expected")
        offset = (pos + _ALIGN - 1) // _ALIGN * _ALIGN
        tp.ClearField("external_data")
        for key, value in (("location", location), ("offset", str(offset)), ("length", str(size))):
            e = tp.external_data.add()
            e.key = key
            e.value = value
        tp.data_location = EXTERNAL
        chunks.append((offset, where, size, source))
        pos = offset + size
    return chunks
