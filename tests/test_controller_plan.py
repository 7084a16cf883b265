"""Planner output validation (issue 3, item 5; issue 9 §1): unit cases and hypothesis fuzzing, every
fuzzed example under a real time limit (SIGALRM), because hypothesis' own deadline cannot stop a hang."""

from __future__ import annotations

import itertools
import signal
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roma_lab.controller import TASK_TYPES, Subtask, validate_plan
from roma_lab.trace import show


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


@pytest.mark.parametrize("length", range(2, 13))
def test_cycles_of_every_length_are_cut_and_named(length):
    # i depends on i+1 (a forward reference) and the last on the first: one cycle through every item
    plan = [item(f"s{i}", depends_on=[(i + 1) % length]) for i in range(length)]
    with time_limit(2.0):
        result = check(plan, max_subtasks=12)
    assert [s.depends_on for s in result.subtasks] == [()] * (length - 1) + [(0,)]
    assert result.warnings == tuple(f"subtask {i} depends on later subtask {i + 1} (a cycle); removed"
                                    for i in range(length - 1))


def test_only_edges_on_a_cycle_are_called_a_cycle():
    # 0 -> 2 -> 1 -> 0 is a cycle of length 3; 3 -> 4 is a forward reference to an acyclic item
    plan = [item("a", depends_on=[2]), item("b", depends_on=[0]), item("c", depends_on=[1]),
            item("d", depends_on=[4]), item("e")]
    warnings = check(plan).warnings
    assert "subtask 0 depends on later subtask 2 (a cycle); removed" in warnings
    assert "subtask 3 depends on later subtask 4 (a forward reference); removed" in warnings


def test_indices_are_remapped_after_dropping_items():
    result = check([item(""), item("a"), item("b", depends_on=[1])])
    assert result.subtasks == (Subtask("a", "think"), Subtask("b", "think", (0,)))


def test_unusable_plans_are_empty_with_a_reason():
    for raw in (None, "1. do it", {"goal": "a"}, [], [{"goal": "  "}], 42):
        result = check(raw)
        assert result.subtasks == () and result.warnings


def test_endless_or_unordered_containers_are_refused_not_read():
    with time_limit(2.0):
        assert check(item(g) for g in "ab").subtasks == ()  # a plan must be a list: indices need an order
        assert check(itertools.count()).subtasks == ()  # (reading this one would never end)
        assert check({item("a")["goal"]}).subtasks == ()
        result = check([{"goal": "a", "task_type": "think", "depends_on": itertools.count()}])
    assert result.subtasks == (Subtask("a", "think"),) and "not a list" in result.warnings[0]
    assert check([item("a"), item("b", depends_on={0})]).subtasks[1].depends_on == (0,)  # a set of indices is fine


def test_objects_with_attributes_are_accepted():
    assert check([Subtask("a", "code")]).subtasks == (Subtask("a", "code"),)


class _Hang(BaseException):  # not an Exception: nothing inside validate_plan may swallow it
    pass


def _alarm(signum, frame):
    raise _Hang


@contextmanager
def time_limit(seconds: float):
    """A real per-call time limit: SIGALRM interrupts even a `while True` in pure Python."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _Hang:
        pytest.fail(f"validate_plan ran over {seconds} s (a hang)")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


EXAMPLE_LIMIT_S = 2.0  # per example; validate_plan takes well under a millisecond

class BadRepr:
    def __repr__(self):
        raise RuntimeError("repr exploded")


class BadItem:
    @property
    def goal(self):
        raise RuntimeError("attribute exploded")

    task_type = depends_on = goal


# any character, lone surrogates included (hypothesis' default alphabet leaves them out)
any_text = st.text(st.characters(codec=None, categories=None), max_size=8)
scalars = st.one_of(st.none(), st.booleans(), st.integers(),
                    st.builds(pow, st.sampled_from([10, -10]), st.just(5001)),  # beyond int->str limits
                    st.floats(allow_nan=True), any_text, st.binary(max_size=4), st.builds(BadRepr),
                    st.builds(BadItem))
json_like = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.tuples(inner, inner), st.dictionaries(any_text, inner, max_size=4),
    st.frozensets(st.integers(-3, 12), max_size=4), st.sets(any_text, max_size=3)), max_leaves=8)
task_type = st.one_of(st.sampled_from(TASK_TYPES), any_text, st.frozensets(st.sampled_from(TASK_TYPES)),
                      st.lists(st.sampled_from(TASK_TYPES), max_size=2), json_like)


@st.composite
def index_plans(draw):
    """Plans of n items whose dependencies point anywhere, forward included, plus planted cycles."""
    n = draw(st.integers(1, 14))
    deps = [draw(st.lists(st.integers(-2, n + 1), max_size=4)) for _ in range(n)]
    for _ in range(draw(st.integers(0, 3))):  # a cycle through k distinct items, any length
        members = draw(st.permutations(range(n)))[:draw(st.integers(1, n))]
        for a, b in zip(members, members[1:] + members[:1], strict=True):
            deps[a].append(b)
    container = draw(st.sampled_from([list, tuple, set, frozenset]))
    types = draw(st.lists(st.sampled_from([*TASK_TYPES, "dance", None, frozenset({"think"})]), min_size=n, max_size=n))
    return [{"goal": f"step {i}", "task_type": t, "depends_on": container(d)}
            for i, (t, d) in enumerate(zip(types, deps, strict=True))]


@settings(max_examples=300, deadline=None)
@given(value=json_like)
def test_messages_can_quote_any_value(value):
    text = show(value)  # warnings quote model output: nested huge ints and raising __repr__ included
    assert isinstance(text, str) and len(text) < 400


def test_messages_quote_huge_and_broken_values_briefly():
    assert show(10 ** 5000) == "<int of 16610 bits>"
    assert show([1, 10 ** 5000]).startswith("<unprintable list")  # reprlib cannot print it either
    assert "BadRepr" in show(BadRepr())


def assert_valid(result, max_subtasks):
    assert len(result.subtasks) <= max_subtasks
    if not result.subtasks:
        assert result.warnings  # an unusable plan always says why
    for i, sub in enumerate(result.subtasks):
        assert isinstance(sub.goal, str) and sub.goal.strip() and sub.task_type in TASK_TYPES
        assert all(0 <= d < i for d in sub.depends_on)  # earlier siblings only => acyclic
        assert list(sub.depends_on) == sorted(set(sub.depends_on))
    assert all(isinstance(w, str) for w in result.warnings)


@settings(max_examples=600, deadline=None)
@given(raw=index_plans(), max_subtasks=st.integers(1, 14))
def test_fuzzed_index_plans_with_cycles_never_hang_and_come_out_acyclic(raw, max_subtasks):
    with time_limit(EXAMPLE_LIMIT_S):
        result = check(raw, max_subtasks=max_subtasks)
    assert_valid(result, max_subtasks)


@settings(max_examples=500, deadline=None)
@given(raw=st.one_of(json_like, st.lists(st.one_of(json_like, st.dictionaries(
    st.sampled_from(["goal", "task_type", "depends_on", "extra"]), json_like)), max_size=8)),
    max_subtasks=st.integers(1, 12))
def test_fuzzed_json_like_plans_never_hang_or_raise(raw, max_subtasks):
    with time_limit(EXAMPLE_LIMIT_S):
        result = check(raw, max_subtasks=max_subtasks)
    assert_valid(result, max_subtasks)


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
