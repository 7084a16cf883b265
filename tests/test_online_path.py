"""The online path end to end, offline: the toolkit drives a real OpenAI-compatible server on loopback
(llama-cpp-python's server on SmolLM2-135M) through the LiteLLM string a user writes for a remote
provider, ``openai/<name>`` at an ``api_base``. A recording proxy stands between them, so every token
count can be checked against what the server itself reported.

Decoding is greedy (``resolve_lm``'s default at a server), so the small model's replies are the same on
every run.
"""

import warnings
from pathlib import Path

import dspy
import pandas as pd
import pytest
from dspy.clients.base_lm import GLOBAL_HISTORY
from online_server import SERVED_NAME, FaultProxy, llama_server, online_isolation, proxy  # noqa: F401 - fixtures

from roma_lab import bench
from roma_lab.controller import Roma
from roma_lab.evaluate import TaskSet, evaluate, roma
from roma_lab.experiments import experiment_status, load_spec, run_experiment
from roma_lab.lm import model_label, resolve_lm, served_from_cache
from roma_lab.optimizer import SEARCH_STATUSES, GepaPlusConfig, compile
from roma_lab.results import read_provenance

REPO = Path(__file__).resolve().parents[1]
NAME = f"openai/{SERVED_NAME}"  # what a user writes: the served model under LiteLLM's OpenAI prefix
GOAL = "Name the capital of France."


def served(proxy, max_tokens=48, **kwargs):
    return resolve_lm(NAME, api_base=proxy.api_base, max_tokens=max_tokens, **kwargs)


def calls_of(run):
    return [c for n in run.nodes for c in n.calls]


def server_tokens(exchanges):
    """(prompt, completion) tokens as the server reported them in its replies."""
    usage = [e.response["usage"] for e in exchanges]
    return sum(u["prompt_tokens"] for u in usage), sum(u["completion_tokens"] for u in usage)


def test_a_roma_run_named_by_the_environment_counts_the_servers_tokens_and_an_unknown_cost(proxy, monkeypatch):
    monkeypatch.setenv("ROMA_LAB_API_BASE", proxy.api_base)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-never-leave-this-machine")
    lm = resolve_lm(NAME, max_tokens=48)  # the server comes from the environment
    assert model_label(lm) == f"{NAME} @ {proxy.api_base}"

    run = Roma(lm=lm, max_depth=1, max_concurrency=1).run(GOAL)

    assert run.status == "completed", run.root.error
    calls, answered = calls_of(run), proxy.completions()
    assert len(calls) >= 2 and len(answered) >= len(calls)  # atomizer + executor at least, all at the server
    assert all((e.request["model"], e.request["max_tokens"], e.request["temperature"]) == (SERVED_NAME, 48, 0.0)
               for e in proxy.exchanges)  # the server defaults: greedy
    assert {e.authorization for e in proxy.exchanges} == {"Bearer no-key"}  # never $OPENAI_API_KEY
    assert (sum(c.input_tokens for c in calls), sum(c.output_tokens for c in calls)) == server_tokens(answered)
    assert all(c.model == NAME and c.cost is None for c in calls)  # an unpriced remote model: unknown, not 0
    total = run.usage_df().set_index("component").loc["total"]
    assert pd.isna(total["cost"]) and total["input_tokens"] == server_tokens(answered)[0]
    assert set(run.settings.models.values()) == {NAME}


def test_a_server_gets_the_portable_max_tokens_which_dspys_native_engine_does_not_send(proxy):
    # Why resolve_lm picks LiteLLM for openai/ at a server: llama-cpp-python's server ignores OpenAI's
    # newer max_completion_tokens, the only limit DSPy's native engine sends (design/online.md).
    proxy.inject("500")  # only the request is of interest: nothing is generated
    for lm in (served(proxy, max_tokens=8, num_retries=0), served(proxy, max_tokens=8, num_retries=0, engine="auto")):
        with pytest.raises(Exception, match="internal error"):
            lm("Say hi.")
    ours, native = (e.request for e in proxy.exchanges)
    assert ours["max_tokens"] == 8 and "max_completion_tokens" not in ours
    assert native["max_completion_tokens"] == 8 and "max_tokens" not in native


