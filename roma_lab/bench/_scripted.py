"""A scripted judge: the deterministic test double for the benchmark graders.

The scripted *model* (``lm="scripted"``) is ``roma_lab.lm``'s; this judge complements it for rubric
benchmarks, so the real rubric parser and weighting run without a judge model. Its scores measure
nothing, and its name says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from roma_lab.lm import SCRIPTED, model_label


@dataclass(frozen=True, slots=True)
class ScriptedJudge:
    """A judge that gives every rubric criterion ``score`` (0-20) and every Likert aspect ``likert``.

    It reads the criteria list out of an EQ-Bench prompt, so the real parser and weighting run;
    for any other prompt it states an AbGen-style score.
    """

    score: int = 10
    likert: int = 3
    name: str = model_label(SCRIPTED)

    def __call__(self, prompt: str, system: str | None = None) -> str:
        criteria = re.findall(r"^- (.+)$", prompt, re.MULTILINE)
        if criteria:
            return "\n".join(f"{c.strip()}: {self.score}" for c in criteria)
        return f"Scripted assessment. Therefore, the score is {self.likert}."
