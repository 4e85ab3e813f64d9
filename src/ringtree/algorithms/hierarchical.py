"""Hierarchical algorithms on N = M nodes x g ranks per node (rank = node * g + local): the
all-reduce, reduce-scatter and all-gather in two levels of rings, and the all-to-all
aggregated within a node before crossing it (:func:`hierarchical_all_to_all`).

The all-reduce:

1. intra-node reduce-scatter: a ring inside every node (all nodes at once), g-1 steps; local
   rank l ends with block l (of g) reduced over its node;
2. inter-node all-reduce of 1/g of the data: for every l, the M ranks with local index l run a
   ring all-reduce on block l (split in M pieces), 2(M-1) steps, all g rings at once;
3. intra-node all-gather: a ring inside every node, g-1 steps.

Every rank ends holding op over all N buffers. The schedule carries ``ranks_per_node = g`` so
the cost model prices phases 1 and 3 on the intra-node link and phase 2 on the inter-node link.

Cost (S bytes): intra 2(g-1) alpha_intra + 2(g-1)/g S beta_intra; inter 2(M-1) alpha_inter +
2(M-1)/M * S/g beta_inter. A rank sends 2(M-1)/M * S/g bytes between nodes: 1/g of what a
ring all-reduce among the M nodes would send (and less than 1/g of the flat N-rank ring's
2(N-1)/N S). (Thakur, Rabenseifner & Gropp 2005 for the ring phases; NCCL's and Horovod's
hierarchical all-reduce use this decomposition.)
"""

from __future__ import annotations

from ringtree.algorithms.registry import Algorithm, register
from ringtree.collectives import Collective
from ringtree.errors import RingtreeError
from ringtree.schedule import Action, Schedule, Transfer, make_steps


def check_shape(n_ranks: int, ranks_per_node: int | None) -> int:
    """The number of nodes M = N / g; RingtreeError unless g is given and divides N."""
    if ranks_per_node is None:
        raise RingtreeError(
            "hierarchical needs the number of ranks per node (--ranks-per-node G, G dividing N)"
        )
    if ranks_per_node < 1 or n_ranks % ranks_per_node:
        raise RingtreeError(
            f"ranks per node {ranks_per_node} does not divide {n_ranks} ranks: "
            "N must be nodes x ranks per node"
        )
    return n_ranks // ranks_per_node


def hierarchical_all_reduce(n_ranks: int, ranks_per_node: int | None) -> Schedule:
    """Intra-node ring reduce-scatter, inter-node ring all-reduce of 1/g, intra-node ring
    all-gather. Chunk l*M + j is piece j of block l (block l: local rank l's share)."""
    g = ranks_per_node or 0
    m = check_shape(n_ranks, ranks_per_node)

    def rank(node: int, local: int) -> int:
        return node * g + local

    def block(b: int) -> range:
        return range(b * m, (b + 1) * m)

    rows: list[tuple[list[Transfer], str]] = []
    # intra-node reduce-scatter: local rank loc sends block (loc - k - 1) mod g to loc + 1
    for k in range(g - 1):
        ts = [
            Transfer(rank(x, loc), rank(x, (loc + 1) % g), c, Action.REDUCE)
            for x in range(m)
            for loc in range(g)
            for c in block((loc - k - 1) % g)
        ]
        rows.append((ts, "intra reduce-scatter"))
    # inter-node ring all-reduce of block loc among the ranks with local index loc:
    # reduce-scatter, then all-gather
    for k in range(m - 1):
        ts = [
            Transfer(rank(x, loc), rank((x + 1) % m, loc), loc * m + (x - k) % m, Action.REDUCE)
            for x in range(m)
            for loc in range(g)
        ]
        rows.append((ts, "inter reduce-scatter"))
    for k in range(m - 1):
        ts = [
            Transfer(rank(x, loc), rank((x + 1) % m, loc), loc * m + (x + 1 - k) % m, Action.COPY)
            for x in range(m)
            for loc in range(g)
        ]
        rows.append((ts, "inter all-gather"))
    # intra-node all-gather: local rank loc sends block (loc - k) mod g to loc + 1
    for k in range(g - 1):
        ts = [
            Transfer(rank(x, loc), rank(x, (loc + 1) % g), c, Action.COPY)
            for x in range(m)
            for loc in range(g)
            for c in block((loc - k) % g)
        ]
        rows.append((ts, "intra all-gather"))
    return Schedule(
        Collective.ALL_REDUCE,
        "hierarchical",
        n_ranks,
        n_ranks,
        make_steps(rows),
        n_blocks=g,
        ranks_per_node=g,
    )


Rows = list[tuple[list[Transfer], str]]


def _group_ring(m: int, g: int, shift: int, action: Action, phase: str) -> Rows:
    """In every node, a ring over the g node groups (L_j: the blocks {x' g + j}): at step k
    local rank l sends group (l - k + shift) mod g to local l + 1. g - 1 steps."""
    return [
        ([Transfer(x * g + loc, x * g + (loc + 1) % g, xx * g + (loc - k + shift) % g, action)
          for x in range(m) for loc in range(g) for xx in range(m)], phase)
        for k in range(g - 1)
    ]


def _block_ring(m: int, g: int, shift: int, action: Action, phase: str) -> Rows:
    """Among the M ranks with local index l, a ring over their blocks: at step k node x sends
    block ((x - k + shift) mod M) g + l to node x + 1. M - 1 steps."""
    return [
        ([Transfer(x * g + loc, (x + 1) % m * g + loc, (x - k + shift) % m * g + loc, action)
          for x in range(m) for loc in range(g)], phase)
        for k in range(m - 1)
    ]


