"""Linear algorithms: the root talks to every other rank in turn (gather, scatter), or every
rank to every other at once (all-to-all).

Gather: at step k (k = 1..N-1) rank root+k mod N sends its block to the root. Scatter: at step
k the root sends block root+k mod N to its owner. Relative to the root, v = rank - root.

No step waits for another's data, so an engine that posts every message as soon as it can has
all N-1 in flight at once (gloo's and MPI's own gather and scatter do so); priced as the
textbook single-port sequence: N-1 steps of one block, (N-1) alpha + (N-1)/N S beta (S: the
root's whole buffer), every byte crossing one link once -- the binomial tree
(:mod:`ringtree.algorithms.tree`) takes log2 N steps for the same bandwidth term but forwards
blocks through intermediate ranks. (Thakur, Rabenseifner & Gropp 2005, section 2.)

All-to-all: one step in which every rank sends each other rank its block -- what NCCL (its
all-to-all is grouped point-to-point), gloo's ``alltoall`` and MPICH's medium-message
algorithm (post every isend and irecv, then wait) do, and what ringtree's engine does with
any schedule whose steps need nothing received earlier. alpha + (N-1)/N S beta: one
latency, the fewest bytes, every message of a rank sharing its link; what it risks on a real
network -- every rank talking to every other at the same time (incast) -- and what N-1
messages cost a CPU are beyond the alpha-beta model, which is why MPICH spreads long
messages over the N-1 steps of pairwise exchange and sends short ones with Bruck's log2 N.
"""

from __future__ import annotations

from ringtree.algorithms.registry import Algorithm, register
from ringtree.collectives import Collective
from ringtree.schedule import Schedule, Transfer, make_steps


def linear_gather(n_ranks: int, *, root: int = 0) -> Schedule:
    """Step k: rank root + k sends its block to the root."""
    n = n_ranks
    rows = (([Transfer((root + k) % n, root, (root + k) % n)], "gather") for k in range(1, n))
    return Schedule(Collective.GATHER, "linear", n, n, make_steps(rows), root=root, n_blocks=n)


def linear_scatter(n_ranks: int, *, root: int = 0) -> Schedule:
    """Step k: the root sends block root + k to its owner."""
    n = n_ranks
    rows = (([Transfer(root, (root + k) % n, (root + k) % n)], "scatter") for k in range(1, n))
    return Schedule(Collective.SCATTER, "linear", n, n, make_steps(rows), root=root, n_blocks=n)


def linear_all_to_all(n_ranks: int) -> Schedule:
    """One step: every rank s sends block (s, d) to every rank d != s (chunk s N + d)."""
    n = n_ranks
    rows = [([Transfer(s, d, s * n + d) for s in range(n) for d in range(n) if d != s],
             "all-to-all")]
    return Schedule(Collective.ALL_TO_ALL, "linear", n, n * n, make_steps(rows), n_blocks=n * n)


# -- registry entries (sources: the module docstring) --------------------------------------
_LINEAR = "Thakur, Rabenseifner & Gropp 2005 (linear)"
register(
    Algorithm(Collective.GATHER, "linear", lambda n, s: linear_gather(n, root=s.root),
              source=_LINEAR),
    Algorithm(Collective.SCATTER, "linear", lambda n, s: linear_scatter(n, root=s.root),
              source=_LINEAR),
    Algorithm(Collective.ALL_TO_ALL, "linear", lambda n, s: linear_all_to_all(n),
              source="Thakur, Rabenseifner & Gropp 2005, section 5 (MPICH's medium messages); "
              "NCCL's and gloo's all-to-all"),
)
