"""Where each parallel group sits on the cluster: inside one node, spread evenly over several
nodes (hierarchical algorithms apply), or spread unevenly (priced flat on the inter-node link).

Ranks are laid out Megatron-style (Shoeybi et al. 2019; Narayanan et al. 2021; Megatron-Core's
``tp-cp-ep-dp-pp`` order): ``rank = t + tp * (c + cp * (d + dp * p))`` for TP index t, CP index
c, DP index d and PP stage p, and node = ``rank // gpus_per_node``. So a TP group is tp
consecutive ranks, a CP group strides by tp, a DP group by tp * cp (its first ep members, then
the next ep, ... form the expert-parallel groups), a pipeline group by tp * cp * dp.

Group kinds: ``tp``, ``cp``, ``dp``, ``pp``, ``ep``; ``dpcp`` (the data- and context-parallel
ranks together, which reduce the gradients of parameters every CP rank holds) and ``edp`` (the
ranks holding the same experts: dp / ep x cp of them, which reduce the experts' gradients;
with ``etp=1`` an expert-parallel group is ep consecutive ranks over tp x cp x dp, and its
replicas tp cp dp / ep);
under HSDP, ``dps`` (a shard group: ``shard`` consecutive DP ranks x cp, laid out as an
expert-parallel group is) and ``dpr`` (the dp / shard replicas of one shard).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ringtree.cost.pricer import GroupShape
from ringtree.plan.strategy import Layout

TP, CP, DP, PP, EP, DPCP, EDP = "tp", "cp", "dp", "pp", "ep", "dpcp", "edp"
DPS, DPR = "dps", "dpr"
#: The axes of (tp, cp, ep, dp / ep, pp) each kind of group runs along (HSDP's groups: with
#: the shard group in the ep axis).
_AXES = {TP: (0,), CP: (1,), EP: (2,), DP: (2, 3), PP: (4,), DPCP: (1, 2, 3), EDP: (1, 3),
         DPS: (1, 2), DPR: (3,), "ep-folded": (0, 1, 2), "edp-folded": (3,)}


def _members(layout: Layout, kind: str) -> np.ndarray:
    """Every group of ``kind`` as one row of its ranks, in group order."""
    dims = (layout.tp, layout.cp, layout.ep, layout.dp // layout.ep, layout.pp)
    t, c, e, d2, p = np.meshgrid(*(np.arange(n) for n in dims), indexing="ij")
    d = e + layout.ep * d2
    ranks = t + layout.tp * (c + layout.cp * (d + layout.dp * p))
    axes = _AXES[kind]
    rest = [a for a in range(5) if a not in axes]
    # group order: the slowest-varying axis first, so that members run in rank order
    order = rest + sorted(axes, reverse=True)
    size = int(np.prod([dims[a] for a in axes]))
    moved = np.transpose(ranks, order).reshape(-1, size)
    return np.sort(moved, axis=1)


def group_shape(layout: Layout, kind: str, gpus_per_node: int) -> GroupShape:
    """The shape of the ``kind`` groups of ``layout`` (see the module doc for the kinds).

    When groups of one kind differ (some inside a node, some across), the one touching the most
    nodes (or an uneven one) is returned: a collective on several groups at once ends with the
    slowest.
    """
    inner = layout.shard if kind in (DPS, DPR) else layout.ep_dp
    if layout.folded and kind in (EP, EDP):  # etp=1: ep runs over tp x cp x (ep_dp of dp)
        kind = f"{kind}-folded"
    return _group_shape(layout.tp, layout.cp, inner, layout.dp, layout.pp, kind,
                        gpus_per_node)


@lru_cache(maxsize=4096)
def _group_shape(tp: int, cp: int, ep: int, dp: int, pp: int, kind: str, gpn: int) -> GroupShape:
    layout = Layout("ddp", dp, tp, pp, cp=cp, ep=ep)
    rows = _members(layout, kind)
    size = rows.shape[1]
    if size == 1:
        return GroupShape(1, 1, 1)
    nodes = rows // gpn
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
