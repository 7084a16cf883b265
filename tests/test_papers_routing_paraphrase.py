"""Issue 45: the train-paraphrase generator (protocol, keep rule, resumable run, shipped data), label
smoothing, the variants chosen on the hand-written paraphrase dev set, and the before/after tables.
The generator runs on a stand-in model here; the shipped file is checked against its own record."""

import hashlib
import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from roma_lab import router
from roma_lab.papers import routing
from roma_lab.papers.routing import _paraphrase as P
from roma_lab.router import _model
from roma_lab.stats import StatsSettings

FAST = StatsSettings(n_resamples=50)


@pytest.fixture(scope="module")
def study():
    return routing.RouterStudy.build()


@pytest.fixture(scope="module")
def train(study):
    return study.split("train")


class StandIn:
    """A model that answers every rewrite request with two numbered rewrites of the prompt it was given."""

    def __init__(self):
        self.calls: list[dict] = []

    def __call__(self, prompt, **kwargs):
        self.calls.append({"prompt": prompt, **kwargs})
        request = prompt.split("Request: ", 1)[1]
        return [f"1. Please: {request}\n2. Quickly, {request}\n"]


# ----------------------------------------------------------------------------- protocol and keep rule
def test_the_protocol_is_the_one_written_down_before_the_run():
    assert (P.PROTOCOL.model, P.PROTOCOL.count, P.PROTOCOL.temperature, P.PROTOCOL.seed, P.PROTOCOL.max_tokens) == \
        ("local", 2, 0.8, 45, 120)
    assert "{count}" in P.PROTOCOL.instruction and P.PROTOCOL.instruction.endswith("Request: {prompt}")


def test_rewrites_are_the_first_numbered_lines_without_numbers_or_wrapping_quotes():
    reply = 'Sure!\n1. "Who made KT-58 first?"\n2) Which lab made KT-58?\n\n3. a third one'
    assert P.parse_rewrites(reply, 2) == ["Who made KT-58 first?", "Which lab made KT-58?"]
    assert P.parse_rewrites("no list at all", 2) == []


def test_a_rewrite_that_loses_a_value_or_repeats_is_dropped(train):
    task = next(t for t in train if t.family == "statistic")
    values = task.slots["values"].split(", ")
    good = f"What's the {task.slots['stat']} of {', '.join(values)}?"
    lost = f"What's the {task.slots['stat']} of {', '.join(values[:-1])}?"
    kept, dropped = P.keep_rewrites(task, [good, lost, task.prompt.upper(), good])
    assert kept == [good]
    assert [why.split(":")[0] for _, why in dropped] == ["lost value(s)", "repeats the prompt or an earlier rewrite",
                                                          "repeats the prompt or an earlier rewrite"]
    assert dropped[0][1] == f"lost value(s): {values[-1]}"


def test_only_the_train_templates_slots_are_checked(train):
    task = next(t for t in train if t.family == "aggregate_computation")   # `plain` fills the challenge template only
    kept, _ = P.keep_rewrites(task, [f"Which region averages the {task.slots['extreme']} revenue?"])
    assert len(kept) == 1


def test_families_take_turns_so_a_prefix_covers_every_family(train):
    order = P.paraphrase_order(train)
    assert sorted(i for i, _ in order) == list(range(len(train)))
    assert {t.family for _, t in order[:17]} == set(router.FAMILIES)
    assert all(train[i] is t for i, t in order)


# ----------------------------------------------------------------------------- the run
def test_generation_seeds_each_prompt_resumes_and_records_itself(train, tmp_path):
    model = StandIn()
    record = P.generate_paraphrases(train, tmp_path, limit=20, command="cmd", lm=model, log=lambda _: None)
    order = P.paraphrase_order(train)[:20]
    assert [c["seed"] for c in model.calls] == [45 + i for i, _ in order]
    assert {c["temperature"] for c in model.calls} == {0.8} and {c["max_tokens"] for c in model.calls} == {120}
    assert model.calls[0]["prompt"] == P.PROTOCOL.instruction.format(count=2, prompt=order[0][1].prompt)
    table = pd.read_csv(tmp_path / "paraphrases.csv", dtype=str, keep_default_na=False)
    assert len(table) == record["kept"] == 40 and record["dropped"] == 0 and record["train_prompts"] == 20
    assert record["paraphrases_csv_sha256"] == hashlib.sha256((tmp_path / "paraphrases.csv").read_bytes()).hexdigest()
    assert record["model_sha256"] == __import__("roma_lab.lm", fromlist=["MODELS"]).MODELS["qwen2.5-coder-1.5b"].sha256
    assert json.loads((tmp_path / "generation.json").read_text()) == record
    # resumed: the 20 answered prompts are not asked again, a torn last line is asked again
    with (tmp_path / "replies.jsonl").open("a") as f:
        f.write('{"task_id": "train-')
    again = StandIn()
    P.generate_paraphrases(train, tmp_path, limit=21, command="cmd", lm=again, log=lambda _: None)
    assert [c["seed"] for c in again.calls] == [45 + P.paraphrase_order(train)[20][0]]


