"""LiteLLM's capability rules, matched once per model name instead of on every call.

For a model name its price list does not know (any model on a user's own server), LiteLLM prices every
response and looks up its capabilities by trying each name variant against every capability rule of
its "fallback generalizations" (regular expressions): about 1,100 regex searches a call, none of which
LiteLLM caches, as its model-info caches keep only the names it finds. Which rules a name matches
depends only on the name and the compiled rules, so it is remembered per name here, for the rules
installed (a reload of LiteLLM's cost map installs new rules and starts afresh); the merged answer is
built from the rules' own ``model_info`` on every call, as LiteLLM builds it, so every result is
LiteLLM's own, for every user of LiteLLM in this process.
"""

from __future__ import annotations

import threading

__all__ = ["remember_rule_matches"]

_lock = threading.Lock()
_done = False


def remember_rule_matches() -> None:
    """Make LiteLLM's capability-rule matching remember, per model name, which rules matched: once per
    process, at the first remote call (LiteLLM is imported then anyway); nothing without such rules."""
    global _done
    if _done:
        return
    with _lock:
        if _done:
            return
        _done = True
        try:
            from litellm.litellm_core_utils import fallback_generalizations
        except ImportError:
            return
        registry = getattr(fallback_generalizations, "_registry", None)
        if registry is not None and hasattr(registry, "capability_rules") and hasattr(registry, "match_capabilities"):
            registry.match_capabilities = _remembering(registry)


def _remembering(registry):
    """``registry.match_capabilities`` (LiteLLM's) with the indices of the rules each name matched kept
    for the rules installed; the union of their ``model_info`` is built anew on each call, as LiteLLM's."""
    memo: list = [None, {}]  # the rules the memo is for, name -> indices of the rules it matched

    def match_capabilities(model: str) -> dict | None:
        if not model:
            return None
        rules, (memo_rules, hits_of) = registry.capability_rules, memo
        if memo_rules is not rules:  # LiteLLM installed new rules (a cost map reload): start afresh
            hits_of = {}
            memo[:] = [rules, hits_of]
        hits = hits_of.get(model)
        if hits is None:
            hits = hits_of[model] = tuple(i for i, rule in enumerate(rules) if rule.pattern.search(model) is not None)
        if not hits:
            return None
        return {key: value for i in hits for key, value in rules[i].model_info.items()}

    return match_capabilities
