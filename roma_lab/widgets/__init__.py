"""Jupyter views: the ROMA execution tree (alone, side by side, or for any benchmark item of a table
run), OAgents trajectories (alone, side by side, or per task of a saved run), GEPA+ instruction
evolution, the meta-routing tau explorer and route inspector.

Each view keeps state in plain data built by a pure, tested function and carries a static HTML
rendering, so executed notebooks saved under results/ still show it; ``export_html`` writes an
executed notebook as one HTML page that needs no network. Widgets read the rooms they show
(``bench``, ``controller``...); no room imports widgets."""

from ._export import export_html
from ._items import ItemRunPicker, saved_traces
from ._optimizer import OptimizerEvolutionWidget, evolution_html, evolution_state, instruction_diff_html, step_html
from ._router import RouteInspector, ThresholdExplorer, render_route_html
from ._trajectory import (
    TrajectoryComparison,
    TrajectoryPicker,
    TrajectoryWidget,
    compare_trajectories_html,
    saved_trajectories,
    trajectory_html,
    trajectory_to_view,
)
from ._tree import (
    ExecutionTreeWidget,
    RunComparison,
    compare_html,
    node_state,
    nodes_to_tree,
    render_tree_html,
    trace_to_tree,
    tree_html,
)
from ._view import HTMLView

__all__ = ["ExecutionTreeWidget", "HTMLView", "ItemRunPicker", "OptimizerEvolutionWidget", "saved_traces", "RouteInspector",
           "RunComparison", "ThresholdExplorer", "TrajectoryComparison", "TrajectoryPicker", "TrajectoryWidget",
           "compare_html", "compare_trajectories_html", "evolution_html", "evolution_state", "export_html",
           "instruction_diff_html", "node_state", "nodes_to_tree", "render_route_html", "render_tree_html",
           "saved_trajectories", "step_html", "trace_to_tree", "trajectory_html", "trajectory_to_view", "tree_html"]
