"""The README is a guide (issue 44): short, every note it names exists, every design note indexed; the
LICENSE file is the licence pyproject declares (issue 52)."""

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


# The licence texts the project may declare, by SPDX id: the SHA-256 of the text as its steward
# publishes it (https://www.apache.org/licenses/LICENSE-2.0.txt, 11,358 bytes; issue 52).
LICENCE_TEXTS = {"Apache-2.0": "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"}


def test_the_license_file_is_the_licence_pyproject_declares_word_for_word():
    import hashlib
    import tomllib

    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["license"]
    text = (REPO / "LICENSE").read_bytes()
    assert declared in LICENCE_TEXTS, f"pyproject declares {declared!r}: add its official text's hash here"
    assert hashlib.sha256(text).hexdigest() == LICENCE_TEXTS[declared]
