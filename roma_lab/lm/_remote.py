"""Remote models: where an ``openai/<name>`` model is served, and which DSPy engine speaks to it.

A user points every notebook at their own OpenAI-compatible server with two environment variables,
read here and nowhere else: ``$ROMA_LAB_API_BASE`` (the server's ``.../v1`` root) and
``$ROMA_LAB_API_KEY``. They apply to ``openai/<name>`` models only; other providers' names keep
their own endpoints and keys. See design/online.md.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from roma_lab._environment import ENV

__all__ = ["endpoint", "remote_kwargs"]

API_BASE_ENV = ENV.api_base
API_KEY_ENV = ENV.api_key
# Sent to a server named without a key, so LiteLLM never falls back to $OPENAI_API_KEY and hands
# the user's OpenAI key to another server; keyless servers (llama.cpp, vLLM) accept any key.
NO_KEY = "no-key"
_OPENAI = "openai/"


def remote_kwargs(name: str, kwargs: dict[str, Any], server_defaults: dict[str, Any]) -> dict[str, Any]:
    """The ``dspy.LM`` keywords for a LiteLLM name: ``kwargs`` with the server from the environment.

    For ``openai/<name>``: ``api_base`` from $ROMA_LAB_API_BASE unless given, and, whenever a server
    address is set, ``api_key`` ($ROMA_LAB_API_KEY, else :data:`NO_KEY`), ``engine="litellm"`` and
    ``server_defaults`` (the embedded engine's generation settings), each unless given. An
    OpenAI-compatible server speaks an unknown dialect of OpenAI's API: LiteLLM's ``openai/`` route
    sends the portable ``max_tokens`` and JSON mode, where DSPy's native engine sends OpenAI's
    ``max_completion_tokens``, which llama-cpp-python's server ignores (generation then runs to the
    context limit).
    """
    if not name.startswith(_OPENAI):
        return kwargs
    base, key = os.environ.get(API_BASE_ENV), os.environ.get(API_KEY_ENV)
    if key and not base:
        raise ValueError(f"${API_KEY_ENV} is set but ${API_BASE_ENV} is not: name the server it is the key of "
                         "(for OpenAI itself, set OPENAI_API_KEY instead)")
    kwargs = dict(kwargs)
    if base and not (kwargs.get("api_base") or kwargs.get("base_url")):
        kwargs["api_base"] = base
    if kwargs.get("api_base") or kwargs.get("base_url"):
        kwargs = {**server_defaults, "api_key": key or NO_KEY, "engine": "litellm", **kwargs}
    return kwargs


def endpoint(lm: Any) -> str | None:
    """The server a model is called at: for a name, $ROMA_LAB_API_BASE if it applies; for an LM, its
    ``api_base``. None means the provider's own endpoint. A user:password in the address is left out."""
    if isinstance(lm, str):
        address = os.environ.get(API_BASE_ENV) if lm.startswith(_OPENAI) else None
    else:
        kwargs = getattr(lm, "kwargs", None) or {}
        address = kwargs.get("api_base") or kwargs.get("base_url")
    return shown_address(address) if address else None


def shown_address(address: str) -> str:
    """A server address as tables and cache keys name it: a user:password in it is left out."""
    parts = urlsplit(str(address))
    if parts.username or parts.password:  # never write a credential into a table
        parts = parts._replace(netloc=parts.netloc.rpartition("@")[2])
    return urlunsplit(parts)
