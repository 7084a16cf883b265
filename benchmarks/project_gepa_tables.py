"""Count every model call notebooks 30 (Table 7) and 31 (Table 8) make at given sizes, by role, and
project their cold time on the embedded Qwen2.5-Coder-1.5B (design/gepa_tables.md, "Default sizes
and their cost").

``table7_gepa`` / ``table8_convergence`` run for real with one counting scripted model standing in for every
role (task program, PAPILLON's external model and judges, GEPA's reflection model, GEPA+'s drafters,
judge and merger), with the notebooks' max_tokens: a call is counted once per distinct request, as
the completion cache computes it. Replies are as long as assumed per role (below), so the prompts
that quote them are as long as real ones; prompts are counted with the Qwen tokenizer (vocab only,
no weights loaded), whole (llama.cpp's prefix reuse would only shorten them). GEPA's path depends on
scores, so each size runs under two scripts that bound it: "never" (no edit ever helps: a proposal
every iteration, none accepted) and "improves" (an edited instruction answers correctly: accepted,
re-validated, then perfect minibatches skip reflection); the projection takes the larger.

    nice -n 19 .venv/bin/python benchmarks/project_gepa_tables.py            # both notebooks' defaults
    nice -n 19 .venv/bin/python benchmarks/project_gepa_tables.py --sizes "30:N_TEST=3;REPEATS=1"
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import itertools
import json
import logging
import tempfile
import threading
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import dspy

from roma_lab.bench import load_aime2025, load_hotpotqa
from roma_lab.lm import DEFAULT_VARIANT, MODELS, AsyncEngine, ScriptedEngine, model_file, request_key
from roma_lab.lm._engine import request_messages
from roma_lab.lm._scripted import _read
from roma_lab.papers.roma import table7_gepa, table8_convergence
from roma_lab.stats import StatsSettings

# Speeds on this machine, 2 threads through roma_lab.lm (design/local_model.md: 57.6 / 10.4 tok/s by
# benchmarks/bench_lm.py; the README's OAgents runs logged 42-55 / 7-10), and the model load per process.
PROMPT_TPS, GENERATION_TPS, LOAD_S = 50.0, 10.0, 20.0
REFLECTION_CAP = 1024  # resolve_lm's max_tokens for the reflection models (MAX_TOKENS caps task and judge only)
# Reply lengths assumed per role, fixed before any run (Script writes them): every free-text role capped
# by MAX_TOKENS generates to its cap (AIME's chain of thought always does; PAPILLON's redactor, external
# model, responder and judges); HotpotQA's answer span and GEPA+'s judge score are short; an instruction
# from a reflection model or the merger is REFLECTION_TOKENS long (its cap is REFLECTION_CAP).
REFLECTION_TOKENS = 300
_ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = {"30": _ROOT / "notebooks/30_compare_gepa_table7.ipynb",
             "31": _ROOT / "notebooks/31_plot_convergence_table8.ipynb"}
FILLER = "blue"  # a word no seed instruction contains
MARK = "ANSWER-KEY NO-PII"  # what the "improves" script's reflection adds and its task model obeys


def role(request) -> str:
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


class Tokenizer:
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

    def __init__(self, respond, tokenizer: Tokenizer):
        super().__init__(respond, usage=lambda request, text: (0, tokenizer.count(text)))
        self.tokenizer = tokenizer
        self.calls: list[Call] = []
        self._log_lock = threading.Lock()

    def complete(self, request):
        response = super().complete(request)
        call = Call(role(_read(request)), request_key("local", request), self.tokenizer.chat(request_messages(request)),
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
        inputs, outputs, system = request.inputs, request.outputs, request.system
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


def parameters(notebook: str) -> dict[str, object]:
    """The literals of a notebook's ``parameters`` cell (its defaults)."""
    cells = json.loads(NOTEBOOKS[notebook].read_text())["cells"]
    source = next("".join(c["source"]) for c in cells if "parameters" in c.get("metadata", {}).get("tags", []))
    return {t.id: ast.literal_eval(node.value) for node in ast.parse(source).body
            if isinstance(node, ast.Assign) for t in node.targets}


def count(notebook: str, params: dict[str, object], *, improves: bool, tokenizer: Tokenizer,
          reflection_tokens: int) -> tuple[list[Call], dict[str, int]]:
    """The calls of one run, and its metric runs by phase (from the run's own tables)."""
    cap = params["MAX_TOKENS"]
    engine = CountingEngine(Script(improves, cap, reflection_tokens), tokenizer)

    def lm(name, max_tokens):
        return dspy.LM(f"scripted/{name}", engine=engine, async_engine=AsyncEngine(engine), cache=False,
                       max_tokens=max_tokens)

    task, judge = lm("task", cap), lm("judge", cap)
    reflect = [lm(f"reflect{i}", REFLECTION_CAP) for i, _ in enumerate(params["REFLECTION_LMS"])]
    search = dict(lm=task, reflection_lms=reflect, reflection_temperatures=params["REFLECTION_TEMPERATURES"],
                  judge_lm=judge, max_tokens=cap, n_train=params["N_TRAIN"], n_val=params["N_VAL"],
                  repeats=params["REPEATS"], max_metric_calls=params["MAX_METRIC_CALLS"], k=params["K"],
                  n=params["N"], seed=params["SEED"])
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


