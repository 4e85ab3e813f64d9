"""Closed forms of the binomial trees (:mod:`ringtree.algorithms.tree`): broadcast, reduce
and the all-reduce (reduce up, broadcast down), pipelined over C chunks; terms from the trees'
streams (:mod:`ringtree.cost.forms.pipeline`).

Approximately (S bytes, L = ceil(log2 N), C chunks): all-reduce (2L + C - 1) alpha +
L S (1 + L/C) beta (C >> L) (Thakur, Rabenseifner & Gropp 2005). Gather and scatter move
subtrees: L alpha + (N-1)/N S beta when N is a power of two.
"""

from __future__ import annotations

import numpy as np

from ringtree.algorithms import BuildSpec
from ringtree.algorithms.tree import (
    binomial_broadcast_streams,
    binomial_reduce_streams,
    ceil_log2,
    tree_all_reduce_streams,
)
from ringtree.collectives import Collective, block_sizes
from ringtree.cost.forms.base import NOTHING, Estimate, closed_form, flat
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


def _subtrees(n: int, count: int, itemsize: int, root: int, gather: bool) -> Estimate:
    """Level k: every v with lowest set bit 2^k moves its subtree v..v+2^k-1 (relative to
    the root) over one edge, each parent one child's: the step's busiest edge carries the
    largest subtree. A rank sends its subtree once (gather); the root sends all but its own
    block, more than any other rank (scatter)."""
    if n == 1:
        return NOTHING
    sizes = np.roll(np.asarray(block_sizes(count, n), dtype=np.int64), -root)  # relative
    prefix = np.concatenate(([0], np.cumsum(sizes)))
    wire = largest = 0
    for k in range(ceil_log2(n)):
        w = 1 << k
        v = np.arange(w, n, 2 * w)
        biggest = int((prefix[np.minimum(v + w, n)] - prefix[v]).max())
        wire += biggest
        largest = max(largest, biggest)
    sent = largest if gather else count - int(sizes[0])
    return flat(ceil_log2(n), wire * itemsize, 0, sent * itemsize)


@closed_form(Collective.GATHER, "tree")
def tree_gather(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """Binomial gather: ceil(log2 N) steps; L alpha + (N-1)/N S beta for N a power of two
    (step k brings the root 2^k blocks) (Thakur, Rabenseifner & Gropp 2005)."""
    return _subtrees(n, count, itemsize, spec.root, gather=True)


@closed_form(Collective.SCATTER, "tree")
def tree_scatter(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """Binomial scatter: ceil(log2 N) steps; L alpha + (N-1)/N S beta for N a power of two
    (the root sends S/2 first, then S/4, ...) (Thakur, Rabenseifner & Gropp 2005)."""
    return _subtrees(n, count, itemsize, spec.root, gather=False)
