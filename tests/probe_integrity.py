"""Fault-injection probe: corrupted data files, completion-cache entries and run files.

Each case corrupts one input in a temporary copy (the real data is never written), runs the public
entry point that reads it, and sorts the outcome into one of:

- ``recovered``: the call finished with the right result (bad content moved aside, work redone);
- ``typed``: a roma_lab exception that names the damaged file;
- ``raw``: any other exception (UnicodeDecodeError, a pandas or pydantic error, ...): the user is
  left with a traceback that does not say which file is damaged or what to do;
- ``silent``: the call finished with a wrong result (fewer items, another answer, an error row);
- ``hung``: the call did not return within ``HANG_GUARD_S`` (e.g. a reader blocked on a FIFO).

Run ``python tests/probe_integrity.py`` (from the repository root, with roma_lab importable) for the
table; tests/test_bench_data.py, test_lm.py and test_bench_run.py run the same cases.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1] / "data" / "benchmarks"
OUTCOMES = ("recovered", "typed", "raw", "silent", "hung")
HANG_GUARD_S = 60  # a bounded wait, not a timing assertion


@dataclass(frozen=True)
class Case:
    group: str  # data | cache | run file
    name: str
    run: Callable[[Path], str]  # tmp dir -> outcome


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def classify_error(exc: BaseException, names: tuple[str, ...]) -> str:
    """``typed`` when some exception in the chain is roma_lab's own and its message names the file."""
    for e in _chain(exc):
        if type(e).__module__.startswith("roma_lab") and any(n in str(e) for n in names):
            return "typed"
    return "raw"


# --- data files ---------------------------------------------------------------------------------


def _loaders() -> dict[str, tuple[str, Callable[[], object]]]:
    from roma_lab import bench
    from roma_lab.bench._data import read_data_text

    return {
        "seal0": ("seal0/sealqa_seal0.parquet", bench.load_seal0),
        "frames": ("frames/frames_test_set.csv", bench.load_frames),
        "simpleqa": ("simpleqa/simple_qa_test_set.csv", bench.load_simpleqa),
        "simpleqa_verified": ("simpleqa/simpleqa_verified.csv", lambda: bench.load_simpleqa(verified=True)),
        "aime answers": ("aime2025/aime_2025_I/answers.csv", bench.load_aime2025),
        "aime problem": ("aime2025/aime_2025_II/problems/7.tex", bench.load_aime2025),
        "hotpotqa": ("hotpotqa/hotpot_dev_v1_simplified.json", bench.load_hotpotqa),
        "papillon": ("papillon/PUPA_New.csv", bench.load_papillon),
        "eqbench prompts": ("eqbench_longform/longform_creative_writing_prompts_minimalist.json",
                            bench.load_eqbench_longform),
        "eqbench criteria": ("eqbench_longform/longform_creative_writing_criteria_chapter.txt",
                             bench.load_longform_spec),
        "browsecomp": ("browsecomp/browse_comp_test_set.csv", bench.load_browsecomp),
        "simpleqa grader": ("graders/simpleqa/grader_template.txt",
                            lambda: read_data_text("graders/simpleqa/grader_template.txt")),
    }


def _middle_line(data: bytes) -> tuple[int, int]:
    """Start and end (after its newline) of the line holding the middle byte."""
    mid = len(data) // 2
    start = data.rfind(b"\n", 0, mid) + 1
    end = data.find(b"\n", mid)
    return start, (len(data) if end < 0 else end + 1)


