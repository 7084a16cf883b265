"""A reply that failed to parse is never served from a cache again.

Both caches (DSPy's request cache for models at a server, our completion cache for local models)
store a reply when the model returns it, before DSPy's adapter parses it. Each cache therefore
``remember``s the replies it returned with a way to remove their entry, and ``watch_parses``, called
during a model call an adapter makes, adds a DSPy callback to the settings of that call's context;
its parse-failure handler removes the entries that returned the text that failed, so a rerun asks
the model again. Every adapter's ``parse`` reads those settings (DSPy's ``with_callbacks``): the one
set with ``dspy.context``, the ChatAdapter that ``dspy.Predict`` makes when none is set, and its
JSON fallback alike. The setting lives in the context DSPy's ``Predict`` opens around the adapter
call, so it ends with that call.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

from dspy.utils.callback import BaseCallback

__all__ = ["forget", "remember", "watch_parses"]

# Replies remembered, most recent last: the parse follows its call at once, so a window of recent
# replies is enough and memory stays bounded.
MAX_REPLIES = 2048
_lock = threading.Lock()
_replies: OrderedDict[str, dict[Hashable, Callable[[], None]]] = OrderedDict()


def remember(text: str, entry: Hashable, remove: Callable[[], None]) -> None:
    """Note that the cache entry ``entry`` returned ``text``; ``remove()`` deletes that entry."""
    with _lock:
        _replies.setdefault(text, {})[entry] = remove
        _replies.move_to_end(text)
        while len(_replies) > MAX_REPLIES:
            _replies.popitem(last=False)


def forget(text: str) -> int:
    """Remove every remembered cache entry that returned ``text``; the number removed."""
    with _lock:
        removals = _replies.pop(text, {})
    for remove in removals.values():
        remove()
    return len(removals)


class ForgetUnparsed(BaseCallback):
    """DSPy adapter callback: a completion whose parse raised is removed from the caches."""

    def __init__(self) -> None:
        self._parsing: dict[str, str] = {}  # call id -> completion being parsed

    def on_adapter_parse_start(self, call_id, instance, inputs) -> None:
        if isinstance(inputs.get("completion"), str):
            self._parsing[call_id] = inputs["completion"]

    def on_adapter_parse_end(self, call_id, outputs, exception=None) -> None:
        text = self._parsing.pop(call_id, None)
        if exception is not None and text is not None:
            forget(text)


_CALLBACK = ForgetUnparsed()


def watch_parses() -> None:
    """Within a model call made by a DSPy adapter, have that call's context remove replies whose parse fails."""
    import dspy
    from dspy.clients._deprecation import _adapter_call
    from dspy.dsp.utils.settings import thread_local_overrides
    from dspy.dsp.utils.utils import dotdict

    if _adapter_call.get() is None:  # not an adapter's call: nothing will parse the reply
        return
    callbacks = list(dspy.settings.get("callbacks") or [])
    if not any(isinstance(c, ForgetUnparsed) for c in callbacks):
        # As dspy.context does, but without a reset: the enclosing context (Predict's) ends it.
        thread_local_overrides.set(dotdict({**thread_local_overrides.get(), "callbacks": [*callbacks, _CALLBACK]}))
