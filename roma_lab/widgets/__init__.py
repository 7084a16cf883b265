"""Jupyter views: the ROMA execution tree, the meta-routing tau explorer and route inspector.

Each view keeps state in plain data built by a pure, tested function and carries a static HTML
rendering, so executed notebooks saved under results/ still show it."""

from ._router import RouteInspector, ThresholdExplorer, render_route_html
from ._tree import ExecutionTreeWidget, nodes_to_tree, render_tree_html, trace_to_tree

__all__ = ["ExecutionTreeWidget", "RouteInspector", "ThresholdExplorer", "nodes_to_tree", "render_route_html",
           "render_tree_html", "trace_to_tree"]
