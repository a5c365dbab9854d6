"""amanda_core.io (load_model / save_model: files, folders, factories), InputSpec, atomic folders, file modes, and
amanda check's comparison, with toy plugins (no framework)."""

import json
import os
import stat
import sys
from pathlib import Path

import numpy as np
import pytest

from amanda_core import AmandaError, Exporter, Graph, Importer, InputSpec, Runner, hookimpl, parse_input_spec
from amanda_core.cli.main import main
from amanda_core.io import load_model, save_model
from amanda_core.serialization import atomic_directory, atomic_write
from amanda_core.serialization.files import default_mode

ROOT = Path(__file__).resolve().parent.parent


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# --------------------------------------------------------------------------- InputSpec


@pytest.mark.parametrize("text, spec", [
    ("x:float32[batch,3,224,224]", InputSpec("x", "float32", ("batch", 3, 224, 224))),
    ("x:float32", InputSpec("x", "float32", None)),
    ("x:float32[]", InputSpec("x", "float32", ())),
    ("ids:int64[ 2 , seq ]", InputSpec("ids", "int64", (2, "seq"))),
    ("x", InputSpec("x", None, None)),
    ("x:0", InputSpec("x:0", None, None)),
    ("serving/x:0:bfloat16[1]", InputSpec("serving/x:0", "bfloat16", (1,))),
    ("m:bool[4]", InputSpec("m", "bool", (4,))),
    ("x:[2,3]", InputSpec("x", None, (2, 3))),
])
def test_parse_input_spec(text, spec):
    assert parse_input_spec(text) == spec
    assert parse_input_spec(str(spec)) == spec


@pytest.mark.parametrize("text, message", [
    ("x:float", "unknown dtype 'float'"),
    ("x:flaot32[1]", "did you mean float32"),
    ("x:float32[1,-1]", "dimension '-1' is neither a size"),
    ("x:float32[1", "cannot read"),
    (":float32", "no input name"),
    ("x:", "nothing after the colon"),
])
def test_bad_input_spec_is_an_error_quoting_it(text, message):
    with pytest.raises(AmandaError, match=message) as e:
        parse_input_spec(text)
    assert repr(text) in str(e.value)


# --------------------------------------------------------------------------- a toy framework


class Toy:
    """What a toy object becomes; a live model for the factory tests."""

    def __init__(self, k=2.0):
        self.k = k


def toy_graph(k=2.0, name="x"):
    g = Graph("amanda/toy/1")
    x = g.add_input_port(name, "float32")
    op = g.add_op("Scale", "s", attrs={"k": float(k)}, inputs=["x"], outputs=["y"])
    g.connect(x, op.input_ports["x"])
    g.connect(op.output_ports["y"], g.add_output_port("y", "float32"))
    return g


SEEN = {}


def _toy_load(source, **options):
    SEEN["options"] = options
    if isinstance(source, Toy):
        return toy_graph(source.k)
    path = os.fspath(source)
    if os.path.isdir(path):
        return toy_graph(float(Path(path, "k.txt").read_text()))
    return toy_graph(float(Path(path).read_text()))


def _toy_save(graph, target, **options):
    k = next(iter(graph.ops.values())).attrs["k"]
    if os.fspath(target).endswith((".toy",)):
        with atomic_write(target) as f:
            f.write(str(k))
        return None
    with atomic_directory(target) as tmp:
        Path(tmp, "k.txt").write_text(str(k))
        if k < 0:
            raise ValueError("negative k")
    return None


def _toy_run(graph, inputs):
    k = next(iter(graph.ops.values())).attrs["k"]
    return {"y": (np.asarray(inputs[graph.input_ports.names()[0]]) * k).astype(np.float32)}


def _toy_inputs(graph, seed=0, dims=None):
    rng = np.random.default_rng(seed)
    n = int((dims or {}).get("n", 2))
    return {p.name: rng.standard_normal((n, 3)).astype(np.float32) for p in graph.input_ports}


def _is_toy_dir(source):
    return isinstance(source, Toy) or (isinstance(source, (str, os.PathLike)) and os.path.isdir(source)
                                       and os.path.exists(os.path.join(source, "k.txt")))


class ToyPlugin:
    @hookimpl
    def amanda_importers(self):
        return [Importer("toy", "amanda/toy", (".toy",), _toy_load, framework="toy", accepts=_is_toy_dir,
                         load_options=("inputs", "outputs"))]

    @hookimpl
    def amanda_exporters(self):
        return [Exporter("toy", "amanda/toy", (".toy", "/"), _toy_save, framework="toy")]

    @hookimpl
    def amanda_runners(self):
        return [Runner("toyrun", "amanda/toy", _toy_run, _toy_inputs)]


