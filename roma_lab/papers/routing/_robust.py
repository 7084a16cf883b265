"""Issue 52 §8: the paraphrase-robust router, offered beside the paper's.

`ROUTERS`: `"paper"`, the paper's lexical router (binary n-grams fitted on the train split: what
Tables 1-5 and notebooks 10-17 reproduce), and `"robust"`, issue 45's `minilm+para` variant (the
same n-grams beside a MiniLM sentence-embedding block, fitted on train plus the embedded model's
paraphrases of it; calibrated and thresholded on dev like every router here). `RouterStudy.build(
router=...)` and `reproduce --router` pick one, the paper's by default; the router as ROMA's
atomizer (`router_atomizer`, `compare_atomizers`) is the robust one by default. Asking for the
robust router where its encoder's weights are not installed gives the paper's, with a warning that
names the package and its install command (`resolve_router`).

Issue 45 ruled the robust router out by a budget of 0.05 ms per routing decision; as an atomizer a
decision stands beside a model call of seconds, so `robust_table` times each router per decision
beside the embedded model's seconds per call (`model_call_seconds`), and routes the test and
challenge splits (executed) and the natural prompts (routed) with both routers, side by side,
against the held-out coverage goal `COVERAGE_GOAL`.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from ..._environment import ENV
from ...lm import DEFAULT_VARIANT, MODELS, read_speeds
from ...results import compare, summarize
from ...router import ENCODERS, Learned, OperationModel, evaluate, natural_prompts, route_natural, summarize_routes
from ...stats import DEFAULT_STATS, StatsSettings
from ._paraphrase import VARIANTS, _route_ms, fit_variant, read_paraphrases

ROUTERS: tuple[str, ...] = ("paper", "robust")
ROBUST_VARIANT = next(v for v in VARIANTS if v.name == "minilm+para")
#: Issue 45's choice among the n-gram-only variants: timed beside the two offered routers.
PARAPHRASE_VARIANT = next(v for v in VARIANTS if v.name == "lexical+para+ls0.2")
#: The held-out coverage goal (issue 45's, kept): a route covers a prompt when it holds every
#: operation of the family's minimum route.
COVERAGE_GOAL = 0.90
#: The tables' model column per router: what routed (no language model routes).
ROUTER_LABELS: Mapping[str, str] = {
    "paper": "lexical router fitted on our suite (no language model)",
    "robust": ("n-gram + MiniLM router fitted on our suite and the embedded model's paraphrases of its train "
               "split (no language model at routing)"),
}


def robust_unavailable() -> str | None:
    """Why the robust router cannot be built here (its encoder cannot be imported: the weights' package,
    or a package reading them, is not installed), or None. Reads the weights once per process (checked
    by SHA-256: a damaged file raises, it is not missing)."""
    try:
        ENCODERS[ROBUST_VARIANT.encoder].dim
    except ImportError as err:       # the encoder's EncoderNotInstalledError is one
        return str(err)
    return None


def default_router() -> str:
    """The router-as-atomizer's default: `"robust"` where its encoder is installed, else `"paper"`."""
    return "robust" if robust_unavailable() is None else "paper"


def resolve_router(router: str | None) -> str:
    """`router` checked (None: the robust one); `"robust"` without its encoder becomes `"paper"`, with
    a warning naming what to install, so a run never changes router without saying so."""
    router = "robust" if router is None else router
    if router not in ROUTERS:
        raise ValueError(f"unknown router {router!r}; expected one of {ROUTERS}")
    why = robust_unavailable() if router == "robust" else None
    if why:
        warnings.warn(f"the robust router is unavailable ({why}); using the paper's router", RuntimeWarning,
                      stacklevel=2)
        return "paper"
    return router


def fit_robust(study) -> tuple[OperationModel, float]:
    """The robust router on the paper study's suite, and its training seconds (issue 45's fit).
    Without its encoder, ImportError: embeddings cached on disk could fit it, but it could not route
    a prompt it has not seen."""
    why = robust_unavailable()
    if why:
        raise ImportError(f"the robust router needs its encoder: {why}")
    return fit_variant(study, ROBUST_VARIANT, read_paraphrases(study.split("train")))


