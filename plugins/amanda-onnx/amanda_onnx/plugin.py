"""The ``amanda-onnx`` plugin: what it registers with Amanda.

Importing this module does not import ``onnx``; neither does calling its hooks
once the schema cache is warm (see :mod:`amanda_onnx.schemas`).  Loading or
saving a model does.
"""

from __future__ import annotations

from typing import Any

from amanda_core import Exporter, Importer, Runner, TypeInferer, hookimpl
from amanda_core.namespace import NamespaceProvider, TypeSystem
from amanda_core.plugin import lazy

from .common import is_model_proto
from .schemas import FAMILY, namespace_providers
from .typesystem import OnnxTypeSystem


@hookimpl
def amanda_type_systems() -> list[TypeSystem]:
    """The ``onnx`` type system."""
    return [OnnxTypeSystem()]


@hookimpl
def amanda_namespaces() -> list[NamespaceProvider]:
    """One provider per ONNX domain: ``amanda/onnx`` (opsets 1 to newest), ``amanda/onnx/ai.onnx.ml`` ..."""
    return list(namespace_providers())


_load = lazy("amanda_onnx.importer:load_model")
_save = lazy("amanda_onnx.exporter:save_model")
_keep_foreign = lazy("amanda_onnx.foreign:keep_foreign")


@hookimpl
def amanda_importers() -> list[Importer]:
    """``onnx``: ``.onnx`` files, model bytes and ``onnx.ModelProto`` objects."""
    return [Importer(name="onnx", namespace=FAMILY, extensions=(".onnx",), load=_load, framework="onnx",
                     description="ONNX models (lossless; external data read lazily)", accepts=is_model_proto)]


@hookimpl
def amanda_exporters() -> list[Exporter]:
    """``onnx``: graphs of any ``amanda/onnx`` namespace to ``.onnx`` files (atomic writes); ops of another
    framework a partial conversion leaves become nodes of a custom domain (:mod:`amanda_onnx.foreign`)."""
    return [Exporter(name="onnx", namespace=FAMILY, extensions=(".onnx",), save=_save, framework="onnx",
                     description="ONNX models (lossless; external data when asked or over 2 GB)",
                     keep_foreign=_keep_foreign)]


@hookimpl
def amanda_mapping_tables() -> list[Any]:
    """Opset conversion: a table from each opset of the default domain to the next (upgrade), and back where the
    older opset can say exactly the same (downgrade); see ``docs/onnx-opsets.md``."""
    from .opset import tables

    return list(tables())


_run = lazy("amanda_onnx.runtime:run")
_run_each = lazy("amanda_onnx.runtime:run_each")
_example_inputs = lazy("amanda_onnx.runtime:example_inputs")


@hookimpl
def amanda_runners() -> list[Runner]:
    """``onnxruntime``: runs any ``amanda/onnx`` graph on the CPU (for ``amanda check``)."""
    return [Runner(name="onnxruntime", namespace=FAMILY, run=_run, example_inputs=_example_inputs,
                   run_each=_run_each,
                   framework="onnxruntime", description="ONNX graphs on onnxruntime's CPU provider")]


_infer = lazy("amanda_onnx.infer:infer_types")


@hookimpl
def amanda_type_inferers() -> list[TypeInferer]:
    """``onnx-types``: types the values an ONNX graph leaves untyped (before conversions): initializers from
    their tensors, node outputs from onnx's shape inference (not run when the graph states them all)."""
    return [TypeInferer(name="onnx-types", namespace=FAMILY, infer=_infer,
                        description="value types of ONNX graphs: initializers from their tensors, node outputs "
                                    "from onnx.shape_inference")]
