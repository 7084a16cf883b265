"""The simulated provider (roma_lab.simulator): planted skills realised, outcomes a function
of (seed, model, task, rollout) alone, a provider's faults seen and typed by the project's own client
path (resolve_lm("openai/<name>") at $ROMA_LAB_API_BASE), prices reaching the cost path, loopback only,
and a single-call evaluation measuring the skill it was given. Everything on 127.0.0.1, no model."""

import contextlib
import json
import random
import statistics
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import dspy
import pytest
from online_server import online_isolation  # noqa: F401 - autouse fixture: a fresh DSPy cache per test

from roma_lab.bench import ContainsGrader, ExactGrader, GaiaGrader, NumericGrader
from roma_lab.evaluate import agent, evaluate, roma, single_call, tasks_from
from roma_lab.lm import resolve_lm, rollout, rollout_seed
from roma_lab.simulator import SimFaults, SimLatency, SimModel, SimulatedWorld, simulated_provider
from roma_lab.simulator._cli import main as shell_main

GOLDS = ["Paris", "8", "Shakespeare", "1,204", "3.75", "$17", "blue whale", "Marie Curie", "-4", "0", "Turku",
         "H2O", "1969", "Mount Everest", "12%"]


def synthetic_tasks(n, *, levels=None):
    """``n`` distinct questions with golds of every form the graders read (text, integer, decimal,
    money, percent, thousands separator), optionally a level each."""
    rows = []
    for i in range(n):
        row = {"id": f"t{i}", "question": f"Question {i}: what is the value asked for in case {i}?",
               "answer": GOLDS[i % len(GOLDS)]}
        if levels:
            row["level"] = levels[i % len(levels)]
        rows.append(row)
    return tasks_from(rows, name="synthetic")


def post(base, body, timeout=30):
    request = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return reply.status, json.loads(reply.read()), dict(reply.headers)
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read()), dict(err.headers)


def ask_body(model, question, seed=None):
    body = {"model": model, "messages": [{"role": "user", "content": question}], "temperature": 0.0}
    return body if seed is None else {**body, "seed": seed}


# --- the rule, without a server ------------------------------------------------------------------


def test_the_skill_is_realised_over_2000_tasks_within_binomial_tolerance():
    tasks = synthetic_tasks(2000, levels=["L1", "L2"])
    world = SimulatedWorld(tasks, {"flat": 0.7, "tiered": {"L1": 0.9, "L2": 0.3}}, seed=3, difficulty_sd=1.5)
    for model, level, skill in [("flat", None, 0.7), ("tiered", "L1", 0.9), ("tiered", "L2", 0.3)]:
        ids = [it.item_id for it in tasks.items if level is None or it.metadata["level"] == level]
        right = sum(world.correct(model, t, rollout_seed("0")) for t in ids)
        sd = (skill * (1 - skill) / len(ids)) ** 0.5
        assert abs(right / len(ids) - skill) < 3.5 * sd, (model, level, right / len(ids))
        assert abs(world.expected_accuracy(model, ids) - skill) < 3.5 * sd  # the planted P averages to it too


def test_outcomes_depend_on_seed_model_task_and_rollout_alone_not_on_the_order_asked():
    tasks = synthetic_tasks(200)
    keys = [(m, it.item_id, r) for m in ("a", "b") for it in tasks.items for r in (None, 1, 2)]
    first = SimulatedWorld(tasks, {"a": 0.6, "b": 0.4}, seed=11)
    again = SimulatedWorld(tasks, {"a": 0.6, "b": 0.4}, seed=11)
    shuffled = random.Random(0).sample(keys, len(keys))
    assert {k: first.answer(*k) for k in keys} == {k: again.answer(*k) for k in shuffled}
    other_seed = SimulatedWorld(tasks, {"a": 0.6, "b": 0.4}, seed=12)
    assert [first.correct(*k) for k in keys] != [other_seed.correct(*k) for k in keys]
    assert [first.correct("a", it.item_id, 1) for it in tasks.items] != [first.correct("a", it.item_id, 2)
                                                                         for it in tasks.items]  # runs differ


def phi(xs, ys):
    return statistics.correlation([float(x) for x in xs], [float(y) for y in ys])