def _flip(data: bytes) -> bytes:
    """One digit or letter near the middle changed to another of its kind: same size, still text."""
    for i in range(len(data) // 2, len(data)):
        c = data[i]
        if 48 <= c <= 57:
            return data[:i] + bytes([48 + (c - 48 + 1) % 10]) + data[i + 1:]
        if 97 <= c <= 122:
            return data[:i] + bytes([97 + (c - 97 + 1) % 26]) + data[i + 1:]
    raise ValueError("no letter or digit to flip")


def _drop_line(data: bytes) -> bytes:
    start, end = _middle_line(data)
    return data[:start] + data[end:]


def _garble(data: bytes) -> bytes:
    noise = np.random.default_rng(0).integers(0, 256, 64, dtype=np.uint8).tobytes()
    mid = len(data) // 2
    return data[:mid] + noise + data[mid + len(noise):]


CORRUPTIONS: dict[str, Callable[[bytes], bytes]] = {
    "empty": lambda data: b"",
    "truncated": lambda data: data[: len(data) // 2],
    "garbled": _garble,
    "one byte changed": _flip,
    "one line dropped": _drop_line,
}


def data_root_with(tmp: Path, relpath: str | None, corruption: Callable[[bytes], bytes] | None) -> Path:
    """A data folder linking every real file, with ``relpath`` replaced by a corrupted copy.

    MANIFEST.tsv is a copy, never a link, so a test may edit it; the real files are only read."""
    root = tmp / "data"
    for src in DATA.rglob("*"):
        if src.is_file():
            rel = src.relative_to(DATA).as_posix()
            dst = root / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            if rel == relpath:
                dst.write_bytes(corruption(src.read_bytes()))
            elif rel == "MANIFEST.tsv":
                dst.write_bytes(src.read_bytes())
            else:
                dst.symlink_to(src)
    return root


def _with_data_root(root: Path, load: Callable[[], object]) -> object:
    from roma_lab import bench

    previous = os.environ.get(bench.DATA_ENV)
    os.environ[bench.DATA_ENV] = str(root)
    try:
        return load()
    finally:
        if previous is None:
            os.environ.pop(bench.DATA_ENV)
        else:
            os.environ[bench.DATA_ENV] = previous


def data_case(loader: str, corruption: str) -> Case:
    def run(tmp: Path) -> str:
        relpath, load = _loaders()[loader]
        expected = _with_data_root(data_root_with(tmp / "pristine", None, None), load)
        try:
            got = _with_data_root(data_root_with(tmp / "corrupt", relpath, CORRUPTIONS[corruption]), load)
        except Exception as exc:  # noqa: BLE001 - sorted by kind below
            return classify_error(exc, (relpath, Path(relpath).name))
        return "recovered" if got == expected else "silent"

    return Case("data", f"{loader}: {corruption}", run)


DATA_CASES = [data_case(loader, c) for loader in _loaders() for c in CORRUPTIONS]


# --- completion cache -----------------------------------------------------------------------------


def _engine():
    """The scripted engine answering every request with the same JSON; ``len(engine.requests)`` counts calls."""
    from roma_lab.lm import ScriptedEngine

    return ScriptedEngine(lambda request: {"answer": "forty-two"})


def _ask(engine, question: str):
    import dspy
    from questions import ask

    return ask(dspy.LM("local/probe", engine=engine, cache=False), question)


def _entries(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*.json") if p.is_file())


def _other_entry(directory: Path, target: Path) -> bytes:
    """A valid entry recorded for another request (a misfiled file)."""
    from roma_lab.lm import CachingEngine

    other = directory.parent / "other"
    _ask(CachingEngine(_engine(), model_id="probe", directory=other), "another question")
    return _entries(other)[0].read_bytes()


CACHE_CORRUPTIONS: dict[str, Callable[[Path, Path], bytes]] = {
    "truncated": lambda d, p: p.read_bytes()[: len(p.read_bytes()) // 2],
    "empty": lambda d, p: b"",
    "random bytes": lambda d, p: np.random.default_rng(1).integers(0, 256, 300, dtype=np.uint8).tobytes(),
    "wrong schema": lambda d, p: json.dumps({"text": 1, "finish_reason": None}).encode(),
    "another request's entry": _other_entry,
}


def cache_case(corruption: str, mode: str) -> Case:
    def run(tmp: Path) -> str:
        from roma_lab.lm import CachingEngine, ReplayEngine

        directory = tmp / "cache"
        _ask(CachingEngine(_engine(), model_id="probe", directory=directory), "what is six times seven?")
        (entry,) = _entries(directory)
        entry.write_bytes(CACHE_CORRUPTIONS[corruption](directory, entry))
        fresh = _engine()
        engine = (CachingEngine(fresh, model_id="probe", directory=directory) if mode == "caching"
                  else ReplayEngine(model_id="probe", directory=directory))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                answer = _ask(engine, "what is six times seven?")
        except Exception as exc:  # noqa: BLE001
            return classify_error(exc, (entry.name,))
        if mode == "replay":  # nothing valid was recorded for this request any more
            return "silent"
        repaired = _ask(CachingEngine(_engine(), model_id="probe", directory=directory), "what is six times seven?")
        ok = answer == repaired == "forty-two" and len(fresh.requests) == 1
        return "recovered" if ok else "silent"

    return Case("cache", f"{mode}: {corruption}", run)


CACHE_CASES = [cache_case(c, mode) for mode in ("caching", "replay") for c in CACHE_CORRUPTIONS]


# --- run files (results rows, run config, saved traces) -------------------------------------------


def _items(n=4):
    from roma_lab.bench import Item

    return [Item(benchmark="probe", item_id=str(i), question=f"q{i}", answer=f"a{i}") for i in range(n)]


class _Echo:
    """Answers q<i> with a<i> (``reply`` to every question when given), counting calls. One class for
    a system and its rerun: a folder refuses another function under the same label."""

    def __init__(self, reply=None):
        self.calls = []
        self.reply = reply

    def __call__(self, question):
        self.calls.append(question)
        return question.replace("q", "a") if self.reply is None else self.reply


DEEP_JSON = "[" * 100_000 + "]" * 100_000  # deeper than json can parse recursively


def _deep_details(line: bytes) -> bytes:
    """A log row whose details field is a JSON object nested 50,000 deep (a field under csv's default
    limit of 131,072 characters, which quarantined longer ones before they were parsed)."""
    import csv
    import io

    from roma_lab.evaluate import ROW_COLUMNS

    fields = next(csv.reader([line.decode()]))
    fields[ROW_COLUMNS.index("details")] = '{"a": ' + "[" * 50_000 + "]" * 50_000 + "}"
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(fields)
    return buffer.getvalue().encode()


RESULT_CORRUPTIONS: dict[str, Callable[[list[bytes]], list[bytes]]] = {
    # line 0 is the header, lines 1-4 the items 0-3
    "garbled row": lambda lines: [*lines[:2], lines[2][:25] + b"@@garbled@@\n", *lines[3:]],
    "bad header": lambda lines: [b"benchm\x00rk;item\n", *lines[1:]],
    "binary noise": lambda lines: [*lines[:3], bytes(range(128, 256)) + b"\n", *lines[3:]],
    "non-numeric score": lambda lines: [*lines[:2], lines[2].replace(b",1.0,", b",one,"), *lines[3:]],
    "details nested 50,000 deep": lambda lines: [*lines[:2], _deep_details(lines[2]), *lines[3:]],
}


def _evaluated(out: Path, system):
    from roma_lab import bench
    from roma_lab.evaluate import TaskSet, evaluate, function

    return evaluate([function(system, label="s")], TaskSet("probe", tuple(_items())), bench.StringMatchGrader(),
                    out=out, progress=False).rows


def results_case(corruption: str) -> Case:
    def run(tmp: Path) -> str:
        out = tmp / "probe_evaluation"
        _evaluated(out, _Echo())
        log = out / "attempts.csv"
        log.write_bytes(b"".join(RESULT_CORRUPTIONS[corruption](log.read_bytes().splitlines(keepends=True))))
        echo = _Echo()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                df = _evaluated(out, echo)
        except Exception as exc:  # noqa: BLE001
            return classify_error(exc, (log.name,))
        right = list(df["task_id"]) == ["0", "1", "2", "3"] and df["score"].tolist() == [1.0] * 4 and len(echo.calls) <= 2
        return "recovered" if right else "silent"

    return Case("run file", f"results: {corruption}", run)


def long_fields_case(size: int) -> Case:
    """Not damage: rows whose prediction and grader reply are ``size`` characters long (over csv's
    default field limit of 131,072) must read back as written, so a rerun asks nothing again."""

    def run(tmp: Path) -> str:
        text = ("a long, \"quoted\"\nanswer " * (size // 24 + 1))[:size]
        out = tmp / "probe_evaluation"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                first = _evaluated(out, _Echo(text))
                echo = _Echo(text)
                again = _evaluated(out, echo)
        except Exception as exc:  # noqa: BLE001
            return classify_error(exc, ("attempts.csv",))
        right = first["prediction"].tolist() == again["prediction"].tolist() == [text] * 4 and not echo.calls
        return "recovered" if right and not list(tmp.rglob("*.quarantined-*")) else "silent"

    return Case("run file", f"results: {size:,}-character predictions", run)


def _seal0(out: Path, **kwargs):
    from roma_lab.papers import roma
    from roma_lab.stats import StatsSettings

    return roma.run_roma_table("seal0", out, lm="scripted", n_items=2, seed=1, progress=False,
                               stats=StatsSettings(n_resamples=20, seed=1), **kwargs)


def _run_config_case(tmp: Path) -> str:
    out = tmp / "seal0"
    first = _seal0(out)
    config = out / "seal0_run_config.json"
    config.write_bytes(b'{"benchmark": "seal0", "model": tru')
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            again = _seal0(out)
    except Exception as exc:  # noqa: BLE001
        return classify_error(exc, (config.name,))
    keys = ["condition", "metric", "value", "n"]
    same = again["seal0_summary"][keys].equals(first["seal0_summary"][keys])
    return "recovered" if same and json.loads(config.read_text())["benchmark"] == "seal0" else "silent"


def _item_json_case(tmp: Path) -> str:
    from roma_lab.trace import load_trace
    from roma_lab.widgets import saved_traces

    out = tmp / "seal0"
    _seal0(out)
    path = next(iter(saved_traces(out / "seal0_runs", "roma").values()))
    path.write_bytes(path.read_bytes()[:100])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _seal0(out)
            run = load_trace(path)  # what the notebook's item picker shows
    except Exception as exc:  # noqa: BLE001
        return classify_error(exc, (path.name,))
    return "recovered" if run.status == "completed" else "silent"


def _table5_json_case(tmp: Path) -> str:
    from roma_lab.papers import roma

    out = tmp / "t5"
    roma.measure_component_cost(out, lm="scripted", n_items=2, n_chapters=2)
    path = sorted((out / "table5_runs" / "traces").rglob("*.json"))[0]
    path.write_bytes(b"\x00\xff garbage")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tables = roma.measure_component_cost(out, lm="scripted", n_items=2, n_chapters=2)
    except Exception as exc:  # noqa: BLE001
        return classify_error(exc, (path.name,))
    return "recovered" if (tables["table5_runs"]["status"] == "completed").sum() == 2 else "silent"


RUN_FILE_CASES = [
    *(results_case(c) for c in RESULT_CORRUPTIONS),
    long_fields_case(200_000),
    Case("run file", "seal0 run config garbled", _run_config_case),
    Case("run file", "seal0 per-item run JSON truncated", _item_json_case),
    Case("run file", "table5 per-story run JSON garbage", _table5_json_case),
]

# --- experiment specs and the runner's own JSON files ---------------------------------------------

PROJECT = Path(__file__).resolve().parent / "fixtures" / "project"


def _fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


SPEC_DAMAGE: dict[str, Callable[[Path], None]] = {
    "nested 50,000 deep": lambda p: p.write_text(p.read_text() + "x = " + "[" * 50_000 + "]" * 50_000 + "\n"),
    "invalid UTF-8": lambda p: p.write_bytes(p.read_bytes().replace(b"fixture", b"fixt\xffure")),
    "a FIFO": _fifo,
}


def spec_case(damage: str) -> Case:
    """A bad spec among good ones: ``load_spec`` must raise SpecError naming it (typed)."""

    def run(tmp: Path) -> str:
        import shutil

        from roma_lab.experiments import load_spec

        root = tmp / "project"
        shutil.copytree(PROJECT, root)
        path = root / "experiments" / "00_fixture.toml"
        SPEC_DAMAGE[damage](path)
        try:
            load_spec(path)
        except Exception as exc:  # noqa: BLE001
            return classify_error(exc, (path.name,))
        return "silent"

    return Case("spec", f"spec: {damage}", run)


def _kernel_record_case(content: Callable[[Path], None]) -> Callable[[Path], str]:
    def run(tmp: Path) -> str:
        from roma_lab.experiments import _kernel

        record = tmp / _kernel.KERNEL_FILE
        content(record)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _kernel.stop_kernel(tmp)  # the runner's first step on a folder a killed runner left
        except Exception as exc:  # noqa: BLE001
            return classify_error(exc, (record.name,))
        moved = not record.exists() and any(tmp.glob(f"{record.name}.quarantined-*"))
        return "recovered" if moved else "silent"

    return run


def _deep_provenance_case(tmp: Path) -> str:
    from roma_lab.results import read_provenance

    (tmp / "provenance.json").write_text(DEEP_JSON)
    try:
        read_provenance(tmp)
    except Exception as exc:  # noqa: BLE001
        return classify_error(exc, ("provenance.json",))
    return "silent"


RUNNER_CASES = [
    *(spec_case(d) for d in SPEC_DAMAGE),
    Case("runner", "provenance.json nested 100,000 deep", _deep_provenance_case),
    Case("runner", ".kernel.json nested 100,000 deep", _kernel_record_case(lambda p: p.write_text(DEEP_JSON))),
    Case("runner", ".kernel.json a FIFO", _kernel_record_case(_fifo)),
]

ALL_CASES = [*DATA_CASES, *CACHE_CASES, *RUN_FILE_CASES, *RUNNER_CASES]


def run_case(case: Case) -> str:
    """The case's outcome; ``hung`` when it does not return within HANG_GUARD_S (its thread is left
    blocked, as a daemon, so the probe goes on)."""
    import threading

    box: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        worker = threading.Thread(target=lambda: box.update(outcome=case.run(Path(tmp))), daemon=True)
        worker.start()
        worker.join(HANG_GUARD_S)
        if worker.is_alive():
            for fifo in Path(tmp).rglob("*"):  # release a reader blocked opening a FIFO
                if fifo.is_fifo():
                    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            worker.join(HANG_GUARD_S)
            return "hung"
    return box.get("outcome", "raw")


def main() -> int:
    counts: dict[str, dict[str, int]] = {}
    for case in ALL_CASES:
        outcome = run_case(case)
        counts.setdefault(case.group, dict.fromkeys(OUTCOMES, 0))[outcome] += 1
        print(f"{case.group:9} {case.name:55} {outcome}", flush=True)
    print()
    print(f"{'group':9} {'cases':>5} " + " ".join(f"{o:>9}" for o in OUTCOMES))
    for group, c in counts.items():
        print(f"{group:9} {sum(c.values()):>5} " + " ".join(f"{c[o]:>9}" for o in OUTCOMES))
    total = {o: sum(c[o] for c in counts.values()) for o in OUTCOMES}
    print(f"{'all':9} {sum(total.values()):>5} " + " ".join(f"{total[o]:>9}" for o in OUTCOMES))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    sys.exit(main())
