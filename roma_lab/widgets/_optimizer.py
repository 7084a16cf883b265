"""Step through the candidates a GEPA / GEPA+ run accepted: instruction diff, J components, scores.

``evolution_state`` turns a run's records and candidates tables (the ROMA paper's Table 7/8
outputs, or ``OptimizationResult.records_df()`` with ``candidates_table(result)``) into one
JSON-able dict; the widget keeps it in ONE synced trait (``evolution``) plus the ``step`` shown,
and re-renders from them, so tests drive it as the browser would and saved notebooks keep a
static copy of every step.
"""

from __future__ import annotations

import difflib
import html
import math
from typing import Any

import ipywidgets as widgets
import traitlets

_SCORE_FIELDS = ("judge", "verifier", "violations", "delta", "J")


def _clean(value: Any) -> Any:
    """JSON-safe scalar: NaN/None -> None, numpy numbers -> Python numbers."""
    if value is None:
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _is_true(value: Any) -> bool:
    # Read back from CSV, booleans may be bool, "True" or NaN.
    return _clean(value) is True or value == "True"


def _parents(value: Any) -> list[int]:
    if isinstance(value, list | tuple):
        return [int(p) for p in value if p is not None]
    value = _clean(value)
    if value is None:
        return []
    if isinstance(value, int | float):  # a CSV column of single parents reads back as numbers
        return [int(value)]
    return [int(p) for p in str(value).split(";") if p.strip()]


def _one_run(df, filters: dict[str, Any], name: str):
    for column, wanted in filters.items():
        if wanted is not None:
            if column not in df:
                raise ValueError(f"{name} table has no {column!r} column to filter on")
            df = df[df[column] == wanted]
    for column in ("condition", "subset", "run"):
        if column in df and df[column].nunique() > 1:
            raise ValueError(f"{name} table holds several runs ({column} = {sorted(df[column].unique())}); "
                             f"pass {column}=... to pick one")
    return df


def evolution_state(records, candidates, *, condition: str | None = None, subset: str | None = None,
                    run: int | None = None) -> dict[str, Any]:
    """One search's accepted candidates, in order, as a JSON-able dict. ``condition`` (the method),
    ``subset`` (the benchmark) and ``run`` (the repeat) pick the search from tables that hold several.

    Each step: the candidate, its parent(s), whether it came from a proposal or a crossover, its
    validation score and the best so far, and per changed component the instruction before and
    after with the J components of the draft or merge that produced it.
    """
    filters = {"condition": condition, "subset": subset, "run": run}
    records = _one_run(records, filters, "records")
    candidates = _one_run(candidates, filters, "candidates")
    if candidates.empty:
        raise ValueError("no candidates for this search (check condition/subset/run)")
    text = {(int(r.candidate_idx), r.component): r.instruction for r in candidates.itertuples()}
    score = {int(r.candidate_idx): float(r.val_score) for r in candidates.itertuples()}
    parents = {int(r.candidate_idx): _parents(r.parents) for r in candidates.itertuples()}
    accepted = records[(records["event"].isin(["accepted", "crossover"])) & records["accepted"].map(_is_true)]
    round_of = {int(r.candidate_idx): (int(r.round), r.event == "crossover" or r.note == "crossover")
                for r in accepted.itertuples() if _clean(r.candidate_idx) is not None}
    # (all metric calls, GEPA's budget count) when the candidate was validated: GEPA+'s verifier runs count
    calls = {int(r.candidate_idx): (int(r.gepa_metric_calls_so_far + r.verifier_metric_calls_so_far),
                                    int(r.gepa_metric_calls_so_far))
             for r in records[records["event"] == "valset"].itertuples()}
    chosen = records[records["event"].isin(["draft", "merge"]) & records["selected"].map(_is_true)]

    steps, best = [], score[0]
    for idx in sorted(score):
        if idx == 0:
            continue
        best = max(best, score[idx])
        round_no, crossover = round_of.get(idx, (None, False))
        first_parent = parents[idx][0] if parents[idx] else 0
        changes = []
        for (cand, component), after in text.items():
            before = text.get((first_parent, component), "")
            if cand != idx or after == before:
                continue
            row = chosen[(chosen["round"] == round_no) & (chosen["component"] == component)]
            edit = {"component": component, "before": before, "after": after}
            if len(row):
                r = row.iloc[-1]
                edit.update({f: _clean(r[f]) for f in _SCORE_FIELDS})
                edit.update(source="merge" if r["event"] == "merge" else f"draft {int(r['draft_id'])}",
                            proposer_model=str(r["proposer_model"] or ""), temperature=_clean(r["temperature"]),
                            note=str(_clean(r["note"]) or ""))
            else:
                edit.update({f: None for f in _SCORE_FIELDS}, source="crossover" if crossover else "",
                            proposer_model="", temperature=None, note="")
            changes.append(edit)
        steps.append({"candidate_idx": idx, "round": round_no, "parents": parents[idx],
                      "kind": "crossover" if crossover else "proposal", "val_score": score[idx],
                      "best_so_far": best, "metric_calls": calls.get(idx, (None, None))[0],
                      "gepa_metric_calls": calls.get(idx, (None, None))[1], "changes": changes})
    title = " · ".join(str(v) for v in (subset, condition, None if run is None else f"run {run}") if v)
    return {"title": title, "seed_val_score": score[0], "seed": {c: t for (i, c), t in text.items() if i == 0},
            "steps": steps}


# --- HTML ---

