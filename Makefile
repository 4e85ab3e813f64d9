# The README's two set-up commands: `make demo` (the main job) and `make test` (the tests).
# Both create .venv on first use. torch is installed first, pinned, so that pip takes the
# CPU wheel instead of resolving an unpinned torch to a multi-GB CUDA build.
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
TORCH_SPEC ?= torch==2.13.0
EXTRAS ?= test,mpi

.PHONY: demo test test-fast lint venv clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e ".[$(EXTRAS)]"
	touch $@

demo: venv
	$(BIN)/ringtree demo

# lint-imports: the import contracts of pyproject.toml (DESIGN.md's layers).
# RINGTREE_REQUIRE_MPI: the MPI tests fail (instead of skipping) when MPI is missing.
# One run: every test on TEST_WORKERS pytest-xdist workers, one more than the cores, the
# multiproc tests (rank worlds, CLI subprocesses, mpirun) first (tests/conftest.py). Half of a
# multiproc test's time is waiting (a silent peer's timeout, a late rank); the extra worker's
# in-process tests fill it. Their ranks fork from a server that imported torch once
# (ringtree.procs.forked). MPI's tests share one worker (xdist group "mpi", --dist
# loadgroup): two MPI jobs at once spin against each other for the cores.
TEST_WORKERS ?= $(shell $(PYTHON) -c "import os; print((os.cpu_count() or 1) + 1)")
test: venv
	$(BIN)/lint-imports
	RINGTREE_REQUIRE_MPI=1 $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

# The inner loop: every test that starts no process and is not slow, one worker per core.
# `make test` before a commit runs them all.
test-fast: venv
	$(BIN)/python -m pytest -q -n auto -m "not multiproc and not slow"

# ruff check only, no `ruff format --check`: the code's tables (records, argparse declarations,
# NCCL's constant tables) are laid out by hand; the formatter would add ~2,000 lines and turn
# 28 repeated blocks under src/ into 49 (docs/architecture.md, "Layout").
lint: venv
	$(BIN)/ruff check src tests bench

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
