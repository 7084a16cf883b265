"""Run files and the artifact store on hostile or large input (issue 21 §3): run JSON nested
100,000 deep is a typed error naming the file; whatever a run records can be saved and read back
(one maximum nesting depth, deeper parts cut and marked); a store a run file names is never
opened unless the caller names it too; writes never follow a planted link; references never
read outside the store."""

from __future__ import annotations

import asyncio
import hashlib
import http.server
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from roma_lab.results import DamagedFileError
from roma_lab.trace import load_trace
from roma_lab.tools import ArtifactError, ArtifactStore, UntrustedStoreError
from roma_lab.trace import ArtifactRef, InvalidRunError, LMExchange, Node, RoleCall, Run, ToolCall
from roma_lab.controller import Roma, ScriptedRoles, plan_repair, tree_plans
from roma_lab.tools._calls import traced_sync
from roma_lab.trace._values import MAX_VALUE_DEPTH, TRUNCATED

PLANS = tree_plans((2, 2))


def nested(levels: int, leaf: object = "leaf") -> object:
    """``leaf`` inside ``levels`` lists (built without recursion)."""
    value = leaf
    for _ in range(levels):
        value = [value]
    return value


def depth_of(value: object) -> tuple[int, object]:
    """How many single-item lists or dicts wrap the innermost value, and that value."""
    levels = 0
    while isinstance(value, (list, dict)):
        value = next(iter(value.values())) if isinstance(value, dict) else value[0]
        levels += 1
    return levels, value


def run_bounded(roma: Roma, goal: str = "task") -> Run:
    """A hung controller fails the test instead of hanging it."""
    return asyncio.run(asyncio.wait_for(roma.arun(goal), 30))


def one_call_run(**call_changes) -> Run:
    """A completed one-node run whose single call is changed."""
    call = RoleCall(role="executor:think", inputs={}, outputs={"output": "o"}, context_chars=1, input_tokens=1,
                    output_tokens=1, cost=0.0, latency_s=0.1, started_s=0.0)
    root = Node(id="0", parent_id=None, depth=0, goal="g", task_type="think", status="completed", output="o",
                calls=(replace(call, **call_changes),))
    return Run(goal="g", status="completed", output="o", nodes=(root,), wall_s=1.0)


# --- 1. depth: every loader gives a typed error, and what is recorded is what can be saved --------

def deep_files() -> dict[str, str]:
    """Run JSON nested 100,000 deep (as a whole, inside a valid run's tool arguments) and 500 deep."""
    valid = one_call_run(tools=(ToolCall("t", None, {"a": "X"}, "ok", 1, 0.0, 0.0),)).to_json()
    deep = "[" * 100_000 + "]" * 100_000
    return {"whole file": deep, "tool arguments": valid.replace('"X"', deep),
            "500 deep in tool arguments": valid.replace('"X"', "[" * 500 + "]" * 500)}


@pytest.mark.parametrize("where", list(deep_files()))
def test_a_deeply_nested_run_file_is_a_typed_error_naming_the_file(where, tmp_path):
    text = deep_files()[where]
    with pytest.raises(InvalidRunError, match="nest"):
        Run.from_json(text)
    path = tmp_path / "item-1.json"
    path.write_text(text)
    # the one trace loader (the item picker, the notebooks, a resumed evaluation) names the file; a resumed
    # evaluation then moves it aside and runs the item again
    with pytest.raises(DamagedFileError, match=r"item-1\.json: .*nest"):
        load_trace(path)


@pytest.mark.parametrize("levels", [500, 100_000])
def test_a_run_built_in_memory_never_holds_a_value_it_could_not_save(levels):
    cases = {
        "arguments of tool call t": {"tools": (ToolCall("t", None, {"a": nested(levels)}, "ok", 1, 0.0, 0.0),)},
        "inputs": {"inputs": {"context": nested(levels)}},
        "output 'passages'": {"outputs": {"output": "o", "passages": nested(levels)}},
        "messages of exchange 0": {"exchanges": (LMExchange(({"content": nested(levels)},), (), False),)},
    }
    for where, changes in cases.items():
        with pytest.raises(InvalidRunError, match=f"records {where} nested deeper than {MAX_VALUE_DEPTH} levels"):
            one_call_run(**changes)
    at_limit = one_call_run(tools=(ToolCall("t", None, {"a": nested(MAX_VALUE_DEPTH - 1)}, "ok", 1, 0.0, 0.0),))
    assert Run.from_json(at_limit.to_json()) == at_limit


