"""Time one collective call on one parallel group, with the cost model's automatic choice.

A group inside a node is priced on the intra-node link. A group across nodes with the same
number of ranks g > 1 on each node is priced on both links: flat algorithms on the inter-node
link (each of their steps crosses some node boundary), the hierarchical all-reduce with its
intra-node phases on the intra-node link and its inter-node phase on the inter-node link. An
uneven group, or one rank per node, is priced on the inter-node link. Among the algorithms that
can run, :func:`ringtree.cost.select.choose` takes the lowest predicted time (``RINGTREE_ALGO``
forces one, as ``NCCL_ALGO`` does). Closed forms only, and identical calls are priced once, so
a plan costs milliseconds whatever the group size.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ringtree.algorithms import BuildSpec
from ringtree.collectives import Collective
from ringtree.cost.links import LinkSpec
from ringtree.cost.select import choose
from ringtree.cost.terms import INTER, INTRA, Link, Terms
from ringtree.plan.groups import GroupShape

HIERARCHICAL = "hierarchical"


@dataclass(frozen=True)
class CallTime:
    """One call: the algorithm used, its time, the most bytes one GPU sends, and the part of
    the time that is per-step latency (steps * alpha). ``forced``: RINGTREE_ALGO chose."""

    algorithm: str
    time_s: float
    bytes_sent: float
    latency_s: float
    forced: bool = False

    @property
    def hierarchical(self) -> bool:
        """Whether the hierarchical all-reduce was the cheapest (or forced)."""
        return self.algorithm == HIERARCHICAL


class Timer:
    """Prices calls on one cluster's links; identical calls are priced once."""

    def __init__(self, intra: Link, inter: Link) -> None:
        self.intra, self.inter = intra, inter
        self.call = lru_cache(maxsize=None)(self._call)

    def link_for(self, shape: GroupShape) -> Link:
        """The link a flat algorithm on this group runs over."""
        return self.intra if shape.intra else self.inter

    def links_for(self, shape: GroupShape) -> tuple[LinkSpec, BuildSpec]:
        """The links (one, or intra and inter) and node size the algorithms are priced with."""
        if shape.intra or shape.per_node in (None, 1):
            return self.link_for(shape), BuildSpec()
        return {INTRA: self.intra, INTER: self.inter}, BuildSpec(ranks_per_node=shape.per_node)

    def point_to_point(self, shape: GroupShape, nbytes: int) -> CallTime:
        """One send of ``nbytes`` between neighbouring ranks of the group: alpha + S beta."""
        link = self.link_for(shape)
        return CallTime("p2p", Terms(1, nbytes).time_s(link), nbytes, link.alpha_s)

    def all_to_all(self, shape: GroupShape, nbytes: int) -> CallTime:
        """An all-to-all of ``nbytes`` per GPU as the pairwise exchange: n - 1 steps, each
        sending S/n to one peer; across nodes the S (g-1)/n bound for the g - 1 peers of the
        node go over the intra-node link while S (n-g)/n goes over the inter-node one."""
        n = shape.size
        if n == 1 or nbytes == 0:
            return CallTime("none", 0.0, 0, 0.0)
        if shape.intra:
            lat = (n - 1) * self.intra.alpha_s
            band = nbytes * (n - 1) / n / self.intra.bandwidth_Bps
        else:
            g = shape.per_node or 1
            lat = (n - 1) * self.inter.alpha_s
            band = max(
                nbytes * (g - 1) / n / self.intra.bandwidth_Bps,
                nbytes * (n - g) / n / self.inter.bandwidth_Bps,
            )
        return CallTime("pairwise", lat + band, nbytes * (n - 1) / n, lat)

    def _call(
        self, collective: Collective, shape: GroupShape, nbytes: int, itemsize: int
    ) -> CallTime:
        """The automatic choice for one call of ``collective`` on ``nbytes`` (the full buffer:
        all-reduce/reduce-scatter input, all-gather output)."""
        if shape.size == 1 or nbytes == 0:
            return CallTime("none", 0.0, 0, 0.0)
        links, spec = self.links_for(shape)
        choice = choose(collective, shape.size, nbytes, links, itemsize=itemsize, spec=spec)
        p = choice.chosen.prediction
        return CallTime(
            choice.algorithm, p.time_s, p.bytes_sent_per_worker, p.latency_s, choice.forced
        )
