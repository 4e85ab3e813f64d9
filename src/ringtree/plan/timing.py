"""Time one collective call on one parallel group, with the closed forms of the cost model.

A group inside a node is priced on the intra-node link; a group across nodes on the inter-node
link (a flat algorithm's every step crosses some node boundary), or, when it holds the same
number of ranks on each node, also as a hierarchical algorithm with its intra-node and
inter-node steps priced on their own links; the cheaper wins. Closed forms only: a call costs
microseconds whatever the group size.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ringtree.collectives import Collective
from ringtree.cost.closed_forms import estimate
from ringtree.cost.model import FLAT, Link, Terms, total_time_s
from ringtree.plan.groups import GroupShape


@dataclass(frozen=True)
class CallTime:
    """One call: the algorithm used, its time, the most bytes one GPU sends, and the part of
    the time that is per-step latency (steps * alpha)."""

    algorithm: str
    time_s: float
    bytes_sent: int
    latency_s: float
    hierarchical: bool = False


class Timer:
    """Prices calls on one cluster's links; identical calls are priced once."""

    def __init__(self, intra: Link, inter: Link) -> None:
        self.intra, self.inter = intra, inter
        self.call = lru_cache(maxsize=None)(self._call)

    def link_for(self, shape: GroupShape) -> Link:
        """The link a flat algorithm on this group runs over."""
        return self.intra if shape.intra else self.inter

    def point_to_point(self, shape: GroupShape, nbytes: int) -> CallTime:
        """One send of ``nbytes`` between neighbouring ranks of the group: alpha + S beta."""
        link = self.link_for(shape)
        return CallTime("p2p", Terms(1, nbytes).time_s(link), nbytes, link.alpha_s)

    def _call(
        self, collective: Collective, shape: GroupShape, nbytes: int, itemsize: int
    ) -> CallTime:
        """The cheapest algorithm for one call of ``collective`` on ``nbytes`` (the full
        buffer: all-reduce/reduce-scatter input, all-gather output)."""
        if shape.size == 1 or nbytes == 0:
            return CallTime("none", 0.0, 0, 0.0)
        link = self.link_for(shape)
        est = estimate(collective, "ring", shape.size, nbytes // itemsize, itemsize)
        steps = sum(t.steps for t in est.cost.values())
        return CallTime(
            "ring", total_time_s(est.cost, {FLAT: link}), est.max_bytes_sent, steps * link.alpha_s
        )
