"""Hook specifications: what a plugin may register.

A plugin is any object or module with functions marked ``@hookimpl`` whose
names are the hooks below.  Each hook returns a list of things to register;
every registered thing says which framework versions it serves.  A
distribution makes its plugin known through the entry-point group ``amanda``::

    [project.entry-points.amanda]
    amanda-onnx = "amanda_onnx.plugin"
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import pluggy

if TYPE_CHECKING:
    from ..namespace.registry import NamespaceProvider
    from ..namespace.types import TypeSystem
    from .types import Exporter, GraphPass, Importer, Runner, TypeInferer

PROJECT = "amanda"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def amanda_type_systems() -> Sequence[TypeSystem]:
    """Type systems this plugin defines (``onnx``, ``tf``, ``torch`` ...).

    Namespace schemas name their attribute and port types in these systems.
    """


@hookspec
def amanda_namespaces() -> Sequence[NamespaceProvider]:
    """Namespace providers: each serves one family (``amanda/onnx``) and lists
    the versions it can give a schema for.  Listing must be cheap; schemas are
    built on demand."""


@hookspec
def amanda_importers() -> Sequence[Importer]:
    """Importers: read a model file or object into a graph of a namespace."""


@hookspec
def amanda_exporters() -> Sequence[Exporter]:
    """Exporters: write a graph of a namespace (version range) to a model file."""


@hookspec
def amanda_mapping_tables() -> Sequence[Any]:
    """Mapping tables from one namespace (version range) to another: table
    objects, or paths to YAML table files shipped with the plugin.  Tables
    installed by plugins are trusted to run expressions."""


@hookspec
def amanda_runners() -> Sequence[Runner]:
    """Runners: execute a graph of a namespace (family or range) on given inputs with the framework's own
    runtime, so that a conversion can be checked by running source and result on the same inputs."""


@hookspec
def amanda_type_inferers() -> Sequence[TypeInferer]:
    """Type inferers: fill in the dtypes a graph of a namespace (family or range) leaves unstated, with the
    framework's own inference; conversions run them before applying tables."""


@hookspec
def amanda_graph_passes() -> Sequence[GraphPass]:
    """Graph passes: code that runs on a graph after the mapping tables it names (a layout pass after a table that
    converts channels-last ops to channels-first ones, say); each returns a summary for ``--explain``."""
