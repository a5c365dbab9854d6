"""The ``amanda-tf`` plugin: what it registers with Amanda.

Importing this module (which the plugin manager does through the entry point ``amanda-tf``) never imports
TensorFlow; importing, exporting or running a model does.
"""

from __future__ import annotations

__all__ = ["amanda_namespaces", "amanda_type_systems", "amanda_importers", "amanda_exporters", "amanda_runners",
           "amanda_mapping_tables", "amanda_graph_passes"]

import os
import sys
from pathlib import Path
from typing import Any

from amanda_core import Exporter, GraphPass, Importer, Runner, hookimpl
from amanda_core.namespace.registry import NamespaceProvider
from amanda_core.namespace.types import TypeSystem
from amanda_core.plugin import lazy

from .namespace import TensorFlowNamespaces
from .types import TFTypeSystem

FAMILY = "amanda/tensorflow"
TABLES = Path(__file__).resolve().parent / "tables"


@hookimpl
def amanda_type_systems() -> list[TypeSystem]:
    """The ``tf`` type system."""
    return [TFTypeSystem()]


@hookimpl
def amanda_namespaces() -> list[NamespaceProvider]:
    """``amanda/tensorflow``: one version, the installed TensorFlow release (none if it is not installed)."""
    return [TensorFlowNamespaces()]


def _accepts(source: Any) -> bool:
    """A SavedModel directory, or a live Keras model / ``tf.Module`` / ``tf.function``; never imports TF."""
    if isinstance(source, (str, os.PathLike)):
        return os.path.isdir(source) and os.path.exists(os.path.join(source, "saved_model.pb"))
    if "tensorflow" not in sys.modules and "keras" not in sys.modules:
        return False
    from .importer import is_tf_program

    return is_tf_program(source)


_load = lazy("amanda_tf.importer:load_model")
_save = lazy("amanda_tf.exporter:save_model")


@hookimpl
def amanda_importers() -> list[Importer]:
    """``tensorflow``: SavedModel directories, ``.keras`` files, frozen ``.pb`` GraphDefs, live Keras models and
    ``tf.function``s."""
    return [Importer(name="tensorflow", namespace=FAMILY, extensions=(".keras", ".pb"), load=_load,
                     framework="tensorflow", accepts=_accepts, load_options=("inputs", "outputs", "signature"),
                     description="TensorFlow: SavedModel directories, .keras, frozen .pb, live Keras models")]


@hookimpl
def amanda_exporters() -> list[Exporter]:
    """``tensorflow``: graphs of ``amanda/tensorflow`` to a SavedModel directory (a path ending in ``/`` or
    ``.savedmodel``) or a frozen ``.pb`` GraphDef."""
    return [Exporter(name="tensorflow", namespace=FAMILY, extensions=(".pb", ".savedmodel", "/"), save=_save,
                     framework="tensorflow",
                     description="TensorFlow: SavedModel directories (serving signature) and frozen .pb")]


_run = lazy("amanda_tf.runner:run")
_run_each = lazy("amanda_tf.runner:run_each")
_example_inputs = lazy("amanda_tf.runner:example_inputs")


@hookimpl
def amanda_runners() -> list[Runner]:
    """``tensorflow``: runs any ``amanda/tensorflow`` graph with TensorFlow on the CPU (for ``amanda check``)."""
    return [Runner(name="tensorflow", namespace=FAMILY, run=_run, example_inputs=_example_inputs,
                   run_each=_run_each,
                   framework="tensorflow", description="TensorFlow graphs on the CPU")]


@hookimpl
def amanda_mapping_tables() -> list[Any]:
    """TensorFlow <-> ONNX tables (``amanda_tf/tables/*.yaml``)."""
    return sorted(TABLES.glob("*.yaml"))


def _layout(graph: Any, **options: Any) -> str:
    from .layout import run_pass

    return run_pass(graph, **options)


def _fold(graph: Any) -> str:
    from .layout import fold_summary

    return fold_summary(graph)


def _keras_lstm(graph: Any) -> str:
    from .rnn import run_pass

    return run_pass(graph)


