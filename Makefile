# The README's two commands: `make reproduce` (run every experiment into results/) and
# `make test`. Each creates or updates the local virtualenv itself.

PYTHON ?= python3
VENV ?= .venv
EXTRAS ?= dev
PY := $(VENV)/bin/python

# LiteLLM otherwise fetches its model cost map on import, losing ~7 s offline.
export LITELLM_LOCAL_MODEL_COST_MAP := True
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: reproduce test smoke bench venv

# Re-install only when pyproject.toml changes; never recreate an existing venv
# (running `venv` over it with another interpreter would break it).
$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -e '.[$(EXTRAS)]'
	touch $@

venv: $(VENV)/.installed

reproduce: $(VENV)/.installed
	$(PY) -m roma_lab.experiments run --all

# pytest exits 5 when it collects nothing: that is a broken suite here, never a pass.
test: $(VENV)/.installed
	@$(PY) -m pytest; status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests; treating as failure" >&2; exit 1; fi; \
	exit $$status

smoke: $(VENV)/.installed
	@$(PY) -m pytest -m smoke tests/test_notebooks.py; status=$$?; \
	if [ $$status -eq 5 ]; then echo "make smoke: no smoke tests collected; treating as failure" >&2; exit 1; fi; \
	exit $$status

bench: $(VENV)/.installed
	@found=0; for script in benchmarks/bench_*.py; do \
		[ -f "$$script" ] || continue; found=1; \
		echo "== $$script"; $(PY) "$$script" || exit 1; \
	done; \
	if [ $$found -eq 0 ]; then echo "make bench: no benchmarks/bench_*.py found" >&2; exit 1; fi
