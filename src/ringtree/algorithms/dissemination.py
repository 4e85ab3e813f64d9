"""The dissemination barrier: ceil(log2 N) rounds, every rank signalling one other per round.

At round k (k = 0..L-1) rank r sends a message to rank r + 2^k mod N and waits for the one
from r - 2^k. After round k, rank r has heard -- through chains of messages, each sent only
after its sender had heard the earlier ones -- from the 2^(k+1) ranks r, r-1, ...; after L
rounds from all N, so no rank leaves before every rank has entered. Unlike a tree barrier
(gather to a root, then broadcast: 2 log2 N rounds) every rank is busy every round, and any N
works. The schedule moves its one chunk (the engine's is empty: gloo and MPI messages of 0
bytes still arrive in order).

Cost: L alpha (+ L times the token's bytes over the bandwidth). (Hensgen, Finkel & Manber
1988, "Two algorithms for barrier synchronization", IJPP 17(1); MPICH's MPI_Barrier.)
"""

from __future__ import annotations

from ringtree.algorithms.registry import Algorithm, register
from ringtree.algorithms.tree import ceil_log2
from ringtree.collectives import Collective
from ringtree.schedule import Schedule, Transfer, make_steps


def dissemination_barrier(n_ranks: int) -> Schedule:
    """Round k: rank r signals rank r + 2^k mod N."""
    n = n_ranks
    rows = (
        ((Transfer(r, (r + (1 << k)) % n, 0) for r in range(n)), "barrier")
        for k in range(ceil_log2(n))
    )
    return Schedule(Collective.BARRIER, "dissemination", n, 1, make_steps(rows))


# -- registry entries (sources: the module docstring) --------------------------------------
register(
    Algorithm(Collective.BARRIER, "dissemination", lambda n, s: dissemination_barrier(n),
              source="Hensgen, Finkel & Manber 1988 (IJPP 17(1))"),
)
