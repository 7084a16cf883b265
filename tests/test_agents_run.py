"""The agent through roma_lab.evaluate (tidy rows, trajectories, resume, private items), the QA adapter and search."""

from __future__ import annotations

import json
import re
import threading

import dspy
import pandas as pd
import pytest

from roma_lab.agents import Agent, AgentConfig, BM25Source, expand_query, qa_tasks, run_label, search_passages, suite_tasks
from roma_lab.bench import Item
from roma_lab.evaluate import ROW_COLUMNS
from roma_lab.evaluate._private import REDACTED, redacted
from roma_lab.lm import ScriptedEngine
from roma_lab.results import DamagedFileError, summarize
from roma_lab.stats import StatsSettings
from roma_lab.tools import Passage
from roma_lab.trace import Trajectory, TrajectoryFormatError, read_trajectories, trace_path

from evaluations import run_agent


def log_keys(root):
    """(run, task) of every row the attempt log holds, in the order written."""
    log = pd.read_csv(root / "attempts.csv", dtype=str)
    return list(zip(log["run"], log["task_id"]))

ACTOR = ("action", "arguments", "answer")


def actor_lm(policy, name="run", slots=1):
    """A scripted LM whose actor replies ``policy(inputs)``; other roles never get called here. One
    slot unless asked: (task, run) pairs then run one after the other, in order, as the tests
    counting calls in order need."""

    def respond(request):

        model, inputs, outputs, system = request.model, request.inputs, request.outputs, request.system
        if outputs == ACTOR:
            return policy(inputs)
        return {"improved_query": f"{inputs['query']} rewritten"} if outputs == ("improved_query",) else {}

    engine = ScriptedEngine(respond, slots=slots)
    return dspy.LM(f"scripted/{name}", engine=engine, cache=False), engine


def answer(value):
    return {"thought": "", "action": "final_answer", "arguments": "{}", "answer": value}


def test_rows_are_tidy_per_task_and_run_and_carry_what_the_trajectory_says(tmp_path):
    tasks = suite_tasks(("dev",), families=["data_literal"])[:2] + suite_tasks(("dev",), families=["statistic"])[:2]
    lm, engine = actor_lm(lambda inputs: answer(inputs["task"].split('"')[1] if '"' in inputs["task"] else "0"))
    rows = run_agent(AgentConfig(name="lit"), tasks, out_dir=tmp_path, runs=2, lm=lm, progress=False)
    assert list(rows.columns)[:len(ROW_COLUMNS)] == list(ROW_COLUMNS) and len(rows) == 8
    assert {"agent_status", "steps", "tool_calls", "repeated_calls", "rollouts", "split", "stratum"} <= set(rows)
    assert rows["run"].tolist() == [0] * 4 + [1] * 4
    assert rows["task_id"].tolist() == [t.item.item_id for t in tasks] * 2
    literal = rows["stratum"] == "data_literal"
    assert rows.loc[literal, "score"].eq(1.0).all() and rows.loc[literal, "status"].eq("success").all()
    assert not rows.loc[~literal, "score"].eq(1.0).any() and rows.loc[~literal, "status"].eq("incorrect_answer").all()
    assert rows["config"].eq(run_label(AgentConfig(name="lit"))).all() and rows["model_calls"].eq(1).all()
    # the one usage count: tokens from the calls' trackers, cost 0 on the in-process scripted model
    assert rows["input_tokens"].gt(0).all() and rows["cost"].eq(0.0).all()
    root = tmp_path / run_label(AgentConfig(name="lit"))
    saved = read_trajectories(root)
    assert len(saved) == 8 and {t.grade.grader for t in saved} == {"meta-routing exact evaluator"}
    assert all(AgentConfig.from_dict(t.config) == AgentConfig(name="lit") for t in saved)
    # the rows are the results vocabulary's scores: runs of a task averaged, tasks resampled
    scores = rows.assign(condition=rows["config"], subset="dev", correct=rows["score"].astype(float))
    summary = summarize(scores, ["correct"], stats=StatsSettings(n_resamples=100))
    assert summary["n"].tolist() == [4] and summary["runs"].tolist() == [2] and summary["value"].tolist() == [0.5]


