"""The agent's configuration: every design choice of the OAgents study as one frozen, serialisable value.

A config is recorded in every trajectory and named in every row, so a run can be re-created from
its files. Where the official OAgents code behaves differently from the paper, the paper's
behaviour is the default and the coded one is a named variant (``"official"``), so its effect can
be measured (design/agents.md lists each difference).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import ConfigDict, TypeAdapter

__all__ = ["PLANNING", "MEMORY", "TTS", "SELECTION", "QUERY_OPTIMIZATION", "ROLES", "AgentConfig", "PlanTips",
           "config_hash"]

PLANNING = ("none", "static", "revise")
MEMORY = ("current", "summary", "retrieval", "long_term")  # each adds to the one before it
TTS = ("none", "reflection", "best_of_n")
REFLECT_AT = ("step", "end")
SELECTION = ("list", "score", "vote")
QUERY_OPTIMIZATION = ("none", "reflect", "expand", "reflect+expand")
VARIANTS = ("paper", "official")
REANSWER_WITH = ("call", "rollout")
#: Model roles. Every role not named in ``AgentConfig.models`` is played by the actor's model.
ROLES = ("actor", "planner", "reviser", "summarizer", "memory", "step_reflector", "answer_reflector", "selector",
         "scorer", "query_rewriter", "decomposer", "answerer")


@dataclass(frozen=True, slots=True)
class PlanTips:
    """Heuristics mined from failed trajectories (``mine_tips``), with where they came from.

    ``source_task_ids`` and ``source_splits`` let ``roma_lab.evaluate`` refuse to evaluate a task the tips
    were mined from, so tips never leak the evaluation split.
    """

    __pydantic_config__ = ConfigDict(extra="forbid")
    tips: tuple[str, ...]
    source_splits: tuple[str, ...]
    source_task_ids: tuple[str, ...]
    model: str
    error: str | None = None  # why the miner gave no tips (its call failed), None when it answered


def _choice(name: str, value: Any, options: tuple[str, ...]) -> None:
    if value not in options:
        raise ValueError(f"{name} must be one of {options}, got {value!r}")


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """One agent design. Fields are grouped as in the paper; see design/agents.md for each choice.

    Planning: ``planning`` none | static (one fixed manual workflow for every task) | revise (a
    model-written plan revised every ``revise_every`` steps from the observations since the last
    plan). ``revision_visibility="official"`` is the official code: no revision when
    ``revise_every == 1`` and a revised plan the actor never reads. ``subtasks`` first delegates a
    decomposition to ROMA (each subtask solved with the same tools, ``subtask_steps`` steps each).
    ``tips`` are shown to the planner and the actor (``tips_usage="paper"``); ``"official"`` runs
    without them and retries once with them only when the answer fails the gold check (it uses gold
    answers, and every row says so).

    Memory: ``current`` shows the last ``memory_window`` steps; ``summary`` adds a model summary of
    each older step; ``retrieval`` shows only the ``retrieval_k`` older summaries BM25 finds most
    relevant; ``long_term`` adds a memory fused every step and carried across the tasks of one run
    (``long_term_visibility="official"``: computed and discarded, as the official code does).

    Test-time scaling: ``reflection`` (``reflect_at="step"``: a critique of each step is shown at
    the next; ``"end"``: the answer is judged and, if rejected, the task is re-tried once with the
    critique) or ``best_of_n`` (``n_rollouts`` isolated rollouts, one chosen by ``selection``:
    list-wise, per-rollout scores, or a majority vote). ``rollout_isolation="official"`` shares one
    tool state across rollouts, as the official code shares its interpreter.

    Search (environments with a corpus): the first ``search_sources`` sources, ``search_k``
    passages, ``query_optimization`` reflect (model rewrite) and/or expand (synonym variants from the
    benchmark's thesaurus). ``reanswer``: one more attempt when the answer is empty or "unable to determine":
    ``reanswer_with="call"``, one call of the answerer from the failed attempt's steps (none when that
    attempt already ended with the answerer's call, which would only repeat it); ``"rollout"``, a
    whole new rollout told why, which repeats the trajectory.
    ``models`` names a model (``roma_lab.lm.resolve_lm`` name) per role; an unnamed role uses the actor.
    ``temperature`` and ``max_tokens`` apply to every call (the cap bounds a runaway generation;
    replies here are short); with sampling the run index seeds every call. ``thought``: the actor
    writes a free-text thought before each action (ReAct); off by default, for its cost on the
    embedded model (design/agents.md). ``repeat_guard``: a call of an idempotent tool (``Tool.idempotent``:
    search, read_file) identical to an earlier one of the same rollout is not run again; the actor is told so, with the
    earlier result, the step counts as a failed one (``repeated_call``, counted in every row), and the
    rollout stops there and is asked for its answer as at the step limit (no more steps burnt on errors). The last of ``max_steps`` steps tells the actor to answer now;
    ``answer_at_limit``: when it still calls a tool, one more call (role ``answerer``, the actor's model
    unless named) asks for the answer from the steps so far, with no tool, as smolagents' agents do
    at their step limit (``provide_final_answer``, the official code's base).
    """

    __pydantic_config__ = ConfigDict(extra="forbid")
    name: str = "baseline"
    max_steps: int = 6
    max_consecutive_errors: int = 3
    max_wall_s: float | None = None
    temperature: float = 0.0
    max_tokens: int = 512
    thought: bool = False
    repeat_guard: bool = True
    planning: str = "none"
    revise_every: int = 3
    revision_visibility: str = "paper"
    subtasks: bool = False
    subtask_steps: int = 3
    tips: PlanTips | None = None
    tips_usage: str = "paper"
    memory: str = "current"
    memory_window: int = 2
    retrieval_k: int = 2
    long_term_visibility: str = "paper"
    tts: str = "none"
    reflect_at: str = "end"
    n_rollouts: int = 1
    selection: str = "vote"
    rollout_isolation: str = "paper"
    search_sources: int = 1
    search_k: int = 3
    query_optimization: str = "none"
    reanswer: bool = True
    reanswer_with: str = "call"
    answer_at_limit: bool = True
    models: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, options in (("planning", PLANNING), ("memory", MEMORY), ("tts", TTS), ("reflect_at", REFLECT_AT),
                              ("selection", SELECTION), ("query_optimization", QUERY_OPTIMIZATION),
                              ("revision_visibility", VARIANTS), ("long_term_visibility", VARIANTS),
                              ("rollout_isolation", VARIANTS), ("tips_usage", VARIANTS),
                              ("reanswer_with", REANSWER_WITH)):
            _choice(name, getattr(self, name), options)
        for name in ("max_steps", "max_consecutive_errors", "max_tokens", "revise_every", "subtask_steps",
                     "memory_window", "retrieval_k", "n_rollouts", "search_sources", "search_k"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if not 0.0 <= self.temperature <= 2.0:
            raise ValueError(f"temperature must be in [0, 2], got {self.temperature!r}")
        if self.max_wall_s is not None and not self.max_wall_s > 0:
            raise ValueError(f"max_wall_s must be > 0 or None, got {self.max_wall_s!r}")
        if (self.tts == "best_of_n") != (self.n_rollouts > 1):
            raise ValueError("n_rollouts > 1 exactly when tts='best_of_n' (it is read by best-of-N only); "
                             f"got tts={self.tts!r}, n_rollouts={self.n_rollouts}")
        if self.tts == "best_of_n" and self.temperature == 0:
            raise ValueError("best-of-N needs temperature > 0: at temperature 0 every rollout is the same")
        if self.revision_visibility == "official" and self.planning != "revise":
            raise ValueError("revision_visibility='official' applies to planning='revise' only")
        if self.tips_usage == "official" and self.tips is None:
            raise ValueError("tips_usage='official' (gold-check retry with tips) needs tips")
        if self.rollout_isolation == "official" and self.tts != "best_of_n":
            raise ValueError("rollout_isolation='official' applies to tts='best_of_n' only")
        unknown = set(self.models) - set(ROLES)
        if unknown:
            raise ValueError(f"unknown roles in models: {sorted(unknown)}; roles are {ROLES}")
        object.__setattr__(self, "models", dict(self.models))  # a private copy: the caller's dict may change

    @property
    def uses_gold_answers(self) -> bool:
        return self.tips_usage == "official"

    def to_dict(self) -> dict[str, Any]:
        return json.loads(_ADAPTER.dump_json(self))

    def to_json(self) -> str:
        return _ADAPTER.dump_json(self, indent=1).decode()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgentConfig:
        return _ADAPTER.validate_python(data)

    @classmethod
    def from_json(cls, text: str | bytes) -> AgentConfig:
        return _ADAPTER.validate_json(text)


_ADAPTER = TypeAdapter(AgentConfig)


def config_hash(config: AgentConfig) -> str:
    """SHA-256 of the behaviour-defining fields (everything but ``name``)."""
    from roma_lab.results import parameters_hash

    data = asdict(config)
    data.pop("name")
    return parameters_hash(data)


def run_label(config: AgentConfig) -> str:
    """``<name>@<first 10 hex of the config hash>``: a changed configuration never resumes another's rows."""
    return f"{config.name}@{config_hash(config)[:10]}"
