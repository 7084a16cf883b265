"""A scripted model and a scripted judge: deterministic test doubles for the benchmark tables.

``scripted_lm()`` is a real ``dspy.LM`` (custom engine), so the smoke tier runs the same code path
as a model run: ROMA's DSPy roles, the JSON adapter, usage tracking, the run files. It answers every
signature from a fixed script keyed by the output field names DSPy lists in its system message.
Its numbers measure nothing, and every row it produces is labelled so.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

SCRIPTED = "scripted"
SCRIPTED_LABEL = "scripted (test double, not a measurement)"

# DSPy's system message lists output fields as "1. `name` (type): ..." after this header.
_OUTPUT_SECTION = re.compile(r"Your output fields are:\n(.*?)(?:\nAll interactions|\Z)", re.DOTALL)
_FIELD = re.compile(r"^\d+\. `(\w+)`", re.MULTILINE)
_SCRIPTED_TEXT = "scripted reply"


def _goal(messages_text: str) -> str:
    match = re.search(r"\[\[ ## goal ## \]\]\n(.*?)\n\n", messages_text, re.DOTALL)
    return match.group(1).strip() if match else ""


def scripted_reply(system: str, user: str) -> dict[str, object]:
    """The script: which value each output field gets.

    ``is_atomic`` is False (so ROMA plans, down to ``max_depth``); a plan is two think subtasks,
    the second depending on the first; every text field gets a fixed reply naming the goal.
    """
    section = _OUTPUT_SECTION.search(system)
    fields = _FIELD.findall(section.group(1)) if section else []
    if not fields:
        raise ValueError("scripted model: no output fields found in the system message (not a DSPy request)")
    goal = _goal(user)[:80]
    reply: dict[str, object] = {}
    for name in fields:
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


class ScriptedEngine:
    """DSPy engine answering from :func:`scripted_reply`; usage = whitespace word counts."""

    supports_response_schema = False

    def complete(self, request):
        from dspy.lm15 import Message, Response, TextPart, Usage

        system = request.system if isinstance(request.system, str) else "".join(p.text for p in request.system or ())
        user = "\n".join(m.text or "" for m in request.messages)
        text = json.dumps(scripted_reply(system, user))
        n_in, n_out = len((system + user).split()), len(text.split())
        return Response(id=None, model=SCRIPTED, message=Message.assistant([TextPart(text)]), finish_reason="stop",
                        usage=Usage(input_tokens=n_in, output_tokens=n_out, total_tokens=n_in + n_out))

    def stream(self, request):
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self) -> None:
        """Nothing to release."""


def scripted_lm():
    """A ``dspy.LM`` named ``scripted/test-double`` that answers from the fixed script."""
    import dspy

    from roma_lab.lm import AsyncEngine

    engine = ScriptedEngine()
    return dspy.LM(f"{SCRIPTED}/test-double", engine=engine, async_engine=AsyncEngine(engine), cache=False)


@dataclass(frozen=True, slots=True)
class ScriptedJudge:
    """A judge that gives every rubric criterion ``score`` (0-20) and every Likert aspect ``likert``.

    It reads the criteria list out of an EQ-Bench prompt, so the real parser and weighting run;
    for any other prompt it states an AbGen-style score.
    """

    score: int = 10
    likert: int = 3
    name: str = SCRIPTED_LABEL

    def __call__(self, prompt: str, system: str | None = None) -> str:
        criteria = re.findall(r"^- (.+)$", prompt, re.MULTILINE)
        if criteria:
            return "\n".join(f"{c.strip()}: {self.score}" for c in criteria)
        return f"Scripted assessment. Therefore, the score is {self.likert}."
