"""Benchmark items and loaders for the copied data under data/benchmarks/."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

import numpy as np

from roma_lab._environment import ENV
from roma_lab.stats import check_sample_size

DATA_ENV = ENV.data
MANIFEST = "MANIFEST.tsv"  # path, bytes, sha256 (, source, licence) of every file under the data root

# The GEPA / DSPy-tutorial split of PUPA_New (see graders/papillon/NOTES.md).
_PAPILLON_SPLITS = {"train": slice(0, 225), "dev": slice(225, 450), "test": slice(450, None)}
_LONGFORM_CHAPTERS = 8


# Items each file holds, as its benchmark defines them: a file cut short and a manifest
# edited to match it still cannot pass.
_ITEM_COUNTS = {
    "seal0/sealqa_seal0.parquet": 111,
    "frames/frames_test_set.csv": 824,
    "simpleqa/simple_qa_test_set.csv": 4326,
    "simpleqa/simpleqa_verified.csv": 1000,
    "aime2025/aime_2025_I/answers.csv": 15,
    "aime2025/aime_2025_II/answers.csv": 15,
    "hotpotqa/hotpot_dev_v1_simplified.json": 7405,
    "papillon/PUPA_New.csv": 664,
    "eqbench_longform/longform_creative_writing_prompts_minimalist.json": 12,
    "browsecomp/browse_comp_test_set.csv": 1266,
}


class DataNotFoundError(FileNotFoundError):
    """A benchmark file is missing: the data root is wrong or the file was never supplied."""


class DataIntegrityError(ValueError):
    """A benchmark file differs from MANIFEST.tsv, or lacks the columns or item count of its
    benchmark. The message names the file and how to restore it; nothing is loaded from it."""


def _restore_hint(relpath: str) -> str:
    return (f"restore it (in the repository: git checkout -- data/benchmarks/{relpath}; otherwise copy it again "
            f"from the source {MANIFEST} names)")


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


@lru_cache(maxsize=8)
def _manifest(path: Path, size: int, mtime_ns: int) -> Mapping[str, tuple[int, str]]:
    """relpath -> (bytes, sha256) from a MANIFEST.tsv (cached per version of the file)."""
    entries = {}
    try:
        rows = list(csv.DictReader(io.StringIO(path.read_bytes().decode("utf-8"), newline=""), delimiter="\t"))
        for row in rows:
            if not re.fullmatch("[0-9a-f]{64}", row["sha256"]):
                raise ValueError(f"sha256 {row['sha256']!r} of {row['path']!r}")
            entries[row["path"]] = (int(row["bytes"]), row["sha256"])
    except (UnicodeDecodeError, KeyError, TypeError, ValueError) as exc:
        raise DataIntegrityError(f"{path} is damaged ({type(exc).__name__}: {exc}); restore it (in the repository: "
                                 f"git checkout -- data/benchmarks/{MANIFEST})") from None
    return MappingProxyType(entries)


@lru_cache(maxsize=256)
def _read_verified(path: Path, relpath: str, expected: tuple[int, str], size: int, mtime_ns: int) -> bytes:
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if (len(data), digest) != expected:
        raise DataIntegrityError(
            f"benchmark file {path} differs from {MANIFEST}: {len(data)} bytes with SHA-256 {digest[:16]}…, "
            f"expected {expected[0]} bytes with {expected[1][:16]}…. The file is damaged or was edited; "
            f"{_restore_hint(relpath)}")
    return data


def _verified_bytes(relpath: str) -> bytes:
    """A data file's bytes, checked against MANIFEST.tsv (hashed once per process and file version;
    the bytes checked are the bytes parsed)."""
    path = data_path(relpath)
    manifest = data_root() / MANIFEST
    if not manifest.is_file():
        raise DataNotFoundError(f"no {MANIFEST} in {data_root()}: every benchmark file is checked against it")
    stat = manifest.stat()
    entry = _manifest(manifest, stat.st_size, stat.st_mtime_ns).get(relpath)
    if entry is None:
        raise DataIntegrityError(f"benchmark file {relpath!r} is not listed in {manifest}; add its path, bytes and "
                                 "sha256 there before loading it")
    stat = path.stat()
    return _read_verified(path, relpath, entry, stat.st_size, stat.st_mtime_ns)


def read_data_text(relpath: str) -> str:
    """Text of a data file, verified against MANIFEST.tsv (hashed once per process; grader templates
    are reused per item)."""
    try:
        return _verified_bytes(relpath).decode("utf-8")
    except UnicodeDecodeError as exc:  # only when the manifest itself lists a non-text file here
        raise DataIntegrityError(f"benchmark file {relpath!r} is not UTF-8 text ({exc}); "
                                 f"{_restore_hint(relpath)}") from None


def _read_lines(relpath: str) -> tuple[str, ...]:
    return tuple(line.strip() for line in read_data_text(relpath).splitlines() if line.strip())


def _check_count(relpath: str, n: int) -> None:
    expected = _ITEM_COUNTS[relpath]
    if n != expected:
        raise DataIntegrityError(f"benchmark file {relpath!r} holds {n} items, its benchmark has {expected}; "
                                 f"{_restore_hint(relpath)}")


def _check_columns(relpath: str, found: Sequence[str], needed: Sequence[str]) -> None:
    missing = [c for c in needed if c not in found]
    if missing:
        raise DataIntegrityError(f"benchmark file {relpath!r} lacks the columns {missing}; {_restore_hint(relpath)}")


def _csv_rows(relpath: str, columns: Sequence[str]) -> list[dict[str, str]]:
    """Rows of a verified CSV with at least ``columns``; counted when the file is a benchmark's item list."""
    reader = csv.DictReader(io.StringIO(read_data_text(relpath), newline=""))
    _check_columns(relpath, reader.fieldnames or (), columns)
    rows = list(reader)
    if any(None in row or None in row.values() for row in rows):  # more or fewer cells than the header
        raise DataIntegrityError(f"benchmark file {relpath!r} has rows of the wrong width; {_restore_hint(relpath)}")
    if relpath in _ITEM_COUNTS:
        _check_count(relpath, len(rows))
    return rows