def test_an_interrupted_run_resumes_item_by_item_without_repeating_calls(tmp_path):
    tasks = suite_tasks(("dev",), families=["statistic"])[:3]
    calls = []

    def policy(inputs):
        calls.append(inputs["task"])
        if inputs["task"] == tasks[1].item.question and len(calls) == 2:
            raise KeyboardInterrupt  # the user stops the run during the second task
        return answer("0")

    lm, _ = actor_lm(policy)
    with pytest.raises(KeyboardInterrupt):
        run_agent(AgentConfig(), tasks, out_dir=tmp_path, lm=lm, progress=False)
    rows = run_agent(AgentConfig(), tasks, out_dir=tmp_path, lm=lm, progress=False)
    assert calls == [tasks[0].item.question, tasks[1].item.question, tasks[1].item.question, tasks[2].item.question]
    assert len(rows) == 3 and rows["status"].eq("incorrect_answer").all()
    again = run_agent(AgentConfig(), tasks, out_dir=tmp_path, lm=lm, progress=False)
    assert len(calls) == 4 and again.equals(rows)  # a warm rerun calls nothing and reads the same rows


def test_a_system_failure_is_an_error_row_and_is_retried_on_rerun(tmp_path, monkeypatch):
    tasks = suite_tasks(("dev",), families=["statistic"])[:2]
    lm, _ = actor_lm(lambda inputs: answer("0"))
    real_run = Agent.run

    def broken(self, task, **kw):
        if task is tasks[0]:
            raise OSError("disk full")
        return real_run(self, task, **kw)

    monkeypatch.setattr(Agent, "run", broken)
    rows = run_agent(AgentConfig(), tasks, out_dir=tmp_path, lm=lm, progress=False)
    assert rows["status"].tolist() == ["system_error", "incorrect_answer"]
    assert "OSError: disk full" in rows["error"].iloc[0]
    monkeypatch.setattr(Agent, "run", real_run)
    rows = run_agent(AgentConfig(), tasks, out_dir=tmp_path, lm=lm, progress=False)
    assert rows["status"].tolist() == ["incorrect_answer", "incorrect_answer"]


def test_a_changed_configuration_never_resumes_another_configurations_rows(tmp_path):
    tasks = suite_tasks(("dev",), families=["statistic"])[:1]
    lm, engine = actor_lm(lambda inputs: answer("0"))
    run_agent(AgentConfig(name="x"), tasks, out_dir=tmp_path, lm=lm, progress=False)
    run_agent(AgentConfig(name="x", max_steps=4), tasks, out_dir=tmp_path, lm=lm, progress=False)
    assert len(engine.requests) == 2 and len(list(tmp_path.iterdir())) == 2  # one folder per configuration


def test_qa_items_are_graded_by_their_benchmark_grader_closed_book():
    items = [Item("hotpotqa", "0", "Which river flows through Paris?", "Seine"),
             Item("aime2025", "2025_I_1", "Find 6 times 7.", 42)]
    tasks = qa_tasks(items)
    lm, _ = actor_lm(lambda inputs: answer("the Seine" if "Paris" in inputs["task"] else "\\boxed{42}"))
    agent = Agent(AgentConfig(), lm=lm)
    grades = [t.grader(t.item, agent.run(t)) for t in tasks]
    assert [g.grader for g in grades] == ["hotpotqa-official-em-f1", "aime-integer-exact-match"]
    assert [g.score for g in grades] == [1.0, 1.0]
    assert agent.run(tasks[0]).rollouts[0].steps[0].tool_call is None  # closed-book: no tools offered
    assert qa_tasks([Item("frames", "f", "q", "a")])[0].grader.name.startswith("string-match")


