"""Notebooks 30 (Table 7) and 31 (Table 8) before they run: every model call they make at given
sizes, counted by role, and their cold time projected on the embedded Qwen2.5-Coder-1.5B
(design/gepa_tables.md, "Default sizes and their cost").

``table7_gepa`` / ``table8_convergence`` run for real with one counting scripted model standing in for
every role (task program, PAPILLON's external model and judges, GEPA's reflection model, GEPA+'s
drafters, judge and merger), with the notebooks' max_tokens: a call is counted once per distinct
request, as the completion cache computes it. Replies are as long as assumed per role (:class:`Script`),
so the prompts that quote them are as long as real ones; prompts are counted with the Qwen tokenizer
(vocab only, no weights loaded), whole (llama.cpp's prefix reuse would only shorten them). GEPA's path
depends on scores, so each size runs under two scripts that bound it: "never" (no edit ever helps: a
proposal every iteration, none accepted) and "improves" (an edited instruction answers correctly:
accepted, re-validated, then perfect minibatches skip reflection); the projection takes the larger.

Tokens become seconds at a :class:`ProjectionSpeeds`, which names where its numbers come from:
:func:`measured_projection_speeds` reads them from a speed log when a run has written one;
:data:`GEPA_DESIGN_SPEEDS` are the ones the design note's rule was applied at. ``speed/project_gepa_tables.py`` prints the
tables.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import json
import tempfile
import threading
import warnings
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import dspy

from roma_lab.bench import load_aime2025, load_hotpotqa
from roma_lab.lm import (DEFAULT_VARIANT, MODELS, AsyncEngine, ScriptedEngine, model_file, read_request, read_speeds,
                         request_key, request_messages)
from roma_lab.papers.roma._gepa_tables import table7_gepa, table8_convergence
from roma_lab.results import default_repo_root
from roma_lab.stats import StatsSettings

__all__ = ["GEPA_DESIGN_SPEEDS", "GepaProjection", "ProjectionSpeeds", "PromptTokenizer", "gepa_notebook_parameters",
           "measured_projection_speeds", "project_gepa_tables"]

#: The notebooks projected, by number, relative to the repository root.
NOTEBOOKS = {"30": "notebooks/30_compare_gepa_table7.ipynb", "31": "notebooks/31_plot_convergence_table8.ipynb"}
REFLECTION_CAP = 1024  # resolve_lm's max_tokens for the reflection models (MAX_TOKENS caps task and judge only)
# Reply lengths assumed per role, fixed before any run (Script writes them): every free-text role capped
# by MAX_TOKENS generates to its cap (AIME's chain of thought always does; PAPILLON's redactor, external
# model, responder and judges); HotpotQA's answer span and GEPA+'s judge score are short; an instruction
# from a reflection model or the merger is REFLECTION_TOKENS long (its cap is REFLECTION_CAP).
REFLECTION_TOKENS = 300
FILLER = "blue"  # a word no seed instruction contains
MARK = "ANSWER-KEY NO-PII"  # what the "improves" script's reflection adds and its task model obeys


@dataclass(frozen=True, slots=True)
class ProjectionSpeeds:
    """What a projection prices tokens at: the embedded model's prompt and generation speeds
    (tokens/s), its load time per notebook (s), and where these numbers come from."""

    prompt_tps: float
    generation_tps: float
    load_s: float
    source: str

    def __post_init__(self):
        if not all(v > 0 for v in (self.prompt_tps, self.generation_tps)) or not self.load_s >= 0:
            raise ValueError(f"speeds must be positive and the load time >= 0, got {self}")


#: The speeds design/gepa_tables.md's rule was applied at, fixed before counting.
GEPA_DESIGN_SPEEDS = ProjectionSpeeds(
    prompt_tps=50.0, generation_tps=10.0, load_s=20.0,
    source="design/gepa_tables.md's assumptions: prompt 50 / generation 10 tok/s, below the 57.6 / 10.4 tok/s "
           "speed/bench_lm.py measured for Qwen 1.5B on 2 threads (design/local_model.md, 2026-11-30); "
           "a 20 s model load per notebook, assumed (no log records a load time)")


def measured_projection_speeds(speed_log: str | Path, *,
                               load_s: float = GEPA_DESIGN_SPEEDS.load_s) -> ProjectionSpeeds | None:
    """The embedded default model's prompt and generation speeds over every record of it in a speed
    log (``results/lm_speed.jsonl``, written by ``python -m roma_lab.experiments run``): llama.cpp's own
    token counters over their seconds. None when the log holds no such record. The log records no
    load time: ``load_s`` is stated, and the source says so."""
    records, _ = read_speeds(speed_log)
    ours = [r for r in records if r.model == MODELS[DEFAULT_VARIANT].filename]
    prompt_s, generation_s = sum(r.prompt_seconds for r in ours), sum(r.generation_seconds for r in ours)
    if not ours or prompt_s <= 0 or generation_s <= 0:
        return None
    return ProjectionSpeeds(
        prompt_tps=sum(r.prompt_tokens for r in ours) / prompt_s,
        generation_tps=sum(r.generated_tokens for r in ours) / generation_s, load_s=load_s,
        source=f"measured: {len(ours)} load(s) of {MODELS[DEFAULT_VARIANT].filename} in {speed_log} "
               f"({min(r.loaded_at for r in ours):%Y-%m-%d} to {max(r.closed_at for r in ours):%Y-%m-%d}); "
               f"model load {load_s:g} s, stated (the log records none)")


def role(request) -> str:
    """The role a scripted request plays in the GEPA tables, by its output fields."""
    outputs = request.outputs
    if "new_instruction" in outputs:
        return "reflection"
    if "merged_instruction" in outputs:
        return "merge"
    if outputs == ("score",):
        return "gepa+_judge"
    if "judgment" in outputs:
        return "papillon_quality_judge"
    if "num_pii_leaked" in outputs:
        return "papillon_leakage_judge"
    if "llm_request" in outputs:
        return "papillon_redact"
    if outputs == ("response",):
        return "papillon_external" if "request" in request.inputs else "papillon_respond"
    if "reasoning" in outputs and "answer" in outputs:
        return "aime_solve"
    if "answer" in outputs:
        return "hotpotqa_answer"
    raise ValueError(f"no role for outputs {outputs}")


class PromptTokenizer:
    """The embedded model's tokenizer only (vocab_only: no weights in memory)."""

    def __init__(self):
        from llama_cpp import Llama

        self.llama = Llama(model_path=str(model_file(MODELS[DEFAULT_VARIANT])), vocab_only=True, verbose=False)

    def count(self, text: str) -> int:
        return len(self.llama.tokenize(text.encode(), add_bos=False, special=True))

    def chat(self, messages: list[dict[str, str]]) -> int:
        """Tokens of the prompt llama.cpp evaluates (Qwen2.5's ChatML template)."""
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return self.count(text + "<|im_start|>assistant\n")