def _json_records(relpath: str, keys: Sequence[str]) -> list | dict:
    """A verified JSON file of records (a list, or an object of records), each with ``keys``."""
    try:
        data = json.loads(read_data_text(relpath))
    except json.JSONDecodeError as exc:  # only when the manifest itself lists a broken file
        raise DataIntegrityError(f"benchmark file {relpath!r} is not JSON ({exc}); {_restore_hint(relpath)}") from None
    records = list(data.values()) if isinstance(data, dict) else data
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise DataIntegrityError(f"benchmark file {relpath!r} is not a list of records; {_restore_hint(relpath)}")
    for record in records:
        _check_columns(relpath, list(record), keys)
    _check_count(relpath, len(records))
    return data


def load_seal0() -> list[Item]:
    """SEAL-0 (111 questions). This is the 2026 revision, not the one 2025 papers scored."""
    import pandas as pd

    relpath = "seal0/sealqa_seal0.parquet"
    df = pd.read_parquet(io.BytesIO(_verified_bytes(relpath)))
    _check_columns(relpath, list(df.columns), ("question", "answer", "topic", "freshness", "effective_year",
                                               "search_results", "question_types", "urls"))
    _check_count(relpath, len(df))
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
        for row in _csv_rows("frames/frames_test_set.csv", ("id", "Prompt", "Answer", "reasoning_types", "wiki_links"))
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
            for row in _csv_rows("simpleqa/simpleqa_verified.csv", ("original_index", "problem", "answer", "topic",
                                                                    "answer_type", "multi_step", "requires_reasoning"))
        ]
    return [
        Item(
            benchmark="simpleqa",
            item_id=str(i),
            question=row["problem"],
            answer=row["answer"],
            metadata={"metadata": row["metadata"]},
        )
        for i, row in enumerate(_csv_rows("simpleqa/simple_qa_test_set.csv", ("problem", "answer", "metadata")))
    ]


def load_aime2025() -> list[Item]:
    """AIME 2025 I and II (30 problems), integer answers 0-999."""
    items = []
    for exam in ("I", "II"):
        folder = f"aime2025/aime_2025_{exam}"
        for row in _csv_rows(f"{folder}/answers.csv", ("id", "answer")):
            answer = int(row["answer"]) if row["answer"].isdigit() else -1
            if not 0 <= answer <= 999:
                raise DataIntegrityError(f"benchmark file '{folder}/answers.csv': AIME {exam}/{row['id']} answer "
                                         f"{row['answer']!r} is not an integer 0-999; {_restore_hint(f'{folder}/answers.csv')}")
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
    rows = _json_records("hotpotqa/hotpot_dev_v1_simplified.json", ("question", "answer", "type"))
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
    columns = ("user_query", "target_response", "conversation_hash", "pii_units", "redacted_query", "predicted_category")
    rows = list(enumerate(_csv_rows("papillon/PUPA_New.csv", columns)))[_PAPILLON_SPLITS[split]]
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
    prompts = _json_records("eqbench_longform/longform_creative_writing_prompts_minimalist.json",
                            ("writing_prompt", "category", "title"))
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


#: Benchmarks whose items must never be written to disk in the clear (their files are encrypted so
#: that they stay out of training data): the bench runner refuses them; the agents' runner redacts.
PRIVATE_BENCHMARKS = frozenset({"browsecomp"})


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
        for i, row in enumerate(_csv_rows("browsecomp/browse_comp_test_set.csv",
                                          ("problem", "answer", "canary", "problem_topic")))
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

    ``n=None`` or ``n == len(items)`` returns every item, so full-size runs are one parameter away;
    more than there are is a :class:`~roma_lab.stats.SampleSizeError` naming the maximum.
    """
    check_sample_size(n, len(items), f"{items[0].benchmark} items" if items else "items")
    if n is None or n == len(items):
        return list(items)
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

