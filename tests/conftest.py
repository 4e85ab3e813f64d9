"""Shared test helpers: random per-rank inputs and result comparison against the reference,
the ``run_cli`` fixture, and the ``multiproc`` guard: a test that starts a process (a rank
world through ringtree.procs.launch, a CLI subprocess, mpirun, multiprocessing) must carry
``@pytest.mark.multiproc``, so that ``-m 'not multiproc'`` (``make test-fast``) is the whole
in-process suite and nothing else."""

from __future__ import annotations

import multiprocessing.process
import re
import subprocess
import sys
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from hypothesis import settings

from ringtree.collectives import Collective, ReduceOp
from ringtree.procs.forked import _Server

settings.register_profile("ci", deadline=None, max_examples=60)
settings.load_profile("ci")

DTYPES = [np.float32, np.float64, np.int32, np.int64]
MULTIPROC = "multiproc"
#: The test whose setup, call or teardown runs now (empty between tests, at collection).
_running: list[pytest.Item] = []


#: Programs a library starts on its own, not a test's process: matplotlib runs ``fc-list`` once
#: to build its font cache, in whichever test first draws when the cache is empty.
EXEMPT = ("fc-list",)


def _refuse_unmarked(what: object) -> None:
    """Fail the running test if it lacks the ``multiproc`` marker."""
    if isinstance(what, (list, tuple)) and what and str(what[0]) in EXEMPT:
        return
    if _running and _running[-1].get_closest_marker(MULTIPROC) is None:
        pytest.fail(f"{_running[-1].nodeid} starts a process ({what!r}) without "
                    f"@pytest.mark.{MULTIPROC} (tests/conftest.py)", pytrace=False)


def _guard(start: Callable, what: Callable[..., object]) -> Callable:
    def guarded(self, *args, **kwargs):  # noqa: ANN001, ANN202 - the wrapped method's own
        _refuse_unmarked(what(self, *args))
        return start(self, *args, **kwargs)

    return guarded


# Every process start goes through one of these: subprocess.Popen (subprocess.run, mpirun,
# spawned ranks, the fork server), multiprocessing (torch.multiprocessing too) and the fork
# server's forks.
subprocess.Popen._execute_child = _guard(  # type: ignore[method-assign]
    subprocess.Popen._execute_child, lambda _, args, *rest: args)
multiprocessing.process.BaseProcess.start = _guard(  # type: ignore[method-assign]
    multiprocessing.process.BaseProcess.start, lambda proc: proc.name)
# and a rank forked by the launcher's fork server, which a Popen started only once
_Server.fork = _guard(_Server.fork, lambda _, argv, *rest: argv)  # type: ignore[method-assign]


#: A multiproc test that starts MPI ranks, by its name (test_mpi_..., [mpi], [mpi-3]).
_MPI_TEST = re.compile(r"(^|[_\[-])mpi([_\]-]|$)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The multiproc tests first (``make test``: they wait half their time, and the
    in-process tests after them fill the cores), MPI's in one pytest-xdist group (``--dist
    loadgroup``: one worker runs them one after another): two MPI jobs at once spin against
    each other for the cores."""
    items.sort(key=lambda item: item.get_closest_marker(MULTIPROC) is None)
    for item in items:
        if item.get_closest_marker(MULTIPROC) and _MPI_TEST.search(item.name):
            item.add_marker(pytest.mark.xdist_group("mpi"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator:
    """Note the running test (its fixtures' set-up and tear-down included) for the guard."""
    _running.append(item)
    try:
        return (yield)
    finally:
        _running.pop()


@pytest.fixture(scope="session")
def run_cli() -> Callable[..., subprocess.CompletedProcess]:
    """``run_cli(*argv, env=None, timeout=240)``: ``python -m ringtree.cli ARGV`` as the console
    script runs it, in a process of its own (text output captured; ``env`` replaces the
    environment). For what only a process shows: exit status, no traceback, no torch."""

    def run(*argv: str, env: dict[str, str] | None = None,
            timeout: float = 240) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "ringtree.cli", *argv], capture_output=True,
                              text=True, timeout=timeout, env=env)

    return run


def run_main(capsys: pytest.CaptureFixture, *argv: str) -> subprocess.CompletedProcess:
    """``ringtree ARGV`` in this process (``ringtree.cli.main``, what the console script calls),
    as ``run_cli`` returns it: exit status, stdout, stderr. Ranks it launches are processes
    (the test needs the marker); the command's own process is this one (no torch import)."""
    from ringtree.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(list(argv), code, out, err)


def main_captured(*argv: str) -> subprocess.CompletedProcess:
    """:func:`run_main` for fixtures wider than a test (no capsys): the output captured by
    redirecting ``sys.stdout``/``sys.stderr``, which the CLI's consoles write through."""
    import contextlib
    import io

    from ringtree.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return subprocess.CompletedProcess(list(argv), code, out.getvalue(), err.getvalue())


def refused(capsys: pytest.CaptureFixture, argv: list[str]) -> str:
    """``ringtree ARGV`` in this process (:func:`run_main`; the multiproc guard fails the test
    if it starts a process) must be refused: exit status 2, one ``ringtree: error:`` line on
    stderr, no traceback and nothing on stdout. Returns that line."""
    proc = run_main(capsys, *argv)
    err = proc.stderr
    assert proc.returncode == 2, (argv, proc.returncode, err)
    assert "Traceback" not in err and proc.stdout == "", (argv, proc.stdout, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("ringtree: error:"), err
    return err


def make_inputs(
    collective: Collective, n: int, count: int, dtype: type, op: ReduceOp, seed: int
) -> list[np.ndarray]:
    """Per-rank inputs of the collective's layout of ``count`` elements; small values so
    PRODUCT stays finite and sums exact in floats."""
    rng = np.random.default_rng(seed)
    lo, hi = (1, 3) if op is ReduceOp.PRODUCT else (-50, 50)
    spans = [collective.layout.span(count, n, r) for r in range(n)]  # a block, or everything
    return [rng.integers(lo, hi, stop - start).astype(dtype) for start, stop in spans]


def assert_results_equal(got: list, want: list, dtype: type) -> None:
    """Exact for integers; for floats a tolerance (schedules reduce in other orders)."""
    assert len(got) == len(want)
    for r, (g, w) in enumerate(zip(got, want, strict=True)):
        if w is None:
            continue
        assert g is not None, f"rank {r}: no result"
        assert g.shape == w.shape, f"rank {r}: shape {g.shape} != {w.shape}"
        if np.issubdtype(dtype, np.integer):
            np.testing.assert_array_equal(g, w, err_msg=f"rank {r}")
        else:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"rank {r}")
