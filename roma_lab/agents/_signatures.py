"""DSPy signatures of the agent's roles, each run through the JSON adapter (as ROMA's roles are).

One module per role; ``default_modules()`` builds them. Any callable taking the same keyword
inputs and returning an object with the output fields as attributes can replace a role.
"""

from __future__ import annotations

from typing import Annotated

import dspy
from pydantic import Field
from typing_extensions import TypeAliasType

from roma_lab.lm import JSONRole

MAX_TIPS = 5

# A named alias so DSPy keeps the bound in the JSON schema (see roma_lab.controller._roles).
TipList = TypeAliasType("TipList", Annotated[list[str], Field(json_schema_extra={"maxItems": MAX_TIPS})])


class Act(dspy.Signature):
    """Solve the task one step at a time with the tools listed. At each step either call exactly one
    tool, or, once you know the answer, set action to "final_answer". The answer must be only the
    value the task asks for, written exactly as it should be reported, with no extra words."""

    # Static inputs first, the growing ones last: consecutive actor calls then share the longest
    # prompt prefix, which llama.cpp keeps evaluated (the tool list is the same for every task).
    tools: str = dspy.InputField(desc="the tools you can call: name(arguments): what it does")
    task: str = dspy.InputField()
    plan: str = dspy.InputField(desc="the plan to follow; empty when there is none")
    tips: str = dspy.InputField(desc="advice learnt from earlier failures; empty when there is none")
    memory: str = dspy.InputField(desc="your earlier steps and what they returned")
    feedback: str = dspy.InputField(desc="a critique of, or an error in, your previous step; empty when none")
    action: str = dspy.OutputField(desc='the name of one tool, or "final_answer"')
    # A string, not a dict: with only str fields DSPy sends the full JSON schema, so the local
    # engine's grammar keeps every reply parseable; the agent parses the arguments itself.
    arguments: str = dspy.OutputField(desc='the tool\'s arguments as a JSON object, e.g. {"query": "..."}; '
                                           '"{}" when it takes none or when answering')
    answer: str = dspy.OutputField(desc='the final answer when action is "final_answer", otherwise ""')


class AnswerAtLimit(dspy.Signature):
    """The step limit is reached: no more tools. From the task and your earlier steps, give the final
    answer: only the value the task asks for, written exactly as it should be reported, no extra words."""

    task: str = dspy.InputField()
    memory: str = dspy.InputField(desc="your earlier steps and what they returned")
    answer: str = dspy.OutputField(desc="the final answer")


# The ReAct variant (``AgentConfig.thought``): a free-text thought before the action.
ActWithThought = Act.prepend("thought", dspy.OutputField(desc="briefly: what to do next and why"), str)


class Plan(dspy.Signature):
    """Write a short step-by-step high-level plan (at most five numbered steps) to solve the task
    with the tools listed. Do not call tools and do not answer the task."""

    task: str = dspy.InputField()
    tools: str = dspy.InputField()
    tips: str = dspy.InputField(desc="suggestions to follow strictly; empty when there are none")
    plan: str = dspy.OutputField()


class RevisePlan(dspy.Signature):
    """Revise the plan in light of the latest observations: drop steps already done or useless,
    fix steps the observations contradict, add what is missing. At most five numbered steps."""

    task: str = dspy.InputField()
    tools: str = dspy.InputField()
    tips: str = dspy.InputField(desc="suggestions to follow strictly; empty when there are none")
    plan: str = dspy.InputField(desc="the current plan")
    observations: str = dspy.InputField(desc="the steps taken since the plan was written, with what they returned")
    revised_plan: str = dspy.OutputField()


class SummarizeStep(dspy.Signature):
    """Summarize this step of an agent working on the task: the key facts it established, in one or
    two sentences, and one suggestion for the next step."""

    task: str = dspy.InputField()
    step: str = dspy.InputField()
    summary: str = dspy.OutputField()


class UpdateLongTermMemory(dspy.Signature):
    """Fuse the agent's latest step into its long-term memory: keep the insights that help on this
    and later tasks (what worked, what failed, which tool gives what), drop the rest. Be brief."""

    long_term_memory: str = dspy.InputField(desc="the memory so far; empty at the start")
    step: str = dspy.InputField(desc="the latest step, with the task it belongs to")
    updated_memory: str = dspy.OutputField()


class ReflectStep(dspy.Signature):
    """Reflect on this step of an agent working on the task: was it useful, was there an error, and
    what should the next step do differently? One or two sentences."""

    task: str = dspy.InputField()
    step: str = dspy.InputField()
    critique: str = dspy.OutputField()


class ReflectAnswer(dspy.Signature):
    """Judge whether the agent's final answer is supported by its steps and answers the task in the
    requested form. If not, say what went wrong and what to do instead."""

    task: str = dspy.InputField()
    attempt: str = dspy.InputField(desc="the agent's steps and final answer")
    critique: str = dspy.OutputField()
    acceptable: bool = dspy.OutputField()


class SelectAttempt(dspy.Signature):
    """Several attempts at the same task are listed, numbered from 0. Compare how well each one
    progresses towards solving the task (errors, loops, evidence for its answer) and pick the best."""

    task: str = dspy.InputField()
    attempts: str = dspy.InputField()
    analysis: str = dspy.OutputField()
    index: int = dspy.OutputField(desc="number of the best attempt")


class ScoreAttempt(dspy.Signature):
    """Score how well this attempt solves the task, from 0 (irrelevant, errors, loops) to 10
    (clearly solved with evidence, efficiently)."""

    task: str = dspy.InputField()
    attempt: str = dspy.InputField()
    analysis: str = dspy.OutputField()
    score: int = dspy.OutputField(desc="an integer from 0 to 10")


class RewriteQuery(dspy.Signature):
    """Improve the search query for the task: resolve ambiguity, split complex requirements and keep
    only the first, loosen an overly specific query. Keep the core intent; never invent facts.
    Return the query unchanged if it is already good."""

    task: str = dspy.InputField()
    query: str = dspy.InputField()
    improved_query: str = dspy.OutputField()


class MineTips(dspy.Signature):
    """These attempts of an agent failed. Find the common bottlenecks and failure patterns and write
    short, general heuristics that would have avoided them on similar tasks (no task-specific values)."""

    failures: str = dspy.InputField()
    tips: TipList = dspy.OutputField()


SIGNATURES = {
    "actor": Act, "actor_thought": ActWithThought, "planner": Plan, "reviser": RevisePlan, "summarizer": SummarizeStep,
    "memory": UpdateLongTermMemory, "step_reflector": ReflectStep, "answer_reflector": ReflectAnswer,
    "selector": SelectAttempt, "scorer": ScoreAttempt, "query_rewriter": RewriteQuery, "tips_miner": MineTips,
    "answerer": AnswerAtLimit,
}


def output_fields(role: str) -> tuple[str, ...]:
    return tuple(SIGNATURES[role].output_fields)


def default_module(role: str) -> JSONRole:
    return JSONRole(SIGNATURES[role])
