"""A graph in ``amanda/pytorch`` as the source of a Python module a person can read.

The module defines one ``torch.nn.Module`` class: ``__init__`` loads the weights from a ``.safetensors`` file
(by default the one beside the ``.py`` file, with the same stem) and registers them under their FQNs as
parameters, buffers (persistent or not) and constants; ``forward`` makes one call per op, in the graph's order,
named after the op: ``torch.ops.aten`` overloads, or the ``torch.nn.functional`` function where it takes the
same arguments and calls that same overload (``F.conv2d``, ``F.linear``, ``F.relu`` ...).  Running it needs
torch and safetensors only.
"""

from __future__ import annotations

__all__ = ["module_source", "weights_of", "weight_values", "FUNCTIONAL"]

import math
import operator
import re
from typing import Any

from .program import Attr, Call, Program, Ref, Sub

FUNCTIONAL: dict[str, tuple[str, int]] = {
    "aten::conv1d.default": ("F.conv1d", 7),
    "aten::conv2d.default": ("F.conv2d", 7),
    "aten::conv3d.default": ("F.conv3d", 7),
    "aten::linear.default": ("F.linear", 3),
    "aten::relu.default": ("F.relu", 1),
    "aten::silu.default": ("F.silu", 1),
    "aten::hardtanh.default": ("F.hardtanh", 3),
    "aten::layer_norm.default": ("F.layer_norm", 5),
    "aten::adaptive_avg_pool2d.default": ("F.adaptive_avg_pool2d", 2),
    "aten::pixel_shuffle.default": ("F.pixel_shuffle", 2),
    "aten::scaled_dot_product_attention.default": ("F.scaled_dot_product_attention", 6),
}
"""ATen overloads written as the ``torch.nn.functional`` function that takes the same arguments, with the same
defaults, and calls exactly that overload; the number is how many of them it takes by position (a call with more,
or with ``self`` by name, keeps the ATen spelling)."""


def _literal(value: Any) -> str:
    import torch

    if isinstance(value, Ref):
        return value.name
    if isinstance(value, Sub):
        return f"self.{value.name}"
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return repr(value)
    if isinstance(value, float):
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return 'float("inf")' if value > 0 else 'float("-inf")'
        return repr(value)
    if isinstance(value, complex):
        return f"complex({_literal(value.real)}, {_literal(value.imag)})"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_literal(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, torch.dtype):
        return str(value)  # torch.float32
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    if isinstance(value, (torch.layout, torch.memory_format)):
        return str(value)  # torch.strided, torch.contiguous_format
    if isinstance(value, torch.qscheme):
        return str(value)
    raise TypeError(f"no Python literal for {value!r}")


def _callee(call: Call) -> str:
    if call.fn is operator.getitem:
        return ""
    if call.qualname == "higher_order::cond":
        return "torch.cond"
    if call.qualname == "higher_order::while_loop":
        return "torch.ops.higher_order.while_loop"
    if call.qualname == "prim::If":
        return "_if"
    if call.qualname == "prim::Loop":
        return "_loop"
    if call.qualname == "amanda::unconverted":
        return "_unconverted"
    functional = FUNCTIONAL.get(call.qualname)
    if functional is not None and len(call.args) <= functional[1] and "self" not in call.kwargs:
        return functional[0]
    ns, rest = call.qualname.split("::", 1)
    name, _, overload = rest.partition(".")
    return f"torch.ops.{ns}.{name}.{overload or 'default'}"


_SYMBOLS = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.floordiv: "//", operator.truediv: "/",
            operator.mod: "%", operator.eq: "==", operator.ne: "!=", operator.lt: "<", operator.le: "<=",
            operator.gt: ">", operator.ge: ">="}


def _call_line(call: Call) -> str:
    if call.fn is operator.getitem:
        base, index = call.args
        return f"{call.ref.name} = {_literal(base)}[{_literal(index)}]"
    if call.fn is operator.neg:  # number arithmetic (PY_OPERATORS): Python's own, as torch.export writes it
        return f"{call.ref.name} = -{_literal(call.args[0])}"
    symbol = _SYMBOLS.get(call.fn)
    if symbol is not None:
        return f"{call.ref.name} = {_literal(call.args[0])} {symbol} {_literal(call.args[1])}"
    parts = [_literal(a) for a in call.args] + [f"{k}={_literal(v)}" for k, v in call.kwargs.items()]
    return f"{call.ref.name} = {_callee(call)}({', '.join(parts)})"


