"""Build llama-cpp-python for the CPU it runs on, and never hand that build to another CPU.

    python roma_lab/lm/_native_build.py --python .venv/bin/python             # native kernels (default)
    python roma_lab/lm/_native_build.py --python .venv/bin/python --portable  # AVX2/FMA/F16C, any x86-64-v3

The Makefile runs it before installing the extras, with the standard library only (roma_lab is not
installed yet). llama-cpp-python ships as a source package that compiles llama.cpp; pip caches the
wheel it builds keyed by the source package alone, so a native build (``GGML_NATIVE=ON``, which
compiles for the build machine's instruction sets) would be handed as-is to a machine without them,
where it dies with an illegal instruction. So this script builds the wheel with pip's cache off and
keeps it in a folder of its own, keyed by everything the binary depends on: the package version, the
compile flags, the CPU's instruction-set flags (native builds only), the compiler and the Python tag.
Another CPU gets another key, hence its own build. The venv records the key it holds, so a venv that
already has the right build costs nothing, and one copied to another CPU is rebuilt.

Native kernels measured on an AMD EPYC with AVX-512/VNNI: prompt evaluation x1.31 (design/local_model.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

PACKAGE = "llama-cpp-python"
# No tests, examples, tools or server: ~5 minutes on 2 cores instead of ~15.
COMMON = ("-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_TOOLS=OFF",
          "-DLLAMA_BUILD_SERVER=OFF")
CMAKE_ARGS = {
    "native": ("-DGGML_NATIVE=ON",) + COMMON,
    # The portable build of the Makefile before native builds: AVX2, FMA and F16C, no AVX-512.
    "portable": ("-DGGML_NATIVE=OFF", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON") + COMMON,
}
# A native build leaves out Intel's AMX kernels: /proc/cpuinfo can list AMX where the hypervisor does not
# let a program use it, and ggml's first tile instruction then dies (seen on a Firecracker VM, 2026-12-05:
# a general protection fault at `ldtilecfg`, the whole model process gone). GCC and Clang keep an explicit
# -mno-<isa> over what -march=native would turn on. Given through CFLAGS/CXXFLAGS, which CMake reads.
NATIVE_CFLAGS = {"x86_64": ("-mno-amx-tile", "-mno-amx-int8", "-mno-amx-bf16")}
MARKER = "llama-cpp-build.json"  # in the venv: the key of the build it holds


def pinned_version(pyproject: Path) -> str:
    """The one version of llama-cpp-python the project pins (every extra pins the same one)."""
    data = tomllib.loads(pyproject.read_text())
    found = {m.group(1) for deps in data["project"]["optional-dependencies"].values() for dep in deps
             if (m := re.fullmatch(r"llama-cpp-python(?:\[[^\]]*\])?==([\w.]+)", dep.replace(" ", "")))}
    if len(found) != 1:
        raise SystemExit(f"{pyproject}: expected one pinned {PACKAGE} version across the extras, found {sorted(found)}")
    return found.pop()


def cpu_flags(cpuinfo: str | None = None) -> tuple[str, ...]:
    """The CPU's instruction-set flags (Linux's /proc/cpuinfo), sorted; () where they cannot be read."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return ()
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):  # x86 / ARM
            return tuple(sorted(set(value.split())))
    return ()


def compiler() -> str:
    cc = os.environ.get("CC", "cc")
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return f"{cc}: unknown"
    return out.splitlines()[0] if out else f"{cc}: unknown"


def build_key(version: str, mode: str, flags: tuple[str, ...], machine: str, compiler_line: str,
              python_tag: str) -> str:
    """What the binary depends on, hashed. A portable build does not depend on the CPU's flags."""
    if mode not in CMAKE_ARGS:
        raise ValueError(f"mode must be one of {sorted(CMAKE_ARGS)}, got {mode!r}")
    if mode == "native" and not flags:
        raise ValueError("a native build needs the CPU's flags; none could be read (use --portable)")
    what = {"package": PACKAGE, "version": version, "mode": mode, "cmake_args": CMAKE_ARGS[mode],
            "cflags": compile_flags(mode, machine), "env_cflags": [os.environ.get(v, "") for v in ("CFLAGS", "CXXFLAGS")],
            "cpu_flags": flags if mode == "native" else (),
            "machine": machine, "compiler": compiler_line, "python": python_tag}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]


