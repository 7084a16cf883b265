"""The executed notebook made final: a smoke-tier copy says so at the top, and every copy is signed,
so JupyterLab opens it trusted (design/runner.md, "Executed notebooks open trusted" and "Smoke
copies say so at the top")."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from roma_lab.results import write_text_atomic

SMOKE_BANNER_ID = "smoke-banner"


def finish_notebook(path: Path, smoke: Mapping[str, Any] | None = None) -> bool:
    """Make the executed notebook at ``path`` final in one read and at most one write.

    A smoke-tier run's (``smoke``: its smoke parameters; None: not a smoke run) gets a banner at the
    top: its numbers come from small parameters and usually the scripted test double, and look like
    results if nothing says so. Then it is signed with nbformat's notary, as ``jupyter trust`` does,
    so JupyterLab opens it trusted and shows its live widgets rather than their static fallback. The
    signature goes to the notary's SQLite database in the Jupyter data dir, over the notebook as the
    file now holds it. When signing fails (a read-only data dir, say) the notebook stays as written
    and a UserWarning names it and the reason. Returns whether it was signed."""
    import nbformat
    from nbformat.sign import NotebookNotary

    nb = nbformat.read(path, as_version=4)  # as JupyterLab reads it
    if smoke is not None and not any(cell.get("id") == SMOKE_BANNER_ID for cell in nb.cells):
        nb.cells.insert(0, _smoke_banner(smoke, path.stem))
        text = nbformat.writes(nb)  # signed below as written, as Jupyter's server signs a notebook it saves
        write_text_atomic(path, text if text.endswith("\n") else text + "\n")
    try:
        notary = NotebookNotary()
        try:
            notary.sign(nb)
            # nbformat signs into memory, after logging why, when its database cannot be written
            in_memory = getattr(notary.store, "db_file", None) == ":memory:"
        finally:
            notary.store.close()  # (not `with NotebookNotary()`: that needs nbformat 5.11, which nothing pins)
    except Exception as exc:  # signing is a convenience: it must never cost a run its notebook
        reason = f"{type(exc).__name__}: {exc}"
    else:
        if not in_memory:
            return True
        reason = f"the signature database {notary.db_file} cannot be written"
    warnings.warn(f"{path} is not signed, so JupyterLab opens it untrusted and shows the widgets' static "
                  f"fallback ({reason}); `jupyter trust {path}` signs it once the Jupyter data dir is writable",
                  UserWarning, stacklevel=2)
    return False


def _smoke_banner(smoke: Mapping[str, Any], stem: str):
    import nbformat

    settings = ", ".join(f"`{k} = {v!r}`" for k, v in smoke.items()) or "the notebook's defaults"
    return nbformat.v4.new_markdown_cell(
        "> **Smoke tier: not results.** This copy ran with the smoke tier's small parameters "
        f"({settings}) to check that the notebook runs; its tables and figures measure nothing. "
        "The results are in the default run: `python -m roma_lab.experiments run " f"{stem}`.",
        id=SMOKE_BANNER_ID)
