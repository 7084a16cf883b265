"""The scripted model: one deterministic DSPy engine for tests and smoke runs (DSPy's ``DummyLM`` idea).

``ScriptedEngine(respond)`` answers each request with ``respond(ScriptedRequest) -> fields`` (or a
plain string), formatted for the adapter that asked (JSON for ``JSONAdapter``, field markers for
``ChatAdapter``). It declares the embedded engine's capabilities, so DSPy builds the same requests for
it as for the local model. ``resolve_lm("scripted")`` is a ``dspy.LM`` on it with the default script,
:func:`script_reply`. Its numbers measure nothing: :func:`roma_lab.lm.model_label` says so wherever
it appears.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ._engine import SUPPORTED_PARAMS
from ._limits import request_slot

__all__ = ["SCRIPTED", "ScriptedEngine", "ScriptedRequest", "count_words", "format_reply", "read_request", "read_texts",
           "script_reply", "scripted_lm"]

SCRIPTED = "scripted"

# DSPy's system message lists output fields as "1. `name` (type): ..." after this header.
_OUTPUT_SECTION = re.compile(r"Your output fields are:\n(.*?)(?:\nAll interactions|\Z)", re.DOTALL)
_OUTPUT_FIELD = re.compile(r"^\d+\. `(\w+)`", re.MULTILINE)
# An input field in DSPy's user message: "[[ ## name ## ]]\nvalue", up to the next field or instruction.
_INPUT_FIELD = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## |\n\nRespond|\Z)", re.DOTALL)
_SCRIPTED_TEXT = "scripted reply"


@dataclass(frozen=True, slots=True)
class ScriptedRequest:
    """One request as a script sees it: the texts sent, and the DSPy fields read out of them."""

    model: str
    temperature: float | None
    system: str
    messages: tuple[str, ...]
    inputs: Mapping[str, str]  # input fields of the last message, by name
    outputs: tuple[str, ...]  # output field names, in the order the system message lists them


Respond = Callable[[ScriptedRequest], "Mapping[str, object] | str"]
CountUsage = Callable[[ScriptedRequest, str], "tuple[int, int]"]


def count_words(request: ScriptedRequest, text: str) -> tuple[int, int]:
    """Default usage: whitespace words of the prompt (system then messages, as one text) and of the reply."""
    return len((request.system + "\n".join(request.messages)).split()), len(text.split())


def script_reply(request: ScriptedRequest) -> dict[str, object]:
    """The default script, for any DSPy signature, by output field name.

    ``is_atomic`` is False (so ROMA plans, down to ``max_depth``); ``task_type`` is "think"; a plan is
    two think subtasks, the second depending on the first; every other field gets a fixed reply
    naming the goal.
    """
    if not request.outputs:
        raise ValueError("scripted model: no output fields found in the system message (not a DSPy request)")
    goal = request.inputs.get("goal", "").split("\n\n")[0].strip()[:80]
    reply: dict[str, object] = {}
    for name in request.outputs:
        if name == "is_atomic":
            reply[name] = False
        elif name == "task_type":
            reply[name] = "think"
        elif name == "subtasks":
            reply[name] = [
                {"goal": f"first half of: {goal}", "task_type": "think", "depends_on": []},
                {"goal": f"second half of: {goal}", "task_type": "think", "depends_on": [0]},
            ]
        else:
            reply[name] = f"{_SCRIPTED_TEXT}: {goal}" if goal else _SCRIPTED_TEXT
    return reply


def read_request(request) -> ScriptedRequest:
    """A DSPy engine's canonical request as a script sees it (what :class:`ScriptedEngine` hands ``respond``)."""
    system = request.system if isinstance(request.system, str) else "".join(p.text for p in request.system or ())
    return read_texts(request.model, request.config.temperature, system, tuple(m.text or "" for m in request.messages))


