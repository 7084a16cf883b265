"""Speed of the embedded model: roma_lab.lm vs bare llama-cpp-python, prefix reuse, JSON modes.

    python speed/bench_lm.py                      # default model ("local", Qwen2.5-Coder-1.5B)
    python speed/bench_lm.py --model local:smollm2-135m --calls 4
    python speed/bench_lm.py --ratio-only         # only the roma_lab.lm / bare llama.cpp ratios
    python speed/bench_lm.py --interleaved-only   # only two roles taking turns, with and without saved states

The first block runs one chat prompt through roma_lab.lm (threads as the toolkit chooses them) and
through a bare ``llama_cpp.Llama`` with every CPU of this process, alternately, and prints the
ratio of tokens/s (prompt and generation separately, from llama.cpp's own counters) and of the time
spent generating (the wait for the machine's one-generation-at-a-time turn left out on both sides).

The interleaved block has two roles take turns on growing prompts (as an agent's actor and its
planner or summariser do) and prints the prompt tokens llama.cpp evaluated, the wall time and their
ratios with roma_lab.lm's saved prompt states and without them (the same completions either way).

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

from roma_lab.lm import EMBEDDED_HOST, free_cores, machine_turn, resolve_lm

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


RATIO_MESSAGES = [{"role": "system", "content": ROLE_INSTRUCTIONS},
                  {"role": "user", "content": "Goal: count from one to fifty in words."}]
RATIO_MAX_TOKENS = 96


def llama(lm):
    """The loaded llama.cpp model behind an LM from resolve_lm (loading it if needed)."""
    lm("hi", max_tokens=1)
    return EMBEDDED_HOST.llama


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


def chat_speeds(model, call, busy=None) -> tuple[float, float, float]:
    """(prompt tok/s, generation tok/s, wall s) of ``call()`` on ``model`` with an empty KV cache.
    ``busy()``, when given, reads the seconds spent generating (roma_lab.lm's counter, which
    leaves out the wait for the machine's turn); otherwise the wall time of the call counts."""
    import llama_cpp

    model.reset()  # the whole prompt is evaluated, not reused from the previous call
    llama_cpp.llama_perf_context_reset(model._ctx.ctx)
    start, busy_before = time.perf_counter(), busy() if busy else 0.0
    call()
    wall = busy() - busy_before if busy else time.perf_counter() - start
    p = perf(model)
    return p.n_p_eval / (p.t_p_eval_ms / 1000), p.n_eval / (p.t_eval_ms / 1000), wall


def toolkit_vs_bare(name: str, rounds: int) -> None:
    """Best of ``rounds`` alternating runs each; both hold the machine's generation turn."""
    import llama_cpp

    from dspy.lm15 import Config, Message, Request

    lm = resolve_lm(name, cache=False)
    request = Request(model=lm.model, system=ROLE_INSTRUCTIONS, messages=(Message.user(RATIO_MESSAGES[1]["content"]),),
                      config=Config(max_tokens=RATIO_MAX_TOKENS, temperature=0.0))
    toolkit = llama(lm)  # loads the model the way every notebook does
    toolkit.set_cache(None)  # token speed, not prompt reuse: a saved state would skip the prompt
    bare_threads = len(os.sched_getaffinity(0))
    bare = llama_cpp.Llama(model_path=toolkit.model_path, n_ctx=toolkit.context_params.n_ctx, n_threads=bare_threads,
                           n_threads_batch=bare_threads, verbose=False)
    print(f"threads: roma_lab.lm {toolkit.context_params.n_threads}, bare llama.cpp {bare_threads} "
          f"(CPUs in affinity mask); load_avg_1min={os.getloadavg()[0]:.2f}", flush=True)
    runs = {"roma_lab.lm": [], "bare": []}
    for _ in range(rounds):
        runs["roma_lab.lm"].append(chat_speeds(toolkit, lambda: lm(request),
                                               busy=lambda: EMBEDDED_HOST.call_seconds))
        with machine_turn():
            runs["bare"].append(chat_speeds(bare, lambda: bare.create_chat_completion(
                messages=RATIO_MESSAGES, max_tokens=RATIO_MAX_TOKENS, temperature=0.0)))
    best = {who: (max(r[0] for r in rs), max(r[1] for r in rs), min(r[2] for r in rs)) for who, rs in runs.items()}
    for who, (prompt, gen, wall) in best.items():
        print(f"{who:12s} prompt {prompt:7.1f} tok/s  generation {gen:6.1f} tok/s  wall {wall:6.2f} s", flush=True)
    (tp, tg, tw), (bp, bg, bw) = best["roma_lab.lm"], best["bare"]
    print(f"ratio roma_lab.lm / bare (best of {rounds}): prompt x{tp / bp:.2f}  generation x{tg / bg:.2f}  "
          f"speed (1/wall) x{bw / tw:.2f}   load_avg_1min={os.getloadavg()[0]:.2f}", flush=True)
    bare.close()


SECOND_ROLE = ("You revise plans. Read the task, the plan and what the steps returned; drop steps already done, fix "
               "steps the observations contradict, add what is missing. At most five numbered steps. ") * 6


def interleaved_roles(name: str, turns: int) -> None:
    """Two roles take ``turns`` turns each on growing prompts, through roma_lab.lm, with its saved
    prompt states and without them: prompt tokens evaluated, wall seconds, same replies."""
    from dspy.lm15 import Config, Message, Request

    lm = resolve_lm(name, cache=False)

    def request(system: str, k: int) -> Request:
        steps = " ".join(f"Step {j}: called lookup(R-{1000 + j}) and it returned revenue {37 * j} in Q{j % 4 + 1}."
                         for j in range(4 * k))
        return Request(model=lm.model, system=system, messages=(Message.user(f"Memory: {steps} Next?"),),
                       config=Config(max_tokens=24, temperature=0.0))

    results = {}
    for states in (True, False):
        EMBEDDED_HOST.close()
        model = llama(lm)
        if not states:
            model.set_cache(None)
        p0, start = perf(model).n_p_eval, time.perf_counter()
        replies = [lm(request(system, k)).text for k in range(1, turns + 1)
                   for system in (ROLE_INSTRUCTIONS, SECOND_ROLE)]
        results[states] = (perf(model).n_p_eval - p0, time.perf_counter() - start, replies)
    (with_tokens, with_s, with_replies), (without_tokens, without_s, without_replies) = results[True], results[False]
    print(f"interleaved roles, {2 * turns} calls: prompt tokens evaluated {without_tokens} without saved states, "
          f"{with_tokens} with (x{with_tokens / without_tokens:.2f}); wall {without_s:.1f} s -> {with_s:.1f} s "
          f"(speed-up x{without_s / with_s:.2f}); same replies: {with_replies == without_replies}; "
          f"load_avg_1min={os.getloadavg()[0]:.2f}", flush=True)
    EMBEDDED_HOST.close()


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
    parser.add_argument("--rounds", type=int, default=2, help="alternating runs per side in the ratio block")
    parser.add_argument("--ratio-only", action="store_true", help="stop after the roma_lab.lm / bare ratio block")
    parser.add_argument("--turns", type=int, default=4, help="turns per role in the interleaved block")
    parser.add_argument("--interleaved-only", action="store_true", help="only the interleaved-roles block")
    args = parser.parse_args()
    goals = GOALS[: args.calls]
    load = os.getloadavg()[0]
    print(f"model={args.model} threads={free_cores()} calls={len(goals)} load_avg_1min={load:.2f}", flush=True)
    if args.interleaved_only:
        interleaved_roles(args.model, args.turns)
        return
    toolkit_vs_bare(args.model, args.rounds)
    if args.ratio_only:
        return

    interleaved_roles(args.model, args.turns)
    grammar_lm = resolve_lm(args.model, cache=False, json_mode="grammar")
    model = llama(grammar_lm)
    model.set_cache(None)  # the prefix-reuse block below measures llama.cpp's own single-prefix reuse
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