class FileOnlyPlugin:
    @hookimpl
    def amanda_importers(self):
        return [Importer("plain", "amanda/plain", (".plain",), _toy_load, framework="plain")]

    @hookimpl
    def amanda_exporters(self):
        return [Exporter("plain", "amanda/toy", (".plain",), _toy_save, framework="plain")]


@pytest.fixture
def toy(amanda_isolated):
    SEEN.clear()
    amanda_isolated(ToyPlugin(), "toy")


# --------------------------------------------------------------------------- load_model


def test_load_file_folder_and_options(tmp_path, toy):
    f = tmp_path / "m.toy"
    f.write_text("3.0")
    assert load_model(str(f)).ops["s"].attrs["k"] == 3.0
    assert SEEN["options"] == {}  # options only when given
    load_model(str(f), inputs=[parse_input_spec("x:float32[n,3]")], outputs=["y"])
    assert SEEN["options"] == {"inputs": [InputSpec("x", "float32", ("n", 3))], "outputs": ["y"]}
    d = tmp_path / "saved"
    d.mkdir()
    (d / "k.txt").write_text("5.0")
    assert load_model(str(d)).ops["s"].attrs["k"] == 5.0


def test_formats_that_state_their_inputs_take_no_input_option(tmp_path, toy, amanda_isolated):
    amanda_isolated(FileOnlyPlugin(), "plain")
    f = tmp_path / "m.plain"
    f.write_text("1.0")
    with pytest.raises(AmandaError, match=r"m.plain: plain models state their own inputs; this format takes no "
                                          r"--input"):
        load_model(str(f), inputs=[InputSpec("x")])
    y = tmp_path / "g.yaml"
    save_model(toy_graph(), str(y))
    with pytest.raises(AmandaError, match="YAML graphs state their own outputs; this format takes no --output"):
        load_model(str(y), outputs=["y"])
    assert load_model(str(y), outputs=["y"], lenient=True).namespace == "amanda/toy/1"


def test_folder_nobody_reads(tmp_path, toy):
    with pytest.raises(AmandaError, match="is a folder, and no installed importer reads it"):
        load_model(str(tmp_path))


FACTORY_MODULE = '''
from tests.test_cli_io import Toy

def make():
    return Toy(7.0)

def broken():
    raise ValueError("no weights here")

def other():
    return 42

NOT_CALLABLE = 3
'''


@pytest.fixture
def factory_dir(tmp_path, monkeypatch):
    (tmp_path / "toyfactory.py").write_text(FACTORY_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    yield tmp_path
    sys.modules.pop("toyfactory", None)


def test_factory_reference_loads_the_returned_object(factory_dir, toy, capsys):
    assert load_model("toyfactory:make").ops["s"].attrs["k"] == 7.0
    rc, out, err = run(capsys, "inspect", "toyfactory:make", "--json")
    assert rc == 0 and json.loads(out)["namespace"] == "amanda/toy/1"


@pytest.mark.parametrize("ref, message", [
    ("nosuchmodule_xyz:make",
     "nosuchmodule_xyz:make: no module named 'nosuchmodule_xyz' .*add that folder to PYTHONPATH"),
    ("toyfactory:nothing", "toyfactory:nothing: module toyfactory .* has no attribute 'nothing'"),
    ("toyfactory:broken", r"toyfactory:broken: the factory broken\(\) raised ValueError: no weights here"),
    ("toyfactory:other", "toyfactory:other: returned a builtins.int, which no installed importer accepts"),
    ("toyfactory:NOT_CALLABLE", "NOT_CALLABLE is a int, not a function or class to call"),
])
def test_factory_errors_are_one_line(factory_dir, toy, capsys, ref, message):
    with pytest.raises(AmandaError, match=message):
        load_model(ref)
    rc, _, err = run(capsys, "inspect", ref)
    assert rc == 2 and err.count("\n") == 1 and err.startswith("amanda: error: ")


# --------------------------------------------------------------------------- save_model, folders, modes


def test_save_to_a_folder_atomically(tmp_path, toy):
    out = tmp_path / "out" / "model"
    (tmp_path / "out").mkdir()
    save_model(toy_graph(4.0), str(out) + "/")
    assert (out / "k.txt").read_text() == "4.0"
    assert stat.S_IMODE(os.stat(out).st_mode) == default_mode(directory=True)
    save_model(toy_graph(6.0), str(out))  # an existing model folder is replaced
    assert (out / "k.txt").read_text() == "6.0"
    with pytest.raises(ValueError):
        save_model(toy_graph(-1.0), str(out))
    assert (out / "k.txt").read_text() == "6.0"  # the failed write left the folder as it was
    assert sorted(os.listdir(tmp_path / "out")) == ["model"]  # and no temporary folder


def test_a_folder_holding_other_files_is_not_replaced(tmp_path, toy):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(AmandaError, match="holds other files and no model; name a new folder"):
        save_model(toy_graph(), str(tmp_path))
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_atomic_directory_removes_the_temporary_folder_on_failure(tmp_path):
    with pytest.raises(RuntimeError):
        with atomic_directory(tmp_path / "m") as tmp:
            Path(tmp, "a").write_text("x")
            raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []


def test_written_files_get_the_mode_open_would_give(tmp_path, toy):
    old = os.umask(0o022)
    try:
        save_model(toy_graph(), str(tmp_path / "g.yaml"))
        save_model(toy_graph(), str(tmp_path / "m.toy"))
        os.umask(0o027)
        save_model(toy_graph(), str(tmp_path / "h.yaml"))
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "g.yaml").st_mode) == 0o644
    assert stat.S_IMODE(os.stat(tmp_path / "m.toy").st_mode) == 0o644
    assert stat.S_IMODE(os.stat(tmp_path / "h.yaml").st_mode) == 0o640


