"""Each grader on hand-made graded examples, with scripted judges (no network)."""

import math
from types import SimpleNamespace

import pytest

from roma_lab import bench
from roma_lab.bench import Grade, Item

from scripted_judge import Scripted
from roma_lab.bench._grade import GradingError, JudgeReplyError, normalize_answer
from roma_lab.bench._graders import extract_aime_answer, parse_frames_decision, parse_simpleqa_letter, squad_normalize
from roma_lab.bench._rubrics import extract_abgen_score, parse_rubric_scores, rubric_average


def qa(answer="Paris", question="What is the capital of France?", benchmark="simpleqa"):
    return Item(benchmark=benchmark, item_id="q1", question=question, answer=answer)


# --- normalisation and string match ------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("The Eiffel Tower", "eiffel tower"),
        ("Paris.", "paris"),
        ("  New   York ", "new york"),
        ("1,000", "1000"),
        ("1000.00", "1000"),
        ("$1,234,567", "1234567"),
        ("An apple", "apple"),
        ("Café", "CAFÉ"),
        ("The U.S.A.", "USA"),
        ("Jean-Paul", "jean paul"),
    ],
)
def test_normalize_answer_equates(a, b):
    assert normalize_answer(a) == normalize_answer(b)


@pytest.mark.parametrize(("a", "b"), [("3.5", "35"), ("1,5", "15.0"), ("10", "100")])
def test_normalize_answer_keeps_distinct_numbers_apart(a, b):
    assert normalize_answer(a) != normalize_answer(b)


def test_string_match_grader_labels_and_names_itself():
    grader = bench.StringMatchGrader()
    assert grader(qa("Paris"), "It is Paris, of course.").label == "CORRECT"
    assert grader(qa("1,000 euros"), "1000 euros").label == "CORRECT"
    assert grader(qa("Paris"), "Lyon").label == "INCORRECT"
    assert grader(qa("New York"), "York").label == "INCORRECT"  # gold must appear whole
    assert grader(qa("Paris"), "  ").label == "NOT_ATTEMPTED"
    grade = grader(qa("Paris"), "Paris")
    assert grade.grader == "string-match, not the official judge" and grade.score == 1.0


def test_grader_for_falls_back_to_string_match_only_for_answer_benchmarks():
    fallback = {name for name, spec in bench.BENCHMARKS.items() if spec.grader.judged and spec.grader.string_match}
    assert fallback == {"seal0", "simpleqa", "simpleqa_verified", "frames", "browsecomp"}
    for name in fallback:
        assert isinstance(bench.grader_for(name), bench.StringMatchGrader)
    for name in ("eqbench_longform", "abgen", "papillon"):
        with pytest.raises(ValueError, match="judge"):
            bench.grader_for(name)
    with pytest.raises(ValueError, match="unknown"):
        bench.grader_for("gaia", Scripted())


def test_each_benchmark_gets_its_own_grader_from_the_registry():
    judge = Scripted()
    expected = {"seal0": (bench.SimpleQAGrader, "sealqa-official-template"),
                "simpleqa": (bench.SimpleQAGrader, "simpleqa-official-template"),
                "simpleqa_verified": (bench.SimpleQAGrader, "simpleqa-official-template"),
                "frames": (bench.FramesGrader, "frames-paper-autorater"),
                "browsecomp": (bench.BrowseCompGrader, "browsecomp-official-template"),
                "eqbench_longform": (bench.EQBenchLongformGrader, "eqbench-longform-rubric"),
                "abgen": (bench.AbGenGrader, "abgen-likert(method-bug-as-published"),
                "hotpotqa": (bench.HotpotQAGrader, "hotpotqa-official-em-f1"),
                "aime2025": (bench.AIMEGrader, "aime-integer-exact-match")}
    assert set(expected) | {"papillon"} == set(bench.BENCHMARKS)
    for name, (cls, prefix) in expected.items():
        grader = bench.grader_for(name, judge)
        assert type(grader) is cls and grader.name.startswith(prefix), name
    # options reach the grader; graders without a judge ignore the one given
    assert not bench.grader_for("abgen", judge, upstream_method_bug=False).upstream_method_bug
    assert bench.grader_for("hotpotqa", judge) == bench.grader_for("hotpotqa")


