"""The llama.cpp build is keyed by the CPU it was compiled for, so no CPU is handed another's build."""

from __future__ import annotations

import json
import platform
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from roma_lab.lm import _native_build as nb

ROOT = Path(__file__).resolve().parents[1]
AVX2 = tuple(sorted("fpu sse2 avx avx2 fma f16c".split()))
AVX512 = tuple(sorted(AVX2 + ("avx512f", "avx512bw", "avx512_vnni")))


def key(mode="native", flags=AVX512, version="0.3.36", compiler="gcc 12.2.0", python="cp311", machine="x86_64"):
    return nb.build_key(version, mode, flags, machine, compiler, python)


def test_a_native_build_is_keyed_by_every_cpu_flag():
    assert key(flags=AVX512) != key(flags=AVX2)
    assert key(flags=AVX512) != key(flags=AVX512[:-1])  # one instruction set less is another CPU
    assert key(flags=tuple(reversed(AVX512))) != key(flags=AVX2)
    for other in ({"version": "0.3.37"}, {"compiler": "gcc 13"}, {"python": "cp312"}, {"machine": "aarch64"}):
        assert key(**other) != key()


def test_a_portable_build_is_the_same_on_every_cpu_and_differs_from_a_native_one():
    assert key("portable", AVX512) == key("portable", AVX2)
    assert key("portable", AVX512) != key("native", AVX512)


def test_a_native_build_without_readable_flags_is_refused():
    with pytest.raises(ValueError, match="--portable"):
        key("native", ())
    with pytest.raises(ValueError, match="mode"):
        key("fastest")


def test_cpu_flags_read_x86_and_arm_and_nothing_else():
    assert nb.cpu_flags("processor\t: 0\nflags\t\t: sse2 avx2 avx2 fma\n") == ("avx2", "fma", "sse2")
    assert nb.cpu_flags("Features\t: fp asimd sve\n") == ("asimd", "fp", "sve")
    assert nb.cpu_flags("model name : something\n") == ()


def test_the_project_pins_one_version_and_the_makefile_leaves_nothing_to_pips_cache():
    assert re.fullmatch(r"\d+\.\d+\.\d+", nb.pinned_version(ROOT / "pyproject.toml"))
    makefile = (ROOT / "Makefile").read_text()
    # CMAKE_ARGS exported to `pip install -e` would let pip build and cache a CPU-specific wheel
    # under a key that ignores the CPU.
    assert "CMAKE_ARGS" not in makefile
    stamp = makefile[makefile.index("$(VENV)/.installed-%:"):]
    assert stamp.index("_native_build.py") < stamp.index("pip install -e")
    for target in ("reproduce", "quickstart", "test", "smoke", "bench"):
        line = next(x for x in makefile.splitlines() if x.startswith(f"{target}:"))
        assert "llama-build-" in line, line


def test_two_pins_that_disagree_are_refused(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n[project.optional-dependencies]\n'
                         'a = ["llama-cpp-python==0.3.36"]\nb = ["llama-cpp-python[server]==0.3.35"]\n')
    with pytest.raises(SystemExit, match="one pinned"):
        nb.pinned_version(pyproject)


FAKE_PYTHON = """#!{python}
# A stand-in venv python: answers venv_info's question and records pip's commands.
import json, sys, pathlib
state = pathlib.Path({state!r})
data = json.loads(state.read_text())
args = sys.argv[1:]
if args[0] == "-c":
    print(json.dumps(["cp311", data["installed"], data["prefix"]]))
elif args[:3] == ["-m", "pip", "wheel"]:
    import os
    data["build_env"] = {{v: os.environ.get(v) for v in ("CMAKE_ARGS", "CFLAGS", "CXXFLAGS")}}
    out = pathlib.Path(args[args.index("-w") + 1])
    (out / "llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl").write_text(data["cpu"])
    data["log"].append("wheel")
elif args[:3] == ["-m", "pip", "install"]:
    data["installed"] = "0.3.36"
    data["log"].append("install " + pathlib.Path(args[-1]).read_text())
state.write_text(json.dumps(data))
"""


