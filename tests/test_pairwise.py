"""Pairwise exchange: the ring's steps and bytes, and what sets it apart from the ring, that
no send waits for data received earlier. (simulate == numpy reference for every algorithm:
test_algorithms.py.)"""

import pytest

from ringtree.algorithms import build
from ringtree.collectives import Collective, block_bounds
from ringtree.runtime.program import compile_program

COLLECTIVES = [Collective.REDUCE_SCATTER, Collective.ALL_GATHER, Collective.ALL_REDUCE]


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_step_k_pairs_each_rank_with_the_ranks_k_away(n):
    s = build(Collective.REDUCE_SCATTER, "pairwise", n)
    assert s.n_steps == n - 1
    for k, step in enumerate(s.steps, start=1):
        assert sorted((t.src, t.dst, t.chunk) for t in step.transfers) == [
            (r, (r + k) % n, (r + k) % n) for r in range(n)
        ]


@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("n", [3, 4, 7])
def test_same_steps_and_wire_bytes_as_the_ring(collective, n):
    count, item = 1000 * n + 3, 4  # uneven blocks
    ring, pw = build(collective, "ring", n), build(collective, "pairwise", n)
    assert pw.n_steps == ring.n_steps
    assert pw.step_bytes(count, item) == ring.step_bytes(count, item)
    bounds = block_bounds(count, n)
    sizes = [bounds[r + 1] - bounds[r] for r in range(n)]
    sent = {
        Collective.REDUCE_SCATTER: [count - b for b in sizes],
        Collective.ALL_GATHER: [(n - 1) * b for b in sizes],
        Collective.ALL_REDUCE: [count + (n - 2) * b for b in sizes],
    }[collective]
    assert [pw.bytes_sent(r, count, item) for r in range(n)] == [x * item for x in sent]


@pytest.mark.parametrize("n", [3, 4, 6])
def test_no_reduce_scatter_send_waits_for_a_receive_unlike_the_ring(n):
    """Every pairwise send reads the rank's own input, so all N-1 can be posted at once; the
    ring forwards at step k what it reduced at step k-1."""
    count = 4096 * n
    for rank in range(n):
        pw = compile_program(build(Collective.REDUCE_SCATTER, "pairwise", n), rank, count, 4,
                             in_place=False)
        ring = compile_program(build(Collective.REDUCE_SCATTER, "ring", n), rank, count, 4,
                               in_place=False)
        assert [op.ready for op in pw.sends] == [0] * (n - 1)
        assert [op.ready for op in ring.sends] == list(range(n - 1))
