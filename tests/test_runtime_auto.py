"""algorithm="auto" in the engine: the link each transport prices, and what it picks."""

from __future__ import annotations

import pytest

from ringtree.collectives import Collective
from ringtree.cost.links import SHARED_MEMORY, get_link
from ringtree.runtime.auto import _choose, choose, link_for, seen_link

MiB = 1 << 20


@pytest.mark.parametrize("kind", ["gloo", "mpi"])
def test_a_core_per_rank_sees_the_link_as_measured(kind):
    base = SHARED_MEMORY if kind == "mpi" else get_link("loopback")
    assert seen_link(kind, 2, cores=2) == base
    assert seen_link(kind, 3, cores=8) == base
    assert link_for(kind, cores=2).plain == base


def test_shared_cores_shrink_bandwidth_by_how_bytes_move():
    """4 ranks on 2 cores: latency x 2^2.7 for both; loopback TCP keeps 1/sqrt(2) of its
    bandwidth, shared memory (a CPU copy per byte) half of it, and a reduced byte costs
    twice numpy's add time."""
    tcp, shm = seen_link("gloo", 4, cores=2), seen_link("mpi", 4, cores=2)
    loop = get_link("loopback")
    assert tcp.alpha_s == pytest.approx(loop.alpha_s * 2**2.7)
    assert tcp.bandwidth_Bps == pytest.approx(loop.bandwidth_Bps / 2**0.5)
    assert tcp.gamma_s_per_byte == loop.gamma_s_per_byte == 0
    assert shm.alpha_s == pytest.approx(10e-6 * 2**2.7)
    assert shm.bandwidth_Bps == pytest.approx(8e9 / 2)
    assert shm.gamma_s_per_byte == pytest.approx(0.04e-9 * 2)


def hand_all_reduce_times(size: float, n: int, alpha: float, bw: float, gamma: float) -> dict:
    """Alpha-beta-gamma time of each all-reduce at N = 4 (a power of two), by hand."""
    assert n == 4
    return {
        "ring": 6 * alpha + 1.5 * size / bw + 0.75 * size * gamma,  # 2(N-1) steps of S/N
        "recursive": 2 * alpha + 2 * size / bw + 2 * size * gamma,  # log N steps of S
        "rabenseifner": 4 * alpha + 1.5 * size / bw + 0.75 * size * gamma,  # S/2, S/4, ...
    }


@pytest.fixture
def two_cores(monkeypatch):
    """This process seen as a 2-core machine (the project's), with auto's cache cleared."""
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    _choose.cache_clear()
    yield
    _choose.cache_clear()


@pytest.mark.parametrize("size", [16 * 1024, 64 * 1024, 256 * 1024, MiB, 4 * MiB, 64 * MiB])
def test_mpi_on_shared_cores_picks_the_hand_computed_fastest(two_cores, size):
    hand = hand_all_reduce_times(size, 4, 10e-6 * 2**2.7, 4e9, 0.08e-9)
    among = "ring,recursive,rabenseifner"
    got = choose(Collective.ALL_REDUCE, 4, size, 4, kind="mpi", algo_env=among)[0]
    low = min(hand.values())  # ties within 1 % go to the first registered (ring first)
    assert got == next(a for a in hand if hand[a] <= low * 1.01)


def test_mpi_auto_on_4_ranks_and_2_cores_reduces_less_from_1_mib(two_cores):
    """Measured at N=4 on 2 cores: recursive doubling, which reduces the whole buffer at every
    step, took 1.5-1.8x Open MPI's time at 1 MiB, Rabenseifner 1.35-1.4x."""
    pick = lambda size: choose(Collective.ALL_REDUCE, 4, size, 4, kind="mpi", algo_env="")[0]  # noqa: E731
    assert pick(64 * 1024) == "recursive"
    assert pick(MiB) == pick(4 * MiB) == "rabenseifner"
    assert pick(64 * MiB) == "ring"


