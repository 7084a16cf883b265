"""DSPy engine running a GGUF model on llama.cpp's own server, in this process (``xllamacpp``).

The server batches the sequences of its slots together (continuous batching) and keeps each slot's
evaluated prompt, so independent requests (tasks, rollouts, judge calls) generate at once and an
agent's next turn evaluates only its new tokens. Requests go in as OpenAI chat completions through
the server's own handler (``Server.handle_chat_completions``): no socket, no HTTP client. The
server binds only 127.0.0.1. Chosen with ``engine="llama.cpp-server"`` or $ROMA_LAB_ENGINE; on
the 2-core machine it bought no agent tasks per hour over the one-sequence engine (the default), and
design/local_model.md has the measurements.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import secrets
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from ._engine import (
    EMBEDDED_HOST,
    GENERATION_LOCK,
    LocalEngine,
    MODEL_HOSTS,
    free_other_models,
    free_cores,
    json_grammar,
    sampling_settings,
)
from ._limits import request_slot
from ._speed import ModelSpeed, append_speed

__all__ = ["DEFAULT_SLOTS", "HOST_CACHE_MIB", "LocalServerError", "ServerEngine"]

#: Slots of the embedded server unless a caller names another count: the best of 1, 4 and 8 on the
#: agent benchmark on 2 cores (design/local_model.md, "Engines").
DEFAULT_SLOTS = 4
#: Cap on the server's host-memory prompt cache (prompts of idle slots saved for reuse), in MiB.
HOST_CACHE_MIB = 2048


class LocalServerError(RuntimeError):
    """The embedded server refused a request (a grammar it cannot parse, a malformed request): its
    own message, with the error type it gave."""


class _SharedTurn:
    """The machine-wide generation turn (``GENERATION_LOCK``) held while any request of this
    process is in flight: the server batches this process's requests together, while another
    process (a second notebook, a test) waits for the batch to drain instead of thrashing the cores."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._fd: int | None = None

    @contextlib.contextmanager
    def held(self):
        with self._lock:
            if self._holders == 0:
                fd = os.open(GENERATION_LOCK, os.O_RDONLY | os.O_CREAT, 0o644)
                fcntl.flock(fd, fcntl.LOCK_EX)  # under _lock: this process's other requests wait with it
                self._fd = fd
            self._holders += 1
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                if self._holders == 0:
                    os.close(self._fd)  # closing drops the lock
                    self._fd = None


_TURN = _SharedTurn()


class _ServerHost:
    """The one embedded server of this process. Loading another (other file, slots, context or
    threads) first frees the current one and the in-process engine's model: two models generating on
    2 cores were 5-30x slower than one."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._key: tuple | None = None
        self._server = None
        self._loaded: dict = {}
        self._counts = dict.fromkeys(("calls", "prompt", "generated"), 0)
        self._seconds = dict.fromkeys(("calls", "prompt", "generated"), 0.0)
        self._count_lock = threading.Lock()

    def get(self, path: Path, slots: int, n_ctx: int, n_threads: int | None):
        """The running server for these settings, starting it if needed."""
        key = (str(path), slots, n_ctx, n_threads)
        with self.lock:
            if key != self._key:
                self._start(path, slots, n_ctx, n_threads)
                self._key = key
            return self._server

    def _start(self, path: Path, slots: int, n_ctx: int, n_threads: int | None) -> None:
        try:
            import xllamacpp
        except ImportError as exc:
            from ._models import ModelNotInstalledError

            raise ModelNotInstalledError("engine='llama.cpp-server' needs xllamacpp: "
                                         "pip install 'roma_lab[local-small]'") from exc
        self.close()
        with EMBEDDED_HOST.lock:  # the in-process model's host is closed under its own lock
            free_other_models(self)
        threads = n_threads or free_cores()
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_parallel = slots
        params.n_ctx = n_ctx * slots  # the server divides its context among the slots
        params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads
        # no spinning between ggml's tasks: on 2 cores the spin took the core the next task needed
        # (one sequence generated 8.4 tok/s polling, 9.6 without; design/local_model.md)
        params.cpuparams.poll = params.cpuparams_batch.poll = 0
        params.hostnames = ["127.0.0.1"]  # its HTTP listener (unused by us) stays on loopback
        # and answers no other process: a key of its own, random per start, that nobody is given (our
        # requests go in-process, through handle_chat_completions)
        params.api_keys = [secrets.token_urlsafe(32)]
        params.cache_ram_mib = HOST_CACHE_MIB
        params.warmup = False
        params.verbosity = -1  # llama.cpp's per-request log lines would fill every notebook's output
        self._loaded = {"model": path.name, "pid": os.getpid(), "threads": threads,
                        "cpus": len(os.sched_getaffinity(0)), "load_avg_1min": os.getloadavg()[0],
                        "loaded_at": datetime.now(UTC), "engine": ServerEngine.kind, "slots": slots}
        self._server = xllamacpp.Server(params)

    def generated(self, seconds: float, timings: dict) -> None:
        """Count one generation and the server's timings for it."""
        with self._count_lock:
            self._counts["calls"] += 1
            self._seconds["calls"] += seconds
            self._counts["prompt"] += int(timings.get("prompt_n", 0))
            self._seconds["prompt"] += float(timings.get("prompt_ms", 0.0)) / 1000
            self._counts["generated"] += int(timings.get("predicted_n", 0))
            self._seconds["generated"] += float(timings.get("predicted_ms", 0.0)) / 1000

    def close(self) -> None:
        if self._server is not None and self._counts["calls"]:
            # prompt and generation seconds are summed over requests, which overlap in a batch
            append_speed(ModelSpeed(**self._loaded, closed_at=datetime.now(UTC), calls=self._counts["calls"],
                                    call_seconds=self._seconds["calls"], prompt_tokens=self._counts["prompt"],
                                    prompt_seconds=self._seconds["prompt"],
                                    generated_tokens=self._counts["generated"],
                                    generation_seconds=self._seconds["generated"]))
        self._server, self._key, self._loaded = None, None, {}  # the server stops when collected
        self._counts = dict.fromkeys(self._counts, 0)
        self._seconds = dict.fromkeys(self._seconds, 0.0)


