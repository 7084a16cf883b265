"""Run one configuration over tasks x R runs: tidy per-(task, run) rows, trajectories as JSON, resumable.

Rows go through ``roma_lab.bench.run_benchmark`` (the project's resumable graded runner, one run
file per configuration, tidy rows the results vocabulary reads), called once per (task, run):
its ``system(question)`` contract cannot tell apart suite tasks that share a prompt but not a
hidden state, so each call is bound to its task. Each trajectory is graded by the task's grader
and written atomically before its row, so an interrupted run resumes with the unfinished (task,
run) pairs only. Pairs run at once, as many as the actor's model allows (design/agents.md,
"Independent work runs at once"). Layout under ``out_dir/<name>@<hash>/``: ``config.json``, ``runs.csv``,
``trajectories/r<run>/<benchmark>__<item_id>.json``.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from roma_lab.bench import Grade, Item, run_benchmark
from roma_lab.results import write_text_atomic

from ._agent import Agent
from ._config import AgentConfig, config_hash
from ._env import AgentTask
from ._tips import SplitLeakError
from ._types import RecordedGrade, Trajectory, read_trajectory

__all__ = ["ROW_COLUMNS", "read_trajectories", "run_agent", "run_label", "trajectory_rows_df"]

ROW_COLUMNS = ("config", "config_hash", "benchmark", "task_id", "split", "stratum", "run", "seed", "temperature",
               "answer", "correct", "status", "agent_status", "steps", "tool_calls", "repeated_calls", "model_calls", "input_tokens",
               "output_tokens", "cost", "wall_s", "rollouts", "reanswered", "uses_gold_answers", "grader", "error")
_REDACTED = "[question redacted: this benchmark's items are not stored in the clear]"


def run_label(config: AgentConfig) -> str:
    """``<name>@<first 10 hex of the config hash>``: a changed configuration never resumes another's rows."""
    return f"{config.name}@{config_hash(config)[:10]}"


def _file_name(item: Item) -> str:
    from roma_lab.results import safe_name

    return safe_name(f"{item.benchmark}__{item.item_id}") + ".json"


def _recorded(grade: Grade) -> RecordedGrade:
    score = None if math.isnan(grade.score) else grade.score
    return RecordedGrade(label=grade.label, score=score, grader=grade.grader, error=grade.error, raw=grade.raw,
                         details=dict(grade.details))


@dataclass(frozen=True, slots=True)
class _RecordedGrader:
    """Hands ``run_benchmark`` the grade already stored in the trajectory (graded before saving)."""

    name: str = "recorded grade"

    def __call__(self, item: Item, trajectory: Trajectory) -> Grade:
        g = trajectory.grade
        return Grade(label=g.label, score=math.nan if g.score is None else g.score, grader=g.grader, raw=g.raw,
                     error=g.error, details=g.details)


def _check_tips(config: AgentConfig, tasks: Sequence[AgentTask]) -> None:
    tips = config.tips
    if tips is None:
        return
    source = set(tips.source_task_ids)
    bad = [t.item.item_id for t in tasks if t.item.item_id in source or t.split in tips.source_splits]
    if bad:
        raise SplitLeakError(f"{len(bad)} tasks are from the split or the tasks the plan tips were mined from "
                             f"({tips.source_splits}), e.g. {bad[:3]}; evaluate tips on a disjoint split")


def _known(value: Any, kind: type) -> Any:
    """A usage total as a row holds it (``kind``: int or float): None where unknown (<NA>, NaN)."""
    import pandas as pd

    return None if pd.isna(value) else kind(value)


def _row(t: Trajectory, label: str) -> dict[str, Any]:
    usage = t.usage_df().iloc[-1]  # the total row: the one usage count, over the trajectory's run
    grade = t.grade
    return {
        "config": label, "config_hash": t.config_hash, "benchmark": t.benchmark, "task_id": t.task_id,
        "split": t.split, "stratum": t.stratum, "run": t.run, "seed": t.rollouts[0].seed, "temperature": t.temperature,
        "answer": t.answer, "correct": None if grade is None or grade.score is None else grade.score == 1.0,
        "status": grade.label if grade else None, "agent_status": t.status, "steps": t.n_steps,
        "tool_calls": t.n_tool_calls, "repeated_calls": t.n_repeated_calls, "model_calls": int(usage["calls"]),
        "input_tokens": _known(usage["input_tokens"], int), "output_tokens": _known(usage["output_tokens"], int),
        "cost": _known(usage["cost"], float), "wall_s": t.wall_s, "rollouts": len(t.rollouts),
        "reanswered": t.reanswered, "uses_gold_answers": t.uses_gold_answers,
        "grader": grade.grader if grade else None,
        "error": (grade.error if grade and grade.error else None) or t.final_rollout.error,
    }