@hookimpl
def amanda_graph_passes() -> list[GraphPass]:
    """``tf-inline-calls``: before ``tf-to-onnx``, function calls are inlined.  ``keras-lstm``: before ``tf-to-onnx``,
    while the graph is all TensorFlow, each Keras LSTM loop becomes one
    ONNX ``LSTM`` (``docs/tensorflow.md``, "Recurrent layers").  ``tf-layout``: after ``tf-to-onnx``
    (channels-last ops written as ONNX ops between transposes), cancel, fold and push the transposes so that few
    are left (``docs/tensorflow.md``, "Layout").  ``tf-layout-nhwc``: after ``onnx-to-tf``, the same for the
    transposes around the NHWC ops of an ONNX model (``docs/tensorflow.md``, "Layout, the other way").
    ``onnx-expand-functions`` before ``onnx-newest-to-tf``, ``onnx-static-if`` and ``onnx-unroll`` before
    ``onnx-to-tf``: amanda-onnx's ONNX -> ONNX passes (LinearAttention as its function body; an ``If`` whose
    condition is known at conversion as the branch it takes; recurrences of a static length step by step)."""
    return [GraphPass(name="tf-inline-calls", tables=("tf-to-onnx",), run=lazy("amanda_tf.inline:run_pass"),
                      before=True, description="PartitionedCall/StatefulPartitionedCall replaced by the ops of the "
                                               "function they call (ONNX has no call op)"),
            GraphPass(name="keras-lstm", tables=("tf-to-onnx",), run=_keras_lstm, before=True,
                      description="recognises Keras LSTM, GRU and SimpleRNN loops (While over TensorLists) and "
                                  "writes ONNX LSTM, GRU and RNN ops"),
            GraphPass(name="tf-fold-constants", tables=("tf-to-onnx",), run=_fold, before=True,
                      description="folds the ops that compute from constants alone (Keras' frozen batch norm "
                                  "statistics, reshaped biases) into Const ops"),
            GraphPass(name="tf-layout", tables=("tf-to-onnx",), run=_layout, options=_LAYOUT_OPTIONS,
                      description="TF control flow as ONNX If/Loop, then removes the transposes the TF -> ONNX "
                                  "table leaves around channels-last ops (--input-layout/--output-layout "
                                  "channels-first: the ONNX model's interface NCHW too)"),
            GraphPass(name="onnx-expand-functions", tables=("onnx-newest-to-tf",), run=_expand_functions,
                      before=True,
                      description="LinearAttention (opset 27) as its ONNX function body, ahead of the opset chain"),
            GraphPass(name="onnx-static-if", tables=("onnx-to-tf",), run=_static_if, before=True,
                      description="If ops whose condition constants and static shapes decide, as the branch taken "
                                  "(its values keep the ranks the rules need)"),
            GraphPass(name="onnx-unroll", tables=("onnx-to-tf",), run=_unroll, before=True,
                      description="RNN, GRU, LSTM (but those BlockLSTMV2 computes) and Scan over a sequence of a "
                                  "length known at conversion, as straight-line ONNX ops per step"),
            GraphPass(name="onnx-control-to-tf", tables=("onnx-to-tf",), run=_onnx_control_to_tf, before=True,
                      description="ONNX If/Loop as StatelessIf/StatelessWhile whose functions take what they read"),
            GraphPass(name="onnx-sequences-to-tf", tables=("onnx-to-tf",), run=_onnx_sequences_to_tf, before=True,
                      description="ONNX sequences and optionals as TensorList and Optional variants "
                                  "(docs/tensorflow.md, \"Sequences and optionals\")"),
            GraphPass(name="tf-function-types", tables=("onnx-to-tf",), run=_tf_function_types,
                      description="function signatures of converted control flow in TF types"),
            GraphPass(name="tf-variant-types", tables=("onnx-to-tf",), run=_tf_variant_types,
                      description="ports that carry TensorList and Optional variants typed variant"),
            GraphPass(name="tf-layout-nhwc", tables=("onnx-to-tf",), run=lazy("amanda_tf.layout_tf:run_pass"),
                      options=_LAYOUT_OPTIONS,
                      description="removes the transposes the ONNX -> TF tables leave around channels-last ops "
                                  "(docs/tensorflow.md, \"Layout, the other way\"; --input-layout/--output-layout "
                                  "channels-last: the TF model's interface NHWC too)")]


_LAYOUT_OPTIONS = ("input_layout", "output_layout")


def _onnx_pass(module: str) -> Any:
    """A module of amanda-onnx, whose ONNX -> ONNX passes run on the ONNX graphs it reads."""
    from amanda_core.plugin import import_from_plugin

    return import_from_plugin(f"amanda_onnx.{module}", "amanda-onnx", "converting ONNX to TensorFlow")


def _fused_lstm(op: Any) -> bool:
    """An LSTM the onnx-to-tf table writes as one BlockLSTMV2 (float32, forward, sequence-major, with a bias, no
    peepholes, zero initial states, every step): left whole, its sequence length free."""
    fed = {p.name for p in op.input_ports if p.source is not None}
    direction = op.attrs.get("direction") or "forward"
    direction = direction.decode() if isinstance(direction, bytes) else str(direction)
    x = next((p.source for p in op.input_ports if p.name == "X"), None)
    return direction == "forward" and not int(op.attrs.get("layout", 0) or 0) and "B" in fed and \
        not fed & {"P", "initial_h", "initial_c", "sequence_lens"} and \
        x is not None and str(x.dtype).startswith("tensor(float)")


def _unroll(graph: Any) -> str:
    return _onnx_pass("unroll").unroll_onnx(graph, keep=lambda op: op.type == "LSTM" and _fused_lstm(op)).summary()


def _static_if(graph: Any) -> str:
    return _onnx_pass("static_if").fold_static_ifs(graph).summary()


def _expand_functions(graph: Any) -> str:
    return str(_onnx_pass("functions").expand_functions(graph))


def _onnx_control_to_tf(graph: Any) -> str:
    from .control import onnx_control_to_tf

    return onnx_control_to_tf(graph).summary()


def _tf_function_types(graph: Any) -> str:
    from .control import settle_tf_bodies

    return f"{settle_tf_bodies(graph)} port type(s) of function bodies in TF types"


def _onnx_sequences_to_tf(graph: Any) -> str:
    from .sequences import onnx_sequences_to_tf

    return onnx_sequences_to_tf(graph).summary()


def _tf_variant_types(graph: Any) -> str:
    from .sequences import settle_variants

    return f"{settle_variants(graph)} port type(s) set to variant"