_SERVERS = _ServerHost()
MODEL_HOSTS.append(_SERVERS)
atexit.register(_SERVERS.close)


class ServerEngine(LocalEngine):
    """DSPy engine for a local GGUF file on the embedded llama.cpp server with ``slots`` slots of
    ``n_ctx`` tokens each. Loads on the first call. ``path`` and ``json_mode`` as for ``LlamaEngine``
    (the same grammar bounds strings and arrays)."""

    kind = "llama.cpp-server"  # in the completion-cache key with ``slots``

    def __init__(self, path, *, model_id: str, slots: int = DEFAULT_SLOTS, n_ctx: int = 4096,
                 n_threads: int | None = None, json_mode: str = "grammar", default_max_tokens: int = 512):
        if type(slots) is not int or slots < 1:
            raise ValueError(f"slots must be a whole number >= 1, got {slots!r}")
        super().__init__(path, model_id=model_id, n_ctx=n_ctx, n_threads=n_threads, json_mode=json_mode,
                         default_max_tokens=default_max_tokens)
        self.slots = slots

    @contextlib.contextmanager
    def _turn(self, request):
        with request_slot(request.model, self.slots), _TURN.held():
            yield _SERVERS.get(self._path(), self.slots, self.n_ctx, self.n_threads)

    def _generate(self, server, messages, config, *, constrain: bool) -> tuple[str, str, int, int]:
        """One chat completion: (text, finish reason, prompt tokens, completion tokens)."""
        body = {"messages": messages, **sampling_settings(config, self.default_max_tokens)}
        if constrain:
            grammar = json_grammar(config.response_format)
            if grammar is None:
                body["response_format"] = {"type": "json_object"}
            else:
                body["grammar"] = grammar
        start = time.perf_counter()
        out = server.handle_chat_completions(body)
        seconds = time.perf_counter() - start
        if "error" in out:
            error = out["error"]
            if error.get("type") == "exceed_context_size_error":
                from dspy.lm15 import ContextLengthError

                raise ContextLengthError(f"{self.model_id}: {error.get('message')} (n_ctx={self.n_ctx} a slot)")
            raise LocalServerError(f"{self.model_id}: the embedded server refused the request "
                                   f"({error.get('type')}): {error.get('message')}")
        _SERVERS.generated(seconds, out.get("timings", {}))
        choice, usage = out["choices"][0], out["usage"]
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        return choice["message"].get("content") or "", finish, usage["prompt_tokens"], usage["completion_tokens"]

    def close(self) -> None:
        """Nothing to do: the server is shared by the process (see _ServerHost)."""
