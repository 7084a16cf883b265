"""Benchmark items and loaders for the copied data under data/benchmarks/."""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import MappingProxyType

import numpy as np

DATA_ENV = "ROMA_LAB_DATA"

# The GEPA / DSPy-tutorial split of PUPA_New (see graders/papillon/NOTES.md).
_PAPILLON_SPLITS = {"train": slice(0, 225), "dev": slice(225, 450), "test": slice(450, None)}
_LONGFORM_CHAPTERS = 8


class DataNotFoundError(FileNotFoundError):
    """A benchmark file is missing: the data root is wrong or the file was never supplied."""


@dataclass(frozen=True, slots=True)
class Item:
    """One benchmark question with its gold answer (``""`` where a benchmark has none)."""

    benchmark: str
    item_id: str
    question: str
    answer: str | int
    metadata: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Read-only view so a frozen Item cannot be changed through its metadata.
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))


@dataclass(frozen=True, slots=True)
class LongformSpec:
    """EQ-Bench long-form protocol: generation templates, judge prompts, criteria, weights."""

    planning_prompts: tuple[str, ...]  # prompt1..prompt5, fields {writing_prompt} {n_chapters}
    chapter_prompts: tuple[str, ...]  # one per chapter, already numbered
    chapter_judge_prompt: str
    final_judge_prompt: str
    chapter_criteria: tuple[str, ...]
    final_criteria: tuple[str, ...]
    negative_chapter_criteria: tuple[str, ...]
    negative_final_criteria: tuple[str, ...]
    criteria_weights: Mapping[str, float]  # lower-case criterion -> weight; default 1
    n_chapters: int = _LONGFORM_CHAPTERS


def data_root() -> Path:
    """The benchmark data folder: ``$ROMA_LAB_DATA`` if set, else the repository's data/benchmarks."""
    env = os.environ.get(DATA_ENV)
    root = Path(env) if env else Path(__file__).resolve().parents[2] / "data" / "benchmarks"
    if not root.is_dir():
        raise DataNotFoundError(
            f"benchmark data folder {root} does not exist; set {DATA_ENV} to the folder holding "
            "MANIFEST.tsv and the benchmark sub-folders"
        )
    return root


def data_path(relpath: str) -> Path:
    """Absolute path of a file under the data root, with a clear error when it is missing."""
    path = data_root() / relpath
    if not path.is_file():
        raise DataNotFoundError(f"benchmark file {relpath!r} not found under {data_root()}")
    return path


