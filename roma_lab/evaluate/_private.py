"""Items that must never reach the disk in the clear (``roma_lab.bench.PRIVATE_BENCHMARKS``, BrowseComp):
their traces and rows are redacted before anything is written, and no completion cache may hold them."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["REDACTED", "refuse_caching_models", "redacted"]

REDACTED = "[question redacted: this benchmark's items are not stored in the clear]"


def redacted(text: str, secrets: Sequence[str]) -> str:
    """The JSON ``text`` with each of ``secrets`` (a private item's question and gold answer) replaced
    in every string it holds.

    A prompt carries the question as written or inside JSON it builds (escaped once, with or without
    non-ASCII escapes), so each of those forms is replaced where it stands as words (a numeric answer
    such as "8" is not in "805"); a judge's reply or a correct prediction carries the answer. A string
    that still holds a secret as the string-match grader reads it (``normalize_answer``: case,
    articles and punctuation aside, e.g. "the keepers" for "The Keepers") is replaced whole. If a
    string still holds a secret, nothing is returned (RuntimeError): a private item must never reach
    the disk in the clear. Numbers (token counts, latencies) are not the item's text and are kept."""
    from roma_lab.bench import normalize_answer

    forms = sorted({form for secret in secrets if secret
                    for form in (secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1])},
                   key=len, reverse=True)
    as_words = re.compile("|".join(rf"(?<!\w){re.escape(form)}(?!\w)" for form in forms) or r"(?!)")
    # padded, so that containment is a whole-token run, as the string-match grader matches
    needles = {f" {n} " for n in map(normalize_answer, secrets) if n}

    def holds(value: str) -> bool:
        parts = value.split(REDACTED)  # a short answer can be part of the marker's own text
        normal = f" {normalize_answer(' '.join(parts))} "
        return any(as_words.search(part) for part in parts) or any(needle in normal for needle in needles)

    def scrub(value: Any) -> Any:
        if isinstance(value, str):
            value = REDACTED.join(as_words.sub(REDACTED, part) for part in value.split(REDACTED))
            return REDACTED if holds(value) else value
        if isinstance(value, list):
            return [scrub(v) for v in value]
        if isinstance(value, dict):
            return {k: scrub(v) for k, v in value.items()}
        return value

    def strings(value: Any):
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for key, v in value.items():
                yield key
                yield from strings(v)
        elif isinstance(value, list):
            for v in value:
                yield from strings(v)

    clean = scrub(json.loads(text))
    if any(holds(s) for s in strings(clean)):  # dictionary keys are not scrubbed
        raise RuntimeError("a private question or answer survived redaction; nothing was written")
    return json.dumps(clean, indent=1, ensure_ascii=False)


def refuse_caching_models(models: Iterable[tuple[str, Any]]) -> None:
    """Private items must not reach a completion cache: ours records each request's messages (the
    question), DSPy's each reply (a correct answer). ``models``: (role, model) pairs."""
    from roma_lab.lm import CachingEngine

    cached = sorted({role for role, lm in models
                     if getattr(lm, "cache", False) or isinstance(getattr(lm, "engine", None), CachingEngine)})
    if cached:
        raise ValueError(f"private items (BrowseComp) must stay out of completion caches, and the model of {cached} "
                         "caches completions; pass a model name (resolved without a cache) or one made with cache=False")