def trajectory_rows_df(trajectories: Sequence[Trajectory], label: str | None = None):
    """One tidy row per trajectory (``ROW_COLUMNS``); ``label`` defaults to the config's run label."""
    import pandas as pd

    rows = [_row(t, label or run_label(AgentConfig.from_dict(t.config))) for t in trajectories]
    return pd.DataFrame(rows, columns=list(ROW_COLUMNS))


def read_trajectories(folder: str | Path) -> list[Trajectory]:
    """Every trajectory saved under ``folder`` (a run label folder or its ``trajectories/``), sorted by path."""
    return [read_trajectory(p) for p in sorted(Path(folder).rglob("*.json"))
            if p.parent.name.startswith("r") and p.parent.parent.name == "trajectories"]


def _redacted(text: str, secrets: Sequence[str]) -> str:
    """The trajectory JSON ``text`` with each of ``secrets`` (a private item's question and gold
    answer) replaced in every string it holds.

    A prompt carries the question as written or inside JSON it builds (escaped once, with or without
    non-ASCII escapes), so each of those forms is replaced where it stands as words (a numeric answer
    such as "8" is not in "805"); a judge's reply or a correct prediction carries the answer. A string
    that still holds a secret as the string-match grader reads it (``normalize_answer``: case,
    articles and punctuation aside, e.g. "the keepers" for "The Keepers") is replaced whole. If a
    string still holds a secret, the file is not written: a private item must never reach the disk
    in the clear. Numbers (token counts, latencies) are not the item's text and are kept."""
    from roma_lab.bench import normalize_answer

    forms = sorted({form for secret in secrets if secret
                    for form in (secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1])},
                   key=len, reverse=True)
    as_words = re.compile("|".join(rf"(?<!\w){re.escape(form)}(?!\w)" for form in forms) or r"(?!)")
    # padded, so that containment is a whole-token run, as the string-match grader matches
    needles = {f" {n} " for n in map(normalize_answer, secrets) if n}

    def holds(value: str) -> bool:
        parts = value.split(_REDACTED)  # a short answer can be part of the marker's own text
        normal = f" {normalize_answer(' '.join(parts))} "
        return any(as_words.search(part) for part in parts) or any(needle in normal for needle in needles)

    def scrub(value: Any) -> Any:
        if isinstance(value, str):
            value = _REDACTED.join(as_words.sub(_REDACTED, part) for part in value.split(_REDACTED))
            return _REDACTED if holds(value) else value
        if isinstance(value, list):
            return [scrub(v) for v in value]
        if isinstance(value, dict):
            return {k: scrub(v) for k, v in value.items()}
        return value

    def strings(value: Any):
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for key, v in value.items():
                yield key
                yield from strings(v)
        elif isinstance(value, list):
            for v in value:
                yield from strings(v)

    redacted = scrub(json.loads(text))
    if any(holds(s) for s in strings(redacted)):  # dictionary keys are not scrubbed
        raise RuntimeError("a private question or answer survived redaction; the trajectory was not written")
    return json.dumps(redacted, indent=1, ensure_ascii=False)


def _refuse_caching_models(agent: Agent) -> None:
    """Private items must not reach a completion cache: ours records each request's messages (the
    question), DSPy's each reply (a correct answer)."""
    from roma_lab.lm import CachingEngine

    cached = sorted({role for role, lm in agent._lms.items()
                     if getattr(lm, "cache", False) or isinstance(getattr(lm, "engine", None), CachingEngine)})
    if cached:
        raise ValueError(f"private items (BrowseComp) must stay out of completion caches, and the model of {cached} "
                         "caches completions; pass a model name (resolved without a cache) or one made with cache=False")


