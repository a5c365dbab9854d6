"""Reading and writing models by what the command line names: a file, a folder, or a Python factory.

:func:`load_model` reads

* a YAML graph (``.yaml``/``.yml``, Amanda's own text format);
* a file whose extension an importer lists (``.onnx``, ``.pt2``, ``.keras`` ...);
* a folder an importer ``accepts`` (a TensorFlow SavedModel);
* ``pkg.module:factory`` (a dotted module path, a colon and a callable's name, which is not an existing path):
  the module is imported with the current directory first on ``sys.path`` (as ``python -m`` does), the factory
  is called with no arguments and the object it returns goes to the first importer that ``accepts`` it (a live
  ``torch.nn.Module``, a Keras model ...).  The factory is code the command line names, so it is trusted and run,
  like the expressions of a table given with ``--trust-expressions``: name only factories you would run yourself.

:func:`save_model` writes a YAML graph, any file an exporter's extension names, or a folder (for an exporter whose
``extensions`` include ``"/"``: an output path ending in ``/``, an existing folder, or ``.savedmodel``).

Both raise :class:`AmandaError` with a one-line message naming the file (or factory) for every problem a user can
cause.  Framework-specific options (``inputs=``, ``outputs=``) are passed to an importer only when given, and only
to importers that list them in :attr:`Importer.load_options`.
"""

from __future__ import annotations

__all__ = ["load_model", "save_model", "importer_for", "is_factory_reference", "describe_importers",
           "describe_exporters", "check_output_path", "YAML_EXTENSIONS"]

import importlib
import importlib.util
import os
import re
import sys
from typing import Any, Sequence

from .errors import AmandaError
from .ir.graph import Graph
from .plugin.types import Exporter, Importer, InputSpec

YAML_EXTENSIONS = (".yaml", ".yml")

_FACTORY = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")

# Well-known model files, to say which framework a file belongs to when no installed importer reads it.
_KNOWN_FILES = {
    ".onnx": ("onnx", "ONNX", "amanda-onnx"),
    ".pt": ("torch", "PyTorch", "amanda-torch"), ".pth": ("torch", "PyTorch", "amanda-torch"),
    ".pt2": ("torch", "PyTorch", "amanda-torch"), ".ptl": ("torch", "PyTorch", "amanda-torch"),
    ".pb": ("tensorflow", "TensorFlow", "amanda-tf"), ".keras": ("tensorflow", "TensorFlow", "amanda-tf"),
    ".h5": ("tensorflow", "TensorFlow (Keras)", "amanda-tf"),
    ".hdf5": ("tensorflow", "TensorFlow (Keras)", "amanda-tf"),
    ".tflite": ("tensorflow", "TensorFlow Lite", "amanda-tf"),
    ".savedmodel": ("tensorflow", "TensorFlow", "amanda-tf"),
    ".py": ("torch", "PyTorch", "amanda-torch"),
}


def _registry() -> Any:
    from .plugin.manager import registry

    return registry()


def is_factory_reference(source: str) -> bool:
    """Whether ``source`` reads as ``pkg.module:factory`` and names no existing path."""
    return bool(_FACTORY.match(source)) and not os.path.exists(source)


def _ext(path: str) -> str:
    base = os.path.basename(path.rstrip("/" + os.sep)).lower()
    _, dot, ext = base.rpartition(".")
    return "." + ext if dot else ""


def _importer_reads(imp: Importer) -> str:
    exts = ", ".join(imp.extensions) if imp.extensions else "no files by extension"
    return f"{imp.name} ({exts}{'; ' + imp.description if imp.description else ''})"


def describe_importers(reg: Any = None) -> str:
    """``onnx (.onnx; ...), tensorflow (...)``: what the installed importers read, for messages."""
    reg = reg or _registry()
    items = [_importer_reads(i) for i, _ in reg.importers]
    return "; ".join(["yaml (.yaml, .yml; Amanda's text format)"] + items)


def describe_exporters(reg: Any = None) -> str:
    reg = reg or _registry()
    items = []
    for e, _ in reg.exporters:
        exts = ", ".join("folders" if x == "/" else x for x in e.extensions)
        items.append(f"{e.name} ({exts})")
    return ", ".join(["yaml (.yaml, .yml)"] + items)


def _plugin_of_framework(reg: Any, framework: str, kind: str) -> list[tuple[Any, str]]:
    rows = reg.importers if kind == "importer" else reg.exporters
    return [(x, p) for x, p in rows if (x.framework or x.name) == framework
            or (framework == "torch" and (x.framework or "").startswith("torch"))]