def test_a_repeated_request_is_served_from_dspys_cache_marked_and_costs_nothing_new(proxy):
    lm = served(proxy, max_tokens=24)
    first = Roma(lm=lm, max_depth=0).run(GOAL)
    sent = len(proxy.exchanges)
    second = Roma(lm=lm, max_depth=0).run(GOAL)

    assert sent >= 1 and len(proxy.exchanges) == sent  # the repeat never reached the server
    assert second.output == first.output
    assert all(c.cost is None and c.output_tokens > 0 for c in calls_of(first))
    assert all((c.input_tokens, c.output_tokens, c.cost) == (0, 0, 0.0) for c in calls_of(second))

    ask = lm.copy()
    ask("Say hi."), ask("Say hi.")
    assert [served_from_cache(h) for h in ask.history] == [False, True]

    uncached = served(proxy, max_tokens=24, cache=False)  # cache=False: every request goes out
    before = len(proxy.exchanges)
    uncached("Say hi."), uncached("Say hi.")
    assert len(proxy.exchanges) == before + 2


def test_a_native_engine_cache_hit_is_recognised_and_costs_nothing(proxy):
    # DSPy's native (lm15) engine marks a hit only by emptying the entry's usage; a priced call
    # would otherwise be charged again on every cached rerun.
    lm = dspy.LM(f"hosted_vllm/{SERVED_NAME}", api_base=proxy.api_base, api_key="none", max_tokens=16,
                 temperature=0.0)
    first = Roma(lm=lm, max_depth=0).run(GOAL)
    second = Roma(lm=lm, max_depth=0).run(GOAL)
    assert len(proxy.completions()) == len(calls_of(first)) >= 1
    assert all(c.cost is None for c in calls_of(first))
    assert all(c.cost == 0.0 for c in calls_of(second))

    ask = lm.copy()
    ask("Say hi."), ask("Say hi.")
    assert isinstance(ask.history[0]["response"], dspy.lm15.Response)  # the native engine answered
    assert [served_from_cache(h) for h in ask.history] == [False, True]


def test_a_benchmark_item_is_answered_and_graded_through_the_server_by_a_separately_named_judge(proxy, tmp_path):
    item = bench.load_simpleqa()[2]
    system_lm, judge_lm = served(proxy), served(proxy, max_tokens=8)  # the judge: its own model object
    grader = bench.SimpleQAGrader(bench.DSPyJudge(judge_lm))

    with dspy.context(adapter=dspy.JSONAdapter()):  # the judge asks once, in the JSON mode the server honours
        result = evaluate([roma(system_lm, label="roma", max_depth=0)], TaskSet("simpleqa", (item,)), grader,
                          out=tmp_path / "simpleqa_evaluation", progress=False)
    row = result.rows.iloc[0]

    run = result.trace("roma", item.item_id)  # the trace saved beside the row
    assert row["prediction"] == run.output and run.status == "completed"
    assert result.models["roma"] == f"{NAME} @ {proxy.api_base}"
    judged = [e for e in proxy.completions() if "gold target" in str(e.request["messages"])]
    answered = [e for e in proxy.completions() if e not in judged]
    assert len(judged) == 1, "the judge's grading prompt did not reach the server exactly once"
    assert judged[0].request["max_tokens"] == 8 and answered and all(e.request["max_tokens"] == 48 for e in answered)
    calls = calls_of(run)
    assert (sum(c.input_tokens for c in calls), sum(c.output_tokens for c in calls)) == server_tokens(answered)
    assert row["grader"] == f"simpleqa-official-template(judge={NAME} @ {proxy.api_base})"
    # Graded: a label, or (a 135M judge rarely writes the bare letter asked for) a typed grader error
    # that keeps the judge's reply; either way the row is complete and a rerun retries only an error.
    if row["error_stage"] == "grader":
        assert row["error"].startswith("JudgeReplyError") and pd.isna(row["score"]) and row["status"] == "grader_error"
    else:
        assert row["error_stage"] is None and row["label"] in ("CORRECT", "INCORRECT", "NOT_ATTEMPTED")
        assert row["status"] == row["label"].lower()
    # the row counts the trace's calls, which are the server's
    assert (row["input_tokens"], row["output_tokens"]) == server_tokens(answered) and pd.isna(row["cost"])