def run_agent(config: AgentConfig, tasks: Sequence[AgentTask], *, out_dir: str | Path, runs: int = 1, lm: Any = None,
              roles: Mapping[str, Callable[..., Any]] | None = None, progress: bool = True):
    """Run ``config`` on every task, ``runs`` times (run index = seed when sampling), and return one
    tidy row per (task, run) (``ROW_COLUMNS``) in task order within run order.

    (task, run) pairs run concurrently, as many at once as the actor's model allows
    (``roma_lab.lm.max_concurrency``; at 1, one after the other in that order); each trajectory file
    and its row are written as the pair finishes. Finished (task, run) pairs are skipped on a rerun
    with the same ``out_dir``; a (task, run) whose system call raised is re-run. With
    ``memory="long_term"`` the long-term memory is carried from task to task within a run, in task
    order, from the trajectory files (so a resumed run carries exactly what an uninterrupted one
    would): the tasks of a run are then a chain, run one after the other, and only runs overlap.
    """
    import pandas as pd
    from tqdm.auto import tqdm

    from roma_lab._concurrent import concurrent_map
    from roma_lab.lm import max_concurrency

    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    keys = [(t.item.benchmark, t.item.item_id) for t in tasks]
    if len(set(keys)) != len(keys):
        raise ValueError("tasks contain duplicate (benchmark, item_id) pairs")
    _check_tips(config, tasks)
    agent = Agent(config, lm=lm, roles=roles)
    agent._setup()  # a missing model fails here, once, not as one error row per task
    if any(t.private for t in tasks):
        _refuse_caching_models(agent)
    label = run_label(config)
    root = Path(out_dir) / label
    write_text_atomic(root / "config.json", config.to_json())
    carry = config.memory == "long_term" and config.long_term_visibility == "paper"
    bar_lock = threading.Lock()

    def one(run: int, task: AgentTask, long_term: str, bar) -> tuple[dict[str, Any], str | None]:
        """Run (or read back) one (task, run): its row and the long-term memory it leaves (None when
        nothing was saved); the trajectory file is written before the row."""
        path = root / "trajectories" / f"r{run}" / _file_name(task.item)

        def system(question: str) -> Trajectory:
            trajectory = agent.run(task, run=run, long_term=long_term)
            trajectory = replace(trajectory, grade=_recorded(task.grader(task.item, trajectory)))
            text = trajectory.to_json()
            if task.private:
                text = _redacted(text, (task.item.question, str(task.item.answer)))
                # runs.csv gets the prediction and the grader's reply from the redacted copy too
                trajectory = Trajectory.from_json(text)
            write_text_atomic(path, text)
            return trajectory

        result = run_benchmark([task.item], system, _RecordedGrader(), out_path=root / "runs.csv",
                               system_name=f"{label}/r{run}", progress=False, redacted=True)
        with bar_lock:
            bar.update(1)
        if path.exists():
            saved = read_trajectory(path)
            return _row(saved, label), saved.final_rollout.long_term_after
        # the system call raised (its error is in runs.csv); nothing was saved
        error = result["error"].iloc[0]
        return dict.fromkeys(ROW_COLUMNS) | {
            "config": label, "config_hash": config_hash(config), "benchmark": task.item.benchmark,
            "task_id": task.item.item_id, "split": task.split, "stratum": task.stratum, "run": run,
            "temperature": config.temperature, "status": "system_error",
            "error": error if isinstance(error, str) and error else "no trajectory file was saved"}, None

    def chain(run: int, bar) -> list[dict[str, Any]]:
        """The tasks of one run in task order, each shown the long-term memory the previous one left."""
        rows, long_term = [], ""
        for task in tasks:
            row, after = one(run, task, long_term, bar)
            rows.append(row)
            long_term = long_term if after is None else after
        return rows

    workers = max_concurrency(agent._lms["actor"])
    with tqdm(total=runs * len(tasks), desc=label, disable=not progress) as bar:
        if carry:
            by_run = concurrent_map(lambda run: chain(run, bar), range(runs), workers=workers)
            rows = [row for run_rows in by_run for row in run_rows]
        else:
            pairs = [(run, task) for run in range(runs) for task in tasks]
            rows = [row for row, _ in concurrent_map(lambda pair: one(*pair, "", bar), pairs, workers=workers)]
    return pd.DataFrame(rows, columns=list(ROW_COLUMNS))
