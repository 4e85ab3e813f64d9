"""Binomial trees: broadcast, reduce, the tree all-reduce (reduce up, broadcast down), and
gather and scatter.

Ranks are numbered relative to the root, v = (rank - root) mod N, and L = ceil(log2 N).
Level k of the tree joins v and v + 2^k for every v that is a multiple of 2^(k+1):

- reduce: at level k = 0, 1, ..., L-1, each v whose lowest set bit is 2^k sends its partial
  result to v - 2^k, which reduces it (so a parent hears from its children in different steps);
- broadcast: at level k = L-1, ..., 0, each multiple v of 2^(k+1) sends to v + 2^k.

Pipelined over C chunks, chunk j crosses level k one step after chunk j-1 did. In the all-reduce
the root starts broadcasting chunk j as soon as it has reduced it, so the two halves overlap.

Costs (S bytes, N ranks, L = ceil(log2 N), C chunks; alpha-beta time for C = 1):

=============  ========  ======================================  ===============================
schedule       steps     bytes sent                              time (C = 1)
=============  ========  ======================================  ===============================
broadcast      L+C-1     root: L*S; others at most their          L (alpha + S beta)
                         number of children * S
reduce         L+C-1     every non-root: S                        L (alpha + S (beta + gamma))
all-reduce     2L+C-1    root: L*S (down); others S up + S per    2L alpha + 2L S beta + L S gamma
                         child down
=============  ========  ======================================  ===============================

Gather moves whole subtrees up the same tree: at level k = 0..L-1 each v whose lowest set bit
is 2^k sends the blocks of its subtree, v..v+2^k-1 (its own and what its children sent it),
to v - 2^k in one message; scatter sends them down, levels L-1..0. L steps; the root receives
(sends) N-1 blocks, 2^k of them in step k when N is a power of two, so L alpha + (N-1)/N S beta
-- the linear algorithm's bytes in log2 N steps -- while a rank with 2^k children forwards
their (2^k - 1) blocks. (Thakur, Rabenseifner & Gropp 2005, section 2: MPICH's gather and
scatter.)

For large C the root moves L chunks per step in each direction, so the pipelined all-reduce
tends to (2L + C - 1) alpha + L S (1 + L/C) beta (C >> L): latency O(log N), but a bandwidth term
L S that grows with N, unlike the ring's 2(N-1)/N S (the seed's "tree vs ring").
(Thakur, Rabenseifner & Gropp 2005, "Optimization of collective communication operations in
MPICH", for the binomial broadcast and reduce.)
"""

from __future__ import annotations

from ringtree.algorithms.pipeline import Stream, pipelined_schedule
from ringtree.algorithms.registry import DEFAULT_PIPELINE_CHUNKS, Algorithm, register
from ringtree.collectives import Collective
from ringtree.schedule import Action, Schedule, Transfer, make_steps


def ceil_log2(n: int) -> int:
    """ceil(log2 n) for n >= 1: the number of levels of a binomial tree on n ranks."""
    return (n - 1).bit_length()


def binomial_reduce_streams(n_ranks: int, *, offset: int = 0) -> list[Stream]:
    """Reduce streams in relative ranks: v (lowest set bit 2^k) -> v - 2^k at offset + k."""
    out = []
    for v in range(1, n_ranks):
        k = (v & -v).bit_length() - 1
        out.append(Stream(v, v - (1 << k), offset + k, Action.REDUCE))
    return out


def binomial_broadcast_streams(n_ranks: int, *, offset: int = 0) -> list[Stream]:
    """Broadcast streams in relative ranks: v -> v + 2^k at offset + (L-1-k), farthest first."""
    levels = ceil_log2(n_ranks)
    out = []
    for k in reversed(range(levels)):
        for v in range(0, n_ranks - (1 << k), 1 << (k + 1)):
            out.append(Stream(v, v + (1 << k), offset + levels - 1 - k, Action.COPY))
    return out


def tree_all_reduce_streams(n_ranks: int) -> list[Stream]:
    """The all-reduce's streams in relative ranks: reduce at offsets 0..L-1, broadcast after."""
    levels = ceil_log2(n_ranks)
    return binomial_reduce_streams(n_ranks) + binomial_broadcast_streams(n_ranks, offset=levels)


def _absolute(streams: list[Stream], n_ranks: int, root: int) -> list[Stream]:
    return [
        Stream((s.src + root) % n_ranks, (s.dst + root) % n_ranks, s.offset, s.action)
        for s in streams
    ]


