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
"""

from __future__ import annotations

import hashlib
import json
import re
import string
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd

from ...router import FAMILIES, Task

__all__ = ["PROTOCOL", "ParaphraseProtocol", "generate_paraphrases", "keep_rewrites", "paraphrase_order",
           "parse_rewrites"]


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
    import time

    from ...lm import MODELS, DEFAULT_VARIANT, resolve_lm

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
