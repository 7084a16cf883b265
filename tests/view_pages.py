"""Reading the pages of roma_lab's views in tests (execution tree, trajectories), and executing a
notebook that shows one as papermill does, for the export tests."""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def rows(page: str) -> dict[str, str]:
    """Each table row's HTML (its attributes, in any order, then its cells) by its data-select id."""
    found = {}
    for attributes, cells in re.findall(r"<tr\b([^>]*)>(.*?)</tr>", page, re.DOTALL):
        item = re.search(r'data-select="([^"]+)"', attributes)
        if item:
            found[item.group(1)] = attributes + ">" + cells
    return found


_ROW = re.compile(r'<details class="rv-row"><summary><table class="\w+-table"><tr\b[^>]*?data-select="([^"]+)"'
                  r'[^>]*>.*?</tr></table></summary><section class="\w+-detail" data-detail="([^"]+)"', re.DOTALL)


def expandable(page: str) -> list[tuple[str, str]]:
    """Per row that opens without JavaScript, in page order: its data-select id, and the data-detail id
    of the block its ``<details>`` holds right after the row's ``<summary>``."""
    return _ROW.findall(page)


def detail(page: str, item_id: str) -> str:
    """The detail block of ``item_id`` (the first, in side-by-side panes)."""
    return re.search(rf'<section class="\w+-detail" data-detail="{re.escape(item_id)}".*?</section>', page,
                     re.DOTALL).group(0)


def text(fragment: str) -> str:
    """What a reader sees of an HTML fragment: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def assert_loads_nothing_from_a_network(page: str) -> None:
    """No script, style, image or frame from elsewhere, no module imported from a URL, and no widget
    that a CDN script would draw."""
    assert not re.findall(r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)=[\"']?(?:https?:)?//", page, re.I)
    assert not re.findall(r"import\s*\(\s*[\"']https?:", page)
    assert "application/vnd.jupyter.widget-view+json" not in page


def parameterized(notebook: Path, parameters: dict) -> object:
    """``notebook`` with ``parameters`` injected after its parameters cell, as papermill does."""
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    return parameterize_notebook(load_notebook_node(str(notebook)), parameters)


def execute_notebook(nb, path: Path) -> Path:
    """Execute ``nb`` as papermill does (widget state stored in its metadata) with this checkout's
    roma_lab, and write it to ``path``."""
    import nbformat
    from nbclient import NotebookClient

    with pytest.MonkeyPatch.context() as env:  # the kernel imports this checkout's roma_lab
        env.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
        NotebookClient(nb, timeout=120, kernel_name="python3", store_widget_state=True).execute()
    assert "widgets" in nb.metadata  # the case nbconvert's default page draws blank offline
    nbformat.write(nb, path)
    return path
