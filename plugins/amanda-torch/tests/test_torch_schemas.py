"""The namespace amanda/pytorch/<installed>: generated from torch's operator registry."""

import json
import os
import subprocess
import sys
import warnings
from importlib.metadata import version

import pytest
import torch

from amanda_core import Graph
from amanda_core.namespace import NO_DEFAULT, match_ports, validate
from amanda_torch.schemas import FAMILY, namespace_version, overload_types
from amanda_torch.structural import EXCLUDED, NODE_ATTRIBUTES, STRUCTURAL
from amanda_torch.typeexpr import format_type, parse_schema_type

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:torch.*")

INSTALLED = namespace_version(version("torch"))
NAMESPACE = f"{FAMILY}/{INSTALLED}"


def _key(s):
    return f"{s.name}.{s.overload_name or 'default'}"


# --------------------------------------------------------------------------- naming and completeness


def test_namespace_is_the_installed_version_without_local_label(torch_registry):
    assert "+" not in INSTALLED and version("torch").startswith(INSTALLED)
    assert torch_registry.resolve(FAMILY) == NAMESPACE
    assert torch_registry.namespaces() == [(NAMESPACE, "amanda-torch")]


def test_add_tensor_spot_check(torch_schema):
    op = torch_schema["aten::add.Tensor"]
    assert [p.name for p in op.input_ports] == ["self", "other", "alpha"]
    self_, other, alpha = op.input_ports
    assert self_.type == "torch.Tensor" and not self_.optional and self_.default is NO_DEFAULT
    assert other.type == "torch.Tensor"
    assert alpha.type == "torch.Scalar" and alpha.default == 1 and alpha.optional
    assert alpha.meta["kwarg_only"] is True
    assert [(p.name, p.type) for p in op.output_ports] == [("out0", "torch.Tensor")]
    assert op.attrs == ()
    assert op.meta["schema"] == "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"


def test_every_overload_torch_registers_at_import_is_an_entry(torch_schema):
    domains = {o.domain for o in torch_schema if o.meta.get("kind") == "overload"}
    # (operators other code in this process may have registered under its own namespace are left aside)
    registered = {_key(s) for s in torch._C._jit_get_all_schemas() if s.name.split("::")[0] in domains}
    overloads = set(overload_types(torch_schema))
    assert registered <= overloads
    plain_import = {o.type for o in torch_schema if o.meta.get("kind") == "overload" and "module" not in o.meta}
    assert plain_import <= registered  # what needs no extra import is exactly what import torch registers


