"""Notebook 42: ROMA and the agent on the generated world through the web, recorded and replayed, and
the same tasks through BM25 (design/web.md, "The offline web study").

The world's documents and ledger files are served as the offline web on 127.0.0.1:``port``
(``roma_lab.web.serve_offline_web``, SearXNG's wire format), so every search and page read takes the
online path (search -> URL -> fetch -> extract -> text) with no network. Three evaluations of the
same systems on the same tasks, each its own ``roma_lab.evaluate`` folder:

- ``web/``: through the web, every call recorded; the run's snapshot (``web/web_snapshot``, checked
  by SHA-256) goes with its folder;
- ``replay/``: the same run with the offline web stopped, every call served from the snapshot: its
  rows and traces must equal the recorded run's (timings aside) with no request made;
- ``bm25/``: the same systems searching the documents with BM25 (what every other notebook does).

Tables: ``web_rows.csv`` (the three evaluations' rows, ``setting`` naming which), ``web_replay.csv``
(per system: rows and traces identical, web calls, calls served from the snapshot, requests made),
``web_summary.csv`` (pass@1 with its CI per system and setting),
``web_paired.csv`` (per system, web minus BM25 paired on the tasks: CI, sign test, MDE) and
``web_calls.csv`` (every web call of the recorded run, from its traces: system, task, tool, query or URL,
k), which the snapshot must serve with the web stopped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from roma_lab.stats import DEFAULT_STATS, StatsSettings

__all__ = ["DEFAULT_PORT", "SYSTEMS", "measure_offline_web", "replay_web_calls"]

#: The offline web's port: a recording keys each page read by its URL, which holds the port.
DEFAULT_PORT = 48765
SYSTEMS = ("roma", "agent")
_WEB_TOOLS = ("web_search", "web_read", "search", "read_page")
_TIMED = ("latency_s", "wall_s", "started_s", "queued_s", "created_s", "ended_s", "recorded_latency_s", "recorded_at",
          "fetched_at")


def _systems(chosen: Sequence[Any], lm: Any, max_depth: int, run_timeout_s: float | None) -> list[Any]:
    """``chosen``'s names built on ``lm``; any other entry is a system of ``roma_lab.evaluate`` as it is."""
    from roma_lab.evaluate import agent, roma

    unknown = sorted(str(s) for s in chosen if isinstance(s, str) and s not in SYSTEMS)
    if unknown or not chosen:
        raise ValueError(f"systems are some of {SYSTEMS} or systems of roma_lab.evaluate, got {list(chosen)}")
    built = {"roma": lambda: roma(lm, max_depth=max_depth, run_timeout_s=run_timeout_s), "agent": lambda: agent(None, lm)}
    return [built[s]() if isinstance(s, str) else s for s in chosen]


def _comparable(value: Any) -> Any:
    """A trace's JSON data without what depends on the clock (its timings, a page's fetch time) or on
    where a reply came from (``replayed``: the web's recording, counted in its own column; ``cached``: the
    completion cache, which serves the replay's model calls when the model caches)."""
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items()
                if k not in _TIMED and k not in ("replayed", "cached") and not k.endswith("_s")}
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    return value


def _replayed_calls(trace: Any) -> tuple[int, int]:
    """(web calls, of which served from a recording) of a trace: its tool calls that searched the web or
    read a page (a ROMA run's role calls record each as ``web_search`` / ``web_read``; an agent's steps
    as ``search`` / ``read_page``)."""
    run = trace.as_run() if hasattr(trace, "as_run") else trace
    web = [t for n in run.nodes for c in n.calls for t in c.tools if t.name in _WEB_TOOLS]
    return len(web), sum(t.replayed for t in web)


def _web_calls(recorded: Any) -> Any:
    """Every web call in the recorded run's traces, in order: its system, task, tool, status and request
    (a search's query and k, a read's URL). An agent's search tool takes only a query; its k is the
    agent's ``search_k``, which its trace's config records."""
    import pandas as pd

    table = []
    for system, task_id, run in zip(recorded.rows["condition"], recorded.rows["task_id"], recorded.rows["run"],
                                    strict=True):
        if not recorded.trace_path(system, task_id, run).is_file():
            continue
        trace = recorded.trace(system, task_id, run)
        k = trace.config.get("search_k") if isinstance(getattr(trace, "config", None), dict) else None
        nodes = (trace.as_run() if hasattr(trace, "as_run") else trace).nodes
        for tool in (t for n in nodes for c in n.calls for t in c.tools if t.name in _WEB_TOOLS):
            args = dict(tool.arguments)
            search = "url" not in args
            table.append({"condition": system, "run": run, "task_id": task_id, "tool": tool.name,
                          "status": tool.status, "query": args.get("query") if search else None,
                          "k": args.get("k", k) if search else None, "url": args.get("url")})
    return pd.DataFrame(table, columns=["condition", "run", "task_id", "tool", "status", "query", "k", "url"])


def replay_web_calls(calls: Any, snapshot: str | Path, search: str) -> int:
    """Make every call of a ``web_calls`` table again through the recorded web in ``snapshot`` (a run
    folder or its ``web_snapshot``), searching with ``search`` (the recorded run's provider spec), no
    request made: how many were served. The snapshot is checked by hash as it opens; a call it
    does not hold raises ``roma_lab.web.ReplayMissError``, a damaged entry ``DamagedRecordingError``."""
    from urllib.parse import urlsplit

    from roma_lab.web import SNAPSHOT_DIR, Web, WebSettings, open_snapshot, parse_provider

    folder = Path(snapshot) / SNAPSHOT_DIR if (Path(snapshot) / SNAPSHOT_DIR).is_dir() else Path(snapshot)
    open_snapshot(folder)  # every entry checked against the manifest's hashes before any is served
    host = urlsplit(parse_provider(search, need_key=False).base_url or "").hostname
    web = Web(WebSettings(search=search, allow_hosts=(host,) if host else (), recording="replay",
                          recording_dir=str(folder)))
    for call in calls.itertuples():
        if isinstance(call.url, str) and call.url:
            web.read(call.url)
        else:
            web.search(call.query, int(call.k))
    return len(calls)


