"""A :class:`SimulatedWorld` served as an OpenAI-compatible provider on 127.0.0.1 (the world's rules are
``_world.py``'s).

A reply counts its tokens as whitespace words of the prompt and of the reply (``count_words``) and, for
a priced model, reports its cost in USD as LiteLLM reads a provider's own figure (the
``x-litellm-response-cost`` header), so the project's cost path prices it with no price list.
``GET /v1/models`` names every model with a digest of the world (tasks, skills, seed, difficulty) in
``meta``: ``ServerLM`` keys DSPy's request cache by it, so a simulator with another world on a reused
port is another server. Faults and latency are not in the digest: a run with faults resumes from a
cache made without.

The server is asyncio's, on 127.0.0.1 only (any other host is refused), in a thread of its own:
hand-written HTTP/1.1 (keep-alive, Content-Length bodies) because a stall and a dropped connection
need the socket, which ASGI servers (uvicorn) do not hand to an application. See
design/simulated_provider.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from roma_lab.lm import ScriptedRequest, count_words, read_texts

from ._world import SimFaults, SimLatency, SimModel, SimulatedWorld, uniform

LOOPBACK = "127.0.0.1"
#: The header LiteLLM reads a provider's own price of a reply from (as ``llm_provider-x-litellm-response-cost``).
COST_HEADER = "x-litellm-response-cost"


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
        fault = self.faults.draw(uniform(self.world.seed, "fault", key, attempt))
        latency = self.latency.seconds(uniform(self.world.seed, "latency", key, attempt))
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
