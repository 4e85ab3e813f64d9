"""Pairwise exchange (MPICH's reduce-scatter for long messages): N-1 steps, no chain.

At step k (k = 1..N-1) rank r sends its block (r+k) mod N to rank (r+k) mod N and receives
block r from rank (r-k) mod N:

- reduce-scatter: the received block is reduced into rank r's own block r;
- all-gather: rank r sends its own block r, the receiver stores it;
- all-reduce: the reduce-scatter, then the all-gather;
- all-to-all: rank r sends its block for rank (r+k) mod N straight to it (the "linear shift").

Bytes and steps are the ring's, but no step waits for another's data: a rank's sends all read
its own input (reduce-scatter) or its own block (all-gather), so an engine that posts every
message as soon as its data is ready has all N-1 in flight at once, where the ring forwards
what it received a step earlier.

Costs (S bytes, any N): reduce-scatter and all-gather N-1 steps, (N-1)/N S bytes per rank,
(N-1) alpha + (N-1)/N S beta (+ (N-1)/N S gamma to reduce); all-reduce twice the steps and
bytes. All-to-all: N-1 steps, rank r sends every block but its own, (N-1)/N S bytes per rank
(S: one rank's input), (N-1) alpha + (N-1)/N S beta: the fewest bytes an all-to-all can move,
and MPICH's algorithm for long messages. (Thakur, Rabenseifner & Gropp 2005, "Optimization of
collective communication operations in MPICH", sections 4 and 5.)
"""

from __future__ import annotations

from ringtree.algorithms.registry import Algorithm, register
from ringtree.collectives import Collective
from ringtree.schedule import Action, Schedule, Transfer, make_steps


def pairwise_reduce_scatter(n_ranks: int) -> Schedule:
    """Step k: rank r sends block (r+k) mod N to its owner, which reduces it into its own."""
    n = n_ranks
    rows = (
        (
            (Transfer(r, (r + k) % n, (r + k) % n, Action.REDUCE) for r in range(n)),
            "reduce-scatter",
        )
        for k in range(1, n)
    )
    return Schedule(Collective.REDUCE_SCATTER, "pairwise", n, n, make_steps(rows), n_blocks=n)


def pairwise_all_gather(n_ranks: int) -> Schedule:
    """Step k: rank r sends its block r to rank (r+k) mod N, which stores it."""
    n = n_ranks
    rows = (
        ((Transfer(r, (r + k) % n, r, Action.COPY) for r in range(n)), "all-gather")
        for k in range(1, n)
    )
    return Schedule(Collective.ALL_GATHER, "pairwise", n, n, make_steps(rows), n_blocks=n)


def pairwise_all_reduce(n_ranks: int) -> Schedule:
    """Pairwise reduce-scatter, then pairwise all-gather: rank r owns reduced block r between."""
    rs = pairwise_reduce_scatter(n_ranks)
    return rs.then(
        pairwise_all_gather(n_ranks), collective=Collective.ALL_REDUCE, algorithm="pairwise"
    )


def pairwise_all_to_all(n_ranks: int) -> Schedule:
    """Step k: rank r sends block (r, r+k mod N) to rank r+k mod N (block (s, d): chunk s N + d)."""
    n = n_ranks
    rows = (
        ((Transfer(r, (r + k) % n, r * n + (r + k) % n) for r in range(n)), "all-to-all")
        for k in range(1, n)
    )
    return Schedule(Collective.ALL_TO_ALL, "pairwise", n, n * n, make_steps(rows), n_blocks=n * n)


# -- registry entries (sources: the module docstring) --------------------------------------
_PAIRWISE = "Thakur, Rabenseifner & Gropp 2005 (pairwise exchange)"
_C = Collective
register(
    Algorithm(_C.REDUCE_SCATTER, "pairwise", lambda n, s: pairwise_reduce_scatter(n),
              source=_PAIRWISE),
    Algorithm(_C.ALL_GATHER, "pairwise", lambda n, s: pairwise_all_gather(n), source=_PAIRWISE),
    Algorithm(_C.ALL_REDUCE, "pairwise", lambda n, s: pairwise_all_reduce(n), source=_PAIRWISE),
    Algorithm(_C.ALL_TO_ALL, "pairwise", lambda n, s: pairwise_all_to_all(n), source=_PAIRWISE),
)
