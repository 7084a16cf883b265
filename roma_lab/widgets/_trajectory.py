"""An OAgents trajectory in Jupyter: a pure view builder, one HTML renderer, live widgets.

``trajectory_to_view`` turns a :class:`roma_lab.agents.Trajectory` into one JSON-able dict: the
task, the final answer and its grade, how the answer was chosen among the rollouts (scores or
votes, and the tie rule when it decided), and per rollout its plans (with the steps that were
shown each), its steps (the tool call with its arguments and observation, or the typed error; the
plan, memory and feedback the actor was shown; summary and critique), and every model call as the
execution tree shows a role call (``_view.call_data``: role, outputs, tokens, cost, times and, where
the call recorded them, the requests as sent, the completions and whether a cache served them). Usage
per role and in total is read from the trajectory's run (``Trajectory.as_run``), the one usage count.
``trajectory_html`` and ``compare_trajectories_html`` render the dict (one table of steps grouped by
rollout, each row of a rollout or a step opening its detail block below it, with or without
JavaScript); the widgets (``_view.SingleView`` and ``LabelledComparison``, as for runs) keep it in a
trait and send the HTML to the browser, and the same HTML is the static view of saved and exported
notebooks. See design/viewer.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import traitlets

from roma_lab.agents import is_non_answer
from roma_lab.trace import Rollout, Selection, Step, Trajectory, read_trajectories
from roma_lab.bench import normalize_answer
from roma_lab.trace import Run

from . import _view
from ._view import (
    call_data,
    esc,
    json_pre,
    known_sum,
    text_pre,
    tokens,
)

# A step went through (``ok``), gave the final answer (``answered``) or failed with a typed kind;
# a rollout ends with one of ROLLOUT_STATUSES.
STATUS_COLORS = {"ok": "#1e88e5", "answered": "#43a047", "step_limit": "#fb8c00", "timeout": "#6d4c41",
                 "unavailable_tool": "#8e24aa", "malformed_output": "#e53935", "unknown_tool": "#e53935",
                 "bad_arguments": "#e53935", "tool_error": "#e53935", "model_error": "#b71c1c",
                 "repeated_call": "#fb8c00"}  # a loop the guard stopped: amber, as the step limit
SELECTION_RULES = {
    "single": "one rollout: nothing to choose",
    "vote": "majority vote over normalised answers (empty and 'unable to determine' answers do not vote); "
            "a tie goes to the answer given first",
    "score": "the scorer rates each rollout 0-10; the highest wins, a tie goes to the lowest rollout index",
    "list": "the selector reads every rollout and names one (an invalid pick keeps rollout 0)",
    "reflection": "the answer is judged; a rejected one is tried once more with the critique",
}
_SHORT = 70  # characters of an observation in a row; the detail block shows it whole


# --- the view dict ---


def _step_status(step: Step) -> str:
    if step.answer is not None:
        return "answered"
    return step.error_kind or "ok"


def _step_tool(step: Step) -> str:
    """The tool a step called (as typed, for an unknown one), ``final_answer``, or ``none``; one word."""
    if step.tool_call is not None:
        name = step.tool_call.name
    elif step.answer is not None:
        name = "final_answer"
    else:
        name = step.action or "none"
    return "_".join(name.split()) or "none"


def _plan_label(kind: str, after_step: int) -> str:
    return {"static": "static workflow", "initial": "initial plan"}.get(kind, f"revision after step {after_step}")


def _plan_short(label: str) -> str:
    """A plan's label for a narrow column (the detail block names it whole)."""
    return label.replace("revision after step ", "rev. @").replace(" workflow", "").replace(" plan", "")


def _plan_seen(step: Step, plans: Sequence[dict[str, Any]]) -> str | None:
    """Which recorded plan the step was shown: the latest visible one written before it whose text is
    what the step records as shown (read from the record, so a plan the actor never saw is never
    credited). None when it was shown no plan, or a text no recorded plan has."""
    if not step.plan_shown or step.subtask is not None:
        return None
    for p in reversed(plans):
        if p["visible"] and p["after_step"] < step.index and p["plan"] == step.plan_shown:
            return p["id"]
    return None


