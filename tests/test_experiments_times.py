"""``python -m roma_lab.experiments times``: the README run-time table from provenance files."""

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from roma_lab.experiments import run_times, times_markdown
from roma_lab.experiments._cli import main
from roma_lab.experiments._times import format_seconds
from roma_lab.results import write_provenance

FIXTURE = Path(__file__).parent / "fixtures" / "project"


def recorded(results, stem, *, status="completed", start="2026-11-30T10:00:00", end="2026-11-30T10:04:42",
             smoke=False, model="local", error=None, overrides=None):
    """A real provenance.json (written by roma_lab.results) with the given start and end."""
    out = results / stem
    out.mkdir(parents=True)
    extra = {"smoke": smoke} | ({"overrides": overrides} if overrides else {})
    path = write_provenance(out, parameters={"LM": model}, model=model, status=status, error=error,
                            extra=extra, root=out)
    record = json.loads(path.read_text())
    record["started_at"], record["finished_at"] = start + "Z", end + "Z"
    path.write_text(json.dumps(record))
    return out


def table_rows(text):
    """{stem: [cells]} from the markdown table."""
    rows = {}
    for line in text.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = cells[1:]
    return rows


def test_a_run_sized_with_set_says_so_in_its_tier(tmp_path):
    recorded(tmp_path, "24_compare_tts_figure3", overrides={"N_TASKS": 100, "SPLIT": "dev"})
    recorded(tmp_path, "21_measure_protocol", smoke=True)
    rows = table_rows(times_markdown(run_times(tmp_path, ["21_measure_protocol", "24_compare_tts_figure3"])))
    assert rows["24_compare_tts_figure3"][1] == "default, --set N_TASKS=100 SPLIT='dev'"
    assert rows["21_measure_protocol"][1] == "smoke"


def test_rows_from_provenance_files(tmp_path):
    recorded(tmp_path, "03_compare_seal0")
    recorded(tmp_path, "30_compare_gepa_table7", status="failed", error="boom", end="2026-11-30T12:30:00")
    recorded(tmp_path, "01_run_quickstart", smoke=True, model="scripted", end="2026-11-30T10:00:27")
    recorded(tmp_path, "31_plot_convergence_table8", status="running", end="2026-11-30T10:00:01")
    (tmp_path / "05_compare_simpleqa").mkdir()
    (tmp_path / "05_compare_simpleqa" / "provenance.json").write_text("{not json")
    (tmp_path / "06_write_longform_eqbench").mkdir()  # a folder without a record
    rows = table_rows(times_markdown(run_times(tmp_path, ["01_run_quickstart", "03_compare_seal0",
                                                          "04_compare_frames", "05_compare_simpleqa"])))
    # status, tier, model, started, finished, run time, threads, load, tok/s (no speed log here); no spec
    # given, nothing predicted; no traces, no model calls counted
    assert rows["03_compare_seal0"] == ["completed", "default", "local", "2026-11-30 10:00:00", "2026-11-30 10:04:42",
                                        "4.7 min", "—", "—", "—", "—", "—", "—"]
    assert rows["01_run_quickstart"][:3] == ["completed", "smoke", "scripted"] and rows["01_run_quickstart"][5] == "27 s"
    assert rows["30_compare_gepa_table7"][0] == "failed" and rows["30_compare_gepa_table7"][5] == "2.5 h"
    # killed hard: the record's end is only when "running" was written, so no duration is claimed
    assert rows["31_plot_convergence_table8"][0] == "running" and rows["31_plot_convergence_table8"][5] == "—"
    assert rows["04_compare_frames"] == ["not run"] + ["—"] * 11
    assert rows["05_compare_simpleqa"] == ["unreadable"] + ["—"] * 11
    assert "06_write_longform_eqbench" not in rows
    # named stems first, in the given order; other recorded folders after, sorted
    assert list(rows) == ["01_run_quickstart", "03_compare_seal0", "04_compare_frames", "05_compare_simpleqa",
                          "30_compare_gepa_table7", "31_plot_convergence_table8"]


def test_a_record_of_another_schema_is_unreadable_not_a_crash(tmp_path):
    out = recorded(tmp_path, "03_compare_seal0")
    record = json.loads((out / "provenance.json").read_text())
    del record["finished_at"]
    (out / "provenance.json").write_text(json.dumps(record))
    assert table_rows(times_markdown(run_times(tmp_path)))["03_compare_seal0"][0] == "unreadable"


@pytest.mark.parametrize(("seconds", "text"), [(None, "—"), (2.4, "2 s"), (89, "89 s"), (90, "1.5 min"),
                                               (5399, "90.0 min"), (5400, "1.5 h")])
def test_format_seconds(seconds, text):
    assert format_seconds(seconds) == text


