"""Stacked recurrent layers as one op per layer (a pass before ``torch-to-onnx``).

``torch.export`` writes an ``nn.GRU``, ``nn.LSTM`` or ``nn.RNN`` of ``num_layers`` layers as one op
(``aten::gru.input``, ``aten::lstm.input``, ``aten::rnn_tanh.input``, ``aten::rnn_relu.input``) whose ``params`` is
a ``prim::ListConstruct`` of every layer's tensors.  ONNX's GRU, LSTM and RNN are one layer each, and a rule writes
a fixed set of ops, so this pass rewrites such an op, in the torch namespace, as the chain torch itself computes:

* layer ``k`` is the same op with ``num_layers = 1`` over the ``k``-th slice of the parameter list (per direction
  ``weight_ih``, ``weight_hh`` and, with biases, ``bias_ih``, ``bias_hh``), reading the previous layer's output
  (``[seq, batch, directions * hidden]``, or batch first, exactly what the next layer reads in torch);
* its initial state is ``hx[k * D : (k + 1) * D]`` (``aten::slice.Tensor`` on axis 0; for an LSTM both ``h_0`` and
  ``c_0``), ``D`` the number of directions;
* ``h_n`` (and ``c_n``) is the ``aten::cat.default`` of the layers' along axis 0, torch's
  ``[num_layers * D, batch, hidden]``.

The ``torch-to-onnx-rnn`` rules then convert each layer, and the ordinary rules the slices and the concatenation.
An op is left as it is (and then refused by name) when torch applies dropout between its layers (``train`` with
``dropout > 0``), when its flags are not literals, or when its parameter list does not hold the number of tensors
the flags say (an LSTM with projections holds five per direction).
"""

from __future__ import annotations

__all__ = ["split_rnn_layers", "RNN_OPS"]

from typing import Any

from amanda_core import Graph
from amanda_core.ir.graph import Op, OutputPort

from .importer import literal_type_text

RNN_OPS = ("aten::gru.input", "aten::lstm.input", "aten::rnn_tanh.input", "aten::rnn_relu.input")
FLAGS = ("has_biases", "num_layers", "dropout", "train", "bidirectional", "batch_first")


def _literal(op: Op, port: str) -> Any:
    """The value of the literal feeding ``op.port`` (a ``prim::Constant`` holding a plain value), else None."""
    if port not in op.input_ports.names():
        return None
    src = op.input_ports[port].source
    producer = src.op if src is not None else None
    if producer is None or producer.type != "prim::Constant":
        return None
    value = producer.attrs.get("value")
    return value if isinstance(value, (bool, int, float)) else None


def _list_sources(op: Op, port: str) -> list[OutputPort] | None:
    """The ports feeding the elements of the ``prim::ListConstruct`` at ``op.port``, in order; None otherwise."""
    if port not in op.input_ports.names():
        return None
    src = op.input_ports[port].source
    lst = src.op if src is not None else None
    if lst is None or lst.type != "prim::ListConstruct":
        return None
    sources = [p.source for p in lst.input_ports]
    return None if any(s is None for s in sources) else sources  # type: ignore[return-value]


def _with_first_dim(dtype: Any, size: int) -> str | None:
    """A torch tensor type text with its first dimension replaced (``Float(4, 2, 16)`` -> ``Float(2, 2, 16)``)."""
    from .types import TorchTypeSystem

    ts = TorchTypeSystem()
    t = ts.tensor_type(dtype) if dtype is not None else None
    if t is None or t[1] is None or not t[1]:
        return None
    elem, shape = t
    return ts.make_tensor_type(elem, (size, *shape[1:]))


class _Splitter:
    def __init__(self, graph: Graph, op: Op) -> None:
        self.g = graph
        self.ns = op.namespace

    def add(self, type_: str, base: str, inputs: list[tuple[str, OutputPort]], outputs: list[tuple[str, Any]],
            attrs: dict[str, Any] | None = None) -> Op:
        return self.g.add_op(type_, self.g.unique_name(base), inputs=[n for n, _ in inputs], outputs=outputs,
                             attrs=attrs, namespace=self.ns, sources=[s for _, s in inputs])

    def literal(self, value: Any, base: str) -> OutputPort:
        return self.add("prim::Constant", base, [], [("output", literal_type_text(value))],
                        {"value": value}).output_ports[0]

    def list_of(self, sources: list[OutputPort], base: str) -> OutputPort:
        return self.add("prim::ListConstruct", base, [(f"elements_{i}", s) for i, s in enumerate(sources)],
                        [("list", "Tensor[]")]).output_ports[0]

    def rows(self, source: OutputPort, start: int, stop: int, dtype: Any, base: str) -> OutputPort:
        ins = [("self", source), ("dim", self.literal(0, base + "_dim")),
               ("start", self.literal(start, base + "_start")), ("end", self.literal(stop, base + "_end")),
               ("step", self.literal(1, base + "_step"))]
        return self.add("aten::slice.Tensor", base, ins, [("out0", dtype)]).output_ports[0]

    def concat(self, sources: list[OutputPort], dtype: Any, base: str) -> OutputPort:
        ins = [("tensors", self.list_of(sources, base + "_list")), ("dim", self.literal(0, base + "_dim"))]
        return self.add("aten::cat.default", base, ins, [("out0", dtype)]).output_ports[0]