def test_task_difficulty_correlates_outcomes_across_models_and_without_it_they_are_independent():
    tasks = synthetic_tasks(2000)
    models = {"a": 0.6, "b": 0.5}
    hard = SimulatedWorld(tasks, models, seed=5, difficulty_sd=1.5)
    flat = SimulatedWorld(tasks, models, seed=5, difficulty_sd=0.0)
    for world, low, high in ((hard, 0.15, 1.0), (flat, -0.07, 0.07)):
        a = [world.correct("a", it.item_id, 7) for it in tasks.items]
        b = [world.correct("b", it.item_id, 7) for it in tasks.items]
        assert low < phi(a, b) < high


def test_a_right_answer_is_the_gold_every_grader_takes_and_a_wrong_one_none_takes():
    tasks = synthetic_tasks(60)
    world = SimulatedWorld(tasks, {"right": 1.0, "wrong": 0.0}, seed=0)
    graders = [GaiaGrader(), ExactGrader(), ContainsGrader(), NumericGrader()]
    for it in tasks.items:
        numeric = it.answer.replace("$", "").replace("%", "").replace(",", "").lstrip("-").replace(".", "").isdigit()
        for grader in graders if numeric else graders[:3]:
            assert grader(it, world.answer("right", it.item_id, 1)).score == 1.0, (grader, it.answer)
            assert grader(it, world.answer("wrong", it.item_id, 1)).score == 0.0, (grader, it.answer)


def test_latency_is_lognormal_with_the_median_and_p99_it_was_given():
    latency = SimLatency(median_s=1.0, p99_s=8.0)
    assert latency.seconds(0.5) == pytest.approx(1.0)
    assert latency.seconds(0.99) == pytest.approx(8.0)
    assert SimLatency(0.5).seconds(0.999) == 0.5


@pytest.mark.parametrize("make", [
    lambda: SimModel(1.2), lambda: SimModel(0.5, 0.1), lambda: SimFaults(server_error=0.6, drop=0.5),
    lambda: SimLatency(2.0, 1.0), lambda: SimulatedWorld(synthetic_tasks(4, levels=["L1", "L2"]), {"m": {"L1": 0.5}}),
])
def test_settings_that_cannot_hold_are_refused(make):
    with pytest.raises(ValueError):
        make()


# --- the server ----------------------------------------------------------------------------------


def test_it_binds_loopback_only():
    tasks = synthetic_tasks(3)
    for host in ("0.0.0.0", "localhost", "::", "192.168.1.10"):
        with pytest.raises(ValueError, match="127.0.0.1"):
            with simulated_provider(tasks, {"m": 0.5}, host=host):
                pass
    with pytest.raises(SystemExit):
        shell_main(["world:dev", "--model", "m=0.5", "--host", "0.0.0.0"])


BAD_SHELL_INPUTS = [
    (["--port", "70000"], "--port: a port is 0 to 65535"),  # was an OverflowError and its traceback
    (["--port", "-1"], "--port: a port is 0 to 65535"),
    (["--port", "http"], "--port: a port is 0 to 65535"),
    (["--model", "m=0.9"], "--model names 'm' twice"),  # was: 0.9 silently kept
    (["--model", "n=1.5"], "--model n: a skill is a probability in [0, 1], got 1.5"),
    (["--model", "n=most"], "--model n: a skill is a probability (0.8) or one per level"),
    (["--model", "n=nan"], "--model n: a skill is a probability (0.8) or one per level"),
    (["--model", "n=L1:0.9,L1:0.5"], "--model n: a skill per level names each level once"),
    (["--model", "n=L1:0.9,L2"], "--model n: a skill is a probability (0.8) or one per level"),
    (["--model", "n"], "--model takes NAME=VALUE"),
    (["--price", "m=0.5"], "--price m=0.5: takes IN,OUT"),
    (["--price", "m=0.5,1,2"], "--price m=0.5,1,2: takes IN,OUT"),
    (["--price", "m=cheap,1"], "--price m=cheap,1: takes IN,OUT"),
    (["--price", "m=-1,2"], "--model m: prices are USD >= 0 per 1k tokens"),
    (["--price", "m=1,2", "--price", "m=3,4"], "--price names 'm' twice"),
    (["--price", "other=1,2"], "--price names models not served: ['other']"),
    (["--median-s", "inf"], "--median-s: a finite number, got 'inf'"),
    (["--median-s", "2", "--p99-s", "1"], "p99_s is >= median_s > 0"),
    (["--rate-limit", "2"], "the rate of 429 is a probability in [0, 1], got 2.0"),
    (["--retry-after-s", "-1"], "retry_after_s is whole seconds >= 0"),
    (["--difficulty-sd", "-1"], "difficulty_sd is >= 0"),
    (["--host", "0.0.0.0"], "binds 127.0.0.1 only"),
]