def test_a_gepa_step_runs_through_the_server(proxy):
    class Answer(dspy.Module):
        def __init__(self):
            super().__init__()
            self.answer = dspy.Predict(dspy.Signature("question -> answer", "Answer with one word."))

        def forward(self, question):
            return self.answer(question=question)

    def metric(gold, pred, trace=None, pred_name=None, pred_trace=None):
        ok = gold.answer in (pred.answer or "").lower()
        return dspy.Prediction(score=float(ok), feedback="correct" if ok else f"expected {gold.answer}")

    def example(question, answer):
        return dspy.Example(question=question, answer=answer).with_inputs("question")

    lm = served(proxy, max_tokens=32)
    config = GepaPlusConfig(proposers=((lm, 0.0),), k=1, n=1, alpha=0.0)  # greedy drafts: the same every run
    seen = len(GLOBAL_HISTORY)
    with dspy.context(lm=lm), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a 135M proposer may fail to draft: that is recorded
        warnings.filterwarnings("ignore", "rollout_id has no effect")  # greedy on purpose, see above
        result = compile(Answer(), trainset=[example("What is frozen water called?", "ice")],
                         valset=[example("What colour is grass?", "green")], metric=metric, config=config,
                         max_metric_calls=4, reflection_minibatch_size=1, use_merge=False)

    assert result.status in SEARCH_STATUSES and result.gepa_metric_calls >= 1 and result.proposal_rounds >= 1
    answered = proxy.completions()
    drafts = [e for e in answered if "new_instruction" in str(e.request["messages"])]
    assert drafts, "no GEPA+ draft reached the server"
    assert not any("seed" in e.request for e in proxy.exchanges)  # a remote model's drafts are keyed by rollout_id
    history = [h for h in GLOBAL_HISTORY[seen:] if h["model"] == NAME]
    fresh = [h for h in history if not served_from_cache(h)]  # greedy repeats of a request come from the cache
    assert len(fresh) == len(answered)  # every request the search sent went to the server, none elsewhere
    assert sorted((h["usage"]["prompt_tokens"], h["usage"]["completion_tokens"]) for h in fresh) == sorted(
        (e.response["usage"]["prompt_tokens"], e.response["usage"]["completion_tokens"]) for e in answered)
    assert all(h["cost"] is None for h in history) and all(not h["usage"] for h in history if h not in fresh)


def test_a_notebook_is_pointed_at_the_server_by_the_runners_lm_and_the_environment(llama_server, tmp_path, monkeypatch):
    spec = load_spec(REPO / "experiments" / "01_run_quickstart.toml")
    with FaultProxy(llama_server.port, max_tokens_cap=64) as capped:  # a server that caps replies
        monkeypatch.setenv("ROMA_LAB_API_BASE", capped.api_base)  # inherited by the notebook's kernel
        outcome = run_experiment(spec, results_root=tmp_path, smoke=True, lm=NAME)
        answered = capped.completions()

    assert outcome.status == "completed", outcome.error  # the notebook ran (the 135M model may fail a role)
    assert read_provenance(outcome.out_dir).model == f"{NAME} @ {capped.api_base}"
    calls = pd.read_csv(outcome.out_dir / "calls.csv")
    assert len(answered) >= len(calls) >= 1 and set(calls["model"]) == {NAME}
    assert all(e.request["model"] == SERVED_NAME and e.request["temperature"] == 0.0 for e in answered)
    assert (calls["input_tokens"].sum(), calls["output_tokens"].sum()) == server_tokens(answered)
    total = pd.read_csv(outcome.out_dir / "usage.csv").set_index("component").loc["total"]
    assert pd.isna(total["cost"])  # written as unknown, not 0

    assert experiment_status(spec, results_root=tmp_path, smoke=True, lm=NAME) == "completed"
    monkeypatch.setenv("ROMA_LAB_API_BASE", "http://127.0.0.1:9/v1")
    assert experiment_status(spec, results_root=tmp_path, smoke=True, lm=NAME) == "stale"  # another server
