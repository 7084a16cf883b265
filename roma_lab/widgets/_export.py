"""An executed notebook as one HTML page that needs no network.

nbconvert's own HTML page loads require.js and MathJax from a CDN, and, when the notebook stored
widget state, draws widgets with a widget manager from a CDN instead of their static HTML: offline
those views are blank. Here the widget state is left out (so nbconvert draws each view's
``text/html``, which roma_lab's views carry, see ``_view.py``) and the page is rendered with a
template that loads no script from anywhere. The notebook file itself is not changed.
"""

from __future__ import annotations

import os
from pathlib import Path

from ._view import ASSETS


def export_html(notebook: str | os.PathLike[str], out: str | os.PathLike[str] | None = None) -> Path:
    """Write ``notebook`` (an executed ``.ipynb``) as a self-contained HTML page; returns its path
    (default: beside the notebook, ``.html``). Math stays as TeX source (MathJax would need a network).
    A file that is not a notebook nbformat reads is a ValueError naming it (anything but a regular file in
    its place: ``roma_lab.results.DamagedFileError``, a ValueError too)."""
    import nbformat
    from nbconvert import HTMLExporter

    from roma_lab.results import read_regular_bytes, write_text_atomic

    notebook = Path(notebook)
    data = read_regular_bytes(notebook)
    try:
        nb = nbformat.reads(data.decode("utf-8"), as_version=4)
    except Exception as err:  # noqa: BLE001 - nbformat's readers raise many kinds (schema, JSON, types)
        raise ValueError(f"{notebook}: not a notebook nbformat can read ({type(err).__name__}: {err})") from None
    nb.metadata.pop("widgets", None)
    exporter = HTMLExporter(template_name="offline", extra_template_basedirs=[str(ASSETS)])
    page, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": notebook.stem}})
    target = Path(out) if out is not None else notebook.with_suffix(".html")
    write_text_atomic(target, page)
    return target
