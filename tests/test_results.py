"""roma_lab.results: tidy tables, hashes, git state and the provenance record."""

import hashlib
import json
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from roma_lab.results import (
    STATS_FILE,
    MeasuredTables,
    Provenance,
    ProvenanceError,
    QuarantineWarning,
    changed_outputs,
    git_state,
    package_versions,
    parameters_hash,
    quarantine,
    quarantined_files,
    read_provenance,
    read_table,
    record_stats,
    sha256_file,
    write_provenance,
    write_table,
)
from roma_lab.stats import DEFAULT_STATS, StatsSettings


def test_table_round_trip_is_exact(tmp_path):
    df = pd.DataFrame(
        {"task": ["a", "b", "c"], "seed": [0, 1, 2], "value": [0.1 + 0.2, 1 / 3, np.nan], "ok": [True, False, True]}
    )
    path = write_table(df, tmp_path / "new" / "dir", "table2")
    assert path == tmp_path / "new" / "dir" / "table2.csv"
    back = read_table(tmp_path / "new" / "dir", "table2")
    pd.testing.assert_frame_equal(back, df)
    assert [p.name for p in path.parent.iterdir()] == ["table2.csv"]  # no temporary file left


def test_text_a_spreadsheet_would_run_as_a_formula_is_escaped_and_read_back_exactly(tmp_path):
    # issue 41: cells starting with =, +, -, @, tab or CR were written as they were (CSV injection)
    import csv

    text = ['=HYPERLINK("http://x","y")', "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx", "'kept", "-5", "+0.5e3", "fine"]
    df = pd.DataFrame({"question": text, "value": [-5, -4, -3, -2, -1, 0, 1, 2, 3, 4]})
    path = write_table(df, tmp_path, "t")
    with path.open(newline="", encoding="utf-8") as f:
        cells = list(csv.reader(f))[1:]  # what a spreadsheet opens
    assert [c[0] for c in cells] == ['\'=HYPERLINK("http://x","y")', "'+1+1", "'-2+3", "'@SUM(A1)", "'\tx", "'\rx", "''kept",
                                     "-5", "+0.5e3", "fine"]  # a plain number is no formula
    assert [c[1] for c in cells] == [str(v) for v in range(-5, 5)]  # numbers are not text: as they are
    pd.testing.assert_frame_equal(read_table(tmp_path, "t"), df)


def test_meaningful_index_becomes_columns(tmp_path):
    df = pd.DataFrame({"policy": ["static", "learned"], "success": [0.5, 0.75]}).set_index("policy")
    back = read_table(write_table(df, tmp_path, "t").parent, "t")
    assert list(back.columns) == ["policy", "success"]
    assert back["policy"].tolist() == ["static", "learned"]


@pytest.mark.parametrize("name", ["table2.csv", "sub/table", "", "../x"])
def test_bad_table_names_are_rejected(tmp_path, name):
    with pytest.raises(ValueError, match="plain file stem"):
        write_table(pd.DataFrame({"a": [1]}), tmp_path, name)


def test_write_table_rejects_non_frames_and_bad_columns(tmp_path):
    with pytest.raises(TypeError, match="DataFrame"):
        write_table({"a": [1]}, tmp_path, "t")
    with pytest.raises(ValueError, match="unique strings"):
        write_table(pd.DataFrame([[1, 2]], columns=["a", "a"]), tmp_path, "t")


def test_read_missing_table_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="'table9'"):
        read_table(tmp_path, "table9")