def shell_exit(argv):
    """What the shell entry exits with, run on a thread: a bad value accepted again fails the test
    instead of serving for ever (there, the SIGTERM handler refuses to be set)."""
    import threading

    box = {}

    def run():
        try:
            box["code"] = shell_main(argv)
        except SystemExit as stopped:
            box["code"] = stopped.code
        except BaseException as err:  # noqa: BLE001 - a traceback the shell would print
            box["code"] = err

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(60)
    return box.get("code", "still serving")


@pytest.mark.parametrize(("extra", "message"), BAD_SHELL_INPUTS, ids=[" ".join(a) for a, _ in BAD_SHELL_INPUTS])
def test_every_bad_value_from_the_shell_is_one_line_on_stderr_with_exit_status_2(tmp_path, capsys, extra, message):
    path = tmp_path / "tasks.csv"
    path.write_text("id,question,answer\nq1,What is the capital of France?,Paris\n", encoding="utf-8")
    code = shell_exit([str(path), "--model", "m=0.5", *extra])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, (code, err)
    assert err.startswith("error: ") and message in err and "--help` shows the usage" in err, err


def test_a_missing_task_file_and_a_taken_port_are_one_line_with_exit_status_2(tmp_path, capsys):
    import socket

    code = shell_exit([str(tmp_path / "none.csv"), "--model", "m=0.5"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "none.csv" in err, err
    path = tmp_path / "tasks.csv"
    path.write_text("id,question,answer\nq1,What is the capital of France?,Paris\n", encoding="utf-8")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        code = shell_exit([str(path), "--model", "m=0.5", "--port", str(taken.getsockname()[1])])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "cannot serve on port" in err, err


def served_replies(base, bodies, workers):
    def one(body):
        status, payload, _ = post(base, body)
        assert status == 200
        return payload["choices"][0]["message"]["content"]

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, bodies))


def test_replies_are_the_same_in_any_order_at_any_concurrency_and_across_a_restart():
    tasks = synthetic_tasks(40)
    models = {"a": 0.6, "b": 0.3}
    bodies = [ask_body(m, it.question, seed) for m in models for it in tasks.items for seed in (None, 101, 202)]
    with simulated_provider(tasks, models, seed=9) as sim:
        in_order = served_replies(sim.base_url, bodies, workers=1)
    order = random.Random(1).sample(range(len(bodies)), len(bodies))
    with simulated_provider(tasks, models, seed=9) as sim:
        concurrent = served_replies(sim.base_url, [bodies[i] for i in order], workers=32)
    assert [concurrent[order.index(i)] for i in range(len(bodies))] == in_order
    # killed half-way and started again (another process would do the same: nothing is kept between)
    half = len(bodies) // 2
    with simulated_provider(tasks, models, seed=9) as sim:
        before = served_replies(sim.base_url, bodies[:half], workers=8)
    with simulated_provider(tasks, models, seed=9) as sim:
        after = served_replies(sim.base_url, bodies[half:], workers=8)
    assert before + after == in_order
    with simulated_provider(tasks, models, seed=10) as sim:
        assert served_replies(sim.base_url, bodies, workers=8) != in_order


def test_it_holds_at_least_64_requests_at_once():
    tasks = synthetic_tasks(96)
    with simulated_provider(tasks, {"m": 0.5}, latency=SimLatency(1.0)) as sim:
        started = time.monotonic()
        served_replies(sim.base_url, [ask_body("m", it.question) for it in tasks.items], workers=96)
        wall = time.monotonic() - started
    assert sim.max_in_flight >= 64 and wall < 4.0  # 96 one-second replies, not one after another


def test_the_models_list_names_the_world_so_another_world_is_another_server_to_the_cache():
    tasks = synthetic_tasks(5)

    def listed(seed):
        with simulated_provider(tasks, {"m": 0.5}, seed=seed) as sim:
            with urllib.request.urlopen(sim.base_url + "/models", timeout=10) as reply:
                return json.loads(reply.read())["data"]

    assert listed(1) == listed(1) != listed(2)
    assert [entry["id"] for entry in listed(1)] == ["m"]


# --- through the project's client path -------------------------------------------------------------