def test_bad_prediction_type_is_a_typed_error_grade():
    grade = bench.StringMatchGrader()(qa(), 42)
    assert grade.error.startswith("PredictionTypeError") and math.isnan(grade.score) and grade.label is None


def test_grade_score_nan_iff_error():
    with pytest.raises(ValueError):
        Grade(label="CORRECT", score=math.nan, grader="g")
    with pytest.raises(ValueError):
        Grade(label=None, score=1.0, grader="g", error="boom")


# --- SimpleQA / SEAL-0 -------------------------------------------------------------------------


def test_simpleqa_grader_uses_official_template_and_letters():
    judge = Scripted("A", "B", "C")
    grader = bench.SimpleQAGrader(judge)
    labels = [grader(qa(), p).label for p in ("Paris", "Lyon", "I don't know")]
    assert labels == ["CORRECT", "INCORRECT", "NOT_ATTEMPTED"]
    prompt, system = judge.calls[0]
    assert system is None
    assert "Question: What is the capital of France?\nGold target: Paris\nPredicted answer: Paris" in prompt
    assert prompt.startswith("Your job is to look at a question, a gold target, and a predicted answer")


def test_simpleqa_parsing_quirk_and_unparseable_reply():
    # simple-evals takes the first capital A/B/C anywhere: "CORRECT" reads as C.
    assert parse_simpleqa_letter("CORRECT") == "C"
    assert parse_simpleqa_letter("The grade is: A") == "A"
    grade = bench.SimpleQAGrader(Scripted("no letter here"))(qa(), "Paris")
    assert grade.error.startswith("JudgeReplyError") and grade.raw == "no letter here"
    assert grade.label is None and math.isnan(grade.score)


def test_sealqa_template_variant():
    judge = Scripted("A")
    grade = bench.SimpleQAGrader(judge, template="sealqa")(qa(benchmark="seal0"), "Paris")
    assert grade.label == "CORRECT" and grade.grader.startswith("sealqa")
    assert "internal inconsistency" in judge.calls[0][0]
    with pytest.raises(ValueError):
        bench.SimpleQAGrader(judge, template="other")


def test_judge_exception_becomes_error_grade():
    def broken(prompt, system=None):
        raise ConnectionError("judge offline")

    grade = bench.SimpleQAGrader(broken)(qa(), "Paris")
    assert grade.error == "ConnectionError: judge offline"


# --- FRAMES ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ("Explanation: matches.\nDecision: TRUE", True),
        ("Explanation: no.\nDecision: FALSE", False),
        ('Explanation: ok\nDecision: "TRUE"', True),
        ("**Decision:** true", True),
        ("Decision: FALSE\n...on reflection\nDecision: TRUE", True),
    ],
)
def test_frames_decision_parsing(reply, verdict):
    assert parse_frames_decision(reply) is verdict


def test_frames_grader_prompt_and_unparseable():
    judge = Scripted("Explanation: x\nDecision: TRUE", "I think it is right")
    grader = bench.FramesGrader(judge)
    assert grader(qa(benchmark="frames"), "Paris").label == "TRUE"
    prompt, system = judge.calls[0]
    assert system == "You are a helpful assistant."
    assert "«" not in prompt and "Paris" in prompt and "What is the capital of France?" in prompt
    assert grader(qa(benchmark="frames"), "Paris").error.startswith("JudgeReplyError")


# --- BrowseComp --------------------------------------------------------------------------------


def test_browsecomp_grader_reads_captured_word():
    judge = Scripted("extracted_final_answer: 7\nreasoning: ...\ncorrect: yes\nconfidence: 90%",
                     "correct: no", "nothing useful")
    grader = bench.BrowseCompGrader(judge)
    item = qa("7", benchmark="browsecomp")
    assert [grader(item, "7").label, grader(item, "8").label] == ["CORRECT", "INCORRECT"]
    assert grader(item, "x").error.startswith("JudgeReplyError")