@dataclass(frozen=True, slots=True)
class Call:
    role: str
    key: str
    prompt_tokens: int
    output_tokens: int


class CountingEngine(ScriptedEngine):
    """One scripted engine for every role: logs each request's role, cache key and token counts."""

    def __init__(self, respond, tokenizer: PromptTokenizer):
        super().__init__(respond, usage=lambda request, text: (0, tokenizer.count(text)))
        self.tokenizer = tokenizer
        self.calls: list[Call] = []
        self._log_lock = threading.Lock()

    def complete(self, request):
        response = super().complete(request)
        call = Call(role(read_request(request)), request_key("local", request),
                    self.tokenizer.chat(request_messages(request)),
                    min(response.usage.output_tokens, request.config.max_tokens))
        with self._log_lock:
            self.calls.append(call)
        return response


class Script:
    """Replies of the assumed lengths; ``improves`` decides whether an edited instruction helps."""

    def __init__(self, improves: bool, max_tokens: int, reflection_tokens: int):
        self.improves, self.cap, self.reflection_tokens = improves, max_tokens, reflection_tokens
        self._drafts, self._lock = itertools.count(), threading.Lock()
        self.key = {it.question.strip(): str(it.answer) for it in [*load_aime2025(), *load_hotpotqa()]}

    def __call__(self, request) -> dict[str, object]:
        inputs, system = request.inputs, request.system
        # A real model's reply differs whenever its request does, so the calls that quote it (PAPILLON's
        # external model, responder and judges) are computed again: the reply starts with the request's hash.
        tag = hashlib.sha256("\n".join((system, *request.messages)).encode()).hexdigest()[:8]

        def filler(n_words: int) -> str:
            return " ".join([tag, *[FILLER] * max(n_words - 4, 0)])  # one Qwen token per filler word
        helped = self.improves and MARK in system
        kind = role(request)
        body = self.cap - 24  # the rest of a capped reply: field markers and a short final field
        if kind == "aime_solve":
            answer = self.key[inputs["problem"].strip()] if helped else "0"
            return {"reasoning": filler(body), "answer": f"\\boxed{{{answer}}}"}
        if kind == "hotpotqa_answer":
            return {"answer": self.key[inputs["question"].strip()] if helped else "unknown"}
        if kind == "papillon_redact":
            text = f"{tag}: " + ("Please help with a generic task." if helped else inputs["user_query"].strip())
            return {"reasoning": filler(body - len(text.split()) * 2), "llm_request": text}
        if kind in ("papillon_respond", "papillon_external"):
            return {"response": filler(body)}
        if kind == "papillon_quality_judge":
            return {"reasoning": filler(body), "judgment": helped}
        if kind == "papillon_leakage_judge":
            pii, prompt = json.loads(inputs["pii"]), inputs["prompt"].lower()
            return {"reasoning": filler(body), "num_pii_leaked": sum(p.lower() in prompt for p in pii)}
        if kind == "gepa+_judge":
            return {"score": 0.5}
        current = inputs.get("current_instruction", "")
        # distinct drafts per proposer temperature, so GEPA+ judges, verifies and merges them all
        with self._lock:
            draft = next(self._drafts)
        head = f"{current.split(' ' + FILLER)[0]} {MARK if self.improves else 'Check the feedback.'} (draft {draft})"
        room = self.reflection_tokens - len(head.split()) * 2
        name = "merged_instruction" if kind == "merge" else "new_instruction"
        return {name: f"{head} {filler(room)}"}