def test_paraphrases_are_read_with_their_source_labels_and_a_changed_file_is_refused(train, tmp_path):
    record = P.generate_paraphrases(train, tmp_path, limit=17, lm=StandIn(), log=lambda _: None)
    path = tmp_path / "paraphrases.csv"
    texts, labels = P.read_paraphrases(train, path, sha256=record["paraphrases_csv_sha256"])
    table = pd.read_csv(path)
    by_id = {t.task_id: t for t in train}
    assert texts == list(table["prompt"])
    np.testing.assert_array_equal(labels, router.labels_matrix([by_id[i] for i in table["task_id"]]))
    with pytest.raises(ValueError, match="not the pinned"):
        P.read_paraphrases(train, path)
    table.loc[0, "family"] = "statistic" if table.loc[0, "family"] != "statistic" else "item_count"
    table.to_csv(path, index=False)
    with pytest.raises(ValueError, match="name no train task of their family"):
        P.read_paraphrases(train, path, sha256=hashlib.sha256(path.read_bytes()).hexdigest())


def test_the_shipped_paraphrases_are_what_their_record_says(train):
    record = json.loads((P.PARAPHRASES.parent / "generation.json").read_text())
    assert record["paraphrases_csv_sha256"] == P.PARAPHRASES_SHA256
    assert record["protocol"] == {k: getattr(P.PROTOCOL, k) for k in record["protocol"]}
    assert record["command"].startswith("python -m roma_lab.papers.routing paraphrase --out data/router_paraphrases")
    texts, _ = P.read_paraphrases(train)
    assert len(texts) == record["kept"]
    assert record["train_prompts"] == record["of_train_prompts"] == len(train)   # every train prompt was asked
    assert record["model_sha256"] == __import__("roma_lab.lm", fromlist=["MODELS"]).MODELS["qwen2.5-coder-1.5b"].sha256


def test_the_paraphrase_dev_set_is_pinned_and_balanced(tmp_path):
    dev = P.paraphrase_dev_prompts()
    assert len(dev) == 85 and set(dev["family"].value_counts()) == {5}
    assert all(dev["labels"] == ["".join(router.FAMILIES[f].route) for f in dev["family"]])
    assert not set(dev["prompt"]) & set(router.natural_prompts()["prompt"])
    edited = tmp_path / "prompts.csv"
    edited.write_text(P.PARAPHRASE_DEV.read_text().replace("pls", "please"))
    with pytest.raises(ValueError, match="never edited"):
        P.paraphrase_dev_prompts(edited)


# ----------------------------------------------------------------------------- label smoothing
def test_label_smoothing_tempers_the_heads_and_zero_changes_nothing(train):
    texts, labels = [t.prompt for t in train], router.labels_matrix(train)
    X = _model.Featurizer.fit(texts).transform(texts)
    plain = _model.train_heads(X, labels, router.TrainingConfig())
    zero = _model.train_heads(X, labels, router.TrainingConfig(label_smoothing=0.0))
    smooth = _model.train_heads(X, labels, router.TrainingConfig(label_smoothing=0.2))
    np.testing.assert_array_equal(plain[0], zero[0])
    logits = lambda heads: np.abs(np.asarray(X @ heads[0]) + heads[1])   # noqa: E731
    assert logits(smooth).max() < logits(plain).max()
    with pytest.raises(ValueError, match="label_smoothing"):
        router.TrainingConfig(label_smoothing=1.0)


