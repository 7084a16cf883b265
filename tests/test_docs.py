"""The README is a guide (issue 44): short, every note it names exists, every design note indexed."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_readme_stays_a_guide_under_12000_characters():
    assert len((REPO / "README.md").read_text(encoding="utf-8")) <= 12_000


def test_every_file_the_readme_names_exists_and_every_notebook_it_names_is_numbered():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    for path in set(re.findall(r"\b((?:design|data|notebooks|experiments|benchmarks|tests)/[\w./-]+\.\w+)", text)):
        assert (REPO / path).exists(), path
    stems = {p.stem for p in (REPO / "notebooks").glob("*.ipynb")}
    for stem in set(re.findall(r"`(\d\d_[a-z0-9_]+)`", text)):
        assert stem in stems, stem


def test_every_design_note_is_in_the_index():
    index = (REPO / "design" / "README.md").read_text(encoding="utf-8")
    notes = {p.name for p in (REPO / "design").glob("*.md")} - {"README.md"}
    assert notes == set(re.findall(r"\(([\w-]+\.md)\)", index))