def _module_classes(path: str) -> list[str]:
    """The top-level classes of a Python file that derive from a ``Module`` (``torch.nn.Module``, ``nn.Module``),
    read without running it (a module Amanda wrote from a graph defines one); none when it does not parse."""
    import ast

    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return []
    found = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and any(
                (b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "")) == "Module" for b in node.bases):
            found.append(node.name)
    return found


def load_python_module(path: str) -> Any:
    """The model a Python module file defines (one top-level ``Module`` class, made with no arguments, as the
    module Amanda writes from a graph defines it), imported from that file (its weights beside it).  For a file
    the user just had written (``amanda convert ... -o model.py --check``); a path given as a model elsewhere is
    refused (:func:`load_model`), since naming code to run is the user's call."""
    classes = _module_classes(path)
    if len(classes) != 1:
        raise AmandaError(f"{path}: defines {len(classes)} Module classes ({', '.join(classes) or 'none'}), not one "
                          "to run")
    spec = importlib.util.spec_from_file_location(f"_amanda_written_{abs(hash(os.path.abspath(path)))}", path)
    if spec is None or spec.loader is None:
        raise AmandaError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        return getattr(module, classes[0])()
    except Exception as e:
        raise AmandaError(f"{path}: making {classes[0]}() raised {type(e).__name__}: {_one_line(e)}") from None


def _no_importer(path: str, reg: Any, folder: bool = False) -> AmandaError:
    ext = _ext(path)
    known = _KNOWN_FILES.get(".savedmodel" if folder and os.path.exists(os.path.join(path, "saved_model.pb"))
                             else ext)
    if folder:
        what = "a folder"
        if known is None:
            readers = [i.name for i, _ in reg.importers if i.accepts is not None]
            which = f"importers that read folders: {', '.join(readers)}" if readers else "none reads folders"
            return AmandaError(f"{path}: is a folder, and no installed importer reads it ({which}); give a model "
                               "file")
    else:
        what = f"{ext} files" if ext else "files without an extension"
    if ext == ".py" and not folder:
        stem = os.path.splitext(os.path.basename(path))[0]
        folder_of = os.path.dirname(path) or "."
        classes = _module_classes(path)
        if classes:
            names = " or ".join(f"{stem}:{c}" for c in classes)
            return AmandaError(f"{path}: a Python file is not a model; it defines {names}: name that as the model "
                               f"(run from {folder_of}, or with it on PYTHONPATH)")
        return AmandaError(f"{path}: a Python file is not a model; to convert the model it builds, name its "
                           "factory as MODULE:FUNCTION (e.g. mymodels:make_net, run from the folder that holds "
                           "mymodels.py)")
    if known is not None:
        framework, label, dist = known
        installed = _plugin_of_framework(reg, framework, "importer")
        if installed:
            imp, plugin = installed[0]
            return AmandaError(f"{path}: {label} {what} are not read by the installed {plugin} plugin, which reads "
                               f"{_importer_reads(imp)}")
        return AmandaError(f"{path}: a {label} model; no installed plugin reads {what} "
                           f"(install {dist}: pip install -e plugins/{dist} from the checkout)")
    return AmandaError(f"{path}: no installed importer reads {what}; importers: {describe_importers(reg)}")


def importer_for(source: Any, reg: Any = None) -> Importer | None:
    """The importer that reads ``source`` (a path or a live object); None for a YAML file.  Raises a one-line
    AmandaError when there is none."""
    reg = reg or _registry()
    if not isinstance(source, (str, os.PathLike)):
        for imp, _ in reg.importers:
            if imp.accepts is not None and _accepts(imp, source):
                return imp
        kind = f"{type(source).__module__}.{type(source).__qualname__}"
        raise AmandaError(f"no installed importer accepts an object of type {kind}; importers: "
                          f"{describe_importers(reg)}")
    path = os.fspath(source)
    if os.path.isdir(path):
        for imp, _ in reg.importers:
            if imp.accepts is not None and _accepts(imp, path):
                return imp
        raise _no_importer(path, reg, folder=True)
    if path.lower().endswith(YAML_EXTENSIONS):
        return None
    for imp, _ in reg.importers:
        if imp.handles(path):
            return imp
    raise _no_importer(path, reg)


def _accepts(imp: Importer, source: Any) -> bool:
    try:
        return bool(imp.accepts(source)) if imp.accepts is not None else False
    except Exception:  # an importer that cannot tell is not the one
        return False


