"""A graph in ``amanda/pytorch`` as a runnable ``torch.fx.GraphModule``.

Each op becomes a ``call_function`` node of its ATen overload; parameters and buffers are registered under
their FQNs (submodules made on the way: ``layer1.0.conv1.weight`` is the parameter ``weight`` of the module
``layer1.0.conv1``), so ``state_dict()`` has the original's keys and the module can be fine-tuned, compiled
and exported again.  The weights share memory with the graph's arrays (see :func:`amanda_torch.tensors.to_torch`)
unless ``copy=True``.
"""

from __future__ import annotations

__all__ = ["to_module", "build_module", "install_tensor"]

from typing import Any

from amanda_core import Graph
from amanda_core.errors import AmandaError

from .program import Attr, Program, Ref, Sub, lower
from .tensors import to_torch


def install_tensor(root: Any, attr: Attr, tensor: Any, parents: dict[str, Any] | None = None) -> None:
    """Register ``tensor`` on ``root`` under ``attr.target`` as ``attr.kind`` says, making submodules on the way.

    ``parents``: for a caller installing many tensors on ``root`` and nothing else, the modules the dotted paths
    up to their last names lead to (``"layer1.0."``), filled here as they are found.
    """
    import torch

    hooks = torch.nn.modules.module  # its global registration hooks
    prefix, dot, leaf = attr.target.rpartition(".")
    module = parents.get(prefix + dot) if parents is not None else None
    if module is None:
        module = root
        path = prefix.split(".") if dot else []
        for i, seg in enumerate(path):
            sub = module._modules.get(seg)
            if sub is None:
                if _has_attr(module, seg):
                    raise AmandaError(f"op {attr.op!r}: cannot hold {attr.target!r}: "
                                      f"{'.'.join(path[:i + 1])} is already a tensor")
                sub = _new_module()
                if seg and type(module) is torch.nn.Module and not hooks._global_module_registration_hooks:
                    module._modules[seg] = sub  # what add_module does once its checks pass
                else:
                    module.add_module(seg, sub)
            module = sub
        if parents is not None:
            parents[prefix + dot] = module
    if leaf in module._modules:
        raise AmandaError(f"op {attr.op!r}: cannot hold {attr.target!r}: it is already a submodule")
    # a leaf no attribute of a plain Module has yet passes every check of register_parameter and register_buffer:
    # with no global registration hooks, registering it is storing it
    free = bool(leaf) and type(module) is torch.nn.Module and not _has_attr(module, leaf)
    if attr.kind == "parameter":
        grad = attr.requires_grad and (tensor.is_floating_point() or tensor.is_complex())
        param = torch.nn.Parameter(tensor, requires_grad=grad)
        if free and param.grad_fn is None and not hooks._global_parameter_registration_hooks:
            module._parameters[leaf] = param
        else:
            module.register_parameter(leaf, param)
    elif attr.kind == "buffer":
        if free and isinstance(tensor, torch.Tensor) and not hooks._global_buffer_registration_hooks:
            module._buffers[leaf] = tensor
            if not attr.persistent:
                module._non_persistent_buffers_set.add(leaf)
        else:
            module.register_buffer(leaf, tensor, persistent=attr.persistent)
    else:
        setattr(module, leaf, tensor)


def _has_attr(module: Any, name: str) -> bool:
    """``hasattr(module, name)``; for a plain ``torch.nn.Module`` without the exception its ``__getattr__``
    raises (and formats a message for) on a miss: the lookup's own steps (the classes, the instance, then what
    ``__getattr__`` reads)."""
    import torch

    if type(module) is not torch.nn.Module:
        return hasattr(module, name)
    if name in module.__dict__ or name in module._parameters or name in module._buffers or name in module._modules:
        return True
    for cls in torch.nn.Module.__mro__:
        if name in cls.__dict__:
            return True
    return False


_MODULE_STATE: list[tuple[str, Any, bool]] | None = None
"""What ``torch.nn.Module()`` holds once made, in order: (name, value, whether a container to be made anew)."""