def _class_name(text: str) -> str:
    words = re.findall(r"[A-Za-z0-9]+", text)
    name = "".join(w[:1].upper() + w[1:] for w in words)
    if not name or name[0].isdigit():
        name = "Model" + name
    return name


def _attr_line(attr: Attr) -> str:
    key = repr(attr.target)
    if attr.kind == "parameter":
        grad = "" if attr.requires_grad else ", requires_grad=False"
        return f"_parameter(self, {key}, tensors[{key}]{grad})"
    if attr.kind == "buffer":
        persistent = "" if attr.persistent else ", persistent=False"
        return f"_buffer(self, {key}, tensors[{key}]{persistent})"
    return f"self.{attr.target} = tensors[{key}]"


def _read_line(attr: Attr) -> str:
    if attr.kind == "parameter":
        return f"{attr.ref.name} = self.get_parameter({attr.target!r})"
    if attr.kind == "buffer":
        return f"{attr.ref.name} = self.get_buffer({attr.target!r})"
    return f"{attr.ref.name} = self.{attr.target}"


def _uses(value: Any, into: dict[str, None]) -> None:
    if isinstance(value, Ref):
        into[value.name] = None
    elif isinstance(value, (list, tuple)):
        for v in value:
            _uses(v, into)


_HELPERS = '''

def _owner(root: torch.nn.Module, target: str) -> tuple[torch.nn.Module, str]:
    """The module that holds ``target`` (``layer1.0.conv1.weight``), made on the way, and the leaf name."""
    *path, leaf = target.split(".")
    module = root
    for name in path:
        if name not in module._modules:
            module.add_module(name, torch.nn.Module())
        module = module._modules[name]
    return module, leaf


def _parameter(root: torch.nn.Module, target: str, value: torch.Tensor, requires_grad: bool = True) -> None:
    module, leaf = _owner(root, target)
    grad = requires_grad and (value.is_floating_point() or value.is_complex())
    module.register_parameter(leaf, torch.nn.Parameter(value, requires_grad=grad))


def _buffer(root: torch.nn.Module, target: str, value: torch.Tensor, persistent: bool = True) -> None:
    module, leaf = _owner(root, target)
    module.register_buffer(leaf, value, persistent=persistent)
'''


_IF = '''def _if(cond, then_block, else_block, captured):
    if isinstance(cond, torch.Tensor) and torch.compiler.is_compiling():
        return torch.cond(cond, then_block, else_block, tuple(captured))
    return then_block(*captured) if bool(cond) else else_block(*captured)'''

_LOOP = '''def _loop(max_trip_count, condition, body, carried, captured):
    iteration = 0
    condition = bool(condition)
    while condition and iteration < max_trip_count:
        condition, *carried = body(iteration, *carried, *captured)
        condition = bool(condition)
        iteration += 1
    return tuple(carried)'''


def _all_calls(program: Program) -> list[Call]:
    out: list[Call] = []
    for call in program.calls:
        out.append(call)
        subs: list[Sub] = []
        for a in call.args:
            _subs(a, subs)
        for sub in subs:
            out += _all_calls(sub.program)
    return out


def _subs(value: Any, into: list[Sub]) -> None:
    if isinstance(value, Sub):
        for call in value.program.calls:
            for a in call.args:
                _subs(a, into)
        into.append(value)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _subs(v, into)


def _hoisted(sub: Sub) -> list[Attr]:
    """The tensors a branch or loop body holds, renamed to be held by the top module (``<body>_<name>``)."""
    out = []
    for a in sub.program.attrs:
        target = f"{sub.name}_{a.target}" if a.kind == "constant" else f"{sub.name}.{a.target}"
        out.append(Attr(target, a.value, a.kind, a.ref, a.persistent, a.requires_grad, a.op))
    return out


def _function(sub: Sub) -> list[str]:
    """A branch or loop body as a method (``self`` holds its tensors)."""
    program = sub.program
    params = ", ".join(["self"] + [ref.name for _, ref, _ in program.inputs])
    lines = [f"    def {sub.name}({params}):"]
    lines += ["        " + _read_line(a) for a in _hoisted(sub)]
    lines += ["        " + _call_line(c) for c in program.calls]
    results = [_literal(v) for _, v, _ in program.outputs]
    if sub.tuple_output:
        lines.append("        return (" + ", ".join(results) + ("," if len(results) == 1 else "") + ")")
    else:
        lines.append("        return " + results[0])
    return [""] + lines


