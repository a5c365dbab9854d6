"""Function calls inlined before ``tf-to-onnx`` (graph pass ``tf-inline-calls``).

A frozen TF graph can still call library functions with ``PartitionedCall``/``StatefulPartitionedCall``: Grappler
leaves calls it may not inline (a function compiled with XLA, such as the one Keras writes for a grouped ``Conv2D``
on the CPU), and a ``tf.function`` called inside ``tf.cond`` or ``tf.while_loop`` stays a call in the branch or
body.  ONNX has no call op, so each call whose function body the importer read (the ``f`` attribute holds a
``Graph``) is replaced by a copy of the body's ops, reading what the call read, in the graph and in every nested
body (calls inside the copied ops are inlined in turn).  A call with control edges is left (and so reported as
unconverted); ops with side effects inside a body (``Assert`` ...) stay ops the tables refuse by name.
"""

from __future__ import annotations

__all__ = ["inline_calls"]

from amanda_core import Graph, Op

CALLS = ("PartitionedCall", "StatefulPartitionedCall")


def _nested(op: Op) -> list[Graph]:
    out = []
    for value in op.attrs.values():
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, Graph):
                out.append(v)
    return out


def _inline_in(g: Graph) -> int:
    from .control import _inline

    done = 0
    changed = True
    while changed:
        changed = False
        for op in list(g):
            if op.graph is not g or op.type not in CALLS:
                continue
            body = op.attrs.get("f")
            if not isinstance(body, Graph) or op.control_inputs or op.control_outputs:
                continue
            sources = [p.source for p in op.input_ports]
            if any(s is None for s in sources) or len(sources) != len(body.input_ports) \
                    or len(op.output_ports) != len(body.output_ports):
                continue
            before = set(g)
            outs = _inline(g, body, sources, op.name, op.namespace)  # type: ignore[arg-type]
            for q, r in zip(op.output_ports, outs):
                if r.op is not None and r.op not in before and q.dtype is not None:
                    r.dtype = q.dtype  # the call's output has the shape TF recorded; a body's values have none
                g.replace_all_uses(q, r)
            g.remove_op(op)
            for new in [o for o in g if o not in before and o.type == "Identity"]:
                # plumbing the importer keeps inside a function (a control output, a colocated read) is plumbing
                # once inlined: its readers read its input (so that rules see the constants behind it)
                src = new.input_ports[0].source if len(new.input_ports) == 1 else None
                if src is None or new.control_inputs or new.control_outputs \
                        or any(p.source is new.output_ports[0] for p in g.output_ports):
                    continue
                g.replace_all_uses(new.output_ports[0], src)
                g.remove_op(new)
            done += 1
            changed = True
    for op in list(g):
        if op.type not in CALLS:
            for body in _nested(op):
                done += _inline_in(body)
    return done


def inline_calls(graph: Graph) -> int:
    """Inline every ``PartitionedCall``/``StatefulPartitionedCall`` of ``graph`` and its nested bodies whose
    function body is in the graph; returns how many calls were inlined."""
    return _inline_in(graph)


def run_pass(graph: Graph) -> str:
    """The ``tf-inline-calls`` graph pass's summary line."""
    return f"{inline_calls(graph)} function call(s) inlined"
