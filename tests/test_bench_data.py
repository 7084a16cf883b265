"""Loaders against the real copied files, the data manifest, and sampling."""

import csv
import hashlib
import json
from pathlib import Path

import pytest
from probe_integrity import DATA_CASES, data_root_with

from roma_lab import bench
from roma_lab.stats import SampleSizeError

DATA = Path(__file__).resolve().parents[1] / "data" / "benchmarks"


def test_manifest_hashes_match_every_copied_file():
    with (DATA / "MANIFEST.tsv").open(newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert rows and set(rows[0]) == {"path", "bytes", "sha256", "source", "licence"}
    listed = {row["path"] for row in rows}
    on_disk = {p.relative_to(DATA).as_posix() for p in DATA.rglob("*") if p.is_file()} - {"MANIFEST.tsv"}
    assert listed == on_disk
    for row in rows:
        data = (DATA / row["path"]).read_bytes()
        assert len(data) == int(row["bytes"]), row["path"]
        assert hashlib.sha256(data).hexdigest() == row["sha256"], row["path"]
        assert row["source"] and row["licence"], row["path"]


@pytest.mark.parametrize(
    ("loader", "count"),
    [
        (bench.load_seal0, 111),
        (bench.load_frames, 824),
        (bench.load_simpleqa, 4326),
        (lambda: bench.load_simpleqa(verified=True), 1000),
        (bench.load_aime2025, 30),
        (bench.load_hotpotqa, 7405),
        (bench.load_papillon, 214),
        (bench.load_eqbench_longform, 12),
        (bench.load_browsecomp, 1266),
    ],
)
def test_loader_row_counts_and_required_fields(loader, count):
    items = loader()
    assert len(items) == count
    assert len({it.item_id for it in items}) == count
    for it in items:
        assert isinstance(it, bench.Item)
        assert it.question.strip()
        assert it.benchmark == items[0].benchmark
    if items[0].benchmark != "eqbench_longform":
        assert all(str(it.answer).strip() for it in items)


def test_items_are_frozen_including_metadata():
    item = bench.load_seal0()[0]
    with pytest.raises(AttributeError):
        item.answer = "x"
    with pytest.raises(TypeError):
        item.metadata["topic"] = "x"


def test_seal0_says_it_is_the_2026_revision():
    assert all("2026" in it.metadata["revision"] for it in bench.load_seal0())


def test_aime_answers_are_integers_in_range():
    items = bench.load_aime2025()
    assert all(isinstance(it.answer, int) and 0 <= it.answer <= 999 for it in items)
    assert items[0].item_id == "2025_I_1" and items[0].answer == 70


def test_hotpotqa_is_closed_book_in_dev_order():
    first = bench.load_hotpotqa()[0]
    assert "Scott Derrickson" in first.question and first.answer == "yes"
    assert first.metadata["setting"] == "closed-book"


def test_papillon_split_sizes_and_pii_tuple():
    sizes = {split: len(bench.load_papillon(split)) for split in ("train", "dev", "test")}
    assert sizes == {"train": 225, "dev": 225, "test": 214}
    item = bench.load_papillon("train")[0]
    assert isinstance(item.metadata["pii_units"], tuple) and "presidio_anonymized_person" in item.metadata["pii_units"]
    with pytest.raises(ValueError, match="split"):
        bench.load_papillon("validation")


def test_longform_spec_holds_rubric_and_weights():
    spec = bench.load_longform_spec()
    assert len(spec.chapter_prompts) == spec.n_chapters == 8
    assert "chapter 8" in spec.chapter_prompts[-1]
    assert len(spec.chapter_criteria) == 14 and len(spec.final_criteria) == 16
    assert set(spec.negative_chapter_criteria) <= set(spec.chapter_criteria)
    assert spec.criteria_weights["forced poetry or metaphor"] == 5.0
    assert len(spec.planning_prompts) == 5


def test_browsecomp_decrypts_in_memory_only(tmp_path, monkeypatch):
    before = {p: p.stat().st_mtime_ns for p in DATA.rglob("*") if p.is_file()}
    items = bench.load_browsecomp()
    # Known property of the official file, checked without keeping plain text in the repo.
    assert hashlib.sha256(items[0].question.encode()).hexdigest() == (
        "6662dea134c10c3e9e1b19eff2ee5d56be2217f1c7b0d8e309eddbf775a44978"
    )
    assert all(" " in it.question and " " in it.question.strip() for it in items)
    assert {p: p.stat().st_mtime_ns for p in DATA.rglob("*") if p.is_file()} == before
    # The encrypted CSV on disk does not contain the decrypted question.
    assert items[0].question[:40].encode() not in (DATA / "browsecomp/browse_comp_test_set.csv").read_bytes()


def test_sample_is_seeded_ordered_and_full_size_on_none():
    items = bench.load_seal0()
    a, b = bench.sample(items, 5, seed=3), bench.sample(items, 5, seed=3)
    assert a == b and len(a) == 5
    assert [int(it.item_id) for it in a] == sorted(int(it.item_id) for it in a)
    assert bench.sample(items, 5, seed=4) != a
    assert bench.sample(items, None, seed=0) == items
    assert bench.sample(items, len(items), seed=0) == items
    with pytest.raises(ValueError):
        bench.sample(items, -1, seed=0)


def test_sample_refuses_more_items_than_there_are_and_names_the_maximum():
    items = bench.load_seal0()
    with pytest.raises(SampleSizeError, match=f"asked for {len(items) + 1} seal0 items, but there are {len(items)}") as err:
        bench.sample(items, len(items) + 1, seed=0)
    assert err.value.maximum == len(items)


def test_data_root_env_override_and_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv(bench.DATA_ENV, str(tmp_path))
    assert bench.data_root() == tmp_path
    with pytest.raises(bench.DataNotFoundError, match="frames"):
        bench.load_frames()
    monkeypatch.setenv(bench.DATA_ENV, str(tmp_path / "missing"))
    with pytest.raises(bench.DataNotFoundError, match=bench.DATA_ENV):
        bench.data_root()


def _abgen_example(**overrides):
    example = {
        "research_background": "Background text.",
        "method": "Method text.",
        "main_experiment": {"experiment_setup": "Setup text.", "results": "Results text."},
        "ablation_study": {"module_name": "the gate", "experiment_setup": "Remove the gate."},
    }
    example.update(overrides)
    return example


def test_load_abgen_reads_json_and_jsonl(tmp_path):
    path = tmp_path / "abgen.json"
    path.write_text(json.dumps([_abgen_example(), _abgen_example()]))
    items = bench.load_abgen(path)
    assert len(items) == 2 and items[0].answer == "Remove the gate."
    assert "Design an ablation study about the gate" in items[0].question
    assert "Method text." in items[0].question
    jsonl = tmp_path / "abgen.jsonl"
    jsonl.write_text("\n".join(json.dumps(_abgen_example()) for _ in range(3)))
    assert len(bench.load_abgen(jsonl)) == 3


def test_load_abgen_explains_missing_data(tmp_path):
    with pytest.raises(bench.DataNotFoundError, match="not available offline"):
        bench.load_abgen(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"research_background": "x"}]))
    with pytest.raises(ValueError, match="missing field"):
        bench.load_abgen(bad)


