"""Namespaces, type systems and graph builders shared by the mapping tests."""

from __future__ import annotations

import re
from pathlib import Path

from amanda_core import Graph
from amanda_core.namespace import NamespaceRegistry, PythonTypeSystem, TypeSystem, TypeSystemRegistry, load_schema

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "examples" / "seed"
SCHEMAS = ROOT / "examples" / "schemas"


class SeedTorchDtype:
    """A TorchScript value type as examples/seed/pytorch_single_layer.yaml writes it, ``Float(1, 784)``."""

    def __init__(self, text: str) -> None:
        m = re.match(r"^(\w+)\((.*)\)$", text)
        if not m:
            raise ValueError(f"not a tensor type: {text!r}")
        self.text = text
        self._scalar = m.group(1)

    def scalarType(self) -> str:  # noqa: N802 - TorchScript's own spelling, used by examples/seed/tables
        return self._scalar

    @property
    def dtype(self) -> str:
        return {"Float": "float32", "Double": "float64", "Half": "float16", "Long": "int64"}[self._scalar]

    def __str__(self) -> str:
        return self.text


class SeedTorchTypes(TypeSystem):
    """The part of a ``torch`` type system the tables of examples/seed/tables use."""

    name = "torch"

    def parse_dtype(self, text: str) -> SeedTorchDtype:
        return SeedTorchDtype(text)


class SeedTFTypes(TypeSystem):
    name = "tf"


TOY = """
namespace_schema:
  namespace: amanda/toy/{v}
  default_type_system: python
  op_schemas:
    - type: Input
      output_ports: [y]
    - type: Const
      attrs: {{value: Any = null}}
      output_ports: [y]
    - type: Relu
      input_ports: [x]
      output_ports: [y]
    - type: Add
      commutative: [a, b]
      input_ports: [a, b]
      output_ports: [y]
    - type: Mul
      commutative: [a, b]
      input_ports: [a, b]
      output_ports: [y]
    - type: Transpose
      attrs: {{perm: "List[int]"}}
      input_ports: [x]
      output_ports: [y]
    - type: Concat
      attrs: {{axis: int}}
      input_ports: [inputs+]
      output_ports: [y]
    - type: Split
      attrs: {{axis: int = 0}}
      input_ports: [x, "split?"]
      output_ports: [outputs+]
    - type: Softmax
      attrs: {{axis: int = -1}}
      input_ports: [x]
      output_ports: [y]
    - type: Dropout
      attrs: {{ratio: float = 0.5}}
      input_ports: [x]
      output_ports: [y, "mask?"]
    - type: Block
      input_ports: [x]
      output_ports: [y]
"""

OTHER = """
namespace_schema:
  namespace: amanda/other/1
  default_type_system: python
  op_schemas:
    - type: Placeholder
      output_ports: [output]
    - type: Constant
      attrs: {value: Any}
      output_ports: [output]
    - type: ReLU
      input_ports: [features]
      output_ports: [activations]
    - type: AddV2
      input_ports: [x, y]
      output_ports: [z]
    - type: Multiply
      input_ports: [x, y]
      output_ports: [z]
    - type: Permute
      attrs: {dims: "List[int]"}
      input_ports: [input]
      output_ports: [output]
    - type: ConcatV2
      attrs: {axis: int}
      input_ports: [values+]
      output_ports: [output]
    - type: SoftmaxNCHW
      attrs: {dim: int}
      input_ports: [logits]
      output_ports: [softmax]
    - type: Identity
      input_ports: [input]
      output_ports: [output]
"""


def registry() -> NamespaceRegistry:
    reg = NamespaceRegistry(TypeSystemRegistry([PythonTypeSystem(), SeedTorchTypes(), SeedTFTypes()]))
    reg.add_schema(load_schema(SCHEMAS / "pytorch-1.4.0.yaml"))
    reg.add_schema(load_schema(SCHEMAS / "tensorflow-1.13.1.yaml"))
    for v in (1, 2):
        reg.add_schema(load_schema(TOY.format(v=v)))
    reg.add_schema(load_schema(OTHER))
    return reg


def toy_chain(ns: str = "amanda/toy/1") -> Graph:
    """x -> relu -> add(relu, c) -> out, with a constant c."""
    g = Graph(ns)
    x = g.add_input_port("x")
    relu = g.add_op("Relu", "relu", inputs=["x"], outputs=["y"])
    c = g.add_op("Const", "c", attrs={"value": 2.0}, outputs=["y"])
    add = g.add_op("Add", "add", inputs=["a", "b"], outputs=["y"])
    g.connect(x, relu.input_ports["x"])
    g.connect(relu.output_ports["y"], add.input_ports["a"])
    g.connect(c.output_ports["y"], add.input_ports["b"])
    g.connect(add.output_ports["y"], g.add_output_port("out"))
    return g