# ----------------------------------------------------------------------------- choice and tables
def test_the_choice_rule_orders_coverage_exact_route_cost_then_the_list():
    rows = pd.DataFrame([
        {"variant": "a", "coverage": 0.8, "exact_route": 0.9, "cost": 1.0, "eligible": True},
        {"variant": "b", "coverage": 0.9, "exact_route": 0.5, "cost": 3.0, "eligible": True},
        {"variant": "c", "coverage": 0.9, "exact_route": 0.6, "cost": 3.0, "eligible": True},
        {"variant": "d", "coverage": 0.9, "exact_route": 0.6, "cost": 2.0, "eligible": True},
        {"variant": "e", "coverage": 0.9, "exact_route": 0.6, "cost": 2.0, "eligible": True},
        {"variant": "f", "coverage": 1.0, "exact_route": 1.0, "cost": 0.3, "eligible": False},
    ])
    assert P.choose_variant(rows) == "d"
    assert P.choose_variant(rows.iloc[:3]) == "c"
    with pytest.raises(ValueError, match="speed budget"):
        P.choose_variant(rows.assign(eligible=False))


@pytest.fixture(scope="module")
def shipped_like(train, tmp_path_factory):
    """A paraphrase file from the stand-in model (its own hash), for the table tests."""
    out = tmp_path_factory.mktemp("para")
    record = P.generate_paraphrases(train, out, limit=34, lm=StandIn(), log=lambda _: None)
    return out / "paraphrases.csv", record["paraphrases_csv_sha256"]


LEXICAL_ONLY = tuple(v for v in P.VARIANTS if v.encoder is None)


def test_the_table_chooses_on_the_dev_set_and_scores_before_and_after(study, shipped_like):
    path, sha = shipped_like
    out = P.paraphrase_table(study, stats=FAST, variants=LEXICAL_ONLY, paraphrases_path=path, paraphrases_sha256=sha)
    selection = out["paraphrase_selection"]
    assert list(selection["variant"]) == [v.name for v in LEXICAL_ONLY] and selection["selected"].sum() == 1
    chosen = selection.loc[selection["selected"], "variant"].iloc[0]
    assert chosen == P.choose_variant(selection)
    lexical = selection.set_index("variant").loc["lexical"]
    assert lexical["n_train_texts"] == 216 and lexical["tau"] == study.model.tau
    assert selection.set_index("variant").loc["lexical+para", "n_train_texts"] == 216 + 68
    dev = out["paraphrase_dev_tasks"]
    assert len(dev) == 85 * len(LEXICAL_ONLY) and set(dev["subset"]) == {"paraphrase_dev"}
    for v in LEXICAL_ONLY:      # the selection row is the mean of the variant's per-prompt rows
        assert selection.set_index("variant").loc[v.name, "coverage"] == dev.query("condition == @v.name")["coverage"].mean()
    assert set(out["paraphrase_tasks"]["condition"]) == {"lexical", chosen}
    assert set(out["paraphrase_tasks"]["subset"]) == {"test", "challenge"}
    summary = out["paraphrase_summary"]
    assert {"test", "challenge", "paraphrase_dev", "natural"} <= set(summary["subset"])
    with_ci = summary.dropna(subset=["ci_low"])
    assert {(s, m) for s, m in zip(with_ci["subset"], with_ci["metric"])} == {
        ("test", "success"), ("challenge", "success"), ("paraphrase_dev", "coverage"), ("natural", "coverage")}
    assert set(with_ci["condition"]) == {"lexical", chosen}


def test_nothing_scored_after_the_choice_is_read_to_make_it(study, shipped_like):
    """Reworded test and challenge prompts (and their answers) change nothing in the selection."""
    path, sha = shipped_like
    tasks = tuple(replace(t, prompt="Count the line items in this list: a; b.", answer="0")
                  if t.split in ("test", "challenge") else t for t in study.tasks)
    other = routing.RouterStudy.fit(tasks, suite_seed=study.suite_seed)
    a = P.paraphrase_table(study, stats=FAST, variants=LEXICAL_ONLY[:2], paraphrases_path=path, paraphrases_sha256=sha)
    b = P.paraphrase_table(other, stats=FAST, variants=LEXICAL_ONLY[:2], paraphrases_path=path, paraphrases_sha256=sha)
    timing = ["train_seconds", "route_ms", "eligible", "selected"]   # the speed budget is measured, not read
    pd.testing.assert_frame_equal(a["paraphrase_selection"].drop(columns=timing),
                                  b["paraphrase_selection"].drop(columns=timing))
    pd.testing.assert_frame_equal(a["paraphrase_dev_tasks"], b["paraphrase_dev_tasks"])