# --------------------------------------------------------------------------- check


def _toy_file(path, k):
    path.write_text(str(k))
    return str(path)


def test_check_reports_differences_and_tolerances(tmp_path, toy, capsys):
    a, b = _toy_file(tmp_path / "a.toy", 2.0), _toy_file(tmp_path / "b.toy", 2.001)
    rc, out, _ = run(capsys, "check", a, b)
    assert rc == 1
    assert "max abs diff" in out and "of the largest reference value" in out and "tolerance rtol 1e-05, atol 1e-05" \
        in out and "outputs differ" in out
    rc, out, _ = run(capsys, "check", a, b, "--rtol", "1e-3", "--json")
    data = json.loads(out)
    assert rc == 0 and data["match"] and 0.00049 < data["outputs"][0]["max_rel_diff"] < 0.00051


def test_check_feeds_given_inputs(tmp_path, toy, capsys):
    a, b = _toy_file(tmp_path / "a.toy", 2.0), _toy_file(tmp_path / "b.toy", 2.0)
    np.save(tmp_path / "x.npy", np.ones((5, 3), np.float32))
    rc, out, _ = run(capsys, "check", a, b, "--input-data", f"x={tmp_path / 'x.npy'}", "--json")
    data = json.loads(out)
    assert rc == 0 and data["inputs"] == {"x": [5, 3]} and data["given_inputs"] == ["x"]
    np.savez(tmp_path / "in.npz", x=np.ones((1, 3), np.float32))
    rc, out, _ = run(capsys, "check", a, b, "--input-data", str(tmp_path / "in.npz"), "--json")
    assert rc == 0 and json.loads(out)["inputs"] == {"x": [1, 3]}
    rc, _, err = run(capsys, "check", a, b, "--input-data", f"z={tmp_path / 'x.npy'}")
    assert rc == 2 and "'z', which reference" in err and "its inputs: x" in err
    rc, _, err = run(capsys, "check", a, b, "--input-data", str(tmp_path / "x.npy"))
    assert rc == 2 and "a .npy file holds one array: write NAME=" in err


def test_convert_check_runs_the_comparison_after_writing(tmp_path, toy, capsys):
    a = _toy_file(tmp_path / "a.toy", 2.0)
    rc, out, err = run(capsys, "convert", a, "-o", str(tmp_path / "b.toy"), "--check", "--dim", "n=4")
    assert rc == 0, err
    assert "wrote" in out and "same outputs" in out and "x: float32[4, 3]" in out


# --------------------------------------------------------------------------- 16. first schema generation


class SlowNamespaces:
    """A provider that takes a moment to build its schema, as a framework's registry does on a cold cache."""

    @hookimpl
    def amanda_namespaces(self):
        import time

        from amanda_core.namespace import StaticNamespaces
        from amanda_core.namespace.schema import NamespaceSchema

        class Slow(StaticNamespaces):
            def schema(self, version):
                time.sleep(1.3)
                return super().schema(version)

        return [Slow([NamespaceSchema("amanda/slow/1")])]


def test_16_slow_schema_generation_says_so(capsys, amanda_isolated):
    amanda_isolated(SlowNamespaces(), "slow")
    rc, out, err = run(capsys, "schema", "amanda/slow")
    assert rc == 0 and "namespace: amanda/slow/1" in out
    assert "amanda: generating the schema of amanda/slow/1 from the installed framework (first use" in err


