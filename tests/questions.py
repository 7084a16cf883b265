"""One question asked of a model through DSPy, for tests that need a real predictor call.

The signature is a class, not the string ``"question -> answer"``: DSPy parses a string signature with
``ast.parse`` on every ``Predict``, and CPython 3.11's AST constructor keeps its recursion depth per
interpreter, so two threads parsing at once can fail with "AST constructor recursion depth mismatch"
(python/cpython#106905) — a flaky failure of the interpreter, not of the code under test."""

from __future__ import annotations

import dspy


class Question(dspy.Signature):
    question: str = dspy.InputField()
    answer: str = dspy.OutputField()


def ask(lm, question: str = "q") -> str:
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        return dspy.Predict(Question)(question=question).answer


async def aask(lm, question: str = "q") -> str:
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        return (await dspy.Predict(Question).acall(question=question)).answer
