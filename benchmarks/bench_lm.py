"""Speed of the embedded model: tokens/s, prefix-reuse speed-up, JSON grammar vs parse-and-repair vs auto.

    python benchmarks/bench_lm.py                      # default model ("local", Qwen2.5-Coder-1.5B)
    python benchmarks/bench_lm.py --model local:smollm2-135m --calls 4

Prints one run's numbers and ratios; no completion cache is used. Run it on a quiet machine:
llama.cpp slows down badly when other processes compete for the cores.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Literal

import dspy
import pydantic

from roma_lab.lm import free_cores, resolve_lm
from roma_lab.lm._engine import _HOST

# ~300 tokens of role instructions shared by every call, as a ROMA role's system prompt is.
ROLE_INSTRUCTIONS = (
    "You are the executor of a recursive multi-agent system. You receive one goal and the results of the "
    "subtasks it depends on. Answer the goal directly and concisely. Use the dependency results when they "
    "are relevant, cite them by their index, and never invent facts that are not in them. If the goal asks "
    "for code, answer with a single Python code block and nothing else. If it asks for a list, answer with "
    "one item per line. If it asks for a number, answer with the number only. Keep every answer under one "
    "hundred words. Prefer plain words over jargon. Do not repeat the goal. Do not apologise. Do not explain "
    "what you are going to do; do it. "
) * 3

GOALS = [
    "Name the capital of France.",
    "Write a Python function that reverses a string.",
    "List three prime numbers.",
    "Summarise why the sky is blue in one sentence.",
    "Research the history of the printing press and write a two-page essay with sources.",
    "Compute 17 * 23.",
    "Plan a three-day trip to Rome, then book hotels and write an itinerary.",
    "Translate 'good morning' into Spanish.",
]


class Atomize(dspy.Signature):
    """Decide whether a goal can be done in one step and which executor type fits it."""

    goal: str = dspy.InputField()
    is_atomic: bool = dspy.OutputField()
    task_type: Literal["search", "think", "write", "code"] = dspy.OutputField()


class Subtask(pydantic.BaseModel):
    goal: str
    task_type: Literal["search", "think", "write", "code"]
    depends_on: list[int]


class Plan(dspy.Signature):
    """Split a goal into 2 to 5 subtasks; depends_on lists indices of earlier subtasks."""

    goal: str = dspy.InputField()
    subtasks: list[Subtask] = dspy.OutputField()


def llama(lm):
    """The loaded llama.cpp model behind an LM from resolve_lm (loading it if needed)."""
    lm("hi", max_tokens=1)
    return _HOST._llama


def perf(model):
    import llama_cpp

    return llama_cpp.llama_perf_context(model._ctx.ctx)


def token_speeds(model) -> tuple[float, float]:
    import llama_cpp

    model.reset()
    llama_cpp.llama_perf_context_reset(model._ctx.ctx)
    model.create_completion(ROLE_INSTRUCTIONS + "\nGoal: count from one to fifty in words.\nAnswer:", max_tokens=96,
                            temperature=0.0)
    p = perf(model)
    return p.n_p_eval / (p.t_p_eval_ms / 1000), p.n_eval / (p.t_eval_ms / 1000)


def role_calls(model, goals, *, reuse: bool) -> float:
    """Seconds for one short answer per goal, all sharing ROLE_INSTRUCTIONS as system prompt."""
    start = time.perf_counter()
    for goal in goals:
        if not reuse:
            model.reset()  # forget the evaluated prefix: the next call re-reads the whole prompt
        model.create_chat_completion(messages=[{"role": "system", "content": ROLE_INSTRUCTIONS},
                                               {"role": "user", "content": goal}], max_tokens=8, temperature=0.0)
    return time.perf_counter() - start


def json_calls(lm, signature, goals) -> tuple[int, float]:
    ok, start = 0, time.perf_counter()
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        for goal in goals:
            try:
                dspy.Predict(signature)(goal=goal)
                ok += 1
            except Exception as exc:  # a parse failure is the measured outcome, not a crash
                print(f"    parse failure ({type(exc).__name__}) on {goal[:40]!r}")
    return ok, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local")
    parser.add_argument("--calls", type=int, default=len(GOALS), help="goals per measurement (<= 8)")
    args = parser.parse_args()
    goals = GOALS[: args.calls]
    load = os.getloadavg()[0]
    print(f"model={args.model} threads={free_cores()} calls={len(goals)} load_avg_1min={load:.2f}", flush=True)

    grammar_lm = resolve_lm(args.model, cache=False, json_mode="grammar")
    model = llama(grammar_lm)
    prompt_tps, gen_tps = token_speeds(model)
    print(f"prompt eval: {prompt_tps:7.1f} tok/s   generation: {gen_tps:6.1f} tok/s", flush=True)

    cold = role_calls(model, goals, reuse=False)
    warm = role_calls(model, goals, reuse=True)
    print(f"shared role prefix: no reuse {cold:6.2f} s, KV prefix reuse {warm:6.2f} s, speed-up x{cold / warm:.2f}", flush=True)

    lms = {"grammar": grammar_lm} | {mode: resolve_lm(args.model, cache=False, json_mode=mode) for mode in ("repair", "auto")}
    for signature in (Atomize, Plan):
        for mode, lm in lms.items():
            ok, seconds = json_calls(lm, signature, goals)
            print(f"{signature.__name__:8s} {mode:8s} parsed {ok}/{len(goals)}  {seconds / len(goals):6.2f} s/call", flush=True)


if __name__ == "__main__":
    main()
