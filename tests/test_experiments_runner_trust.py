"""The runner's executed notebooks: signed so JupyterLab opens them trusted (a signing failure only
warns), and their kernels started without the loopback "TCP without encryption" warning."""

import shutil
from pathlib import Path

import nbformat
import pytest
from nbformat.sign import NotebookNotary

import roma_lab.experiments._finish as finish
import roma_lab.experiments._kernel as kernel
from roma_lab.experiments import load_spec, run_experiment

FIXTURE = Path(__file__).parent / "fixtures" / "project"


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    return root


def trusted(path: Path) -> bool:
    notary = NotebookNotary()
    try:
        return notary.check_signature(nbformat.read(path, as_version=4))
    finally:
        notary.store.close()


def tiny_notebook(path: Path) -> Path:
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), path)
    return path


def test_an_executed_notebook_opens_trusted(project, tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter"))
    outcome = run_experiment(load_spec(project / "experiments" / "00_fixture.toml"), results_root=tmp_path / "results")
    assert outcome.status == "completed", outcome.error
    assert trusted(outcome.out_dir / "00_fixture.ipynb")


def test_a_data_dir_that_cannot_be_written_warns_and_keeps_the_notebook(tmp_path, monkeypatch):
    # a data dir below a regular file: unwritable even for root, whom permission bits do not stop
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "file" / "jupyter"))
    path = tiny_notebook(tmp_path / "run.ipynb")
    before = path.read_bytes()
    with pytest.warns(UserWarning, match=r"run\.ipynb is not signed, .*NotADirectoryError"):
        assert finish.finish_notebook(path) is False
    assert path.read_bytes() == before


def test_a_signature_nbformat_could_only_keep_in_memory_is_a_failure(tmp_path, monkeypatch):
    # the database path cannot be opened, nor moved aside: nbformat then signs into memory
    data = tmp_path / "jupyter"
    (data / "nbsignatures.db").mkdir(parents=True)
    (data / "nbsignatures.db.bak" / "taken").mkdir(parents=True)
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(data))
    path = tiny_notebook(tmp_path / "run.ipynb")
    with pytest.warns(UserWarning, match=r"run\.ipynb is not signed, .*nbsignatures\.db cannot be written"):
        assert finish.finish_notebook(path) is False


def test_a_loopback_kernel_does_not_warn_of_tcp_without_encryption_but_other_warnings_show(project, tmp_path,
                                                                                            capfd, monkeypatch):
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter"))
    nb = nbformat.read(project / "notebooks" / "00_fixture.ipynb", as_version=4)
    # another warning on the logger ipykernel warns on, written to the stderr the kernel inherits
    nb.cells.insert(2, nbformat.v4.new_code_cell(
        'import logging\nlogging.getLogger("IPKernelApp").warning("another kernel warning")'))
    nbformat.write(nb, project / "notebooks" / "01_warns.ipynb")
    spec_text = (project / "experiments" / "00_fixture.toml").read_text()
    (project / "experiments" / "01_warns.toml").write_text(spec_text.replace("00_fixture", "01_warns"))
    capfd.readouterr()
    outcome = run_experiment(load_spec(project / "experiments" / "01_warns.toml"), results_root=tmp_path / "results")
    assert outcome.status == "completed", outcome.error
    printed = capfd.readouterr()
    assert kernel.UNENCRYPTED_TCP not in printed.out + printed.err
    assert "another kernel warning" in printed.err


@pytest.mark.parametrize(("ip", "loopback"), [("127.0.0.1", True), ("127.0.1.1", True), ("::1", True),
                                              ("0.0.0.0", False), ("10.1.2.3", False), ("kernel-host", False)])
def test_only_loopback_addresses_drop_the_warning(ip, loopback):
    assert kernel._loopback(ip) is loopback


def test_a_kernel_command_other_than_ipykernel_launcher_is_left_alone():
    cmd = ["python", "-m", "other_kernel", "-f", "conn.json"]
    assert kernel._without_unencrypted_warning(cmd) == cmd
    quiet = kernel._without_unencrypted_warning(["python", "-m", "ipykernel_launcher", "-f", "conn.json"])
    assert quiet[:2] == ["python", "-c"] and quiet[3:] == ["-f", "conn.json"]


def test_a_smoke_run_opens_with_a_banner_saying_it_is_not_results(project, tmp_path, monkeypatch):
    # issue 26: smoke-tier outputs (all zeros, CI 0.0-0.0) looked like results
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter"))
    spec = load_spec(project / "experiments" / "00_fixture.toml")
    smoke = run_experiment(spec, results_root=tmp_path / "smoke", smoke=True)
    assert smoke.status == "completed", smoke.error
    nb = nbformat.read(smoke.out_dir / "00_fixture.ipynb", as_version=4)
    assert nb.cells[0].id == finish.SMOKE_BANNER_ID and "Smoke tier: not results" in nb.cells[0].source
    assert all(f"`{name} = " in nb.cells[0].source for name in spec.smoke)
    assert trusted(smoke.out_dir / "00_fixture.ipynb")  # signed after the banner went in
    default = run_experiment(spec, results_root=tmp_path / "default")
    first = nbformat.read(default.out_dir / "00_fixture.ipynb", as_version=4).cells[0]
    assert first.get("id") != finish.SMOKE_BANNER_ID and "Smoke tier" not in first.source


def test_a_smoke_notebook_is_read_once_written_once_and_signed_with_its_banner(tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter"))
    path = tiny_notebook(tmp_path / "run.ipynb")
    reads, writes = [], []
    read, write = nbformat.read, finish.write_text_atomic
    monkeypatch.setattr(nbformat, "read", lambda *a, **kw: reads.append(a) or read(*a, **kw))
    monkeypatch.setattr(finish, "write_text_atomic", lambda *a: writes.append(a) or write(*a))
    assert finish.finish_notebook(path, {"N": 2}) is True
    assert (len(reads), len(writes)) == (1, 1)
    monkeypatch.undo()
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter"))
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[0].id == finish.SMOKE_BANNER_ID and "`N = 2`" in nb.cells[0].source
    assert trusted(path)  # the signature is over the file with its banner
    before = path.read_bytes()
    assert finish.finish_notebook(path, {"N": 2}) is True and path.read_bytes() == before  # one banner, no rewrite
    assert finish.finish_notebook(tiny_notebook(tmp_path / "default.ipynb")) is True
    assert trusted(tmp_path / "default.ipynb")


def test_the_runner_says_which_notebook_and_cell_is_running(project, tmp_path, monkeypatch, capfd):
    # issue 26: the runner showed a 0/1 bar for minutes with no hint of what was running
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter"))
    outcome = run_experiment(load_spec(project / "experiments" / "00_fixture.toml"), results_root=tmp_path / "r")
    assert outcome.status == "completed", outcome.error
    lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith("00_fixture: cell ")]
    nb = nbformat.read(outcome.out_dir / "00_fixture.ipynb", as_version=4)
    code = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code" and cell.source.strip()]
    assert [int(line.split()[2].split("/")[0]) - 1 for line in lines] == code  # every code cell, in order
    assert all(line.split()[2].endswith(f"/{len(nb.cells)}:") for line in lines)
