"""The one family-stratified sampler draws exactly what the two it replaced drew (same figures)."""

from dataclasses import dataclass

import numpy as np
import pytest

from roma_lab.stats import SampleSizeError, stratified_sample


@dataclass(frozen=True)
class _Item:
    item_id: str
    family: str


def _items(sizes: dict[str, int]) -> list[_Item]:
    # families interleaved and not in sorted order, as a generated suite may list them
    out = [_Item(f"{f}-{i:03d}", f) for f, n in sizes.items() for i in range(n)]
    return out[::2] + out[1::2]


def _router_subset_before(tasks, n, *, seed=0):
    """`router/_reproduce.py:stratified_subset` before issue 22, verbatim but for the names."""
    rng = np.random.default_rng(seed)
    by_family: dict[str, list] = {}
    for t in tasks:
        by_family.setdefault(t.family, []).append(t)
    queues = {f: [ts[i] for i in rng.permutation(len(ts))] for f, ts in by_family.items()}
    chosen: list = []
    while len(chosen) < n:
        for f in by_family:
            if queues[f] and len(chosen) < n:
                chosen.append(queues[f].pop())
    keep = {t.item_id for t in chosen}
    return [t for t in tasks if t.item_id in keep]


def _agent_sample_before(tasks, n, *, seed):
    """`agents/_study.py:sample_suite_tasks` before issue 22 (its draw over the loaded split)."""
    rng = np.random.default_rng(seed)
    families = sorted({t.family for t in tasks})
    queues = {f: [t for t in tasks if t.family == f] for f in families}
    for f in families:
        queues[f] = [queues[f][i] for i in rng.permutation(len(queues[f]))]
    order = [families[i] for i in rng.permutation(len(families))]
    picked: list = []
    while any(queues.values()) and (n is None or len(picked) < n):
        for f in order:
            if queues[f] and (n is None or len(picked) < n):
                picked.append(queues[f].pop(0))
    return picked


SIZES = {"zeta": 7, "alpha": 5, "mid": 9, "beta": 3}


@pytest.mark.parametrize("seed", [0, 1, 7])
@pytest.mark.parametrize("n", [1, 4, 10, 17, 24])
def test_router_training_subsets_are_unchanged(seed, n):
    items = _items(SIZES)
    drawn = {t.item_id for t in stratified_sample(items, n, seed=seed, stratum=lambda t: t.family, from_end=True)}
    assert [t for t in items if t.item_id in drawn] == _router_subset_before(items, n, seed=seed)


@pytest.mark.parametrize("seed", [0, 3, 4])
@pytest.mark.parametrize("n", [None, 1, 4, 10, 17, 24])
def test_agent_task_samples_are_unchanged(seed, n):
    items = _items(SIZES)
    drawn = stratified_sample(items, n, seed=seed, stratum=lambda t: t.family, shuffle_strata=True)
    assert drawn == _agent_sample_before(items, n, seed=seed)


def test_every_family_is_drawn_before_any_twice_and_larger_n_extends():
    items = _items(SIZES)
    four = stratified_sample(items, 4, seed=2, stratum=lambda t: t.family)
    assert {t.family for t in four} == set(SIZES)
    assert stratified_sample(items, 9, seed=2, stratum=lambda t: t.family)[:4] == four
    with pytest.raises(SampleSizeError, match="asked for 0 items"):
        stratified_sample(items, 0, seed=0, stratum=lambda t: t.family)


def test_asking_for_more_than_there_are_names_the_maximum_instead_of_capping():
    items = _items(SIZES)
    assert len(stratified_sample(items, len(items), seed=0, stratum=lambda t: t.family)) == len(items)
    with pytest.raises(SampleSizeError, match=f"but there are {len(items)}: ask for 1..{len(items)}") as err:
        stratified_sample(items, len(items) + 1, seed=0, stratum=lambda t: t.family)
    assert (err.value.n, err.value.maximum) == (len(items) + 1, len(items))
