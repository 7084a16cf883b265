"""The one rule for what a model call costs.

A model that runs in this process (an embedded local model, the scripted test double) sends no bill:
its calls cost 0. Any other model is remote: a call costs what its provider reported, and a call
without a reported price is unknown (None, NaN in tables), never 0. A request DSPy served from its
cache reached no provider: it costs nothing now, whatever its history entry says it cost once.
Before any call (a study plan), a token of a remote model costs LiteLLM's list price of it
(:func:`token_price`), unknown when the list has none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._scripted import is_scripted

__all__ = ["TokenPrice", "call_cost", "in_process", "served_from_cache", "token_price"]


def in_process(model: str) -> bool:
    """Whether ``model`` (a ``resolve_lm`` name or an LM's model string) runs in this process: "local",
    "local:<variant>", "local/<id>", a .gguf path, or the scripted test double."""
    return model == "local" or model.startswith(("local:", "local/")) or model.endswith(".gguf") or is_scripted(model)


def call_cost(model: str | None, reported: float | None) -> float | None:
    """A call's cost in USD: 0 on an in-process model, else the ``reported`` price (None: unknown).
    ``model=None`` (not known) is treated as remote."""
    return 0.0 if model is not None and in_process(model) else reported


@dataclass(frozen=True, slots=True)
class TokenPrice:
    """USD per prompt (input) token and per generated (output) token of one model."""

    input_usd: float
    output_usd: float


def token_price(model: str) -> TokenPrice | None:
    """What a token of ``model`` costs before any call: 0 on an in-process model, else LiteLLM's list
    price of it (by the name as given, else without its provider prefix); None when the list has no
    price for it, or LiteLLM is not installed (unknown, never 0)."""
    if in_process(model):
        return TokenPrice(0.0, 0.0)
    try:
        import litellm
    except ImportError:
        return None
    entry = litellm.model_cost.get(model) or litellm.model_cost.get(model.partition("/")[2])
    if not entry or entry.get("input_cost_per_token") is None or entry.get("output_cost_per_token") is None:
        return None
    return TokenPrice(float(entry["input_cost_per_token"]), float(entry["output_cost_per_token"]))


def served_from_cache(entry: Mapping[str, Any]) -> bool:
    """Whether a ``dspy.LM`` history entry was served from a cache (looked up, not generated).

    roma_lab's completion cache marks its replies ``provider_data={"cache_hit": True}``. DSPy's
    request cache marks a hit in two ways, by engine: a LiteLLM reply is stamped ``cache_hit``; a
    native (lm15) reply is stored as it came, with the usage it reported, and only the entry's own
    ``usage`` is emptied (no tokens were spent). A fresh native reply's entry carries that reply's usage.
    """
    response = entry.get("response")
    marks = getattr(response, "provider_data", None)
    if getattr(response, "cache_hit", False) or (isinstance(marks, Mapping) and marks.get("cache_hit")):
        return True
    from dspy.lm15 import Response

    reported = getattr(response, "usage", None)
    return (isinstance(response, Response) and not entry.get("usage") and reported is not None
            and any(n for n in (reported.input_tokens, reported.output_tokens, reported.total_tokens)))
