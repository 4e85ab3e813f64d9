"""Closed forms of the binomial trees (:mod:`ringtree.algorithms.tree`): broadcast, reduce
and the all-reduce (reduce up, broadcast down), pipelined over C chunks; terms from the trees'
streams (:mod:`ringtree.cost.forms.pipeline`).

Approximately (S bytes, L = ceil(log2 N), C chunks): all-reduce (2L + C - 1) alpha +
L S (1 + L/C) beta (C >> L) (Thakur, Rabenseifner & Gropp 2005).
"""

from __future__ import annotations

from ringtree.algorithms import BuildSpec
from ringtree.algorithms.tree import (
    binomial_broadcast_streams,
    binomial_reduce_streams,
    tree_all_reduce_streams,
)
from ringtree.collectives import Collective
from ringtree.cost.forms.base import Estimate, closed_form
from ringtree.cost.forms.pipeline import rank_kinds


@closed_form(Collective.BROADCAST, "tree")
def tree_broadcast(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """Binomial broadcast: ceil(log2 N) steps of S unpipelined, L (alpha + S beta); the root
    sends L*S. Pipelined over C chunks: L+C-1 steps, the root still sends every chunk L times
    (Thakur, Rabenseifner & Gropp 2005)."""
    return rank_kinds(binomial_broadcast_streams, n).terms(count, itemsize, spec.chunks, 1)


@closed_form(Collective.REDUCE, "tree")
def tree_reduce(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """Binomial reduce: ceil(log2 N) steps, L (alpha + S (beta + gamma)) unpipelined; every
    non-root rank sends S (Thakur, Rabenseifner & Gropp 2005)."""
    return rank_kinds(binomial_reduce_streams, n).terms(count, itemsize, spec.chunks, 1)


@closed_form(Collective.ALL_REDUCE, "tree")
def tree_all_reduce(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """Binomial reduce + broadcast pipelined over C chunks, the halves overlapped at the root:
    2L + C - 1 steps, about (2L + C - 1) alpha + L S (1 + L/C) beta (C >> L); C = 1 gives
    2L (alpha + S beta), the textbook reduce-then-broadcast (Thakur et al. 2005)."""
    return rank_kinds(tree_all_reduce_streams, n).terms(count, itemsize, spec.chunks, 1)
