"""The world a simulated provider serves (its HTTP server is ``_provider.py``'s): models of planted
skill answering the tasks of a task file, and the latency and faults of a provider's attempts, the
same for the same seed.

The outcome rule. Task t has a difficulty d_t = ``difficulty_sd`` x z_t, z_t standard normal. Model m
of skill p (its skill on t's level, when skills are given per level) answers t with its gold with
probability P(m, t) = sigmoid(a_m - d_t), where a_m is the logit at which the mean of P over
difficulties N(0, difficulty_sd^2) is p: a skill is the model's accuracy on a task drawn at random,
and a hard task is hard for every model and every run (outcomes correlate within a task, as in real
evaluations). Rollout k of (m, t) is right when u(m, t, k) < P(m, t). Every draw (z_t, u, a fault, a
latency) is a hash of (seed, its key), not a step of a generator: it depends on its key alone, never
on the order or concurrency of the requests, so a run killed and resumed gets the answers of one
that was not.

What a request is for. The rollout k is the request's ``seed``: ``RemoteLM`` sends
``rollout_seed(id)`` for a request made inside ``lm.rollout(id)`` (``evaluate`` uses the run index,
the agent ``f"{run}:{rollout}"``, each at temperature > 0 its own seed); a request without one is
rollout None (every such call of (m, t) draws alike). The task is the one whose question is an input
field of the request (a single call's ``question``, the agent's ``task``, ROMA's root ``goal``),
else the whole last message, else the longest question the last message contains (a raw prompt).

What it answers. A request for a task: the task's gold as written (``str(answer)``, which the
project's exact, quasi-exact, numeric and contains graders accept) when the draw is right, else a
plausible wrong one (another number near a numeric gold; another task's gold for a text one),
in every answer field the request asks for (``answer``, ``output``); the agent's actor answers at
once (``action="final_answer"``). Every other field, and every request for no task (a planner's
subtasks, ROMA's subtask goals), is the scripted model's (``script_reply``), formatted for the
adapter that asked (JSON when the request names a ``response_format``). A request that is no DSPy
signature gets the answer as plain text, or a fixed text.

What a provider does besides. Each attempt at a request (the n-th arrival of the same body) draws
one fault: a 429 with a ``Retry-After`` header, a 429 without one, a 500, a stall (held past any
client timeout, then closed unanswered) or a dropped connection (closed unanswered at once), at the
rates of :class:`SimFaults`; every reply but a 429 waits its latency first, lognormal with the
median and 99th percentile of :class:`SimLatency`. Faults and latency do not change answers, so they
are not in the world's ``digest``. See design/simulated_provider.md.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from roma_lab.lm import ScriptedRequest, format_reply, script_reply

#: Output fields that carry a task's answer (a single call's and the agent's ``answer``, ROMA's ``output``).
ANSWER_FIELDS = ("answer", "output")
_NORMAL = statistics.NormalDist()
_Z99 = _NORMAL.inv_cdf(0.99)
_NO_TASK_TEXT = "simulated reply"
_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")


def uniform(*key: Any) -> float:
    """A uniform draw in (0, 1) that is a function of ``key`` alone (SHA-256 of its JSON)."""
    digest = hashlib.sha256(json.dumps(key, separators=(",", ":"), sort_keys=True).encode()).digest()
    return (int.from_bytes(digest[:8], "big") + 0.5) / 2.0**64


def _probability(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{what} is a probability in [0, 1], got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class SimModel:
    """A simulated model: ``skill``, its accuracy on a task drawn at random (a probability, or one per
    task level, ``{"L1": 0.9, "L3": 0.3}``, read from each task's ``metadata["level"]``), and its
    prices in USD per 1,000 prompt and completion tokens (both None: unpriced, its calls cost
    unknown, as an unpriced remote model's do)."""

    skill: float | Mapping[str, float]
    usd_per_1k_input: float | None = None
    usd_per_1k_output: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.skill, Mapping):
            if not self.skill:
                raise ValueError("a skill per level names at least one level")
            object.__setattr__(self, "skill", MappingProxyType(
                {str(level): _probability(p, f"skill of level {level!r}") for level, p in self.skill.items()}))
        else:
            object.__setattr__(self, "skill", _probability(self.skill, "a skill"))
        prices = (self.usd_per_1k_input, self.usd_per_1k_output)
        if (prices[0] is None) != (prices[1] is None):
            raise ValueError("give both prices (input and output per 1k tokens) or neither")
        if prices[0] is not None and not all(isinstance(p, int | float) and p >= 0 for p in prices):
            raise ValueError(f"prices are USD >= 0 per 1k tokens, got {prices}")

    def skill_on(self, level: Any) -> float:
        """The skill on a task of ``level`` (a per-level skill must name it)."""
        if not isinstance(self.skill, Mapping):
            return self.skill
        if str(level) not in self.skill:
            raise ValueError(f"no skill for level {level!r} (skills are given for {sorted(self.skill)})")
        return self.skill[str(level)]

    def cost(self, input_tokens: int, output_tokens: int) -> float | None:
        """A reply's price in USD; None when unpriced."""
        if self.usd_per_1k_input is None:
            return None
        return (input_tokens * self.usd_per_1k_input + output_tokens * self.usd_per_1k_output) / 1000.0


@dataclass(frozen=True, slots=True)
class SimLatency:
    """How long a reply takes: lognormal with this median and 99th percentile, in seconds (``p99_s``
    None: always the median; ``median_s`` 0: at once)."""

    median_s: float = 0.0
    p99_s: float | None = None

    def __post_init__(self) -> None:
        if not self.median_s >= 0:
            raise ValueError(f"median_s is >= 0, got {self.median_s!r}")
        if self.p99_s is not None and not (self.p99_s >= self.median_s and (self.p99_s == 0 or self.median_s > 0)):
            raise ValueError(f"p99_s is >= median_s > 0, got median {self.median_s!r}, p99 {self.p99_s!r}")

    @property
    def sigma(self) -> float:
        """The log-scale standard deviation fitted to the median and p99 (0 without a p99)."""
        if self.p99_s is None or self.median_s == 0:
            return 0.0
        return math.log(self.p99_s / self.median_s) / _Z99

    def seconds(self, u: float) -> float:
        """The latency at quantile ``u`` of the distribution."""
        return self.median_s * math.exp(self.sigma * _NORMAL.inv_cdf(u)) if self.median_s else 0.0


#: The faults an attempt may draw, in the order their rates are laid on [0, 1).
FAULTS = ("429-retry-after", "429", "500", "stall", "drop")


@dataclass(frozen=True, slots=True)
class SimFaults:
    """Per-attempt fault rates: a 429 with ``Retry-After: retry_after_s`` (``rate_limit_retry_after``),
    a 429 without one (``rate_limit``), a 500 (``server_error``), a stall held ``stall_s`` seconds
    (past the client's timeout) then closed unanswered (``stall``), a connection closed unanswered
    (``drop``). Their sum is at most 1."""

    rate_limit_retry_after: float = 0.0
    rate_limit: float = 0.0
    server_error: float = 0.0
    stall: float = 0.0
    drop: float = 0.0
    retry_after_s: int = 1
    stall_s: float = 3600.0

    def __post_init__(self) -> None:
        rates = self.rates
        for name, rate in zip(FAULTS, rates):
            _probability(rate, f"the rate of {name}")
        if sum(rates) > 1.0 + 1e-12:
            raise ValueError(f"fault rates sum to {sum(rates)} > 1")
        if isinstance(self.retry_after_s, bool) or not isinstance(self.retry_after_s, int) or self.retry_after_s < 0:
            raise ValueError(f"retry_after_s is whole seconds >= 0 (HTTP's Retry-After), got {self.retry_after_s!r}")
        if not self.stall_s > 0:
            raise ValueError(f"stall_s is > 0, got {self.stall_s!r}")

    @property
    def rates(self) -> tuple[float, ...]:
        return (self.rate_limit_retry_after, self.rate_limit, self.server_error, self.stall, self.drop)

    def draw(self, u: float) -> str | None:
        """The fault at draw ``u`` (one of :data:`FAULTS`), None for a reply."""
        edge = 0.0
        for name, rate in zip(FAULTS, self.rates):
            edge += rate
            if u < edge:
                return name
        return None


def _norm_text(text: str) -> str:
    return re.sub(r"[\W_]+", "", text.lower())


def _is_number(text: str) -> bool:
    return bool(_NUMBER.match(text.translate(str.maketrans("", "", "$%,"))))


class SimulatedWorld:
    """The answers, without a server: tasks (a ``TaskSet`` or Items, anything with ``item_id``,
    ``question``, ``answer`` and ``metadata``), models by name (a :class:`SimModel`, or its skill),
    the ``seed`` and the spread of task difficulty on the logit scale (see the module's rule)."""

    def __init__(self, tasks: Any, models: Mapping[str, SimModel | float | Mapping[str, float]], *, seed: int = 0,
                 difficulty_sd: float = 1.5):
        items = tuple(getattr(tasks, "items", tasks))
        if not items:
            raise ValueError("a simulated world needs at least one task")
        if not models:
            raise ValueError("a simulated world needs at least one model")
        if not difficulty_sd >= 0:
            raise ValueError(f"difficulty_sd is >= 0, got {difficulty_sd!r}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed is an integer, got {seed!r}")
        self.items = items
        self.seed = seed
        self.difficulty_sd = float(difficulty_sd)
        self.models = MappingProxyType({str(name): m if isinstance(m, SimModel) else SimModel(m)
                                        for name, m in models.items()})
        self._by_id = {str(it.item_id): it for it in items}
        if len(self._by_id) != len(items):
            raise ValueError("task ids repeat")
        self._by_question = {it.question.strip(): it for it in items}
        self._longest_first = sorted(items, key=lambda it: -len(it.question))
        self._text_golds = tuple(dict.fromkeys(str(it.answer).strip() for it in items
                                               if not _is_number(str(it.answer).strip())))
        # every (model, level) logit once, so a missing level fails here, not at a request
        self._logits = {(name, level): _skill_logit(model.skill_on(level), self.difficulty_sd)
                        for name, model in self.models.items()
                        for level in {self._level(it) for it in items}}

    @staticmethod
    def _level(item: Any) -> Any:
        return (getattr(item, "metadata", None) or {}).get("level")

    def digest(self) -> str:
        """What the answers depend on (tasks, skills, seed, difficulty spread), hashed."""
        world = {"tasks": [[str(it.item_id), it.question, str(it.answer), str(self._level(it))] for it in self.items],
                 "models": {name: m.skill if not isinstance(m.skill, Mapping) else dict(m.skill)
                            for name, m in sorted(self.models.items())},
                 "seed": self.seed, "difficulty_sd": self.difficulty_sd}
        return hashlib.sha256(json.dumps(world, sort_keys=True).encode()).hexdigest()[:16]

    def item(self, task_id: str) -> Any:
        return self._by_id[str(task_id)]

    def difficulty(self, task_id: str) -> float:
        """Task ``task_id``'s difficulty on the logit scale."""
        return self.difficulty_sd * _NORMAL.inv_cdf(uniform(self.seed, "difficulty", str(task_id)))

    def probability(self, model: str, task_id: str) -> float:
        """P(model answers task ``task_id`` with its gold)."""
        logit = self._logits[model, self._level(self.item(task_id))]
        if math.isinf(logit):
            return 1.0 if logit > 0 else 0.0
        return 1.0 / (1.0 + math.exp(self.difficulty(task_id) - logit))

    def expected_accuracy(self, model: str, task_ids: Iterable[str] | None = None) -> float:
        """The mean of :meth:`probability` over these tasks (default: all): what an evaluation of
        ``model`` on them estimates, where the skill is its mean over all tasks one could draw."""
        ids = [str(it.item_id) for it in self.items] if task_ids is None else [str(t) for t in task_ids]
        return sum(self.probability(model, t) for t in ids) / len(ids)

    def correct(self, model: str, task_id: str, rollout: int | None) -> bool:
        """Whether rollout ``rollout`` (a request's seed; None: none sent) of ``model`` on the task is right."""
        return uniform(self.seed, "outcome", model, str(task_id), rollout) < self.probability(model, task_id)

    def answer(self, model: str, task_id: str, rollout: int | None) -> str:
        """The answer of that rollout: the gold as written, or a plausible wrong answer."""
        item = self.item(task_id)
        gold = str(item.answer).strip()
        if self.correct(model, task_id, rollout):
            return gold
        return self._wrong(gold, uniform(self.seed, "wrong", model, str(task_id), rollout))

    def _wrong(self, gold: str, u: float) -> str:
        """A wrong answer no grader of the project takes for ``gold``: a number 1 to 9 away from a
        numeric gold (in its decimals), else another task's gold that neither equals nor contains it
        (nor is contained in it) once case, spaces and punctuation are removed."""
        if _is_number(gold):
            plain = gold.translate(str.maketrans("", "", "$%,"))
            step = int(u * 18)  # 1 to 9 up or down; up when down would cross zero
            shift = 1 + step % 9
            value = float(plain) + (shift if step < 9 or float(plain) < shift else -shift)
            decimals = len(plain.partition(".")[2]) if "." in plain and "e" not in plain.lower() else 0
            return f"{value:.{decimals}f}"
        key = _norm_text(gold)
        start = int(u * len(self._text_golds))
        for offset in range(len(self._text_golds)):
            other = self._text_golds[(start + offset) % len(self._text_golds)]
            other_key = _norm_text(other)
            if other_key and key not in other_key and other_key not in key:
                return other
        return "unknown" if "unknown" not in key else "none"

    def task_of(self, request: ScriptedRequest) -> Any | None:
        """The task a request is for (see the module), None for none."""
        for value in request.inputs.values():
            if (item := self._by_question.get(value.strip())) is not None:
                return item
        last = request.messages[-1] if request.messages else ""
        if (item := self._by_question.get(last.strip())) is not None:
            return item
        return next((it for it in self._longest_first if it.question in last), None)

    def respond(self, model: str, request: ScriptedRequest, rollout: int | None, *, as_json: bool
                ) -> tuple[str, Any | None, bool | None]:
        """(reply text, the task it answered or None, whether the answer is right or None)."""
        item = self.task_of(request)
        answer = None if item is None else self.answer(model, item.item_id, rollout)
        right = None if item is None else answer == str(item.answer).strip()
        if not request.outputs:  # not a DSPy signature: a raw prompt
            return (answer if answer is not None else _NO_TASK_TEXT), item, right
        fields = script_reply(request)
        if answer is not None:
            for name in ANSWER_FIELDS:
                if name in fields:
                    fields[name] = answer
            if "action" in fields:  # the agent's actor: answer now, no tool
                fields["action"], fields["arguments"] = "final_answer", "{}"
        return format_reply(fields, as_json), item, right


def _skill_logit(p: float, sd: float) -> float:
    """The logit a at which E[sigmoid(a - sd Z)] = p, Z standard normal (Gauss-Hermite quadrature)."""
    if p in (0.0, 1.0):
        return -math.inf if p == 0.0 else math.inf
    if sd == 0.0:
        return math.log(p / (1.0 - p))
    import numpy as np
    from scipy.optimize import brentq
    from scipy.special import expit

    nodes, weights = np.polynomial.hermite_e.hermegauss(96)
    weights = weights / weights.sum()
    return float(brentq(lambda a: float(weights @ expit(a - sd * nodes)) - p, -60.0, 60.0, xtol=1e-12))
