"""What expressions see (moved to :mod:`amanda_core.matching.views`, below both the mapping engine and the graph
regular expressions); kept here so that ``amanda_core.mapping.views`` still names them."""

from ..matching.views import DtypeParser, GraphView, OpView, PortView, view_value

__all__ = ["OpView", "PortView", "GraphView", "DtypeParser", "view_value"]
