"""Jupyter views: meta-routing tau explorer and route inspector."""

from ._router import RouteInspector, ThresholdExplorer, render_route_html

__all__ = ["RouteInspector", "ThresholdExplorer", "render_route_html"]
