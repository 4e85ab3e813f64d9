"""Binomial trees: step counts ceil(log2 N) and bytes as the closed forms say. (simulate ==
numpy reference for every algorithm: test_algorithms.py.)"""

import math

import pytest

from ringtree.algorithms.tree import tree_all_reduce, tree_broadcast, tree_reduce
from ringtree.collectives import Collective

TREE_COLLECTIVES = [Collective.BROADCAST, Collective.REDUCE, Collective.ALL_REDUCE]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 8, 9, 13, 16, 17, 31, 32, 33, 100])
def test_binomial_steps_are_ceil_log2(n):
    levels = math.ceil(math.log2(n)) if n > 1 else 0
    for root in {0, n - 1, n // 2}:
        assert tree_broadcast(n, root=root).n_steps == levels
        assert tree_reduce(n, root=root).n_steps == levels
    assert tree_all_reduce(n).n_steps == 2 * levels
    if n > 1:
        assert tree_all_reduce(n, n_chunks=5).n_steps == 2 * levels + 5 - 1


@pytest.mark.parametrize("n", [2, 5, 8, 12])
def test_unpipelined_all_reduce_is_reduce_then_broadcast(n):
    ar = tree_all_reduce(n, n_chunks=1)
    both = tree_reduce(n).then(
        tree_broadcast(n), collective=Collective.ALL_REDUCE, algorithm="tree"
    )
    assert [set(s.transfers) for s in ar.steps] == [set(s.transfers) for s in both.steps]


@pytest.mark.parametrize("n", [2, 3, 6, 8, 11, 16])
def test_tree_bytes(n):
    levels = math.ceil(math.log2(n))
    count, item = 60 * n, 4
    size = count * item
    for root in (0, n - 1):
        b = tree_broadcast(n, root=root)
        assert b.bytes_sent(root, count, item) == levels * size  # root sends to L children
        assert all(b.bytes_received(r, count, item) == size for r in range(n) if r != root)
        red = tree_reduce(n, root=root)
        assert all(red.bytes_sent(r, count, item) == size for r in range(n) if r != root)
        assert red.bytes_sent(root, count, item) == 0
    ar = tree_all_reduce(n, n_chunks=4)
    assert max(ar.bytes_sent(r, count, item) for r in range(n)) == levels * size
    # every rank but the root sends S up once; every rank but the root receives S down once
    assert sum(ar.bytes_sent(r, count, item) for r in range(n)) == 2 * (n - 1) * size


def test_a_parent_hears_its_children_in_different_steps():
    s = tree_all_reduce(16, n_chunks=3)
    for step in s.steps:
        writes = [(t.dst, t.chunk) for t in step.transfers]
        assert len(writes) == len(set(writes))


@pytest.mark.parametrize("chunks", [1, 3, 8, 20])
def test_the_root_link_sets_the_pace(chunks):
    """The root receives chunk t-k from its child at level k and sends chunk t-L-(L-1-k) to
    it: per step it moves r(t) chunks in and s(t) = r(t-L) out, and it is the busiest rank."""
    n, levels, item = 16, 4, 4
    count = 40 * chunks
    s = tree_all_reduce(n, n_chunks=chunks)

    def r(t):
        return sum(0 <= t - k < chunks for k in range(levels))

    want = [max(r(t), r(t - levels)) * (count // chunks) * item for t in range(s.n_steps)]
    assert s.step_bytes(count, item) == want