def test_overload_count_equals_what_torch_reports(torch_schema):
    """A fresh interpreter imports torch and the modules the namespace says register operators, then counts."""
    modules = torch_schema.meta["modules_imported"]
    assert modules and not torch_schema.meta["modules_failed"]
    code = (
        "import importlib, json, sys, warnings\n"
        "warnings.simplefilter('ignore')\n"
        "import torch\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "keys = sorted({s.name + '.' + (s.overload_name or 'default') for s in torch._C._jit_get_all_schemas()})\n"
        "names = {s.name for s in torch._C._jit_get_all_schemas()}\n"
        "print(json.dumps({'keys': keys, 'names': len(names)}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600)
    reported = json.loads(out.stdout.strip().splitlines()[-1])
    overloads = sorted(overload_types(torch_schema))
    assert overloads == reported["keys"]
    assert torch_schema.meta["overloads"] == len(reported["keys"])
    assert torch_schema.meta["operator_names"] == reported["names"]
    bare = [o for o in torch_schema if o.meta.get("kind") == "node_kind"]
    assert len(bare) == reported["names"]
    namespaces = {k.split("::")[0] for k in reported["keys"]}
    assert {"aten", "prim", "prims", "quantized"} <= namespaces
    assert namespaces == {o.domain for o in torch_schema if o.meta.get("kind") == "overload"}


_FOREIGN = {"transformers", "torchvision", "torchaudio"}
"""Operator namespaces of other distributions: the namespace describes torch only (README, "The namespace")."""


def _own_schemas() -> list:
    """torch's operator schemas, without those another library imported in this process registered."""
    return [s for s in torch._C._jit_get_all_schemas() if s.name.split("::")[0] not in _FOREIGN]


def test_ports_follow_schema_arguments_in_order(torch_schema):
    for s in _own_schemas():
        op = torch_schema[_key(s)]
        fixed = [p for p in op.input_ports if not p.variadic]
        assert [p.meta.get("schema_name", p.name) for p in fixed] == [a.name for a in s.arguments], op.type
        assert [bool(p.meta.get("kwarg_only")) for p in fixed] == [a.kwarg_only for a in s.arguments], op.type
        assert [p.default is not NO_DEFAULT for p in fixed] == [a.has_default_value() for a in s.arguments]
        outs = [p for p in op.output_ports if not p.variadic]
        assert len(outs) == len(s.returns), op.type
        for p in (*op.input_ports, *op.output_ports):
            local = p.type[len("torch."):]
            parsed, aliases = parse_schema_type(local)
            assert aliases == () and format_type(parsed) == local, (op.type, p.name, p.type)


def test_alias_annotations_and_mutability_go_to_port_meta(torch_schema):
    out = torch_schema["aten::add.out"]
    port = out.input("out")
    assert port.type == "torch.Tensor"
    assert port.meta == {"annotated_type": "Tensor(a!)", "alias": "a!", "mutable": True, "kwarg_only": True}
    assert out.output_ports[0].meta["annotated_type"] == "Tensor(a!)"
    t = torch_schema["aten::t.default"]
    assert t.input("self").meta == {"annotated_type": "Tensor(a)", "alias": "a"}
    assert "mutable" not in t.input("self").meta


def test_types_defaults_and_optionality(torch_schema):
    conv = torch_schema["aten::conv2d.default"]
    assert [(p.name, p.type, p.default) for p in conv.input_ports] == [
        ("input", "torch.Tensor", NO_DEFAULT), ("weight", "torch.Tensor", NO_DEFAULT),
        ("bias", "torch.Tensor?", None), ("stride", "torch.SymInt[2]", [1, 1]),
        ("padding", "torch.SymInt[2]", [0, 0]), ("dilation", "torch.SymInt[2]", [1, 1]),
        ("groups", "torch.SymInt", 1)]
    tri = torch_schema["aten::triu_indices.default"]
    assert tri.input("dtype").type == "torch.ScalarType?" and tri.input("dtype").default == "int64"
    contiguous = torch_schema["aten::sym_is_contiguous.default"]
    assert contiguous.input("memory_format").default == "contiguous_format"
    mx = torch_schema["aten::max.dim"]
    assert [p.name for p in mx.output_ports] == ["values", "indices"]
    dict_op = torch_schema["aten::dict.str"]
    assert dict_op.input_ports[0].type == "torch.(str, tVal)[]"
    assert dict_op.output_ports[0].type == "torch.Dict(str, tVal)"
    miopen = torch_schema["aten::miopen_convolution_add_relu.default"]
    alpha = miopen.input("alpha")
    assert alpha.type == "torch.Scalar?" and alpha.optional and alpha.default is NO_DEFAULT


def test_duplicate_argument_names_go_by_position(torch_schema):
    dup = [s for s in _own_schemas() if len({a.name for a in s.arguments}) < len(s.arguments)]
    for s in dup:
        op = torch_schema[_key(s)]
        names = [p.name for p in op.input_ports]
        assert len(set(names)) == len(names)
        renamed = [(i, p) for i, p in enumerate(op.input_ports) if "schema_name" in p.meta]
        assert renamed and all(p.name == f"in{i}" for i, p in renamed)


def test_vararg_and_varret_schemas_get_variadic_ports(torch_schema):
    fmt = torch_schema["aten::format.default"]
    assert [(p.name, p.variadic) for p in fmt.input_ports] == [("self", False), ("args", True)]
    unpack = torch_schema["prim::TupleUnpack"]
    assert [(p.name, p.variadic, p.min_count) for p in unpack.output_ports] == [("outputs", True, 0)]
    assigned, problems = match_ports(["in0", "in1", "in2"], fmt.input_ports, "in")
    assert problems == [] and assigned["in2"].name == "args"


def test_bare_names_of_the_seed_graph(torch_schema):
    for name in ("aten::matmul", "aten::t", "aten::relu"):
        op = torch_schema[name]
        assert op.meta["kind"] == "node_kind"
        assert f"{name}.default" in op.meta["overloads"]
        assert op.input_ports[0].name == "self" and op.input_ports[0].type == "torch.Tensor"
        assert op.output_ports[0].type == "torch.Tensor"
    assert torch_schema["aten::t"].meta["overloads"] == ["aten::t.default"]
    assert [p.name for p in torch_schema["aten::t"].input_ports] == ["self"]
    assert torch_schema["aten::relu"].input("out").optional  # aten::relu.out adds an optional port


def test_bare_name_with_several_overloads_accepts_any(torch_schema):
    add = torch_schema["aten::add"]
    assert set(add.meta["overloads"]) == {_key(s) for s in torch._C._jit_get_all_schemas() if s.name == "aten::add"}
    assert [p.name for p in add.input_ports] == ["in0", "in1", "alpha", "out"]  # self/a disagree at 0 and 1
    in0 = add.input_ports[0]
    assert {"Tensor", "Scalar", "int", "str", "t[]"} <= set(in0.type[len("torch."):].split(" | "))
    assert not in0.optional
    assert add.input("alpha").optional and add.input("alpha").default is NO_DEFAULT  # missing in aten::add.t
    assert add.attrs == ()


def test_structural_kinds_are_entries_with_their_reason(torch_schema):
    registered = {s.name for s in torch._C._jit_get_all_schemas()}
    kinds = [d["type"] for d in STRUCTURAL]
    assert not set(kinds) & registered
    assert not set(EXCLUDED) & registered and not set(EXCLUDED) & set(kinds)
    assert set(NODE_ATTRIBUTES) <= registered
    for kind in kinds:
        op = torch_schema[kind]
        assert op.meta["kind"] == "structural" and op.meta["reason"], kind
    assert torch_schema.meta["structural_kinds"] == len(kinds)
    assert torch_schema["prim::Constant"].attr("value").default is None
    assert torch_schema["prim::GetAttr"].attr("name").type == "torch.str"
    assert torch_schema["prim::GetAttr"].attr("name").required
    assert [a.name for a in torch_schema["prim::If"].attrs] == ["then_block", "else_block"]
    assert torch_schema["prim::ListConstruct"].input_ports[0].variadic
    for kind, (attrs, _reason) in NODE_ATTRIBUTES.items():
        for op_type in (kind, f"{kind}.default"):
            assert [a.name for a in torch_schema[op_type].attrs] == list(attrs), op_type
    for op in torch_schema:
        if op.meta.get("kind") != "structural" and op.type.split(".")[0] not in NODE_ATTRIBUTES:
            assert op.attrs == (), op.type  # a schema never turns a port into an attribute


# --------------------------------------------------------------------------- examples/seed's graph


def seed_torch_graph(namespace=NAMESPACE):
    """The PyTorch single-layer graph of examples/seed/pytorch_single_layer.yaml."""
    g = Graph(namespace)
    i = g.add_input_port("in0", "Float(1, 784)")
    o = g.add_output_port("out0")
    param = g.add_op("prim::Param", "param", outputs=[("out0", "Float(100, 784)")])
    t = g.add_op("aten::t", "t", inputs=["in0"], outputs=[("out0", "Float(784, 100)")])
    matmul = g.add_op("aten::matmul", "matmul", inputs=["in0", "in1"], outputs=[("out0", "Float(1, 100)")])
    relu = g.add_op("aten::relu", "relu", inputs=["in0"], outputs=[("out0", "Float(1, 100)")])
    g.connect(i, matmul.input_ports["in0"])
    g.connect(param.output_ports["out0"], t.input_ports["in0"])
    g.connect(t.output_ports["out0"], matmul.input_ports["in1"])
    g.connect(matmul.output_ports["out0"], relu.input_ports["in0"])
    g.connect(relu.output_ports["out0"], o)
    return g


def test_seed_pytorch_graph_validates(torch_registry):
    assert validate(seed_torch_graph(), torch_registry) == []


def test_seed_mapping_expression_reads_scalar_type(torch_registry):
    g = seed_torch_graph()
    ts = torch_registry.type_systems["torch"]
    op = g.ops["matmul"]
    assert ts.parse_dtype(op.output_ports["out0"].dtype).scalarType() == "Float"


def test_invalid_seed_variant_reports_every_problem_with_op_names(torch_registry):
    g = seed_torch_graph()
    g.add_op("aten::matmull", "typo", inputs=["in0"])                   # unknown op type
    relu = g.ops["relu"]
    relu.add_input_port("in1")
    relu.add_input_port("in2")                                          # aten::relu takes at most 2 inputs
    g.ops["t"].output_ports["out0"].dtype = "int"                       # wrong dtype kind: aten::t returns a Tensor
    g.ops["matmul"].input_ports["in1"].dtype = "Float(784, 100)"       # right kind: no problem
    problems = [str(p) for p in validate(g, torch_registry)]
    text = "\n".join(problems)
    assert "op 'typo' (aten::matmull): unknown op type 'aten::matmull'" in text
    assert "did you mean 'aten::matmul'" in text
    assert "op 'relu' (aten::relu): has input port 'in2' but the schema allows at most 2 input port(s)" in text
    assert "op 't' (aten::t): port 'out0': dtype int does not fit schema type torch.Tensor" in text
    assert len(problems) == 3, problems


def test_unparsable_dtype_and_unknown_attribute_reported(torch_registry):
    g = seed_torch_graph()
    g.ops["relu"].output_ports["out0"].dtype = "float32"
    g.ops["t"].attrs["dim"] = 0
    text = "\n".join(str(p) for p in validate(g, torch_registry))
    assert "op 'relu' (aten::relu): port 'out0': dtype 'float32' is not a TorchScript value type" in text
    assert "op 't' (aten::t): unknown attribute 'dim'" in text


def test_overload_entries_validate_named_ports(torch_registry):
    g = Graph(NAMESPACE)
    a = g.add_op("aten::add.Tensor", "add", inputs=[("self", "Float(2, 2)"), ("other", "Float(2, 2)"),
                                                    ("alpha", "int")], outputs=[("out0", "Float(2, 2)")])
    assert validate(g, torch_registry) == []
    a.input_ports["alpha"].dtype = "str"
    a.add_input_port("beta")
    text = "\n".join(str(p) for p in validate(g, torch_registry))
    assert "op 'add' (aten::add.Tensor): port 'alpha': dtype str does not fit schema type torch.Scalar" in text
    assert "op 'add' (aten::add.Tensor): unknown input port 'beta'" in text


# --------------------------------------------------------------------------- real TorchScript graphs


def _value_type(v):
    return v.type().str()  # as the graph prints it: Float(1, 784, strides=[784, 1], requires_grad=0, device=cpu)


def to_amanda(ts_graph, namespace=NAMESPACE):
    """A direct transcription of a TorchScript graph: positional ports, value types as dtypes,
    node attributes as attributes (blocks and subgraphs as graphs)."""
    g = Graph(namespace)
    produced = {}
    for i, v in enumerate(ts_graph.inputs()):
        produced[v.unique()] = g.add_input_port(f"in{i}", _value_type(v))
    for node in ts_graph.nodes():
        attrs = {}
        for a in node.attributeNames():
            kind = node.kindOf(a)
            if kind == "g":
                attrs[a] = to_amanda(node.g(a), namespace)
            elif kind == "tys":
                attrs[a] = [str(t) for t in node.tys(a)]
            elif kind in ("i", "f", "s", "is", "fs", "ss"):
                attrs[a] = getattr(node, {"is": "is_"}.get(kind, kind))(a)
            elif kind == "t":
                attrs[a] = node.t(a).detach().numpy()
            else:  # ival, c, ty: the constant's value
                attrs[a] = node.output().toIValue()
        blocks = list(node.blocks())
        if node.kind() == "prim::If":
            attrs["then_block"], attrs["else_block"] = (_block(b, namespace) for b in blocks)
        elif node.kind() == "prim::Loop":
            attrs["body"] = _block(blocks[0], namespace)
        op = g.add_op(node.kind(), inputs=len(list(node.inputs())), attrs=attrs,
                      outputs=[(f"out{i}", _value_type(v)) for i, v in enumerate(node.outputs())])
        for i, v in enumerate(node.inputs()):
            src = produced.get(v.unique())
            if src is not None:  # values from enclosing scopes are captured, not edges
                g.connect(src, op.input_ports[f"in{i}"])
        for i, v in enumerate(node.outputs()):
            produced[v.unique()] = op.output_ports[f"out{i}"]
    for i, v in enumerate(ts_graph.outputs()):
        port = g.add_output_port(f"out{i}", _value_type(v))
        if v.unique() in produced:
            g.connect(produced[v.unique()], port)
    return g


def _block(block, namespace):
    return to_amanda(block, namespace)  # a block has inputs(), nodes() and outputs() like a graph


def test_traced_seed_model_validates(torch_registry):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 100, bias=False), torch.nn.ReLU())
    traced = torch.jit.trace(model, (torch.randn(1, 784),))
    for ts_graph in (traced.graph, traced.inlined_graph):
        g = to_amanda(ts_graph)
        assert validate(g, torch_registry) == [], ts_graph
    kinds = {n.kind() for n in traced.inlined_graph.nodes()}
    assert {"aten::linear", "aten::relu", "prim::GetAttr"} <= kinds


