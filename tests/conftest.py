"""Shared test setup for roma_lab."""

import os

# LiteLLM otherwise tries to fetch its model cost map at import, losing ~7 s offline
# (the Makefile exports the same; this covers a bare `pytest`).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