def deep_roles(levels: int) -> dict:
    """A one-node run whose executor calls a traced tool with arguments nested ``levels`` deep, then
    also with arguments that contain themselves, and returns passages nested ``levels`` deep."""
    looped: dict = {}
    looped["self"] = looped

    async def executor(goal, context):
        traced_sync("probe", None, {"q": nested(levels)}, lambda: "ok")
        traced_sync("probe", None, {"q": looped}, lambda: "ok")
        return SimpleNamespace(output="done", passages=nested(levels))

    return ScriptedRoles({}).role_kwargs() | {"executors": {"think": executor}}


@pytest.mark.parametrize("levels", [500, 100_000])
def test_deep_tool_arguments_and_outputs_are_recorded_cut_and_survive_save_and_load(levels):
    run = run_bounded(Roma(**deep_roles(levels), max_depth=0))
    assert run.status == "completed", run.root.error
    (call,) = run.root.calls
    deep, looped = call.tools
    for value in (deep.arguments, call.outputs["passages"]):
        depth, leaf = depth_of(value)
        assert depth == MAX_VALUE_DEPTH and leaf.startswith(f"{TRUNCATED}nested deeper than {MAX_VALUE_DEPTH} levels> [[")
    assert looped.arguments["q"]["self"].startswith(f"{TRUNCATED}contains itself> ")
    assert Run.from_json(run.to_json()) == run


def chain(n_levels: int) -> Run:
    """A completed run whose nodes form one chain ``n_levels`` deep, the deepest one failed."""
    nodes, parent = [], None
    for depth in range(n_levels):
        node_id = "0" if parent is None else f"{parent}.0"
        nodes.append(Node(id=node_id, parent_id=parent, depth=depth, goal=f"g{depth}", task_type="think",
                          status="completed", output="o"))
        parent = node_id
    nodes[-1] = replace(nodes[-1], status="failed", output=None, error="boom")
    return Run(goal="g0", status="partial", output="o", nodes=tuple(nodes), wall_s=1.0)


def test_repair_plans_a_run_file_nested_3000_nodes_deep_without_recursion():
    source = Run.from_json(chain(3000).to_json())
    plan = plan_repair(source)
    assert list(plan.actions.values()) == ["kept_plan"] * 2999 + ["fresh"]


def test_a_dependency_on_a_later_sibling_is_an_invalid_run_file():
    run = run_bounded(Roma(**ScriptedRoles(PLANS).role_kwargs(), max_depth=2, max_subtasks=2))
    data = json.loads(run.to_json())
    first = next(n for n in data["nodes"] if n["id"] == "0.0")
    first["depends_on"] = ["0.1"]  # with 0.1 -> 0.0 a cycle a repair would wait on forever
    next(n for n in data["nodes"] if n["id"] == "0.1")["depends_on"] = ["0.0"]
    with pytest.raises(InvalidRunError, match=r"node 0.0: depends on \['0.1'\], which are not its siblings planned"):
        Run.from_json(json.dumps(data))


# --- 2. a store named only by a run file is never opened ----------------------------------------

class CountingServer:
    """A loopback HTTP server that counts every request and answers 404 to reads, 201 to writes."""

    def __init__(self):
        self.requests: list[tuple[str, str]] = []
        requests = self.requests

        class Handler(http.server.BaseHTTPRequestHandler):
            def answer(self):
                requests.append((self.command, self.path))
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                self.send_response(404 if self.command in ("GET", "HEAD") else 201)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = answer

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/store"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def http_store() -> Iterator[CountingServer]:
    server = CountingServer()
    yield server
    server.server.shutdown()
    server.server.server_close()


def artifact_run(store: Path, fail: str = "task.1.0") -> Run:
    """A run whose non-root outputs are artifacts in ``store``, one leaf failed."""
    return run_bounded(Roma(**ScriptedRoles(PLANS, fail={fail}).role_kwargs(), max_depth=2, max_subtasks=2,
                            artifacts=store, artifact_chars=5))


def crafted(run: Run, store_url: str) -> Run:
    """``run`` as a run file edited to name another artifact store."""
    return Run.from_json(json.dumps(json.loads(run.to_json()) | {"artifact_store": store_url}))


