"""Fault injection for the ROMA controller (issue 9 §1, issue 8 §3): a hostile model and a careless user.

Each :class:`Fault` builds a ``Roma`` whose roles misbehave in one way, and states the typed outcome
the controller owes (tests/test_controller_faults.py asserts it). Run as a script, every fault is
executed under a guard (a thread that is abandoned when it hangs) and classified generically, so the
same probe also measures older code (the last line printed is the summary)::

    PYTHONPATH=$PWD python tests/controller_faults.py
    git archive <old commit> roma_lab | tar -x -C /tmp/old && PYTHONPATH=/tmp/old python tests/controller_faults.py

Outcomes::

    hang     no result within the guard time
    crash    an exception escaped without a partial trace, or the returned run cannot be saved
    silent   the run says ``completed`` although the fault left no mark on it, or the run breaks the
             property the fault is about (a 1 MB goal stored more than once, an unbounded context)
    typed    the run (or the exception's ``.run``) ends with a non-completed status,
             or a bad input is refused up front with ValueError
    handled  the run completes by design: a plan repaired with a warning naming the repair, or an
             odd but valid input (NUL, lone surrogate, NaN, 1 MB goal) saved and read back intact

Only names that exist since the controller's first version are used, and settings a version does
not know (``run_timeout_s``) are dropped, so "before" runs count hangs instead of failing to start.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from roma_lab.trace import Run
from roma_lab.controller import Roma, ScriptedRoles, Subtask

CALL_TIMEOUT_S = 0.3
RUN_TIMEOUT_S = 1.5
GUARD_S = 8.0  # a fault still running after this long counts as a hang

# root plans a, b, c (c after b); every fault below lands on one of them
PLAN = {"root": (Subtask("a", "think"), Subtask("b", "think"), Subtask("c", "think", (1,)))}


@dataclass(frozen=True)
class Fault:
    """One injected fault and what the controller owes for it.

    ``expect``: the run status, or the name of the exception ``run`` re-raises (with ``.run``).
    ``node`` / ``node_status`` / ``text``: where the fault must show (``text`` in the node's error
    or warnings). ``handled``: the run completes by design; ``text`` is then the repair warning.
    """

    name: str
    build: Callable[[], tuple[dict, Any]]  # Roma kwargs (roles + settings), goal
    expect: str
    node: str | None = None
    node_status: str | None = None
    text: str = ""
    handled: bool = False
    main_thread: bool = False  # needs the main thread (a simulated Ctrl-C)
    check: Callable[[Run], bool] | None = field(default=None, repr=False)  # an extra property of the run


def roles(plans=PLAN) -> dict:
    return ScriptedRoles(dict(plans)).role_kwargs()


def on_goal(goal: str, bad: Callable[..., Any], role: str = "executor"):
    """Role kwargs where ``role`` misbehaves (``bad``) for ``goal`` only and is scripted otherwise."""
    kwargs = roles()
    scripted = kwargs["executors"]["think"] if role == "executor" else kwargs[role]

    if inspect.iscoroutinefunction(bad):
        async def role_fn(**inputs):
            return await (bad(**inputs) if inputs["goal"] == goal else scripted(**inputs))
    else:
        def role_fn(**inputs):
            if inputs["goal"] == goal:
                return bad(**inputs)
            return asyncio.run(scripted(**inputs))  # a sync role: scripted answer on its own loop

    if role == "executor":
        kwargs["executors"] = {"think": role_fn}
    else:
        kwargs[role] = role_fn
    return kwargs


def raising(exc: BaseException, *, is_async: bool = True):
    if is_async:
        async def fn(**_):
            raise exc
    else:
        def fn(**_):
            raise exc
    return fn


def returning(value: Any):
    async def fn(**_):
        return value
    return fn


def out(**fields):
    return SimpleNamespace(**fields)


def planner_answers(*answers):
    """A planner whose successive replies are ``answers`` (an exception instance is raised)."""
    replies = list(answers)

    async def planner(goal, context):
        reply = replies.pop(0) if len(replies) > 1 else replies[0]
        if isinstance(reply, BaseException):
            raise reply
        return out(subtasks=reply)
    return planner


def cycle(n: int) -> list[dict]:
    return [{"goal": f"step {i}", "task_type": "think", "depends_on": [(i + 1) % n]} for i in range(n)]


def with_planner(planner, **settings) -> dict:
    return roles() | {"planner": planner} | settings


def verifier_says(*verdicts):
    replies = list(verdicts)

    async def verifier(goal, context, candidate):
        return out(verdict=replies.pop(0) if len(replies) > 1 else replies[0], feedback="not good enough")
    return verifier


class BadAttribute:
    @property
    def output(self):
        raise RuntimeError("property exploded")


class BadMessage(Exception):
    def __str__(self):
        raise RuntimeError("str exploded")


class CustomBase(BaseException):
    pass


async def swallow_cancellation(**_):
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline:  # ignores every cancel for 6 s (bounded so tests end clean)
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            pass
    return out(output="too late")


async def block_loop(**_):
    time.sleep(4)  # an async role that blocks the event loop: no coroutine timeout can fire
    return out(output="too late")


async def sleep_long(**_):
    await asyncio.sleep(30)


def block_thread(**_):
    time.sleep(3)
    return out(output="too late")


async def stop_loop(**_):
    asyncio.get_running_loop().stop()  # the run's loop: run_until_complete ends under the controller
    await asyncio.sleep(30)


async def cancel_all_tasks(**_):
    for task in asyncio.all_tasks():  # the controller's own tasks among them
        if task is not asyncio.current_task():
            task.cancel()
    await asyncio.sleep(30)


def interrupt_user(**_):
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # Ctrl-C, to the thread in Roma.run
    # hold the call until the interrupt has ended the run, however loaded the machine (a daemon thread)
    threading.Event().wait(120)
    return out(output="never used")


def chain(n: int) -> dict:
    """root plans s0 <- s1 <- ... <- s(n-1), each after the previous one; s0 fails."""
    plans = {"root": tuple(Subtask(f"s{i}", "think", (i - 1,) if i else ()) for i in range(n))}
    return roles(plans) | {"executors": on_goal("s0", raising(ValueError("first")))["executors"]}


def huge_dependency() -> dict:
    """b answers 1 MB; c depends on b."""
    return on_goal("b", returning(out(output="y" * 1_000_000)))


def context_bounded(run: Run) -> bool:
    (call,) = [c for c in run.node("0.2").calls if c.role.startswith("executor")]
    return len(call.inputs["context"]) < 10_000


def json_once(goal: str) -> Callable[[Run], bool]:
    return lambda run: run.to_json().count(goal[:1000]) == 1


BIG = "measure " + "x" * 1_000_000


def short_answers() -> dict:
    async def executor(goal, context):
        return out(output="short")

    async def aggregator(goal, context, subtask_results):
        return out(output="joined")
    return roles({BIG: PLAN["root"]}) | {"executors": {"think": executor}, "aggregator": aggregator}


S = {"call_timeout_s": CALL_TIMEOUT_S, "run_timeout_s": RUN_TIMEOUT_S}

FAULTS: tuple[Fault, ...] = (
    # a role raises
    Fault("atomizer raises ValueError", lambda: (on_goal("root", raising(ValueError("x")), "atomizer") | S, "root"),
          "failed", "0", "failed", "ValueError"),
    Fault("planner raises twice", lambda: (with_planner(planner_answers(RuntimeError("down")), **S), "root"),
          "partial", "0", "degraded", "no usable plan twice"),
    Fault("executor raises ValueError", lambda: (on_goal("b", raising(ValueError("boom"))) | S, "root"),
          "partial", "0.1", "failed", "ValueError: boom"),
    Fault("sync executor raises", lambda: (on_goal("b", raising(OSError("disk"), is_async=False)) | S, "root"),
          "partial", "0.1", "failed", "OSError: disk"),
    Fault("aggregator raises", lambda: (on_goal("root", raising(RuntimeError("agg")), "aggregator") | S, "root"),
          "failed", "0", "failed", "RuntimeError: agg"),
    Fault("verifier raises", lambda: (roles({}) | {"verifier": raising(ValueError("judge"))} | S, "solo"),
          "failed", "0", "failed", "ValueError: judge"),
    Fault("exception whose str() raises", lambda: (on_goal("b", raising(BadMessage())) | S, "root"),
          "partial", "0.1", "failed", "BadMessage"),
    Fault("role raises a custom BaseException", lambda: (on_goal("b", raising(CustomBase("odd"))) | S, "root"),
          "partial", "0.1", "failed", "CustomBase"),
    Fault("role raises CancelledError", lambda: (on_goal("b", raising(asyncio.CancelledError())) | S, "root"),
          "partial", "0.1", "failed", "CancelledError"),
    Fault("async role raises KeyboardInterrupt", lambda: (on_goal("b", raising(KeyboardInterrupt())) | S, "root"),
          "KeyboardInterrupt", "0.1", "cancelled", "KeyboardInterrupt"),
    Fault("sync role raises KeyboardInterrupt",
          lambda: (on_goal("b", raising(KeyboardInterrupt(), is_async=False)) | S, "root"),
          "KeyboardInterrupt", "0.1", "cancelled", "KeyboardInterrupt"),
    Fault("role raises SystemExit", lambda: (on_goal("b", raising(SystemExit(3))) | S, "root"),
          "SystemExit", "0.1", "cancelled", "SystemExit"),
    Fault("user presses Ctrl-C during run()", lambda: (on_goal("b", interrupt_user) | S, "root"),
          "KeyboardInterrupt", "0", "cancelled", "KeyboardInterrupt", main_thread=True),
    # time limits
    Fault("async executor too slow", lambda: (on_goal("b", sleep_long) | S, "root"),
          "partial", "0.1", "failed", "timed out"),
    Fault("atomizer too slow", lambda: (on_goal("root", sleep_long, "atomizer") | S, "root"),
          "failed", "0", "failed", "timed out"),
    Fault("aggregator too slow", lambda: (on_goal("root", sleep_long, "aggregator") | S, "root"),
          "failed", "0", "failed", "timed out"),
    Fault("verifier too slow", lambda: (roles({}) | {"verifier": sleep_long} | S, "solo"),
          "failed", "0", "failed", "timed out"),
    Fault("sync executor too slow", lambda: (on_goal("b", block_thread) | S, "root"),
          "partial", "0.1", "failed", "timed out"),
    Fault("executor swallows cancellation", lambda: (on_goal("b", swallow_cancellation) | S, "root"),
          "partial", "0.1", "failed", "timed out"),
    Fault("planner swallows cancellation",
          lambda: (with_planner(swallow_cancellation, **S), "root"),
          "partial", "0", "degraded", "timed out"),
    Fault("executor blocks the event loop", lambda: (on_goal("b", block_loop) | S, "root"),
          "timed_out", "0.1", "cancelled", "run deadline"),
    Fault("atomizer blocks the event loop", lambda: (on_goal("root", block_loop, "atomizer") | S, "root"),
          "timed_out", "0", "cancelled", "run deadline"),
    Fault("executor stops the event loop", lambda: (on_goal("b", stop_loop) | S, "root"),
          "failed", "0.1", "failed", "a role stopped the run's event loop (loop.stop()); in flight: executor:think"),
    Fault("executor cancels the run's tasks", lambda: (on_goal("b", cancel_all_tasks) | S, "root"),
          "failed", "0.1", "failed", "the run's task was cancelled from inside the run"),
    # bad outputs of every role
    Fault("atomizer is_atomic not a bool", lambda: (on_goal("root", returning(out(is_atomic="yes", task_type="think")),
                                                            "atomizer") | S, "root"),
          "failed", "0", "failed", "is_atomic must be a bool"),
    Fault("atomizer output misses fields", lambda: (on_goal("root", returning(None), "atomizer") | S, "root"),
          "failed", "0", "failed", "no field 'is_atomic'"),
    Fault("atomizer task type a huge int",
          lambda: (on_goal("root", returning(out(is_atomic=False, task_type=10 ** 5000)), "atomizer") | S, "root"),
          "completed", "0", "completed", "unknown task type '<int of", handled=True),
    Fault("planner reply not a list twice", lambda: (with_planner(planner_answers("1. do it", 7), **S), "root"),
          "partial", "0", "degraded", "not a list"),
    Fault("planner cycle of length 2", lambda: (with_planner(planner_answers(cycle(2)), **S), "root"),
          "completed", "0", "completed", "(a cycle)", handled=True),
    Fault("planner cycle of length 3", lambda: (with_planner(planner_answers(cycle(3)), **S), "root"),
          "completed", "0", "completed", "(a cycle)", handled=True),
    Fault("planner cycle of length 8", lambda: (with_planner(planner_answers(cycle(8)), **S), "root"),
          "completed", "0", "completed", "(a cycle)", handled=True),
    Fault("planner junk items", lambda: (with_planner(planner_answers([None, 3, {"task_type": "think"}, [1],
                                                                       {"goal": "real", "task_type": {"x"}}]), **S),
                                         "root"),
          "completed", "0", "completed", "no goal; dropped", handled=True),
    Fault("planner forward reference", lambda: (with_planner(planner_answers(
        [{"goal": "a", "task_type": "think", "depends_on": [1]}, {"goal": "b", "task_type": "think"}]), **S), "root"),
          "completed", "0", "completed", "(a forward reference)", handled=True),
    Fault("planner self-dependency", lambda: (with_planner(planner_answers(
        [{"goal": "a", "task_type": "think", "depends_on": [0]}]), **S), "root"),
          "completed", "0", "completed", "depends on itself", handled=True),
    Fault("planner dependency a huge int",
          lambda: (with_planner(planner_answers([{"goal": "a", "task_type": "think", "depends_on": [10 ** 5000]}]),
                                **S), "root"),
          "completed", "0", "completed", "dependency '<int of", handled=True),
    Fault("planner oversized plan", lambda: (with_planner(planner_answers(
        [{"goal": f"part {i}", "task_type": "think", "depends_on": []} for i in range(100)]), **S), "root"),
          "completed", "0", "completed", "kept the first 8", handled=True),
    Fault("executor output None", lambda: (on_goal("b", returning(out(output=None))) | S, "root"),
          "partial", "0.1", "failed", "output must be a str"),
    Fault("executor output not a string", lambda: (on_goal("b", returning(out(output={"answer": 42}))) | S, "root"),
          "partial", "0.1", "failed", "output must be a str"),
    Fault("executor output attribute raises", lambda: (on_goal("b", returning(BadAttribute())) | S, "root"),
          "partial", "0.1", "failed", "could not be read"),
    Fault("aggregator output None", lambda: (on_goal("root", returning(out(output=None)), "aggregator") | S, "root"),
          "failed", "0", "failed", "output must be a str"),
    Fault("verifier verdict not a bool", lambda: (roles({}) | {"verifier": verifier_says("yes")} | S, "solo"),
          "failed", "0", "failed", "verdict must be a bool"),
    Fault("verifier second verdict not a bool",
          lambda: (roles({}) | {"verifier": verifier_says(False, "maybe")} | S, "solo"),
          "failed", "0", "failed", "verdict must be a bool"),
    Fault("verifier rejects twice", lambda: (roles({}) | {"verifier": verifier_says(False)} | S, "solo"),
          "partial", "0", "unverified", "rejected both attempts"),
    Fault("output holds a lone surrogate", lambda: (on_goal("b", returning(out(output="bad \ud800 text"))) | S, "root"),
          "completed", "0.1", "completed", "", handled=True, check=lambda run: "\ud800" in run.node("0.1").output),
    Fault("optional output NaN", lambda: (on_goal("b", returning(out(output="x", reasoning=math.nan))) | S, "root"),
          "completed", "0.1", "completed", "", handled=True),
    # dependencies
    Fault("failure skips dependents transitively", lambda: (chain(4) | S, "root"),
          "failed", "0.3", "skipped", "0.2", check=lambda run: [n.status for n in run.nodes[1:]] ==
          ["failed", "skipped", "skipped", "skipped"]),
    Fault("1 MB dependency result", lambda: (huge_dependency() | S, "root"), "completed", "0.2", "completed", "",
          handled=True, check=context_bounded),
    Fault("every subtask fails", lambda: (roles() | {"executors": {"think": raising(RuntimeError("down"))}} | S, "root"),
          "failed", "0", "failed", "nothing to aggregate"),
    # the goal itself
    Fault("goal with NUL", lambda: (roles({}) | S, "nul \x00 inside"), "completed", "0", "completed", "",
          handled=True),
    Fault("goal with lone surrogate", lambda: (roles({}) | S, "half \udc80 char"), "completed", "0", "completed", "",
          handled=True),
    Fault("1 MB goal", lambda: (short_answers() | S, BIG), "completed", "0", "completed", "", handled=True,
          check=json_once(BIG)),
    Fault("empty goal", lambda: (roles({}) | S, "   "), "ValueError"),
    Fault("goal not a string", lambda: (roles({}) | S, b"bytes goal"), "ValueError"),
)


def make_roma(kwargs: dict) -> Roma:
    """A Roma from ``kwargs``, minus settings this version of the controller does not have."""
    known = inspect.signature(Roma).parameters
    if any(p.kind is p.VAR_KEYWORD for p in known.values()):  # settings as **keywords: all are known
        return Roma(**kwargs, max_depth=1)
    return Roma(**{k: v for k, v in kwargs.items() if k in known}, max_depth=1)


@dataclass(frozen=True)
class Outcome:
    run: Run | None  # returned, or attached to the raised exception
    raised: BaseException | None
    hung: bool
    seconds: float
    json_error: str | None = None  # the run could not be saved and read back


def execute(fault: Fault, guard_s: float = GUARD_S) -> Outcome:
    """Run one fault; a run still going after ``guard_s`` is abandoned (a daemon thread) as hung."""
    kwargs, goal = fault.build()
    box: dict[str, Any] = {}

    def target():
        try:
            box["run"] = make_roma(kwargs).run(goal)
        except BaseException as err:  # noqa: BLE001 - what escapes is the measurement
            box["raised"] = err

    start = time.monotonic()
    if fault.main_thread:
        target()
    else:
        worker = threading.Thread(target=target, daemon=True, name=f"fault: {fault.name}")
        worker.start()
        worker.join(guard_s)
        if worker.is_alive():
            return Outcome(None, None, True, time.monotonic() - start)
    seconds = time.monotonic() - start
    raised = box.get("raised")
    run = box.get("run") or getattr(raised, "run", None)
    json_error = None
    if isinstance(run, Run):
        try:
            if Run.from_json(run.to_json()) != run:
                json_error = "the run read back differs"
        except Exception as err:  # noqa: BLE001
            json_error = f"{type(err).__name__}: {err}"[:200]
    return Outcome(run if isinstance(run, Run) else None, raised, False, seconds, json_error)


def classify(fault: Fault, outcome: Outcome) -> str:
    if outcome.hung:
        return "hang"
    if outcome.run is None:
        typed_refusal = fault.expect == "ValueError" and isinstance(outcome.raised, ValueError)
        return "typed" if typed_refusal else "crash"
    if outcome.json_error is not None:
        return "crash"
    run = outcome.run
    if fault.check is not None and not fault.check(run):
        return "silent"
    if run.status != "completed":
        return "typed"
    marks = [w for n in run.nodes for w in n.warnings]
    if fault.handled and (not fault.text or any(fault.text in w for w in marks)):
        return "handled"
    return "silent"


def main() -> None:
    counts: dict[str, int] = {}
    for fault in FAULTS:
        outcome = execute(fault)
        kind = classify(fault, outcome)
        counts[kind] = counts.get(kind, 0) + 1
        detail = outcome.run.status if outcome.run else type(outcome.raised).__name__ if outcome.raised else "-"
        print(f"{kind:>8}  {outcome.seconds:5.1f} s  {fault.name}  [{detail}]"
              + (f"  {outcome.json_error}" if outcome.json_error else ""), flush=True)
    summary = {"faults": len(FAULTS), **{k: counts.get(k, 0) for k in ("typed", "handled", "hang", "crash", "silent")}}
    print(json.dumps(summary))
    sys.stdout.flush()
    # hung faults may leave threads spinning: do not wait for them
    import os
    os._exit(0)


if __name__ == "__main__":
    main()
