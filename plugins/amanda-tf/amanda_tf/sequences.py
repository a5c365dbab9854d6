"""ONNX sequences and optionals as TensorFlow variants (the ``onnx-sequences-to-tf`` and ``tf-variant-types``
passes, and the runner's marshalling of such values).

TensorFlow has no tensor type for an ONNX sequence: a sequence is a ``TensorList`` (a ``variant`` scalar whose
elements may differ in shape, as ONNX's may), an optional is an ``Optional`` variant holding one tensor or one
``TensorList`` (``OptionalNone`` when empty).  The pass runs before ``onnx-to-tf``, after ``onnx-control-to-tf``
(so the bodies of converted ``If``/``Loop`` are ONNX graphs it walks like any other), and writes each sequence or
optional op as TensorFlow ops, the integer arithmetic around them as ONNX ops the table converts:

================================  ===================================================================
``SequenceEmpty``                 ``EmptyTensorList`` of the element type
``SequenceConstruct``             ``EmptyTensorList``, then one ``TensorListPushBack`` per input
``SequenceInsert``                ``TensorListPushBack``; at a position, the elements before it copied to a
                                  new list by a ``StatelessWhile``, the tensor pushed, the rest copied
``SequenceErase``                 ``TensorListPopBack``; at a position, two copying loops around it
``SequenceAt``                    ``TensorListGetItem`` at the position (negative ones counted from the end)
``SequenceLength``                ``TensorListLength`` cast to int64
``SplitToSequence``               ``TensorListFromTensor`` of the input with the axis moved first (no split); with
                                  split lengths, a ``StatelessWhile`` pushing one ``Slice`` per piece
``SequenceMap``                   a ``StatelessWhile`` over the positions: its body is the map's body, reading
                                  each sequence input's element (``TensorListGetItem``) and pushing each output
``Optional``                      ``OptionalFromValue`` / ``OptionalNone``
``OptionalHasElement``            ``OptionalHasValue`` (true for a tensor or sequence, false without input)
``OptionalGetElement``            ``OptionalGetValue`` (a tensor or sequence: itself)
``Identity`` of either            ``Identity`` of the variant
================================  ===================================================================

A graph input or output of a sequence or optional type is a ``variant`` in the TF graph; the graph's
``variant_values`` attribute records what each holds, as a text over TF element types (``seq(float32)``,
``optional(seq(int64))``, ``optional(float32)``), which :func:`to_variant` and :func:`from_variant` read to feed and
fetch Python lists (and None for an empty optional).  An op the pass cannot write exactly (a sequence of
sequences, an input of unknown rank where the axis matters, a map body that reads outer values) is left, and the
conversion names it.
"""

from __future__ import annotations

__all__ = ["onnx_sequences_to_tf", "settle_variants", "to_variant", "from_variant", "VARIANT_VALUES"]

from typing import Any, Iterator

import numpy as np

from amanda_core import Graph
from amanda_core.ir.graph import Op, OutputPort

from .control import (
    ONNX_FAMILY,
    TF_FAMILY,
    TF_IF,
    TF_WHILE,
    ControlReport,
    _carry_names,
    _family_ops,
    _graph_attrs,
    _installed_tf_ns,
    _ns,
    _tf_function_attrs,
)

VARIANT_VALUES = "variant_values"
"""The graph attribute naming the graph inputs and outputs that are variants, with what each holds."""

SEQUENCE_OPS = ("SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase", "SequenceAt",
                "SequenceLength", "SplitToSequence", "SequenceMap", "Optional", "OptionalHasElement",
                "OptionalGetElement", "Identity")

_I32 = "tensor(int32)[]"
_I64 = "tensor(int64)[]"


class _Refused(Exception):
    pass


# --------------------------------------------------------------------------- ONNX type texts

def _kind(text: Any) -> str | None:
    """``tensor``, ``seq`` or ``optional`` for an ONNX port type text; None when unknown."""
    if text is None:
        return None
    t = str(text)
    for k in ("tensor", "seq", "optional"):
        if t.startswith(k + "("):
            return k
    return None


def _inner(text: str) -> str:
    """What a ``seq(...)`` or ``optional(...)`` type holds."""
    return text[text.index("(") + 1:text.rindex(")")]


