"""Shared test setup for roma_lab."""

import os

import pytest

# LiteLLM otherwise tries to fetch its model cost map at import, losing ~7 s offline
# (the Makefile exports the same; this covers a bare `pytest`).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# Property tests explore a fixed sequence of examples, so CI never fails on one lucky draw; set
# HYPOTHESIS_PROFILE=explore to search with fresh randomness (and keep any failure as a regression).
from hypothesis import settings  # noqa: E402

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="module")
def study_dir(tmp_path_factory):
    """The trajectory fixture study as ``roma_lab.evaluate`` saves it: two configurations on two suite tasks,
    graded (tests/trajectory_fixtures.py; the trajectory view's tests and browser tests read it)."""
    from trajectory_fixtures import run_study

    return run_study(tmp_path_factory.mktemp("study"))