def test_16_the_command_quiets_tensorflow_logs():
    import subprocess

    code = ("import os, sys; sys.argv = [os.path.join(os.path.dirname(sys.executable), 'amanda'), 'namespaces']\n"
            "os.environ.pop('TF_CPP_MIN_LOG_LEVEL', None)\n"
            "from amanda_core.cli.main import main\n"
            "main(['namespaces']); print('level', os.environ.get('TF_CPP_MIN_LOG_LEVEL'))")
    env = {**os.environ, "AMANDA_DISABLE_PLUGIN_AUTOLOAD": "1"}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert p.returncode == 0 and p.stdout.strip().endswith("level 2"), p.stderr


def test_a_python_file_names_the_module_classes_it_defines(tmp_path: Path) -> None:
    """A module written by Amanda (or anyone) defining an nn.Module: the message names ``stem:Class`` to give;
    a file with none gets the general advice."""
    made = tmp_path / "k.py"
    made.write_text("import torch\nfrom torch import nn\n\n\nclass Model(torch.nn.Module):\n    pass\n\n\n"
                    "class Head(nn.Module):\n    pass\n\n\nclass Plain:\n    pass\n")
    with pytest.raises(AmandaError) as err:
        load_model(str(made))
    assert f"it defines k:Model or k:Head: name that as the model (run from {tmp_path}" in str(err.value)
    plain = tmp_path / "helpers.py"
    plain.write_text("def make():\n    return 1\n")
    with pytest.raises(AmandaError, match="name its factory as MODULE:FUNCTION"):
        load_model(str(plain))


def test_the_default_tolerance_holds_the_float32_noise_of_a_deep_network_and_no_more():
    """Two runtimes' float32 sums of hundreds of products differ by a few 1e-6 on values of order 1 (a correct
    ResNet read from torch.onnx's file differs from onnxruntime by 5e-6 where ReLU leaves a value near 0): the
    default (torch.testing's for float32) passes that, and the command line uses the same default."""
    import inspect

    from amanda_core import check
    from amanda_core.cli.main import build_parser

    params = inspect.signature(check.compare_graphs).parameters
    rtol, atol = params["rtol"].default, params["atol"].default
    args = build_parser().parse_args(["check", "a.onnx", "b.pt2"])
    assert (args.rtol, args.atol) == (rtol, atol)
    ref = np.array([0.0, 5.2, -3.1, 1e-7], np.float32)
    noise = ref + np.array([5e-6, 4e-6, -6e-6, 5e-6], np.float32)
    assert check._compare("y", ref, "y", noise, rtol, atol, False).match
    wrong = ref + np.array([3e-5, 0.0, 0.0, 0.0], np.float32)  # a value near 0 off by 3e-5
    assert not check._compare("y", ref, "y", wrong, rtol, atol, False).match
    assert not check._compare("y", ref, "y", ref * np.float32(1.0001), rtol, atol, False).match


def test_a_difference_of_rounding_size_is_named_with_the_tolerance_that_accepts_it():
    """Outputs that differ by no more than float32 rounding reaches through a deep network (a random-weight
    MobileNetV2 differs from onnxruntime by 1.8e-5 of its largest value, torch.onnx's own file too) still fail the
    check, which says so and what --atol accepts them; a larger difference, or an --exact check, gets no note."""
    from amanda_core.check import CheckReport, OutputComparison

    def report(rows, tolerance="rtol 1e-05, atol 1e-05"):
        return CheckReport("a.onnx", "b.pt2", "onnxruntime", "torch", 0, {"x": ("float32", [1, 3])}, [], rows,
                           tolerance)

    def row(name, dtype, abs_diff, rel_diff, match=False):
        return OutputComparison(name, name, [1, 3], dtype, match, max_abs_diff=abs_diff, max_rel_diff=rel_diff,
                                tolerance="rtol 1e-05, atol 1e-05")

    noisy = report([row("a", "float32", 1.1e-4, 1.84e-5), row("b", "float32", 4.4e-5, 8.8e-6),
                    row("c", "float32", 1e-7, 1e-8, match=True)])
    lines = noisy.lines()
    assert lines[-2].startswith("outputs differ") and "at most 1.84e-05 of its output's largest value" in lines[-1]
    assert "--atol 0.00012 accepts them" in lines[-1]
    assert noisy.to_json()["note"] == lines[-1].strip()
    assert report([row("a", "float32", 1e-2, 3e-3)]).rounding_note() is None  # beyond rounding
    assert report([row("a", "float16", 1e-3, 3e-3)]).rounding_note() is not None  # float16 rounds coarser
    assert report([row("a", "int64", 1.0, 1e-6)]).rounding_note() is None
    assert report([row("a", "float32", 1e-5, 1e-6)], "bit for bit").rounding_note() is None
    assert report([row("a", "float32", 0.0, 0.0, match=True)]).rounding_note() is None
