"""Linear gather and scatter: the root talks to every other rank in turn.

Gather: at step k (k = 1..N-1) rank root+k mod N sends its block to the root. Scatter: at step
k the root sends block root+k mod N to its owner. Relative to the root, v = rank - root.

No step waits for another's data, so an engine that posts every message as soon as it can has
all N-1 in flight at once (gloo's and MPI's own gather and scatter do so); priced as the
textbook single-port sequence: N-1 steps of one block, (N-1) alpha + (N-1)/N S beta (S: the
root's whole buffer), every byte crossing one link once -- the binomial tree
(:mod:`ringtree.algorithms.tree`) takes log2 N steps for the same bandwidth term but forwards
blocks through intermediate ranks. (Thakur, Rabenseifner & Gropp 2005, section 2.)
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


# -- registry entries (sources: the module docstring) --------------------------------------
_LINEAR = "Thakur, Rabenseifner & Gropp 2005 (linear)"
register(
    Algorithm(Collective.GATHER, "linear", lambda n, s: linear_gather(n, root=s.root),
              source=_LINEAR),
    Algorithm(Collective.SCATTER, "linear", lambda n, s: linear_scatter(n, root=s.root),
              source=_LINEAR),
)  # fmt: skip