def _split(graph: Graph, op: Op) -> str | None:
    """Rewrite one stacked recurrent op as one op per layer; returns why it was left, or None when split."""
    flags = {f: _literal(op, f) for f in FLAGS}
    if any(v is None for v in flags.values()):
        return "flags that are not literals"
    layers = flags["num_layers"]
    if not isinstance(layers, int) or isinstance(layers, bool) or layers < 1:
        return f"num_layers = {layers!r}"
    if flags["train"] and flags["dropout"] != 0:
        return f"dropout {flags['dropout']} between layers in training mode"
    params = _list_sources(op, "params")
    lstm = op.type == "aten::lstm.input"
    hx = _list_sources(op, "hx") if lstm else None
    if lstm and (hx is None or len(hx) != 2):
        return "an initial state that is not a list of h_0 and c_0"
    if not lstm and ("hx" not in op.input_ports.names() or op.input_ports["hx"].source is None):
        return "no initial state"
    states = hx if lstm else [op.input_ports["hx"].source]  # type: ignore[list-item]
    dirs = 2 if flags["bidirectional"] else 1
    per = (4 if flags["has_biases"] else 2) * dirs
    if params is None or len(params) != per * layers:
        return (f"{len(params)} parameter tensors for {layers} layers" if params is not None
                else "parameters that are not a list")
    outs = [p.name for p in op.output_ports]
    if len(outs) != (3 if lstm else 2):
        return f"{len(outs)} outputs"
    state_types = [_with_first_dim(op.output_ports[i].dtype, dirs) for i in range(1, len(outs))]
    s = _Splitter(graph, op)
    base = op.name
    x = op.input_ports["input"].source
    assert x is not None
    finals: list[list[OutputPort]] = [[] for _ in states]
    for k in range(layers):
        name = f"{base}_l{k}"
        ins: list[tuple[str, OutputPort]] = [("input", x)]
        layer_states = [s.rows(h, k * dirs, (k + 1) * dirs, state_types[i], f"{name}_h{i}")
                        for i, h in enumerate(states)]
        ins.append(("hx", s.list_of(layer_states, f"{name}_hx") if lstm else layer_states[0]))
        ins.append(("params", s.list_of(params[k * per:(k + 1) * per], f"{name}_params")))
        for f in FLAGS:
            value = {"num_layers": 1, "dropout": 0.0}.get(f, flags[f])
            ins.append((f, s.literal(value, f"{name}_{f}")))
        layer = s.add(op.type, name, ins,  # type: ignore[arg-type]
                      [(outs[0], op.output_ports[0].dtype)] + [(n, t) for n, t in zip(outs[1:], state_types)])
        x = layer.output_ports[0]
        for i in range(len(states)):
            finals[i].append(layer.output_ports[i + 1])
    rewire: dict[str, OutputPort | None] = {outs[0]: x}
    for i, parts in enumerate(finals):
        port = op.output_ports[i + 1]
        rewire[port.name] = s.concat(parts, port.dtype, f"{base}_{port.name}") if port.consumers else None
    lists = [p.source.op for p in (op.input_ports["params"], op.input_ports["hx"])
             if p.source is not None and p.source.op is not None and p.source.op.type == "prim::ListConstruct"]
    literals = [op.input_ports[f].source.op for f in FLAGS]  # type: ignore[union-attr]
    graph.remove_op(op, rewire=rewire)
    for dead in [*lists, *literals]:
        if dead is not None and dead.graph is graph and not any(q.consumers for q in dead.output_ports):
            graph.remove_op(dead)
    return None


def split_rnn_layers(graph: Graph) -> str:
    """Every stacked GRU, LSTM and RNN op of ``graph`` and the graphs nested in it as one op per layer; returns a
    summary (what was split, what was left and why)."""
    split = 0
    left: list[str] = []
    graphs = [graph, *(n.graph for n in graph.nested_graphs(graph.namespace))]
    for g in graphs:
        for op in [o for o in g.topological_order() if o.type in RNN_OPS]:
            layers = _literal(op, "num_layers")
            if not isinstance(layers, int) or layers == 1:
                if layers is None:
                    left.append(f"{op.name}: num_layers is not a literal")
                continue
            why = _split(g, op)
            if why is None:
                split += 1
            else:
                left.append(f"{op.name}: {why}")
    kept = f"; left: {'; '.join(left)}" if left else ""
    return f"{split} stacked recurrent op(s) split into one op per layer{kept}"
