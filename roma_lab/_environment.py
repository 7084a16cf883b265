"""Every environment variable roma_lab reads, named once (``ENV``), with what each one sets.

A module that reads one takes its name from here, so this is the whole list a user can set (and
``tests/test_environment.py`` checks that no other ``ROMA_LAB_*`` name is read anywhere). Below every
room, so any package may use it. Settings that are not environment variables are passed down as
frozen values (``RomaSettings``, ``StatsSettings``, ``AgentConfig``...).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields

__all__ = ["ENV", "Environment"]


@dataclass(frozen=True, slots=True)
class Environment:
    """The names of roma_lab's environment variables; each field's comment says what it sets."""

    lm: str = "ROMA_LAB_LM"  # the model every notebook and command names unless told (default: local)
    api_base: str = "ROMA_LAB_API_BASE"  # the user's OpenAI-compatible server for openai/<name> models
    api_key: str = "ROMA_LAB_API_KEY"  # its key (never sent anywhere else)
    call_deadline_s: str = "ROMA_LAB_CALL_DEADLINE_S"  # a remote call's total deadline (default 300 s)
    max_concurrency: str = "ROMA_LAB_MAX_CONCURRENCY"  # requests in flight per model (N, or name=N,...)
    cache: str = "ROMA_LAB_CACHE"  # the completion cache and model weights (default ~/.cache/roma_lab)
    fresh: str = "ROMA_LAB_FRESH"  # "1": ask the embedded model again instead of replaying (run --fresh)
    engine: str = "ROMA_LAB_ENGINE"  # the embedded engine: llama-cpp-python (default) or llama.cpp-server
    slots: str = "ROMA_LAB_SLOTS"  # the llama.cpp server's slots
    threads: str = "ROMA_LAB_THREADS"  # CPU threads of the embedded model (default: the affinity mask)
    speed_log: str = "ROMA_LAB_LM_LOG"  # where embedded models log their tokens/s (the runner sets it)
    cluster: str = "ROMA_LAB_CLUSTER"  # the Dask cluster runs go to (default: in-process)
    budget_usd: str = "ROMA_LAB_BUDGET_USD"  # evaluate's dollar cap per out folder when given none (run --budget-usd)
    sandbox: str = "ROMA_LAB_SANDBOX"  # "audit-hook-only" accepts the weaker sandbox where the jail cannot run
    data: str = "ROMA_LAB_DATA"  # another copy of the benchmark data (kept out of the jail too)
    mcp_server: str = "ROMA_LAB_MCP_SERVER"  # set by roma_lab in an MCP server's environment, to find its children
    web: str = "ROMA_LAB_WEB"  # the web search provider spec (serper, searxng=http://host:port, wikipedia...)
    web_record: str = "ROMA_LAB_WEB_RECORD"  # web calls: off (default), record or replay
    web_dir: str = "ROMA_LAB_WEB_DIR"  # the web recording folder (default: <ROMA_LAB_CACHE>/web)
    web_allow: str = "ROMA_LAB_WEB_ALLOW"  # private hosts a page read may reach (host[:port], comma-separated)

    def names(self) -> tuple[str, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))

    @staticmethod
    def number(name: str, unit: str) -> float | None:
        """The number variable ``name`` holds (None: unset or blank); ValueError naming it and its
        ``unit`` when it holds anything else. Its range is the reader's to check."""
        text = os.environ.get(name, "").strip()
        if not text:
            return None
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"${name} must be a number of {unit}, got {text!r}") from None


ENV = Environment()