def _elem_tf(text: Any) -> str | None:
    """The TF element type name of an ONNX tensor type text (``tensor(float)[N]`` -> ``float32``)."""
    from amanda_onnx.typesystem import OnnxTypeSystem

    from .types import TFTypeSystem

    tt = OnnxTypeSystem().tensor_type(text) if text is not None else None
    if tt is None:
        return None
    name = TFTypeSystem().from_canonical_dtype(tt[0])
    return None if name is None else str(name)


def _rank(text: Any) -> int | None:
    from amanda_onnx.typesystem import OnnxTypeSystem

    tt = OnnxTypeSystem().tensor_type(text) if text is not None else None
    return None if tt is None or tt[1] is None else len(tt[1])


def _held(text: Any) -> str | None:
    """An ONNX value type as the ``variant_values`` text (``seq(tensor(float))`` -> ``seq(float32)``); None for
    what TF cannot hold (a sequence of sequences, unknown element types)."""
    k = _kind(text)
    if k == "tensor":
        return _elem_tf(text)
    if k == "seq":
        inner = _inner(str(text))
        elem = _elem_tf(inner) if _kind(inner) == "tensor" else None
        return None if elem is None else f"seq({elem})"
    if k == "optional":
        inner = _held(_inner(str(text)))
        return None if inner is None or inner.startswith("optional(") else f"optional({inner})"
    return None


def _seq_elem(text: Any) -> str:
    """The TF element type of a sequence type text; refused when it is not a sequence of tensors."""
    held = _held(text)
    if held is None or not held.startswith("seq("):
        raise _Refused(f"a value of type {text} is not a sequence of tensors of a known element type")
    return _inner(held)


def _is_variant(text: Any) -> bool:
    return _kind(text) in ("seq", "optional")


# --------------------------------------------------------------------------- the pass

def _walk(graph: Graph, inherited: str | None) -> Iterator[tuple[Graph, str | None]]:
    yield graph, inherited
    for op in graph:
        for g in _graph_attrs(op):
            yield from _walk(g, graph.namespace or inherited)


def onnx_sequences_to_tf(graph: Graph) -> ControlReport:
    """Every ONNX sequence and optional op (in the graph and its bodies) as TensorFlow ``TensorList`` and
    ``Optional`` ops; the graph's variant inputs and outputs recorded in its ``variant_values`` attribute."""
    report = ControlReport()
    tf_ns = _installed_tf_ns()
    if tf_ns is None:
        return report
    held = {p.name: _held(p.dtype) for p in list(graph.input_ports) + list(graph.output_ports)
            if _is_variant(p.dtype)}
    if held:
        graph.attrs[VARIANT_VALUES] = {k: v for k, v in held.items() if v is not None}
    main = graph.namespace if graph.namespace and graph.namespace.startswith(ONNX_FAMILY) else None
    for g, inherited in list(_walk(graph, None)):
        for op, ns in _family_ops(g, inherited, SEQUENCE_OPS, ONNX_FAMILY):
            if op.type == "Identity" and not any(_is_variant(p.dtype) for p in op.output_ports):
                continue
            try:
                _Writer(g, op, tf_ns, main or ns).write()  # the ONNX ops it adds in the namespace the table reads
            except _Refused as e:
                report.left.append(f"{op.type} {op.name!r}: {e}")
            else:
                report.converted[op.type] = report.converted.get(op.type, 0) + 1
    return report