def module_source(program: Program, weights_file: str, class_name: str = "Model", title: str = "") -> str:
    """The text of a Python module computing ``program``; its weights are read from ``weights_file`` (a path
    relative to the module file)."""
    cls = _class_name(class_name)
    params = ", ".join(["self"] + [ref.name for _, ref, _ in program.inputs])
    used: dict[str, None] = {}
    for call in program.calls:
        for a in call.args:
            _uses(a, used)
        for v in call.kwargs.values():
            _uses(v, used)
    for _, v, _ in program.outputs:
        _uses(v, used)
    lines = [f'"""{title or cls}: generated by Amanda from a graph in {program.namespace}.',
             "",
             f"Weights: {weights_file} beside this file (safetensors); ``{cls}(weights=path)`` reads another.",
             '"""', "",
             "from pathlib import Path", "",
             "import torch",
             "import torch.nn.functional as F",
             "from safetensors.torch import load_file", "",
             f"WEIGHTS = Path(__file__).resolve().with_name({weights_file!r})",
             _HELPERS]
    subs: list[Sub] = []
    for call in program.calls:
        for a in call.args:
            _subs(a, subs)
    attrs = list(program.attrs) + [a for sub in subs for a in _hoisted(sub)]
    control = {c.qualname for c in _all_calls(program)} & {"prim::If", "prim::Loop"}
    if control:
        lines += ["", "", "# TorchScript control flow (blocks as functions returning tuples)"]
        if "prim::If" in control:
            lines += _IF.splitlines()
        if "prim::Loop" in control:
            lines += _LOOP.splitlines()
    if any(c.qualname == "amanda::unconverted" for c in _all_calls(program)):
        lines += ["", "", "# ops the conversion kept unconverted (--allow-partial): calling one raises",
                  "def _unconverted(message, *inputs):", "    raise NotImplementedError(message)"]
    lines += ["", "",
             f"class {cls}(torch.nn.Module):",
             "    def __init__(self, weights: str | Path = WEIGHTS) -> None:",
             "        super().__init__()"]
    if attrs:
        lines.append("        tensors = load_file(str(weights))")
        lines += ["        " + _attr_line(a) for a in attrs]
    lines += ["", f"    def forward({params}):"]
    doc = []
    for _, ref, dtype in program.inputs:
        doc.append(f"{ref.name}: {dtype}" if dtype is not None else ref.name)
    outs = [f"{n}: {t}" if t is not None else n for n, _, t in program.outputs]
    lines.append(f'        """({", ".join(doc)}) -> ({", ".join(outs)})"""')
    lines += ["        " + _read_line(a) for a in program.attrs if a.ref.name in used]
    lines += ["        " + _call_line(c) for c in program.calls]
    results = [_literal(v) for _, v, _ in program.outputs]
    lines.append("        return " + (results[0] if len(results) == 1 else "(" + ", ".join(results) + ")"))
    for sub in subs:
        lines += _function(sub)
    return "\n".join(lines) + "\n"


def weight_values(program: Program) -> list[tuple[str, Any]]:
    """The tensors of ``program`` by FQN (those of branch and loop bodies hoisted), as they are held: arrays,
    lazy tensors or torch tensors, nothing converted or read."""
    subs: list[Sub] = []
    for call in program.calls:
        for a in call.args:
            _subs(a, subs)
    return [(attr.target, attr.value) for attr in list(program.attrs) + [a for sub in subs for a in _hoisted(sub)]]


def weights_of(program: Program) -> dict[str, Any]:
    """The tensors of ``program`` by FQN, as contiguous torch tensors that share no memory (what safetensors
    writes)."""
    from .tensors import to_torch

    out: dict[str, Any] = {}
    seen: set[int] = set()
    for target, value in weight_values(program):
        t = to_torch(value).contiguous()
        ptr = t.untyped_storage().data_ptr() if t.numel() else -1
        if ptr in seen:
            t = t.clone()
        elif ptr != -1:
            seen.add(ptr)
        out[target] = t
    return out