@pytest.fixture
def venv(tmp_path):
    prefix = tmp_path / "venv"
    prefix.mkdir()
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"installed": None, "prefix": str(prefix), "cpu": "A", "log": []}))
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON.format(python=sys.executable, state=str(state)))
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n[project.optional-dependencies]\na = ["llama-cpp-python==0.3.36"]\n')

    class Venv:
        def ensure(self, mode="native"):
            return nb.ensure(str(python), mode, pyproject, cache=tmp_path / "cache")

        def on_cpu(self, name, flags, monkeypatch):
            monkeypatch.setattr(nb, "cpu_flags", lambda: flags)
            self.set(cpu=name)

        def set(self, **values):
            data = json.loads(state.read_text())
            data.update(values)
            state.write_text(json.dumps(data))

        @property
        def log(self):
            return json.loads(state.read_text())["log"]

        @property
        def build_env(self):
            return json.loads(state.read_text())["build_env"]

    return Venv()


def test_each_cpu_gets_its_own_build_and_a_venv_with_the_right_one_is_left_alone(venv, monkeypatch):
    venv.on_cpu("A", AVX512, monkeypatch)
    assert "built" in venv.ensure()
    assert venv.log == ["wheel", "install A"]
    assert "is installed" in venv.ensure()  # same CPU: nothing to do
    assert venv.log == ["wheel", "install A"]

    venv.on_cpu("B", AVX2, monkeypatch)  # the venv (or the cache) moved to a CPU without AVX-512
    assert "built" in venv.ensure()
    assert venv.log == ["wheel", "install A", "wheel", "install B"]  # never A's build

    venv.on_cpu("A", AVX512, monkeypatch)  # back on A: its build comes from the cache, not compiled again
    assert "from" in venv.ensure()
    assert venv.log[-1] == "install A" and venv.log.count("wheel") == 2


def test_portable_and_native_builds_are_kept_apart(venv, monkeypatch):
    venv.on_cpu("A", AVX512, monkeypatch)
    venv.ensure("native")
    venv.set(cpu="P")
    assert "built" in venv.ensure("portable")
    assert venv.log == ["wheel", "install A", "wheel", "install P"]


AMX_OFF = ("-mno-amx-tile", "-mno-amx-int8", "-mno-amx-bf16")


def test_a_native_x86_build_leaves_out_amx_and_says_so_in_its_key(venv, monkeypatch):
    # AMX listed by /proc/cpuinfo but refused by the hypervisor: the first tile instruction killed the model.
    assert nb.compile_flags("native", "x86_64") == AMX_OFF
    assert nb.compile_flags("native", "AMD64") == AMX_OFF
    assert nb.compile_flags("portable", "x86_64") == ()
    assert nb.compile_flags("native", "aarch64") == ()  # GCC on ARM knows no such flag
    monkeypatch.setattr(nb.platform, "machine", lambda: "x86_64")
    monkeypatch.setenv("CFLAGS", "-O2")
    monkeypatch.delenv("CXXFLAGS", raising=False)
    venv.on_cpu("A", AVX512, monkeypatch)
    venv.ensure()
    env = venv.build_env
    assert env["CFLAGS"].split() == ["-O2", *AMX_OFF]  # the user's flags kept, ours after them
    assert env["CXXFLAGS"].split() == list(AMX_OFF)
    assert "-DGGML_NATIVE=ON" in env["CMAKE_ARGS"].split()
    venv.set(cpu="P")
    venv.ensure("portable")
    assert venv.build_env["CFLAGS"].split() == ["-O2"]


def test_the_environments_compile_flags_are_part_of_the_key(monkeypatch):
    monkeypatch.delenv("CFLAGS", raising=False)
    plain = key()
    monkeypatch.setattr(nb, "NATIVE_CFLAGS", {})  # a build with AMX is another binary: another key
    assert key() != plain
    monkeypatch.undo()
    monkeypatch.delenv("CFLAGS", raising=False)
    assert key() == plain
    monkeypatch.setenv("CFLAGS", "-O0")
    assert key() != plain


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64") or not shutil.which("cc"),
                    reason="needs an x86-64 C compiler")
def test_the_compiler_keeps_the_amx_opt_out_over_march_native():
    # CMake puts CFLAGS before ggml's own -march=native: the opt-out must survive that order.
    macros = subprocess.run(["cc", *AMX_OFF, "-march=native", "-dM", "-E", "-"], input="", capture_output=True,
                            text=True, check=True).stdout
    assert "__AMX_TILE__" not in macros and "__AMX_INT8__" not in macros and "__AMX_BF16__" not in macros
    assert "__SSE2__" in macros  # the rest of -march=native is still there