class _Writer:
    """Writes one ONNX sequence or optional op as TF ops (and ONNX integer ops for the table) in its graph."""

    def __init__(self, g: Graph, op: Op, tf_ns: str, onnx_ns: str) -> None:
        self.g, self.op, self.tf_ns, self.onnx_ns = g, op, tf_ns, onnx_ns

    # ---- building blocks
    def src(self, name: str) -> OutputPort | None:
        return self.op.input_ports[name].source if name in self.op.input_ports else None

    def _name(self, base: str) -> str:
        return self.g.unique_name(f"{self.op.name}/{base}")

    def onnx(self, type_: str, inputs: list[tuple[str, OutputPort]], out: tuple[str, Any],
             attrs: dict[str, Any] | None = None, g: Graph | None = None) -> OutputPort:
        g = self.g if g is None else g
        new = g.add_op(type_, g.unique_name(f"{self.op.name}/{type_.lower()}"), namespace=self.onnx_ns,
                       inputs=[(n, s.dtype) for n, s in inputs], outputs=[out], attrs=attrs or {},
                       sources=[s for _, s in inputs])
        return new.output_ports[0]

    def const(self, value: np.ndarray, g: Graph | None = None) -> OutputPort:
        from amanda_onnx.typesystem import OnnxTypeSystem

        dtype = OnnxTypeSystem().make_tensor_type(value.dtype.name, tuple(value.shape))
        return self.onnx("Constant", [], ("output", dtype), {"value": value}, g)

    def tf(self, type_: str, inputs: list[tuple[str, OutputPort]], outputs: list[tuple[str, Any]],
           attrs: dict[str, Any], g: Graph | None = None) -> Op:
        g = self.g if g is None else g
        return g.add_op(type_, g.unique_name(f"{self.op.name}/{type_}"), namespace=self.tf_ns,
                        inputs=[(n, s.dtype) for n, s in inputs], outputs=outputs, attrs=attrs,
                        sources=[s for _, s in inputs])

    def empty(self, elem: str, g: Graph | None = None) -> OutputPort:
        minus_one = self.const(np.array(-1, np.int32), g)
        return self.tf("EmptyTensorList", [("element_shape", minus_one), ("max_num_elements", minus_one)],
                       [("handle", "variant")], {"element_dtype": elem, "shape_type": "int32"}, g).output_ports[0]

    def push(self, handle: OutputPort, item: OutputPort, elem: str, g: Graph | None = None) -> OutputPort:
        return self.tf("TensorListPushBack", [("input_handle", handle), ("tensor", item)],
                       [("output_handle", "variant")], {"element_dtype": elem}, g).output_ports[0]

    def get(self, handle: OutputPort, index: OutputPort, elem: str, dtype: Any, g: Graph | None = None
            ) -> OutputPort:
        shape = self.const(np.array(-1, np.int32), g)
        return self.tf("TensorListGetItem", [("input_handle", handle), ("index", index), ("element_shape", shape)],
                       [("item", dtype)], {"element_dtype": elem, "Tshape": "int32"}, g).output_ports[0]

    def length(self, handle: OutputPort, g: Graph | None = None) -> OutputPort:
        return self.tf("TensorListLength", [("input_handle", handle)], [("length", _I32)], {}, g).output_ports[0]

    def scalar_i32(self, src: OutputPort) -> OutputPort:
        """An integer position (a scalar, or a tensor of one element) as an int32 scalar."""
        elem = _onnx_elem(src.dtype)
        if elem is None:
            raise _Refused(f"the element type of its position ({src.dtype or 'untyped'}) is unknown")
        shape = self.const(np.zeros(0, np.int64))
        flat = self.onnx("Reshape", [("data", src), ("shape", shape)], ("reshaped", f"tensor({elem})[]"))
        return self.onnx("Cast", [("input", flat)], ("output", _I32), {"to": 6})

    def position(self, src: OutputPort, n: OutputPort, extra: int = 0) -> OutputPort:
        """A position in ``[-n, n - 1 + extra]`` counted from the start (negative ones from the end)."""
        p = self.scalar_i32(src)
        zero = self.const(np.array(0, np.int32))
        neg = self.onnx("Less", [("A", p), ("B", zero)], ("C", "tensor(bool)[]"))
        moved = self.onnx("Add", [("A", p), ("B", n)], ("C", _I32))
        return self.onnx("Where", [("condition", neg), ("X", moved), ("Y", p)], ("output", _I32))

    def replace(self, outs: list[OutputPort]) -> None:
        """Readers of the op's outputs read ``outs``; each new producer records the ONNX name of the value it now
        makes (what an ``OuterValue`` of a body reads it by), and a variant keeps the ONNX type it holds for the
        ops written after it."""
        _carry_names(self.op, outs)
        for q, r in zip(self.op.output_ports, outs):
            if r.dtype is None or _is_variant(q.dtype):
                r.dtype = q.dtype
            self.g.replace_all_uses(q, r)
        for c in self.op.control_inputs:
            for r in outs:
                if r.op is not None and r.op.graph is self.g and c not in r.op.control_inputs and c is not r.op:
                    self.g.connect_control(c, r.op)
        self.g.remove_op(self.op)

    # ---- loops built here
    def loop(self, loop_in: list[OutputPort], types: list[str], body: Graph, counter: int = 0,
             bound: int = 1) -> Op:
        """A ``StatelessWhile`` over ``loop_in`` (TF types ``types``) whose cond is ``v[counter] < v[bound]``."""
        cond_g = Graph(attrs={})
        ports = [cond_g.add_input_port(f"v_{k}", p.dtype) for k, p in enumerate(body.input_ports)]
        less = cond_g.add_op("Less", "go_on", namespace=self.onnx_ns, inputs=["A", "B"],
                             outputs=[("C", "tensor(bool)[]")], sources=[ports[counter], ports[bound]])
        cond_g.connect(less.output_ports[0], cond_g.add_output_port("go_on", "tensor(bool)[]"))
        _tf_function_attrs(body, self.onnx_ns)
        _tf_function_attrs(cond_g, self.onnx_ns)
        return self.g.add_op("StatelessWhile", self._name("while"), namespace=self.tf_ns,
                             inputs=[(f"input_{k}", s.dtype) for k, s in enumerate(loop_in)],
                             outputs=[(f"output_{k}", s.dtype) for k, s in enumerate(loop_in)],
                             attrs={"T": types, "cond": cond_g, "body": body, "parallel_iterations": 1},
                             sources=loop_in)

    def copy_range(self, src: OutputPort, start: OutputPort, end: OutputPort, dst: OutputPort,
                   elem: str) -> OutputPort:
        """``dst`` with the elements ``start .. end - 1`` of the list ``src`` pushed, in order."""
        body = Graph(attrs={})
        i = body.add_input_port("index", _I32)
        e = body.add_input_port("end", _I32)
        s = body.add_input_port("source", src.dtype)
        d = body.add_input_port("target", dst.dtype)
        item = self.get(s, i, elem, None, body)
        pushed = self.push(d, item, elem, body)
        one = self.const(np.array(1, np.int32), body)
        nxt = self.onnx("Add", [("A", i), ("B", one)], ("C", _I32), g=body)
        for k, (v, p) in enumerate(zip([nxt, e, s, pushed], body.input_ports)):
            body.connect(v, body.add_output_port(f"output_{k}", p.dtype))
        loop = self.loop([start, end, src, dst], ["int32", "int32", "variant", "variant"], body)
        return loop.output_ports[3]

    # ---- the ops
    def write(self) -> None:
        with self.g.atomic():  # a refusal part way leaves the graph as it was (no op it had added yet)
            getattr(self, "_" + self.op.type)()

    def _out_type(self) -> Any:
        return self.op.output_ports[0].dtype

    def _SequenceEmpty(self) -> None:
        elem = _seq_elem(self._out_type())
        self.replace([self.empty(elem)])

    def _SequenceConstruct(self) -> None:
        elem = _seq_elem(self._out_type())
        handle = self.empty(elem)
        for p in self.op.input_ports:
            if p.source is None:
                raise _Refused(f"input {p.name} is fed by nothing")
            handle = self.push(handle, p.source, elem)
        self.replace([handle])

    def _SequenceInsert(self) -> None:
        seq, item, pos = self.src("input_sequence"), self.src("tensor"), self.src("position")
        if seq is None or item is None:
            raise _Refused("its sequence or tensor is fed by nothing")
        elem = _seq_elem(seq.dtype if seq.dtype is not None else self._out_type())
        if pos is None:
            self.replace([self.push(seq, item, elem)])
            return
        n = self.length(seq)
        p = self.position(pos, n)
        zero = self.const(np.array(0, np.int32))
        head = self.copy_range(seq, zero, p, self.empty(elem), elem)
        self.replace([self.copy_range(seq, p, n, self.push(head, item, elem), elem)])

    def _SequenceErase(self) -> None:
        seq, pos = self.src("input_sequence"), self.src("position")
        if seq is None:
            raise _Refused("its sequence is fed by nothing")
        elem = _seq_elem(seq.dtype if seq.dtype is not None else self._out_type())
        if pos is None:
            shape = self.const(np.array(-1, np.int32))
            pop = self.tf("TensorListPopBack", [("input_handle", seq), ("element_shape", shape)],
                          [("output_handle", "variant"), ("tensor", None)], {"element_dtype": elem})
            self.replace([pop.output_ports[0]])
            return
        n = self.length(seq)
        p = self.position(pos, n)
        one = self.const(np.array(1, np.int32))
        after = self.onnx("Add", [("A", p), ("B", one)], ("C", _I32))
        zero = self.const(np.array(0, np.int32))
        head = self.copy_range(seq, zero, p, self.empty(elem), elem)
        self.replace([self.copy_range(seq, after, n, head, elem)])

    def _SequenceAt(self) -> None:
        seq, pos = self.src("input_sequence"), self.src("position")
        if seq is None or pos is None:
            raise _Refused("its sequence or position is fed by nothing")
        elem = _seq_elem(seq.dtype)
        p = self.position(pos, self.length(seq))
        self.replace([self.get(seq, p, elem, self._out_type())])

    def _SequenceLength(self) -> None:
        seq = self.src("input_sequence")
        if seq is None:
            raise _Refused("its sequence is fed by nothing")
        n = self.length(seq)
        self.replace([self.onnx("Cast", [("input", n)], ("output", _I64), {"to": 7})])

    def _SplitToSequence(self) -> None:
        x, split = self.src("input"), self.src("split")
        if x is None:
            raise _Refused("its input is fed by nothing")
        elem = _elem_tf(x.dtype)
        rank = _rank(x.dtype)
        if elem is None or rank is None or rank == 0:
            raise _Refused("its input's element type or rank is unknown (or it is a scalar)")
        axis = int(self.op.attrs.get("axis", 0) or 0)
        if not -rank <= axis < rank:
            raise _Refused(f"axis {axis} is outside the input's rank {rank}")
        axis %= rank
        x_elem = _onnx_elem(x.dtype)
        if x_elem is None:
            raise _Refused(f"its input's type {x.dtype} is not an ONNX tensor type")
        if split is None:
            keep = int(self.op.attrs.get("keepdims", 1))
            moved = x
            if axis:
                perm = [axis] + [d for d in range(rank) if d != axis]
                moved = self.onnx("Transpose", [("data", x)], ("transposed", f"tensor({x_elem})" + _dims(rank)),
                                  {"perm": perm})
            if keep:
                axes = self.const(np.array([axis + 1], np.int64))
                moved = self.onnx("Unsqueeze", [("data", moved), ("axes", axes)],
                                  ("expanded", f"tensor({x_elem})" + _dims(rank + 1)))
            shape = self.const(np.array(-1, np.int32))
            out = self.tf("TensorListFromTensor", [("tensor", moved), ("element_shape", shape)],
                          [("output_handle", "variant")], {"element_dtype": elem, "shape_type": "int32"})
            self.replace([out.output_ports[0]])
            return
        split_rank = _rank(split.dtype)
        if split_rank not in (0, 1):
            raise _Refused("the rank of its split input is unknown")
        shape = self.onnx("Shape", [("data", x)], ("shape", f"tensor(int64)[{rank}]"))
        length = self.onnx("Gather", [("data", shape), ("indices", self.const(np.array(axis, np.int64)))],
                           ("output", _I64), {"axis": 0})
        split64 = self.onnx("Cast", [("input", split)], ("output", f"tensor(int64){_dims(split_rank)}"), {"to": 7})
        if split_rank == 0:  # pieces of `split` elements, the last one shorter
            one = self.const(np.array(1, np.int64))
            zero = self.const(np.array(0, np.int64))
            less = self.onnx("Sub", [("A", split64), ("B", one)], ("C", _I64))
            up = self.onnx("Add", [("A", length), ("B", less)], ("C", _I64))
            count = self.onnx("Div", [("A", up), ("B", split64)], ("C", _I64))
            first = self.onnx("Range", [("start", zero), ("limit", count), ("delta", one)],
                              ("output", "tensor(int64)[?]"))
            starts = self.onnx("Mul", [("A", first), ("B", split64)], ("C", "tensor(int64)[?]"))
            rest = self.onnx("Sub", [("A", length), ("B", starts)], ("C", "tensor(int64)[?]"))
            sizes = self.onnx("Min", [("data_0", split64), ("data_1", rest)], ("min", "tensor(int64)[?]"))
        else:
            sizes = split64
            zero_axis = self.const(np.array(0, np.int64))
            starts = self.onnx("CumSum", [("x", sizes), ("axis", zero_axis)], ("y", "tensor(int64)[?]"),
                               {"exclusive": 1})
        pieces = self.onnx("Shape", [("data", sizes)], ("shape", "tensor(int64)[1]"))
        count = self.onnx("Gather", [("data", pieces), ("indices", self.const(np.array(0, np.int64)))],
                          ("output", _I64), {"axis": 0})
        body = Graph(attrs={})
        i = body.add_input_port("index", _I64)
        e = body.add_input_port("count", _I64)
        xs = body.add_input_port("input", x.dtype)
        ss = body.add_input_port("starts", starts.dtype)
        zs = body.add_input_port("sizes", sizes.dtype)
        d = body.add_input_port("target", "variant")
        ax0 = self.const(np.array([0], np.int64), body)
        one = self.const(np.array(1, np.int64), body)
        i1 = self.onnx("Unsqueeze", [("data", i), ("axes", ax0)], ("expanded", "tensor(int64)[1]"), g=body)
        j1 = self.onnx("Add", [("A", i1), ("B", one)], ("C", "tensor(int64)[1]"), g=body)
        st1 = self.onnx("Slice", [("data", ss), ("starts", i1), ("ends", j1)], ("output", "tensor(int64)[1]"),
                        g=body)
        sz1 = self.onnx("Slice", [("data", zs), ("starts", i1), ("ends", j1)], ("output", "tensor(int64)[1]"),
                        g=body)
        en1 = self.onnx("Add", [("A", st1), ("B", sz1)], ("C", "tensor(int64)[1]"), g=body)
        axes = self.const(np.array([axis], np.int64), body)
        piece = self.onnx("Slice", [("data", xs), ("starts", st1), ("ends", en1), ("axes", axes)],
                          ("output", f"tensor({x_elem})" + _dims(rank)), g=body)
        pushed = self.push(d, piece, elem, body)
        nxt = self.onnx("Add", [("A", i), ("B", one)], ("C", _I64), g=body)
        for k, (v, p) in enumerate(zip([nxt, e, xs, ss, zs, pushed], body.input_ports)):
            body.connect(v, body.add_output_port(f"output_{k}", p.dtype))
        zero64 = self.const(np.array(0, np.int64))
        loop = self.loop([zero64, count, x, starts, sizes, self.empty(elem)],
                         ["int64", "int64", elem, "int64", "int64", "variant"], body)
        self.replace([loop.output_ports[5]])

    def _SequenceMap(self) -> None:
        body = self.op.attrs.get("body")
        if not isinstance(body, Graph):
            raise _Refused("its body is not a graph")
        if any(o.type == "OuterValue" for o in body):
            raise _Refused("its body reads values of the enclosing graph")
        sources = [p.source for p in self.op.input_ports]
        if any(s is None for s in sources) or len(sources) != len(body.input_ports) \
                or len(body.output_ports) != len(self.op.output_ports):
            raise _Refused("its inputs or outputs do not fit its body")
        kinds = [_kind(s.dtype) for s in sources]  # type: ignore[union-attr]
        if any(k not in ("seq", "tensor") for k in kinds):
            raise _Refused("an input's type is unknown")
        in_types = ["variant" if k == "seq" else _elem_tf(s.dtype) for k, s in zip(kinds, sources)]  # type: ignore
        out_elems = [_seq_elem(q.dtype) for q in self.op.output_ports]
        if any(t is None for t in in_types):
            raise _Refused("an input's element type is unknown")
        elems = [_seq_elem(s.dtype) if k == "seq" else None for k, s in zip(kinds, sources)]  # type: ignore
        n = self.length(sources[0])  # type: ignore[arg-type]
        old_in = list(body.input_ports)
        results = [go.source for go in body.output_ports]
        if any(r is None for r in results):
            raise _Refused("a body output is fed by nothing")
        for go in list(body.output_ports):
            body.remove_output_port(go)
        i = body.add_input_port("index", _I32)
        e = body.add_input_port("count", _I32)
        lists = [body.add_input_port(f"out_{k}", q.dtype) for k, q in enumerate(self.op.output_ports)]
        values = [body.add_input_port(f"in_{k}", s.dtype) for k, s in enumerate(sources)]  # type: ignore
        for k, (p, v) in enumerate(zip(old_in, values)):
            if kinds[k] == "seq":
                item = self.get(v, i, elems[k], p.dtype, body)  # type: ignore[arg-type]
                body.replace_all_uses(p, item)
            else:
                body.replace_all_uses(p, v)
            body.remove_input_port(p)
        pushed = [self.push(lst, r, el, body) for lst, r, el in zip(lists, results, out_elems)]  # type: ignore
        one = self.const(np.array(1, np.int32), body)
        nxt = self.onnx("Add", [("A", i), ("B", one)], ("C", _I32), g=body)
        outs = [nxt, e] + pushed + values
        for k, (v, p) in enumerate(zip(outs, body.input_ports)):
            body.connect(v, body.add_output_port(f"output_{k}", p.dtype))
        zero = self.const(np.array(0, np.int32))
        empties = [self.empty(el) for el in out_elems]
        for lst, q in zip(empties, self.op.output_ports):
            lst.dtype = q.dtype
        loop = self.loop([zero, n] + empties + sources, ["int32", "int32"] + ["variant"] * len(empties)  # type: ignore
                         + in_types, body)  # type: ignore[operator]
        self.replace(list(loop.output_ports)[2:2 + len(empties)])

    def _Optional(self) -> None:
        x = self.src("input")
        if x is None:
            self.replace([self.tf("OptionalNone", [], [("optional", "variant")], {}).output_ports[0]])
            return
        held = "variant" if _is_variant(x.dtype) else _elem_tf(x.dtype)
        if held is None or _kind(x.dtype) == "optional":
            raise _Refused(f"it wraps a value of type {x.dtype}")
        out = self.tf("OptionalFromValue", [("components_0", x)], [("optional", "variant")],
                      {"Toutput_types": [held]})
        self.replace([out.output_ports[0]])

    def _OptionalHasElement(self) -> None:
        x = self.src("input")
        if x is None or _kind(x.dtype) in ("tensor", "seq"):
            self.replace([self.const(np.array(x is not None))])
            return
        if _kind(x.dtype) != "optional":
            raise _Refused(f"its input's type {x.dtype} is unknown")
        out = self.tf("OptionalHasValue", [("optional", x)], [("has_value", "tensor(bool)[]")], {})
        self.replace([out.output_ports[0]])

    def _OptionalGetElement(self) -> None:
        x = self.src("input")
        if x is None:
            raise _Refused("its input is fed by nothing")
        if _kind(x.dtype) in ("tensor", "seq"):
            self.replace([x])
            return
        if _kind(x.dtype) != "optional":
            raise _Refused(f"its input's type {x.dtype} is unknown")
        inner = _inner(str(x.dtype))
        held = "variant" if _is_variant(inner) else _elem_tf(inner)
        if held is None:
            raise _Refused(f"its input's type {x.dtype} holds no known element type")
        out = self.tf("OptionalGetValue", [("optional", x)], [("components_0", self._out_type())],
                      {"output_types": [held], "output_shapes": [None]})
        self.replace([out.output_ports[0]])

    def _Identity(self) -> None:
        x = self.src("input")
        if x is None:
            raise _Refused("its input is fed by nothing")
        out = self.tf("Identity", [("input", x)], [("output", self._out_type())], {"T": "variant"})
        self.replace([out.output_ports[0]])


