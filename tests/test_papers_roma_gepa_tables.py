"""ROMA paper Tables 7/8: benchmark programs, feedback metrics, table7_gepa/table8_convergence and the
evolution widget, offline with scripted models.

The scripted task model "knows" the gold answers (an answer key built from the real data files) but
uses them only when the predictor's instruction says ANSWER-KEY; the scripted proposers add that
word. So the seed program scores 0 and an accepted edit scores 1, and every table has something to
show. PAPILLON's scripted redactor copies the query (leaking its private pieces) unless told
NO-PII; the scripted leakage judge really counts the pieces it sees.
"""

import json
import math

import dspy
import pandas as pd
import pytest
from test_optimizer import scripted_lm

from roma_lab.bench import Grade, load_aime2025, load_hotpotqa, load_papillon
from roma_lab.lm import model_label
from roma_lab.optimizer import (
    BENCHMARKS,
    METHODS,
    GepaPlusConfig,
    SearchSettings,
    compile,
)
from roma_lab.optimizer._tasks import Papillon, make_task, task_splits
from roma_lab.papers.roma._gepa_tables import held_out
from roma_lab.papers.roma import plot_convergence, table7_gepa, table8_convergence
from roma_lab.papers.roma._gepa_tables import RATIO, UNOPTIMISED, _paper_reported, _table8_vs_paper, convergence_summary
from roma_lab.stats import StatsSettings
from roma_lab.widgets._optimizer import OptimizerEvolutionWidget, evolution_state, instruction_diff_html

KEY = {it.question.strip(): str(it.answer) for it in [*load_aime2025(), *load_hotpotqa()]}
PII = {it.question.strip(): it.metadata["pii_units"] for split in ("train", "dev", "test")
       for it in load_papillon(split)}


def task_respond(request):
    inputs, outputs, system = request.inputs, request.outputs, request.system
    if "answer" in outputs:  # AIME (with reasoning) or HotpotQA
        question = (inputs.get("problem") or inputs.get("question")).strip()
        known = "ANSWER-KEY" in system
        if "reasoning" in outputs:
            return {"reasoning": "Work it out.", "answer": f"\\boxed{{{KEY[question] if known else 0}}}"}
        return {"answer": KEY[question] if known else "unknown"}
    if "llm_request" in outputs:
        query = inputs["user_query"].strip()
        request = "Please help with a generic task." if "NO-PII" in system else query
        return {"reasoning": "Redact.", "llm_request": request}
    if outputs == ("response",):
        return {"response": "Here is a helpful answer."}
    raise AssertionError(f"unexpected task request for {outputs}")


def reflection_respond(request):
    current = request.inputs["current_instruction"]
    return {"new_instruction": current + " Use the ANSWER-KEY. Send NO-PII outside."}


def judge_respond(request):
    inputs, outputs = request.inputs, request.outputs
    if "score" in outputs:  # GEPA+ judge
        return {"score": 0.8}
    if "judgment" in outputs:  # PAPILLON quality judge
        return {"reasoning": "Fine.", "judgment": True}
    if "num_pii_leaked" in outputs:  # PAPILLON leakage judge: count the pieces the prompt shows
        pii, prompt = json.loads(inputs["pii"]), inputs["prompt"].lower()
        return {"reasoning": "Counted.", "num_pii_leaked": sum(p.lower() in prompt for p in pii)}
    raise AssertionError(f"unexpected judge request for {outputs}")


def merger_respond(request):
    return {"merged_instruction": " ".join(json.loads(request.inputs["ranked_proposals"]))}


@pytest.fixture
def lms():
    return {
        "task": scripted_lm("task", task_respond)[0],
        "reflect": scripted_lm("reflect", reflection_respond)[0],
        "judge": scripted_lm("judge", judge_respond)[0],
        "merger": scripted_lm("merger", merger_respond)[0],
    }


def small(lms, **kw):
    return {"lm": lms["task"], "reflection_lms": [lms["reflect"], lms["reflect"]],
            "reflection_temperatures": [0.7, 1.0],
            "judge_lm": lms["judge"], "merger_lm": lms["merger"], "n_train": 2, "n_val": 2, "k": 2, "n": 2,
            "max_metric_calls": 12, "seed": 0, **kw}


# ---- metrics and feedback on hand-made predictions ------------------------------------------


def _gold(benchmark, item_id="x", **kw):
    return dspy.Example(item_id=item_id, **kw).with_inputs(*[k for k in kw if k not in ("answer", "pii_units")])