@pytest.mark.parametrize("size", [64 * 1024, 256 * 1024, MiB, 4 * MiB])
def test_mpi_auto_on_2_ranks_halves_the_reduction_from_512_kib(two_cores, size):
    """N=2: the ring moves what recursive doubling moves in two steps instead of one, and
    reduces half of it: alpha against gamma x S/2 (crossover 2 alpha / gamma = 500 kB)."""
    alpha, gamma = 10e-6, 0.04e-9
    ring, recursive = 2 * alpha + size / 2 * gamma, alpha + size * gamma  # same bytes sent
    want = "ring" if ring < recursive else "recursive"
    assert choose(Collective.ALL_REDUCE, 2, size, 4, kind="mpi", algo_env="")[0] == want
    assert want == ("ring" if size >= MiB else "recursive")


def test_ringtree_algo_forces_the_choice(two_cores):
    assert choose(Collective.ALL_REDUCE, 4, MiB, 4, kind="mpi", algo_env="ring")[0] == "ring"


def test_gloo_all_to_all_on_4_ranks_and_2_cores_takes_bruck_below_1_mib(two_cores):
    """Hand-computed on the loopback model at N=4 on 2 cores (latencies x 2^2.7, bandwidth
    / 2^0.5): linear posts 3 messages each way in 1 step, Bruck 1 each way in each of its 2
    steps, moving S/2 per step instead of 3S/4 in all; measured with the engine (medians of
    5 runs, docs/engine.md) Bruck ran 1.12-1.35x gloo's time at 4-256 KiB where linear ran
    1.29-1.59x, and linear won from 1 MiB (1.02x against 1.38x)."""
    loop = get_link("loopback")
    o = 40e-6
    grow, bw = 2**2.7, loop.bandwidth_Bps / 2**0.5
    step = loop.alpha_s - 2 * o  # the step's own part; each message costs o
    for size in (4096, 16384, 65536, 262144, MiB, 4 * MiB):
        linear = (step + 6 * o) * grow + 0.75 * size / bw
        bruck = 2 * (step + 2 * o) * grow + size / bw
        pairwise = 3 * (step + 2 * o) * grow + 0.75 * size / bw
        hand = {"linear": linear, "pairwise": pairwise, "bruck": bruck}
        want = min(hand, key=hand.get)
        among = "linear,pairwise,bruck"
        assert choose(Collective.ALL_TO_ALL, 4, size, 4, kind="gloo", algo_env=among)[0] == want
        assert want == ("bruck" if size < MiB else "linear")
    assert choose(Collective.ALL_TO_ALL, 2, 4096, 4, kind="gloo", algo_env="")[0] == "pairwise"


def test_one_algorithm_in_the_environment_leaves_the_collectives_without_it_alone(monkeypatch):
    """RINGTREE_ALGO=ring, as NCCL_ALGO=ring: the all-reduce runs the ring, the barrier and
    the all-to-all (which have none) run what auto picks, and a WARN line says so."""
    import logging

    import numpy as np

    import ringtree
    from ringtree.events import Recorder
    from ringtree.runtime import run_ranks
    from ringtree.runtime.log import LOGGER

    monkeypatch.setenv("RINGTREE_ALGO", "ring;allreduce:ring")  # first entry: every collective
    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    LOGGER.addHandler(handler)

    def body(t):  # noqa: ANN001, ANN202
        rec = Recorder(t.rank)
        ringtree.all_reduce(np.ones(8), group=t, recorder=rec)
        ringtree.barrier(group=t, recorder=rec)
        out = np.empty(8)
        ringtree.all_to_all_single(out, np.arange(8.0), group=t, recorder=rec)
        return [c.algorithm for c in rec.calls]

    try:
        results = run_ranks(4, body)
    finally:
        LOGGER.removeHandler(handler)
    for algorithms in results:
        assert algorithms[:2] == ["ring", "dissemination"] and algorithms[2] != "ring"
    assert any("RINGTREE_ALGO=ring;allreduce:ring names none of the barrier algorithms" in m
               for m in said), said
    assert any("none of the all-to-all algorithms" in m for m in said), said