@dataclass(frozen=True)
class RoleTally:
    """One role's calls: made, computed (distinct requests: the cache serves the rest), and the
    computed calls' prompt and output tokens."""

    calls: int = 0
    computed: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0

    @property
    def seconds(self) -> float:
        return self.prompt_tokens / PROMPT_TPS + self.output_tokens / GENERATION_TPS


@dataclass(frozen=True)
class ScriptTally:
    """One run under one script: its calls by role and its metric runs by phase."""

    roles: dict[str, RoleTally]
    metric_runs: dict[str, object]

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.roles.values())


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


def project(nb: str, params: dict[str, object], tokenizer: Tokenizer, *,
            reflection_tokens: int = REFLECTION_TOKENS) -> tuple[float, dict[str, dict[str, ScriptTally]]]:
    """(projected cold seconds, {benchmark: {script: tally}}) of notebook ``nb`` run with ``params``.
    Table 7's benchmarks share no request, so each is counted alone; each takes its larger script."""
    parts = [(b, params | {"BENCHMARKS": [b]}) for b in params["BENCHMARKS"]] if nb == "30" else [
        (params["BENCHMARK"], params)]
    seconds, tallies = LOAD_S, {}
    for benchmark, part in parts:
        tallies[benchmark] = {}
        for improves in (False, True):
            calls, phases = count(nb, part, improves=improves, tokenizer=tokenizer, reflection_tokens=reflection_tokens)
            tallies[benchmark]["improves" if improves else "never"] = ScriptTally(tally(calls), phases)
        seconds += max(script.seconds for script in tallies[benchmark].values())
    return seconds, tallies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", action="append", default=[],
                        help="NB:NAME=VALUE;... overrides of a notebook's parameters (NB is 30 or 31)")
    parser.add_argument("--reflection-tokens", type=int, default=REFLECTION_TOKENS)
    args = parser.parse_args()
    overrides: dict[str, dict[str, object]] = {nb: {} for nb in NOTEBOOKS}
    for spec in args.sizes:
        nb, _, pairs = spec.partition(":")
        for pair in pairs.split(";"):
            name, _, value = pair.partition("=")
            overrides[nb][name] = ast.literal_eval(value)
    logging.getLogger("dspy").setLevel(logging.WARNING)
    tokenizer = Tokenizer()
    for nb in (n for n in NOTEBOOKS if not args.sizes or overrides[n]):
        params = parameters(nb) | overrides[nb]
        shown = {k: v for k, v in params.items() if k in ("BENCHMARKS", "BENCHMARK", "N_TRAIN", "N_VAL", "N_TEST",
                                                          "REPEATS", "MAX_METRIC_CALLS", "K", "N", "MAX_TOKENS")}
        print(f"\n== notebook {nb}: {shown}; reflection/merge replies {args.reflection_tokens} tokens")
        seconds, tallies = project(nb, params, tokenizer, reflection_tokens=args.reflection_tokens)
        print("benchmark  role                     calls made (never/improves)  computed  prompt tok  output tok"
              "  seconds  (computed: distinct requests, the rest are cache hits; tokens and seconds of the "
              "larger script)")
        for benchmark, scripts in tallies.items():
            worst = max(scripts, key=lambda k: scripts[k].seconds)
            for script in scripts:
                print(f"{benchmark:10s} metric runs ({script}): {scripts[script].metric_runs}")
            never, improves, w = scripts["never"].roles, scripts["improves"].roles, scripts[worst].roles
            for name in sorted(set(never) | set(improves)):
                n, i, r = never.get(name, RoleTally()), improves.get(name, RoleTally()), w.get(name, RoleTally())
                print(f"{benchmark:10s} {name:24s} {n.calls:5d} / {i.calls:<5d}{n.computed:15d} / {i.computed:<5d} "
                      f"{r.prompt_tokens:8d} {r.output_tokens:10d} {r.seconds:8.0f}")
            print(f"{benchmark:10s} total ({worst} script): {scripts[worst].seconds:.0f} s")
        print(f"projected cold time (+ {LOAD_S:.0f} s model load): {seconds:.0f} s = {seconds / 60:.1f} min")


if __name__ == "__main__":
    main()
