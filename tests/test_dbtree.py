"""Double binary tree: the trees' shape; every rank sends and receives about 2S in all, as in
the ring, and none carries much more than the others. (simulate == numpy reference for every
algorithm: test_algorithms.py.)"""

import math

import pytest

from ringtree.algorithms.dbtree import dbtree_all_reduce, double_binary_tree, inorder_tree
from ringtree.algorithms.tree import tree_all_reduce


def children(parent):
    out = [[] for _ in parent]
    for v, p in enumerate(parent):
        if p >= 0:
            out[p].append(v)
    return out


def depth(parent, v):
    d = 0
    while parent[v] >= 0:
        v, d = parent[v], d + 1
    return d


@pytest.mark.parametrize("n", list(range(1, 70)) + [100, 255, 256, 257, 1000])
def test_trees_are_binary_spanning_and_complementary(n):
    for parent in double_binary_tree(n):
        assert parent.count(-1) == 1
        assert all(len(c) <= 2 for c in children(parent))
        assert max(depth(parent, v) for v in range(n)) <= max(1, math.ceil(math.log2(n)))
    p0, p1 = double_binary_tree(n)
    interior0 = {v for v, c in enumerate(children(p0)) if c}
    interior1 = {v for v, c in enumerate(children(p1)) if c}
    both = interior0 & interior1
    # every rank is interior in at most one tree; for odd N rank 0 (tree 0's root, one child)
    # may be interior in tree 1 as well, with a single child there too
    assert both <= ({0} if n % 2 else set())
    for v in both:
        assert len(children(p0)[v]) == len(children(p1)[v]) == 1


def test_inorder_tree_example():
    # NCCL's illustration for 14 ranks: 0-8, 8-{4,12}, 12-{10,13}, odd ranks are leaves
    p = inorder_tree(14)
    assert children(p)[0] == [8]
    assert sorted(children(p)[8]) == [4, 12]
    assert sorted(children(p)[12]) == [10, 13]
    assert all(not children(p)[v] for v in range(1, 14, 2))


@pytest.mark.parametrize("n", [2, 3, 4, 5, 7, 8, 12, 16, 17, 31, 32, 33, 64])
def test_every_rank_sends_and_receives_about_2s(n):
    count, item = 2 * 60 * n, 4
    size = count * item
    s = dbtree_all_reduce(n, n_chunks=4)
    sent = [s.bytes_sent(r, count, item) for r in range(n)]
    recv = [s.bytes_received(r, count, item) for r in range(n)]
    # 2(N-1) halves go up and 2(N-1) come down: the ring's 2(N-1)/N S on average ...
    assert sum(sent) == sum(recv) == 2 * (n - 1) * size
    # ... and no rank moves more than 2S (interior in one tree: 3 halves, leaf in the other: 1)
    assert max(sent) <= 2 * size and max(recv) <= 2 * size
    mean = 2 * (n - 1) / n * size
    assert max(sent) / mean <= n / (n - 1) + 1e-9
    if n >= 8:
        # whereas one binomial tree makes its root send log2(N) * S
        t = tree_all_reduce(n, n_chunks=4)
        assert max(t.bytes_sent(r, count, item) for r in range(n)) >= 1.5 * max(sent)


@pytest.mark.parametrize("n", [4, 8, 16, 64, 256])
def test_steps_grow_with_log_n(n):
    assert dbtree_all_reduce(n, n_chunks=1).n_steps == 3 * int(math.log2(n)) - 1
    assert dbtree_all_reduce(n, n_chunks=9).n_steps == 3 * int(math.log2(n)) - 1 + 8
