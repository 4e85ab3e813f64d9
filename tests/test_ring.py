"""Ring algorithms: byte and step counts; the seed's two identities. (simulate == numpy
reference for every algorithm: test_algorithms.py.)"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import DTYPES, make_inputs
from ringtree.algorithms import build
from ringtree.algorithms.ring import ring_all_gather, ring_all_reduce, ring_reduce_scatter
from ringtree.collectives import Collective, ReduceOp
from ringtree.simulate import complete_chunks, simulate, track


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 8, 16])
def test_bytes_when_size_divides(n):
    count, item = 64 * n, 4
    size = count * item
    for col in (Collective.REDUCE_SCATTER, Collective.ALL_GATHER):
        s = build(col, "ring", n)
        assert s.n_steps == n - 1
        for r in range(n):
            assert s.bytes_sent(r, count, item) == (n - 1) * size // n
            assert s.bytes_received(r, count, item) == (n - 1) * size // n
    ar = build(Collective.ALL_REDUCE, "ring", n)
    assert ar.n_steps == 2 * (n - 1)
    assert all(ar.bytes_sent(r, count, item) == 2 * (n - 1) * size // n for r in range(n))


def test_bytes_uneven_chunks_are_the_chunks_moved():
    s = ring_all_reduce(4)
    count = 10  # chunks of 3, 3, 2, 2 elements
    for r in range(4):
        moved = sum(s.chunk_sizes(count)[t.chunk] for _, t in s.transfers() if t.src == r)
        assert s.bytes_sent(r, count, 8) == moved * 8
    # rank 0 sends chunks 0,3,2 (reduce-scatter) then 1,0,3 (all-gather)
    assert s.bytes_sent(0, count, 1) == 3 + 2 + 2 + 3 + 3 + 2


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8])
def test_seed_ownership_rule(n):
    held = track(ring_reduce_scatter(n))[-1]
    done = complete_chunks(ring_reduce_scatter(n), held)
    assert done == [[(i + 1) % n] for i in range(n)]
    # the collective's variant delivers block i to rank i
    api = ring_reduce_scatter(n, shift=-1)
    done = complete_chunks(api, track(api)[-1])
    assert done == [[i] for i in range(n)]


@pytest.mark.parametrize("n", [1, 2, 3, 6])
def test_all_reduce_is_reduce_scatter_then_all_gather(n):
    ar = ring_all_reduce(n)
    rs, ag = ring_reduce_scatter(n), ring_all_gather(n, start=1)
    assert ar.steps == rs.steps + ag.steps
    assert [st.phase for st in ar.steps] == ["reduce-scatter"] * (n - 1) + ["all-gather"] * (n - 1)


@given(
    n=st.integers(1, 12),
    count=st.integers(0, 300),
    root_seed=st.integers(0, 1000),
    op=st.sampled_from([ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX]),
    dtype=st.sampled_from(DTYPES),
)
def test_broadcast_is_all_reduce_with_identities(n, count, root_seed, op, dtype):
    """The seed's second identity, made precise: broadcast(x from src) == all-reduce where
    src holds x and every other rank holds the op's identity."""
    root = root_seed % n
    x = make_inputs(Collective.BROADCAST, 1, count, dtype, op, root_seed)[0]
    ident = np.full(count, op.identity(dtype), dtype=dtype)
    ar_inputs = [x if r == root else ident for r in range(n)]
    bcast = simulate(build(Collective.BROADCAST, "ring", n, root=root), [x] * n, op)
    allred = simulate(ring_all_reduce(n), ar_inputs, op)
    for b, a in zip(bcast, allred, strict=True):
        np.testing.assert_array_equal(b, a)


def test_chain_pipelining_steps_and_bytes():
    s = build(Collective.BROADCAST, "ring", 5, root=2, n_chunks=3)
    assert s.n_steps == 5 - 2 + 3
    count = 300
    sent = [s.bytes_sent(r, count, 4) for r in range(5)]
    assert sent[2] == count * 4 and sent[(2 + 4) % 5] == 0  # root sends S; last sends nothing
    r = build(Collective.REDUCE, "ring", 5, root=2, n_chunks=3)
    assert [r.bytes_sent(k, count, 4) for k in range(5)].count(count * 4) == 4
    assert r.bytes_sent(2, count, 4) == 0
