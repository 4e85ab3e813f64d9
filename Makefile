# The README's two set-up commands: `make demo` (the main job) and `make test` (the tests).
# Both create .venv on first use. torch is installed first, pinned, so that pip takes the
# CPU wheel instead of resolving an unpinned torch to a multi-GB CUDA build.
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
TORCH_SPEC ?= torch==2.13.0
EXTRAS ?= test

.PHONY: demo test lint venv clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e ".[$(EXTRAS)]"
	touch $@

demo: venv
	$(BIN)/ringtree demo

test: venv
	$(BIN)/python -m pytest

lint: venv
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
