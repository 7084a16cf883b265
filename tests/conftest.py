"""Shared test setup for roma_lab."""

import os

# LiteLLM otherwise tries to fetch its model cost map at import, losing ~7 s offline
# (the Makefile exports the same; this covers a bare `pytest`).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# Property tests explore a fixed sequence of examples, so CI never fails on one lucky draw; set
# HYPOTHESIS_PROFILE=explore to search with fresh randomness (and keep any failure as a regression).
from hypothesis import settings  # noqa: E402

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