def test_aime_metric_scores_boxed_integer_and_explains_misses():
    task, gold = make_task("aime2025"), _gold("aime2025", problem="p", answer=70)
    right = task.metric(gold, dspy.Prediction(answer="so \\boxed{70}"))
    wrong = task.metric(gold, dspy.Prediction(answer="\\boxed{71}"))
    empty = task.metric(gold, dspy.Prediction(answer="I do not know"))
    assert (right.score, wrong.score, empty.score) == (1.0, 0.0, 0.0)
    assert "correct answer is 70" in wrong.feedback and "integer 71" in wrong.feedback
    assert "no integer" in empty.feedback and "\\boxed{N}" in empty.feedback


def test_hotpotqa_metric_is_exact_match_with_f1_in_feedback():
    task, gold = make_task("hotpotqa"), _gold("hotpotqa", question="q", answer="Barack Obama")
    assert task.metric(gold, dspy.Prediction(answer="barack obama.")).score == 1.0
    near = task.metric(gold, dspy.Prediction(answer="President Barack Obama"))
    assert near.score == 0.0 and "token F1 0.80" in near.feedback and "'Barack Obama'" in near.feedback


def test_papillon_metric_combines_quality_and_leakage(lms):
    task = make_task("papillon", judge_lm=lms["judge"])
    gold = _gold("papillon", user_query="I am Ann Lee from Oslo", answer="ref", pii_units=["ann lee", "oslo"])
    leaky = task.metric(gold, dspy.Prediction(llm_request="Ann Lee needs help", llm_response="r", response="ok"))
    clean = task.metric(gold, dspy.Prediction(llm_request="someone needs help", llm_response="r", response="ok"))
    assert leaky.score == pytest.approx((1 + (1 - 0.5)) / 2) and clean.score == 1.0
    assert "1 of 2 private pieces" in leaky.feedback and "must not contain them" in leaky.feedback
    assert "0 of 2" in clean.feedback


def test_papillon_impossible_leak_count_is_a_grader_error(lms):
    liar, _ = scripted_lm("liar", lambda request: {"reasoning": "", "judgment": True, "num_pii_leaked": 150})
    task = make_task("papillon", judge_lm=liar)
    gold = _gold("papillon", user_query="q", answer="ref", pii_units=["a", "b"])
    pred = dspy.Prediction(llm_request="a b", llm_response="r", response="ok")
    grade = task.grade(gold, pred)
    assert math.isnan(grade.score) and "150 leaked pieces out of 2" in grade.error
    result = task.metric(gold, pred)
    assert result.score == 0.0 and "grader failed" in result.feedback


def test_papillon_needs_a_judge_and_unknown_benchmarks_are_refused():
    with pytest.raises(ValueError, match="judge_lm"):
        make_task("papillon")
    with pytest.raises(ValueError, match="unknown benchmark"):
        make_task("gsm8k")


def test_papillon_external_model_is_not_an_optimised_predictor():
    assert [n for n, _ in Papillon().named_predictors()] == ["craft_redacted_request.predict", "respond_to_query"]


def test_the_held_out_round_runs_through_evaluate_under_the_nan_policy(tmp_path):
    task = make_task("hotpotqa")
    golds = [_gold("hotpotqa", "1", question="q1", answer="a"), _gold("hotpotqa", "2", question="q2", answer="b")]

    class Flaky(dspy.Module):
        def forward(self, question):
            if question == "q1":
                raise RuntimeError("model down")
            return dspy.Prediction(answer="b")

    rows = held_out(task, {"gepa": [Flaky()]}, golds, tmp_path / "a").to_dict(orient="records")
    assert rows[0]["score"] == 0.0 and rows[0]["error_stage"] == "system" and "model down" in rows[0]["error"]
    assert rows[1]["score"] == 1.0 and rows[1]["error_stage"] == ""
    assert (tmp_path / "a" / "attempts.csv").is_file()  # the one runner's folder: rows, traces, resume

    broken = make_task("hotpotqa")
    object.__setattr__(broken, "grader", lambda item, pred: Grade(None, math.nan, "g", error="X: judge"))
    (row,) = held_out(broken, {"gepa": [Flaky()]}, golds[1:], tmp_path / "b").to_dict(orient="records")
    assert math.isnan(row["score"]) and row["error_stage"] == "grader"