def read_texts(model: str, temperature: float | None, system: str, messages: tuple[str, ...]) -> ScriptedRequest:
    """A request as a script sees it, from its texts: a DSPy engine's request here, an HTTP chat
    body in the simulated provider (``roma_lab.simulator``)."""
    section = _OUTPUT_SECTION.search(system)
    return ScriptedRequest(
        model=model, temperature=temperature, system=system, messages=messages,
        inputs=dict(_INPUT_FIELD.findall(messages[-1] if messages else "")),
        outputs=tuple(_OUTPUT_FIELD.findall(section.group(1))) if section else (),
    )


def format_reply(reply: Mapping[str, object] | str, as_json: bool) -> str:
    """A script's reply as the adapter that asked reads it: JSON, or DSPy's field markers."""
    if isinstance(reply, str):
        return reply
    if as_json:
        return json.dumps(reply)
    fields = "".join(f"[[ ## {k} ## ]]\n{v if isinstance(v, str) else json.dumps(v)}\n\n" for k, v in reply.items())
    return fields + "[[ ## completed ## ]]"


class ScriptedEngine:
    """DSPy engine answering from ``respond``; ``usage(request, text) -> (input, output tokens)``.

    Every request is logged in ``requests`` (in arrival order, before ``respond`` runs, so a call that
    raises is counted too). A reply depends on the request alone unless ``respond`` keeps state.
    Thread-safe (the log is locked; the default script is pure): it serves ``slots`` requests at once
    (the model name's limit, ``lm.max_concurrency``), each answered after ``latency_s`` seconds, as a
    model taking that long would (throughput tests and benchmarks).
    """

    # The embedded engine's capabilities: JSONAdapter then sends the same requests as to the local model.
    supports_response_schema = True
    supported_params = SUPPORTED_PARAMS

    def __init__(self, respond: Respond = script_reply, *, usage: CountUsage = count_words, slots: int = 8,
                 latency_s: float = 0.0):
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            raise ValueError(f"slots is a whole number >= 1, got {slots!r}")
        if latency_s < 0:
            raise ValueError(f"latency_s is >= 0, got {latency_s!r}")
        self.respond = respond
        self.usage = usage
        self.slots = slots
        self.latency_s = latency_s
        self.requests: list[ScriptedRequest] = []
        self._lock = threading.Lock()

    def complete(self, request):
        from dspy.lm15 import Message, Response, TextPart, Usage

        seen = read_request(request)
        with self._lock:
            self.requests.append(seen)
        with request_slot(request.model, self.slots):
            reply = self.respond(seen)
            if self.latency_s:
                time.sleep(self.latency_s)
        text = format_reply(reply, as_json=bool(request.config.response_format))
        n_in, n_out = self.usage(seen, text)
        return Response(id=None, model=request.model, message=Message.assistant([TextPart(text)]), finish_reason="stop",
                        usage=Usage(input_tokens=n_in, output_tokens=n_out, total_tokens=n_in + n_out))

    def stream(self, request):
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self) -> None:
        """Nothing to release."""


def is_scripted(model: str) -> bool:
    """Whether a model name or LM model string names the scripted test double."""
    return model == SCRIPTED or model.startswith(f"{SCRIPTED}/")


def scripted_lm(respond: Respond = script_reply, *, name: str = SCRIPTED, slots: int = 8, latency_s: float = 0.0,
                **kwargs):
    """A ``dspy.LM`` on a :class:`ScriptedEngine` (``lm.engine``) with ``slots`` and ``latency_s``, named
    ``name``: "scripted" or "scripted/<anything>", so tables label it a test double and cost it 0.
    ``kwargs`` go to ``dspy.LM``; it is never cached (each reply is computed, so a cache would only keep
    stale scripts)."""
    import dspy

    from ._engine import AsyncEngine

    if not is_scripted(name):
        raise ValueError(f"a scripted model is named {SCRIPTED!r} or '{SCRIPTED}/<name>', got {name!r}")
    engine = ScriptedEngine(respond, slots=slots, latency_s=latency_s)
    return dspy.LM(name, engine=engine, async_engine=AsyncEngine(engine), **(kwargs | {"cache": False}))
