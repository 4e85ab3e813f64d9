"""The default model: exact bytes and steps from the algorithm's closed form (equal, by test, to
the counts from its schedule), per-step latency alpha, effective per-direction bandwidth,
optional reduction cost gamma.

A step costs ``alpha + B / bandwidth + gamma * R`` (B: the most bytes any rank sends or
receives in the step, links being full duplex; R: the most bytes any rank reduces), summed over
the steps of each level ("flat", or "intra"/"inter" for hierarchical algorithms) on that
level's link. Ring all-reduce: 2(N-1) alpha + 2(N-1)/N S / bandwidth.
"""

from __future__ import annotations

from ringtree.algorithms import BuildSpec
from ringtree.collectives import Collective
from ringtree.cost.forms import Estimate, estimate
from ringtree.cost.host import HostLink, algorithm_host_terms, prices_on_host
from ringtree.cost.links import LinkSpec, link_name
from ringtree.cost.model import FLAT, INTER, Link, Terms
from ringtree.cost.prediction import Prediction, textbook_bytes
from ringtree.errors import RingtreeError


def level_link(links: LinkSpec, level: str) -> Link:
    """The link that carries ``level``: a single link carries every level; of two levels, a
    flat (single-level) algorithm spanning nodes is limited by the inter-node link."""
    if isinstance(links, Link):
        return links
    if level in links:
        return links[level]
    if level == FLAT and INTER in links:
        return links[INTER]
    raise RingtreeError(f"no link given for the {level!r} level: give {level}=LINK")


def predict_alpha_beta(
    collective: Collective, algorithm: str, n_ranks: int, count: int, itemsize: int,
    links: LinkSpec, spec: BuildSpec,
) -> Prediction:  # fmt: skip
    """Latency, bandwidth and reduction terms summed over the levels of the closed form (on
    a one-machine :class:`~ringtree.cost.host.HostLink`: that model's terms, from the
    schedule)."""
    e = estimate(collective, algorithm, n_ranks, count, itemsize, spec)
    if prices_on_host(links, n_ranks, spec):
        return _predict_host(collective, algorithm, n_ranks, count, itemsize, links, spec, e)
    latency = bandwidth = reduce = 0.0
    for level, terms in e.cost.items():
        link = level_link(links, level)
        latency += terms.steps * link.alpha_s
        bandwidth += terms.wire_bytes / link.bandwidth_Bps
        reduce += terms.reduce_bytes * link.gamma_s_per_byte
    return Prediction(
        collective=collective,
        algorithm=algorithm,
        model="alpha-beta",
        link=link_name(links),
        n_ranks=n_ranks,
        size_bytes=count * itemsize,
        bytes_sent_per_worker=e.max_bytes_sent,
        textbook_bytes=textbook_bytes(collective, n_ranks, count * itemsize),
        steps=sum(t.steps for t in e.cost.values()),
        latency_s=latency,
        bandwidth_s=bandwidth,
        reduce_s=reduce,
        cost=e.cost,
    )


def _predict_host(
    collective: Collective, algorithm: str, n_ranks: int, count: int, itemsize: int,
    link: HostLink, spec: BuildSpec, e: Estimate,
) -> Prediction:  # fmt: skip
    """The one-machine model: latency = steps alpha + messages o; ``cost`` holds its terms
    (wire and reduced bytes as that model counts them)."""
    host = link.host
    assert host is not None
    t = algorithm_host_terms(collective, algorithm, n_ranks, count, itemsize, spec, host.cores)
    return Prediction(
        collective=collective,
        algorithm=algorithm,
        model="alpha-beta",
        link=link.name,
        n_ranks=n_ranks,
        size_bytes=count * itemsize,
        bytes_sent_per_worker=e.max_bytes_sent,
        textbook_bytes=textbook_bytes(collective, n_ranks, count * itemsize),
        steps=t.steps,
        latency_s=t.steps * host.alpha_s + t.messages * host.message_s,
        bandwidth_s=t.wire_bytes / host.bandwidth_Bps,
        reduce_s=t.reduce_bytes * host.gamma_s_per_byte,
        cost={FLAT: Terms(t.steps, t.wire_bytes, t.reduce_bytes)},
    )