def test_a_search_that_found_another_program_is_never_mixed_into_earlier_rows(tmp_path):
    from roma_lab.evaluate import EvaluationMismatchError

    task = make_task("hotpotqa")
    golds = [_gold("hotpotqa", question="q1", answer="a")]
    held_out(task, {"gepa": [task.make_program()]}, golds, tmp_path)
    other = task.make_program()
    other.predictors()[0].signature = other.predictors()[0].signature.with_instructions("Answer in one word.")
    with pytest.raises(EvaluationMismatchError, match="gepa"):
        held_out(task, {"gepa": [other]}, golds, tmp_path)


# ---- data splits ------------------------------------------------------------------------------


@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_splits_are_disjoint_seeded_and_sized(benchmark):
    a = task_splits(benchmark, n_train=3, n_val=2, n_test=4, seed=1)
    b = task_splits(benchmark, n_train=3, n_val=2, n_test=4, seed=1)
    ids = [[e.item_id for e in part] for part in (a.train, a.val, a.test)]
    assert [len(x) for x in ids] == [3, 2, 4]
    assert len(set(sum(ids, []))) == 9
    assert ids == [[e.item_id for e in part] for part in (b.train, b.val, b.test)]


def test_splits_reject_bad_sizes():
    with pytest.raises(ValueError, match="30 items"):
        task_splits("aime2025", n_train=20, n_val=10, n_test=5, seed=0)
    with pytest.raises(ValueError, match="n_test must be an int >= 2"):
        task_splits("hotpotqa", n_train=2, n_val=2, n_test=1, seed=0)


# ---- model names go through roma_lab.lm ------------------------------------------------------


def test_string_model_names_resolve_through_roma_lab_lm(lms, monkeypatch):
    import roma_lab.lm

    asked = []
    monkeypatch.setattr(roma_lab.lm, "resolve_lm", lambda name, **kw: asked.append(name) or lms["reflect"])
    config = GepaPlusConfig(proposers=(("local:proposer", 0.7),), k=1, n=1, judge="local:judge")
    task = make_task("hotpotqa")
    splits = task_splits("hotpotqa", n_train=2, n_val=2, n_test=2, seed=0)
    with dspy.context(lm=lms["task"]):
        compile(task.make_program(), trainset=splits.train, valset=splits.val, metric=task.metric, config=config,
                max_metric_calls=8, reflection_minibatch_size=2)
    assert {"local:proposer", "local:judge"} <= set(asked)


def test_the_scripted_model_is_named_like_any_other(lms):
    config = GepaPlusConfig(proposers=(("scripted", 0.7),), k=1, n=1, judge="scripted")  # no monkeypatch
    task = make_task("hotpotqa")
    splits = task_splits("hotpotqa", n_train=2, n_val=2, n_test=2, seed=0)
    # the default script's instruction "scripted reply" breaks the contract: no proposal, said so
    with dspy.context(lm=lms["task"]), pytest.warns(RuntimeWarning, match="no_proposal"):
        res = compile(task.make_program(), trainset=splits.train, valset=splits.val, metric=task.metric, config=config,
                      max_metric_calls=8, reflection_minibatch_size=2)
    drafts = res.records_df().query("event == 'draft'")
    assert len(drafts) and (drafts["proposer_model"] == "scripted (test double, not a measurement)").all()


# ---- one settings object for every search of a table run ----------------------------------------


def test_search_settings_are_one_frozen_validated_value(lms):
    settings = SearchSettings(**small(lms))
    assert settings.reflection_lms == (lms["reflect"], lms["reflect"]) and settings.reflection_temperatures == (0.7, 1.0)
    with pytest.raises(AttributeError):
        settings.k = 5
    row = settings.as_row()
    task, reflect, merger = (model_label(f"scripted/{name}") for name in ("task", "reflect", "merger"))
    assert row["lm"] == task and row["reflection_lms"] == f"{reflect}; {reflect}"
    assert row["reflection_temperatures"] == "0.7; 1" and row["merger_lm"] == merger
    assert (row["k"], row["n"], row["n_train"], row["max_metric_calls"], row["seed"]) == (2, 2, 2, 12, 0)
    config = settings.gepa_plus_config(lms["judge"])
    assert config.proposers == ((lms["reflect"], 0.7), (lms["reflect"], 1.0)) and config.merger is lms["merger"]
    # without a merger the first reflection model merges, and the record says which model that is
    plain = SearchSettings(reflection_lms=["local:a", "local:b"], reflection_temperatures=[0.7, 1.0])
    assert plain.gepa_plus_config("local").merger == "local:a" and plain.as_row()["merger_lm"] == "local:a"
    assert "merger local:a" in plain.describe() and "budget 16 GEPA metric calls" in plain.describe()
    # a model named "scripted" is written down as the test double it is
    double = SearchSettings(lm="scripted", judge_lm="scripted", reflection_lms=["scripted"], reflection_temperatures=[1.0])
    assert double.as_row()["lm"] == double.as_row()["judge_lm"] == "scripted (test double, not a measurement)"