QUESTION = "Question 0: what is the value asked for in case 0?"


@pytest.fixture
def sim_env(monkeypatch):
    """Start a simulated provider named by $ROMA_LAB_API_BASE (20 synthetic tasks unless given)."""

    @contextlib.contextmanager
    def start(faults=SimFaults(), models=None, tasks=None, **kwargs):
        with simulated_provider(tasks or synthetic_tasks(20), models or {"m": 0.5}, faults=faults, **kwargs) as sim:
            monkeypatch.setenv("ROMA_LAB_API_BASE", sim.base_url)
            yield sim

    return start


@pytest.mark.parametrize("fault, settings, error, outcome", [
    (SimFaults(rate_limit_retry_after=1.0), {}, dspy.utils.exceptions.LMRateLimitError, "429-retry-after"),
    (SimFaults(rate_limit=1.0), {}, dspy.utils.exceptions.LMRateLimitError, "429"),
    (SimFaults(server_error=1.0), {}, dspy.utils.exceptions.LMServerError, "500"),
    (SimFaults(drop=1.0), {}, dspy.utils.exceptions.LMServerError, "drop"),
    (SimFaults(stall=1.0), {"timeout": 1}, dspy.utils.exceptions.LMTimeoutError, "stall"),
])
def test_each_fault_reaches_the_projects_client_typed_as_it_types_them(sim_env, fault, settings, error, outcome):
    with sim_env(fault) as sim:
        lm = resolve_lm("openai/m", num_retries=0, **settings)
        started = time.monotonic()
        with pytest.raises(error):
            lm(QUESTION)
        assert time.monotonic() - started < 10  # a stall is cut by the client's timeout, never waited out
    assert [c.outcome for c in sim.calls] == [outcome]


def test_a_429_with_retry_after_is_waited_as_sent_and_one_without_backs_off_dspys_way(sim_env):
    gaps = {}
    for outcome, faults in (("429-retry-after", SimFaults(rate_limit_retry_after=1.0, retry_after_s=2)),
                            ("429", SimFaults(rate_limit=1.0))):
        with sim_env(faults) as sim:
            with pytest.raises(dspy.utils.exceptions.LMRateLimitError):
                resolve_lm("openai/m", num_retries=1)(QUESTION)
        assert [c.outcome for c in sim.calls] == [outcome, outcome]
        gaps[outcome] = sim.calls[1].arrived_s - sim.calls[0].arrived_s
    assert gaps["429-retry-after"] >= 2.0 and 1.0 <= gaps["429"] < 2.0  # the header's 2 s; DSPy's first 1 s


def test_faults_at_a_rate_are_retried_and_the_answers_are_those_of_a_faultless_run(sim_env):
    tasks = synthetic_tasks(20)
    faults = SimFaults(rate_limit_retry_after=0.1, server_error=0.1, drop=0.1, retry_after_s=0)
    answers = {}
    for name, injected in (("clean", SimFaults()), ("faulty", faults)):
        with sim_env(injected, tasks=tasks) as sim:
            lm = resolve_lm("openai/m", num_retries=6, cache=False)

            def ask(question, lm=lm):
                with rollout("0"):
                    return lm(question)[0]

            with ThreadPoolExecutor(8) as pool:  # the back-off waits overlap
                answers[name] = list(pool.map(ask, [it.question for it in tasks.items]))
        if name == "faulty":
            outcomes = {c.outcome for c in sim.calls}
            assert {"429-retry-after", "500", "drop", "ok"} <= outcomes
    assert answers["faulty"] == answers["clean"]


def test_a_priced_model_gives_each_call_its_cost_and_an_unpriced_one_an_unknown_cost(sim_env):
    models = {"priced": SimModel(0.5, usd_per_1k_input=0.5, usd_per_1k_output=2.0), "free": 0.5}
    with sim_env(models=models) as sim:
        priced, unpriced = (single_call(f"openai/{m}").answer(QUESTION) for m in ("priced", "free"))
    served = {c.model: c for c in sim.calls}
    expected = (served["priced"].input_tokens * 0.5 + served["priced"].output_tokens * 2.0) / 1000
    assert served["priced"].cost == pytest.approx(expected) and expected > 0
    assert priced.usage().cost == pytest.approx(expected)  # read by the project's cost path (call_usage), not recomputed
    assert (priced.usage().input_tokens, priced.usage().output_tokens) == (served["priced"].input_tokens,
                                                          served["priced"].output_tokens)
    assert unpriced.usage().cost is None  # unknown, never 0