# --- HotpotQA ----------------------------------------------------------------------------------


def test_hotpot_normalisation_is_squad():
    assert squad_normalize("The U.S.-based  company!") == "usbased company"


def test_hotpot_grader_em_and_f1():
    grader = bench.HotpotQAGrader()
    item = qa("Ed Wood", benchmark="hotpotqa")
    exact = grader(item, "ed wood.")
    assert exact.score == 1.0 and exact.details["f1"] == 1.0
    partial = grader(item, "Wood")
    assert partial.score == 0.0 and partial.details["f1"] == pytest.approx(2 / 3)
    yes_no = grader(qa("yes", benchmark="hotpotqa"), "yes indeed")
    assert yes_no.score == 0.0 and yes_no.details["f1"] == 0.0


# --- AIME --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("so the answer is \\boxed{70}.", 70),
        ("\\boxed{12} then corrected: \\boxed{\\text{answer } 588}", 588),
        ("We get 3, then 17, final 204", 204),
        ("no number", None),
        ("\\boxed{1,000}", 1000),
    ],
)
def test_aime_extraction(text, value):
    assert extract_aime_answer(text) == value


def test_aime_grader():
    item = Item(benchmark="aime2025", item_id="1", question="q", answer=70)
    assert bench.AIMEGrader()(item, "\\boxed{70}").label == "CORRECT"
    assert bench.AIMEGrader()(item, "\\boxed{71}").label == "INCORRECT"
    assert bench.AIMEGrader()(item, "I give up").label == "INCORRECT"


# --- EQ-Bench long-form ------------------------------------------------------------------------


def _rubric_reply(criteria, value):
    return "[Analysis]\nFine.\n\n[Scores]\n\n" + "\n\n".join(f"{c}: {value}" for c in criteria)


def test_rubric_parsing_and_weighting():
    spec = bench.load_longform_spec()
    reply = _rubric_reply(spec.final_criteria, 10) + "\n\nSummary: 3"
    scores = parse_rubric_scores(reply)
    assert len(scores) == len(spec.final_criteria) and set(scores.values()) == {10.0}
    assert parse_rubric_scores("Coherent: [25]")["Coherent"] == 20.0  # clamped
    # All 10s: positives 10, negatives inverted to 10, forced poetry (10/20)^1.7*20 with weight 5.
    avg = rubric_average(scores, spec.final_criteria, spec.negative_final_criteria, spec.criteria_weights)
    n = len(spec.final_criteria)
    fp = (10 / 20) ** 1.7 * 20
    assert avg == pytest.approx(((n - 1) * 10 + 5 * fp) / (n - 1 + 5))
    with pytest.raises(GradingError, match="Pacing"):
        rubric_average({"Coherent": 3}, spec.final_criteria, (), {})


def test_rubric_negative_inversion():
    score = rubric_average({"Good": 20, "Bad": 0}, ("Good", "Bad"), ("Bad",), {})
    assert score == 20.0


def test_eqbench_grader_story_with_chapters():
    spec = bench.load_longform_spec()
    story = bench.LongformStory(chapters=("One.", "Two."), plan="the plan", character_profiles="people")
    judge = Scripted(_rubric_reply(spec.chapter_criteria, 20), _rubric_reply(spec.chapter_criteria, 20),
                     _rubric_reply(spec.final_criteria, 20))
    item = bench.load_eqbench_longform()[0]
    grade = bench.EQBenchLongformGrader(judge)(item, story)
    assert grade.error is None and len(judge.calls) == 3
    chapter_prompt = judge.calls[1][0]
    assert "[CHAPTER 2]\n\nTwo.\n\n[/CHAPTER 2]" in chapter_prompt and "the plan" in chapter_prompt
    assert "- Nuanced Characters" in chapter_prompt and "Forced Poetry or Metaphor, Purple Prose" in chapter_prompt
    # Positives 20, negatives 20 -> 0, so the score is the weighted share of positive criteria.
    def expected(criteria, negative):
        weights = [spec.criteria_weights.get(c.lower(), 1.0) for c in criteria]
        return sum(w * 20 for c, w in zip(criteria, weights) if c not in negative) / sum(weights)
    chap = expected(spec.chapter_criteria, spec.negative_chapter_criteria)
    final = expected(spec.final_criteria, spec.negative_final_criteria)
    assert grade.score == pytest.approx((2 * chap + final) / 3 * 5)
    assert "# Chapter 1\n\nOne.\n\n---\n\n# Chapter 2\n\nTwo." in judge.calls[2][0]


