"""The ROMA controller as a DSPy program whose named predictors are its roles, for GEPA / GEPA+.

``RomaProgram`` holds the default role modules as sub-modules, so ``named_predictors()`` lists
``atomizer.predict``, ``planner.predict``, ``executor_think.predict``, ``aggregator.predict``...
and ``compile`` can optimise one role, round-robin or all. ``forward`` builds a ``Roma`` from those
same module objects, so the copy GEPA builds for a candidate runs the candidate's instructions.

DSPy's trace reaches the role calls without help: ``Roma`` runs each sync role in a copy of the
caller's ``contextvars`` context and its per-call ``dspy.context(lm=...)`` keeps the caller's
``trace`` list, so GEPA's reflective dataset sees every role call (tested).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from os import PathLike
from types import MappingProxyType
from typing import Any

import dspy

from roma_lab.controller import (
    TASK_TYPES,
    Aggregator,
    Atomizer,
    Planner,
    Roma,
    RomaSettings,
    Verifier,
    default_executors,
)
from roma_lab.optimizer._contracts import Contract, _mentions, default_contract

# What a ROMA role's instruction must keep naming, beyond the signature fields its seed already
# names (default_contract). The planner's plan is read by the controller: it needs `subtasks`,
# the task types it may assign and the dependency rule; the aggregator must consume its input.
ROMA_REQUIRED_TERMS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "atomizer.predict": TASK_TYPES,
    "planner.predict": ("subtasks", *TASK_TYPES, "depends_on"),
    "aggregator.predict": ("subtask_results",),
})

# The controller's seed instructions for these roles do not name everything above (the planner
# sees the task types only in its JSON schema; the aggregator says "subtask results"). GEPA edits
# must *keep* these terms, so the seed itself has to state them: one sentence is appended, only
# when the controller's instruction lacks a term.
_SEED_SENTENCES: Mapping[str, str] = MappingProxyType({
    "planner.predict": "Return the plan as subtasks, each with a task_type: search (look facts up), think "
                       "(reason), write (compose text) or code (compute with Python).",
    "aggregator.predict": "Read subtask_results: each entry gives a subtask's goal, task_type, status and output.",
})


@dataclass(frozen=True, slots=True)
class _Models:
    """The run's models, shared (not copied) when GEPA deep-copies the program: a model is not a
    parameter, and deep-copying one would duplicate a loaded local model or fail on an engine's lock."""

    lm: Any
    role_lms: Mapping[str, Any]

    def __deepcopy__(self, memo: dict) -> _Models:
        return self


class RomaProgram(dspy.Module):
    """ROMA with its default DSPy roles, as one DSPy program (``forward(goal) -> answer, run``).

    Args mirror ``Roma``: ``lm`` (None: the LM configured in DSPy, as for any DSPy program),
    ``role_lms``, ``corpus`` for the search executor's BM25 retriever, ``settings`` (a
    ``RomaSettings``) and keywords for its fields (``verify=True`` adds the verifier role,
    ``max_depth``...). The planner's and aggregator's seed instructions are the controller's, plus
    one sentence naming what their contract protects (see ``_SEED_SENTENCES``).
    """

    def __init__(
        self,
        *,
        lm: Any = None,
        role_lms: Mapping[str, Any] | None = None,
        corpus: Sequence[str] | str | PathLike[str] | None = None,
        settings: RomaSettings | None = None,
        **keywords: Any,
    ):
        super().__init__()
        self.settings = RomaSettings.from_keywords(settings, keywords)
        executors = default_executors(corpus)
        # Attribute order is named_predictors() order, hence GEPA's round-robin order: the loop's.
        self.atomizer = Atomizer()
        self.planner = Planner()
        self.executor_search = executors["search"]
        self.executor_think = executors["think"]
        self.executor_write = executors["write"]
        self.executor_code = executors["code"]
        self.aggregator = Aggregator()
        self.verifier = Verifier() if self.settings.verify else None
        self.models = _Models(lm, dict(role_lms or {}))
        for name, predictor in self.named_predictors():
            if name in _SEED_SENTENCES:
                seed = predictor.signature.instructions
                if not all(_mentions(seed, t) for t in ROMA_REQUIRED_TERMS[name]):
                    predictor.signature = predictor.signature.with_instructions(f"{seed} {_SEED_SENTENCES[name]}")
        self.roma()  # bad role_lms fail here, not on the first example

    def roma(self) -> Roma:
        """A ``Roma`` over this program's own role modules (so a candidate's instructions are used)."""
        return Roma(
            self.atomizer, self.planner,
            {"search": self.executor_search, "think": self.executor_think, "write": self.executor_write,
             "code": self.executor_code},
            self.aggregator, self.verifier,
            lm=self.models.lm, role_lms=self.models.role_lms, settings=self.settings,
        )

    def default_contracts(self) -> dict[str, Contract]:
        """The contracts `compile` applies to this program unless the caller overrides them."""
        return roma_contracts(self)

    def forward(self, goal: str) -> dspy.Prediction:
        """``answer`` is the root's output (None when the root failed; ``run`` says why)."""
        run = self.roma().run(goal)
        return dspy.Prediction(answer=run.output, run=run)


def roma_contracts(program: RomaProgram) -> dict[str, Contract]:
    """One contract per role predictor: the default (fields its seed names) plus ROMA's role terms.

    Pass to ``compile(..., contracts=roma_contracts(program))``; extra contracts can be merged in.
    """
    if not isinstance(program, RomaProgram):
        raise TypeError(f"roma_contracts needs a RomaProgram, got {type(program).__name__}")
    contracts = {}
    for name, predictor in program.named_predictors():
        base = default_contract(name, predictor.signature.instructions, tuple(predictor.signature.fields))
        extra = tuple(t for t in ROMA_REQUIRED_TERMS.get(name, ()) if t not in base.required_terms)
        contracts[name] = replace(base, required_terms=base.required_terms + extra)
    return contracts
