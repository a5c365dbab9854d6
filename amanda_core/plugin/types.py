"""What plugins register besides namespaces and type systems."""

from __future__ import annotations

__all__ = ["Importer", "Exporter", "Runner", "TypeInferer", "GraphPass", "InputSpec", "parse_input_spec",
           "INPUT_DTYPES"]

import os
import re
from typing import Any, Callable

import attrs

from ..errors import AmandaError
from ..ir.graph import Graph
from ..namespace.names import parse_spec

INPUT_DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
                "uint32", "uint64", "bool", "complex64", "complex128")
"""The element type names an :class:`InputSpec` takes (numpy's names; ``bfloat16`` as ml_dtypes spells it)."""


@attrs.frozen
class InputSpec:
    """What the command line says about one input of a model whose file does not state it (``--input``).

    ``dtype`` is a numpy-style name from :data:`INPUT_DTYPES` or None (unknown); ``shape`` is None (rank
    unknown) or a tuple of dimensions, each an ``int`` or a ``str`` (a symbolic dimension, like ``batch``).
    Importers that take ``inputs=`` (they list ``"inputs"`` in :attr:`Importer.load_options`) get a list of these.
    """

    name: str
    dtype: str | None = None
    shape: tuple[int | str, ...] | None = None

    def __str__(self) -> str:
        text = self.name
        if self.dtype is not None or self.shape is not None:
            text += ":" + (self.dtype or "")
        if self.shape is not None:
            text += "[" + ",".join(str(d) for d in self.shape) + "]"
        return text


_SPEC_TAIL = re.compile(r"^(?P<dtype>[A-Za-z_][A-Za-z0-9_]*)?(?:\[(?P<dims>[^\[\]]*)\])?$")
_SYMBOL = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