def test_sha256_file_known_value(tmp_path):
    (tmp_path / "abc").write_bytes(b"abc")
    assert sha256_file(tmp_path / "abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_parameters_hash_is_canonical():
    assert parameters_hash({"a": 1, "b": [1, 2]}) == parameters_hash({"b": [1, 2], "a": 1})
    assert parameters_hash({"a": 1}) != parameters_hash({"a": 2})
    assert parameters_hash({"a": 1}) != parameters_hash({"a": True})
    with pytest.raises(TypeError, match="JSON literals"):
        parameters_hash({"a": object()})
    with pytest.raises(TypeError, match="JSON literals"):
        parameters_hash({"a": float("nan")})


def test_provenance_round_trip(tmp_path):
    root, out = tmp_path / "repo", tmp_path / "repo" / "results" / "exp"
    (root / "data").mkdir(parents=True)
    (root / "data" / "in.txt").write_text("input")
    write_table(pd.DataFrame({"x": [1]}), out, "t")
    (out / "figs").mkdir()
    (out / "figs" / "f.txt").write_text("figure")
    params = {"SEED": 3, "N": 10, "VERBOSE": False}
    path = write_provenance(
        out, parameters=params, seeds={"SEED": 3}, model="local", inputs=["data/in.txt"],
        extra={"note": "x"}, root=root,
    )
    assert path == out / "provenance.json"
    record = read_provenance(out)
    assert record.status == "completed" and record.error is None
    assert record.parameters == params
    assert record.parameters_hash == parameters_hash(params)
    assert record.seeds == {"SEED": 3} and record.model == "local" and record.extra == {"note": "x"}
    assert record.inputs == {"data/in.txt": hashlib.sha256(b"input").hexdigest()}
    assert record.outputs == {"figs/f.txt": sha256_file(out / "figs" / "f.txt"), "t.csv": sha256_file(out / "t.csv")}
    assert record.packages["numpy"] == np.__version__ and record.packages["roma_lab"] is not None
    assert record.started_at <= record.finished_at and record.started_at.tzinfo is not None
    assert Provenance.model_validate_json(path.read_text()) == record


def test_provenance_records_the_stats_settings_the_tables_left(tmp_path):
    write_table(pd.DataFrame({"x": [1]}), tmp_path, "t")
    write_provenance(tmp_path, parameters={}, root=tmp_path)
    assert read_provenance(tmp_path).stats is None  # no table used statistics
    changed = StatsSettings(n_resamples=123, seed=4, level=0.9, alpha=0.1, power=0.7)
    record_stats(tmp_path, changed)  # as a paper's table function does, in the notebook's kernel
    write_provenance(tmp_path, parameters={}, root=tmp_path)  # as the runner does afterwards, elsewhere
    record = read_provenance(tmp_path)
    assert record.stats.model_dump() == changed.as_dict()
    assert set(record.outputs) == {"t.csv"}  # the hand-over file is bookkeeping, not an output
    write_provenance(tmp_path, parameters={}, root=tmp_path, stats=DEFAULT_STATS)  # given: it wins
    assert read_provenance(tmp_path).stats.model_dump() == DEFAULT_STATS.as_dict()


def test_a_record_older_than_the_stats_field_still_reads(tmp_path):
    path = write_provenance(tmp_path, parameters={}, root=tmp_path)
    data = json.loads(path.read_text())
    del data["stats"]
    path.write_text(json.dumps(data))
    assert read_provenance(tmp_path).stats is None


def test_a_damaged_stats_hand_over_is_moved_aside_and_not_recorded(tmp_path):
    (tmp_path / STATS_FILE).write_text('{"n_resamples": "many"}')
    with pytest.warns(QuarantineWarning, match="not a statistics settings record"):
        write_provenance(tmp_path, parameters={}, root=tmp_path)
    assert read_provenance(tmp_path).stats is None and not (tmp_path / STATS_FILE).exists()


def test_measured_tables_read_as_a_frozen_mapping_of_tidy_tables(tmp_path):
    source = {"table2_summary": pd.DataFrame({"value": [0.5]}),
              "table2_vs_paper": pd.DataFrame({"metric": ["success"]}),
              "table3_vs_paper": pd.DataFrame({"metric": ["cost"]})}
    tables = MeasuredTables(source, tmp_path, DEFAULT_STATS)
    source["later"] = pd.DataFrame()  # the caller's dict is copied, not shared
    assert list(tables) == ["table2_summary", "table2_vs_paper", "table3_vs_paper"] and len(tables) == 3
    assert tables["table2_summary"]["value"].tolist() == [0.5] and "later" not in tables
    with pytest.raises(KeyError, match=r"no table 'table9'.*'table2_summary'"):
        tables["table9"]
    with pytest.raises(TypeError):
        tables.tables["x"] = pd.DataFrame()  # type: ignore[index]
    stacked = tables.vs_paper
    assert stacked[["table", "metric"]].values.tolist() == [["table2_vs_paper", "success"], ["table3_vs_paper", "cost"]]
    assert MeasuredTables({}).vs_paper.empty


def test_provenance_rejects_inconsistent_status(tmp_path):
    with pytest.raises(ValidationError, match="must record its error"):
        write_provenance(tmp_path, parameters={}, status="failed", root=tmp_path)
    with pytest.raises(ValidationError, match="cannot carry an error"):
        write_provenance(tmp_path, parameters={}, status="completed", error="boom", root=tmp_path)
    path = write_provenance(tmp_path, parameters={}, status="failed", error="boom", root=tmp_path)
    data = json.loads(path.read_text())
    data["surprise"] = 1
    path.write_text(json.dumps(data))
    with pytest.raises(ProvenanceError, match="surprise"):
        read_provenance(tmp_path)


@pytest.mark.parametrize("garbage", [b"", b"\x00\xff{not json", b'{"status": "compl', "\u00e9t\u00e9".encode("latin-1")])
def test_a_damaged_record_is_a_typed_error_naming_it(tmp_path, garbage):
    (tmp_path / "provenance.json").write_bytes(garbage)
    with pytest.raises(ProvenanceError, match="provenance.json is not a valid provenance record"):
        read_provenance(tmp_path)


def test_changed_outputs_lists_edited_emptied_and_deleted_files(tmp_path):
    for name in ("a.csv", "b.csv", "c.csv", "d.csv"):
        (tmp_path / name).write_text(f"{name}\n1\n")
    write_provenance(tmp_path, parameters={}, root=tmp_path)
    record = read_provenance(tmp_path)
    assert changed_outputs(tmp_path, record) == []
    (tmp_path / "a.csv").write_text("a.csv\n2\n")                    # edited, same size
    (tmp_path / "b.csv").write_bytes(b"")                              # emptied
    (tmp_path / "c.csv").unlink()                                      # deleted
    (tmp_path / "new.csv").write_text("x\n")                           # added: not a recorded output
    assert changed_outputs(tmp_path, record) == ["a.csv", "b.csv", "c.csv"]


def test_hidden_and_quarantined_files_are_not_outputs(tmp_path):
    (tmp_path / "t.csv").write_text("x\n")
    (tmp_path / ".t.csv.tmp-1-2").write_text("half a write")
    (tmp_path / ".kernel.json").write_text("{}")
    (tmp_path / "runs.quarantined-20250101T000000000000Z").mkdir()
    (tmp_path / "runs.quarantined-20250101T000000000000Z" / "1.json").write_text("{}")
    (tmp_path / "t.csv.quarantined-20250101T000000000000Z").write_text("old")
    write_provenance(tmp_path, parameters={}, root=tmp_path)
    assert set(read_provenance(tmp_path).outputs) == {"t.csv"}


def test_quarantine_moves_a_file_aside_or_keeps_given_bytes_and_warns(tmp_path):
    target = tmp_path / "rows.csv"
    target.write_bytes(b"damaged")
    with pytest.warns(QuarantineWarning, match=r"rows\.csv: broken; kept as rows\.csv\.quarantined-") as info:
        moved = quarantine(target, "broken")
    assert not target.exists() and moved.read_bytes() == b"damaged" and moved.parent == tmp_path
    assert moved.name in str(info[0].message)
    target.write_bytes(b"good rows")
    with pytest.warns(QuarantineWarning):
        kept = quarantine(target, "two bad rows cut out", data=b"bad rows")
    assert target.read_bytes() == b"good rows" and kept.read_bytes() == b"bad rows" and kept != moved
    assert quarantined_files(tmp_path) == sorted([moved.name, kept.name])


def test_provenance_missing_input_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="data/absent.csv"):
        write_provenance(tmp_path / "out", parameters={}, inputs=["data/absent.csv"], root=tmp_path)
    with pytest.raises(FileNotFoundError, match="provenance.json"):
        read_provenance(tmp_path / "out")


