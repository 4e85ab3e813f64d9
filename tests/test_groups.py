"""Groups as real training scripts make them, on real processes (127.0.0.1): the group
contract suite (tests/group_cases.py) over gloo at N = 4 and 5 and over MPI sub-communicators;
a peer absent at the first call; mismatched calls caught with the default settings, on new
and on used call shapes; the decision log. Each test is one launch of a whole batch of cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from needs import MPI_MISSING
from ringtree.procs.launch import launch_body

pytestmark = pytest.mark.multiproc  # every test here starts processes
HERE = Path(__file__).parent
ENV = {"PYTHONPATH": str(HERE)}


def run(n: int, backend: str, body: str, config: dict, timeout_s: float = 240,
        all_ok: bool = True) -> list[dict]:
    """Every rank's result; ``all_ok``: every rank must also have exited cleanly."""
    out = launch_body(n, backend, body, {"timeout_s": 30, **config}, timeout_s=timeout_s, env=ENV)
    for r in out.ranks:  # a rank's own failure first: it explains a peer's
        assert not (r.result and r.result.get("failures")), r.result["failures"][0]
    assert out.ok or not all_ok, out.failure_message(timeout_s)
    return [r.result for r in out.ranks]


@pytest.mark.parametrize("n", [4, 5])
def test_gloo_subgroups_match_torch_on_every_group_collective_and_algorithm(n):
    results = run(n, "gloo", "group_cases:run_groups", {"seed": n})
    assert min(r["cases"] for r in results) >= 150, [r["cases"] for r in results]


@pytest.mark.skipif(MPI_MISSING, reason="mpi4py/mpirun not installed (pip install ringtree[mpi])")
def test_mpi_sub_communicators_match_mpi():
    results = run(4, "mpi", "group_cases:run_groups", {"seed": 7})
    assert min(r["cases"] for r in results) >= 100, [r["cases"] for r in results]


@pytest.mark.parametrize("backend", ["gloo", pytest.param("mpi", marks=pytest.mark.skipif(
    MPI_MISSING, reason="mpi4py/mpirun not installed"))])
def test_mismatched_calls_raise_mismatch_error_on_every_rank_by_default(backend):
    results = run(3, backend, "group_cases:mismatches", {})
    assert all(r["cases"] == 5 for r in results)  # and no rank died of a signal (run: ok)


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("backend", ["gloo", pytest.param("mpi", marks=pytest.mark.skipif(
    MPI_MISSING, reason="mpi4py/mpirun not installed"))])
def test_a_mismatch_on_a_used_shape_is_an_error_on_every_rank_never_a_crash(backend, n):
    # issue 30: over gloo one rank returned stale data while the other died of SIGABRT;
    # over MPI, MPI_ERR_TRUNCATE and heap corruption. gloo's ranks leave the broken groups
    # open; MPI's finalize (one that does not makes mpirun end the others before they report)
    results = run(n, backend, "group_cases:used_shape_mismatches",
                  {"call_timeout_s": 1.0, "keep_group": backend == "gloo"}, timeout_s=120)
    assert all(r["cases"] == 4 for r in results)  # and no rank died of a signal (run: ok)


@pytest.mark.parametrize("backend", ["gloo", pytest.param("mpi", marks=pytest.mark.skipif(
    MPI_MISSING, reason="mpi4py/mpirun not installed"))])
def test_a_peer_absent_at_the_first_call_is_a_peer_error_within_the_timeout(backend):
    # the absent rank stays until its peers are done (at most wait_s): silent, not dead
    cfg = {"call_timeout_s": 1.0, "wait_s": 30.0, "keep_group": True}
    # under MPI, mpirun ends the absent rank once the others have left without MPI_Finalize
    results = run(3, backend, "group_cases:absent_peer", cfg, timeout_s=60, all_ok=False)
    assert all(r is not None and r["took_s"] < 4.0 for r in results[:2]), results


@pytest.mark.parametrize("backend", ["gloo", pytest.param("mpi", marks=pytest.mark.skipif(
    MPI_MISSING, reason="mpi4py/mpirun not installed"))])
def test_a_rank_after_its_peers_gave_up_fails_like_them_saying_so(backend):
    results = run(2, backend, "late_cases:late_peer", {"call_timeout_s": 1.0, "late_s": 2.0},
                  timeout_s=120)
    assert all(r["cases"] == 2 for r in results)