def compile_flags(mode: str, machine: str) -> tuple[str, ...]:
    """The C/C++ flags a build adds to the environment's: a native x86-64 build's AMX opt-out."""
    return NATIVE_CFLAGS.get(machine.lower().replace("amd64", "x86_64"), ()) if mode == "native" else ()


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "roma_lab" / PACKAGE


def venv_info(python: str) -> tuple[str, str | None, str]:
    """(python tag, installed llama-cpp-python version or None, the venv's prefix) of ``python``."""
    code = ("import sys, json, importlib.metadata as m\n"
            "try: v = m.version('llama-cpp-python')\nexcept m.PackageNotFoundError: v = None\n"
            "print(json.dumps([f'cp{sys.version_info[0]}{sys.version_info[1]}', v, sys.prefix]))")
    tag, installed, prefix = json.loads(subprocess.run([python, "-c", code], check=True, capture_output=True,
                                                       text=True).stdout)
    return tag, installed, prefix


def ensure(python: str, mode: str, pyproject: Path, cache: Path | None = None) -> str:
    """Install the build for this CPU into ``python``'s environment; returns what was done."""
    version = pinned_version(pyproject)
    tag, installed, prefix = venv_info(python)
    flags = cpu_flags() if mode == "native" else ()
    key = build_key(version, mode, flags, platform.machine(), compiler(), tag)
    marker = Path(prefix) / MARKER
    try:
        held = json.loads(marker.read_text()).get("key")
    except (OSError, ValueError, AttributeError):
        held = None
    if installed == version and held == key:
        return f"{PACKAGE} {version}: the {mode} build for this CPU is installed (key {key})"
    folder = (cache or cache_root()) / f"{version}-{mode}-{key}"
    wheels = sorted(folder.glob("*.whl"))
    if not wheels:
        wheels = [build(python, version, mode, folder)]
        done = f"built {PACKAGE} {version} ({mode}, key {key}) into {folder}"
    else:
        done = f"{PACKAGE} {version}: installed the {mode} build for this CPU from {folder}"
    subprocess.run([python, "-m", "pip", "install", "--no-deps", "--force-reinstall", "--no-index",
                    str(wheels[0])], check=True)
    marker.write_text(json.dumps({"key": key, "mode": mode, "version": version, "wheel": str(wheels[0])}) + "\n")
    return done


def build(python: str, version: str, mode: str, folder: Path) -> Path:
    """Compile the wheel with pip's cache off (so pip never keeps a CPU-specific build under a key
    that ignores the CPU); move it into ``folder`` only once whole."""
    env = dict(os.environ, CMAKE_ARGS=" ".join(CMAKE_ARGS[mode]))
    for var in ("CFLAGS", "CXXFLAGS"):
        env[var] = " ".join(filter(None, (os.environ.get(var, ""), *compile_flags(mode, platform.machine()))))
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
        print(f"{PACKAGE} {version}: compiling a {mode} build (about 5 minutes on 2 cores)", flush=True)
        subprocess.run([python, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", "--no-binary", PACKAGE,
                        "-w", tmp, f"{PACKAGE}=={version}"], check=True, env=env)
        (wheel,) = Path(tmp).glob("*.whl")
        staged = Path(tmp) / "staged"
        staged.mkdir()
        shutil.move(str(wheel), staged / wheel.name)
        try:
            staged.rename(folder)
        except OSError:  # another build finished first: use it
            if not any(folder.glob("*.whl")):
                raise
    return next(folder.glob("*.whl"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="the venv's python")
    parser.add_argument("--portable", action="store_true",
                        help="portable AVX2/FMA/F16C kernels instead of this CPU's own")
    parser.add_argument("--pyproject", type=Path, default=Path(__file__).resolve().parents[2] / "pyproject.toml")
    args = parser.parse_args(argv)
    print(ensure(args.python, "portable" if args.portable else "native", args.pyproject), flush=True)


if __name__ == "__main__":
    sys.exit(main())