def _options(where: str, what: str, imp: Importer | None, inputs: Sequence[InputSpec] | None,
             outputs: Sequence[str] | None, lenient: bool, signature: str | None = None) -> dict[str, Any]:
    options: dict[str, Any] = {}
    takes = set(imp.load_options) if imp is not None else set()
    for key, value, flag in (("inputs", inputs, "--input"), ("outputs", outputs, "--output"),
                             ("signature", signature, "--signature")):
        if value is None:
            continue
        if key not in takes:
            if lenient:
                continue
            if key == "signature":
                raise AmandaError(f"{where}: {what} have no signatures to choose from; --signature names one of "
                                  "a SavedModel's")
            raise AmandaError(f"{where}: {what} state their own {key}; this format takes no {flag}")
        options[key] = value if isinstance(value, str) else list(value)
    return options


def require_source(path: str) -> None:
    """Raise the error :func:`load_model` gives for ``path`` when it names neither a file or folder that exists
    nor ``pkg.module:factory``."""
    if os.path.exists(path) or _FACTORY.match(path):
        return
    parent = os.path.dirname(path.rstrip("/" + os.sep))
    if parent and not os.path.isdir(parent):
        raise AmandaError(f"{path}: no such file (the folder {parent} does not exist)")
    raise AmandaError(f"{path}: no such file or folder")


def load_model(source: Any, *, inputs: Sequence[InputSpec] | None = None, outputs: Sequence[str] | None = None,
               warnings: list[str] | None = None, lenient: bool = False, signature: str | None = None) -> Graph:
    """Read a graph from a YAML file, a model file or folder a plugin imports, ``pkg.module:factory``, or a live
    object an importer accepts.

    ``inputs`` / ``outputs`` (``--input`` / ``--output``) go to the importer's ``load`` only when given; a format
    that takes none of them is an error (``lenient=True``: they are left out silently, as ``amanda check`` does for
    the one of its two models that states its own).  ``signature`` (``--signature``) goes likewise to an
    importer that lists it (a SavedModel's signature).  ``warnings`` collects what the YAML reader noticed."""
    reg = None
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not os.path.exists(path):
            require_source(path)
            _options(path, "programs defined in code", None, None, None, lenient, signature)
            return _load_factory(path, inputs, outputs, lenient)
        if path.lower().endswith(YAML_EXTENSIONS) and not os.path.isdir(path):
            _options(path, "YAML graphs", None, inputs, outputs, lenient, signature)
            from .serialization.graph_yaml import load_graph

            return load_graph(path, warnings=warnings)
        reg = _registry()
        imp = importer_for(path, reg)
        assert imp is not None
        options = _options(path, f"{imp.name} models", imp, inputs, outputs, lenient, signature)
        return _checked(imp.load(path, **options), path, imp)
    reg = _registry()
    imp = importer_for(source, reg)
    assert imp is not None
    options = _options(type(source).__name__, f"{imp.name} models", imp, inputs, outputs, lenient, signature)
    return _checked(imp.load(source, **options), type(source).__name__, imp)


def _checked(graph: Any, where: str, imp: Importer) -> Graph:
    if not isinstance(graph, Graph):
        raise AmandaError(f"{where}: importer {imp.name!r} returned {type(graph).__name__}, not a graph")
    return graph


