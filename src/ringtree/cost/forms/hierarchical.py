"""Closed forms of the hierarchical algorithms (:mod:`ringtree.algorithms.hierarchical`) on
M nodes x g ranks per node, on two levels. The all-reduce:

intra (2(g-1) steps): 2(g-1) alpha_intra + 2(g-1) * ceil(S/g) beta_intra (+ (g-1) ceil(S/g)
gamma), the intra-node ring reduce-scatter and all-gather on g blocks;
inter (2(M-1) steps): 2(M-1) alpha_inter + 2(M-1) * ceil(ceil(S/g)/M) beta_inter, the ring
all-reduce of one block among the M nodes, all g blocks at once on their own rings.
So the bytes between nodes are 2(M-1)/M * S/g per rank, 1/g of a ring among the nodes
(Thakur, Rabenseifner & Gropp 2005 for the ring phases).

The all-to-all (NCCL's PXN, S: one rank's input): intra (g-1) alpha_intra + (g-1)/g S
beta_intra, inter (M-1) alpha_inter + (M-1)/M S beta_inter.
"""

from __future__ import annotations

from ringtree.algorithms import BuildSpec
from ringtree.algorithms.hierarchical import check_shape
from ringtree.collectives import Collective, block_bounds
from ringtree.cost.forms.base import Estimate, ceil_div, closed_form
from ringtree.cost.terms import INTER, INTRA, Terms


@closed_form(Collective.ALL_REDUCE, "hierarchical")
def hierarchical_all_reduce(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """Intra ring reduce-scatter + inter ring all-reduce of S/g + intra ring all-gather."""
    m = check_shape(n, spec.ranks_per_node)
    g = n // m
    block = ceil_div(count, g)  # the largest block
    piece = ceil_div(block, m)  # the largest piece of it
    cost = {}
    if g > 1:
        cost[INTRA] = Terms(2 * (g - 1), 2 * (g - 1) * block * itemsize,
                            (g - 1) * block * itemsize)
    if m > 1:
        cost[INTER] = Terms(2 * (m - 1), 2 * (m - 1) * piece * itemsize,
                            (m - 1) * piece * itemsize)
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


def _group_sizes(count: int, n: int, g: int) -> list[int]:
    """|L_l| for l < g: the elements of blocks {x' g + l}, blocks as np.array_split(count, n)
    (the first ``count % n`` blocks one element larger)."""
    m = n // g
    base, extra = divmod(count, n)
    return [m * base + max(0, ceil_div(extra - loc, g)) for loc in range(g)]


def _two_level(
    n: int, count: int, itemsize: int, spec: BuildSpec, reduces: bool
) -> dict[str, Terms]:
    """Terms of one intra ring pass over the g node groups and one inter ring pass over the
    M blocks of a group: every step moves one group (intra) or one block (inter) per rank, and
    the largest of them sets the step."""
    m = check_shape(n, spec.ranks_per_node)
    g = n // m
    group = max(_group_sizes(count, n, g)) * itemsize
    block = ceil_div(count, n) * itemsize
    cost = {}
    if g > 1:
        cost[INTRA] = Terms(g - 1, (g - 1) * group, (g - 1) * group if reduces else 0)
    if m > 1:
        cost[INTER] = Terms(m - 1, (m - 1) * block, (m - 1) * block if reduces else 0)
    return cost or {INTRA: Terms(0, 0, 0)}


@closed_form(Collective.REDUCE_SCATTER, "hierarchical")
def hierarchical_reduce_scatter(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """Intra: (g-1) steps of the largest group (~S/g); inter: (M-1) steps of the largest block
    (~S/N). Rank r sends S - |block r| in all (the smallest block is count // N)."""
    cost = _two_level(n, count, itemsize, spec, reduces=True)
    return Estimate(cost, (count - count // n) * itemsize if n > 1 else 0)


@closed_form(Collective.ALL_GATHER, "hierarchical")
def hierarchical_all_gather(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """Inter: (M-1) steps of the largest block; intra: (g-1) steps of the largest group.
    Rank x g + l sends its group but one block between nodes, and every group but
    L_{(l+1) mod g} inside the node."""
    cost = _two_level(n, count, itemsize, spec, reduces=False)
    m = n // (spec.ranks_per_node or 1)
    g = n // m
    base, extra = divmod(count, n)
    groups = _group_sizes(count, n, g)
    most = 0
    for loc in range(g):
        smallest = base + (1 if (m - 1) * g + loc < extra else 0)  # its group's smallest block
        inter = groups[loc] - smallest if m > 1 else 0
        most = max(most, count - groups[(loc + 1) % g] + inter)
    return Estimate(cost, most * itemsize if n > 1 else 0)


@closed_form(Collective.ALL_TO_ALL, "hierarchical")
def hierarchical_all_to_all(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """Intra: g-1 steps, each moving to one local index its M blocks (group L_j: ~S/g), the
    largest group setting the step; inter: M-1 steps of g blocks (~S/M), the largest block
    setting them. Rank (x, l) sends every group but L_l inside its node, then g times each
    block of L_l but its own, (x, l)'s, between nodes; the last node's blocks are the smallest."""
    m = check_shape(n, spec.ranks_per_node)
    g = n // m
    groups = _group_sizes(count, n, g)
    base, extra = divmod(count, n)
    cost = {}
    if g > 1:
        cost[INTRA] = Terms(g - 1, (g - 1) * max(groups) * itemsize, 0)
    if m > 1:
        cost[INTER] = Terms(m - 1, (m - 1) * g * ceil_div(count, n) * itemsize, 0)
    most = 0
    for loc in range(g):
        inter = g * (groups[loc] - base - (1 if (m - 1) * g + loc < extra else 0)) if m > 1 else 0
        most = max(most, count - groups[loc] + inter)
    return Estimate(cost or {INTRA: Terms(0, 0, 0)}, most * itemsize)
