"""Closed form of the hierarchical all-reduce on M nodes x g ranks per node, on two levels.

intra (2(g-1) steps): 2(g-1) alpha_intra + 2(g-1) * ceil(S/g) beta_intra (+ (g-1) ceil(S/g)
gamma), the intra-node ring reduce-scatter and all-gather on g blocks;
inter (2(M-1) steps): 2(M-1) alpha_inter + 2(M-1) * ceil(ceil(S/g)/M) beta_inter, the ring
all-reduce of one block among the M nodes, all g blocks at once on their own rings.
So the bytes between nodes are 2(M-1)/M * S/g per rank, 1/g of a ring among the nodes
(Thakur, Rabenseifner & Gropp 2005 for the ring phases).
"""

from __future__ import annotations

from ringtree.algorithms import BuildSpec
from ringtree.algorithms.hierarchical import check_shape
from ringtree.collectives import Collective, block_bounds
from ringtree.cost.closed_forms import Estimate, _ceil_div, closed_form
from ringtree.cost.model import INTER, INTRA, Terms


@closed_form(Collective.ALL_REDUCE, "hierarchical")
def hierarchical_all_reduce(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """Intra ring reduce-scatter + inter ring all-reduce of S/g + intra ring all-gather."""
    m = check_shape(n, spec.ranks_per_node)
    g = n // m
    block = _ceil_div(count, g)  # the largest block
    piece = _ceil_div(block, m)  # the largest piece of it
    cost = {}
    if g > 1:
        cost[INTRA] = Terms(2 * (g - 1), 2 * (g - 1) * block * itemsize,
                            (g - 1) * block * itemsize)  # fmt: skip
    if m > 1:
        cost[INTER] = Terms(2 * (m - 1), 2 * (m - 1) * piece * itemsize,
                            (m - 1) * piece * itemsize)  # fmt: skip
    if not cost:
        cost[INTRA] = Terms(0, 0, 0)
    # Local rank l sends every block but its own (reduce-scatter) and every block but l+1's
    # (all-gather); between nodes it sends every piece of block l but two consecutive ones.
    bounds = block_bounds(count, g)
    sizes = [bounds[b + 1] - bounds[b] for b in range(g)]
    most = 0
    for loc in range(g):
        sent = 2 * count - sizes[loc] - sizes[(loc + 1) % g]
        if m > 1:
            base, extra = divmod(sizes[loc], m)
            smallest_pair = 2 * base + (1 if m - extra == 1 else 0)
            sent += 2 * sizes[loc] - smallest_pair
        most = max(most, sent)
    return Estimate(cost, most * itemsize)