def parse_input_spec(text: str) -> InputSpec:
    """``"x:float32[batch,3,224,224]"`` -> ``InputSpec("x", "float32", ("batch", 3, 224, 224))``.

    Forms: ``NAME`` (nothing known but the name), ``NAME:DTYPE`` (shape unknown), ``NAME:DTYPE[]`` (a scalar),
    ``NAME:DTYPE[d0,d1,...]`` and ``NAME:[d0,...]`` (dtype unknown); a dimension is a size (``3``) or a
    symbolic name (``batch``).  The name is everything before the last colon, so a TensorFlow tensor name with
    its output index (``x:0``) is a name.  A malformed spec raises :class:`AmandaError` quoting it."""
    raw = text
    text = text.strip()
    name, colon, tail = text.rpartition(":")
    if not colon or tail.isdigit():  # "x" or "x:0"
        name, tail = text, ""
    elif not tail:
        raise AmandaError(f"input spec {raw!r}: nothing after the colon; write NAME:DTYPE[DIMS], "
                          "e.g. x:float32[batch,3,224,224]")
    if not name:
        raise AmandaError(f"input spec {raw!r}: no input name before the colon; write NAME:DTYPE[DIMS], "
                          "e.g. x:float32[batch,3,224,224]")
    if not tail:
        return InputSpec(name)
    m = _SPEC_TAIL.match(tail)
    if m is None:
        raise AmandaError(f"input spec {raw!r}: cannot read {tail!r}; write NAME:DTYPE[DIMS], "
                          "e.g. x:float32[batch,3,224,224], x:int64[] or x:float32")
    dtype = m.group("dtype")
    if dtype is not None and dtype not in INPUT_DTYPES:
        import difflib

        close = difflib.get_close_matches(dtype, INPUT_DTYPES, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise AmandaError(f"input spec {raw!r}: unknown dtype {dtype!r}{hint}; dtypes: {', '.join(INPUT_DTYPES)}")
    dims_text = m.group("dims")
    if dims_text is None:
        return InputSpec(name, dtype, None)
    shape: list[int | str] = []
    if dims_text.strip():
        for d in dims_text.split(","):
            d = d.strip()
            if d.isdigit():
                shape.append(int(d))
            elif _SYMBOL.match(d):
                shape.append(d)
            else:
                raise AmandaError(f"input spec {raw!r}: dimension {d!r} is neither a size (3) nor a symbolic "
                                  "name (batch)")
    return InputSpec(name, dtype, tuple(shape))


@attrs.frozen
class Importer:
    """Reads a model into a graph.

    ``load(source, **options)`` takes a path or a live object and returns a
    graph whose namespace lies in ``namespace`` (a family or version range).
    ``framework_versions`` is the PEP 440 range of the framework release this
    importer supports (``None``: any installed).
    """

    name: str
    namespace: str
    extensions: tuple[str, ...]
    load: Callable[..., Graph]
    framework: str | None = None
    framework_versions: str | None = None
    description: str = ""
    accepts: Callable[[Any], bool] | None = None
    load_options: tuple[str, ...] = ()
    """Keyword options of ``load`` that the command line may pass: ``"inputs"`` (a list of :class:`InputSpec`,
    from ``--input``) and ``"outputs"`` (a list of output names, from ``--output``).  Formats whose files state
    their inputs and outputs (ONNX, the YAML format) take neither."""

    def handles(self, source: Any) -> bool:
        if isinstance(source, (str, os.PathLike)):
            path = os.fspath(source).lower()
            return any(path.endswith(e) for e in self.extensions)
        return self.accepts(source) if self.accepts is not None else False


@attrs.frozen
class Exporter:
    """Writes a graph to a model.

    ``save(graph, target, **options)``; ``namespace`` is the family or range
    of namespaces it can write.  Writes must be atomic: on failure no partial
    file is left (:func:`amanda_core.serialization.atomic_write`, and
    :func:`amanda_core.serialization.atomic_directory` for formats that are
    folders).  An exporter whose ``extensions`` include ``"/"`` writes
    folders (a TensorFlow SavedModel): the command line hands it an output
    path that ends in ``/`` or names an existing folder.
    """

    name: str
    namespace: str
    extensions: tuple[str, ...]
    save: Callable[..., Any]
    framework: str | None = None
    framework_versions: str | None = None
    description: str = ""
    keep_foreign: Callable[[Any, Any], Any] | None = None
    """Optional: ``keep_foreign(op, foreign)`` rewrites in place an op that ``--allow-partial`` left in another
    framework's family (``foreign``: its :class:`amanda_core.foreign.ForeignOp`; its ports already carry this
    family's value types) into an op this exporter writes, which keeps it or fails with an error naming it when
    run (:func:`amanda_core.foreign.keep_foreign_ops`).  Without it the command line refuses to write a
    partial conversion in this format."""

    @property
    def writes_directories(self) -> bool:
        """Whether this exporter writes folders (its ``extensions`` include ``"/"``)."""
        return "/" in self.extensions

    def handles_path(self, path: str | os.PathLike[str]) -> bool:
        p = os.fspath(path).lower()
        if self.writes_directories and (p.endswith(os.sep) or os.path.isdir(p)):
            return True
        return any(p.endswith(e) for e in self.extensions if e != "/")

    def handles_namespace(self, namespace: str) -> bool:
        spec = parse_spec(self.namespace)
        return spec.matches(namespace)


@attrs.frozen
class Runner:
    """Runs a graph with a framework's runtime.

    ``run(graph, inputs)`` takes a dict of numpy arrays by graph input name and returns the graph outputs in
    order (a dict by output name); ``example_inputs(graph, seed)`` makes inputs that fit the graph's input ports
    (symbolic dimensions taken as 1 unless told otherwise).  ``namespace`` is the family or range it runs.
    """

    name: str
    namespace: str
    run: Callable[..., Any]
    example_inputs: Callable[..., Any]
    framework: str | None = None
    description: str = ""
    run_each: Callable[..., Any] | None = None
    """Optional: ``run_each(graph, inputs, callback, wanted=None)`` runs the graph and calls
    ``callback(op_name, {output_port_name: array})`` for each top-level op, in topological order, as its values
    are computed (``wanted``: the names of the ops to report, None for all); the runner keeps no value after the
    callback returns, so memory stays bounded (the per-op check, ``amanda check --per-op``).  The callback may
    return True to stop the run early."""

    def handles_namespace(self, namespace: str) -> bool:
        return parse_spec(self.namespace).matches(namespace)


@attrs.frozen
class TypeInferer:
    """Fills in the value types a graph does not state, with the framework's own inference.

    ``infer(graph)`` gives a dtype to output ports that have none, where the framework can tell it, and returns
    how many it typed; it changes nothing else.  Conversions run it first, so that rules whose exactness depends
    on a value's type (an opset downgrade, say) can see the types of intermediate values.  ``namespace`` is the
    family or range it serves."""

    name: str
    namespace: str
    infer: Callable[[Graph], int]
    description: str = ""

    def handles_namespace(self, namespace: str) -> bool:
        return parse_spec(self.namespace).matches(namespace)


@attrs.frozen
class GraphPass:
    """A rewrite that runs after a mapping table, as code: what a table cannot say well (the layout pass that
    cancels and pushes the transposes a channels-last to channels-first table leaves around each op).

    ``run(graph)`` changes the graph in place and returns a one-line summary (``"104 transposes -> 1"``), shown by
    ``--explain``.  It runs after every table named in ``tables`` (a table's ``name``, or the ``part_of`` name of
    tables written in parts), in the order passes were registered; with ``before``, it runs before each of them
    instead (a structure the table's rules cannot read, rewritten into one they can: ONNX control flow whose
    branches read outer values by name becomes torch's, whose blocks take them as inputs).

    ``options`` names the keyword options ``run`` takes (``input_layout``, ``output_layout``: the layout the
    converted graph's inputs and outputs should take, ``amanda convert --input-layout``): a conversion given
    options passes each pass those it names, and a pass raises :class:`~amanda_core.errors.AmandaError` for a value
    it cannot honour."""

    name: str
    tables: tuple[str, ...]
    run: Callable[..., str]
    description: str = ""
    before: bool = False
    options: tuple[str, ...] = ()
