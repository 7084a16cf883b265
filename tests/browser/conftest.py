"""Browser test harness: one JupyterLab server for every browser test, a headless Chromium per test.

Real components only: JupyterLab from this environment on 127.0.0.1 (a free port, a token, a fresh
config), Debian's Chromium (/usr/bin/chromium) driven by Playwright, whose driver ships in its wheel
(no browser download: never ``playwright install``). Chromium runs headless with the background
networking it would otherwise attempt switched off, in a fresh profile (Playwright's launch makes one).
Each test opens its notebook in a workspace of its own.

A widget's browser test opens a notebook copy with :meth:`Lab.open` (parameters injected as the
experiment runner does), :meth:`Notebook.run_all`, then clicks and reads the page. Without Chromium or
Playwright the tests skip, saying how to install them; under CI (``CI`` set) they fail instead, since
``make test`` installs Chromium there (``make browser-tool``).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run"]
LAB_START_S = 90  # 2 shared cores: a cold JupyterLab start takes several seconds
AUTOSAVE_S = 3  # the browser tests' JupyterLab autosaves an open document this often
INSTALL_HINT = ("install Debian's chromium (as root: apt-get install chromium, or `make browser-tool`) and the dev "
                "extra (pip install -e '.[dev]', which brings playwright)")


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.browser)


def _missing() -> str | None:
    if not CHROMIUM.exists():
        return f"no {CHROMIUM}"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed"
    return None


@pytest.fixture(scope="session")
def browser_installed() -> None:
    missing = _missing()
    if missing:
        message = f"browser tests need Chromium and Playwright: {missing}; {INSTALL_HINT}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture
def browser(browser_installed):
    """Headless Chromium for one test. Not shared across tests: Playwright's synchronous API keeps an
    event loop running in this thread while it is open, which breaks asyncio.run in the tests after
    it. A launch takes about a second."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Lab:
    url: str
    token: str
    root: Path
    log: Path

    def api(self, path: str, method: str = "GET"):
        request = urllib.request.Request(f"{self.url}{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        for session in self.api("/api/sessions"):
            self.api(f"/api/sessions/{session['id']}", method="DELETE")

    def open(self, page, notebook: Path, parameters: dict | None = None):
        """Copy ``notebook`` into the server's folder (with ``parameters`` injected after its parameters
        cell, as papermill does), open it, and wait for its kernel."""
        import nbformat
        from papermill.iorw import load_notebook_node
        from papermill.parameterize import parameterize_notebook

        nb = load_notebook_node(str(notebook))
        if parameters:
            nb = parameterize_notebook(nb, parameters)
        copy = self.root / notebook.name
        nbformat.write(nb, copy)
        # A workspace of its own: JupyterLab would otherwise reopen the notebooks of earlier tests.
        page.goto(f"{self.url}/lab/workspaces/{secrets.token_hex(4)}/tree/{copy.name}?token={self.token}")
        page.wait_for_function("name => { const nb = window.jupyterapp?.shell?.currentWidget;"
                               " return nb?.context?.path === name && nb.sessionContext?.session?.kernel"
                               " && nb.sessionContext.kernelDisplayStatus === 'idle'; }",
                               arg=copy.name, timeout=LAB_START_S * 1000)
        return Notebook(page, len(nb.cells))


_STATE_JS = """() => {
  const nb = window.jupyterapp.shell.currentWidget;
  const error = document.querySelector('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.error"]');
  return {idle: nb.sessionContext.kernelDisplayStatus === 'idle', error: error ? error.innerText : null,
          pending: [...document.querySelectorAll('.jp-InputPrompt')].some(p => p.textContent.includes('*')),
          unrun: nb.content.widgets.filter(c => c.model.type === 'code' && c.model.executionCount === null).length};
}"""


@dataclass
class Notebook:
    """The notebook open in a JupyterLab page, driven through JupyterLab's own commands."""

    page: object
    n_cells: int

    def command(self, name: str) -> None:
        self.page.evaluate("name => window.jupyterapp.commands.execute(name)", name)

    def run_all(self, timeout_s: float = 300) -> None:
        """Run every cell; return when each code cell has run and the kernel is idle. A cell that
        raises fails the test with its traceback."""
        self.command("notebook:run-all-cells")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            state = self.page.evaluate(_STATE_JS)
            if state["error"]:
                raise AssertionError(f"a cell failed:\n{state['error']}")
            if state["idle"] and not state["pending"] and not state["unrun"]:
                return
            time.sleep(0.25)
        raise AssertionError(f"the notebook was still running after {timeout_s} s")

    def execute(self, code: str) -> str:
        """Run ``code`` in the notebook's kernel (as a cell would, without adding one); returns what it
        printed. An exception in it fails the test with its name and message."""
        result = self.page.evaluate("""async code => {
          const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
          const future = kernel.requestExecute({code, store_history: false});
          let out = '', error = null;
          future.onIOPub = msg => {
            if (msg.header.msg_type === 'stream') out += msg.content.text;
            if (msg.header.msg_type === 'error') error = msg.content.ename + ': ' + msg.content.evalue;
          };
          await future.done;
          return {out, error};
        }""", code)
        if result["error"]:
            raise AssertionError(f"kernel code failed: {result['error']}\n{code}")
        return result["out"]

    def output(self, index: int):
        """The output area of cell ``index`` (negative counts from the end)."""
        return self.page.locator(".jp-Notebook .jp-Cell").nth(index % self.n_cells).locator(".jp-Cell-outputArea")


@pytest.fixture
def offline_page(browser):
    """Opens a local file with the network off: ``offline_page(path)`` returns the page and the list
    of every URL other than the file's that it asked for (each is refused). Closed after the test."""
    contexts = []

    def open_offline(path: Path):
        url = path.as_uri()
        asked: list[str] = []

        def network(route):
            if route.request.url == url:
                route.continue_()
            else:
                asked.append(route.request.url)
                route.abort()

        context = browser.new_context(offline=True)
        contexts.append(context)
        context.route("**/*", network)
        page = context.new_page()
        page.goto(url)
        return page, asked

    yield open_offline
    for context in contexts:
        context.close()


@pytest.fixture(scope="session")
def lab(tmp_path_factory, browser_installed):
    """One JupyterLab for the session, in a fresh folder with a fresh config; stopped at the end."""
    home = tmp_path_factory.mktemp("lab")
    root = home / "notebooks"
    root.mkdir()
    config = home / "config"
    (config / "labconfig").mkdir(parents=True)
    # The news prompt would cover the notebook and ask a server on the internet.
    (config / "labconfig" / "page_config.json").write_text(json.dumps(
        {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}))
    # Every cell drawn, not only those in view: text and clicks must not depend on the scroll position.
    tracker = home / "settings" / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text(json.dumps({"windowingMode": "none"}))
    # Autosave every few seconds (JupyterLab's default is 120 s), so a test can wait past it.
    manager = home / "settings" / "@jupyterlab" / "docmanager-extension" / "plugin.jupyterlab-settings"
    manager.parent.mkdir(parents=True)
    manager.write_text(json.dumps({"autosave": True, "autosaveInterval": AUTOSAVE_S}))
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           "JUPYTER_CONFIG_DIR": str(config), "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
           "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"), "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
           "JUPYTER_PLATFORM_DIRS": "1"}
    log = home / "lab.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
             f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
             f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
             "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
             *(["--allow-root"] if os.geteuid() == 0 else [])],  # CI runs as root
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    lab = Lab(f"http://127.0.0.1:{port}", token, root, log)
    try:
        deadline = time.monotonic() + LAB_START_S
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {server.returncode}:\n{log.read_text()[-3000:]}")
            try:
                lab.api("/api/status")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"JupyterLab did not answer in {LAB_START_S} s:\n{log.read_text()[-3000:]}")
                time.sleep(0.3)
        yield lab
    finally:
        _stop(server)


def _stop(server: subprocess.Popen) -> None:
    """Stop the server and the kernels it started (its process group)."""
    try:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)
    except ProcessLookupError:  # it had exited
        pass
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.failed_call = report.failed
    return report


@pytest.fixture
def page(browser, lab, request, tmp_path):
    """A fresh browser page; the kernels it started are shut down afterwards (2 shared cores). When
    the test fails, a screenshot of the page is kept and named in the test's output."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(60_000)  # 2 cores shared with other work
    page = context.new_page()
    yield page
    if getattr(request.node, "failed_call", False):
        page.screenshot(path=tmp_path / "failure.png", full_page=True)
        print(f"screenshot of the failed page: {tmp_path / 'failure.png'}; server log: {lab.log}")
    context.close()
    lab.shutdown_kernels()


@pytest.fixture
def smoke_parameters(tmp_path):
    """The smoke tier's parameters of an experiment, writing into a fresh folder."""
    from roma_lab.experiments import load_spec

    def parameters(stem: str) -> dict:
        return {**load_spec(REPO / "experiments" / f"{stem}.toml").smoke, "OUT_DIR": str(tmp_path / stem)}

    return parameters
