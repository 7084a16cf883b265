"""Tasks from whatever a researcher has: a list of dicts, a DataFrame, a CSV / JSONL / Parquet file,
a registered benchmark or the generated world. Every source becomes one :class:`TaskSet` of
``roma_lab.bench.Item`` s, so the papers' benchmarks and a user's 30 questions take one path.

A malformed row is a :class:`TaskFileError` naming the row (and for files the line) and the column;
a CSV row with more or fewer fields than the header is one too (an unquoted comma is never guessed
around). A file over ``max_bytes`` or a field over ``max_field_chars`` is refused, the file before it
is read. Answers keep their text exactly: files are read as text (``"007"`` stays ``"007"``, ``8,383.57``
stays ``8,383.57``), since the grader decides what counts as the same answer.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roma_lab.bench import Item
from roma_lab.results import (
    DamagedFileError,
    JsonlLineError,
    open_regular,
    read_jsonl,
    read_regular_bytes,
)

if TYPE_CHECKING:
    from roma_lab.agents import AgentTask
    from roma_lab.bench import Grader

__all__ = ["MAX_FIELD_CHARS", "MAX_TASK_FILE_BYTES", "TaskFileError", "TaskGraders", "TaskSet", "agent_task_set",
           "benchmark_tasks", "export_world_tasks", "tasks_from", "world_task_set"]

_FORMATS = (".csv", ".jsonl", ".parquet")
#: The largest task file read (a Parquet file: its uncompressed size); ``tasks_from(max_bytes=...)`` sets another.
MAX_TASK_FILE_BYTES = 64 * 1024 * 1024
#: The longest single field (a question, an answer, any cell); ``tasks_from(max_field_chars=...)`` sets another.
MAX_FIELD_CHARS = 1_000_000
_CSV_QUOTING = ('a field holding a comma, a double quote or a line break must be quoted: "Add 2, 3 and 4", '
                'with each double quote inside doubled ("")')
_RESERVED = ("question", "answer", "id", "metadata")
#: What a task file's questions are followed by when short answers are asked for (the CLI's default).
SHORT_ANSWER = "Give only the final answer (a name, number, date or short phrase), not a sentence."


class TaskFileError(ValueError):
    """A task source cannot be read as tasks; the message names the row, the column and what to do."""


@dataclass(frozen=True, slots=True)
class TaskSet:
    """Tasks under one name (the ``benchmark`` of their items and of every row).

    ``corpus``: documents the search tools read (strings, a folder of .txt/.md or a .jsonl file; None:
    closed-book). ``web``: a ``roma_lab.web.Web`` the search tools read instead (search, then read
    pages; live, recorded or replayed). ``grader``: the set's own grader (a registered benchmark's),
    used when ``evaluate`` is given none. ``agent_task``: builds the agent's task for an item, tools
    included (the generated world's search / read_file / python); None: search over ``corpus`` or
    the web. ``source``: where the tasks came from, for provenance."""

    name: str
    items: tuple[Item, ...]
    corpus: tuple[str, ...] | str | None = None
    grader: Grader | None = None
    agent_task: Callable[[Item], AgentTask] | None = field(default=None, compare=False)
    source: str = ""
    web: Any = field(default=None, compare=False)
    short_answers: bool = False  # each question asks for the final answer only (asking_short_answers)

    def corpus_note(self) -> str:
        """What the search tools of these tasks read, in one line (a notebook prints it above its tables)."""
        if self.web is not None:
            recording = self.web.recorder.mode if self.web.recorder is not None else "live"
            return f"{self.name}: search reads the web ({self.web.provider.spec}, {recording})"
        if self.agent_task is not None:
            return f"{self.name}: the agent uses the task set's own tools and documents"
        if self.corpus is None:
            return (f"{self.name}: no corpus, so every system answers closed-book (from the model's memory); "
                    "give corpus= (a folder of .txt/.md or a .jsonl file) for search to read")
        if isinstance(self.corpus, str):
            return f"{self.name}: search reads {self.corpus}"
        return f"{self.name}: search reads the {len(self.corpus)} documents given"

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", tuple(self.items))
        if self.corpus is not None and self.web is not None:
            raise TaskFileError(f"task set {self.name!r}: search reads a corpus or the web, not both")
        if isinstance(self.corpus, list):
            object.__setattr__(self, "corpus", tuple(self.corpus))
        if not self.items:
            raise TaskFileError(f"task set {self.name!r} has no tasks")
        others = sorted({it.benchmark for it in self.items} - {self.name})
        if others:  # its rows are found by the set's name: another one would find none
            raise TaskFileError(f"task set {self.name!r} holds tasks of benchmark {others[0]!r}; a task set is named "
                                f"after its tasks' benchmark (make its items with benchmark={self.name!r})")
        ids = [it.item_id for it in self.items]
        if len(set(ids)) != len(ids):
            raise TaskFileError(f"task set {self.name!r}: duplicate task ids {sorted({i for i in ids if ids.count(i) > 1})[:5]}")

    def __len__(self) -> int:
        return len(self.items)

    @property
    def private(self) -> frozenset[str]:
        """The benchmarks among these tasks whose questions and answers must never reach the disk in
        the clear (``roma_lab.bench.PRIVATE_BENCHMARKS``): their traces and rows are redacted."""
        from roma_lab.bench import PRIVATE_BENCHMARKS

        return frozenset(it.benchmark for it in self.items) & PRIVATE_BENCHMARKS

    def to_df(self):
        """The tasks as a table: id, question, answer and each metadata key."""
        import pandas as pd

        return pd.DataFrame([{"task_id": it.item_id, "question": it.question, "answer": it.answer, **it.metadata}
                             for it in self.items])

    def head(self, n: int) -> TaskSet:
        """The first ``n`` tasks (a smaller run of the same set)."""
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        if n > len(self.items):
            raise ValueError(f"task set {self.name!r} holds {len(self.items)} tasks; asked for {n}")
        return replace(self, items=self.items[:n])

    def asking_short_answers(self) -> TaskSet:
        """The same tasks, each question followed by :data:`SHORT_ANSWER`: every system is asked for the
        form short golds take, so a grader that reads an answer whole (exact, quasi-exact, numeric) does
        not count a correct sentence wrong (ROMA, whose aggregator writes sentences, then states its
        answer in one more call: ``RomaSystem``). Not for tasks with their own tools or wording (a registered
        benchmark's template, the generated world)."""
        if self.agent_task is not None:
            raise TaskFileError(f"{self.name}: its tasks bring their own wording and tools; ask them as they are")
        if self.short_answers:
            return self
        items = tuple(replace(it, question=f"{it.question}\n\n{SHORT_ANSWER}") for it in self.items)
        return replace(self, items=items, short_answers=True)


def tasks_from(source: Any, *, name: str | None = None, corpus: Sequence[str] | str | os.PathLike[str] | None = None,
               question: str = "question", answer: str = "answer", id: str = "id",  # noqa: A002
               max_bytes: int = MAX_TASK_FILE_BYTES, max_field_chars: int = MAX_FIELD_CHARS,
               web: Any = None) -> TaskSet:
    """:func:`read_tasks` of ``source``, searching the web when ``web`` names it (a provider spec such
    as ``"serper"`` or ``"searxng=http://host:port"``, a ``roma_lab.web.WebSettings`` or a ``Web``):
    the systems that search read the web instead of a corpus."""
    tasks = read_tasks(source, name=name, corpus=corpus, question=question, answer=answer, id=id,
                       max_bytes=max_bytes, max_field_chars=max_field_chars)
    if web is None:
        return tasks
    from roma_lab.web import open_web

    if tasks.agent_task is not None:
        raise TaskFileError(f"{tasks.name}: its tasks bring their own tools; for the world on the web use "
                            "world_task_set(..., web=...)")
    return replace(tasks, corpus=None, web=open_web(web))


def read_tasks(source: Any, *, name: str | None = None, corpus: Sequence[str] | str | os.PathLike[str] | None = None,
               question: str = "question", answer: str = "answer", id: str = "id",  # noqa: A002
               max_bytes: int = MAX_TASK_FILE_BYTES, max_field_chars: int = MAX_FIELD_CHARS) -> TaskSet:
    """A :class:`TaskSet` from ``source``:

    - a list of dicts (or any iterable of mappings), a pandas DataFrame;
    - a path to a ``.csv``, ``.jsonl`` or ``.parquet`` file (``name`` defaults to the file's stem);
    - ``"benchmark:<name>"`` (a registered benchmark, :func:`benchmark_tasks`) or ``"world:<split>"``
      (the generated agent benchmark, :func:`world_task_set`);
    - a TaskSet (returned as is).

    Each row needs a question and an answer (columns named by ``question`` and ``answer``); ``id``
    is optional (default: the row number from 1). A ``metadata`` column of mappings and any other
    column go into the item's metadata. ``corpus`` gives the search tools something to read;
    ``corpus="beside"``: the task file's own documents, ``<name>_corpus.jsonl`` beside
    ``<name>_questions.csv`` (or ``<file>.corpus.jsonl``), else none (``TaskSet.corpus_note`` says which).
    ``max_bytes``: the largest task file read; ``max_field_chars``: the longest field of any source."""
    for limit_name, limit in (("max_bytes", max_bytes), ("max_field_chars", max_field_chars)):
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"{limit_name} must be a positive integer, got {limit!r}")
    if isinstance(source, TaskSet):
        return source
    if isinstance(source, str) and ":" in source and not Path(source).exists():
        kind, _, rest = source.partition(":")
        if kind == "benchmark":
            return benchmark_tasks(rest)
        if kind == "world":
            return world_task_set(rest or "dev")
    columns = {"question": question, "answer": answer, "id": id}
    if corpus == BESIDE:
        corpus = _beside(Path(source)) if isinstance(source, str | os.PathLike) else None
    corpus = _corpus(corpus)
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        records, where = _read_file(path, max_bytes)
        return TaskSet(name or path.stem, _items(records, where, str(path), name or path.stem, columns,
                                                 max_field_chars), corpus, source=str(path))
    name = name or "my_tasks"  # in memory: the set's name is the source an error names
    if _is_frame(source):
        records = source.to_dict(orient="records")
        return TaskSet(name, _items(records, _rows, name, name, columns, max_field_chars), corpus,
                       source="DataFrame")
    if isinstance(source, Iterable) and not isinstance(source, str | bytes | Mapping):
        records = list(source)
        bad = next((i for i, r in enumerate(records) if not isinstance(r, Mapping)), None)
        if bad is not None:
            raise TaskFileError(f"task {bad + 1}: expected a mapping with {question!r} and {answer!r}, "
                                f"got {type(records[bad]).__name__}")
        return TaskSet(name, _items(records, _rows, name, name, columns, max_field_chars), corpus, source="list")
    raise TaskFileError(f"cannot read tasks from {type(source).__name__}: give a list of dicts, a DataFrame, a "
                        f"{'/'.join(_FORMATS)} file, 'benchmark:<name>' or 'world:<split>'")


#: ``tasks_from(..., corpus=BESIDE)``: the documents that sit beside the task file, if any.
BESIDE = "beside"


def _beside(path: Path) -> str | None:
    for candidate in (path.with_name(path.stem.removesuffix("_questions") + "_corpus.jsonl"),
                      path.with_name(path.name + ".corpus.jsonl"), path.with_suffix(".corpus.jsonl")):
        if candidate.is_file():
            return str(candidate)
    return None


def _corpus(corpus: Any) -> tuple[str, ...] | str | None:
    if corpus is None or isinstance(corpus, str):
        return corpus
    if isinstance(corpus, os.PathLike):
        return os.fspath(corpus)
    return tuple(corpus)


def _is_frame(source: Any) -> bool:
    return type(source).__name__ == "DataFrame" and hasattr(source, "to_dict")


def _rows(index: int) -> str:
    return f"task {index + 1}"


def _read_file(path: Path, max_bytes: int) -> tuple[list[dict[str, Any]], Callable[[int], str]]:
    """The file's records and how to name record ``i`` in an error (row and line)."""
    suffix = path.suffix.lower()
    if suffix not in _FORMATS:
        raise TaskFileError(f"{path}: a task file ends in {', '.join(_FORMATS)}, got {path.name!r}")
    if not path.is_file():
        raise TaskFileError(f"{path}: no such task file")
    _check_size(path, path.stat().st_size, max_bytes, "")
    if suffix == ".jsonl":
        try:
            numbered = list(read_jsonl(path))
        except JsonlLineError as err:
            raise TaskFileError(str(err)) from None
        return [record for _, record in numbered], lambda i: f"{path}: row {i + 1} (line {numbered[i][0]})"
    if suffix == ".csv":
        records, lines = _read_csv(path, max_bytes)
        return records, lambda i: f"{path}: row {i + 1} (line {lines[i]})"
    import pandas as pd
    import pyarrow.parquet as pq

    try:
        with open_regular(path, "rb") as f:
            meta = pq.ParquetFile(f).metadata
            _check_size(path, sum(meta.row_group(g).total_byte_size for g in range(meta.num_row_groups)), max_bytes,
                        " uncompressed")
            frame = pd.read_parquet(f)
    except DamagedFileError as err:  # a FIFO or device: the user's file, not one of roma_lab's
        raise TaskFileError(f"{path}: {err.problem}") from None
    except (ValueError, OSError) as err:  # pyarrow's ArrowInvalid is a ValueError
        raise TaskFileError(f"{path}: cannot be read as PARQUET: {err}") from None
    return frame.to_dict(orient="records"), lambda i: f"{path}: row {i + 1}"


def _check_size(path: Path, size: int, max_bytes: int, kind: str) -> None:
    if size > max_bytes:
        raise TaskFileError(f"{path}: {size:,} bytes{kind}, more than the {max_bytes:,} a task file may hold; split "
                            f"it, or raise the limit: tasks_from(..., max_bytes=...)")


def _read_csv(path: Path, max_bytes: int) -> tuple[list[dict[str, str]], list[int]]:
    """The rows of a CSV task file as text (no number parsing, no "NA" -> NaN) and the line each row
    starts on. Every row has exactly the header's fields: a row with more or fewer is an unquoted
    comma (or a missing one), and guessing which fields belong together would score the wrong task."""
    try:
        data = read_regular_bytes(path, max_bytes=max_bytes)
        text = data.decode("utf-8-sig")  # a byte-order mark (spreadsheet exports) is not part of the header
    except DamagedFileError as err:  # a FIFO or device: the user's file, not one of roma_lab's
        raise TaskFileError(f"{path}: {err.problem}") from None
    except UnicodeDecodeError as err:
        raise TaskFileError(f"{path}: not UTF-8 text (at byte {err.start + 1}); save it as UTF-8 CSV") from None
    except (OSError, ValueError) as err:
        raise TaskFileError(f"{path}: cannot be read: {err}") from None
    # csv refuses fields over its process-wide limit (131,072 by default); no field is longer than its
    # file, so the limit is raised to that, never lowered (as roma_lab.bench's run files do)
    if csv.field_size_limit() < len(text):
        csv.field_size_limit(len(text))
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    records, lines = [], []
    try:
        header = next(reader, None)
        if header is not None and len(set(header)) != len(header):
            raise TaskFileError(f"{path}: line 1: the header names a column twice ({', '.join(header)})")
        start = reader.line_num + 1
        for fields in reader:
            if fields and len(fields) != len(header):
                raise TaskFileError(
                    f"{path}: line {start} has {len(fields)} fields, the header (line 1: {','.join(header)}) has "
                    f"{len(header)}; {_CSV_QUOTING}. Nothing was read from the file")
            if fields:  # a blank line is no row
                records.append(dict(zip(header, fields, strict=True)))
                lines.append(start)
            start = reader.line_num + 1
    except csv.Error as err:
        raise TaskFileError(f"{path}: line {reader.line_num}: not CSV ({err}); {_CSV_QUOTING}") from None
    return records, lines


def _text(value: Any) -> str | int | None:
    """A question or answer cell as the item holds it; None when empty."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return repr(value) if not value.is_integer() else str(int(value))
    if isinstance(value, str):
        return value if value.strip() else None
    return None


def _items(records: list[Mapping[str, Any]], where: Callable[[int], str], source: str, name: str,
           columns: Mapping[str, str], max_field_chars: int) -> list[Item]:
    """The items of ``records`` under the benchmark ``name``; ``where(i)`` names record ``i`` in an
    error and ``source`` names the whole source (a file's path, else the set's name)."""
    if not records:
        raise TaskFileError(f"{source}: no tasks found")
    for i, record in enumerate(records):
        long = next((k for k, v in record.items() if isinstance(v, str) and len(v) > max_field_chars), None)
        if long is not None:
            raise TaskFileError(f"{where(i)}, column {long!r}: {len(record[long]):,} characters, more than the "
                                f"{max_field_chars:,} a field may hold; raise the limit: tasks_from(..., "
                                f"max_field_chars=...)")
    first = set(records[0])
    for key in ("question", "answer"):
        if columns[key] not in first and all(columns[key] not in r for r in records):
            raise TaskFileError(f"{where(0)}: no {columns[key]!r} column (found {sorted(map(str, first))}); "
                                f"name the {key} column: --{key}-column NAME in the shell, "
                                f"tasks_from(..., {key}=NAME) in Python")
    items, seen_ids, seen_questions = [], {}, {}
    for i, record in enumerate(records):
        question = record.get(columns["question"])
        if not isinstance(question, str) or not question.strip():
            raise TaskFileError(f"{where(i)}, column {columns['question']!r}: the question is empty or not text "
                                f"({question!r})")
        answer = _text(record.get(columns["answer"]))
        if answer is None:
            raise TaskFileError(f"{where(i)}, column {columns['answer']!r}: the answer is empty or not a "
                                f"number or text ({record.get(columns['answer'])!r})")
        raw_id = record.get(columns["id"])
        item_id = str(i + 1) if _text(raw_id) is None else str(_text(raw_id))
        if item_id in seen_ids:
            raise TaskFileError(f"{where(i)}, column {columns['id']!r}: id {item_id!r} repeats {where(seen_ids[item_id])}")
        if question in seen_questions:
            raise TaskFileError(f"{where(i)}, column {columns['question']!r}: the same question as "
                                f"{where(seen_questions[question])}")
        seen_ids[item_id], seen_questions[question] = i, i
        metadata = record.get("metadata") or {}
        if isinstance(metadata, str):
            try:
                metadata = json.loads(metadata)
            except json.JSONDecodeError:
                metadata = None
        if not isinstance(metadata, Mapping):
            raise TaskFileError(f"{where(i)}, column 'metadata': expected a JSON object, got {record.get('metadata')!r}")
        extra = {k: v for k, v in record.items() if k not in (*columns.values(), "metadata")}
        items.append(Item(benchmark=name, item_id=item_id, question=question, answer=answer,
                          metadata={**_plain(extra), **_plain(metadata)}))
    return items


def _plain(values: Mapping[str, Any]) -> dict[str, Any]:
    """Metadata as JSON-able values (a Parquet column may hold numpy scalars)."""
    out = {}
    for key, value in values.items():
        if hasattr(value, "item") and not isinstance(value, str | bytes):
            value = value.item()
        if isinstance(value, float) and math.isnan(value):
            value = None
        out[str(key)] = value
    return out


def benchmark_tasks(name: str, n: int | None = None, *, seed: int = 0) -> TaskSet:
    """A registered benchmark (``roma_lab.bench.BENCHMARKS``) as a task set: ``n`` items drawn with
    ``seed`` (``bench.sample``; None: all), graded by the benchmark's own grader (the labelled
    string-match fallback where the grader is a judge and none is given)."""
    from roma_lab.bench import benchmark_spec, sample

    spec = benchmark_spec(name)
    if spec.user_file:
        raise TaskFileError(f"{name} needs a file of yours: {spec.user_file}")
    items = spec.load()
    if n is not None and n > len(items):
        raise ValueError(f"{name} holds {len(items)} items; asked for {n}")
    return TaskSet(name, tuple(sample(items, n, seed)), grader=spec.grader(None), source=f"benchmark:{name}")


@dataclass(frozen=True, slots=True)
class _AgentTasks:
    """An item's agent task (its tools, its grader), looked up by the item's id."""

    by_id: Mapping[str, AgentTask]

    def __call__(self, item: Item) -> AgentTask:
        return self.by_id[item.item_id]


@dataclass(frozen=True, slots=True)
class TaskGraders:
    """Each task graded by its own agent task's grader (the suite's tasks differ in how they are
    checked); ``name``: theirs when they share one, else each named once."""

    by_id: Mapping[str, Grader]
    name: str

    def __call__(self, item: Item, prediction: Any) -> Any:
        return self.by_id[item.item_id](item, prediction)

    def answer_key(self, item_id: str) -> Callable[[str], str]:
        """The answer key of a task's grader (``bench.answer_key``: what maj@R votes on)."""
        from roma_lab.bench import answer_key

        return answer_key(self.by_id[item_id])