def repair_roma(**kwargs) -> Roma:
    return Roma(**ScriptedRoles(PLANS).role_kwargs(), max_depth=2, max_subtasks=2, **kwargs)


def outcome(call) -> BaseException | None:
    try:
        call()
    except Exception as err:  # noqa: BLE001 - the test looks at whatever it was
        return err
    return None


def test_a_store_named_only_by_a_run_file_is_never_contacted(tmp_path, http_store):
    source = crafted(artifact_run(tmp_path / "a"), http_store.url)
    plain = crafted(run_bounded(repair_roma()), http_store.url)  # no artifacts, but it names a store
    errors = [outcome(lambda: repair_roma().repair(source)),
              outcome(lambda: repair_roma(artifacts=tmp_path / "mine").repair(source)),
              outcome(lambda: repair_roma().repair(plain))]
    assert http_store.requests == []  # not one request reached the server
    for err in errors:
        assert isinstance(err, UntrustedStoreError), repr(err)
        assert f"names artifact store '{http_store.url}', which the caller did not name" in str(err)
        assert f"Roma(artifacts='{http_store.url}').repair(run)" in str(err)


def test_a_store_the_caller_names_is_used_however_it_is_spelled(tmp_path, monkeypatch):
    source = artifact_run(tmp_path / "a")
    monkeypatch.chdir(tmp_path)
    fixed = repair_roma(artifacts="a/").repair(source)  # relative, with a slash: the same folder
    assert fixed.status == "completed" and all(n.reused for n in fixed.nodes if n.id.startswith("0.0"))
    with pytest.raises(ValueError, match=r"source_store='b' is not the store the run to repair names"):
        repair_roma().repair(source, source_store="b")


def test_a_store_that_cannot_be_written_is_a_typed_error(http_store):
    # named by the caller, it is used: fsspec's http filesystem cannot move files, so writing fails typed
    cannot = rf"store {http_store.url} cannot be written \(HTTPFileSystem cannot write and move files"
    with pytest.raises(ArtifactError, match=cannot):
        ArtifactStore(http_store.url).put("some text")
    source = crafted(run_bounded(repair_roma()), http_store.url)
    with pytest.raises(ArtifactError, match=cannot):  # the repair keeps the repaired run in its store
        repair_roma(artifacts=http_store.url).repair(source)


# --- 3. writes stay in the store ----------------------------------------------------------------

def test_a_link_planted_where_a_write_goes_is_never_followed(tmp_path):
    store_dir, outside = tmp_path / "store", tmp_path / "outside.txt"
    outside.write_text("keep me")
    content = "the artifact"
    sha = hashlib.sha256(content.encode()).hexdigest()
    (store_dir / sha[:2]).mkdir(parents=True)
    final = store_dir / sha[:2] / sha
    # the temporary name the store used before (predictable: pid and thread), and the final name
    (store_dir / sha[:2] / f"{sha}.tmp-{os.getpid()}-{threading.get_ident()}").symlink_to(outside)
    final.symlink_to(outside)
    store = ArtifactStore(store_dir)
    ref = store.put(content)
    assert outside.read_text() == "keep me"
    assert not final.is_symlink() and store.read_text(ref) == content
    assert sorted(p.name for p in (store_dir / sha[:2]).iterdir() if not p.is_symlink()) == [sha]


def test_a_link_at_the_temporary_name_is_never_written_through_even_if_guessed(tmp_path, monkeypatch):
    from roma_lab.tools import _artifacts

    monkeypatch.setattr(_artifacts.secrets, "token_hex", lambda n: "0" * (2 * n))  # a guessed name
    store_dir, outside = tmp_path / "store", tmp_path / "outside.txt"
    outside.write_text("keep me")
    sha = hashlib.sha256(b"the artifact").hexdigest()
    (store_dir / sha[:2]).mkdir(parents=True)
    (store_dir / sha[:2] / f".{sha}.{'0' * 16}.tmp").symlink_to(outside)
    with pytest.raises(ArtifactError, match=f"could not write artifact sha256:{sha}"):
        ArtifactStore(store_dir).put("the artifact")  # created O_EXCL|O_NOFOLLOW: refused, not followed
    assert outside.read_text() == "keep me"