def test_eqbench_grader_plain_text_is_final_piece_only_and_missing_scores_error():
    spec = bench.load_longform_spec()
    item = bench.load_eqbench_longform()[0]
    grade = bench.EQBenchLongformGrader(Scripted(_rubric_reply(spec.final_criteria, 20)))(item, "A story.")
    assert "final-piece-only" in grade.grader and grade.error is None
    bad = bench.EQBenchLongformGrader(Scripted("[Scores]\nCoherent: 12"))(item, "A story.")
    assert bad.error.startswith("JudgeReplyError") and "Coherent: 12" in bad.raw


# --- AbGen -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ("Solid design.\nTherefore, the score is: 4", 4),
        ("therefore the score is **3**. Good.", 3),
        ("Explanation...\nFinal: 5", 5),
        # Disagreeing phrases fall back to the last sentence, as AbGen's extractor does.
        ("Therefore, the score is: 2. Therefore, the score is: 4", 4),
    ],
)
def test_abgen_score_extraction(reply, score):
    assert extract_abgen_score(reply) == score


@pytest.mark.parametrize("reply", ["It sits between 2 and 3", "no score at all", "7"])
def test_abgen_score_extraction_rejects_ambiguous(reply):
    with pytest.raises(JudgeReplyError):
        extract_abgen_score(reply)


def _abgen_item():
    return Item(benchmark="abgen", item_id="0", question="design it", answer="Remove the gate.",
                metadata={"research_background": "BG", "method": "METHOD TEXT", "main_experiment_setup": "SETUP",
                          "main_experiment_results": "RESULTS", "module_name": "the gate"})


def test_abgen_grader_four_aspects_and_method_bug():
    judge = Scripted(*(f"Therefore, the score is: {s}" for s in (5, 4, 3, 2)))
    grade = bench.AbGenGrader(judge)(_abgen_item(), "Ablate the gate.")
    assert grade.score == 2.0 and dict(grade.details) == {"importance": 5, "faithfulness": 4, "soundness": 3, "overall": 2}
    prompt, system = judge.calls[0]
    assert "example['method']" in prompt and "METHOD TEXT" not in prompt  # as published
    assert "Research Background:\nBG" in prompt and "Main Experiment Setup\nSETUP" in prompt
    assert "Ablate the gate." in prompt and "Remove the gate." in prompt
    assert "the gate" in system and "$module" not in system
    fixed = Scripted(*["Therefore, the score is: 3"] * 4)
    bench.AbGenGrader(fixed, upstream_method_bug=False)(_abgen_item(), "x")
    assert "METHOD TEXT" in fixed.calls[0][0]


# --- DSPy judges -------------------------------------------------------------------------------


def test_dspy_judge_with_dummy_lm():
    from dspy.utils import DummyLM

    judge = bench.DSPyJudge(DummyLM([{"reply": "A"}]))
    grade = bench.SimpleQAGrader(judge)(qa(), "Paris")
    assert grade.label == "CORRECT" and grade.grader == "simpleqa-official-template(judge=dummy)"