def _onnx_elem(text: Any) -> str | None:
    """The ONNX element name inside ``tensor(<elem>)...``; None for any other type, or none."""
    t = str(text) if text is not None else ""
    return t[len("tensor("):t.index(")")] if t.startswith("tensor(") and ")" in t else None


def _dims(rank: int) -> str:
    return "[" + ",".join("?" * rank) + "]"


# --------------------------------------------------------------------------- after the table

_VARIANT_OUTPUTS = {"EmptyTensorList": ("handle",), "TensorListPushBack": ("output_handle",),
                    "TensorListFromTensor": ("output_handle",), "TensorListPopBack": ("output_handle",),
                    "OptionalFromValue": ("optional",), "OptionalNone": ("optional",)}


def settle_variants(graph: Graph) -> int:
    """After ``onnx-to-tf``: the ports that carry variants say ``variant`` (the table's type translation drops
    sequence and optional types, which no TF tensor type says): the graph's recorded inputs and outputs, the
    TensorList and Optional ops' handles, and the signatures of function bodies whose op lists ``variant`` among
    its types.  Returns how many ports were set."""
    changed = 0

    def put(port: Any) -> None:
        nonlocal changed
        if port.dtype != "variant":
            port.dtype = "variant"
            changed += 1

    def typed(types: Any, port_lists: list[Any]) -> None:
        """The ``k``-th port of each list is a variant where ``types[k]`` says so (a function op's signature)."""
        for k, t in enumerate(types or []):
            for ports in port_lists:
                if t == "variant" and k < len(ports):
                    put(ports[k])

    recorded = graph.attrs.get(VARIANT_VALUES) or {}
    for p in list(graph.input_ports) + list(graph.output_ports):
        if p.name in recorded:
            put(p)
    for g, inherited in list(_walk(graph, None)):
        for op in g:
            ns = _ns(op, inherited)
            if ns is None or not ns.startswith(TF_FAMILY):
                continue
            for name in _VARIANT_OUTPUTS.get(str(op.type), ()):
                put(op.output_ports[name])
            if op.type == "Identity" and op.attrs.get("T") == "variant":
                put(op.output_ports[0])
            if op.type == "OptionalGetValue" and op.attrs.get("output_types") == ["variant"]:
                put(op.output_ports[0])
            if op.type in TF_WHILE:
                fns = [f for f in (op.attrs.get("cond"), op.attrs.get("body")) if isinstance(f, Graph)]
                body = op.attrs.get("body")
                typed(op.attrs.get("T"), [op.output_ports] + [f.input_ports for f in fns]
                      + ([body.output_ports] if isinstance(body, Graph) else []))
            if op.type in TF_IF:
                branches = [b for b in (op.attrs.get("then_branch"), op.attrs.get("else_branch"))
                            if isinstance(b, Graph)]
                typed(op.attrs.get("Tin"), [b.input_ports for b in branches])
                typed(op.attrs.get("Tout"), [op.output_ports] + [b.output_ports for b in branches])
    return changed


