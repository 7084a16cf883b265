"""Issue 45: paraphrases of the train split written by the embedded model, to train the router on.

The protocol (`PROTOCOL`: model, instruction, rewrites per prompt, temperature, seed, token cap) was
committed before anything was generated or scored (design/router_paraphrase.md). Each train prompt
is sent once, with the seed `PROTOCOL.seed + its position in the train split`; the reply's numbered
lines are the candidate rewrites, of which the first `count` are read. A rewrite is kept when it
still names every value the prompt was filled with (a number, id, name or quoted text the model
dropped or changed would make it another task) and is new (not the prompt itself, nor an earlier
rewrite of it); every dropped rewrite is written with its reason. The rewrite keeps its source
task's labels. Nothing here reads dev, test, challenge or any hand-written prompt.

`python -m roma_lab.papers.routing paraphrase --out DIR` writes `replies.jsonl` (one line per train
prompt, appended as it goes, so an interrupted run resumes where it stopped), then `paraphrases.csv`,
`dropped.csv` and `generation.json` (the command, the protocol, the model file's SHA-256, the counts
and the CSV's own SHA-256). `read_paraphrases` refuses a CSV whose hash is not the pinned one.

`paraphrase_table` fits every router variant of `VARIANTS` (train, or train plus the paraphrases;
calibration and tau on the suite's dev split as always), chooses one on the hand-written paraphrase
dev set by the rule of design/router_paraphrase.md (`choose_variant`), and scores the chosen router
and today's once on the locked test split, the challenge split and the natural prompts.
"""

from __future__ import annotations

import hashlib
import json
import re
import string
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ...results import compare, summarize
from ...router import (ENCODERS, FAMILIES, Learned, OperationModel, SemanticStudy, Task, evaluate, labels_matrix,
                       natural_prompts, route_natural, summarize_routes)
from ...stats import DEFAULT_STATS, StatsSettings

__all__ = ["PARAPHRASE_DEV_SHA256", "PARAPHRASES_SHA256", "PROTOCOL", "VARIANTS", "ParaphraseProtocol",
           "RouterVariant", "choose_variant", "fit_variant", "generate_paraphrases", "keep_rewrites",
           "paraphrase_dev_prompts", "paraphrase_order", "paraphrase_table", "parse_rewrites", "read_paraphrases"]

_DATA = Path(__file__).resolve().parents[3] / "data"
PARAPHRASES = _DATA / "router_paraphrases" / "paraphrases.csv"
#: The generated paraphrases as shipped (data/router_paraphrases/generation.json records the same hash).
PARAPHRASES_SHA256 = "3d11d5d094fdd09597a76397811a3a80861b12591c46c94f7880f7ee9817f831"
PARAPHRASE_DEV = _DATA / "router_paraphrase_dev" / "prompts.csv"
#: The hand-written paraphrase dev set, committed before any augmented router was scored.
PARAPHRASE_DEV_SHA256 = "6dc151b0c35b24c14df53d46e7b500d7a38be7c3e7924a9f462c9d2d9cb4c2af"


@dataclass(frozen=True, slots=True)
class ParaphraseProtocol:
    model: str                 # a roma_lab.lm model name
    instruction: str           # formatted with {count} and {prompt}
    count: int                 # rewrites read per train prompt
    temperature: float
    seed: int                  # seed of the train prompt at position i: seed + i
    max_tokens: int


#: Fixed before the first generation and before any augmented router was scored (issue 45).
PROTOCOL = ParaphraseProtocol(
    model="local",
    instruction=("Rewrite the request below in {count} different ways, the way different people would type it to "
                 "an assistant. Vary the wording: other verbs and nouns, questions and commands, casual and formal, "
                 "short ones and longer ones that add a sentence of context. Keep every name, number, code and "
                 "quoted text exactly, and keep what is being asked. Reply with a numbered list only, one rewrite "
                 "per line.\n\nRequest: {prompt}"),
    count=2,
    temperature=0.8,
    seed=45,
    max_tokens=120,
)