# --- integrity: every file checked against MANIFEST.tsv, its columns and item count ---------------


@pytest.mark.parametrize("case", DATA_CASES, ids=lambda c: c.name)
def test_every_corrupted_copy_is_refused_with_a_typed_error_naming_it(case, tmp_path):
    # empty, truncated, garbled, one byte changed, one line dropped: copies in tmp, never the real data
    assert case.run(tmp_path) == "typed"


def test_the_error_says_which_file_and_how_to_restore_it(tmp_path, monkeypatch):
    root = data_root_with(tmp_path, "frames/frames_test_set.csv", lambda data: data[: len(data) // 2])
    monkeypatch.setenv(bench.DATA_ENV, str(root))
    with pytest.raises(bench.DataIntegrityError) as info:
        bench.load_frames()
    message = str(info.value)
    assert str(root / "frames/frames_test_set.csv") in message and "differs from MANIFEST.tsv" in message
    assert "git checkout -- data/benchmarks/frames/frames_test_set.csv" in message


def _edit_manifest(root, relpath, data):
    """Make the copied MANIFEST.tsv agree with ``data`` for ``relpath`` (as a careless edit would)."""
    manifest = root / "MANIFEST.tsv"
    assert not manifest.is_symlink()  # a copy: the real manifest is never written
    lines = manifest.read_text(encoding="utf-8").splitlines(keepends=True)
    fixed = [f"{relpath}\t{len(data)}\t{hashlib.sha256(data).hexdigest()}\tedited\tedited\n"
             if line.startswith(relpath + "\t") else line for line in lines]
    manifest.write_text("".join(fixed), encoding="utf-8")


@pytest.mark.parametrize(("relpath", "edit", "load", "message"), [
    ("frames/frames_test_set.csv", lambda d: d[: d.rfind(b"\n", 0, len(d) // 2) + 1], bench.load_frames,
     "holds .* items, its benchmark has 824"),
    ("simpleqa/simple_qa_test_set.csv", lambda d: d.replace(b"problem", b"question", 1), bench.load_simpleqa,
     r"lacks the columns \['problem'\]"),
    ("aime2025/aime_2025_I/answers.csv", lambda d: d.replace(b"\n1,70", b"\n1,seventy"), bench.load_aime2025,
     "is not an integer 0-999"),
    ("hotpotqa/hotpot_dev_v1_simplified.json", lambda d: b"[]", bench.load_hotpotqa, "holds 0 items"),
    ("seal0/sealqa_seal0.parquet", None, bench.load_seal0, "holds 110 items, its benchmark has 111"),
])
def test_columns_and_item_counts_are_checked_even_when_the_manifest_agrees(tmp_path, monkeypatch, relpath, edit,
                                                                           load, message):
    if edit is None:  # a parquet file one row short, written by pandas
        import io

        import pandas as pd

        buffer = io.BytesIO()
        pd.read_parquet(DATA / relpath).iloc[:-1].to_parquet(buffer)
        edit = lambda d: buffer.getvalue()  # noqa: E731
    root = data_root_with(tmp_path, relpath, edit)
    _edit_manifest(root, relpath, (root / relpath).read_bytes())
    monkeypatch.setenv(bench.DATA_ENV, str(root))
    with pytest.raises(bench.DataIntegrityError, match=message) as info:
        load()
    assert relpath in str(info.value)


def test_a_damaged_manifest_or_an_unlisted_file_is_refused(tmp_path, monkeypatch):
    root = data_root_with(tmp_path, None, None)
    monkeypatch.setenv(bench.DATA_ENV, str(root))
    manifest = root / "MANIFEST.tsv"
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(text.replace("frames/frames_test_set.csv", "frames/elsewhere.csv"), encoding="utf-8")
    with pytest.raises(bench.DataIntegrityError, match="'frames/frames_test_set.csv' is not listed in"):
        bench.load_frames()
    manifest.write_bytes(text.encode()[:-5000] + b"\xff\xfe garbage")
    with pytest.raises(bench.DataIntegrityError, match="MANIFEST.tsv is damaged"):
        bench.load_frames()
    manifest.unlink()
    with pytest.raises(bench.DataNotFoundError, match="no MANIFEST.tsv"):
        bench.load_frames()


def test_each_file_is_hashed_once_per_process(monkeypatch, tmp_path):
    import roma_lab.bench._data as data

    monkeypatch.setenv(bench.DATA_ENV, str(data_root_with(tmp_path, None, None)))  # a root no other test cached
    hashed = []
    real = data.hashlib.sha256
    monkeypatch.setattr(data.hashlib, "sha256", lambda b=b"": hashed.append(len(b)) or real(b))
    assert len(bench.load_frames()) == len(bench.load_frames()) == 824
    assert hashed == [(DATA / "frames/frames_test_set.csv").stat().st_size]