def test_cli_times_lists_every_spec(tmp_path, capsys):
    project = tmp_path / "project"
    shutil.copytree(FIXTURE, project)
    results = tmp_path / "results"
    recorded(results, "00_fixture", start="2026-11-30T09:00:00", end="2026-11-30T09:00:09")
    assert main(["--root", str(project), "times", "--results", str(results)]) == 0
    rows = table_rows(capsys.readouterr().out)
    assert rows["00_fixture"][0] == "completed" and rows["00_fixture"][5] == "9 s"
    shutil.rmtree(results)
    assert main(["--root", str(project), "times", "--results", str(results)]) == 0  # no results folder at all
    assert table_rows(capsys.readouterr().out)["00_fixture"][0] == "not run"


def speed(loaded, closed, *, threads=2, load=0.4, prompt=(300, 10.0), generated=(100, 20.0)):
    from roma_lab.lm import ModelSpeed

    return ModelSpeed(model="qwen.gguf", pid=1, threads=threads, cpus=2, load_avg_1min=load,
                      loaded_at=f"2026-11-30T{loaded}Z", closed_at=f"2026-11-30T{closed}Z", calls=3, call_seconds=30.0,
                      prompt_tokens=prompt[0], prompt_seconds=prompt[1], generated_tokens=generated[0],
                      generation_seconds=generated[1])


def test_speeds_of_models_loaded_and_freed_within_a_run_belong_to_it(tmp_path):
    recorded(tmp_path, "03_compare_seal0", start="2026-11-30T10:00:00", end="2026-11-30T10:10:00")
    recorded(tmp_path, "04_compare_frames", start="2026-11-30T10:10:00", end="2026-11-30T10:20:00")
    recorded(tmp_path, "05_compare_simpleqa", start="2026-11-30T10:20:00", end="2026-11-30T10:30:00")
    lines = [speed("10:00:05", "10:04:00", threads=2, load=1.55),
             speed("10:04:10", "10:09:50", threads=1, load=0.2, prompt=(100, 10.0), generated=(20, 20.0)),
             speed("10:09:30", "10:10:30"),  # straddles two runs: attributed to neither
             speed("10:21:00", "10:29:00", threads=2, load=0.5)]
    (tmp_path / "lm_speed.jsonl").write_text("".join(s.model_dump_json() + "\n" for s in lines) + '{"cut short\n')
    with pytest.warns(UserWarning, match="1 damaged line"):
        rows = table_rows(times_markdown(run_times(tmp_path)))
    # threads, highest load at model load, prompt / generation tok/s pooled over its models
    assert rows["03_compare_seal0"][6:9] == ["1, 2", "1.55", "20.0 / 3.0"]
    assert rows["04_compare_frames"][6:9] == ["—", "—", "—"]
    assert rows["05_compare_simpleqa"][6:9] == ["2", "0.50", "30.0 / 5.0"]


def test_a_run_without_an_end_gets_no_speeds(tmp_path):
    recorded(tmp_path, "03_compare_seal0", status="running", start="2026-11-30T10:00:00", end="2026-11-30T10:00:00")
    (tmp_path / "lm_speed.jsonl").write_text(speed("10:00:05", "10:04:00").model_dump_json() + "\n")
    assert table_rows(times_markdown(run_times(tmp_path)))["03_compare_seal0"][6:9] == ["—", "—", "—"]


def test_cli_run_names_the_speed_log_for_its_kernels(tmp_path, monkeypatch):
    from roma_lab.lm import SPEED_LOG_ENV

    project = tmp_path / "project"
    shutil.copytree(FIXTURE, project)
    monkeypatch.setenv(SPEED_LOG_ENV, "recorded so that teardown restores its absence")
    monkeypatch.delenv(SPEED_LOG_ENV)
    seen = {}
    monkeypatch.setattr("roma_lab.experiments._cli.run_experiments",
                        lambda specs, **kw: seen.setdefault("log", __import__("os").environ.get(SPEED_LOG_ENV)) and [])
    main(["--root", str(project), "run", "--all", "--results", str(tmp_path / "results")])
    assert seen["log"] == str((tmp_path / "results" / "lm_speed.jsonl").resolve())


def test_a_speed_log_line_nested_too_deep_is_a_damaged_line(tmp_path):
    """A 100,000-deep JSON line made ``times`` end in a raw RecursionError."""
    recorded(tmp_path, "03_compare_seal0")
    (tmp_path / "lm_speed.jsonl").write_text("[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.warns(UserWarning, match="1 damaged line"):
        rows = table_rows(times_markdown(run_times(tmp_path)))
    assert rows["03_compare_seal0"][6:9] == ["—", "—", "—"]