_NUMBERED = re.compile(r"^\s*(\d+)[.)]\s*(.+?)\s*$")


def paraphrase_order(train: Sequence[Task]) -> list[tuple[int, Task]]:
    """(position in the train split, task), families taken in turn (first task of each family, then the
    second...): a run stopped early still covers every family alike."""
    by_family: dict[str, list[tuple[int, Task]]] = {}
    for i, t in enumerate(train):
        by_family.setdefault(t.family, []).append((i, t))
    rounds = max(map(len, by_family.values()))
    return [group[r] for r in range(rounds) for group in by_family.values() if r < len(group)]


def parse_rewrites(reply: str, count: int) -> list[str]:
    """The first `count` numbered lines of a reply, numbers and wrapping quotes stripped."""
    rewrites = []
    for line in reply.splitlines():
        m = _NUMBERED.match(line)
        if m:
            text = m.group(2)
            if len(text) > 1 and text[0] == text[-1] and text[0] in "\"'":
                text = text[1:-1].strip()
            rewrites.append(text)
    return rewrites[:count]


def _slot_atoms(task: Task) -> list[str]:
    """The values the train template was filled with, lists split into their items."""
    names = {f for _, f, _, _ in string.Formatter().parse(FAMILIES[task.family].templates["train"]) if f}
    atoms = []
    for name in sorted(names):
        atoms += [a.strip() for a in re.split(r";\s*|,\s+", task.slots[name]) if a.strip()]
    return atoms


def _words(text: str) -> str:
    return " ".join(text.lower().split())