def hierarchical_reduce_scatter(n_ranks: int, ranks_per_node: int | None) -> Schedule:
    """Intra-node ring reduce-scatter of node groups, then an inter-node ring reduce-scatter.

    Rank r = x g + l (node x, local l) must end with block r of N. Group L_j is the M blocks
    {x' g + j}. 1. In every node, a ring reduce-scatter over the g groups (g-1 steps): local l
    ends with group L_l reduced over its node. 2. Among the M ranks with local l, a ring
    reduce-scatter of L_l (M-1 steps): node x ends with block x g + l reduced over all N.

    Cost (S bytes): intra (g-1) alpha_intra + (g-1)/g S beta_intra; inter (M-1) alpha_inter +
    (M-1)/M * S/g beta_inter: 1/g of the flat N-rank ring's bytes cross nodes. A rank sends
    S - |block r|, as in the flat ring. (The two-level reduce-scatter of hierarchical
    all-reduce, Thakur, Rabenseifner & Gropp 2005 for the rings.)
    """
    g = ranks_per_node or 0
    m = check_shape(n_ranks, ranks_per_node)
    rows = _group_ring(m, g, -1, Action.REDUCE, "intra reduce-scatter")
    rows += _block_ring(m, g, -1, Action.REDUCE, "inter reduce-scatter")
    return Schedule(
        Collective.REDUCE_SCATTER, "hierarchical", n_ranks, n_ranks, make_steps(rows),
        n_blocks=n_ranks, ranks_per_node=g,
    )


def hierarchical_all_gather(n_ranks: int, ranks_per_node: int | None) -> Schedule:
    """Inter-node ring all-gather, then intra-node ring all-gather of node groups.

    Rank r = x g + l starts with block r. 1. Among the M ranks with local l, a ring all-gather
    (M-1 steps): each ends with group L_l = {x' g + l}. 2. In every node, a ring all-gather of
    the g groups (g-1 steps). Cost: inter (M-1) alpha_inter + (M-1)/M * S/g beta_inter; intra
    (g-1) alpha_intra + (g-1)/g S beta_intra.
    """
    g = ranks_per_node or 0
    m = check_shape(n_ranks, ranks_per_node)
    rows = _block_ring(m, g, 0, Action.COPY, "inter all-gather")
    rows += _group_ring(m, g, 0, Action.COPY, "intra all-gather")
    return Schedule(
        Collective.ALL_GATHER, "hierarchical", n_ranks, n_ranks, make_steps(rows),
        n_blocks=n_ranks, ranks_per_node=g,
    )


def hierarchical_all_to_all(n_ranks: int, ranks_per_node: int | None) -> Schedule:
    """All-to-all aggregated within each node before crossing it (NCCL's PXN), on M nodes x g.

    Block (s, d) for d = (y, l') (node y, local l') takes two hops: first, inside s's node, to
    the rank with d's local index, (x, l'); then, between nodes, from there to d -- so every
    message between nodes travels between ranks of the same local index (the same NIC rail)
    and carries g blocks at once. 1. intra (g-1 steps): at step k, (x, l) sends (x, l+k mod g)
    its M blocks for the ranks of local index l+k (one per node; the one for its own node is
    final). 2. inter (M-1 steps): at step k, (x, l) sends (x+k mod M, l) the g blocks of its
    node's ranks for that rank.

    Cost (S: one rank's input, blocks S/N): intra (g-1) alpha_intra + (g-1)/g S beta_intra;
    inter (M-1) alpha_inter + (M-1)/M S beta_inter: the bytes that cross nodes are about
    those of the flat pairwise exchange, in M-1 messages of g blocks instead of N-g of one --
    the latency term NCCL's PXN saves on networks, at the price of an intra-node hop.
    (NVIDIA, NCCL 2.12 release notes and "Doubling all2all performance with NVIDIA
    Collective Communication Library 2.12", 2022: PXN.)
    """
    g = ranks_per_node or 0
    m = check_shape(n_ranks, ranks_per_node)
    n = n_ranks
    rows: Rows = []
    for k in range(1, g):
        rows.append(([Transfer(x * g + loc, x * g + (loc + k) % g,
                               (x * g + loc) * n + y * g + (loc + k) % g)
                      for x in range(m) for loc in range(g) for y in range(m)],
                     "intra all-to-all"))
    for k in range(1, m):
        rows.append(([Transfer(x * g + loc, (x + k) % m * g + loc,
                               (x * g + other) * n + (x + k) % m * g + loc)
                      for x in range(m) for loc in range(g) for other in range(g)],
                     "inter all-to-all"))
    return Schedule(
        Collective.ALL_TO_ALL, "hierarchical", n, n * n, make_steps(rows), n_blocks=n * n,
        ranks_per_node=g,
    )


# -- registry entries (sources: the module docstring) --------------------------------------
_NODES = "Thakur, Rabenseifner & Gropp 2005 (ring phases); NCCL's and Horovod's hierarchy"
_C = Collective
register(
    Algorithm(_C.ALL_REDUCE, "hierarchical",
              lambda n, s: hierarchical_all_reduce(n, s.ranks_per_node), needs_nodes=True,
              source=_NODES),
    Algorithm(_C.REDUCE_SCATTER, "hierarchical",
              lambda n, s: hierarchical_reduce_scatter(n, s.ranks_per_node), needs_nodes=True,
              source=_NODES),
    Algorithm(_C.ALL_GATHER, "hierarchical",
              lambda n, s: hierarchical_all_gather(n, s.ranks_per_node), needs_nodes=True,
              source=_NODES),
    Algorithm(_C.ALL_TO_ALL, "hierarchical",
              lambda n, s: hierarchical_all_to_all(n, s.ranks_per_node), needs_nodes=True,
              source="NCCL 2.12's PXN (NVIDIA 2022)"),
)