# --------------------------------------------------------------------------- speed beside a model call
@dataclass(frozen=True, slots=True)
class ModelCallSeconds:
    """The embedded default model's mean seconds per call, and where the figure comes from."""

    seconds: float
    calls: int
    source: str


#: Used when no speed log records the default model: the fastest seconds per call the design notes
#: record for it (so the router's share of a call is, if anything, overstated).
DESIGN_CALL = ModelCallSeconds(
    588.6 / (16 * 7.19), 115,
    "design/agents.md: 16 tool-benchmark tasks, 7.19 calls each, 588.6 s wall (native build, 2 cores, quiet)")


def model_call_seconds(speed_log: str | Path | None = None) -> ModelCallSeconds:
    """Seconds per call of the embedded default model over every record of it in `speed_log`
    (default: $ROMA_LAB_LM_LOG, which `python -m roma_lab.experiments run` points at
    results/lm_speed.jsonl): llama.cpp's time inside generations over its calls. `DESIGN_CALL` when
    the log holds no such record."""
    path = speed_log or os.environ.get(ENV.speed_log)
    filename = MODELS[DEFAULT_VARIANT].filename
    records = [r for r in read_speeds(path)[0] if r.model == filename and r.calls > 0] if path else []
    if not records:
        return DESIGN_CALL
    calls = sum(r.calls for r in records)
    loads = ", ".join(f"{r.load_avg_1min:.2f}" for r in records)
    return ModelCallSeconds(sum(r.call_seconds for r in records) / calls, calls,
                            f"measured: {calls} calls of {filename} in {path} "
                            f"({min(r.loaded_at for r in records):%Y-%m-%d} to "
                            f"{max(r.closed_at for r in records):%Y-%m-%d}; load at model load {loads})")


def decision_ms(models: Mapping[str, tuple[OperationModel, str | None]], texts: Sequence[str], *,
                rounds: int = 5) -> dict[str, float]:
    """Milliseconds per routing decision, one prompt at a time as ROMA's atomizer asks: features from
    the text, an encoder variant (`models[name][1]` names its encoder) paying its uncached forward pass.
    The best of `rounds` passes over `texts`; the routers take turns in every round, so a load that
    comes and goes on a shared machine hits them alike."""
    texts = list(texts)
    best = dict.fromkeys(models, math.inf)
    for model, _ in models.values():
        model.prepare(texts)      # the route reads its own embedding once; the timed encode is the fresh one
    for _ in range(rounds):
        for name, (model, encoder) in models.items():
            start = time.perf_counter()
            for text in texts:
                if encoder is not None:
                    ENCODERS[encoder].encode([text])
                model.route(text)
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: seconds * 1000 / len(texts) for name, seconds in best.items()}


def speed_table(models: Mapping[str, tuple[OperationModel, str | None, str]], texts: Sequence[str], *,
                rounds: int = 5, speed_log: str | Path | None = None) -> pd.DataFrame:
    """Per router (`models[name]` = (model, encoder or None, model label)): ms per decision alone and
    per task in a batch (issue 45's method), beside the embedded model's seconds per call."""
    call = model_call_seconds(speed_log)
    load_before = os.getloadavg()[0]
    alone = decision_ms({n: (m, e) for n, (m, e, _) in models.items()}, texts, rounds=rounds)
    batch = _route_ms({n: m for n, (m, _, _) in models.items()}, {n: e for n, (_, e, _) in models.items()}, texts)
    load_after = os.getloadavg()[0]
    method = (f"best of {rounds} passes (one prompt at a time) and of 7 (a batch) over {len(texts)} natural "
              f"prompts on a shared machine, 1-minute load {load_before:.2f} before, {load_after:.2f} after")
    return pd.DataFrame([{"router": name, "model": label, "ms_per_decision": alone[name],
                          "ms_per_task_in_batch": batch[name], "model_call_s": call.seconds,
                          "share_of_a_model_call": alone[name] / 1000 / call.seconds,
                          "model_call_source": call.source, "method": method}
                         for name, (_, _, label) in models.items()])


# --------------------------------------------------------------------------- the table
def _coverage(scores: pd.DataFrame) -> pd.Series:
    """Whether each route holds every operation of its minimum route (one letter per operation)."""
    return pd.Series([all(op in route for op in labels) for route, labels in zip(scores["route"], scores["labels"])],
                     index=scores.index)