def instruction_diff_html(before: str, after: str) -> str:
    """Word-level diff: removed words struck through in red, added words in green."""
    a, b = before.split(), after.split()
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op in ("delete", "replace"):
            out.append(f"<del style='background:#fdd'>{html.escape(' '.join(a[i1:i2]))}</del>")
        if op in ("insert", "replace"):
            out.append(f"<ins style='background:#dfd'>{html.escape(' '.join(b[j1:j2]))}</ins>")
        if op == "equal":
            out.append(html.escape(" ".join(a[i1:i2])))
    return f"<div style='white-space:pre-wrap;font-family:monospace'>{' '.join(out)}</div>"


def _fmt(value: Any) -> str:
    return "n/a" if value is None else (f"{value:.3f}" if isinstance(value, float) else html.escape(str(value)))


def step_html(state: dict[str, Any], step: int) -> str:
    """One accepted candidate: scores, then each changed component's diff and J components."""
    steps = state.get("steps", [])
    if not steps:
        return f"<i>no candidate was accepted; the seed scored {_fmt(state.get('seed_val_score'))} on validation</i>"
    s = steps[min(max(step, 0), len(steps) - 1)]
    head = (f"<b>candidate {s['candidate_idx']}</b> ({s['kind']}, round {_fmt(s['round'])}, parents "
            f"{s['parents']}) &middot; val score <b>{_fmt(s['val_score'])}</b> &middot; best so far "
            f"{_fmt(s['best_so_far'])} &middot; seed {_fmt(state['seed_val_score'])} &middot; metric calls "
            f"{_fmt(s['metric_calls'])} (GEPA's budget count {_fmt(s['gepa_metric_calls'])})")
    parts = [head]
    for c in s["changes"]:
        scores = " &middot; ".join(f"{f} {_fmt(c[f])}" for f in _SCORE_FIELDS)
        model = html.escape(c["proposer_model"] or "n/a")
        origin = f"{html.escape(c['source'])} by {model} (T={_fmt(c['temperature'])})"
        note = f"<br><small>{html.escape(c['note'])}</small>" if c["note"] else ""
        parts.append(f"<h4 style='margin:6px 0 2px'><code>{html.escape(c['component'])}</code></h4>"
                     f"<div>{origin} &middot; {scores}{note}</div>{instruction_diff_html(c['before'], c['after'])}")
    return "<br>".join(parts[:1]) + "".join(parts[1:])


def evolution_html(state: dict[str, Any]) -> str:
    """Static HTML of every step (what an executed notebook keeps without widget JS)."""
    title = f"<b>{html.escape(state.get('title') or 'optimisation run')}</b>: "
    steps = state.get("steps", [])
    body = "".join(f"<details{' open' if i == len(steps) - 1 else ''}><summary>step {i + 1}: candidate "
                   f"{s['candidate_idx']} (val {_fmt(s['val_score'])})</summary>{step_html(state, i)}</details>"
                   for i, s in enumerate(steps))
    return f"<div>{title}{len(steps)} accepted candidate(s){body or '<br>' + step_html(state, 0)}</div>"


class OptimizerEvolutionWidget(widgets.VBox):
    """Step through a run's accepted candidates::

        OptimizerEvolutionWidget(evolution_state(records, candidates, condition="gepa+"))

    State is the ``evolution`` dict plus ``step`` (0-based); slider and buttons change ``step``.
    """

    evolution = traitlets.Dict().tag(sync=True)
    step = traitlets.Int(0).tag(sync=True)

    def __init__(self, evolution: dict[str, Any] | None = None, **kwargs: Any):
        self._header = widgets.HTML()
        self._slider = widgets.IntSlider(min=0, max=0, description="step")
        self._prev = widgets.Button(description="◀ previous", layout=widgets.Layout(width="110px"))
        self._next = widgets.Button(description="next ▶", layout=widgets.Layout(width="110px"))
        self._detail = widgets.HTML(layout=widgets.Layout(overflow="auto", max_height="600px"))
        super().__init__(children=[self._header, widgets.HBox([self._prev, self._slider, self._next]), self._detail],
                         **kwargs)
        self._prev.on_click(lambda _: self._move(-1))
        self._next.on_click(lambda _: self._move(1))
        self._slider.observe(lambda change: setattr(self, "step", change["new"]), names="value")
        self.evolution = evolution or {"title": "", "seed_val_score": None, "seed": {}, "steps": []}

    @classmethod
    def from_tables(cls, records, candidates, **filters: Any) -> OptimizerEvolutionWidget:
        return cls(evolution_state(records, candidates, **filters))

    def _move(self, by: int) -> None:
        self.step = min(max(self.step + by, 0), max(len(self.evolution.get("steps", [])) - 1, 0))

    @traitlets.observe("evolution")
    def _render_all(self, change: dict[str, Any]) -> None:
        state = change["new"]
        n = len(state.get("steps", []))
        self._header.value = (f"<b>{html.escape(state.get('title') or 'optimisation run')}</b>: {n} accepted "
                              f"candidate(s); seed validation score {_fmt(state.get('seed_val_score'))}")
        self._slider.max = max(n - 1, 0)
        self.step = 0
        self._render_step({"new": 0})

    @traitlets.observe("step")
    def _render_step(self, change: dict[str, Any]) -> None:
        self._slider.value = change["new"]
        self._detail.value = step_html(self.evolution, change["new"])

    def _repr_html_(self) -> str:
        return evolution_html(self.evolution)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        # The static HTML travels with the widget view, so saved notebooks show every step without JS.
        return {**super()._repr_mimebundle_(**kwargs), "text/html": self._repr_html_()}
