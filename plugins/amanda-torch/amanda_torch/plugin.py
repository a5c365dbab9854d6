"""The ``amanda-torch`` plugin: what it registers with Amanda.

Importing this module imports no torch; torch is imported (in a child
process) when a schema is built on a cold cache, and in this process only when
a model is imported, exported or run.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from amanda_core import Exporter, GraphPass, Importer, Runner, hookimpl
from amanda_core.namespace.registry import NamespaceProvider
from amanda_core.namespace.types import TypeSystem
from amanda_core.plugin import lazy

from .schemas import FAMILY, TorchNamespaces
from .types import TorchTypeSystem

_NAMESPACES = TorchNamespaces()
TABLES = Path(__file__).resolve().parent / "tables"


@hookimpl
def amanda_type_systems() -> list[TypeSystem]:
    """The ``torch`` type system."""
    return [TorchTypeSystem()]


@hookimpl
def amanda_namespaces() -> list[NamespaceProvider]:
    """``amanda/pytorch``: the installed torch release's operators and TorchScript node kinds."""
    return [_NAMESPACES]


def _is_torch_object(obj: Any) -> bool:
    """A live torch program (``nn.Module``, ``ExportedProgram``, ``ScriptModule``); never imports torch."""
    if "torch" not in sys.modules:
        return False
    from .importer import is_torch_program

    return is_torch_program(obj)


_load = lazy("amanda_torch.importer:load_model")
_save = lazy("amanda_torch.exporter:save_model")


@hookimpl
def amanda_importers() -> list[Importer]:
    """``torch``: ``.pt2`` (torch.export), ``.pt`` (TorchScript), live modules and exported programs."""
    return [Importer(name="torch", namespace=FAMILY, extensions=(".pt2", ".pt", ".pth"), load=_load,
                     framework="torch", accepts=_is_torch_object, load_options=("inputs", "outputs"),
                     description="PyTorch programs through torch.export (.pt2, nn.Module) and TorchScript (.pt)")]


@hookimpl
def amanda_exporters() -> list[Exporter]:
    """``torch``: graphs of ``amanda/pytorch`` to ``.pt2`` (ExportedProgram) and ``.py`` (a readable module with
    its weights in a ``.safetensors`` file beside it)."""
    return [Exporter(name="torch", namespace=FAMILY, extensions=(".pt2", ".py"), save=_save, framework="torch",
                     description="PyTorch: .pt2 (torch.export) or a readable .py module with .safetensors weights",
                     keep_foreign=_keep_foreign)]


_keep_foreign = lazy("amanda_torch.foreign:keep_foreign")
_run = lazy("amanda_torch.runner:run")
_run_each = lazy("amanda_torch.runner:run_each")
_example_inputs = lazy("amanda_torch.runner:example_inputs")


@hookimpl
def amanda_runners() -> list[Runner]:
    """``torch``: runs any ``amanda/pytorch`` graph in torch eager mode on the CPU (for ``amanda check``)."""
    return [Runner(name="torch", namespace=FAMILY, run=_run, example_inputs=_example_inputs,
                   run_each=_run_each, framework="torch",
                   description="PyTorch graphs in eager mode on the CPU")]


@hookimpl
def amanda_mapping_tables() -> list[Any]:
    """torch <-> ONNX tables (``amanda_torch/tables/*.yaml``)."""
    return sorted(TABLES.glob("*.yaml"))


def _fold(graph: Any) -> str:
    from .onnx_passes import fold

    return fold(graph).summary()


def _gelu(graph: Any) -> str:
    from .onnx_passes import fuse_gelu

    return fuse_gelu(graph).summary()


def _rnn_layers(graph: Any) -> str:
    from .rnn_layers import split_rnn_layers

    return split_rnn_layers(graph)


def _control_to_onnx(graph: Any) -> str:
    from .control_onnx import torch_control_to_onnx

    return torch_control_to_onnx(graph).summary()


def _onnx_pass(module: str) -> Any:
    """A module of amanda-onnx, whose ONNX -> ONNX passes run on the ONNX graphs it reads."""
    from amanda_core.plugin import import_from_plugin

    return import_from_plugin(f"amanda_onnx.{module}", "amanda-onnx", "converting ONNX to torch")


def _unroll(graph: Any) -> str:  # RNN and LSTM: the onnx-to-torch-rnn part converts them whole
    return _onnx_pass("unroll").unroll_onnx(graph, ops=("GRU", "Scan"), keep=torch_gru).summary()