def _new_module() -> Any:
    """A new ``torch.nn.Module()``: the attributes its ``__init__`` sets (empty dicts of parameters, buffers,
    submodules and hooks, the set of non-persistent buffers, the training flag ...) copied from one made once,
    each dict and set a new one."""
    import torch

    global _MODULE_STATE
    if _MODULE_STATE is None:
        state = []
        for name, value in vars(torch.nn.Module()).items():
            if isinstance(value, (dict, set)) and not value:
                state.append((name, value, True))
            elif value is None or isinstance(value, (bool, int, str)):
                state.append((name, value, False))
            else:  # something else to copy: made by Module.__init__ itself
                state = None
                break
        _MODULE_STATE = state if state is not None else []  # empty: always made by Module()
    if not _MODULE_STATE:
        return torch.nn.Module()
    module = object.__new__(torch.nn.Module)
    d = module.__dict__
    for name, value, fresh in _MODULE_STATE:
        d[name] = value.copy() if fresh else value
    return module


COPY_LIMIT = 8
"""Up to this many tensors, a module's GraphModule is made with its graph (one compile, the tensors copied and the
copies replaced); with more, around an empty graph then given its own (two compiles, the first of an empty
graph, and nothing copied)."""


def build_module(program: Program, *, copy: bool = False, tuple_output: bool = False) -> Any:
    """The ``GraphModule`` that runs ``program``; branches and loop bodies are its submodules."""
    import torch
    import torch.fx

    holder = torch.nn.Module()  # what the module holds, in the program's order
    parents: dict[str, Any] = {}
    for attr in program.attrs:
        install_tensor(holder, attr, to_torch(attr.value, copy=copy), parents)
    g = torch.fx.Graph()
    env: dict[str, Any] = {}
    attrs = {a.ref.name: a for a in program.attrs}

    def resolve(value: Any) -> Any:
        if isinstance(value, Ref):
            node = env.get(value.name)
            if node is None:
                attr = attrs[value.name]
                node = env[value.name] = g.create_node("get_attr", attr.target, name=value.name)
            return node
        if isinstance(value, Sub):
            holder.add_module(value.name, build_module(value.program, copy=copy, tuple_output=value.tuple_output))
            return g.create_node("get_attr", value.name, name=value.name)
        if isinstance(value, list):
            return [resolve(v) for v in value]
        if isinstance(value, tuple):
            return tuple([resolve(v) for v in value])
        return value

    for _, ref, _ in program.inputs:
        env[ref.name] = g.create_node("placeholder", ref.name, name=ref.name)
    for call in program.calls:
        args = tuple([resolve(a) for a in call.args])
        kwargs = {k: resolve(v) for k, v in call.kwargs.items()} if call.kwargs else None
        env[call.ref.name] = g.create_node("call_function", call.fn, args, kwargs, name=call.ref.name)
    outs = [resolve(v) for _, v, _ in program.outputs]
    g.output(outs[0] if len(outs) == 1 and not tuple_output else tuple(outs))
    # the GraphModule copies from ``holder`` what its graph reads (a tensor that is no parameter as a persistent
    # buffer), copies thrown away here: it then holds exactly what ``holder`` holds, in the same order:
    # parameters, buffers (persistent or not), submodules, and plain tensor attributes.  With many tensors it is
    # made around an empty graph instead (nothing copied) and given its own after: compiling the empty graph
    # costs about as much as copying COPY_LIMIT tensors
    few = len(program.attrs) <= COPY_LIMIT
    gm = torch.fx.GraphModule(holder, g if few else torch.fx.Graph(), class_name="AmandaModule")
    for name in list(gm._buffers):
        del gm._buffers[name]
    gm._parameters.clear()
    gm._modules.clear()
    gm._parameters.update(holder._parameters)
    gm._buffers.update(holder._buffers)
    gm._non_persistent_buffers_set.update(holder._non_persistent_buffers_set)
    gm._modules.update(holder._modules)
    for attr in program.attrs:
        if attr.kind == "constant" and "." not in attr.target:
            gm.__dict__[attr.target] = holder.__dict__[attr.target]
    if not few:
        gm.graph = g  # compiled once
    gm.meta["amanda_inputs"] = [name for name, _, _ in program.inputs]
    gm.meta["amanda_outputs"] = [name for name, _, _ in program.outputs]
    return gm


def to_module(graph: Graph, *, copy: bool = False) -> Any:
    """A runnable ``torch.fx.GraphModule`` computing ``graph`` (a graph in ``amanda/pytorch/<version>``).

    ``forward`` takes the graph inputs in order and returns its one output, or a tuple of its outputs in order.
    Weights share memory with the graph's arrays unless ``copy`` is true (read-only arrays are always copied).
    """
    return build_module(lower(graph), copy=copy)

