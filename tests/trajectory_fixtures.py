"""Real trajectories for the trajectory-view tests: ``roma_lab.agents`` on the meta-routing tool suite,
with a scripted model (``roma_lab.lm.ScriptedEngine``) whose every reply is stated here.

The actor follows its task family's route (retrieve, then verify, on ``conflicting_sources``) and
answers the last candidate it saw. Best-of-N rollouts differ by their seed: rollout 0 follows the
route; rollout 1 first calls a tool that does not exist, then skips verification and answers the
outdated record; rollout 2 answers "Unable to determine"; later ones act as rollout 0. A vote over
three is then a tie (one vote each for two answers; rollout 2 does not vote), which the tie rule
decides; over four, the verified answer wins 2 to 1.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import dspy

from roma_lab.agents import Agent, AgentConfig, suite_tasks
from roma_lab.trace import read_trajectories
from roma_lab.lm import CachingEngine, ScriptedEngine, script_reply
from roma_lab.router._benchmark import FAMILIES
from roma_lab.router._tools import TOOL_NAMES

FAMILY = "conflicting_sources"
N_TASKS = 2
CONFIGS = (
    AgentConfig(name="plan-and-revise", planning="revise", revise_every=1, memory="summary", memory_window=1),
    AgentConfig(name="best-of-3-vote", tts="best_of_n", n_rollouts=3, selection="vote", temperature=0.7),
)
ROLES = {("plan",): "planner", ("revised_plan",): "reviser", ("summary",): "summarizer", ("analysis", "score"): "scorer",
         ("analysis", "index"): "selector"}
REPLIES = {  # by role; other roles (ROMA's, for subtask decomposition) get roma_lab.lm.script_reply
    "planner": lambda inputs: {"plan": "1. retrieve the records\n2. verify which one is current\n3. answer"},
    "reviser": lambda inputs: {
        "revised_plan": f"{inputs['observations'].count('Step ')} step(s) done; continue: "
                        + ("verify, then answer" if "verify" not in inputs["observations"] else "answer")},
    "summarizer": lambda inputs: {"summary": "summary: " + inputs["step"].splitlines()[0]},
    "scorer": lambda inputs: {"analysis": "all attempts look alike", "score": 7},
    "selector": lambda inputs: {"analysis": "the first attempt", "index": 0},
}


def tasks():
    return suite_tasks(("dev",), families=[FAMILY])[:N_TASKS]


def steps_done(memory: str) -> int:
    return max((int(n) for n in re.findall(r"\bStep (\d+):", memory)), default=0)  # also "[subtask: g] Step n:"


def act(action: str, answer: str = "", **arguments: str) -> dict[str, str]:
    return {"thought": f"next: {action}", "action": action, "arguments": json.dumps(arguments), "answer": answer}


class SeededEngine(ScriptedEngine):
    """The scripted engine, keeping the seed of the request being answered (it tells rollouts apart),
    per thread: rollouts and (task, run) pairs run at once."""

    def __init__(self, respond):
        super().__init__(respond)
        self._current = threading.local()

    @property
    def seed(self) -> int | None:
        return getattr(self._current, "seed", None)

    def complete(self, request):
        self._current.seed = request.config.seed
        return super().complete(request)


def actor(inputs, rollout: int) -> dict[str, str]:
    done = steps_done(inputs["memory"])
    route = [TOOL_NAMES[op] for op in FAMILIES[FAMILY].route]
    if rollout == 2:
        return act("final_answer", "Unable to determine")
    if rollout == 1:
        if done == 0:
            return act("web_search", query=inputs["task"][:40])  # no such tool: a typed error step
        route, done = route[:-1], done - 1  # skips verification
    if done < len(route):
        return act(route[done])
    candidates = re.findall(r"Current answer candidate: (.*)", inputs["memory"])
    return act("final_answer", candidates[-1] if candidates else "")


def scripted_lm(cache: Path | None = None, **replies):
    """A ``dspy.LM`` answering every agent role (and ROMA's, for subtask decomposition); ``replies``
    replace a role's reply (``reviser=lambda inputs: {...}``); with ``cache`` a folder, requests go
    through roma_lab's completion cache (a repeated request is then served from it)."""
    engine = SeededEngine(lambda request: None)
    replies = REPLIES | replies

    def respond(request):
        if request.outputs[-3:] == ("action", "arguments", "answer"):  # with or without the ReAct thought
            reply = actor(request.inputs, 0 if engine.seed is None else engine.seed // 1000)
            return {field: reply[field] for field in request.outputs}
        role = ROLES.get(request.outputs)
        return replies[role](request.inputs) if role else script_reply(request)

    engine.respond = respond
    served = engine if cache is None else CachingEngine(engine, model_id="scripted-trajectories", directory=cache)
    return dspy.LM("scripted/trajectories", engine=served, cache=False)


def run_one(config: AgentConfig, task: int = 0, **replies):
    """One trajectory of ``config`` on fixture task ``task`` (not graded: ``Agent.run`` alone)."""
    return Agent(config, lm=scripted_lm(**replies)).run(tasks()[task])


def run_study(out_dir: Path, configs=CONFIGS) -> Path:
    """Each config on the fixture tasks through ``roma_lab.evaluate`` (graded, saved as the runner saves
    them), one evaluation folder per configuration under ``out_dir``."""
    from roma_lab.evaluate import AgentSystem, agent_task_set, evaluate

    for config in configs:
        evaluate([AgentSystem(config, scripted_lm(), config.name)], agent_task_set(tasks()), out=out_dir / config.name,
                 progress=False)
    return out_dir


def study_trajectories(out_dir: Path) -> dict[tuple[str, str], object]:
    """The saved trajectories by (config name, task id)."""
    return {(t.config["name"], t.task_id): t for t in read_trajectories(out_dir)}
