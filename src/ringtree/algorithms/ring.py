"""Ring algorithms (the seed's canonical all-reduce, and chains for broadcast and reduce).

Ranks form the logical ring 0 -> 1 -> ... -> N-1 -> 0.

Costs (S bytes in all, N ranks, chain pipelined over C chunks):

=================  ===========  ============================  ==================================
schedule           steps        bytes sent per rank           alpha-beta time
=================  ===========  ============================  ==================================
reduce-scatter     N-1          (N-1)/N * S                   (N-1) alpha + (N-1)/N * S beta
all-gather         N-1          (N-1)/N * S                   (N-1) alpha + (N-1)/N * S beta
all-reduce         2(N-1)       2(N-1)/N * S                  2(N-1) alpha + 2(N-1)/N * S beta
broadcast (chain)  N-2+C        S (root and inner ranks)      (N-2+C)(alpha + S/C beta)
reduce (chain)     N-2+C        S (all but the root)          (N-2+C)(alpha + S/C beta)
=================  ===========  ============================  ==================================

(Patarasuk & Yuan 2009, "Bandwidth optimal all-reduce algorithms for clusters of workstations".)
"""

from __future__ import annotations

from ringtree.algorithms.registry import DEFAULT_PIPELINE_CHUNKS, Algorithm, register
from ringtree.collectives import Collective
from ringtree.schedule import Action, Schedule, Transfer, make_steps


def ring_reduce_scatter(n_ranks: int, *, shift: int = 0) -> Schedule:
    """Ring reduce-scatter in N-1 steps.

    reduce-scatter: at step k, rank i sends chunk (i - k + shift) mod N to rank i+1, which
    reduces it into its own copy. With ``shift=0`` (the seed's numbering: rank i starts with
    chunk i), rank i ends owning the fully reduced chunk (i+1) mod N; with ``shift=-1`` it
    ends owning chunk i, which is what the reduce-scatter collective delivers.
    """
    n = n_ranks
    rows = (
        (
            (Transfer(i, (i + 1) % n, (i - k + shift) % n, Action.REDUCE) for i in range(n)),
            "reduce-scatter",
        )
        for k in range(n - 1)
    )
    return Schedule(Collective.REDUCE_SCATTER, "ring", n, n, make_steps(rows), n_blocks=n)


def ring_all_gather(n_ranks: int, *, start: int = 0) -> Schedule:
    """Ring all-gather in N-1 steps.

    all-gather: rank i starts holding chunk (i + start) mod N; at step k it sends chunk
    (i + start - k) mod N to rank i+1, which stores it. After N-1 steps every rank holds all.
    """
    n = n_ranks
    rows = (
        (
            (Transfer(i, (i + 1) % n, (i + start - k) % n, Action.COPY) for i in range(n)),
            "all-gather",
        )
        for k in range(n - 1)
    )
    return Schedule(Collective.ALL_GATHER, "ring", n, n, make_steps(rows), n_blocks=n)


def ring_all_reduce(n_ranks: int) -> Schedule:
    """Ring all-reduce = ring reduce-scatter (the seed's numbering) + ring all-gather.

    After the reduce-scatter's N-1 steps rank i owns reduced chunk (i+1) mod N; the
    all-gather then starts from exactly that chunk. 2(N-1) steps, 2(N-1)/N * S bytes per rank.
    """
    rs = ring_reduce_scatter(n_ranks, shift=0)
    ag = ring_all_gather(n_ranks, start=1)
    return rs.then(ag, collective=Collective.ALL_REDUCE, algorithm="ring")


def _chain(n_ranks: int, root: int, n_chunks: int, collective: Collective) -> Schedule:
    """A pipelined chain through the ring order; position p's link sends chunk t - p at step t."""
    n = n_ranks
    if collective is Collective.BROADCAST:
        order = [(root + p) % n for p in range(n)]  # root first
        action, phase = Action.COPY, "broadcast"
    else:
        order = [(root + 1 + p) % n for p in range(n)]  # root last
        action, phase = Action.REDUCE, "reduce"
    rows = []
    for t in range(n_chunks + n - 2):
        ts = [
            Transfer(order[p], order[p + 1], t - p, action)
            for p in range(n - 1)
            if 0 <= t - p < n_chunks
        ]
        rows.append((ts, phase))
    return Schedule(collective, "ring", n, n_chunks, make_steps(rows), root=root)


def ring_broadcast(n_ranks: int, *, root: int = 0, n_chunks: int = 1) -> Schedule:
    """Pipelined chain broadcast: root -> root+1 -> ... along the ring, ``n_chunks`` pieces.

    N-2+C steps; every rank but the last sends S bytes in all.
    """
    return _chain(n_ranks, root, n_chunks, Collective.BROADCAST)


def ring_reduce(n_ranks: int, *, root: int = 0, n_chunks: int = 1) -> Schedule:
    """Pipelined chain reduce: root+1 -> root+2 -> ... -> root, partial results reduced on the
    way, ``n_chunks`` pieces. N-2+C steps; every rank but the root sends S bytes in all."""
    return _chain(n_ranks, root, n_chunks, Collective.REDUCE)


# -- registry entries (sources: the module docstring) --------------------------------------
_RING, _CHAIN = "Patarasuk & Yuan 2009", "Thakur, Rabenseifner & Gropp 2005 (pipelined chain)"
_C, _PIPE = Collective, DEFAULT_PIPELINE_CHUNKS
register(
    Algorithm(_C.REDUCE_SCATTER, "ring", lambda n, s: ring_reduce_scatter(n, shift=-1),
              source=_RING),
    Algorithm(_C.ALL_GATHER, "ring", lambda n, s: ring_all_gather(n), source=_RING),
    Algorithm(_C.ALL_REDUCE, "ring", lambda n, s: ring_all_reduce(n), source=_RING),
    Algorithm(_C.BROADCAST, "ring", lambda n, s: ring_broadcast(n, root=s.root, n_chunks=s.chunks),
              default_chunks=_PIPE, source=_CHAIN),
    Algorithm(_C.REDUCE, "ring", lambda n, s: ring_reduce(n, root=s.root, n_chunks=s.chunks),
              default_chunks=_PIPE, source=_CHAIN),
)
