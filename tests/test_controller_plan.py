"""Planner output validation (issue 3, item 5): unit cases and hypothesis fuzzing."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from roma_lab.controller import TASK_TYPES, Subtask, validate_plan


def check(raw, max_subtasks=8):
    return validate_plan(raw, task_types=TASK_TYPES, default_type="think", max_subtasks=max_subtasks)


def item(goal="g", task_type="think", depends_on=()):
    return {"goal": goal, "task_type": task_type, "depends_on": list(depends_on)}


def test_valid_plan_passes_unchanged():
    plan = [item("a"), item("b", "search"), item("c", "write", [0, 1])]
    result = check(plan)
    assert result.warnings == ()
    assert result.subtasks == (Subtask("a", "think"), Subtask("b", "search"), Subtask("c", "write", (0, 1)))


def test_each_defect_is_repaired_and_named():
    cases = {
        "itself": [item("a", depends_on=[0])],
        "later subtask 1 (a forward reference)": [item("a", depends_on=[1]), item("b")],
        "later subtask 1 (a cycle)": [item("a", depends_on=[1]), item("b", depends_on=[0])],
        "outside the plan": [item("a"), item("b", depends_on=[7, -1])],
        "unknown task type 'dance'": [item("a", "dance")],
        "kept the first 2": [item("a"), item("b"), item("c")],
        "non-integer dependency": [item("a"), item("b", depends_on=["0", True])],
        "no goal": [item(""), item("b")],
        "dropped subtask 0": [{"task_type": "think"}, item("b", depends_on=[0])],
    }
    for expected, plan in cases.items():
        result = check(plan, max_subtasks=2)
        assert result.subtasks, expected
        assert any(expected in w for w in result.warnings), (expected, result.warnings)


def test_indices_are_remapped_after_dropping_items():
    result = check([item(""), item("a"), item("b", depends_on=[1])])
    assert result.subtasks == (Subtask("a", "think"), Subtask("b", "think", (0,)))


def test_unusable_plans_are_empty_with_a_reason():
    for raw in (None, "1. do it", {"goal": "a"}, [], [{"goal": "  "}], 42):
        result = check(raw)
        assert result.subtasks == () and result.warnings


def test_objects_with_attributes_are_accepted():
    assert check([Subtask("a", "code")]).subtasks == (Subtask("a", "code"),)


junk = st.one_of(st.none(), st.booleans(), st.integers(-3, 12), st.text(max_size=5), st.floats(allow_nan=True))
raw_item = st.one_of(
    junk,
    st.fixed_dictionaries(
        {},
        optional={
            "goal": st.one_of(st.text(max_size=8), junk),
            "task_type": st.one_of(st.sampled_from(TASK_TYPES), st.text(max_size=6), junk),
            "depends_on": st.one_of(st.lists(st.one_of(st.integers(-3, 12), junk), max_size=6), junk),
        },
    ),
)


@settings(max_examples=400, deadline=None)
@given(raw=st.one_of(junk, st.lists(raw_item, max_size=12)), max_subtasks=st.integers(1, 8))
def test_fuzzed_plans_never_crash_and_always_come_out_valid(raw, max_subtasks):
    result = check(raw, max_subtasks=max_subtasks)
    assert len(result.subtasks) <= max_subtasks
    if not result.subtasks:
        assert result.warnings  # an unusable plan always says why
    for i, sub in enumerate(result.subtasks):
        assert sub.goal.strip() and sub.task_type in TASK_TYPES
        assert all(0 <= d < i for d in sub.depends_on)  # earlier siblings only => acyclic
        assert list(sub.depends_on) == sorted(set(sub.depends_on))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=8).filter(str.strip), st.sampled_from(TASK_TYPES),
                          st.sets(st.integers(0, 7), max_size=3)), min_size=1, max_size=8))
def test_fuzzed_valid_plans_are_kept_exactly(spec):
    raw = [item(g, t, sorted(d for d in deps if d < i)) for i, (g, t, deps) in enumerate(spec)]
    result = check(raw)
    assert result.warnings == ()
    assert [(s.goal, s.task_type, list(s.depends_on)) for s in result.subtasks] == \
        [(r["goal"].strip(), r["task_type"], r["depends_on"]) for r in raw]


def test_repeated_bad_dependency_is_one_warning():
    result = check([item("a", depends_on=[1, 1, 1]), item("b", depends_on=[0, 0])])
    assert len(result.warnings) == 1
    assert result.subtasks[1].depends_on == (0,)