def tree_broadcast(n_ranks: int, *, root: int = 0, n_chunks: int = 1) -> Schedule:
    """Binomial broadcast from ``root``: every rank ends holding the root's buffer.

    ceil(log2 N) steps unpipelined; each rank receives S once; the root sends L*S.
    """
    streams = _absolute(binomial_broadcast_streams(n_ranks), n_ranks, root)
    return pipelined_schedule(Collective.BROADCAST, "tree", n_ranks, streams, n_chunks, root=root)


def tree_reduce(n_ranks: int, *, root: int = 0, n_chunks: int = 1) -> Schedule:
    """Binomial reduce to ``root``: the root ends holding op over every rank's buffer.

    ceil(log2 N) steps unpipelined; every rank but the root sends S once.
    """
    streams = _absolute(binomial_reduce_streams(n_ranks), n_ranks, root)
    return pipelined_schedule(Collective.REDUCE, "tree", n_ranks, streams, n_chunks, root=root)


def tree_all_reduce(n_ranks: int, *, n_chunks: int = 1) -> Schedule:
    """Tree all-reduce: binomial reduce to rank 0, then binomial broadcast, pipelined.

    Every rank ends holding op over all buffers. 2L + C - 1 steps; with C = 1 it is exactly
    :func:`tree_reduce` followed by :func:`tree_broadcast`.
    """
    streams = tree_all_reduce_streams(n_ranks)
    return pipelined_schedule(Collective.ALL_REDUCE, "tree", n_ranks, streams, n_chunks)


def _subtrees(n_ranks: int) -> list[list[tuple[int, int, list[int]]]]:
    """Per level k: ``(v, v - 2^k, blocks of v's subtree)`` in relative ranks, for every v
    whose lowest set bit is 2^k."""
    out = []
    for k in range(ceil_log2(n_ranks)):
        w = 1 << k
        out.append([(v, v - w, list(range(v, min(v + w, n_ranks))))
                    for v in range(w, n_ranks, 2 * w)])
    return out


def tree_gather(n_ranks: int, *, root: int = 0) -> Schedule:
    """Binomial gather to ``root``: level k, each v with lowest bit 2^k sends its subtree's
    blocks (relative v..v+2^k-1) to v - 2^k. ceil(log2 N) steps."""
    n = n_ranks

    def a(v: int) -> int:
        return (v + root) % n

    rows = (([Transfer(a(v), a(p), a(b)) for v, p, blocks in level for b in blocks], "gather")
            for level in _subtrees(n))
    return Schedule(Collective.GATHER, "tree", n, n, make_steps(rows), root=root, n_blocks=n)


def tree_scatter(n_ranks: int, *, root: int = 0) -> Schedule:
    """Binomial scatter from ``root``: level k = L-1..0, v - 2^k sends v's subtree's blocks
    to each v with lowest bit 2^k. ceil(log2 N) steps."""
    n = n_ranks

    def a(v: int) -> int:
        return (v + root) % n

    rows = (([Transfer(a(p), a(v), a(b)) for v, p, blocks in level for b in blocks], "scatter")
            for level in reversed(_subtrees(n)))
    return Schedule(Collective.SCATTER, "tree", n, n, make_steps(rows), root=root, n_blocks=n)


# -- registry entries (sources: the module docstring) --------------------------------------
_BINOMIAL = "Thakur, Rabenseifner & Gropp 2005 (binomial trees)"
_C = Collective
register(
    Algorithm(_C.BROADCAST, "tree", lambda n, s: tree_broadcast(n, root=s.root, n_chunks=s.chunks),
              default_chunks=1, source=_BINOMIAL),
    Algorithm(_C.REDUCE, "tree", lambda n, s: tree_reduce(n, root=s.root, n_chunks=s.chunks),
              default_chunks=1, source=_BINOMIAL),
    Algorithm(_C.ALL_REDUCE, "tree", lambda n, s: tree_all_reduce(n, n_chunks=s.chunks),
              default_chunks=DEFAULT_PIPELINE_CHUNKS, source=_BINOMIAL),
    Algorithm(_C.GATHER, "tree", lambda n, s: tree_gather(n, root=s.root), source=_BINOMIAL),
    Algorithm(_C.SCATTER, "tree", lambda n, s: tree_scatter(n, root=s.root), source=_BINOMIAL),
)