def test_a_shard_folder_that_is_a_link_out_of_the_store_is_refused(tmp_path):
    store_dir, outside = tmp_path / "store", tmp_path / "elsewhere"
    store_dir.mkdir()
    outside.mkdir()
    content = "the artifact"
    sha = hashlib.sha256(content.encode()).hexdigest()
    (store_dir / sha[:2]).symlink_to(outside, target_is_directory=True)
    with pytest.raises(ArtifactError, match=rf"in store {store_dir}, {sha[:2]} is not a folder"):
        ArtifactStore(store_dir).put(content)
    assert list(outside.iterdir()) == []  # nothing was written through the link


# --- 4. references are confined to the store ----------------------------------------------------

SECRET = "the host's secret\n"


@pytest.fixture
def store_beside_a_secret(tmp_path) -> tuple[ArtifactStore, Path]:
    (tmp_path / "secret").write_text(SECRET)
    (tmp_path / "a" / "b" / "store").mkdir(parents=True)  # '../../secret' as <root>/<sha[:2]>/<sha> is the secret
    return ArtifactStore(tmp_path / "a" / "b" / "store"), tmp_path / "secret"


def assert_nothing_leaks(err: pytest.ExceptionInfo) -> None:
    """No size or hash of the outside file is in the message."""
    message = str(err.value)
    assert hashlib.sha256(SECRET.encode()).hexdigest() not in message
    assert f"{len(SECRET)} bytes" not in message


@pytest.mark.parametrize("sha256", [
    "../../secret", "../secret", "/etc/hostname", "..\\..\\secret", "ab" * 32 + "\x00", "ab" * 32 + "\n",
    "AB" * 32, "ab" * 31, "sha256:../../secret",
])
def test_a_reference_that_is_not_a_hash_reads_nothing(store_beside_a_secret, sha256):
    store, _ = store_beside_a_secret
    as_text = () if sha256.strip() == "ab" * 32 else (sha256,)  # an id string is read with its spaces stripped
    for ref in (ArtifactRef(sha256, len(SECRET)), *as_text):
        with pytest.raises(ArtifactError, match="not an artifact id") as err:
            store.read_bytes(ref)
        assert_nothing_leaks(err)


@pytest.mark.parametrize("sha256", ["../../secret", "/etc/hostname", "ab" * 32 + "\n", "ab" * 32 + "\x00"])
def test_a_run_file_whose_reference_is_not_a_hash_is_an_invalid_run(tmp_path, sha256):
    data = json.loads(artifact_run(tmp_path / "a").to_json())
    node = next(n for n in data["nodes"] if n["artifact"] is not None)
    node["artifact"]["sha256"] = sha256
    with pytest.raises(InvalidRunError, match=f"node {node['id']}: artifact needs a SHA-256"):
        Run.from_json(json.dumps(data))


def test_a_link_inside_the_store_pointing_out_is_refused(store_beside_a_secret):
    store, secret = store_beside_a_secret
    sha = "ab" * 32
    shard = Path(store.url) / sha[:2]
    shard.mkdir()
    (shard / sha).symlink_to(secret)
    with pytest.raises(ArtifactError, match="its file is a symbolic link") as err:
        store.read_bytes(sha)
    assert_nothing_leaks(err)
    (shard / sha).unlink()
    shard.rmdir()
    shard.symlink_to(secret.parent, target_is_directory=True)  # the shard folder itself leads out
    (secret.parent / sha).write_text(SECRET)  # the outside folder holds a file under the name
    with pytest.raises(ArtifactError, match="is not a folder") as err:
        store.read_bytes(sha)
    assert_nothing_leaks(err)


def test_a_fifo_in_the_store_is_refused_without_waiting(store_beside_a_secret):
    store, _ = store_beside_a_secret
    sha = "cd" * 32
    (Path(store.url) / sha[:2]).mkdir()
    fifo = Path(store.url) / sha[:2] / sha
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            store.read_bytes(sha)
        except BaseException as err:  # noqa: BLE001 - the test looks at whatever it was
            outcome.append(err)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():  # release the blocked open so the thread ends, then fail
        with open(fifo, "wb"):
            pass
        pytest.fail("reading a FIFO planted in the store waited for a writer")
    assert isinstance(outcome[0], ArtifactError) and "its file is not a regular file" in str(outcome[0])
