"""Values as the trace records them and contexts show them: the one serializer of a run's values
(``jsonable``, nesting bounded so whatever is recorded can be saved and read back), and the cut of a
long text (``clip``) and of an artifact's summary (``reference``) that contexts and tool results share."""

from __future__ import annotations

import json
import math
import reprlib
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from typing import Any

from ._artifact_ref import ArtifactRef

_SHOW = reprlib.Repr()  # warnings quote model output, never all of it
_SHOW.maxstring = _SHOW.maxother = 60

# How many levels of containers (dicts, lists) a recorded value may nest: a tool call's arguments, a
# role call's inputs and each of its outputs, an exchange's messages and completions. Deeper parts
# are cut when recorded (``TRUNCATED`` and their repr, :func:`jsonable`) and a run holding a
# deeper value is invalid, so whatever is recorded can be saved and read back: a run file then nests
# at most about 110 levels, under pydantic's 255 and Python's recursion limit of 1,000.
MAX_VALUE_DEPTH = 100
TRUNCATED = "<truncated: "  # how a recorded value that was cut begins

__all__ = ["clip", "context_chars", "jsonable", "reference", "show"]


_SHOW_CHARS = 200  # reprlib bounds each level, not the whole: deep nesting can still run long


def show(value: Any) -> str:
    """A short repr that never raises, for messages quoting whatever a model returned."""
    if isinstance(value, int) and value.bit_length() > 64:  # repr() refuses ints over 4,300 digits
        return f"<int of {value.bit_length()} bits>"
    try:
        text = _SHOW.repr(value)
    except Exception:  # an object whose __repr__ raises
        return f"<unprintable {type(value).__name__}>"
    return text if len(text) <= _SHOW_CHARS else f"{text[:_SHOW_CHARS - 3]}..."


def jsonable(value: Any) -> Any:
    """``value`` as JSON data for the trace. A container nested deeper than ``MAX_VALUE_DEPTH``
    levels, or inside itself, is recorded as its repr after a ``TRUNCATED`` mark, so whatever is
    recorded can be saved and read back (design/integrity.md)."""
    return _bounded(value, MAX_VALUE_DEPTH, set())


def _bounded(value: Any, levels: int, inside: set[int]) -> Any:
    """``jsonable`` with ``levels`` of containers left; ``inside``: ids of the values being converted."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        return value if value.bit_length() <= 64 else show(value)  # json.dumps refuses huge ints
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)  # the trace is standard JSON
    if id(value) in inside:
        return f"{TRUNCATED}contains itself> {show(value)}"
    if hasattr(value, "model_dump"):
        plain = value.model_dump(mode="json")
    elif is_dataclass(value) and not isinstance(value, type):
        plain = {f.name: getattr(value, f.name) for f in fields(value)}  # asdict would recurse unbounded
    elif not isinstance(value, (Mapping, list, tuple)):
        return show(value)
    elif levels == 0:
        return f"{TRUNCATED}nested deeper than {MAX_VALUE_DEPTH} levels> {show(value)}"
    else:
        plain = value
    inside.add(id(value))
    try:
        if plain is not value:  # a model or dataclass: converted at the same level
            return _bounded(plain, levels, inside)
        if isinstance(value, Mapping):
            return {str(k): _bounded(v, levels - 1, inside) for k, v in value.items()}
        return [_bounded(v, levels - 1, inside) for v in value]
    finally:
        inside.discard(id(value))


def clip(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters cut]"


def reference(ref: ArtifactRef) -> str:
    """How a context names an artifact whose summary it shows."""
    return f"(summary; the full result is artifact {ref.id}, {ref.size:,} bytes: read it with read_artifact)"


def context_chars(inputs: Mapping[str, Any]) -> int:
    """The size of everything a role was shown (``RoleCall.context_chars``), the same for every writer."""
    return sum(len(v) if isinstance(v, str) else len(json.dumps(v, ensure_ascii=False)) for v in inputs.values())