@cache
def _read_cached(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def read_data_text(relpath: str) -> str:
    """Text of a data file, read once per process (grader templates are reused per item)."""
    return _read_cached(data_path(relpath))


def _read_lines(relpath: str) -> tuple[str, ...]:
    return tuple(line.strip() for line in read_data_text(relpath).splitlines() if line.strip())


def _csv_rows(relpath: str) -> list[dict[str, str]]:
    with data_path(relpath).open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def load_seal0() -> list[Item]:
    """SEAL-0 (111 questions). This is the 2026 revision, not the one 2025 papers scored."""
    import pandas as pd

    df = pd.read_parquet(data_path("seal0/sealqa_seal0.parquet"))
    return [
        Item(
            benchmark="seal0",
            item_id=str(i),
            question=row.question,
            answer=row.answer,
            metadata={
                "revision": "2026 (vtllms/sealqa refreshed; the 2025 paper scored an older revision)",
                "topic": row.topic,
                "freshness": row.freshness,
                "effective_year": row.effective_year,
                "search_results": row.search_results,
                "question_types": tuple(row.question_types),
                "urls": tuple(row.urls),
            },
        )
        for i, row in enumerate(df.itertuples(index=False))
    ]


def load_frames() -> list[Item]:
    """FRAMES test set (824 multi-hop questions)."""
    return [
        Item(
            benchmark="frames",
            item_id=row["id"],
            question=row["Prompt"],
            answer=row["Answer"],
            metadata={"reasoning_types": row["reasoning_types"], "wiki_links": row["wiki_links"]},
        )
        for row in _csv_rows("frames/frames_test_set.csv")
    ]


def load_simpleqa(verified: bool = False) -> list[Item]:
    """SimpleQA (4,326, official CSV) or SimpleQA Verified (1,000; ids are SimpleQA row numbers)."""
    if verified:
        return [
            Item(
                benchmark="simpleqa_verified",
                item_id=row["original_index"],
                question=row["problem"],
                answer=row["answer"],
                metadata={k: row[k] for k in ("topic", "answer_type", "multi_step", "requires_reasoning")},
            )
            for row in _csv_rows("simpleqa/simpleqa_verified.csv")
        ]
    return [
        Item(
            benchmark="simpleqa",
            item_id=str(i),
            question=row["problem"],
            answer=row["answer"],
            metadata={"metadata": row["metadata"]},
        )
        for i, row in enumerate(_csv_rows("simpleqa/simple_qa_test_set.csv"))
    ]


def load_aime2025() -> list[Item]:
    """AIME 2025 I and II (30 problems), integer answers 0-999."""
    items = []
    for exam in ("I", "II"):
        folder = f"aime2025/aime_2025_{exam}"
        for row in _csv_rows(f"{folder}/answers.csv"):
            answer = int(row["answer"])
            if not 0 <= answer <= 999:
                raise ValueError(f"AIME {exam}/{row['id']}: answer {answer} outside 0-999")
            items.append(
                Item(
                    benchmark="aime2025",
                    item_id=f"2025_{exam}_{row['id']}",
                    question=read_data_text(f"{folder}/problems/{row['id']}.tex").strip(),
                    answer=answer,
                    metadata={"exam": f"AIME 2025 {exam}", "problem": int(row["id"])},
                )
            )
    return items


def load_hotpotqa() -> list[Item]:
    """HotpotQA dev (7,405), closed-book: questions and answers only, no paragraphs."""
    rows = json.loads(read_data_text("hotpotqa/hotpot_dev_v1_simplified.json"))
    return [
        Item(
            benchmark="hotpotqa",
            item_id=str(i),
            question=row["question"],
            answer=row["answer"],
            metadata={"type": row["type"], "setting": "closed-book"},
        )
        for i, row in enumerate(rows)
    ]


def load_papillon(split: str = "test") -> list[Item]:
    """PUPA_New in the GEPA/DSPy split: [:225] train, [225:450] dev, [450:] test (214)."""
    if split not in _PAPILLON_SPLITS:
        raise ValueError(f"split must be one of {sorted(_PAPILLON_SPLITS)}, got {split!r}")
    rows = list(enumerate(_csv_rows("papillon/PUPA_New.csv")))[_PAPILLON_SPLITS[split]]
    return [
        Item(
            benchmark="papillon",
            item_id=str(index),  # row in PUPA_New.csv; conversation hashes repeat across rows
            question=row["user_query"],
            answer=row["target_response"],
            metadata={
                "split": split,
                "conversation_hash": row["conversation_hash"],
                # Unique pieces, in first-seen order, as the PAPILLON judges count them.
                "pii_units": tuple(dict.fromkeys(p for p in row["pii_units"].split("||") if p)),
                "redacted_query": row["redacted_query"],
                "predicted_category": row["predicted_category"],
            },
        )
        for index, row in rows
    ]


def load_eqbench_longform() -> list[Item]:
    """The 12 EQ-Bench long-form writing prompts (no gold answer; see ``load_longform_spec``)."""
    prompts = json.loads(read_data_text("eqbench_longform/longform_creative_writing_prompts_minimalist.json"))
    return [
        Item(
            benchmark="eqbench_longform",
            item_id=key,
            question=entry["writing_prompt"],
            answer="",
            metadata={"category": entry["category"], "title": entry["title"]},
        )
        for key, entry in prompts.items()
    ]


def load_longform_spec() -> LongformSpec:
    """EQ-Bench long-form generation templates, judge prompts, criteria and weights."""
    folder = "eqbench_longform"
    n = _LONGFORM_CHAPTERS
    first = read_data_text(f"{folder}/prompt_chapter_first.txt")
    middle = read_data_text(f"{folder}/prompt_chapter_intermediate.txt")
    last = read_data_text(f"{folder}/prompt_chapter_last.txt")
    chapters = (first, *(middle.format(chapter_number=c) for c in range(2, n)), last.format(chapter_number=n))
    weights = json.loads(read_data_text(f"{folder}/criteria_weights.json"))
    return LongformSpec(
        planning_prompts=tuple(read_data_text(f"{folder}/prompt{i}.txt") for i in range(1, 6)),
        chapter_prompts=chapters,
        chapter_judge_prompt=read_data_text(f"{folder}/longform_creative_writing_judging_prompt_chapter.txt"),
        final_judge_prompt=read_data_text(f"{folder}/longform_creative_writing_judging_prompt_final.txt"),
        chapter_criteria=_read_lines(f"{folder}/longform_creative_writing_criteria_chapter.txt"),
        final_criteria=_read_lines(f"{folder}/longform_creative_writing_criteria_final.txt"),
        negative_chapter_criteria=_read_lines(f"{folder}/longform_negative_criteria_chapter.txt"),
        negative_final_criteria=_read_lines(f"{folder}/longform_negative_criteria_final.txt"),
        criteria_weights=MappingProxyType({k.lower(): float(v) for k, v in weights.items()}),
        n_chapters=n,
    )


def _xor_decrypt(ciphertext_b64: str, password: str) -> str:
    # BrowseComp's scheme: XOR with SHA-256(password) repeated to the ciphertext length.
    data = base64.b64decode(ciphertext_b64)
    key = hashlib.sha256(password.encode()).digest()
    stream = (key * (len(data) // len(key) + 1))[: len(data)]
    return bytes(a ^ b for a, b in zip(data, stream, strict=True)).decode()


def load_browsecomp() -> list[Item]:
    """BrowseComp (1,266), decrypted in memory only; never write these items to disk in plain text."""
    return [
        Item(
            benchmark="browsecomp",
            item_id=str(i),
            question=_xor_decrypt(row["problem"], row["canary"]),
            answer=_xor_decrypt(row["answer"], row["canary"]),
            metadata={"problem_topic": row["problem_topic"]},
        )
        for i, row in enumerate(_csv_rows("browsecomp/browse_comp_test_set.csv"))
    ]


_ABGEN_HELP = (
    "AbGen's data is not available offline (only on the Hugging Face hub, yale-nlp/AbGen). "
    "Download a split there (e.g. human_evaluation or test) as JSON and pass its path: a list of "
    "objects with research_background, method, main_experiment {experiment_setup, results} and "
    "ablation_study {module_name, experiment_setup}."
)


def load_abgen(path: str | os.PathLike[str]) -> list[Item]:
    """AbGen examples from a user-supplied JSON (list) or JSONL file in AbGen's documented format."""
    path = Path(path)
    if not path.is_file():
        raise DataNotFoundError(f"{path} does not exist. {_ABGEN_HELP}")
    text = path.read_text(encoding="utf-8")
    try:
        rows = json.loads(text) if text.lstrip().startswith("[") else [
            json.loads(line) for line in text.splitlines() if line.strip()
        ]
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not JSON or JSONL ({exc}). {_ABGEN_HELP}") from exc
    items = []
    for i, row in enumerate(rows):
        try:
            main = row["main_experiment"]
            ablation = row["ablation_study"]
            fields = (row["research_background"], row["method"], main["experiment_setup"],
                      main["results"], ablation["module_name"], ablation["experiment_setup"])
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{path}, example {i}: missing field {exc}. {_ABGEN_HELP}") from exc
        background, method, setup, results, module, reference = fields
        items.append(
            Item(
                benchmark="abgen",
                item_id=str(row.get("example_id", row.get("id", i))),
                question=(
                    f"Research Context:\nResearch Background:\n{background}\nMethod Section:\n{method}\n"
                    f"Main Experiment Setup\n{setup}\n\n Main Experiment Results\n{results}\n\n\n"
                    f" Design an ablation study about {module} based on the research context above."
                ),
                answer=reference,
                metadata={"research_background": background, "method": method,
                          "main_experiment_setup": setup, "main_experiment_results": results,
                          "module_name": module},
            )
        )
    return items


def sample(items: Sequence[Item], n: int | None, seed: int) -> list[Item]:
    """``n`` items drawn without replacement by a seeded Generator, in their original order.

    ``n=None`` or ``n >= len(items)`` returns every item, so full-size runs are one parameter away.
    """
    if n is None or n >= len(items):
        return list(items)
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    picked = np.random.default_rng(seed).choice(len(items), size=n, replace=False)
    return [items[i] for i in sorted(picked)]


def items_df(items: Sequence[Item]):
    """Items as a DataFrame (benchmark, item_id, question, answer, metadata as a JSON string)."""
    import pandas as pd

    return pd.DataFrame(
        {
            "benchmark": [it.benchmark for it in items],
            "item_id": [it.item_id for it in items],
            "question": [it.question for it in items],
            "answer": [it.answer for it in items],
            "metadata": [json.dumps(dict(it.metadata), default=str) for it in items],
        }
    )