def test_papillon_grader_with_dummy_lm():
    from dspy.utils import DummyLM

    lm = DummyLM([
        {"reasoning": "r", "judgment": "True"},
        {"reasoning": "r", "judgment": "False"},
        {"reasoning": "r", "num_pii_leaked": "1"},
    ])
    item = Item(benchmark="papillon", item_id="1", question="Write to Ann Lee about Acme.", answer="Dear Ann...",
                metadata={"pii_units": ("ann lee", "acme")})
    prediction = SimpleNamespace(llm_request="Write to [REDACTED] about Acme.", llm_response="Dear Ann, ...")
    grade = bench.PapillonGrader(bench.DSPyJudge(lm))(item, prediction)
    assert grade.error is None
    assert dict(grade.details) == {"quality": 1.0, "leakage": 0.5, "num_pii_leaked": 1.0}
    assert grade.score == pytest.approx(0.75)
    assert bench.PapillonGrader(bench.DSPyJudge(lm))(item, "just text").error.startswith("PredictionTypeError")
    with pytest.raises(TypeError, match="DSPyJudge"):
        bench.PapillonGrader(Scripted())


def test_papillon_grader_rejects_impossible_leak_counts_and_reads_tutorial_field_names():
    from dspy.utils import DummyLM

    item = Item(benchmark="papillon", item_id="1", question="Write to Ann Lee.", answer="Dear Ann...",
                metadata={"pii_units": ("ann lee", "acme")})
    # the DSPy tutorial module calls its final answer `response`
    prediction = SimpleNamespace(llm_request="Write to [REDACTED].", response="Dear Ann, ...")
    lm = DummyLM([{"reasoning": "r", "judgment": "True"}, {"reasoning": "r", "judgment": "True"},
                  {"reasoning": "r", "num_pii_leaked": "300"}])
    grade = bench.PapillonGrader(bench.DSPyJudge(lm))(item, prediction)
    assert grade.error.startswith("JudgeReplyError") and "300" in grade.error
    assert math.isnan(grade.score)


# --- GAIA quasi-exact match (issue 24: grade as the paper grades) -----------------------------------

GAIA_CASES = [
    # (answer, gold, GAIA's verdict): the near-misses the exact grader failed, and the scorer's quirks
    ("Turku.", "Turku", True), ("turku", "Turku", True), ('"Turku"', "Turku", True), ("Tur ku", "Turku", True),
    ("17", "17", True), ("$17", "17", True), ("17%", "17", True), ("17.0", "17", True), ("1,7", "17", True),
    ("17 km", "17", False), ("seventeen", "17", False), ("17.5", "17", False), ("", "17", False),
    ("-44.2", "-44.2%", True), ("44.2", "-44.2%", True),  # a gold with % is text: punctuation and sign go
    ("90", "90 days", False), ("90days", "90 days", True),
    ("34,122", "34,122", True), ("34122", "34,122", False),  # a gold with a comma is a two-element list
    ("a; B", "a,b", True), ("b, a", "a,b", False), ("a,b,c", "a,b", False), ("1, x.", "1,x", False),
    ("1.0, X", "1,x", True), ("Café", "café", True), ("naïve–x", "naïve-x", False),  # no Unicode punctuation
]


@pytest.mark.parametrize("answer, gold, verdict", GAIA_CASES)
def test_gaia_quasi_exact_match_follows_the_leaderboard_s_rules(answer, gold, verdict):
    assert bench.gaia_quasi_exact(answer, gold) is verdict
    grade = bench.GaiaGrader()(Item("gaia", "q", "?", gold), answer)
    assert (grade.label, grade.score, grade.grader) == ("CORRECT" if verdict else "INCORRECT", float(verdict),
                                                        "gaia-quasi-exact-match")


def test_gaia_answers_with_one_key_get_one_grade_against_every_gold():
    # the vote key may pool two answers only if no gold tells them apart
    answers = sorted({a for a, _, _ in GAIA_CASES} | {"44.2%", "-44.2%", "1000", "1,000", "TURKU", "17.00"})
    golds = sorted({g for _, g, _ in GAIA_CASES})
    key = bench.answer_key(bench.GaiaGrader())
    for a in answers:
        for b in answers:
            if key(a) == key(b):
                assert all(bench.gaia_quasi_exact(a, g) == bench.gaia_quasi_exact(b, g) for g in golds), (a, b)
    assert key("Turku") == key("turku") and key(" 17") == key("17")  # it still pools what GAIA cannot tell apart
    assert key("44.2%") != key("-44.2%")  # a number gold tells them apart
