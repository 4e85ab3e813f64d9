"""Where each parallel group sits on the cluster: inside one node, spread evenly over several
nodes (hierarchical algorithms apply), or spread unevenly (priced flat on the inter-node link).

Ranks are laid out Megatron-style (Shoeybi et al. 2019; Narayanan et al. 2021):
``rank = t + tp * (d + dp * p)`` for TP index t, DP index d, PP stage p, and node =
``rank // gpus_per_node``. So a TP group is tp consecutive ranks, a DP group strides by tp and a
pipeline group by tp * dp.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ringtree.plan.strategy import Layout

TP, DP, PP = "tp", "dp", "pp"


@dataclass(frozen=True)
class GroupShape:
    """How one kind of group sits on the nodes (the worst group of that kind).

    size: ranks in the group.
    nodes: nodes it touches (1: all intra-node).
    per_node: ranks of the group on each node when every node holds the same number of
    contiguous group members (a hierarchical algorithm applies); None when uneven.
    """

    size: int
    nodes: int
    per_node: int | None

    @property
    def intra(self) -> bool:
        """Whether the whole group is inside one node."""
        return self.nodes == 1


def _members(layout: Layout, kind: str) -> np.ndarray:
    """Every group of ``kind`` as one row of its ranks, in group order."""
    t, d, p = np.meshgrid(
        np.arange(layout.tp), np.arange(layout.dp), np.arange(layout.pp), indexing="ij"
    )
    ranks = t + layout.tp * (d + layout.dp * p)  # shape (tp, dp, pp)
    axis = {TP: 0, DP: 1, PP: 2}[kind]
    return np.moveaxis(ranks, axis, -1).reshape(-1, ranks.shape[axis])


def group_shape(layout: Layout, kind: str, gpus_per_node: int) -> GroupShape:
    """The shape of the ``kind`` groups ("tp", "dp" or "pp") of ``layout``.

    When groups of one kind differ (some inside a node, some across), the one touching the most
    nodes (or an uneven one) is returned: a collective on several groups at once ends with the
    slowest.
    """
    rows = _members(layout, kind)
    size = rows.shape[1]
    nodes = rows // gpus_per_node
    changes = np.diff(nodes, axis=1) != 0
    n_nodes = 1 + changes.sum(axis=1)
    most = int(n_nodes.max())
    if most == 1:
        return GroupShape(size, 1, size)
    even = bool((n_nodes == most).all()) and size % most == 0
    if even:  # contiguous runs of equal length: nodes change exactly every size/most members
        run = size // most
        boundary = np.zeros(size - 1, dtype=bool)
        boundary[run - 1 :: run] = True
        even = bool((changes == boundary).all())
    return GroupShape(size, most, size // most if even else None)