def test_an_unknown_model_is_a_404_naming_what_is_served():
    with simulated_provider(synthetic_tasks(3), {"m": 0.5}) as sim:
        status, payload, _ = post(sim.base_url, ask_body("other", "hello"))
    assert status == 404 and "'m'" in payload["error"]["message"]


# --- an evaluation measures what was planted ---------------------------------------------------------


def test_a_single_call_evaluation_measures_the_planted_skill_and_a_resumed_one_the_same_rows(sim_env, tmp_path):
    tasks = synthetic_tasks(50)
    models = {"strong": 0.8, "weak": 0.3}

    def systems():
        return [single_call("openai/strong", label="strong"), single_call("openai/weak", label="weak")]

    with sim_env(models=models, tasks=tasks, seed=4) as sim:
        clean = evaluate(systems(), tasks, "quasi-exact", runs=2, out=tmp_path / "clean", progress=False)
        world = sim.world
    rows = clean.rows
    assert rows["error"].isna().all() and len(rows) == 2 * 2 * 50
    for label, skill in models.items():
        mine = rows[rows["condition"] == label]
        for run in (0, 1):  # every row is the draw the simulator made for it
            scored = mine[mine["run"] == run].set_index("task_id")["score"]
            assert all(scored[t] == float(world.correct(label, t, rollout_seed(str(run)))) for t in scored.index)
        sd = (skill * (1 - skill) / len(mine)) ** 0.5
        assert abs(mine["score"].mean() - skill) < 4 * sd  # near the planted skill (2 x 50 draws)
        assert abs(mine["score"].mean() - world.expected_accuracy(label)) < 4 * sd
    # a run stopped after 20 tasks, then resumed against the simulator restarted at its address (the
    # address is in the model's label, which a resumed evaluation must match): the clean run's rows
    with sim_env(models=models, tasks=tasks, seed=4) as sim:
        evaluate(systems(), tasks.head(20), "quasi-exact", runs=2, out=tmp_path / "resumed", progress=False)
    with sim_env(models=models, tasks=tasks, seed=4, port=sim.port):
        resumed = evaluate(systems(), tasks, "quasi-exact", runs=2, out=tmp_path / "resumed", progress=False)
    keep = ["condition", "run", "task_id", "prediction", "score"]
    assert resumed.rows[keep].equals(clean.rows[keep])


def test_roma_and_the_agent_run_on_it_and_answer_with_the_planted_outcome(sim_env, tmp_path):
    tasks = synthetic_tasks(4)
    with sim_env(models={"right": 1.0, "wrong": 0.0}, tasks=tasks):
        systems = [system for name in ("right", "wrong")
                   for system in (roma(f"openai/{name}", label=f"roma-{name}", max_depth=1),
                                  agent(None, f"openai/{name}", label=f"agent-{name}"))]
        result = evaluate(systems, tasks, "quasi-exact", out=tmp_path, progress=False)
    rows = result.rows.set_index("condition")
    assert rows["error"].isna().all()
    assert (rows.loc[["roma-right", "agent-right"], "score"] == 1.0).all()
    assert (rows.loc[["roma-wrong", "agent-wrong"], "score"] == 0.0).all()
    trajectory = result.trace("agent-right", tasks.items[0].item_id)
    assert len(trajectory.rollouts[0].steps) == 1  # the actor answered at its first step, no tool
    run = result.trace("roma-right", tasks.items[0].item_id)
    assert len(run.nodes) == 3 and all(n.error is None for n in run.nodes)  # the scripted plan parsed and ran


def test_the_shell_entry_serves_a_task_file_until_sigterm(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    path = tmp_path / "tasks.csv"
    path.write_text("id,question,answer\nq1,What is the capital of France?,Paris\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    server = subprocess.Popen([sys.executable, "-m", "roma_lab.simulator", str(path), "--model", "sure=1.0",
                               "--price", "sure=1,2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env)
    try:
        line = server.stdout.readline().strip()
        assert line.startswith("ROMA_LAB_API_BASE=http://127.0.0.1:")
        status, payload, headers = post(line.partition("=")[2], ask_body("sure", "What is the capital of France?"))
        assert status == 200 and payload["choices"][0]["message"]["content"] == "Paris"
        assert float(headers["x-litellm-response-cost"]) > 0
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