def _step_view(step: Step, rollout: int, position: int, plans: Sequence[dict[str, Any]]) -> dict[str, Any]:
    call = step.tool_call
    return {
        "id": f"r{rollout}.{position}", "rollout": rollout, "index": step.index, "subtask": step.subtask,
        "status": _step_status(step), "tool": _step_tool(step), "thought": step.thought, "action": step.action,
        "arguments": dict(call.arguments) if call else {}, "observation": step.observation,
        "tool_latency_s": round(call.latency_s, 6) if call else None, "answer": step.answer,
        "error": step.error, "plan_shown": step.plan_shown, "plan_id": _plan_seen(step, plans),
        "memory_shown": step.memory_shown, "feedback_shown": step.feedback_shown, "summary": step.summary,
        "critique": step.critique, "calls": [call_data(c) for c in step.calls],
    }


def _delegation_view(run: Run, rollout_id: str) -> list[dict[str, Any]]:
    """ROMA's nodes of a delegated rollout, as the trajectory's run grafts them below it (roles named
    ``decomposer:<role>``; executor calls left out: they are the rollout's subtask steps)."""
    return [{"id": n.id, "goal": n.goal, "task_type": n.task_type, "status": n.status, "output": n.output,
             "error": n.error, "calls": [call_data(c) for c in n.calls]}
            for n in run.nodes if n.id.startswith(f"{rollout_id}/")]


def _rollout_view(r: Rollout, selection: Selection, in_selection: bool, run: Run) -> dict[str, Any]:
    plans = [{"id": f"r{r.index}.p{i}", "label": _plan_label(p.kind, p.after_step), "kind": p.kind,
              "after_step": p.after_step, "plan": p.plan, "visible": p.visible,
              "observations": list(p.observations), "calls": [call_data(c) for c in p.calls]}
             for i, p in enumerate(r.plans)]
    steps = [_step_view(s, r.index, i, plans) for i, s in enumerate(r.steps, 1)]
    for p in plans:
        p["seen_by"] = [s["id"] for s in steps if s["plan_id"] == p["id"]]
    delegation = _delegation_view(run, f"r{r.index}") if r.delegation is not None else None
    scores = selection.scores if selection.method == "score" else ()
    return {
        "id": f"r{r.index}", "index": r.index, "kind": r.kind, "seed": r.seed, "status": r.status,
        "error": r.error, "answer": r.answer, "note": r.note, "tips_shown": list(r.tips_shown),
        "long_term_before": r.long_term_before, "long_term_after": r.long_term_after,
        "chosen": r.index == selection.chosen, "in_selection": in_selection,
        "vote": _vote_key(selection, r) if selection.method == "vote" and in_selection else None,
        "score": scores[r.index] if r.index < len(scores) else None,
        "plans": plans, "steps": steps, "delegation": delegation,
    }


def _vote_key(selection: Selection, rollout: Rollout) -> str | None:
    """The key a rollout voted under, as the vote recorded it; a trajectory saved before votes
    recorded their ballots shows the answer as it was normalised then."""
    if rollout.index < len(selection.ballots):
        return selection.ballots[rollout.index]
    return None if is_non_answer(rollout.answer) else normalize_answer(rollout.answer)