def _overview(summary: pd.DataFrame, speed: pd.DataFrame) -> pd.DataFrame:
    """One row per router and held-out set: coverage (95% CI) against the goal, success where executed,
    exact route, and the router's ms per decision and share of a model call."""
    figures = summary.pivot_table(index=["condition", "subset"], columns="metric", values=["value", "ci_low", "ci_high", "n"],
                                  sort=False)
    timing = speed.set_index("router")
    out = []
    for (condition, subset), row in figures.iterrows():
        coverage = row[("value", "coverage")]
        out.append({"router": condition, "subset": subset, "n": int(row[("n", "coverage")]), "coverage": coverage,
                    "coverage_ci_low": row[("ci_low", "coverage")], "coverage_ci_high": row[("ci_high", "coverage")],
                    "coverage_goal": COVERAGE_GOAL, "meets_goal": bool(coverage >= COVERAGE_GOAL),
                    "success": row.get(("value", "success"), math.nan), "exact_route": row[("value", "exact_route")],
                    "ms_per_decision": timing.loc[condition, "ms_per_decision"],
                    "share_of_a_model_call": timing.loc[condition, "share_of_a_model_call"],
                    "model": ROUTER_LABELS[condition]})
    return pd.DataFrame(out)


def robust_table(study, *, stats: StatsSettings = DEFAULT_STATS, robust: OperationModel | None = None,
                 natural_path=None, speed_log: str | Path | None = None, rounds: int = 5) -> dict[str, pd.DataFrame]:
    """The paper's router (`study.model`; `study` must hold it) and the robust one (`robust`, else
    fitted here: ImportError without MiniLM) side by side: the test and challenge splits
    executed (`robust_tasks`: success, coverage, exact route, cost), the natural prompts routed
    (`robust_natural_tasks`), summarised with task-bootstrap CIs (`robust_summary`), paired robust minus
    paper (`robust_paired`), timed beside a model call (`robust_speed`, issue 45's chosen n-gram variant
    too), and read against the coverage goal in one table (`robust_overview`)."""
    if study.router != "paper":
        raise ValueError(f"robust_table compares against the paper's router; the study holds the {study.router!r} one")
    paraphrases = read_paraphrases(study.split("train"))
    robust = fit_robust(study)[0] if robust is None else robust
    models = {"paper": study.model, "robust": robust}
    tasks = evaluate([Learned(m, name=name) for name, m in models.items()], study.split("test") + study.split("challenge"),
                     repeats=1)
    tasks["coverage"] = _coverage(tasks)
    prompts = natural_prompts(natural_path)
    natural = route_natural(models, prompts)
    for frame in (tasks, natural):
        frame["model"] = frame["condition"].map(ROUTER_LABELS)
    summary = pd.concat([summarize_routes(tasks, stats=stats),
                         summarize(tasks, ["coverage"], ci=["coverage"], run=None, stats=stats),
                         summarize(natural, ["coverage", "exact_route", "cost"], ci=["coverage"], run=None, stats=stats)],
                        ignore_index=True)
    paired = pd.concat([compare(tasks, "robust", "paper", m, stats=stats) for m in ("success", "coverage", "cost")]
                       + [compare(natural, "robust", "paper", m, stats=stats) for m in ("coverage", "cost")],
                       ignore_index=True)
    issue45 = fit_variant(study, PARAPHRASE_VARIANT, paraphrases, repeats=1)[0]
    speed = speed_table({"paper": (study.model, None, ROUTER_LABELS["paper"]),
                         PARAPHRASE_VARIANT.name: (issue45, None, "n-gram router fitted on our suite and the embedded "
                                                   "model's paraphrases, label smoothing 0.2 (issue 45's choice)"),
                         "robust": (robust, ROBUST_VARIANT.encoder, ROUTER_LABELS["robust"])},
                        list(prompts["prompt"]), rounds=rounds, speed_log=speed_log)
    return {"robust_tasks": tasks, "robust_natural_tasks": natural, "robust_summary": summary,
            "robust_paired": paired, "robust_speed": speed, "robust_overview": _overview(summary, speed)}
