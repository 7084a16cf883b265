"""A simulated OpenAI-compatible provider on loopback: models of planted skill answering the tasks of
a task file, with a provider's latency, faults and prices, and the same answers for the same seed.

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
median and 99th percentile of :class:`SimLatency`. A reply counts its tokens as whitespace words of
the prompt and of the reply (``count_words``) and, for a priced model, reports its cost in USD as
LiteLLM reads a provider's own figure (the ``x-litellm-response-cost`` header), so the project's cost
path prices it with no price list. ``GET /v1/models`` names every model with a digest of the world
(tasks, skills, seed, difficulty) in ``meta``: ``ServerLM`` keys DSPy's request cache by it, so a
simulator with another world on a reused port is another server. Faults and latency are not in the
digest: a run with faults resumes from a cache made without.

The server is asyncio's, on 127.0.0.1 only (any other host is refused), in a thread of its own:
hand-written HTTP/1.1 (keep-alive, Content-Length bodies) because a stall and a dropped connection
need the socket, which ASGI servers (uvicorn) do not hand to an application. See
design/simulated_provider.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import statistics
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ._scripted import ScriptedRequest, count_words, format_reply, read_texts, script_reply

__all__ = ["LOOPBACK", "SimCall", "SimFaults", "SimLatency", "SimModel", "SimulatedProvider", "SimulatedWorld",
           "simulated_provider"]

LOOPBACK = "127.0.0.1"
#: The header LiteLLM reads a provider's own price of a reply from (as ``llm_provider-x-litellm-response-cost``).
COST_HEADER = "x-litellm-response-cost"
#: Output fields that carry a task's answer (a single call's and the agent's ``answer``, ROMA's ``output``).
ANSWER_FIELDS = ("answer", "output")
_NORMAL = statistics.NormalDist()
_Z99 = _NORMAL.inv_cdf(0.99)
_NO_TASK_TEXT = "simulated reply"
_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")


def _uniform(*key: Any) -> float:
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
        return self.difficulty_sd * _NORMAL.inv_cdf(_uniform(self.seed, "difficulty", str(task_id)))

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
        return _uniform(self.seed, "outcome", model, str(task_id), rollout) < self.probability(model, task_id)

    def answer(self, model: str, task_id: str, rollout: int | None) -> str:
        """The answer of that rollout: the gold as written, or a plausible wrong answer."""
        item = self.item(task_id)
        gold = str(item.answer).strip()
        if self.correct(model, task_id, rollout):
            return gold
        return self._wrong(gold, _uniform(self.seed, "wrong", model, str(task_id), rollout))

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


@dataclass(frozen=True, slots=True)
class SimCall:
    """One attempt the provider received, at ``arrived_s`` (``time.monotonic()``): ``outcome`` is "ok",
    one of :data:`FAULTS`, or "unknown-model"; ``task_id``/``correct`` None for a request for no task
    (``correct`` is also None for a fault)."""

    arrived_s: float
    model: str
    task_id: str | None
    rollout: int | None
    attempt: int
    outcome: str
    correct: bool | None
    latency_s: float
    input_tokens: int
    output_tokens: int
    cost: float | None


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 411: "Length Required", 429: "Too Many Requests",
            500: "Internal Server Error"}


class SimulatedProvider:
    """A :class:`SimulatedWorld` served over HTTP on 127.0.0.1 while inside ``with``: ``base_url`` is
    its ``/v1`` root (``$ROMA_LAB_API_BASE``), ``calls`` every attempt received, in arrival order,
    ``max_in_flight`` the most completion requests it held at once."""

    def __init__(self, world: SimulatedWorld, *, latency: SimLatency = SimLatency(), faults: SimFaults = SimFaults(),
                 host: str = LOOPBACK, port: int = 0):
        if host != LOOPBACK:
            raise ValueError(f"the simulated provider binds {LOOPBACK} only (loopback), not {host!r}")
        self.world, self.latency, self.faults = world, latency, faults
        self._port = port
        self.calls: list[SimCall] = []
        self.in_flight = self.max_in_flight = 0
        self._attempts: dict[str, int] = {}
        self._loop = self._server = self._thread = None
        self._connections: set = set()

    @property
    def port(self) -> int:
        """The port it serves (served: a restart at this port is the same server to a client's records)."""
        if not self._port:
            raise RuntimeError("the simulated provider has not started (use it inside `with`)")
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/v1"

    def __enter__(self) -> SimulatedProvider:
        import asyncio

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="simulated-provider", daemon=True)
        self._thread.start()
        start = asyncio.start_server(self._connection, LOOPBACK, self._port, backlog=2048)
        try:
            self._server = asyncio.run_coroutine_threadsafe(start, self._loop).result(timeout=30)
        except BaseException:
            self._stop_loop()
            raise
        self._port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: Any) -> None:
        import asyncio

        async def close() -> None:
            self._server.close()
            for task in list(self._connections):  # stalled and slow requests end with the server
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await self._server.wait_closed()

        try:
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=30)
        finally:
            self._stop_loop()
            self._server = None

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()

    async def _connection(self, reader, writer) -> None:
        import asyncio

        task = asyncio.current_task()
        self._connections.add(task)
        try:
            while True:  # HTTP/1.1 keep-alive: requests one after another on one connection
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                request_line, *lines = head.decode("latin-1").split("\r\n")
                method, _, rest = request_line.partition(" ")
                path = rest.rpartition(" ")[0].split("?")[0]
                headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines if line)}
                if "chunked" in headers.get("transfer-encoding", "").lower():
                    await self._send(writer, 411, {"error": {"message": "send a Content-Length body"}})
                    return
                try:
                    body = await reader.readexactly(int(headers.get("content-length") or 0))
                except (asyncio.IncompleteReadError, ConnectionError, ValueError):
                    return
                if not await self._route(method, path, body, writer) or headers.get("connection", "").lower() == "close":
                    return
        except ConnectionError:
            return
        except asyncio.CancelledError:
            # the server is closing (``__exit__`` cancels held requests): end quietly, since Python
            # 3.11's stream protocol raises in a callback on a connection task that ends cancelled
            return
        finally:
            self._connections.discard(task)
            writer.close()

    async def _send(self, writer, status: int, payload: dict, headers: Mapping[str, str] = MappingProxyType({})) -> None:
        data = json.dumps(payload).encode()
        head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}", "Content-Type: application/json",
                f"Content-Length: {len(data)}", *(f"{k}: {v}" for k, v in headers.items())]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)
        await writer.drain()

    async def _route(self, method: str, path: str, body: bytes, writer) -> bool:
        """Answer one request; False when the connection is to be closed."""
        if method == "GET" and path.rstrip("/").endswith("/models"):
            digest = self.world.digest()
            await self._send(writer, 200, {"object": "list", "data": [
                {"id": name, "object": "model", "owned_by": "roma_lab-simulated", "meta": {"world": digest}}
                for name in self.world.models]})
            return True
        if method != "POST" or not path.endswith("/chat/completions"):
            await self._send(writer, 404, {"error": {"message": f"no route {method} {path}"}})
            return True
        try:
            request = json.loads(body or b"{}")
            messages = request["messages"]
        except (ValueError, KeyError, TypeError):
            await self._send(writer, 400, {"error": {"message": "a chat completion body with messages"}})
            return True
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._complete(request, messages, body, writer)
        finally:
            self.in_flight -= 1

    async def _complete(self, request: dict, messages: list, body: bytes, writer) -> bool:
        import asyncio

        arrived = time.monotonic()
        model = str(request.get("model", ""))
        seed = request.get("seed")
        rollout = seed if isinstance(seed, int) and not isinstance(seed, bool) else None
        key = hashlib.sha256(body).hexdigest()
        attempt = self._attempts.get(key, 0)  # the event loop's one thread: no lock needed
        self._attempts[key] = attempt + 1
        task_id = None

        def record(outcome: str, latency_s: float = 0.0, correct: bool | None = None, n_in: int = 0, n_out: int = 0,
                   cost: float | None = None) -> None:
            self.calls.append(SimCall(arrived, model, task_id, rollout, attempt, outcome, correct, latency_s, n_in,
                                      n_out, cost))

        if model not in self.world.models:
            record("unknown-model")
            await self._send(writer, 404, {"error": {"message": f"model {model!r} is not served here "
                                                                f"(serving {sorted(self.world.models)})",
                                                     "type": "invalid_request_error", "code": "model_not_found"}})
            return True
        scripted = _read_body(model, request, messages)
        text, item, right = self.world.respond(model, scripted, rollout, as_json=bool(request.get("response_format")))
        task_id = None if item is None else str(item.item_id)
        fault = self.faults.draw(_uniform(self.world.seed, "fault", key, attempt))
        latency = self.latency.seconds(_uniform(self.world.seed, "latency", key, attempt))
        if fault in ("429-retry-after", "429"):  # refused at once, as a rate limiter does
            record(fault)
            retry = {"Retry-After": str(self.faults.retry_after_s)} if fault == "429-retry-after" else {}
            await self._send(writer, 429, {"error": {"message": "simulated rate limit", "type": "rate_limit_error"}},
                             retry)
            return True
        if fault == "stall":
            record(fault, self.faults.stall_s)
            await asyncio.sleep(self.faults.stall_s)
            writer.transport.abort()
            return False
        await asyncio.sleep(latency)
        if fault == "drop":
            record(fault, latency)
            writer.transport.abort()
            return False
        if fault == "500":
            record(fault, latency)
            await self._send(writer, 500, {"error": {"message": "simulated internal error", "type": "server_error"}})
            return True
        n_in, n_out = count_words(scripted, text)
        cost = self.world.models[model].cost(n_in, n_out)
        record("ok", latency, right, n_in, n_out, cost)
        payload = {"id": f"sim-{key[:12]}-{attempt}", "object": "chat.completion", "created": int(time.time()),
                   "model": model, "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                                "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}}
        await self._send(writer, 200, payload, {} if cost is None else {COST_HEADER: repr(cost)})
        return True


