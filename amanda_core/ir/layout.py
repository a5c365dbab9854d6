"""Which layout a converted graph's inputs and outputs take, relative to the model it was converted from.

A layout pass may change a graph's interface: an ONNX -> TF conversion whose inputs take NHWC data where the ONNX
model took NCHW, or a TF -> ONNX one whose inputs take NCHW where Keras took NHWC.  The pass records, per input
and output name, a permutation (a list of axes, numpy's ``transpose`` order):

* input ``x`` with permutation ``p``: the converted graph takes ``transpose(data, p)`` where the source model
  took ``data`` (``[0, 2, 3, 1]``: NCHW data becomes NHWC);
* output ``y`` with permutation ``q``: ``transpose(value, q)`` is what the source model gave (``[0, 3, 1, 2]``:
  an NHWC output gives back the NCHW one).

They are kept in ``graph.attrs["amanda.input_layout"]`` and ``["amanda.output_layout"]`` (name -> ``"0,2,3,1"``);
a conversion copies them into its provenance record (``input_layout``, ``output_layout``), which every format's
exporter keeps; an ONNX model may also say them as ``metadata_props`` entries ``amanda.input_layout.<name>``.
:func:`io_layouts` reads them from all three, so that ``amanda check`` feeds each side its own layout.  A second
layout change of the same value composes with the first (the permutations stay relative to the first model).
"""

from __future__ import annotations

__all__ = ["INPUT_LAYOUT", "OUTPUT_LAYOUT", "io_layouts", "record_input_layout", "record_output_layout",
           "parse_perm", "format_perm", "layout_record"]

import json
from typing import Any, Mapping

INPUT_LAYOUT = "amanda.input_layout"
OUTPUT_LAYOUT = "amanda.output_layout"
_PROVENANCE = "amanda_provenance"
_PROVENANCE_KEY = "amanda.provenance"


def parse_perm(text: Any) -> list[int] | None:
    """``"0,2,3,1"`` (or a list of ints) as a permutation; None when it is not one."""
    if isinstance(text, str):
        try:
            perm = [int(p) for p in text.split(",")]
        except ValueError:
            return None
    elif isinstance(text, (list, tuple)) and all(isinstance(p, int) for p in text):
        perm = list(text)
    else:
        return None
    return perm if sorted(perm) == list(range(len(perm))) else None


def format_perm(perm: Any) -> str:
    return ",".join(str(int(p)) for p in perm)


def _entries(items: Any) -> list[Mapping[str, Any]]:
    return [p for p in items if isinstance(p, Mapping)] if isinstance(items, (list, tuple)) else []


def _provenance(graph: Any) -> Mapping[str, Any]:
    record = graph.attrs.get(_PROVENANCE)
    if isinstance(record, str):
        try:
            record = json.loads(record)
        except json.JSONDecodeError:
            record = None
    if isinstance(record, Mapping):
        return record
    for p in _entries(graph.attrs.get("model_metadata_props")):
        if p.get("key") == _PROVENANCE_KEY:
            try:
                parsed = json.loads(str(p.get("value")))
            except json.JSONDecodeError:
                return {}
            return parsed if isinstance(parsed, Mapping) else {}
    return {}


def _read(graph: Any, key: str, record_key: str) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    record = _provenance(graph).get(record_key)
    for name, text in (record.items() if isinstance(record, Mapping) else ()):
        perm = parse_perm(text)
        if perm is not None:
            found[str(name)] = perm
    prefix = key + "."
    for p in _entries(graph.attrs.get("model_metadata_props")):
        k = str(p.get("key") or "")
        perm = parse_perm(p.get("value")) if k.startswith(prefix) else None
        if perm is not None:
            found[k[len(prefix):]] = perm
    own = graph.attrs.get(key)
    for name, text in (own.items() if isinstance(own, Mapping) else ()):
        perm = parse_perm(text)
        if perm is not None:
            found[str(name)] = perm
    return {k: v for k, v in found.items() if v != list(range(len(v)))}


def io_layouts(graph: Any) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """The permutations of the graph's inputs and outputs (see the module's doc), by name; names without a
    layout change are absent."""
    return _read(graph, INPUT_LAYOUT, "input_layout"), _read(graph, OUTPUT_LAYOUT, "output_layout")


def record_input_layout(graph: Any, name: str, perm: Any) -> list[int]:
    """Record that input ``name`` now takes ``transpose(its former data, perm)``; composed with a layout it already
    had.  Returns the permutation recorded (relative to the first model)."""
    before = io_layouts(graph)[0].get(name)
    total = [before[p] for p in perm] if before is not None and len(before) == len(perm) else list(perm)
    _store(graph, INPUT_LAYOUT, name, total)
    return total


def record_output_layout(graph: Any, name: str, perm: Any) -> list[int]:
    """Record that ``transpose(output name, perm)`` is what the output gave before; composed with a layout it
    already had.  Returns the permutation recorded (relative to the first model)."""
    before = io_layouts(graph)[1].get(name)
    total = [perm[p] for p in before] if before is not None and len(before) == len(perm) else list(perm)
    _store(graph, OUTPUT_LAYOUT, name, total)
    return total


def _store(graph: Any, key: str, name: str, perm: list[int]) -> None:
    own = graph.attrs.get(key)
    layouts = {str(k): str(v) for k, v in own.items()} if isinstance(own, Mapping) else {}
    layouts[name] = format_perm(perm)  # (an identity stays recorded: it overrides an older record)
    graph.attrs[key] = layouts


def layout_record(graph: Any) -> dict[str, dict[str, str]]:
    """The layouts of ``graph`` as a provenance record's entries (``input_layout``, ``output_layout``), empty
    when its interface is the source model's."""
    ins, outs = io_layouts(graph)
    out: dict[str, dict[str, str]] = {}
    if ins:
        out["input_layout"] = {k: format_perm(v) for k, v in sorted(ins.items())}
    if outs:
        out["output_layout"] = {k: format_perm(v) for k, v in sorted(outs.items())}
    return out