def gepa_notebook_parameters(notebook: str, root: str | Path | None = None) -> dict[str, object]:
    """The literals of notebook ``notebook``'s (``"30"`` or ``"31"``) ``parameters`` cell: its
    defaults. ``root``: the repository (default: the checkout roma_lab is installed from)."""
    path = Path(root or default_repo_root()) / NOTEBOOKS[notebook]
    cells = json.loads(path.read_text())["cells"]
    source = next("".join(c["source"]) for c in cells if "parameters" in c.get("metadata", {}).get("tags", []))
    return {t.id: ast.literal_eval(node.value) for node in ast.parse(source).body
            if isinstance(node, ast.Assign) for t in node.targets}


def count(notebook: str, params: Mapping[str, object], *, improves: bool, tokenizer: PromptTokenizer,
          reflection_tokens: int) -> tuple[list[Call], dict[str, object]]:
    """The calls of one run, and its metric runs by phase (from the run's own tables)."""
    cap = params["MAX_TOKENS"]
    engine = CountingEngine(Script(improves, cap, reflection_tokens), tokenizer)

    def lm(name, max_tokens):
        return dspy.LM(f"scripted/{name}", engine=engine, async_engine=AsyncEngine(engine), cache=False,
                       max_tokens=max_tokens)

    task, judge = lm("task", cap), lm("judge", cap)
    reflect = [lm(f"reflect{i}", REFLECTION_CAP) for i, _ in enumerate(params["REFLECTION_LMS"])]
    search = {"lm": task, "reflection_lms": reflect, "reflection_temperatures": params["REFLECTION_TEMPERATURES"],
              "judge_lm": judge, "max_tokens": cap, "n_train": params["N_TRAIN"], "n_val": params["N_VAL"],
              "repeats": params["REPEATS"], "max_metric_calls": params["MAX_METRIC_CALLS"], "k": params["K"],
              "n": params["N"], "seed": params["SEED"]}
    with tempfile.TemporaryDirectory() as out, warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if notebook == "30":
            tables = table7_gepa(out, benchmarks=params["BENCHMARKS"], n_test=params["N_TEST"],
                                 stats=StatsSettings(n_resamples=50, seed=params["SEED"]),
                                 **search)
        else:
            tables = table8_convergence(out, benchmark=params["BENCHMARK"], tolerance=params["TOLERANCE"],
                                        **search)
    runs = tables[f"table{7 if notebook == '30' else 8}_runs"].set_index("condition")
    phases = {f"{m} search": int(runs.loc[m, "gepa_metric_calls"].sum()) for m in ("gepa", "gepa+")}
    phases["gepa+ verifier"] = int(runs["verifier_metric_calls"].sum())
    phases["rounds (gepa, gepa+)"] = tuple(int(runs.loc[m, "proposal_rounds"].sum()) for m in ("gepa", "gepa+"))
    if notebook == "30":
        phases["test items scored"] = len(tables["table7_items"])
    return engine.calls, phases