# --------------------------------------------------------------------------- feeding and fetching

def to_variant(tf: Any, value: Any, held: str) -> Any:
    """A Python value (a list of arrays for ``seq(T)``; None or the value for ``optional(...)``) as the TF variant
    tensor the graph takes."""
    if held.startswith("optional("):
        if value is None:
            return tf.raw_ops.OptionalNone()
        inner = _inner(held)
        part = to_variant(tf, value, inner) if inner.startswith("seq(") else tf.constant(np.asarray(value), inner)
        return tf.raw_ops.OptionalFromValue(components=[part])
    if held.startswith("seq("):
        elem = _inner(held)
        handle = tf.raw_ops.EmptyTensorList(element_shape=tf.constant(-1, tf.int32), max_num_elements=-1,
                                            element_dtype=elem)
        for item in value:
            handle = tf.raw_ops.TensorListPushBack(input_handle=handle, tensor=tf.constant(np.asarray(item), elem))
        return handle
    return tf.constant(np.asarray(value), held)


def from_variant(tf: Any, tensor: Any, held: str) -> Any:
    """A variant tensor the graph computed as a Python value: a list of arrays, or None for an empty optional."""
    if held.startswith("optional("):
        if not bool(tf.raw_ops.OptionalHasValue(optional=tensor).numpy()):
            return None
        inner = _inner(held)
        kind = "variant" if inner.startswith("seq(") else inner
        part, = tf.raw_ops.OptionalGetValue(optional=tensor, output_types=[kind], output_shapes=[None])
        return from_variant(tf, part, inner) if inner.startswith("seq(") else part.numpy()
    if held.startswith("seq("):
        elem = _inner(held)
        n = int(tf.raw_ops.TensorListLength(input_handle=tensor).numpy())
        shape = tf.constant(-1, tf.int32)
        return [tf.raw_ops.TensorListGetItem(input_handle=tensor, index=k, element_shape=shape,
                                             element_dtype=elem).numpy() for k in range(n)]
    return tensor.numpy()