def _fusible(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.relu(x * y + x).sigmoid()


class _Chunked(torch.nn.Module):
    def forward(self, x):
        a, b = x.chunk(2, 1)
        return (a + b, [a, b]), {"k": a}


class _Scripted(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.count = 0

    def forward(self, x: torch.Tensor, xs: list[torch.Tensor], d: dict[str, torch.Tensor],
                o: torch.Tensor | None):
        y = self.lin(x)
        if bool(y.sum() > 0):
            y = y + 1
        else:
            y = y - 1
        for i in range(3):
            y = y * i
        for t in xs:
            y = y + t
        z = [v * 2 for v in xs]
        if o is not None:
            y = y + o
        a, b, c = (y, y, y)
        fut = torch.jit.fork(torch.relu, y)
        w = torch.jit.wait(fut)
        if y.dim() > 10:
            raise ValueError("too many dims")
        self.count = self.count + 1
        with torch.no_grad():
            y = y * 1
        dd = {"a": y}
        return (y + a + b + c + w + z[0] + d["x"] + dd["a"], y.device, y.dtype)


def test_scripted_frozen_and_fused_graphs_validate(torch_registry):
    """Control flow, lists, dicts, tuples, attributes, fork, with-blocks, raise, autodiff and fusion groups."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scripted = torch.jit.script(_Scripted())
        graphs = {"graph": scripted.graph, "inlined": scripted.inlined_graph,
                  "frozen": torch.jit.freeze(scripted.eval()).graph}
        fn = torch.jit.script(_fusible)
        auto = fn.graph.copy()
        torch._C._jit_pass_create_autodiff_subgraphs(auto, 1)
        graphs["autodiff"] = auto
        unit = torch.jit.CompilationUnit(
            "def dyn(x: Any) -> int:\n"
            "    if isinstance(x, List[int]):\n"
            "        return 1\n"
            "    return 0\n")
        graphs["isinstance"] = unit.dyn.graph
        graphs["traced"] = torch.jit.trace(_Chunked(), (torch.randn(2, 4),), strict=False).graph
    seen = set()
    for name, ts_graph in graphs.items():
        g = to_amanda(ts_graph)
        problems = validate(g, torch_registry)
        assert problems == [], (name, [str(p) for p in problems])
        seen |= {op.type for op in g.walk()}
    for kind in ("prim::If", "prim::Loop", "prim::GetAttr", "prim::SetAttr", "prim::ListConstruct",
                 "prim::DictConstruct", "prim::TupleConstruct", "prim::CallMethod", "prim::fork",
                 "prim::Enter", "prim::Exit", "prim::CreateObject", "prim::RaiseException",
                 "prim::unchecked_cast", "prim::device", "prim::dtype", "prim::DifferentiableGraph",
                 "prim::Constant", "prim::isinstance", "prim::ListUnpack", "aten::chunk"):
        assert kind in seen, kind


# --------------------------------------------------------------------------- cache and CLI


def test_warm_cache_lists_and_loads_without_importing_torch(torch_schema, torch_cache_dir):
    code = (
        "import sys, time\n"
        "t0 = time.perf_counter()\n"
        "from amanda_core.plugin.manager import registry\n"
        "reg = registry().namespaces\n"
        "names = [n for n, _ in reg.namespaces()]\n"
        "t1 = time.perf_counter()\n"
        "assert 'torch' not in sys.modules, 'listing imported torch'\n"
        f"schema = reg.schema({FAMILY!r})\n"
        "t2 = time.perf_counter()\n"
        "assert 'torch' not in sys.modules, 'loading the schema imported torch'\n"
        "import json\n"
        "print(json.dumps([names, len(schema), schema['aten::add.Tensor'].input('alpha').default, t1 - t0, t2 - t1]))\n"
    )
    env = dict(os.environ, AMANDA_CACHE_DIR=torch_cache_dir, AMANDA_PLUGINS="amanda-torch")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    names, count, alpha, list_seconds, load_seconds = json.loads(out.stdout.strip().splitlines()[-1])
    assert NAMESPACE in names and count == len(torch_schema) and alpha == 1
    print(f"warm: list {list_seconds:.3f} s, load {load_seconds:.3f} s")


def test_cache_key_holds_torch_and_generator_versions(torch_schema, torch_cache_dir):
    from amanda_torch.schemas import SCHEMA_VERSION, cache_key

    key = cache_key(version("torch"))
    assert version("torch") in key and SCHEMA_VERSION in key
    assert os.path.exists(os.path.join(torch_cache_dir, key + ".json"))
    assert torch_schema.meta["torch_version"] == version("torch")


def test_cli_prints_add_tensor(torch_plugin_loaded, capsys):
    from amanda_core.cli.main import main

    assert main(["schema", "amanda/pytorch", "aten::add.Tensor"]) == 0
    out = capsys.readouterr().out
    assert "type: aten::add.Tensor" in out and "alpha" in out and "torch.Scalar" in out
    assert main(["schema", "amanda/pytorch", "aten::add.Tensr"]) == 2
    assert "aten::add.Tensor" in capsys.readouterr().err


def test_other_versions_are_refused(torch_registry):
    from amanda_core.errors import NamespaceError

    with pytest.raises(NamespaceError, match="'amanda/pytorch/1.4.0' is not registered"):
        torch_registry.schema("amanda/pytorch/1.4.0")
    provider, _ = torch_registry.providers(FAMILY)[0]
    with pytest.raises(NamespaceError, match="only the installed torch"):
        provider.schema("1.4.0")


def test_operators_registered_by_torch_modules_name_the_module(torch_schema):
    attributed = [o for o in torch_schema if o.meta.get("kind") == "overload" and "module" in o.meta]
    assert attributed
    assert {o.meta["module"] for o in attributed} <= set(torch_schema.meta["modules_imported"])
    assert any(o.domain == "quantized_decomposed" for o in attributed)


def test_structural_attributes_are_checked(torch_registry):
    g = Graph(NAMESPACE)
    obj = g.add_input_port("in0", "__torch__.M")
    get = g.add_op("prim::GetAttr", "get", inputs=["in0"], outputs=[("out0", "Tensor")], attrs={"name": 3})
    g.connect(obj, get.input_ports["in0"])
    g.add_op("prim::SetAttr", "set", inputs=["in0", "in1"])
    const = g.add_op("prim::Constant", "c", outputs=[("out0", "int")], attrs={"value": 2})
    text = "\n".join(str(p) for p in validate(g, torch_registry))
    assert "op 'get' (prim::GetAttr): attribute 'name': expected torch.str, got int 3" in text
    assert "op 'set' (prim::SetAttr): missing required attribute 'name' (torch.str)" in text
    assert "op 'c'" not in text
    const.attrs["value"] = None
    assert "op 'c'" not in "\n".join(str(p) for p in validate(g, torch_registry))


def test_yaml_round_trip_of_generated_entries(torch_schema):
    from amanda_core.namespace import NamespaceSchema, dump_schema, load_schema

    picked = [o for o in torch_schema if o.type.startswith(("aten::add", "aten::conv", "aten::isclose",
                                                            "aten::strip", "aten::triu_indices", "aten::max",
                                                            "aten::dict", "prim::"))]
    part = NamespaceSchema(torch_schema.namespace, picked, torch_schema.default_type_system)
    back = load_schema(dump_schema(part))
    assert [o.type for o in back] == [o.type for o in part]
    for o in part:
        assert back[o.type] == o, o.type