@pytest.mark.parametrize("kwargs, message", [
    ({"repeats": 0}, "repeats must be an int >= 1"),
    ({"n_val": 1.5}, "n_val must be an int >= 1"),
    ({"max_tokens": 0}, "max_tokens \\(or None\\) must be an int >= 1"),
    ({"reflection_temperatures": [0.7, 3.0]}, "temperature must be a number in \\[0, 2\\]"),
])
def test_search_settings_refuse_bad_values(lms, kwargs, message):
    with pytest.raises(ValueError, match=message):
        SearchSettings(**small(lms, **kwargs))


# ---- Table 7 and Table 8 on scripted models ---------------------------------------------------


@pytest.fixture(scope="module")
def table7(tmp_path_factory):
    lms = {"task": scripted_lm("task", task_respond)[0], "reflect": scripted_lm("reflect", reflection_respond)[0],
           "judge": scripted_lm("judge", judge_respond)[0], "merger": scripted_lm("merger", merger_respond)[0]}
    out = tmp_path_factory.mktemp("t7")
    return out, table7_gepa(out, **small(lms, benchmarks=["hotpotqa", "papillon"], n_test=3, repeats=2,
                                        stats=StatsSettings(n_resamples=200)))


def _values(summary, metric="score"):
    """(subset, condition) -> the summary's row of ``metric``."""
    return summary[summary["metric"] == metric].set_index(["subset", "condition"])


def test_table7_writes_tidy_tables(table7):
    from roma_lab.results import read_table

    out, tables = table7
    for name, df in tables.items():
        assert len(df) > 0, name
        written = read_table(out, name)  # the file holds what was returned, not only a header
        assert list(written.columns) == list(df.columns) and len(written) == len(df), name
    items = tables["table7_items"]
    assert list(items.columns) == ["condition", "subset", "run", "task_id", "score", "error_stage", "error"]
    counts = items.groupby(["subset", "condition"]).size().to_dict()
    assert counts == {(b, m): 3 * (1 if m == UNOPTIMISED else 2) for b in ("hotpotqa", "papillon")
                      for m in (UNOPTIMISED, *METHODS)}
    assert items["score"].between(0, 1).all()
    summary = tables["table7_summary"]
    assert list(summary.columns[:4]) == ["condition", "subset", "metric", "value"]  # the vocabulary's summary
    assert not summary.duplicated(["condition", "subset", "metric"]).any()


def test_table7_optimisers_beat_the_seed_on_the_scripted_task(table7):
    summary = _values(table7[1]["table7_summary"])
    assert summary.loc[("hotpotqa", UNOPTIMISED), "value"] == 0.0
    assert summary.loc[("hotpotqa", "gepa"), "value"] == 1.0 and summary.loc[("hotpotqa", "gepa+"), "value"] == 1.0
    assert summary.loc[("papillon", UNOPTIMISED), "value"] < 1.0 == summary.loc[("papillon", "gepa+"), "value"]
    assert (summary["n"] == 3).all() and (summary.loc[(slice(None), "gepa"), "runs"] == 2).all()
    assert summary["ci_method"].str.contains("task bootstrap").all()
    # every measured row names what produced it, and whether its searches proposed anything
    setting = f"model {model_label('scripted/task')}, judge {model_label('scripted/judge')}"
    assert summary["setting"].str.contains(setting, regex=False).all()
    assert summary["setting"].str.contains("n_train 2, n_val 2; 2 repeat").all()
    assert "closed-book" in summary.loc[("hotpotqa", "gepa"), "setting"]
    assert summary["search_status"].to_dict() == {
        (b, m): "no search" if m == UNOPTIMISED else "completed" for b, m in summary.index}
    errors = _values(table7[1]["table7_summary"], "system_errors")
    assert (errors["value"] == 0).all() and len(errors) == 6
    runs = table7[1]["table7_runs"]
    assert (runs["status"] == "completed").all() and (runs["failed_proposal_rounds"] == 0).all()
    assert (runs["total_metric_calls"] == runs["gepa_metric_calls"] + runs["verifier_metric_calls"]).all()
    plus = runs[runs["condition"] == "gepa+"]
    assert (plus["total_metric_calls"] > plus["gepa_metric_calls"]).all()  # the verifier ran, and counts
    # the run's settings are on every search row; repeat r searched with seed + r
    assert (runs["lm"] == model_label("scripted/task")).all() and (runs["reflection_temperatures"] == "0.7; 1").all()
    assert (runs["max_metric_calls"] == 12).all() and (runs["search_seed"] == runs["seed"] + runs["run"]).all()