def _read_body(model: str, request: dict, messages: list) -> ScriptedRequest:
    """A chat body's texts as the scripted model reads a request (system first, then the rest)."""

    def text(content: Any) -> str:
        if isinstance(content, list):  # OpenAI's content parts
            return "".join(part.get("text", "") for part in content if isinstance(part, dict))
        return content if isinstance(content, str) else ""

    system = "\n".join(text(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "system")
    rest = tuple(text(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") != "system")
    temperature = request.get("temperature")
    return read_texts(model, temperature if isinstance(temperature, int | float) else None, system, rest)


@contextlib.contextmanager
def simulated_provider(tasks: Any, models: Mapping[str, SimModel | float | Mapping[str, float]], *, seed: int = 0,
                       difficulty_sd: float = 1.5, latency: SimLatency = SimLatency(), faults: SimFaults = SimFaults(),
                       host: str = LOOPBACK, port: int = 0) -> Iterator[SimulatedProvider]:
    """Serve ``models`` answering ``tasks`` on 127.0.0.1 while the block runs::

        with simulated_provider(tasks, {"strong": 0.8, "weak": 0.4}, seed=0) as sim:
            os.environ[ENV.api_base] = sim.base_url   # $ROMA_LAB_API_BASE; then resolve_lm("openai/strong")

    ``tasks`` is a ``TaskSet`` (``roma_lab.evaluate.tasks_from`` reads a task file) or Items;
    ``port`` 0 lets the OS pick one. See :class:`SimulatedWorld` for the answers, :class:`SimLatency`
    and :class:`SimFaults` for the rest."""
    world = SimulatedWorld(tasks, models, seed=seed, difficulty_sd=difficulty_sd)
    with SimulatedProvider(world, latency=latency, faults=faults, host=host, port=port) as provider:
        yield provider