def _git(repo, *args):
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True, capture_output=True,
    )


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    # Stop git from finding a repository above tmp_path.
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    return tmp_path


def test_git_state_outside_a_repo(isolated):
    (isolated / "plain").mkdir()
    assert git_state(isolated / "plain") == (None, None)


def test_git_state_in_a_repo(isolated):
    repo = isolated / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "code.py").write_text("x = 1\n")
    assert git_state(repo) == (None, True)  # a repository without commits yet
    _git(repo, "add", "code.py")
    _git(repo, "commit", "-q", "-m", "first")
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert git_state(repo) == (head, False)
    (repo / "results" / "exp").mkdir(parents=True)
    (repo / "results" / "exp" / "t.csv").write_text("a\n1\n")
    assert git_state(repo) == (head, False)  # results written by runs do not dirty the code
    (repo / "code.py").write_text("x = 2\n")
    assert git_state(repo) == (head, True)


def test_package_versions_marks_missing_packages():
    versions = package_versions(("numpy", "surely-not-installed-pkg"))
    assert versions == {"numpy": np.__version__, "surely-not-installed-pkg": None}


def test_importing_the_runner_stays_light():
    code = (
        "import sys, roma_lab, roma_lab.results, roma_lab.experiments;"
        "print([m for m in ('pandas', 'papermill', 'dspy', 'llama_cpp', 'matplotlib') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_write_text_atomic_replaces_whole_and_leaves_no_temporary(tmp_path):
    from roma_lab.results import write_text_atomic

    target = tmp_path / "deep" / "run.json"
    write_text_atomic(target, "first")
    write_text_atomic(target, "second")
    assert target.read_text() == "second"
    assert [p.name for p in target.parent.iterdir()] == ["run.json"]


def test_read_jsonl_gives_each_object_with_its_line_and_names_a_bad_line(tmp_path):
    from roma_lab.results._files import JsonlLineError, read_jsonl

    path = tmp_path / "rows.jsonl"
    # a blank line is skipped but counted; a raw U+2028 inside a string does not end the line
    path.write_text('{"a": 1}\n\n{"b": "x\u2028y"}\r\n', encoding="utf-8")
    assert list(read_jsonl(path)) == [(1, {"a": 1}), (3, {"b": "x\u2028y"})]
    for text, problem in [(b'{"a": 1}\n{"a": \n', "is not JSON (Expecting value at column 7)"),
                          (b'{"a": 1}\n[1, 2]\n', "is a JSON list, not an object"),
                          (b'{"a": 1}\n{"a": "\xff"}\n', "is not UTF-8 (at byte 8)"),
                          (b'{"a": 1}\n' + b"[" * 100_000 + b"\n", "is nested too deep to read")]:
        path.write_bytes(text)
        with pytest.raises(JsonlLineError, match=f"^{re.escape(f'{path}: line 2 {problem}')}$") as err:
            list(read_jsonl(path))
        assert (err.value.path, err.value.line) == (path, 2)


def test_safe_name_keeps_safe_names_and_makes_every_other_short_safe_and_distinct():
    from roma_lab.results import MAX_NAME_BYTES, safe_name

    assert safe_name("task-01.b") == "task-01.b"  # unchanged: files written before keep their names
    names = ["q/1", "q_1", "..", ".", "", "é" * 200, "a" * 300, "a" * 301, "../../etc/passwd", "x\x00y"]
    safe = [safe_name(n) for n in names]
    assert len(set(safe)) == len(names)  # q/1 and q_1 never share a file
    for name in safe:
        assert 0 < len(name.encode()) <= MAX_NAME_BYTES and "/" not in name and "\x00" not in name
        assert name not in (".", "..")
    assert safe_name("é" * 200).encode().decode() == safe_name("é" * 200)  # never half a character


def test_a_notebook_output_hash_is_what_the_run_recorded_not_what_an_editor_rewrites(tmp_path):
    import json

    from roma_lab.results._provenance import output_sha256

    nb = {"cells": [{"cell_type": "code", "id": "a", "metadata": {}, "source": ["x = 1\n", "x"], "execution_count": 1,
                     "outputs": [{"output_type": "execute_result", "execution_count": 1, "metadata": {},
                                  "data": {"text/plain": ["1"]}}]}],
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "run.ipynb"
    path.write_text(json.dumps(nb, indent=1))
    recorded = output_sha256(path)
    viewed = json.loads(json.dumps(nb))
    viewed["metadata"]["kernelspec"]["display_name"] = "Python 3 (ipykernel)"
    viewed["cells"][0].update(id="b", metadata={"jupyter": {"outputs_hidden": True}}, source="x = 1\nx")
    viewed["cells"][0]["outputs"][0]["data"]["text/plain"] = "1"
    path.write_text(json.dumps(viewed, indent=2))
    assert output_sha256(path) == recorded  # opened, folded, saved: the same record
    viewed["cells"][0]["outputs"][0]["data"]["text/plain"] = "2"
    path.write_text(json.dumps(viewed))
    assert output_sha256(path) != recorded  # an output edited: modified
    path.write_text("not a notebook")
    assert output_sha256(path) != recorded
