"""The :class:`~ringtree.cost.pricer.Pricer` of the models on links: alpha-beta (the
default), textbook, and on a calibrated profile's link the one-machine model.

Links: one :class:`~ringtree.cost.terms.Link` for every rank, or ``{"intra": Link, "inter":
Link}``. On two levels a group inside one node is priced on the intra-node link; a group with
the same number g > 1 of ranks on each node on both (flat algorithms on the inter-node link,
each of their steps crossing some node boundary; the hierarchical ones with their intra-node
phases on the intra-node link); an uneven group, or one rank per node, on the inter-node link.
On one link the group's ranks per node, when given, pass to the algorithms (hierarchical ones
need them). A call is the automatic choice
(:func:`ringtree.cost.select.choose`, ``RINGTREE_ALGO`` forcing or restricting it as
``NCCL_ALGO`` does), or the one algorithm the pricer was made for; closed forms only, and
identical calls are priced once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from ringtree.algorithms import BuildSpec
from ringtree.collectives import Collective
from ringtree.cost.links import LinkSpec
from ringtree.cost.models import DEFAULT_MODEL, get_model
from ringtree.cost.pricer import CallTime, GroupShape
from ringtree.cost.query import Prediction
from ringtree.cost.select import AUTO, Choice, choose, is_auto, tuned
from ringtree.cost.terms import INTER, INTRA, Link, Terms


@dataclass(frozen=True)
class LinkAnswer:
    """The alpha-beta (or textbook) model's account of one call: its prediction, and the
    automatic choice that picked it (None when the algorithm was given)."""

    prediction: Prediction
    choice: Choice | None
    n_chunks: int | None

    def record(self) -> dict[str, Any]:
        """The prediction's record, with the choice's (``forced``, the competing times, the
        reason) or the chunk count."""
        if self.choice is None:
            return {**self.prediction.record(), "n_chunks": self.n_chunks}
        return {**self.prediction.record(), **self.choice.record()}


class LinkPricer:
    """Prices calls on links with the ``model`` registered in :mod:`ringtree.cost.models`
    (module doc); ``algorithm``: ``auto`` or one the collective has; ``spec``: its root and
    chunk count (ranks per node come from each call's group); ``env``: where RINGTREE_ALGO is
    read (None: the process environment)."""

    def __init__(
        self, links: LinkSpec, model: str = DEFAULT_MODEL, *, algorithm: str = AUTO,
        spec: BuildSpec | None = None, env: Mapping[str, str] | None = None,
    ) -> None:
        self.links, self.model = links, get_model(model).name
        self.algorithm, self.spec, self.env = algorithm, spec or BuildSpec(), env
        self.call = lru_cache(maxsize=None)(self._call)

    def where(self, shape: GroupShape) -> tuple[LinkSpec, BuildSpec]:
        """The link(s) a call on ``shape`` is priced on, and the spec with its ranks per node
        (module doc)."""
        links = self.links
        if isinstance(links, Link):
            per_node = shape.per_node
        elif shape.intra:
            links, per_node = links[INTRA], None
        elif shape.per_node in (None, 1):
            links, per_node = links[INTER], None
        else:
            per_node = shape.per_node
        return links, replace(self.spec, ranks_per_node=per_node)

    def link_for(self, shape: GroupShape) -> Link:
        """The one link a point-to-point transfer on ``shape`` crosses."""
        if isinstance(self.links, Link):
            return self.links
        return self.links[INTRA] if shape.intra else self.links[INTER]

    def _call(
        self, collective: Collective, shape: GroupShape, size_bytes: int, itemsize: int = 1
    ) -> CallTime:
        links, spec = self.where(shape)
        n = shape.size
        if is_auto(self.algorithm):
            choice = choose(collective, n, size_bytes, links, self.model, itemsize=itemsize,
                            spec=spec, env=self.env)
            cand, forced = choice.chosen, choice.forced
            answer = LinkAnswer(cand.prediction, choice, cand.n_chunks)
        else:
            cand = tuned(collective, self.algorithm, n, size_bytes, links, self.model,
                         itemsize=itemsize, spec=spec)
            forced, answer = False, LinkAnswer(cand.prediction, None, cand.n_chunks)
        p = cand.prediction
        return CallTime(cand.algorithm, p.time_s, p.bytes_sent_per_worker, p.latency_s, forced,
                        answer)

    def point_to_point(self, shape: GroupShape, size_bytes: int) -> CallTime:
        """One send between neighbouring ranks: alpha + S / bandwidth on the link it
        crosses."""
        link = self.link_for(shape)
        return CallTime("p2p", Terms(1, size_bytes).time_s(link), size_bytes, link.alpha_s)

    def all_to_all(self, shape: GroupShape, size_bytes: int) -> CallTime:
        """An all-to-all of ``size_bytes`` per rank as the pairwise exchange: n - 1 steps,
        each sending S/n to one peer; across nodes the S (g-1)/n bound for the g - 1 peers of
        the node go over the intra-node link while S (n-g)/n goes over the inter-node one."""
        n = shape.size
        inter = self.link_for(shape)
        intra = self.links if isinstance(self.links, Link) else self.links[INTRA]
        lat = (n - 1) * inter.alpha_s
        if shape.intra:
            band = size_bytes * (n - 1) / n / inter.bandwidth_Bps
        else:
            g = shape.per_node or 1
            band = max(size_bytes * (g - 1) / n / intra.bandwidth_Bps,
                       size_bytes * (n - g) / n / inter.bandwidth_Bps)
        return CallTime("pairwise", lat + band, size_bytes * (n - 1) / n, lat)
