"""Types shared by the subgraph matcher (:mod:`amanda_core.mapping.match`) and the graph regular expressions
(:mod:`amanda_core.regex`): matches, what matching needs to know, and the read-only views expressions see."""

from .types import Match, MatchContext
from .views import DtypeParser, GraphView, OpView, PortView, view_value

__all__ = ["Match", "MatchContext", "OpView", "PortView", "GraphView", "DtypeParser", "view_value"]