@pytest.mark.parametrize("secret", [
    "Which obscure 1970s band recorded an album in a lighthouse?",
    "Which band’s album — recorded in a lighthouse — was called “Keeper”?",  # non-ASCII (a real item has ’)
    'Which band said "we live here"\nand recorded in a lighthouse?',  # quotes and a newline: escaped in JSON
])
def test_browsecomp_questions_are_redacted_from_saved_trajectories(tmp_path, secret):
    tasks = qa_tasks([Item("browsecomp", "3", secret, "The Keepers")])
    lm, _ = actor_lm(lambda inputs: answer("unsure"))
    run_agent(AgentConfig(reanswer=False), tasks, out_dir=tmp_path, lm=lm, progress=False)
    (path,) = (tmp_path / run_label(AgentConfig(reanswer=False)) / "traces").rglob("*.json")
    text = path.read_text()
    forms = {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
    assert not any(form in text for form in forms) and "question redacted" in text
    assert not any(part in text for part in ("obscure 1970s", "band’s album", 'said \\"we live'))
    Trajectory.from_json(text)  # still a trajectory


def test_browsecomp_gold_answers_stay_out_of_saved_files_even_when_predicted(tmp_path):
    # A correct prediction (or a judge's reply) carries the gold answer: it is redacted like the question,
    # from the trajectory and from every row and table, and the grade survives.
    tasks = qa_tasks([Item("browsecomp", "3", "Which band recorded an album in a lighthouse?", "The Keepers")])
    lm, _ = actor_lm(lambda inputs: answer("The Keepers"))
    rows = run_agent(AgentConfig(reanswer=False), tasks, out_dir=tmp_path, lm=lm, progress=False)
    assert rows["score"].tolist() == [1.0]
    saved = [p.read_text() for p in tmp_path.rglob("*") if p.is_file()]
    assert saved and not any("The Keepers" in text or "lighthouse" in text for text in saved)


@pytest.mark.parametrize("predicted", ["the keepers", "Keepers.", "THE KEEPERS"])
def test_browsecomp_answers_and_questions_the_grader_would_match_stay_out_of_saved_files(tmp_path, predicted):
    # The string-match grader counts these as the gold answer (case, articles and punctuation do not
    # matter to it), so written as they are they would put the answer on disk; so would the question
    # echoed in another case.
    question = "Which band recorded an album in a lighthouse?"
    tasks = qa_tasks([Item("browsecomp", "3", question, "The Keepers")])
    lm, _ = actor_lm(lambda inputs: answer(predicted) | {"thought": f"Asked: {question.upper()}"})
    rows = run_agent(AgentConfig(reanswer=False), tasks, out_dir=tmp_path, lm=lm, progress=False)
    assert rows["score"].tolist() == [1.0]
    saved = [p.read_text().casefold() for p in tmp_path.rglob("*") if p.is_file()]
    assert saved and not any("keepers" in text or "lighthouse" in text for text in saved)


def test_a_browsecomp_answer_that_the_redaction_marker_contains_is_still_saved(tmp_path):
    # One BrowseComp gold answer is a substring of the marker: redaction must not find it in its own marker
    # and refuse to write every trajectory of that item.
    tasks = qa_tasks([Item("browsecomp", "4", "Which adjective describes still water?", "clear")])
    lm, _ = actor_lm(lambda inputs: answer("Clear"))
    rows = run_agent(AgentConfig(reanswer=False), tasks, out_dir=tmp_path, lm=lm, progress=False)
    assert rows["score"].tolist() == [1.0] and rows["error"].isna().all()
    saved = [p.read_text().replace(REDACTED, "").casefold() for p in tmp_path.rglob("*") if p.is_file()]
    assert len(saved) >= 3 and not any("clear" in text or "still water" in text for text in saved)
    (trajectory,) = read_trajectories(tmp_path)
    assert trajectory.question == REDACTED  # the marker itself intact, not redacted inside


def test_a_numeric_browsecomp_answer_is_redacted_as_a_word_and_the_trajectory_is_saved(tmp_path):
    # 80 of the 1,266 answers are numbers: "8" also shows inside token counts, latencies, ids and
    # hashes ("805"), which are not the item's text; they stay, and the trajectory is written.
    tasks = qa_tasks([Item("browsecomp", "805", "How many legs has a spider?", "8")])
    lm, _ = actor_lm(lambda inputs: answer("8 legs"))
    rows = run_agent(AgentConfig(reanswer=False), tasks, out_dir=tmp_path, lm=lm, progress=False)
    assert rows["score"].tolist() == [1.0] and rows["task_id"].tolist() == ["805"] and rows["error"].isna().all()
    (trajectory,) = read_trajectories(tmp_path)
    assert trajectory.task_id == "805" and trajectory.question == REDACTED and trajectory.answer == f"{REDACTED} legs"


def test_a_secret_left_where_redaction_does_not_reach_stops_the_write():
    # Dictionary keys are not rewritten; one holding the answer (in any case) must stop the file.
    with pytest.raises(RuntimeError, match="survived redaction"):
        redacted(json.dumps({"details": {"THE KEEPERS": 1}, "rows": [{"ok": "fine"}]}), ("Which band?", "The Keepers"))
    assert json.loads(redacted(json.dumps({"details": {"band": ["the keepers", 8]}}), ("Which band?", "The Keepers")))


@pytest.mark.parametrize("cached", ["ours", "dspy"])
def test_browsecomp_items_are_refused_with_a_model_that_caches_completions(tmp_path, cached):
    # Our completion cache records each request's messages (the question), DSPy's each reply (a correct
    # answer): a caching model passed as an object must not take private items.
    from roma_lab.agents import AgentConfig
    from roma_lab.lm import CachingEngine, ScriptedEngine

    engine = ScriptedEngine(lambda request: answer("unsure"))
    lm = (dspy.LM("scripted/c", engine=CachingEngine(engine, model_id="m", directory=tmp_path / "cache"), cache=False)
          if cached == "ours" else dspy.LM("scripted/c", engine=engine, cache=True))
    tasks = qa_tasks([Item("browsecomp", "3", "Which band recorded an album in a lighthouse?", "The Keepers")])
    with pytest.raises(ValueError, match="actor.*caches completions"):
        run_agent(AgentConfig(reanswer=False), tasks, out_dir=tmp_path / "out", lm=lm, progress=False)
    assert not (tmp_path / "cache").exists() and not (tmp_path / "out").exists()
    if cached == "ours":  # other items may use the cache
        public = qa_tasks([Item("simpleqa", "3", "Which band recorded an album in a lighthouse?", "The Keepers")])
        assert len(run_agent(AgentConfig(reanswer=False), public, out_dir=tmp_path / "out", lm=lm, progress=False)) == 1


def test_python_tool_runs_model_code_in_the_sandbox():
    task = qa_tasks([Item("aime2025", "x", "Compute 6*7.", 42)], python=True)[0]

    def policy(inputs):
        if "Result:" not in inputs["memory"]:
            return {"thought": "", "action": "python", "arguments": '{"code": "print(6*7)"}', "answer": ""}
        return answer("42")

    lm, _ = actor_lm(policy)
    trajectory = Agent(AgentConfig(), lm=lm).run(task)
    assert trajectory.rollouts[0].steps[0].observation == "42" and trajectory.answer == "42"


# --- search -------------------------------------------------------------------------------------


class ListSource:
    def __init__(self, name, hits):
        self.name, self.hits = name, hits
        self.queries = []

    def search(self, query, k):
        self.queries.append(query)
        return [Passage(str(i), text, 1.0) for i, text in enumerate(self.hits)][:k]


def test_expand_gives_synonym_variants_and_no_stemmed_non_words():
    assert expand_query("running tests") == ("running tests",)  # was ("running tests", "runn test")
    variants = expand_query("COVID-19 cases", {"covid-19": ["SARS-CoV-2"]})
    assert variants == ("COVID-19 cases", "SARS-CoV-2 cases")


def test_multi_source_search_fuses_ranks_and_counts_a_shared_passage_once():
    a = ListSource("a", ["alpha", "shared", "beta"])
    b = ListSource("b", ["shared", "gamma"])
    hits = search_passages([a, b], ["q"], k=3)
    assert [p.text for _, p in hits] == ["shared", "alpha", "gamma", "beta"]  # up to k per source, fused
    assert [p.text for _, p in search_passages([a, b], ["q"], k=1)] == ["alpha", "shared"]  # a tie: first seen
    assert search_passages([a], ["q"], k=2) == [("a", Passage("0", "alpha", 1.0)), ("a", Passage("1", "shared", 1.0))]


def test_agent_search_uses_k_sources_and_the_configured_query_optimisation():
    sources = [ListSource("first", ["doc one"]), ListSource("second", ["doc two"]), ListSource("third", ["doc three"])]
    task = qa_tasks([Item("hotpotqa", "0", "Where are dogs kept?", "kennels")], sources=sources,
                    synonyms={"dogs": ["hounds"]})[0]

    def policy(inputs):
        if "Result:" not in inputs["memory"]:
            return {"thought": "", "action": "search", "arguments": '{"query": "dogs kept"}', "answer": ""}
        return answer("kennels")

    lm, _ = actor_lm(policy)
    config = AgentConfig(search_sources=2, query_optimization="reflect+expand")
    trajectory = Agent(config, lm=lm).run(task)
    step = trajectory.rollouts[0].steps[0]
    assert sources[2].queries == []  # only the first k = 2 sources
    assert sources[0].queries == ["dogs kept rewritten", "hounds kept rewritten"]  # REFLECT, then EXPAND
    assert "doc one" in step.observation and "doc two" in step.observation
    assert [c.role for c in step.calls] == ["actor", "query_rewriter"]  # the rewrite is a recorded model call
    missing = {"thought": "", "action": "search", "arguments": "{}", "answer": ""}
    lm, _ = actor_lm(lambda inputs: missing)
    bad = Agent(AgentConfig(reanswer=False), lm=lm).run(task)
    assert bad.status == "bad_arguments" and "query" in bad.rollouts[0].error


def test_bm25_source_reads_a_local_corpus(tmp_path):
    source = BM25Source.over("wiki", ["Paris is the capital of France.", "The Seine flows through Paris."])
    assert [p.doc_id for p in source.search("Seine river", 2)] == ["1"]


def test_a_trajectory_file_in_the_old_format_is_a_typed_error_naming_it(tmp_path):
    tasks = suite_tasks(("dev",), families=["data_literal"])[:1]
    lm, _ = actor_lm(lambda inputs: answer("0"))
    run_agent(AgentConfig(name="old"), tasks, out_dir=tmp_path, lm=lm, progress=False)
    path = next(tmp_path.rglob("traces/*/r0/*.json"))
    data = json.loads(path.read_text())
    # as written before agents recorded controller.RoleCall: a ModelCall per model call
    data["rollouts"][0]["steps"][0]["calls"] = [{"role": "actor", "model": "m", "outputs": {}, "input_tokens": 1,
                                                 "output_tokens": 1, "latency_s": 0.1, "error": None}]
    path.write_text(json.dumps(data))
    with pytest.raises(DamagedFileError, match=re.escape(str(path)) + r".*current format .*inputs"):
        read_trajectories(tmp_path)
    # a resumed run finds the saved file damaged: kept aside (quarantined) and the task run again
    with pytest.warns(UserWarning, match="not a trace roma_lab wrote"):
        rows = run_agent(AgentConfig(name="old"), tasks, out_dir=tmp_path, lm=lm, progress=False)
    assert rows["error"].isna().all() and len(read_trajectories(tmp_path)) == 1
    with pytest.raises(TrajectoryFormatError, match="not a trajectory"):
        Trajectory.from_json("{not json")


# --- (task, run) pairs at once ------------------------------------------------------------------


def untimed(value):
    """A trajectory's JSON data without what depends on the clock (seconds: keys ending in ``_s``)
    and with the scripted model's name left out (the serial and concurrent runs use two)."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if not k.endswith("_s") and k != "model"}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def saved_untimed(root):
    return {p.relative_to(root).as_posix(): untimed(json.loads(p.read_text()))
            for p in sorted((root / "traces").rglob("*.json"))}


class InFlight:
    """Counts the actor calls in flight; the first ``together`` wait for each other (a barrier: they
    must be in flight at once, or it breaks and the test fails)."""

    def __init__(self, together, policy):
        self.barrier = threading.Barrier(together, timeout=10)
        self.policy, self.lock, self.now, self.most, self.calls = policy, threading.Lock(), 0, 0, []

    def __call__(self, inputs):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            first = len(self.calls) < self.barrier.parties
            self.calls.append(inputs["task"])
        try:
            if first:
                self.barrier.wait()
            return self.policy(inputs)
        finally:
            with self.lock:
                self.now -= 1


def literal_policy(inputs):
    return answer(inputs["task"].split('"')[1] if '"' in inputs["task"] else "0")


def test_pairs_run_at_once_and_give_the_serial_rows_and_trajectories(tmp_path):
    tasks = suite_tasks(("dev",), families=["data_literal"])[:2] + suite_tasks(("dev",), families=["statistic"])[:2]
    config = AgentConfig(name="lit")
    lm, _ = actor_lm(literal_policy)
    serial = run_agent(config, tasks, out_dir=tmp_path / "serial", runs=2, lm=lm, progress=False)
    actor = InFlight(4, literal_policy)
    lm, _ = actor_lm(actor, name="wide", slots=4)
    together = run_agent(config, tasks, out_dir=tmp_path / "together", runs=2, lm=lm, progress=False)
    assert actor.most == 4  # four (task, run) pairs in flight at once, the model's bound, never more
    timed = ["latency_s", "wall_s", "model"]  # the two scripted models have two names
    pd.testing.assert_frame_equal(together.drop(columns=timed), serial.drop(columns=timed))
    label = run_label(config)
    assert saved_untimed(tmp_path / "together" / label) == saved_untimed(tmp_path / "serial" / label)
    assert len(log_keys(tmp_path / "together" / label)) == 8  # each (task, run) once


def test_an_interrupted_concurrent_run_resumes_without_redoing_finished_pairs(tmp_path):
    tasks = suite_tasks(("dev",), families=["statistic"])[:4]

    def policy(inputs):
        if inputs["task"] == tasks[1].item.question and not stopped:
            stopped.append(True)
            raise KeyboardInterrupt  # the user stops the run while tasks 0 and 1 are in flight
        return answer("0")

    stopped = []
    actor = InFlight(2, policy)
    lm, _ = actor_lm(actor, slots=2)
    with pytest.raises(KeyboardInterrupt):
        run_agent(AgentConfig(), tasks, out_dir=tmp_path, runs=2, lm=lm, progress=False)
    assert actor.most == 2
    root = tmp_path / run_label(AgentConfig())
    first = log_keys(root)
    assert len(first) == len(set(first)) < 8 and ("0", tasks[1].item.item_id) not in first
    assert ("0", tasks[0].item.item_id) in first  # the pair beside the failure was kept
    assert len(list(root.rglob("traces/*/*/*.json"))) == len(first)
    before = len(actor.calls)
    rows = run_agent(AgentConfig(), tasks, out_dir=tmp_path, runs=2, lm=lm, progress=False)
    assert len(actor.calls) - before == 8 - len(first)  # only the unfinished pairs ran again
    assert rows["status"].eq("incorrect_answer").all() and len(rows) == 8
    again = log_keys(root)
    assert len(again) == len(set(again)) == 8  # no row written twice


def test_long_term_memory_chains_the_tasks_of_a_run_while_runs_overlap(tmp_path):
    tasks = suite_tasks(("dev",), families=["statistic"])[:3]
    config = AgentConfig(memory="long_term", reanswer=False)

    def respond_for(actor):
        def respond(request):
            if request.outputs == ACTOR:
                return actor(request.inputs)
            if request.outputs == ("updated_memory",):  # what the run has seen, task after task
                return {"updated_memory": (request.inputs["long_term_memory"] + " | " +
                                           request.inputs["step"].splitlines()[0])[-400:]}
            return {}
        return respond

    def run(out, actor, slots):
        lm = dspy.LM(f"scripted/chain{slots}", engine=ScriptedEngine(respond_for(actor), slots=slots), cache=False)
        return run_agent(config, tasks, out_dir=out, runs=2, lm=lm, progress=False)

    serial = run(tmp_path / "serial", lambda inputs: answer("0"), 1)
    actor = InFlight(2, lambda inputs: answer("0"))  # the first tasks of runs 0 and 1, at once
    together = run(tmp_path / "together", actor, 4)
    assert actor.most == 2  # one task per run in flight: a run's tasks are a chain
    timed = ["latency_s", "wall_s", "model"]
    pd.testing.assert_frame_equal(together.drop(columns=timed), serial.drop(columns=timed))
    label = run_label(config)
    saved = saved_untimed(tmp_path / "together" / label)
    assert saved == saved_untimed(tmp_path / "serial" / label)
    last = saved[trace_path("", label, 1, tasks[2].item.item_id).as_posix()]
    assert tasks[1].item.question[:20] in last["rollouts"][0]["long_term_before"]  # carried from task 1