def torch_gru(op: Any) -> bool:
    """An ONNX GRU that the rules ``gru_given_state`` and ``gru_bidirectional_given_state``
    (``onnx_to_torch_rnn.yaml``) convert whole into ``aten::gru.input``, so the unrolling pass leaves it: the
    attribute library's ``onnx_gru_torch_form``, which their conditions are."""
    from amanda_core.mapping.attrconv import onnx_gru_torch_form
    from amanda_core.matching import OpView

    return onnx_gru_torch_form(OpView(op)) > 0


def _resize_symmetric(graph: Any) -> str:
    from .onnx_resize import resize_symmetric_to_torch

    return resize_symmetric_to_torch(graph)


def _size_literals(graph: Any) -> str:
    from .onnx_sizes import private_size_literals, split_shape_reads

    split = split_shape_reads(graph)
    return f"{split} read(s) of several sizes split, {private_size_literals(graph)} size literal(s) given to " \
           "their size lists"


def _expand_functions(graph: Any) -> str:
    return str(_onnx_pass("functions").expand_functions(graph))


def _control_to_torch(graph: Any) -> str:
    from .control_onnx import onnx_control_to_torch

    return onnx_control_to_torch(graph).summary()


@hookimpl
def amanda_graph_passes() -> list[GraphPass]:
    """Control flow (``docs/torch.md``, "Control flow"): ``torch-control-to-onnx`` after ``torch-to-onnx``
    (``torch.cond``, TorchScript ``If``/``Loop`` as ONNX ``If``/``Loop``) and ``onnx-control-to-torch`` before
    ``onnx-to-torch`` (the other way).  ``torch-onnx-fold`` after ``torch-to-onnx`` (batch norm and zero padding
    into convolutions, constant subgraphs folded, Constant nodes as initializers) and ``torch-onnx-gelu`` after
    ``onnx-opset-19-to-20`` (the GELU subgraphs of ``torch-to-onnx`` as ``Gelu``): ``docs/torch.md``, "What is
    folded".  Before ``onnx-newest-to-torch``, ``onnx-expand-functions`` (LinearAttention as its function body);
    before ``onnx-to-torch``, ``onnx-unroll`` (GRU and Scan of a length known at conversion, step by step; a GRU
    of torch's own form, :func:`torch_gru`, stays for the rules),
    ``onnx-size-literals`` (a size list's own literals) and ``onnx-resize-symmetric-to-torch`` (Resize-19
    half_pixel_symmetric read as opset 18): ``docs/torch.md``,
    "ONNX -> torch"."""
    return [GraphPass(name="torch-control-to-onnx", tables=("torch-to-onnx",), run=_control_to_onnx,
                      description="torch.cond and TorchScript If/Loop as ONNX If/Loop, their branches reading "
                                  "outer values by name"),
            GraphPass(name="torch-rnn-layers", tables=("torch-to-onnx",), run=_rnn_layers, before=True,
                      description="stacked GRU, LSTM and RNN ops as one op per layer (docs/torch.md, "
                                  "\"Recurrent layers\")"),
            GraphPass(name="onnx-unroll", tables=("onnx-to-torch",), run=_unroll, before=True,
                      description="GRU and Scan over a sequence of a length known at conversion, as "
                                  "straight-line ONNX ops per step"),
            GraphPass(name="onnx-expand-functions", tables=("onnx-newest-to-torch",), run=_expand_functions,
                      before=True,
                      description="LinearAttention (opset 27) as its ONNX function body, ahead of the opset chain"),
            GraphPass(name="onnx-resize-symmetric-to-torch", tables=("onnx-to-torch",), run=_resize_symmetric,
                      before=True,
                      description="Resize-19 in half_pixel_symmetric linear or cubic mode read as the opset-18 op, "
                                  "whose onnx-to-torch rules compute that mode"),
            GraphPass(name="onnx-size-literals", tables=("onnx-to-torch",), run=_size_literals, before=True,
                      description="each size list (a Concat read as the shape of Reshape or Expand) reads one "
                                  "size per piece (a Shape or Slice of several split) and its own copy of the "
                                  "one-element literals others read too, so that its sizes can become torch's "
                                  "SymInts and ints"),
            GraphPass(name="onnx-control-to-torch", tables=("onnx-to-torch",), run=_control_to_torch, before=True,
                      description="ONNX If/Loop as prim::If/prim::Loop, outer values as captured inputs"),
            GraphPass(name="torch-onnx-fold", tables=("torch-to-onnx",), run=_fold,
                      description="folds BatchNormalization and zero Pad into Conv, constant subgraphs into "
                                  "initializers"),
            GraphPass(name="torch-onnx-gelu", tables=("onnx-opset-19-to-20",), run=_gelu,
                      description="the GELU subgraphs torch-to-onnx writes at opset 18 as one Gelu (opset 20)")]
