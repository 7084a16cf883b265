"""Before/after figures of a refactor: run every notebook's smoke tier (scripted model) from two
checkouts, then compare every CSV they wrote, timings excluded (same files, columns and values; a
column the after side adds is named and the rest compared).

    git worktree add /tmp/before <rev>
    PYTHONPATH=/tmp/before .venv/bin/python tests/figures_before_after.py run /tmp/before /tmp/figs/before
    PYTHONPATH=$PWD .venv/bin/python tests/figures_before_after.py run $PWD /tmp/figs/after
    .venv/bin/python tests/figures_before_after.py compare /tmp/figs/before /tmp/figs/after
"""

import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

TIMING = re.compile(r"(^|_)(wall|latency|seconds|elapsed|time|times|started|ended|created|queued|duration|tok_per_s|"
                    r"tokens_per_s|date)(_|$)|_s$|_ms$|_at$", re.I)


def run(repo: Path, out: Path) -> None:
    import roma_lab
    from roma_lab.experiments import load_spec, run_experiment

    # the kernel imports roma_lab from $PYTHONPATH: make sure that is the checkout asked for
    if not Path(roma_lab.__file__).resolve().is_relative_to(repo):
        sys.exit(f"roma_lab comes from {roma_lab.__file__}, not {repo}: set PYTHONPATH={repo}")
    for spec_path in sorted((repo / "experiments").glob("*.toml")):
        outcome = run_experiment(load_spec(spec_path), results_root=out, smoke=True)
        print(spec_path.stem, outcome.status, outcome.error or "", flush=True)


def load(path: Path) -> pd.DataFrame:
    df = pd.read_csv(path, keep_default_na=False)
    df = df[[c for c in df.columns if not TIMING.search(str(c))]]
    # a tidy table names its metric in a cell: drop rows whose label is a timing
    keep = ~df.astype(str).apply(lambda col: col.map(lambda v: bool(TIMING.search(v)) and " " not in v)).any(axis=1)
    return df[keep].reset_index(drop=True)


# What a refactor renamed on purpose, applied to the "before" side so the rest is compared as it was (each
# entry says why). The one runner (issue 50): a run's item is its task; the single call of the ROMA
# tables is "single" everywhere (and says so in words); a study's rows name the agent's answer its
# prediction, its grade its score, and its status the one status vocabulary (lower case).
RENAMED_COLUMNS = [(r"", {"item_id": "task_id"}), (r"_rows\.csv$", {"answer": "prediction"})]
RENAMED_VALUES = {"base": "single", "roma - base": "roma - single", "['base']": "['single']"}
RENAMED_TEXT = [(r"^base on ", "single on "), (r"^our base runs on ", "our single runs on "),
                (r"ROMA and its base (\w+ )?model only", "ROMA and a single call of its model only")]
RECODED = [(r"_rows\.csv$", "status", str.lower)]
DERIVED = {"correct": lambda after: after["score"].map(lambda v: "" if v == "" else str(float(v) == 1.0))}
# Files the refactor moved: every run now keeps its evaluation folder (attempts.csv, rows, summary and paired
# tables beside the traces), where it used to append a run file beside the tables.
MOVED = re.compile(r"(^|/)(attempts|rows|summary|paired)\.csv$|_runs/|(^|/)runs/|(^|/)train/|(^|/)systems/")
OLD_LOGS = re.compile(r"(^|/)(run\d+|runs|atomizer_results_log|items)\.csv$")


def _renamed(rel: str, x: pd.DataFrame, y: pd.DataFrame) -> pd.DataFrame:
    for pattern, names in RENAMED_COLUMNS:
        if re.search(pattern, rel):
            x = x.rename(columns={c: n for c, n in names.items() if c in x.columns and n not in x.columns})

    def cell(v):
        if not isinstance(v, str):
            return v
        v = RENAMED_VALUES.get(v, v)
        for pattern, replacement in RENAMED_TEXT:
            v = re.sub(pattern, replacement, v)
        return v

    x = x.apply(lambda col: col.map(cell))
    for pattern, column, recode in RECODED:
        if re.search(pattern, rel) and column in x.columns:
            x[column] = x[column].map(lambda v: recode(v) if isinstance(v, str) else v)
    for column, derive in DERIVED.items():
        if column in x.columns and column not in y.columns:
            x = x.assign(**{column: x[column].astype(str)})
            y[column] = derive(y)
    return x


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    text = df.astype(str)
    return text.sort_values(list(text.columns)).reset_index(drop=True)


def compare(a: Path, b: Path) -> int:
    files_a = {p.relative_to(a) for p in a.rglob("*.csv")}
    files_b = {p.relative_to(b) for p in b.rglob("*.csv")}
    same = reordered = differ = 0
    only_before = {rel for rel in files_a - files_b if not (MOVED.search(rel.as_posix()) or OLD_LOGS.search(rel.as_posix()))}
    only_after = {rel for rel in files_b - files_a if not MOVED.search(rel.as_posix())}
    for rel in sorted(files_a - files_b):
        print("only before:", rel, "" if rel in only_before else "(a run log the refactor replaced)")
    for rel in sorted(files_b - files_a):
        print("only after:", rel, "" if rel in only_after else "(an evaluation folder's own table)")
    for rel in sorted(files_a & files_b):
        x, y = load(a / rel), load(b / rel)
        x = _renamed(rel.as_posix(), x, y)
        if [c for c in x.columns if c not in y.columns]:
            print("columns lost:", rel, [c for c in x.columns if c not in y.columns]); differ += 1; continue
        added = [c for c in y.columns if c not in x.columns]
        if added:
            print("columns added (the rest compared):", rel, added)
            y = y[list(x.columns)]
        if x.shape != y.shape:
            print("shape differs:", rel, x.shape, y.shape); differ += 1; continue
        bad = []
        for c in x.columns:
            u, v = x[c], y[c]
            nu, nv = pd.to_numeric(u, errors="coerce"), pd.to_numeric(v, errors="coerce")
            if nu.notna().sum() == (u != "").sum() and nv.notna().sum() == (v != "").sum() and nu.notna().any():
                if not np.allclose(nu.fillna(np.inf), nv.fillna(np.inf), rtol=1e-9, atol=1e-12, equal_nan=True):
                    bad.append(c)
            elif not (u.astype(str).values == v.astype(str).values).all():
                bad.append(c)
        if bad and _sorted(x).equals(_sorted(y)):
            # a run file is a log, written as each item finishes: with items run at once, the order of
            # its rows is the order they finished in (the tables read from it are in item order)
            print("same rows in another order:", rel); reordered += 1
        elif bad:
            print("values differ:", rel, bad); differ += 1
        else:
            same += 1
    print(f"{same} files the same, {reordered} the same rows in another order, {differ} differ, "
          f"{len(only_before)} only before, {len(only_after)} only after (runs' own logs and folders aside)")
    return differ + len(only_before) + len(only_after)


if __name__ == "__main__":
    verb, first, second = sys.argv[1], Path(sys.argv[2]).resolve(), Path(sys.argv[3]).resolve()
    if verb == "run":
        run(first, second)
    else:
        sys.exit(1 if compare(first, second) else 0)