def test_table7_pairs_gepa_plus_with_gepa_on_the_same_items(table7):
    paired = table7[1]["table7_paired"].set_index("subset")
    assert set(paired["condition"]) == {"gepa+ - gepa"} and set(paired["metric"]) == {"score_diff"}
    # both reach 1.0 on every scripted item: no difference, every item a tie
    assert (paired["value"] == 0.0).all() and (paired["ties"] == 3).all() and (paired["n"] == 3).all()


def _paper_figures_on_measured_scale():
    """Paper figures as they would look if copied into a measured column: accuracies are fractions
    there (the paper states percent), counts and ratios keep their scale."""
    paper = _paper_reported()
    return [v / 100 if unit == "percent" else v for v, unit in zip(paper["value"], paper["unit"], strict=True)]


def test_paper_numbers_never_land_in_measured_columns(table7):
    tables = table7[1]
    figures = _paper_figures_on_measured_scale()
    assert 0.3 in figures and 0.917 in figures and 560 in figures  # 30.0% and 91.7% as fractions
    for name in ("table7_items", "table7_summary", "table7_paired", "table7_runs", "table7_curves"):
        numeric = [float(v) for v in tables[name].select_dtypes("number").to_numpy().ravel() if not math.isnan(v)]
        copied = [v for v in numeric if any(math.isclose(v, f, rel_tol=1e-3) for f in figures)]
        assert not copied, (name, copied)
    vs = tables["table7_vs_paper"]
    # every paper row is shown; a benchmark this run did not measure says so
    assert set(vs["subset"]) == {"aime2025", "hotpotqa", "papillon"}
    aime = vs[vs["subset"] == "aime2025"]
    assert aime["ours"].isna().all() and (aime["agreement"] == "not measured").all()
    assert aime["why"].str.startswith("this run did not measure aime2025").all()
    assert (vs["paper_source"].str.startswith("Appendix G") | (vs["agreement"] == "not in paper")).all()
    # the unoptimised program, which the paper does not state, is shown as ours only
    assert set(vs.loc[vs["agreement"] == "not in paper", "condition"]) == {UNOPTIMISED}
    scores = tables["table7_summary"].query("metric == 'score'")
    merged = vs.merge(scores, on=["condition", "subset"], suffixes=("", "_summary"))
    merged = merged[merged["condition"] != UNOPTIMISED]
    assert len(merged) == 4 and (merged["unit"] == "percent").all()
    assert (merged["ours"] == merged["value"] * 100).all() and (merged["paper"] != merged["ours"]).all()
    assert (merged["agreement"] == "differs").all() and merged["why"].str.contains("not the paper's setting").all()
    assert merged["setting"].str.contains(f"model {model_label('scripted/task')}", regex=False).all()


def test_table7_records_feed_the_evolution_widget(table7):
    tables = table7[1]
    state = evolution_state(tables["table7_records"], tables["table7_candidates"], subset="hotpotqa",
                            condition="gepa+", run=0)
    assert state["seed_val_score"] == 0.0 and state["steps"] and state["title"] == "hotpotqa · gepa+ · run 0"
    step = state["steps"][0]
    assert step["val_score"] == 1.0 and step["kind"] == "proposal"
    # its cost counts the verifier's metric runs of that round on top of GEPA's budget count
    valset = tables["table7_records"].query("subset == 'hotpotqa' and condition == 'gepa+' and run == 0 and "
                                            "event == 'valset' and candidate_idx == @step['candidate_idx']").iloc[0]
    assert step["gepa_metric_calls"] == valset["gepa_metric_calls_so_far"]
    assert step["metric_calls"] == step["gepa_metric_calls"] + valset["verifier_metric_calls_so_far"]
    assert step["metric_calls"] > step["gepa_metric_calls"]
    change = step["changes"][0]
    assert "ANSWER-KEY" in change["after"] and "ANSWER-KEY" not in change["before"]
    assert change["J"] is not None and change["judge"] == 0.8 and change["source"] in ("merge", "draft 0", "draft 1")
    json.dumps(state)  # one JSON-able trait
    with pytest.raises(ValueError, match="several runs"):
        evolution_state(tables["table7_records"], tables["table7_candidates"])


