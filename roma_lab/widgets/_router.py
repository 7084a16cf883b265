"""Jupyter views for the meta-routing study: a tau slider and a per-task route inspector.

Each view keeps its logic in pure router functions (`sweep_threshold`, `inspect_route`) and only
draws; its mime bundle carries a static HTML rendering beside the widget, so executed notebooks
saved under results/ still show the state without widget JavaScript.
"""

from __future__ import annotations

import html

import numpy as np

from ..router import inspect_route, sweep_threshold

FINE_TAUS = tuple(float(t) for t in np.round(np.arange(0.05, 0.951, 0.01), 2))


def render_route_html(info: dict) -> str:
    """Static HTML of `inspect_route`'s record."""
    tau = info["tau"]
    bars = "".join(
        f"<tr><td><b>{op}</b></td><td style='width:220px'><div style='background:"
        f"{'#4c9a2a' if p >= tau else '#bbb'};width:{p * 200:.0f}px;height:10px'></div></td>"
        f"<td>{p:.3f}</td><td>{'in route' if op in info['route'] else ''}</td></tr>"
        for op, p in info["probabilities"].items())
    trace = "".join(f"<li><b>{html.escape(s['op'])}</b>: {html.escape(s['effect'])} "
                    f"&rarr; <code>{html.escape(str(s['candidate']))}</code></li>" for s in info["trace"])
    colour = "#2a7a2a" if info["status"] == "success" else "#b22"
    return (f"<div style='font-family:sans-serif;font-size:13px'>"
            f"<p><b>{html.escape(info['task_id'])}</b> · {info['workload']} · {info['family']} ({info['kind']})</p>"
            f"<p><i>{html.escape(info['prompt'])}</i></p>"
            f"<table>{bars}</table><p>tau = {tau:.2f}; chosen route <b>{info['route'] or '(answer only)'}</b>+A "
            f"(cost {info['cost']:.2f}); minimum route <b>{info['minimum_route'] or '(answer only)'}</b>+A</p>"
            f"<ol>{trace}</ol><p style='color:{colour}'><b>{info['status']}</b>: answered "
            f"<code>{html.escape(str(info['answer']))}</code>, expected <code>{html.escape(info['expected_answer'])}</code></p></div>")


class RouteInspector:
    """Pick a task, see its prompt, probabilities, route, state trace and verdict."""

    def __init__(self, study, split: str = "challenge", *, failures_only: bool = False):
        import ipywidgets as w

        self.study = study
        tasks = study.split(split)
        if failures_only:
            tasks = [t for t in tasks if inspect_route(study, t.task_id)["status"] != "success"]
        if not tasks:
            raise ValueError(f"no tasks to inspect in split {split!r} (failures_only={failures_only})")
        self.picker = w.Dropdown(options=[t.task_id for t in tasks], description="task")
        self.view = w.HTML()
        self.picker.observe(lambda change: self._show(change["new"]), names="value")
        self._show(self.picker.value)
        self.widget = w.VBox([self.picker, self.view])

    def _show(self, task_id: str) -> None:
        self.view.value = render_route_html(inspect_route(self.study, task_id))

    def _repr_mimebundle_(self, **kwargs):
        # live widget where a frontend runs it, static HTML in saved notebooks
        return {**self.widget._repr_mimebundle_(**kwargs), "text/html": self._repr_html_()}

    def _repr_html_(self) -> str:
        return self.view.value


class ThresholdExplorer:
    """Slider over tau redrawing success and mean cost per split, without refitting."""

    def __init__(self, study, splits=("test", "challenge"), taus=FINE_TAUS):
        import ipywidgets as w

        self.study = study
        self.curves = {s: sweep_threshold(study.model, study.split(s), taus) for s in splits}
        self.slider = w.FloatSlider(value=study.model.tau, min=min(taus), max=max(taus), step=0.01,
                                    description="tau", continuous_update=False)
        self.readout = w.HTML()
        self.plot = w.Output()
        self.slider.observe(lambda change: self._draw(change["new"]), names="value")
        self.widget = w.VBox([self.slider, self.readout, self.plot])
        self._draw(self.slider.value)

    def at(self, tau: float) -> dict:
        """Success and cost of each split at the grid tau nearest to `tau`."""
        out = {}
        for split, curve in self.curves.items():
            row = curve.iloc[int(np.argmin(np.abs(curve["tau"].to_numpy() - tau)))]
            out[split] = {"tau": float(row["tau"]), "success": float(row["success"]), "mean_cost": float(row["mean_cost"])}
        return out

    def _readout_html(self, tau: float) -> str:
        cells = "".join(f"<td><b>{s}</b>: success {v['success']:.3f}, cost {v['mean_cost']:.2f}</td>"
                        for s, v in self.at(tau).items())
        return f"<table><tr><td>tau = {tau:.2f} (selected on dev: {self.study.model.tau:.2f})</td>{cells}</tr></table>"

    def _figure(self, tau: float):
        import matplotlib.pyplot as plt

        fig, (ax_s, ax_c) = plt.subplots(1, 2, figsize=(9.5, 3.2))
        for split, curve in self.curves.items():
            ax_s.plot(curve["tau"], curve["success"], label=split)
            ax_c.plot(curve["tau"], curve["mean_cost"], label=split)
        for ax, name in ((ax_s, "success"), (ax_c, "mean route cost")):
            ax.axvline(tau, color="black", linewidth=1)
            ax.set_xlabel("tau")
            ax.set_ylabel(name)
            ax.legend()
        fig.tight_layout()
        return fig

    def _draw(self, tau: float) -> None:
        import matplotlib.pyplot as plt

        self.readout.value = self._readout_html(tau)
        self.plot.clear_output(wait=True)
        with self.plot:
            self._figure(tau)
            plt.show()

    def table_html(self, every: int = 5) -> str:
        """Success and mean cost of each split at every ``every``-th tau of the grid: what the slider
        shows, readable where no kernel moves it."""
        splits = list(self.curves)
        first = self.curves[splits[0]]
        head = "".join(f"<th>{s} success</th><th>{s} cost</th>" for s in splits)
        rows = []
        for i in range(0, len(first), every):
            tau = float(first["tau"].iloc[i])
            marked = " <b>(selected on dev)</b>" if abs(tau - self.study.model.tau) < 1e-9 else ""
            cells = "".join(f"<td>{self.curves[s]['success'].iloc[i]:.3f}</td><td>{self.curves[s]['mean_cost'].iloc[i]:.2f}</td>"
                            for s in splits)
            rows.append(f"<tr><td>{tau:.2f}{marked}</td>{cells}</tr>")
        return f"<table><tr><th>tau</th>{head}</tr>{''.join(rows)}</table>"

    def _repr_mimebundle_(self, **kwargs):
        return {**self.widget._repr_mimebundle_(**kwargs), "text/html": self._repr_html_()}

    def _repr_html_(self) -> str:
        """The static view: the readout, the curves as a picture and the tau table (no JavaScript)."""
        import base64
        import io

        import matplotlib.pyplot as plt

        fig = self._figure(self.slider.value)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=80)
        plt.close(fig)
        image = base64.b64encode(buffer.getvalue()).decode("ascii")
        return (self._readout_html(self.slider.value) + f'<img alt="success and cost against tau" '
                f'src="data:image/png;base64,{image}"/>' + self.table_html())