@dataclass(frozen=True, slots=True)
class RoleTally:
    """One role's calls: made, computed (distinct requests: the cache serves the rest), and the
    computed calls' prompt and output tokens."""

    calls: int = 0
    computed: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0

    def seconds(self, speeds: ProjectionSpeeds) -> float:
        return self.prompt_tokens / speeds.prompt_tps + self.output_tokens / speeds.generation_tps


@dataclass(frozen=True, slots=True)
class ScriptTally:
    """One run under one script: its calls by role and its metric runs by phase."""

    roles: Mapping[str, RoleTally]
    metric_runs: Mapping[str, object]

    def seconds(self, speeds: ProjectionSpeeds) -> float:
        return sum(r.seconds(speeds) for r in self.roles.values())

    def role(self, name: str) -> RoleTally:
        """The tally of role ``name`` (zeros: this script made no such call)."""
        return self.roles.get(name, RoleTally())


def tally(calls: list[Call]) -> dict[str, RoleTally]:
    """Per role, each distinct request computed once."""
    first: dict[str, Call] = {}  # the first call of each request: the one the cache computes
    for c in calls:
        first.setdefault(c.key, c)
    rows = {}
    for name, made in Counter(c.role for c in calls).items():
        computed = [c for c in first.values() if c.role == name]
        rows[name] = RoleTally(made, len(computed), sum(c.prompt_tokens for c in computed),
                               sum(c.output_tokens for c in computed))
    return rows


@dataclass(frozen=True, slots=True)
class GepaProjection:
    """A notebook's projected cold ``seconds`` at ``speeds`` (the model load, then per benchmark the
    larger script), and its ``tallies``: per benchmark, per script ("never", "improves"), with the
    reflection and merge replies ``reflection_tokens`` long."""

    seconds: float
    tallies: Mapping[str, Mapping[str, ScriptTally]]
    speeds: ProjectionSpeeds
    reflection_tokens: int


def project_gepa_tables(notebook: str, params: Mapping[str, object], tokenizer: PromptTokenizer, *,
                        speeds: ProjectionSpeeds, reflection_tokens: int = REFLECTION_TOKENS) -> GepaProjection:
    """The projection of notebook ``notebook`` (``"30"`` or ``"31"``) run with ``params`` (its whole
    parameters cell: :func:`gepa_notebook_parameters` with sizes on top). Table 7's benchmarks share no
    request, so each is counted alone; each takes its larger script."""
    parts = [(b, {**params, "BENCHMARKS": [b]}) for b in params["BENCHMARKS"]] if notebook == "30" else [
        (params["BENCHMARK"], params)]
    seconds, tallies = speeds.load_s, {}
    for benchmark, part in parts:
        tallies[benchmark] = {}
        for improves in (False, True):
            calls, phases = count(notebook, part, improves=improves, tokenizer=tokenizer,
                                  reflection_tokens=reflection_tokens)
            tallies[benchmark]["improves" if improves else "never"] = ScriptTally(tally(calls), phases)
        seconds += max(script.seconds(speeds) for script in tallies[benchmark].values())
    return GepaProjection(seconds, tallies, speeds, reflection_tokens)