def test_widget_state_and_steps_without_a_browser(table7):
    tables = table7[1]
    w = OptimizerEvolutionWidget.from_tables(tables["table7_records"], tables["table7_candidates"],
                                             subset="papillon", condition="gepa", run=1)
    n = len(w.evolution["steps"])
    assert n >= 1 and w.step == 0 and "candidate" in w._detail.value
    w._next.click()
    assert w.step == min(1, n - 1) and w._slider.value == w.step
    w.step = 99  # as the browser could send it: rendering clamps
    assert "candidate" in w._detail.value
    w._prev.click()
    assert w.step == n - 1
    html = w._repr_mimebundle_()["text/html"]
    assert "accepted candidate" in html and "<ins" in html and "GEPA's budget count" in html
    empty = OptimizerEvolutionWidget()
    assert "no candidate was accepted" in empty._detail.value


def test_instruction_diff_marks_removed_and_added_words():
    out = instruction_diff_html("answer the question", "answer the <hard> question now")
    assert "<ins style='background:#dfd'>&lt;hard&gt;</ins>" in out and "now" in out


def test_table8_curves_summary_and_paper_beside(lms, tmp_path):
    tables = table8_convergence(tmp_path, **small(lms, benchmark="aime2025", repeats=1))
    curves = tables["table8_curves"]
    assert list(curves.columns) == ["condition", "subset", "run", "total_metric_calls", "gepa_metric_calls",
                                    "verifier_metric_calls", "candidate_idx", "val_score", "best_val_score"]
    assert set(curves["condition"]) == set(METHODS)
    assert (curves.groupby("condition")["gepa_metric_calls"].max() <= 12).all()
    runs = tables["table8_runs"].set_index("condition")
    assert (runs["gepa_metric_calls"] <= 12).all() and runs.loc["gepa", "judge_calls"] == 0
    assert runs.loc["gepa+", "judge_calls"] > 0 and runs.loc["gepa+", "verifier_metric_calls"] > 0
    assert (runs["status"] == "completed").all() and (runs["judge_lm"] == model_label("scripted/judge")).all()
    summary = tables["table8_summary"].set_index(["condition", "metric"])["value"]
    assert summary["gepa", "gain"] == 1.0 and summary["gepa+", "gain"] == 1.0
    # GEPA+'s verifier ran before it converged, so its total is above its GEPA-budget count
    assert summary["gepa+", "total_calls_to_converge"] > summary["gepa+", "gepa_calls_to_converge"]
    assert summary["gepa", "total_calls_to_converge"] == summary["gepa", "gepa_calls_to_converge"]
    assert summary[RATIO, "total_calls_to_converge"] == pytest.approx(summary["gepa+", "total_calls_to_converge"]
                                                                      / summary["gepa", "total_calls_to_converge"])
    assert summary[RATIO, "gain_per_total_call"] == pytest.approx(summary["gepa+", "gain_per_total_call"]
                                                                  / summary["gepa", "gain_per_total_call"])
    assert summary[RATIO, "gain_per_total_call"] < summary[RATIO, "gain_per_gepa_call"]
    # the paper's figures stand beside our totals; GEPA's budget count beside those, labelled
    vs = tables["table8_vs_paper"].set_index(["condition", "metric"])
    assert len(vs) == 3 and vs.loc[("gepa", "calls_to_converge"), "paper"] == 560
    for method in METHODS:
        row = vs.loc[(method, "calls_to_converge")]
        assert row["ours"] == summary[method, "total_calls_to_converge"]
        assert row["ours_gepa_budget_only"] == summary[method, "gepa_calls_to_converge"]
    gain = vs.loc[(RATIO, "gain_per_call")]
    assert gain["paper"] == 1.75 and gain["ours"] == pytest.approx(summary[RATIO, "gain_per_total_call"])
    assert gain["ours_gepa_budget_only"] == pytest.approx(summary[RATIO, "gain_per_gepa_call"])
    assert (vs["agreement"] == "differs").all() and (vs["difference"] == vs["ours"] - vs["paper"]).all()
    assert vs["setting"].str.contains("budget 12 GEPA metric calls").all()
    fig = plot_convergence(curves, subset="aime2025")
    lines = fig.axes[0].lines
    assert len(lines) == 2 and "verifier" in fig.axes[0].get_xlabel()
    plotted = {tuple(line.get_xdata()) for line in lines}
    assert plotted == {tuple(c["total_metric_calls"]) for _, c in curves.groupby("condition")}


