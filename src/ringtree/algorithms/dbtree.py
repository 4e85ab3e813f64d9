"""NCCL's double binary tree all-reduce: two complementary binary trees, each carrying half.

Tree 0 is the in-order binary tree on ranks 0..N-1: a rank v > 0 whose lowest set bit is h
sits at height log2 h; its children are v - h/2 and v + h'/2, where h' <= h is the largest
power of two that keeps the right child below N (leaves are the odd ranks). Rank 0 is the root,
with the single child 2^(ceil(log2 N) - 1). Tree 1 is tree 0 mirrored (v -> N-1-v) when N is
even, or shifted by one rank (v -> v+1) when N is odd. Mirroring and shifting turn the odd
ranks, the leaves of tree 0, into the interior ranks of tree 1, so every rank is interior in
at most one tree (for odd N, rank 0 is the root of tree 0 with one child and may also be
interior in tree 1).

Each tree carries one half of the buffer (block 0 on tree 0, block 1 on tree 1), pipelined over
C chunks per half; within a tree, chunks go up with reductions and come down as soon as the
root has them, so the two directions overlap.

Per rank: in the tree where it is interior it receives two halves and sends one up, then
receives one and sends two down; where it is a leaf it sends one and receives one. So every
rank sends and receives about 2S in all (3 * S/2 + S/2), as in the ring, in
O(log N) + C steps instead of 2(N-1).

Cost (S bytes, depth D ~ log2 N, C chunks per half): about (3D + C) alpha +
2S (1 + O(D/C)) beta; exact figures in :mod:`ringtree.cost.forms.dbtree`.
(Sanders, Speck & Traeff 2009, "Two-tree algorithms for full bandwidth broadcast, reduction
and scan"; NCCL 2.4, ``ncclGetDtree``.)
"""

from __future__ import annotations

from functools import lru_cache

from ringtree.algorithms.pipeline import Stream, pipelined_schedule
from ringtree.algorithms.registry import DEFAULT_PIPELINE_CHUNKS, Algorithm, register
from ringtree.collectives import Collective
from ringtree.schedule import Action, Schedule


def inorder_tree(n_ranks: int) -> list[int]:
    """Parent of every rank in the in-order binary tree (-1 for the root, rank 0)."""
    parent = [-2] * n_ranks
    parent[0] = -1
    if n_ranks > 1:
        parent[1 << (n_ranks - 1).bit_length() - 1] = 0
    for v in range(1, n_ranks):
        h = v & -v
        if h == 1:
            continue
        parent[v - h // 2] = v
        step = h // 2
        while step and v + step >= n_ranks:
            step //= 2
        if step:
            parent[v + step] = v
    assert -2 not in parent, "in-order tree misses a rank"
    return parent


def double_binary_tree(n_ranks: int) -> tuple[list[int], list[int]]:
    """Parents in tree 0 (in-order) and tree 1 (mirrored for even N, shifted for odd N)."""
    p0 = inorder_tree(n_ranks)
    n = n_ranks
    if n % 2 == 0:
        p1 = [-1 if p0[n - 1 - v] < 0 else n - 1 - p0[n - 1 - v] for v in range(n)]
    else:
        p1 = [-1 if p0[(v - 1) % n] < 0 else (p0[(v - 1) % n] + 1) % n for v in range(n)]
    return p0, p1


def tree_streams(parent: list[int], block: int) -> list[Stream]:
    """Streams of a pipelined all-reduce on one tree (reduce up, broadcast down, overlapped).

    A rank sends chunk j up one step after it has reduced chunk j from all its children; two
    children of one parent send the same chunk in different steps (a rank takes one copy of a
    chunk per step). The root sends chunk j down the step after its last child delivered it;
    each rank forwards it to its children the next step.
    """
    n = len(parent)
    children: list[list[int]] = [[] for _ in range(n)]
    for v, p in enumerate(parent):
        if p >= 0:
            children[p].append(v)
    root = parent.index(-1)
    order = _bottom_up(children, root)
    up: dict[int, int] = {}  # rank -> step offset of its send to the parent
    ready: dict[int, int] = {}  # rank -> first offset at which it holds chunk 0 reduced
    for v in order:  # children before parents
        last = -1
        for c in sorted(children[v], key=lambda c: (ready[c], c)):
            up[c] = max(ready[c], last + 1)
            last = up[c]
        ready[v] = last + 1
    down = {root: ready[root] - 1}
    for v in reversed(order):  # parents before children
        for c in children[v]:
            down[c] = down[v] + 1
    out = [Stream(v, parent[v], up[v], Action.REDUCE, block) for v in range(n) if v != root]
    out += [Stream(parent[v], v, down[v], Action.COPY, block) for v in range(n) if v != root]
    return out


def _bottom_up(children: list[list[int]], root: int) -> list[int]:
    """Ranks ordered so that every rank comes after all of its descendants."""
    order, stack = [], [root]
    while stack:
        v = stack.pop()
        order.append(v)
        stack.extend(children[v])
    return order[::-1]


@lru_cache(maxsize=64)
def dbtree_streams(n_ranks: int) -> tuple[Stream, ...]:
    """Both trees' streams: tree 0 on block 0, tree 1 on block 1."""
    if n_ranks == 1:
        return ()
    p0, p1 = double_binary_tree(n_ranks)
    return tuple(tree_streams(p0, 0) + tree_streams(p1, 1))


def dbtree_all_reduce(n_ranks: int, *, n_chunks: int = 1) -> Schedule:
    """Double binary tree all-reduce, ``n_chunks`` chunks per half (2 * n_chunks in all).

    Every rank ends holding op over all buffers; every rank sends and receives about 2S.
    """
    return pipelined_schedule(
        Collective.ALL_REDUCE,
        "dbtree",
        n_ranks,
        dbtree_streams(n_ranks),
        n_chunks,
        n_blocks=2,
    )


# -- registry entry (sources: the module docstring) ----------------------------------------
register(
    Algorithm(Collective.ALL_REDUCE, "dbtree", lambda n, s: dbtree_all_reduce(n, n_chunks=s.chunks),
              default_chunks=DEFAULT_PIPELINE_CHUNKS,
              source="Sanders, Speck & Traeff 2009; NCCL 2.4 ncclGetDtree"),
)