def _load_factory(ref: str, inputs: Sequence[InputSpec] | None, outputs: Sequence[str] | None,
                  lenient: bool) -> Graph:
    """``pkg.module:factory``: import, call, and hand the object to the importer that accepts it."""
    module_name, _, attr = ref.partition(":")
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)  # as python -m does: modules beside the user come first
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        missing = e.name or module_name
        if module_name == missing or module_name.startswith(missing + "."):
            raise AmandaError(f"{ref}: no module named {missing!r} (looked in the current folder and the "
                              "installed packages: run from the folder that holds it, or add that folder to "
                              "PYTHONPATH), and no file or folder of that name exists") from None
        raise AmandaError(f"{ref}: importing {module_name} failed: it imports {missing!r}, which is not "
                          "installed") from None
    except AmandaError:
        raise
    except Exception as e:
        raise AmandaError(f"{ref}: importing {module_name} raised {type(e).__name__}: {_one_line(e)}") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise AmandaError(f"{ref}: module {module_name} ({getattr(module, '__file__', None) or 'built-in'}) "
                              f"has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise AmandaError(f"{ref}: {attr} is a {type(obj).__name__}, not a function or class to call")
    try:
        model = obj()
    except AmandaError:
        raise
    except Exception as e:
        raise AmandaError(f"{ref}: the factory {attr}() raised {type(e).__name__}: {_one_line(e)}") from None
    reg = _registry()
    imp = None
    for candidate, _ in reg.importers:
        if candidate.accepts is not None and _accepts(candidate, model):
            imp = candidate
            break
    if imp is None:
        kind = f"{type(model).__module__}.{type(model).__qualname__}"
        raise AmandaError(f"{ref}: returned a {kind}, which no installed importer accepts; importers: "
                          f"{describe_importers(reg)}")
    options = _options(ref, f"{imp.name} models", imp, inputs, outputs, lenient)
    return _checked(imp.load(model, **options), ref, imp)


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else "(no message)"


# --------------------------------------------------------------------------- writing


def _is_folder_path(path: str) -> bool:
    """``path`` names a folder: it ends in ``/``, is one, or is a new folder (:func:`_names_new_folder`)."""
    return path.endswith(("/", os.sep)) or os.path.isdir(path) or _names_new_folder(path)


def _names_new_folder(path: str) -> bool:
    """``path`` is new and has no extension, and so names a folder (``-o saved_model``, as TensorFlow's own
    ``save`` takes it)."""
    return not path.endswith(("/", os.sep)) and _ext(path) == "" and not os.path.lexists(path)


def _exporters_for(path: str, reg: Any) -> list[Exporter]:
    if _is_folder_path(path):
        return [e for e, _ in reg.exporters if e.writes_directories]
    return [e for e, _ in reg.exporters if e.handles_path(path)]


def check_output_path(path: str, reg: Any = None) -> None:
    """Raise a one-line AmandaError, before any work is done, when ``path`` cannot be written: its folder is
    missing, it is a folder no exporter writes, or no exporter writes its kind of file."""
    from .serialization.files import check_parent_dir

    check_parent_dir(path)
    if path.lower().endswith(YAML_EXTENSIONS) and not os.path.isdir(path):
        return
    reg = reg or _registry()
    if _exporters_for(path, reg):
        if os.path.isdir(path) and os.listdir(path) and not _holds_a_model(path, reg):
            raise AmandaError(f"{path}: is a folder that holds other files and no model; name a new folder "
                              f"(e.g. {os.path.join(path.rstrip('/' + os.sep), 'model')}/) so that nothing in it "
                              "is replaced")
        return
    if _is_folder_path(path):
        what = "is a folder" if os.path.isdir(path) else \
            "names a new folder (it has no extension)" if _names_new_folder(path) else "names a folder (it ends in /)"
        raise AmandaError(f"{path}: {what}, and no installed exporter writes folders; give a file name "
                          f"(e.g. {os.path.join(path.rstrip('/' + os.sep), 'model.onnx')}); exporters: "
                          f"{describe_exporters(reg)}")
    ext = _ext(path)
    known = _KNOWN_FILES.get(ext)
    if known is not None:
        framework, label, dist = known
        installed = [(e, p) for e, p in _plugin_of_framework(reg, framework, "exporter")]
        if installed:
            exp, plugin = installed[0]
            writes = ", ".join("folders" if x == "/" else x for x in exp.extensions)
            raise AmandaError(f"{path}: the installed {plugin} plugin does not write {ext} files; it writes {writes}")
        raise AmandaError(f"{path}: {label} files are written by {dist}, which is not installed "
                          f"(pip install -e plugins/{dist} from the checkout)")
    raise AmandaError(f"{path}: no installed exporter writes {ext + ' files' if ext else 'files without an extension'}"
                      f"; exporters: {describe_exporters(reg)}")


def _holds_a_model(path: str, reg: Any) -> bool:
    return any(i.accepts is not None and _accepts(i, path) for i, _ in reg.importers)


def save_model(graph: Graph, path: str | os.PathLike[str]) -> list[str]:
    """Write a graph as YAML, in any format a plugin exports (chosen by the file extension), or as a folder;
    atomic.  Returns the paths written."""
    path = os.fspath(path)
    check_output_path(path)
    if path.lower().endswith(YAML_EXTENSIONS) and not os.path.isdir(path):
        from .serialization.graph_yaml import save_graph

        return save_graph(graph, path)
    reg = _registry()
    candidates = _exporters_for(path, reg)
    ns = graph.namespace or ""
    for exporter in candidates:
        if ns and exporter.handles_namespace(ns):
            written = exporter.save(graph, path)
            if isinstance(written, (list, tuple)) and written and all(isinstance(w, str) for w in written):
                return list(written)
            return [path]
    kind = "folders (a new path without an extension names one)" if _names_new_folder(path) else \
        "folders" if _is_folder_path(path) else f"{_ext(path)} files"
    names = ", ".join(f"{e.name} writes {e.namespace}" for e in candidates)
    fits = sorted({x for e, _ in reg.exporters if ns and e.handles_namespace(ns) for x in e.extensions if x != "/"})
    pick = f"name a {' or '.join(fits)} file" if fits else "pick an output format for its namespace"
    raise AmandaError(f"{path}: the graph is in {ns or 'no namespace'}, and the exporters of {kind} write other "
                      f"namespaces ({names}); convert it with --to {candidates[0].namespace}, or {pick}")