def agent_task_set(tasks: Sequence[AgentTask], *, corpus: Any = None, source: str = "") -> TaskSet:
    """A task set of agent tasks (``roma_lab.agents``: the generated world, the suite, QA tasks): their
    items, each run with its own tools and graded by its own grader (:class:`TaskGraders`)."""
    if not tasks:
        raise TaskFileError("an agent task set needs at least one task")
    names = sorted({t.item.benchmark for t in tasks})
    if len(names) > 1:
        raise TaskFileError(f"agent tasks of one set share a benchmark; these come from {names}")
    graders = {t.item.item_id: t.grader for t in tasks}
    grader_names = sorted({getattr(g, "name", type(g).__name__) for g in graders.values()})
    return TaskSet(names[0], tuple(t.item for t in tasks), corpus, TaskGraders(graders, "; ".join(grader_names)),
                   _AgentTasks({t.item.item_id: t for t in tasks}), source=source or names[0])


def world_task_set(split: str = "dev", n: int | None = None, *, seed: int = 0, levels: Sequence[str] | None = None,
                   grader: str = "gaia", web: Any = None) -> TaskSet:
    """Tasks of the generated agent benchmark (``roma_lab.agents.world_tasks``): its documents as the
    corpus, its quasi-exact grader, and for an agent the world's own tools (search, read_file, python).
    ``web``: the world on the web instead (its documents served as pages, e.g. by
    ``roma_lab.web.serve_offline_web``): every system searches it, the agent with a ``read_page`` tool."""
    from roma_lab.agents import world_tasks
    from roma_lab.world import LEVELS, generate_world

    client = None
    if web is not None:
        from roma_lab.web import open_web

        client = open_web(web)
    tasks = world_tasks(split, n, seed=seed, levels=tuple(levels or LEVELS), grader=grader, web=client)
    documents = None if client else tuple(generate_world(tasks[0].item.metadata["world_seed"]).documents.values())
    source = f"world:{split}" + (f" on the web ({client.provider.spec})" if client else "")
    return replace(agent_task_set(tasks, corpus=documents, source=source), web=client)


def export_world_tasks(folder: str | os.PathLike[str], *, split: str = "dev", n: int = 12,
                       levels: Sequence[str] = ("L1", "L2"), seed: int = 0) -> tuple[Path, Path]:
    """Write ``n`` generated-world tasks as a task file of one's own would look (``world_questions.csv``: id,
    question, answer, level) and the world's documents as a search corpus (``world_corpus.jsonl``: id,
    text): the example the evaluation notebook ships (``data/tasks/``), made by this code so it
    can be checked. Levels without a file to read (L1, L2) by default: search alone finds them."""
    import csv

    world = world_task_set(split, n, seed=seed, levels=levels)
    from roma_lab.world import generate_world

    documents = generate_world(world.items[0].metadata["world_seed"]).documents
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    tasks_path, corpus_path = out / "world_questions.csv", out / "world_corpus.jsonl"
    with tasks_path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["id", "question", "answer", "level"])
        writer.writerows([it.item_id, it.question, it.answer, it.metadata["level"]] for it in world.items)
    corpus_path.write_text("".join(json.dumps({"id": doc_id, "text": text}, ensure_ascii=False) + "\n"
                                   for doc_id, text in documents.items()), encoding="utf-8")
    return tasks_path, corpus_path