def _replay_check(recorded: Any, replayed: Any) -> Any:
    """Per system: whether the replay's rows and traces equal the recorded run's (timings and ``replayed`` aside), its
    web calls, how many the snapshot served and how many it did not (``requests_made``: each went past
the recording, which in replay fails it, and the web was stopped).
    A system that keeps no traces has ``traces_identical`` None."""
    import pandas as pd

    keep = ["condition", "run", "task_id", "prediction", "status", "score", "error"]
    table = []
    for system in recorded.systems:
        mine = recorded.rows[recorded.rows["condition"] == system]
        again = replayed.rows[replayed.rows["condition"] == system]
        rows_same = mine[keep].reset_index(drop=True).equals(again[keep].reset_index(drop=True))
        traces_same, calls, served, compared = True, 0, 0, 0
        for task_id, run in zip(mine["task_id"], mine["run"], strict=True):
            kept = [e.trace_path(system, task_id, run).is_file() for e in (recorded, replayed)]
            if not any(kept):  # a system that keeps no trace (a plain function) has none to compare
                continue
            if not all(kept):
                traces_same = False
                continue
            a, b = recorded.trace(system, task_id, run), replayed.trace(system, task_id, run)
            traces_same &= _comparable(json.loads(a.to_json())) == _comparable(json.loads(b.to_json()))
            n, s = _replayed_calls(b)
            calls, served, compared = calls + n, served + s, compared + 1
        table.append({"condition": system, "model": recorded.models.get(system), "rows_identical": rows_same, "traces_identical": traces_same if compared else None,
                      "web_calls": calls, "served_from_snapshot": served,
                      "requests_made": calls - served,
                      "n_tasks": len(mine)})
    return pd.DataFrame(table)


def measure_offline_web(out_dir: str | Path, *, lm: Any = "local", n_tasks: int = 4, split: str = "dev",
                        levels: Sequence[str] = ("L1",), seed: int = 0, systems: Sequence[Any] = SYSTEMS,
                        port: int = DEFAULT_PORT, max_depth: int = 1, item_timeout_s: float | None = 900,
                        stats: StatsSettings = DEFAULT_STATS, progress: bool = False) -> dict[str, Any]:
    """The study of the module docstring on ``n_tasks`` tasks of the world's ``split`` at ``levels``
    (drawn with ``seed``), ``systems`` on ``lm`` (ROMA at ``max_depth``, the default agent; or systems of
    ``roma_lab.evaluate``, used as they are), each task
    stopped at ``item_timeout_s``. Returns the tables by name (also written under ``out_dir``)."""
    import pandas as pd

    from roma_lab.evaluate import evaluate, world_task_set
    from roma_lab.results import compare, record_stats, summarize, write_table
    from roma_lab.web import WebSettings, serve_offline_web
    from roma_lab.world import generate_world

    out = Path(out_dir)
    built = _systems(systems, lm, max_depth, item_timeout_s)
    world = generate_world()
    common = {"split": split, "n": n_tasks, "seed": seed, "levels": tuple(levels)}
    run = {"progress": progress, "stats": stats, "timeout_s": None if item_timeout_s is None else item_timeout_s + 60}
    with serve_offline_web(dict(world.documents), files=dict(world.files), port=port) as site:
        recording = site.settings(recording="record", recording_dir=str(out / "web_recording"))
        recorded = evaluate(built, world_task_set(**common, web=recording), out=out / "web", **run)
        spec, allow = site.search_spec, site.allow_hosts
    # the web is stopped: a request would fail, so identical rows are rows the snapshot gave
    replay = WebSettings(search=spec, allow_hosts=allow, recording="replay",
                         recording_dir=str(out / "web" / "web_snapshot"))
    replayed = evaluate(built, world_task_set(**common, web=replay), out=out / "replay", **run)
    bm25 = evaluate(built, world_task_set(**common), out=out / "bm25", **run)
    check = _replay_check(recorded, replayed)

    settings = {"web": f"the offline web ({spec}): search, then read pages", "bm25": "BM25 over the documents",
                "replay": "the web run replayed from its snapshot, the web stopped"}
    rows = pd.concat([e.rows.assign(setting=settings[name], model=e.rows["condition"].map(e.models)) for name, e in
                      (("web", recorded), ("replay", replayed), ("bm25", bm25))], ignore_index=True)
    scores = pd.concat([e.scores().assign(condition=lambda d, name=name: d["condition"] + f" ({name})")
                        for name, e in (("web", recorded), ("bm25", bm25))], ignore_index=True)
    summary = summarize(scores, ["score"], stats=stats)
    paired = pd.concat([compare(scores, f"{s} (web)", f"{s} (bm25)", "score", stats=stats) for s in recorded.systems],
                       ignore_index=True)
    tables = {"web_rows": rows, "web_replay": check, "web_summary": summary, "web_paired": paired,
              "web_calls": _web_calls(recorded)}
    for name, table in tables.items():
        write_table(table, out, name)
    record_stats(out, stats)
    return tables
