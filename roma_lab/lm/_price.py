"""The one rule for what a model call costs.

A model that runs in this process (an embedded local model, the scripted test double) sends no bill:
its calls cost 0. Any other model is remote: a call costs what its provider reported, and a call
without a reported price is unknown (None, NaN in tables), never 0.
"""

from __future__ import annotations

from ._scripted import is_scripted

__all__ = ["call_cost", "in_process"]


def in_process(model: str) -> bool:
    """Whether ``model`` (a ``resolve_lm`` name or an LM's model string) runs in this process: "local",
    "local:<variant>", "local/<id>", a .gguf path, or the scripted test double."""
    return model == "local" or model.startswith(("local:", "local/")) or model.endswith(".gguf") or is_scripted(model)


def call_cost(model: str | None, reported: float | None) -> float | None:
    """A call's cost in USD: 0 on an in-process model, else the ``reported`` price (None: unknown).
    ``model=None`` (not known) is treated as remote."""
    return 0.0 if model is not None and in_process(model) else reported