def _selection_view(s: Selection, rollouts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The recorded choice, the rule of its method, and, when the top was shared, what tied and
    which rollout the tie rule gave."""
    tied, decided_by_tie = [], None
    if s.method == "vote" and s.votes:
        top = max(s.votes.values())
        tied = [answer for answer, n in s.votes.items() if n == top]
        if s.tie:
            decided_by_tie = next(r["index"] for r in rollouts if r["vote"] == tied[0])
    elif s.method == "score" and any(v is not None for v in s.scores):
        top = max(v for v in s.scores if v is not None)
        tied = [i for i, v in enumerate(s.scores) if v == top]
        if s.tie:
            decided_by_tie = tied[0]
    return {"method": s.method, "chosen": s.chosen, "rule": SELECTION_RULES[s.method], "tie": s.tie,
            "tied": tied if s.tie else [], "decided_by_tie": decided_by_tie, "votes": dict(s.votes),
            "scores": list(s.scores), "note": s.note, "calls": [call_data(c) for c in s.calls]}


def _known(value: Any) -> Any:
    """A usage sum as plain data: None where unknown (<NA> tokens, NaN cost)."""
    import pandas as pd

    return None if pd.isna(value) else value.item() if hasattr(value, "item") else value


def _roles(run: Run) -> list[dict[str, Any]]:
    """Per role, in order of first call: calls, errors, tokens, latency, and how many calls recorded
    their requests (``recorded``) and how many of those a cache served, from the trajectory's run."""
    table = run.calls_df()
    calls = [c for n in run.nodes for c in n.calls]
    rows = []
    for role, part in table.groupby("role", sort=False):
        mine = [c for c in calls if c.role == role]
        rows.append({"role": role, "calls": len(part), "errors": int(part["error"].notna().sum()),
                     "input_tokens": _known(part["input_tokens"].sum(skipna=False)),
                     "output_tokens": _known(part["output_tokens"].sum(skipna=False)),
                     "latency_s": round(float(part["latency_s"].sum()), 6),
                     "recorded": sum(c.cached is not None for c in mine),
                     "cached": sum(c.cached is True for c in mine)})
    return rows


def trajectory_to_view(trajectory: Trajectory) -> dict[str, Any]:
    """One trajectory as a JSON-able dict: task, outcome and grade, selection, rollouts with their
    plans and steps, every model call, and per-role totals. Ids: ``r<i>`` a rollout, ``r<i>.<n>``
    its n-th recorded step (subtask steps first), ``r<i>.p<k>`` its k-th plan."""
    t = trajectory
    competing = t.selection.method in ("vote", "score", "list")
    run = t.as_run()
    rollouts = [_rollout_view(r, t.selection, competing and r.kind == "best_of_n", run) for r in t.rollouts]
    g = t.grade
    view = {
        "task_id": t.task_id, "benchmark": t.benchmark, "split": t.split, "stratum": t.stratum,
        "question": t.question, "config_name": t.config.get("name", ""), "config_hash": t.config_hash,
        "config": t.config, "run": t.run, "temperature": t.temperature, "answer": t.answer, "status": t.status,
        "reanswered": t.reanswered, "uses_gold_answers": t.uses_gold_answers, "wall_s": round(t.wall_s, 6),
        "grade": None if g is None else {"label": g.label, "score": g.score, "grader": g.grader, "error": g.error},
        "selection": _selection_view(t.selection, rollouts), "rollouts": rollouts,
    }
    view["roles"] = _roles(run)
    usage = run.usage_df().iloc[-1]  # the total row
    view["totals"] = {"rollouts": len(rollouts), "steps": t.n_steps, "tool_calls": t.n_tool_calls,
                      "model_calls": int(usage["calls"]), "input_tokens": _known(usage["input_tokens"]),
                      "output_tokens": _known(usage["output_tokens"]), "cost": _known(usage["cost"])}
    return view


def view_ids(view: Mapping[str, Any]) -> list[str]:
    """Every selectable id of a view (rollouts and steps), in page order."""
    return [i for r in view["rollouts"] for i in (r["id"], *(s["id"] for s in r["steps"]))]


def find_in_view(view: Mapping[str, Any], item_id: str) -> dict[str, Any] | None:
    """The rollout or step dict with that id, or None."""
    for r in view["rollouts"]:
        if r["id"] == item_id:
            return r
        for s in r["steps"]:
            if s["id"] == item_id:
                return s
    return None


# --- HTML: one renderer for the widget and the static view ---

_WIDTHS = (17, 11, 20, 30, 12, 10)  # step, status, action, observation, plan, calls (percent)
TRAJECTORY_CSS = _view.pane_css("tj", 520, _WIDTHS) + """\
.roma-view .tj-badge{color:#fff;border-radius:3px;padding:0 4px;font-size:12px;white-space:nowrap}
.roma-view .tj-mark{border:1px solid #888;border-radius:3px;padding:0 3px;font-size:11px;white-space:nowrap}
.roma-view .tj-head{margin:2px 0}
.roma-view .tj-outcome,.roma-view .tj-selection{margin:3px 0;padding:3px 5px;background:rgba(127,127,127,.06)}
.roma-view tr.tj-rollout td{background:rgba(127,127,127,.10);font-weight:600;padding-top:4px}
.roma-view .tj-roles{border-collapse:collapse;margin:6px 0}
.roma-view .tj-roles td,.roma-view .tj-roles th{padding:1px 6px;border-bottom:1px solid rgba(127,127,127,.15)}
"""


def _badge(status: str | None, title: str = "") -> str:
    color = STATUS_COLORS.get(status or "", "#616161")
    return f'<span class="tj-badge" style="background:{color}" title="{esc(title)}">{esc(status or "none")}</span>'


def _grade_html(grade: Mapping[str, Any] | None) -> str:
    if grade is None:
        return "<i>not graded</i>"
    color = "#43a047" if grade["score"] == 1.0 else "#616161" if grade["score"] is None else "#e53935"
    score = "no score" if grade["score"] is None else f"score {grade['score']:g}"
    error = f' <span class="tj-error">{esc(grade["error"])}</span>' if grade["error"] else ""
    return (f'<span class="tj-badge" style="background:{color}">{esc(grade["label"] or "ungraded")}</span> '
            f"{score} by {esc(grade['grader'])}{error}")


def _short(text: str | None) -> str:
    line = (text or "").strip().replace("\n", " ⏎ ")
    return line if len(line) <= _SHORT else line[:_SHORT] + "…"


def _calls_html(calls: Sequence[Mapping[str, Any]], key: str, title: str = "model calls") -> str:
    if not calls:
        return ""
    return f"<h5>{esc(title)} ({len(calls)})</h5>" + "".join(
        _view.call_html(c, f"{key}/{i}", prefix="tj", mark="tj-mark", empty="prompt and completion not recorded for this call")
        for i, c in enumerate(calls))


def _shown_html(label: str, text: str, key: str) -> str:
    """What the actor was shown, open (a live view shows one step at a time)."""
    body = text_pre(text) if text.strip() else "<div><i>empty</i></div>"
    return f'<details open data-key="{esc(key)}"><summary><b>{esc(label)}</b></summary>{body}</details>'


def _selection_html(view: Mapping[str, Any], key: str) -> str:
    s = view["selection"]
    parts = [f"<b>selection</b>: {esc(s['method'])} &middot; chose rollout {s['chosen']} &middot; "
             f"<i>rule: {esc(s['rule'])}</i>"]
    if s["method"] == "vote" and s["votes"]:
        parts.append("votes: " + ", ".join(f"<code>{esc(a)}</code> {n}" for a, n in s["votes"].items()))
    if s["method"] == "score":
        parts.append("scores: " + ", ".join(f"rollout {i} {'none' if v is None else f'{v:g}'}"
                                            for i, v in enumerate(s["scores"])))
    if s["tie"]:
        tied = ", ".join(f"<code>{esc(a)}</code>" if s["method"] == "vote" else f"rollout {a}" for a in s["tied"])
        parts.append(f'<span class="tj-mark">tie</span> between {tied}: the tie rule chose rollout '
                     f"{s['decided_by_tie']}")
    if s["note"]:
        parts.append(f"note: {esc(s['note'])}")
    return (f'<div class="tj-selection">{"<br>".join(parts)}'
            f"{_calls_html(s['calls'], f'{key}/selection', 'selection calls')}</div>")


def _summary_html(view: Mapping[str, Any]) -> str:
    t = view["totals"]
    flags = "".join(f' &middot; <span class="tj-mark">{esc(flag)}</span>' for flag, on in
                    (("re-answered", view["reanswered"]), ("uses gold answers", view["uses_gold_answers"])) if on)
    answer = "<i>no answer</i>" if view["answer"] is None else f"<code>{esc(view['answer'])}</code>"
    cost = "cost unknown" if t["cost"] is None else f"${t['cost']:.4f}"
    return (f'<div class="tj-head"><b>{esc(view["task_id"])}</b> &middot; {esc(view["benchmark"])} / '
            f"{esc(view['split'])} / {esc(view['stratum'])} &middot; config <b>{esc(view['config_name'])}</b>@"
            f"{esc(view['config_hash'][:10])} &middot; run {view['run']} &middot; temperature {view['temperature']:g}"
            f"</div><div>{esc(view['question'])}</div>"
            f'<div class="tj-outcome">final answer {answer} {_badge(view["status"])} &middot; '
            f"{_grade_html(view['grade'])}{flags}<br>{t['rollouts']} rollout(s) &middot; {t['steps']} steps &middot; "
            f"{t['tool_calls']} tool calls &middot; {t['model_calls']} model calls &middot; "
            f"{tokens(t['input_tokens'])} in / {tokens(t['output_tokens'])} out tokens &middot; "
            f"{cost} &middot; "
            f"{view['wall_s']:.2f} s</div>")


def _ballot(r: Mapping[str, Any], method: str) -> str:
    """What a rollout brought to the selection: its vote or its score."""
    if not r["in_selection"]:
        return ""
    if method == "vote":
        return " &middot; <i>does not vote</i>" if r["vote"] is None else f" &middot; votes for <code>{esc(r['vote'])}</code>"
    if method == "score":
        return " &middot; <i>no score</i>" if r["score"] is None else f" &middot; score {r['score']:g}"
    return ""


def _rollout_row(r: Mapping[str, Any], method: str) -> str:
    statuses = " ".join(sorted({s["status"] for s in r["steps"]} | {r["status"]}))
    tools = " ".join(sorted({s["tool"] for s in r["steps"]}))
    chosen = ' <span class="tj-mark">chosen</span>' if r["chosen"] else ""
    answer = "no answer" if r["answer"] is None else f"<code>{esc(r['answer'])}</code>"
    seed = "" if r["seed"] is None else f", seed {r['seed']}"
    cells = (f'<td colspan="6">rollout {r["index"]} '
             f"({esc(r['kind'])}{seed}) {_badge(r['status'])} &middot; {answer}{_ballot(r, method)}{chosen}</td>")
    return _view.select_row(r["id"], {"rollout": r["id"], "status": statuses, "tool": tools}, cells, css_class="tj-rollout")


def _step_row(s: Mapping[str, Any], plan_labels: Mapping[str, str]) -> str:
    if s["observation"] is not None:
        result = _short(s["observation"])
    elif s["answer"] is not None:
        result = f"answer: {_short(s['answer'])}"
    else:
        result = _short(s["error"])
    args = ", ".join(f"{k}={v!r}" for k, v in s["arguments"].items())
    action = f"{s['action'] or '?'}({args})" if s["answer"] is None else "final_answer"
    where = f" <small>[subtask: {esc(_short(s['subtask']))}]</small>" if s["subtask"] else ""
    plan = plan_labels.get(s["plan_id"], "—" if not s["plan_shown"] else "unrecorded plan")
    plan_cell = f'<td title="{esc(plan)}">{esc(_plan_short(plan))}</td>'
    n_in = known_sum(c["input_tokens"] for c in s["calls"])
    n_out = known_sum(c["output_tokens"] for c in s["calls"])
    cells = (f'<td>step {s["index"]}{where}</td>'
             f'<td>{_badge(s["status"])}</td><td title="{esc(action)}">{esc(action)}</td>'
             f'<td title="{esc(result)}">{esc(result)}</td>{plan_cell}'
             f'<td class="tj-num">{len(s["calls"])} &middot; {tokens(n_in)}/{tokens(n_out)}</td>')
    return _view.select_row(s["id"], {"rollout": f"r{s['rollout']}", "status": s["status"], "tool": s["tool"]}, cells)


def _plans_html(r: Mapping[str, Any], key: str) -> str:
    if not r["plans"]:
        return ""
    parts = [f"<h5>plans ({len(r['plans'])})</h5>"]
    for p in r["plans"]:
        seen = ("shown at " + ", ".join(f"step {i.split('.')[-1]}" for i in p["seen_by"]) if p["seen_by"]
                else "shown at no step" if p["visible"] else "<b>never shown to the actor</b>")
        read = "\n\n".join(p["observations"])
        observations = ("" if not read else
                        f'<details data-key="{esc(key)}/{p["id"]}/obs"><summary>observations the reviser read '
                        f'({len(p["observations"])})</summary>{text_pre(read)}</details>')
        calls = _calls_html(p["calls"], f"{key}/{p['id']}")
        parts.append(f'<div data-plan="{p["id"]}"><b>{esc(p["label"])}</b> &middot; {seen}{text_pre(p["plan"])}'
                     f"{observations}{calls}</div>")
    return "".join(parts)


def _delegation_html(nodes: Sequence[Mapping[str, Any]], key: str) -> str:
    parts = [f"<h5>subtask decomposition by ROMA ({len(nodes)} nodes)</h5>"]
    for n in nodes:
        output = "" if n["output"] is None else text_pre(n["output"])
        error = f'<div class="tj-error">{esc(n["error"])}</div>' if n["error"] else ""
        calls = _calls_html(n["calls"], f"{key}/roma/{n['id']}")
        parts.append(f"<div><b>{esc(n['id'])}</b> [{esc(n['task_type'])}] {esc(n['status'])}: {esc(n['goal'])}"
                     f"{error}{output}{calls}</div>")
    return "".join(parts)


def rollout_detail_html(r: Mapping[str, Any], method: str, *, key: str = "") -> str:
    """One rollout: why it was made, how it ended, its vote or score, its plans (with the steps each
    was shown at), long-term memory before and after, its ROMA decomposition."""
    key = f"{key}/{r['id']}"
    seed = "no seed (greedy)" if r["seed"] is None else f"seed {r['seed']}"
    parts = [f"<div><b>rollout {r['index']}</b> {_badge(r['status'])} {esc(r['kind'])} &middot; {seed}"
             f"{' &middot; <b>chosen</b>' if r['chosen'] else ''}</div>"]
    if r["error"]:
        parts.append(f'<div class="tj-error">{esc(r["error"])}</div>')
    answer = "<i>none</i>" if r["answer"] is None else f"<code>{esc(r['answer'])}</code>"
    parts.append(f"<div>answer: {answer}{_ballot(r, method)}</div>")
    if r["note"]:
        parts.append(f"<div>note shown at every step: {esc(r['note'])}</div>")
    if r["tips_shown"]:
        parts.append("<div>tips shown: <ul>" + "".join(f"<li>{esc(t)}</li>" for t in r["tips_shown"]) + "</ul></div>")
    parts.append(_plans_html(r, key))
    if r["long_term_before"] or r["long_term_after"]:
        parts.append(_shown_html("long-term memory before", r["long_term_before"], f"{key}/lt0")
                     + _shown_html("long-term memory after", r["long_term_after"], f"{key}/lt1"))
    if r["delegation"] is not None:
        parts.append(_delegation_html(r["delegation"], key))
    return "".join(parts)


def step_detail_html(s: Mapping[str, Any], plan_labels: Mapping[str, str], *, key: str = "") -> str:
    """One step: thought, action, the tool call (arguments, observation) or the error, what the actor
    was shown (which plan, the memory, the feedback), the summary and critique, its model calls."""
    key = f"{key}/{s['id']}"
    where = f" &middot; subtask: {esc(s['subtask'])}" if s["subtask"] else ""
    parts = [f"<div><b>rollout {s['rollout']}, step {s['index']}</b> {_badge(s['status'])}{where}</div>",
             f"<div><b>thought</b>{text_pre(s['thought'])}</div>",
             f"<div><b>action</b> <code>{esc(s['action'] or '?')}</code>"
             + (f" &middot; tool {s['tool_latency_s']:.3f} s" if s["tool_latency_s"] is not None else "") + "</div>"]
    if s["arguments"]:
        parts.append(f"<div><b>arguments</b>{json_pre(s['arguments'])}</div>")
    if s["observation"] is not None:
        parts.append(f"<div><b>observation</b>{text_pre(s['observation'])}</div>")
    if s["answer"] is not None:
        parts.append(f"<div><b>final answer</b>{text_pre(s['answer'])}</div>")
    if s["error"]:
        parts.append(f'<div class="tj-error"><b>{esc(s["status"])}</b>: {esc(s["error"])}</div>')
    plan = plan_labels.get(s["plan_id"], "no plan" if not s["plan_shown"] else "a plan not among the recorded ones")
    parts += ["<h5>shown to the actor</h5>", _shown_html(f"plan: {plan}", s["plan_shown"], f"{key}/plan"),
              _shown_html("memory", s["memory_shown"], f"{key}/memory"),
              _shown_html("feedback", s["feedback_shown"], f"{key}/feedback")]
    if s["summary"] is not None:
        parts.append(f"<div><b>summary of this step</b> (for later memory){text_pre(s['summary'])}</div>")
    if s["critique"] is not None:
        parts.append(f"<div><b>critique</b> (shown at the next step){text_pre(s['critique'])}</div>")
    parts.append(_calls_html(s["calls"], f"{key}/calls"))
    return "".join(parts)


def _cached_cell(role: Mapping[str, Any]) -> str:
    return f"{role['cached']} of {role['recorded']}" if role["recorded"] else "not recorded"


def _roles_html(view: Mapping[str, Any]) -> str:
    rows = "".join(
        f"<tr><td>{esc(r['role'])}</td><td class='tj-num'>{r['calls']}</td><td class='tj-num'>{r['errors']}</td>"
        f"<td class='tj-num'>{tokens(r['input_tokens'])} / {tokens(r['output_tokens'])}</td>"
        f"<td class='tj-num'>{r['latency_s']:.3f}</td><td class='tj-num'>{_cached_cell(r)}</td></tr>"
        for r in view["roles"])
    return ("<table class='tj-roles'><thead><tr><th>role</th><th>calls</th><th>errors</th><th>tokens in / out</th>"
            f"<th>latency s</th><th>cached</th></tr></thead><tbody>{rows}</tbody></table>")


def _filters_html(views: Sequence[Mapping[str, Any]], hint: str, static: str | None = None) -> str:
    rollouts = sorted({r["id"] for v in views for r in v["rollouts"]}, key=lambda i: int(i[1:]))
    statuses = sorted({s["status"] for v in views for r in v["rollouts"] for s in r["steps"]})
    tools = sorted({s["tool"] for v in views for r in v["rollouts"] for s in r["steps"]})
    return (f"<div>{_view.filter_select('rollout', 'rollout', rollouts)}{_view.filter_select('status', 'status', statuses)}"
            f"{_view.filter_select('tool', 'tool', tools)}{_view.row_hint(hint, static)}</div>")


_CLICK = "click a rollout or a step to see it whole"


def _pane_html(view: Mapping[str, Any], *, label: str = "", filters: str = "") -> str:
    title = _view.pane_title(label)
    plan_labels = {p["id"]: p["label"] for r in view["rollouts"] for p in r["plans"]}
    head = _view.table_head("tj-table", [("step", ""), ("status", ""), ("action", ""),
                                         ("observation / answer / error", ""), ("plan shown", ""),
                                         ("calls · tokens", "tj-num")])
    method = view["selection"]["method"]
    rows = []
    for r in view["rollouts"]:
        rows.append(_view.expandable_row(_rollout_row(r, method), _view.detail_section(
            "tj-detail", r["id"], rollout_detail_html(r, method, key=label)), "tj-table"))
        rows += [_view.expandable_row(_step_row(s, plan_labels), _view.detail_section(
            "tj-detail", s["id"], step_detail_html(s, plan_labels, key=label)), "tj-table") for s in r["steps"]]
    return (f"{title}{_summary_html(view)}{_selection_html(view, label)}{filters}{head}<div>{''.join(rows)}</div>"
            f"<details data-key='{esc(label)}/roles'><summary>model calls per role</summary>{_roles_html(view)}"
            "</details>")


def trajectory_html(view: Mapping[str, Any]) -> str:
    """A trajectory as self-contained HTML: task and outcome, selection, filters (live only), the steps
    grouped by rollout, each row of a rollout or a step opening its detail block, per-role model calls."""
    filters = _filters_html([view], _CLICK)
    return _view.view_html(_pane_html(view, filters=filters), TRAJECTORY_CSS, data_view="trajectory")


def compare_trajectories_html(views: Sequence[Mapping[str, Any]], labels: Sequence[str]) -> str:
    """Trajectories side by side with one set of filters; a click selects that id in every pane."""
    if len(views) != len(labels):
        raise ValueError(f"{len(views)} trajectories but {len(labels)} labels")
    filters = _filters_html(views, "click a rollout or a step: the same one is shown in every trajectory", _CLICK)
    panes = "".join(f'<div class="tj-pane">{_pane_html(v, label=label)}</div>' for v, label in zip(views, labels))
    return _view.view_html(f'{filters}<div class="tj-compare">{panes}</div>', TRAJECTORY_CSS,
                     data_view="trajectory-comparison")


# --- saved trajectories ---


def _of_task(found: Sequence[Trajectory], task_id: str | None, run: int | None, where: Any) -> dict[str, Trajectory]:
    """One task's trajectories (of one run, or every run when ``run`` is None) by label; see
    :func:`saved_trajectories`."""
    found = [t for t in found if run is None or t.run == run]
    if not found:
        raise ValueError(f"no saved trajectory{'' if run is None else f' of run {run}'} under {where}")
    tasks = sorted({t.task_id for t in found})
    if task_id is None:
        grades = {i: {None if t.grade is None else t.grade.score for t in found if t.task_id == i} for i in tasks}
        task_id = next((i for i in tasks if len(grades[i]) > 1), tasks[0])
    chosen = sorted((t for t in found if t.task_id == task_id), key=lambda t: (t.config.get("name", ""), t.run))
    if not chosen:
        raise ValueError(f"no saved trajectory of task {task_id!r} under {where}; tasks: {tasks[:10]}")
    labels = [t.config.get("name", "") + ("" if run is not None else f" r{t.run}") for t in chosen]
    if len(set(labels)) < len(labels):  # two configurations of one name: tell them apart by hash
        labels = [f"{label}@{t.config_hash[:6]}" for label, t in zip(labels, chosen)]
    return dict(zip(labels, chosen))


def saved_trajectories(folder: str | Path, *, task_id: str | None = None, run: int | None = 0) -> dict[str, Trajectory]:
    """The agent trajectories an evaluation saved under ``folder`` (one configuration's folder, or a folder
    of several) for one task, by label: the configuration's name, with `` r<run>`` when ``run`` is
    None (every run). ``task_id=None``: the first task, by id, whose trajectories disagree on the
    grade, else the first task."""
    return _of_task(read_trajectories(folder), task_id, run, folder)


# --- widgets ---


TRAJECTORIES = _view.ViewKind(noun="trajectory", data=trajectory_to_view, ids=view_ids,
                        first=lambda view: f"r{view['selection']['chosen']}", find=find_in_view,
                        page=trajectory_html, compare=compare_trajectories_html)


class TrajectoryWidget(_view.SingleView):
    """One trajectory. State is the ``view`` dict (see :func:`trajectory_to_view`) plus
    ``selected_id`` (the clicked rollout ``r<i>`` or step ``r<i>.<n>``, synced with the browser);
    the HTML is rendered from ``view`` whenever it changes and ``selected`` is the selected rollout's
    or step's dict in it. The chosen rollout is selected first."""

    kind, data_trait = TRAJECTORIES, "view"
    view = traitlets.Dict()

    def __init__(self, trajectory: Trajectory | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        if trajectory is not None:
            self.show_trajectory(trajectory)

    def show_trajectory(self, trajectory: Trajectory) -> None:
        self.view = trajectory_to_view(trajectory)


class TrajectoryComparison(_view.LabelledComparison):
    """Trajectories side by side (e.g. two configurations on one task, or one configuration's runs);
    clicking a rollout or step selects the one of that id in every trajectory (``selected``: per
    label, its dict, or None where that trajectory has no such id).

    ``trajectories``: a mapping label -> :class:`Trajectory` (e.g. :func:`saved_trajectories`), or a
    sequence (labelled "trajectory 1", ...).
    """

    kind, data_trait = TRAJECTORIES, "views"
    views = traitlets.List()

    def show_trajectories(self, trajectories: Mapping[str, Trajectory] | Sequence[Trajectory]) -> None:
        self._compare(trajectories)


class TrajectoryPicker(widgets.VBox):
    """A dropdown of the tasks saved under ``folder`` (read once) above that task's trajectories side
    by side (:class:`TrajectoryComparison`, ``comparison``): every configuration found, of run
    ``run`` (None: every run). Each option says how many of them were graded correct. ``task_id``:
    the task shown first (None: as :func:`saved_trajectories` picks). The static HTML names the
    task shown, so an executed notebook says which one it shows."""

    def __init__(self, folder: str | Path, *, task_id: str | None = None, run: int | None = 0, **kwargs: Any):
        self.run = run
        self._found = read_trajectories(folder)
        self._where = folder
        first = _of_task(self._found, task_id, run, folder)
        shown = next(iter(first.values())).task_id
        self.picker = widgets.Dropdown(description="task", options=self._options(), value=shown)
        self.comparison = TrajectoryComparison(first)
        # says which task the panes show: in a saved notebook opened without running it, the menu has
        # no kernel to answer it, and this line tells the reader why the panes stay
        self.shown = widgets.HTML(self._shown_note(shown))
        super().__init__(children=[self.picker, self.shown, self.comparison], **kwargs)
        self.picker.observe(self._picked, names="value")

    @staticmethod
    def _shown_note(task: str) -> str:
        return (f"<small>showing task <code>{esc(task)}</code>; picking another needs the notebook's kernel "
                "(run the notebook, then pick)</small>")

    def _options(self) -> list[tuple[str, str]]:
        by_task: dict[str, list[Trajectory]] = {}
        for t in self._found:
            if self.run is None or t.run == self.run:
                by_task.setdefault(t.task_id, []).append(t)
        return [(f"{task} · {sum(t.grade is not None and t.grade.score == 1.0 for t in ts)}/{len(ts)} correct", task)
                for task, ts in sorted(by_task.items())]

    def _picked(self, change: dict[str, Any]) -> None:
        self.comparison.show_trajectories(_of_task(self._found, change["new"], self.run, self._where))
        self.shown.value = self._shown_note(change["new"])

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        static = f"<p>task <code>{esc(self.picker.value)}</code></p>" + self.comparison._repr_html_()
        return {**super()._repr_mimebundle_(**kwargs), "text/html": static}