def keep_rewrites(task: Task, rewrites: Sequence[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """(kept rewrites, [(dropped rewrite, reason)]) under the module's keep rule."""
    kept: list[str] = []
    dropped: list[tuple[str, str]] = []
    seen = {_words(task.prompt)}
    for text in rewrites:
        missing = [a for a in _slot_atoms(task) if a.lower() not in text.lower()]
        if missing:
            dropped.append((text, "lost value(s): " + ", ".join(missing)))
        elif _words(text) in seen:
            dropped.append((text, "repeats the prompt or an earlier rewrite"))
        else:
            kept.append(text)
            seen.add(_words(text))
    return kept, dropped


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _done(replies: Path) -> dict[str, dict]:
    """Replies already written (a torn last line from an interrupted run is ignored and redone)."""
    done = {}
    if replies.is_file():
        for line in replies.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            done[record["task_id"]] = record
    return done


def generate_paraphrases(train: Sequence[Task], out_dir: str | Path, *, protocol: ParaphraseProtocol = PROTOCOL,
                         limit: int | None = None, command: str = "", lm=None, log=print) -> dict:
    """Ask the model for rewrites of the first `limit` train prompts in `paraphrase_order` (all by
    default), resuming from `out_dir/replies.jsonl`; write the kept and dropped rewrites and
    `generation.json`, and return that record."""
    from ...lm import DEFAULT_VARIANT, MODELS, resolve_lm

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    replies = out / "replies.jsonl"
    done = _done(replies)
    order = paraphrase_order(train)[:limit]
    lm = lm or resolve_lm(protocol.model)
    stop = [f"\n{protocol.count + 1}.", f"\n{protocol.count + 1})"]   # the rewrites past `count` are never read
    with replies.open("a", encoding="utf-8") as f:
        for n, (position, task) in enumerate(order, 1):
            if task.task_id in done:
                continue
            start = time.perf_counter()
            prompt = protocol.instruction.format(count=protocol.count, prompt=task.prompt)
            reply = lm(prompt, temperature=protocol.temperature, seed=protocol.seed + position,
                       max_tokens=protocol.max_tokens, stop=stop)[0]
            record = {"task_id": task.task_id, "position": position, "seed": protocol.seed + position,
                      "reply": reply if isinstance(reply, str) else reply["text"],
                      "seconds": round(time.perf_counter() - start, 2)}
            f.write(json.dumps(record) + "\n")
            f.flush()
            done[task.task_id] = record
            log(f"{n}/{len(order)} {task.task_id} {record['seconds']} s")
    by_id = {t.task_id: t for t in train}
    kept_rows, dropped_rows = [], []
    for _, task in order:
        kept, dropped = keep_rewrites(task, parse_rewrites(done[task.task_id]["reply"], protocol.count))
        kept_rows += [{"task_id": task.task_id, "family": task.family, "rewrite": k, "prompt": text}
                      for k, text in enumerate(kept)]
        dropped_rows += [{"task_id": task.task_id, "family": task.family, "prompt": text, "reason": why}
                         for text, why in dropped]
    csv = out / "paraphrases.csv"
    pd.DataFrame(kept_rows, columns=["task_id", "family", "rewrite", "prompt"]).to_csv(csv, index=False)
    pd.DataFrame(dropped_rows, columns=["task_id", "family", "prompt", "reason"]).to_csv(out / "dropped.csv", index=False)
    spec = MODELS[DEFAULT_VARIANT] if protocol.model == "local" else None
    record = {"command": command, "protocol": asdict(protocol),
              "model_file": spec.filename if spec else protocol.model, "model_sha256": spec.sha256 if spec else None,
              "train_prompts": len(order), "of_train_prompts": len(by_id), "kept": len(kept_rows),
              "dropped": len(dropped_rows), "generation_seconds": round(sum(done[t.task_id]["seconds"]
                                                                            for _, t in order), 1),
              "paraphrases_csv_sha256": _sha256(csv)}
    (out / "generation.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


# --------------------------------------------------------------------------- reading
def read_paraphrases(train: Sequence[Task], path: str | Path | None = None, *,
                     sha256: str | None = None) -> tuple[list[str], np.ndarray]:
    """(texts, labels) of the shipped paraphrases, each with its source train task's labels; a file
    whose SHA-256 is not the pinned one (`sha256`, default `PARAPHRASES_SHA256`) is refused, and so is
    a row whose task is not in `train` or whose family is not that task's."""
    path = Path(path or PARAPHRASES)
    if not path.is_file():
        raise FileNotFoundError(f"paraphrases not found at {path}; generate them with "
                                "python -m roma_lab.papers.routing paraphrase --out data/router_paraphrases")
    digest, expected = _sha256(path), sha256 or PARAPHRASES_SHA256
    if digest != expected:
        raise ValueError(f"{path} has SHA-256 {digest}, not the pinned {expected}")
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    by_id = {t.task_id: t for t in train}
    wrong = [r.task_id for r in table.itertuples() if r.task_id not in by_id or by_id[r.task_id].family != r.family]
    if wrong:
        raise ValueError(f"{path}: {len(wrong)} row(s) name no train task of their family, e.g. {wrong[:3]}")
    return list(table["prompt"]), labels_matrix([by_id[i] for i in table["task_id"]])


def paraphrase_dev_prompts(path: str | Path | None = None) -> pd.DataFrame:
    """The hand-written paraphrase dev set (pinned), with each family's minimum route in `labels`."""
    return natural_prompts(path or PARAPHRASE_DEV, sha256=PARAPHRASE_DEV_SHA256)


# --------------------------------------------------------------------------- variants
@dataclass(frozen=True, slots=True)
class RouterVariant:
    name: str
    paraphrases: bool                  # train on train + the paraphrases (else train only)
    chars: bool = True                 # character 3-5-grams beside words and bigrams
    label_smoothing: float = 0.0
    encoder: str | None = None         # a MiniLM-style block beside the n-grams (issue 12's lexical+semantic)


#: The variants compared on the paraphrase dev set, in tie-break order (design/router_paraphrase.md).
VARIANTS: tuple[RouterVariant, ...] = (
    RouterVariant("lexical", paraphrases=False),
    RouterVariant("lexical+para", paraphrases=True),
    RouterVariant("words+para", paraphrases=True, chars=False),
    RouterVariant("lexical+para+ls0.1", paraphrases=True, label_smoothing=0.1),
    RouterVariant("lexical+para+ls0.2", paraphrases=True, label_smoothing=0.2),
    RouterVariant("minilm+para", paraphrases=True, encoder="minilm"),
)
#: The issue's speed budget: training at most 1 s; routing at most 0.05 ms per task, or, on a loaded
#: machine where today's router itself is slower than that, at most 1.5x today's router measured in
#: the same run (design/router_paraphrase.md, amendment made before any variant was scored).
MAX_TRAIN_SECONDS = 1.0
MAX_ROUTE_MS = 0.05
MAX_ROUTE_RATIO = 1.5


def fit_variant(study, variant: RouterVariant, paraphrases: tuple[list[str], np.ndarray], *,
                repeats: int = 3) -> tuple[OperationModel, float]:
    """The variant's router, calibrated and thresholded on the suite's dev split, and its training
    seconds (the best of `repeats` fits, as the speed benchmark times on a shared machine; an encoder
    variant: issue 12's one timed fit at the chosen scale). `lexical` is the study's own router."""
    train = study.split("train")
    texts, labels = [t.prompt for t in train], labels_matrix(train)
    if variant.paraphrases:
        texts, labels = texts + list(paraphrases[0]), np.vstack([labels, paraphrases[1]])
    if variant.encoder is not None:
        model, rows = SemanticStudy.fit_one(study, "lexical+semantic", variant.encoder, train=(texts, labels))
        return model, next(r["train_seconds"] for r in rows if r["selected"])
    from dataclasses import replace

    config = replace(study.training, chars=variant.chars, label_smoothing=variant.label_smoothing)
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        model = OperationModel.fit(texts, labels, config)
        seconds.append(time.perf_counter() - start)
    if config == study.training and not variant.paraphrases:
        return study.model, min(seconds)      # the same fit: today's router as the study holds it
    dev = study.split("dev")
    dev_texts, dev_labels = [t.prompt for t in dev], labels_matrix(dev)
    model, _ = model.calibrate(dev_texts, dev_labels).select_threshold(dev_texts, dev_labels)
    return model, min(seconds)


def _route_ms(models: dict[str, OperationModel], encoders: dict[str, str | None], texts: Sequence[str],
              repeats: int = 7) -> dict[str, float]:
    """Routing per task of each model as the project's speed benchmark measures it
    (speed/bench_router.py: a batch routed at once, the best of `repeats` runs), features computed
    from the text, an encoder variant paying its uncached encoding of the batch. The models take
    turns in every round, so a load that comes and goes on the shared machine hits them alike."""
    texts = list(texts)
    best = dict.fromkeys(models, float("inf"))
    for model in models.values():
        model.prepare(texts)
    for _ in range(repeats):
        for name, model in models.items():
            start = time.perf_counter()
            if encoders[name] is not None:
                ENCODERS[encoders[name]].encode(texts)
            model.routes(texts)
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: seconds * 1000 / len(texts) for name, seconds in best.items()}


def _model_label(variant: RouterVariant, n_paraphrases: int) -> str:
    """The tables' model column: what the router learned from (no language model runs at routing)."""
    features = "n-gram" if variant.chars else "word n-gram"
    if variant.encoder:
        features += f" + {variant.encoder}"
    data = f"our suite + {n_paraphrases} paraphrases by {PROTOCOL.model}" if variant.paraphrases else "our suite"
    smooth = f", label smoothing {variant.label_smoothing:g}" if variant.label_smoothing else ""
    return f"{features} router fitted on {data}{smooth} (no language model at routing)"


def choose_variant(selection: pd.DataFrame) -> str:
    """design/router_paraphrase.md's rule over the selection rows: among the eligible, the highest
    paraphrase-dev coverage, then exact route, then lower mean cost, then the earlier row."""
    eligible = selection[selection["eligible"]].reset_index(drop=True)
    if eligible.empty:
        raise ValueError("no variant meets the speed budget")
    ranked = eligible.assign(order=range(len(eligible))).sort_values(
        ["coverage", "exact_route", "cost", "order"], ascending=[False, False, True, True])
    return str(ranked["variant"].iloc[0])


def paraphrase_table(study, *, stats: StatsSettings = DEFAULT_STATS, variants: Sequence[RouterVariant] = VARIANTS,
                     paraphrases_path=None, paraphrases_sha256: str | None = None, dev_path=None,
                     natural_path=None, repeats: int = 1) -> dict[str, pd.DataFrame]:
    """Issue 45, one table set: every variant on the paraphrase dev set (`paraphrase_selection`, per
    prompt in `paraphrase_dev_tasks`), the chosen one beside today's router (`lexical`) on the locked
    test split and the challenge split (executed; `paraphrase_tasks`) and on the natural prompts
    (`paraphrase_natural_tasks`), summarised with CIs (`paraphrase_summary`) and paired against
    `lexical` (`paraphrase_paired`)."""
    paraphrases = read_paraphrases(study.split("train"), paraphrases_path, sha256=paraphrases_sha256)
    dev = paraphrase_dev_prompts(dev_path)
    label = {v.name: _model_label(v, len(paraphrases[0])) for v in variants}
    models: dict[str, OperationModel] = {}
    rows, dev_scores = [], []
    for v in variants:
        model, seconds = fit_variant(study, v, paraphrases)
        models[v.name] = model
        scores = route_natural({v.name: model}, dev).assign(subset="paraphrase_dev", model=label[v.name])
        dev_scores.append(scores)
        rows.append({"variant": v.name, "model": label[v.name], "paraphrases": v.paraphrases, "chars": v.chars,
                     "label_smoothing": v.label_smoothing, "encoder": v.encoder or "",
                     "n_train_texts": len(study.split("train")) + (len(paraphrases[0]) if v.paraphrases else 0),
                     "n_features": model.featurizer.n_features, "tau": model.tau,
                     "coverage": scores["coverage"].mean(), "exact_route": scores["exact_route"].mean(),
                     "cost": scores["cost"].mean(), "train_seconds": seconds})
    selection = pd.DataFrame(rows)
    route_ms = _route_ms(models, {v.name: v.encoder for v in variants}, dev["prompt"])
    selection["route_ms"] = selection["variant"].map(route_ms)
    today = selection.loc[selection["variant"] == "lexical", "route_ms"].iloc[0]
    selection["eligible"] = ((selection["train_seconds"] <= MAX_TRAIN_SECONDS)
                             & (selection["route_ms"] <= max(MAX_ROUTE_MS, MAX_ROUTE_RATIO * today)))
    chosen = choose_variant(selection)
    selection["selected"] = selection["variant"] == chosen
    dev_tasks = pd.concat(dev_scores, ignore_index=True)
    before_after = {"lexical": models["lexical"]} | {chosen: models[chosen]}
    policies = [Learned(m, name=name) for name, m in before_after.items()]
    tasks = evaluate(policies, study.split("test") + study.split("challenge"), repeats=repeats)
    natural = route_natural(before_after, natural_prompts(natural_path))
    for frame in (tasks, natural):
        frame["model"] = frame["condition"].map(label)
    shown = dev_tasks[dev_tasks["condition"].isin(list(before_after))]
    routed = ["coverage", "exact_route", "cost"]
    summary = pd.concat([summarize_routes(tasks, stats=stats),
                         summarize(shown, routed, ci=["coverage"], run=None, stats=stats),
                         summarize(natural, routed, ci=["coverage"], run=None, stats=stats)], ignore_index=True)
    paired = pd.DataFrame(columns=["condition", "metric", "value"])   # today's router chosen: nothing to pair
    if chosen != "lexical":
        paired = pd.concat([compare(tasks, chosen, "lexical", m, stats=stats) for m in ("success", "cost")]
                           + [compare(frame, chosen, "lexical", m, stats=stats)
                              for frame in (shown, natural) for m in ("coverage", "cost")], ignore_index=True)
    return {"paraphrase_selection": selection, "paraphrase_dev_tasks": dev_tasks, "paraphrase_tasks": tasks,
            "paraphrase_natural_tasks": natural, "paraphrase_summary": summary, "paraphrase_paired": paired}