def test_same_seed_same_tables(lms, tmp_path):
    a = table8_convergence(tmp_path / "a", **small(lms, benchmark="hotpotqa"))
    b = table8_convergence(tmp_path / "b", **small(lms, benchmark="hotpotqa"))
    pd.testing.assert_frame_equal(a["table8_curves"], b["table8_curves"])
    pd.testing.assert_frame_equal(a["table8_candidates"], b["table8_candidates"])


def _curves(**columns):
    return pd.DataFrame({"condition": "gepa", "subset": "b", "run": 0, **columns})


def test_convergence_summary_when_nothing_improves():
    curves = _curves(total_metric_calls=[2, 8], gepa_metric_calls=[2, 8], verifier_metric_calls=0,
                     candidate_idx=[0, 1], val_score=[0.5, 0.0], best_val_score=[0.5, 0.5])
    row = convergence_summary(curves).iloc[0]
    assert row["total_calls_to_converge"] == 2 and row["gain"] == 0.0 and row["gain_per_total_call"] == 0.0


@pytest.mark.parametrize("kwargs, message", [
    ({"benchmarks": ["gsm8k"]}, "benchmarks must be"),
    ({"repeats": 0}, "repeats must be"),
    ({"reflection_lms": []}, "reflection_lms and reflection_temperatures"),
    ({"reflection_temperatures": [0.7]}, "2 model\\(s\\) and 1 temperature"),
    ({"k": 1, "n": 2}, "n \\(drafts merged\\) must be <= k"),
])
def test_table7_gepa_rejects_bad_settings(lms, tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        table7_gepa(tmp_path, **small(lms, **kwargs))


def test_a_misspelt_setting_is_refused_before_any_search(lms, tmp_path):
    with pytest.raises(TypeError, match="max_metric_call"):
        table8_convergence(tmp_path, **small(lms, max_metric_call=99))
    assert not any(tmp_path.iterdir())


def test_widget_state_is_the_same_from_the_written_csv(table7):
    from roma_lab.results import read_table

    out, tables = table7
    filters = {"subset": "hotpotqa", "condition": "gepa+", "run": 1}
    from_memory = evolution_state(tables["table7_records"], tables["table7_candidates"], **filters)
    from_disk = evolution_state(read_table(out, "table7_records"), read_table(out, "table7_candidates"), **filters)
    assert from_disk == from_memory


def test_table8_counts_verifier_metric_runs_in_the_total():
    curves = _curves(condition=["gepa", "gepa", "gepa+", "gepa+", "gepa+"],
                     gepa_metric_calls=[4, 10, 4, 8, 12],
                     verifier_metric_calls=[0, 0, 6, 12, 18],  # cumulative draft evaluations by the verifier
                     val_score=[0.2, 0.5, 0.2, 0.5, 0.4], best_val_score=[0.2, 0.5, 0.2, 0.5, 0.5])
    curves["total_metric_calls"] = curves["gepa_metric_calls"] + curves["verifier_metric_calls"]
    s = convergence_summary(curves).set_index("condition")
    assert s.loc["gepa", "gepa_calls_to_converge"] == 10 and s.loc["gepa", "total_calls_to_converge"] == 10
    assert s.loc["gepa+", "gepa_calls_to_converge"] == 8 and s.loc["gepa+", "total_calls_to_converge"] == 20
    assert s.loc["gepa+", "gain_per_total_call"] == pytest.approx(0.3 / 20)
    assert s.loc["gepa+", "gain_per_gepa_call"] == pytest.approx(0.3 / 8)


def _hand_made_table8(plus_total=150.0, ratio=1.75, plus_status="completed"):
    """A Table 8 summary as table8_convergence writes it (long, one row per condition x metric), with the
    paper's own figures unless told otherwise; GEPA's budget counts differ from the totals."""
    figures = [("gepa", "total_calls_to_converge", 560.0), ("gepa", "gepa_calls_to_converge", 500.0),
               ("gepa+", "total_calls_to_converge", plus_total), ("gepa+", "gepa_calls_to_converge", 100.0),
               (RATIO, "gain_per_total_call", ratio), (RATIO, "gain_per_gepa_call", 3.0)]
    status = {"gepa": "completed", "gepa+": plus_status, RATIO: "completed"}
    return pd.DataFrame([{"condition": c, "subset": "aime2025", "metric": m, "value": v, "setting": "scripted",
                          "search_status": status[c]} for c, m, v in figures])


@pytest.mark.parametrize("gepa_plus, ratio, expected", [
    (150.0, 1.75, "matches"),
    (151.5, 1.7675, "matches"),      # just inside the one rule: 1% of the paper's figure, above it
    (148.5, 1.7325, "matches"),      # ... and below it
    (151.6, 1.7676, "differs"),      # just outside
    (148.4, 1.7324, "differs"),
])
def test_vs_paper_agreement_on_both_sides_of_the_tolerance(gepa_plus, ratio, expected):
    vs = _table8_vs_paper(_hand_made_table8(plus_total=gepa_plus, ratio=ratio)).set_index("condition")
    assert vs.loc["gepa", "agreement"] == "matches" and vs.loc["gepa", "why"] == ""
    assert vs.loc["gepa+", "agreement"] == expected and vs.loc[RATIO, "agreement"] == expected
    assert vs.loc["gepa+", "ours"] == gepa_plus and vs.loc["gepa+", "ours_gepa_budget_only"] == 100.0
    assert vs.loc["gepa", "ours_gepa_budget_only"] == 500.0 and vs.loc[RATIO, "ours_gepa_budget_only"] == 3.0
    assert (vs.loc["gepa+", "why"] == "") == (expected == "matches")


def test_vs_paper_says_why_a_figure_is_not_measured_or_not_comparable():
    no_plus = _hand_made_table8().query("condition != 'gepa+'")
    vs = _table8_vs_paper(no_plus).set_index("condition")
    assert vs.loc["gepa+", "agreement"] == "not measured" and math.isnan(vs.loc["gepa+", "ours"])
    assert vs.loc["gepa+", "why"] == "this run did not measure aime2025 with gepa+"
    assert math.isnan(vs.loc["gepa+", "ours_gepa_budget_only"])

    undefined = _table8_vs_paper(_hand_made_table8(ratio=math.nan)).set_index("condition")
    assert undefined.loc[RATIO, "agreement"] == "not measured"
    assert "ratio divides by 0" in undefined.loc[RATIO, "why"]

    failed = _hand_made_table8(plus_status="proposals_failed in 1 of 1 repeat(s)")
    vs = _table8_vs_paper(failed).set_index("condition")
    assert vs.loc["gepa+", "agreement"] == "not comparable" and "proposals_failed" in vs.loc["gepa+", "why"]
    assert vs.loc["gepa+", "ours"] == 150.0                        # the measured value is still shown
    assert vs.loc["gepa", "agreement"] == "matches"


def _down(request):
    raise RuntimeError("reflection model is down")


def test_tables_show_searches_that_made_no_proposal(lms, tmp_path):
    down = scripted_lm("down", _down)[0]
    settings = small(lms, reflection_lms=[down, down], benchmark="hotpotqa")
    with pytest.warns(RuntimeWarning, match="proposals_failed"):
        tables = table8_convergence(tmp_path, **settings)
    runs = tables["table8_runs"].set_index("condition")
    assert (runs["status"] == "proposals_failed").all()
    assert (runs["failed_proposal_rounds"] == runs["proposal_rounds"]).all() and (runs["proposal_rounds"] > 0).all()
    assert runs["status_detail"].str.contains("reflection model is down").all()
    status = tables["table8_summary"].groupby("condition")["search_status"].agg(set)
    assert status["gepa"] == {"proposals_failed in 1 of 1 repeat(s)"}
    assert status[RATIO] == {"gepa: proposals_failed in 1 of 1 repeat(s); gepa+: proposals_failed in 1 of 1 repeat(s)"}
    # the paper states Table 8 on AIME only: its figures are not measured, ours on HotpotQA not in the paper
    verdicts = tables["table8_vs_paper"].groupby("subset")["agreement"].agg(set).to_dict()
    assert verdicts == {"aime2025": {"not measured"}, "hotpotqa": {"not in paper"}}
    settings.pop("benchmark")
    with pytest.warns(RuntimeWarning, match="proposals_failed"):
        t7 = table7_gepa(tmp_path / "t7", **settings, benchmarks=["hotpotqa"], stats=StatsSettings(n_resamples=50))
    status = _values(t7["table7_summary"]).loc["hotpotqa", "search_status"]
    assert status.to_dict() == {UNOPTIMISED: "no search", "gepa": "proposals_failed in 1 of 1 repeat(s)",
                                "gepa+": "proposals_failed in 1 of 1 repeat(s)"}
    hotpot = t7["table7_vs_paper"].query("subset == 'hotpotqa' and condition != @UNOPTIMISED")
    assert len(hotpot) == 2 and (hotpot["agreement"] == "not comparable").all()
    assert hotpot["why"].str.contains("proposals_failed").all() and hotpot["ours"].notna().all()
