"""The models on links: how one algorithm is priced, and :func:`predict` for one call.

A model here prices a canonical :class:`~ringtree.cost.query.Query` on links
(:data:`~ringtree.cost.links.LinkSpec`: one Link, or ``{"intra": Link, "inter": Link}``):
``price(query, links) -> Prediction``; :mod:`ringtree.cost.select` asks it for each algorithm
and chunk count. This is the layer under the link pricer
(:class:`~ringtree.cost.link_pricer.LinkPricer`); the one seam every command and the planner
price through, whatever the model (the NCCL model on a cluster as built included), is
:class:`ringtree.cost.pricer.Pricer`.

- ``textbook``: the seed's model: bytes per worker ~2S for all-reduce and ~S for the other
  collectives, over the link's nominal bandwidth, with no latency term. It reproduces the
  seed's worked figures (7B fp16 on 8 GPUs: 28 GB per worker, 28/900 s = 31 ms on NVLink 4);
  it is pessimistic about bytes (a ring sends 2(N-1)/N S, not 2S) and optimistic about
  bandwidth (vendor NVLink/PCIe figures add both directions, and collectives reach ~80 % of
  line rate).
- ``alpha-beta`` (the default): exact bytes and steps from the algorithm's closed form (equal,
  by test, to the counts from its schedule), per-step latency alpha, effective per-direction
  bandwidth, optional reduction cost gamma. A step costs ``alpha + B / bandwidth + gamma * R``
  (B: the most bytes any rank sends or receives in the step, links being full duplex; R: the
  most bytes any rank reduces), summed over the steps of each level on that level's link. Ring
  all-reduce: 2(N-1) alpha + 2(N-1)/N S / bandwidth. On a one-machine
  :class:`~ringtree.cost.host.HostLink` it prices with that model instead.

>>> from ringtree.cost.links import get_link
>>> p = predict("all-reduce", "ring", 8, 14 * 10**9, get_link("nvlink4"), model="textbook")
>>> p.bytes_sent_per_worker, round(p.time_s * 1e3, 2)
(28000000000, 31.11)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ringtree.algorithms import BuildSpec
from ringtree.collectives import Collective
from ringtree.cost.host import HostLink, price_on_host
from ringtree.cost.links import LinkSpec, link_name
from ringtree.cost.query import Prediction, Query, textbook_bytes
from ringtree.cost.terms import FLAT, INTER, Link, Terms
from ringtree.errors import RingtreeError


@dataclass(frozen=True)
class Model:
    """A cost model: its name and how it prices a query on its hardware description."""

    name: str
    price: Callable[[Query, Any], Prediction]


MODELS: dict[str, Model] = {}
DEFAULT_MODEL = "alpha-beta"


def register_model(model: Model) -> Model:
    """Make ``model`` available to :func:`predict` (and ``--model``) under its name."""
    MODELS[model.name] = model
    return model


def parse_model(name: str) -> str:
    """``textbook`` or ``alpha-beta`` (also ``alpha_beta``, ``alphabeta``)."""
    key = name.strip().lower().replace("_", "-")
    key = {"alphabeta": "alpha-beta"}.get(key, key)
    if key not in MODELS:
        raise RingtreeError(f"unknown cost model {name!r}: expected one of {', '.join(MODELS)}")
    return key


def get_model(name: str) -> Model:
    """The model called ``name`` (as :func:`parse_model` reads it)."""
    return MODELS[parse_model(name)]


def predict(
    collective: Collective | str,
    algorithm: str,
    n_ranks: int,
    size_bytes: int,
    links: LinkSpec,
    model: str = DEFAULT_MODEL,
    *,
    itemsize: int = 1,
    spec: BuildSpec | None = None,
) -> Prediction:
    """The cost of ``algorithm`` for ``collective`` over ``size_bytes`` on ``n_ranks`` ranks.

    links: one Link, or ``{"intra": Link, "inter": Link}`` for algorithms on nodes.
    itemsize: bytes per element (chunks split whole elements; default: bytes).
    Uses closed forms only, so N in the thousands costs microseconds. RingtreeError on
    N < 1, a negative size, a size that is not whole elements, or an unknown model/algorithm.
    """
    q = Query.of(collective, algorithm, n_ranks, size_bytes, itemsize=itemsize, spec=spec)
    return get_model(model).price(q, links)


# -- textbook ---------------------------------------------------------------------------------
def nominal_link(links: LinkSpec) -> Link:
    """The link whose nominal bandwidth the textbook uses: the only one, or the inter-node
    link of two levels (the bottleneck the seed reasons about)."""
    return links if isinstance(links, Link) else links[INTER]


def price_textbook(q: Query, links: LinkSpec) -> Prediction:
    """bytes = 2S (all-reduce) or S; time = bytes / nominal bandwidth. Steps are the
    algorithm's (from its closed form) but cost nothing."""
    sent = textbook_bytes(q.collective, q.n_ranks, q.size_bytes)
    steps = sum(t.steps for t in q.estimate().cost.values())
    return Prediction.of(
        q, "textbook", link_name(links), bytes_sent=sent, steps=steps, latency_s=0.0,
        bandwidth_s=sent / nominal_link(links).nominal, reduce_s=0.0,
        cost={FLAT: Terms(steps, sent, 0)},
    )


# -- alpha-beta -------------------------------------------------------------------------------
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


def price_alpha_beta(q: Query, links: LinkSpec) -> Prediction:
    """Latency, bandwidth and reduction terms summed over the levels of the closed form; a
    one-machine :class:`~ringtree.cost.host.HostLink` (a calibrated profile, the engine's
    presets for local processes) is priced by that model instead
    (:func:`~ringtree.cost.host.price_on_host`)."""
    if isinstance(links, HostLink) and links.host is not None:
        return price_on_host(q, links, price_on_links)
    return price_on_links(q, links)


def price_on_links(q: Query, links: LinkSpec) -> Prediction:
    """The alpha-beta terms of ``q``'s closed form, each level on its link."""
    e = q.estimate()
    latency = bandwidth = reduce = 0.0
    for level, terms in e.cost.items():
        link = level_link(links, level)
        latency += terms.steps * link.alpha_s
        bandwidth += terms.wire_bytes / link.bandwidth_Bps
        reduce += terms.reduce_bytes * link.gamma_s_per_byte
    return Prediction.of(
        q, "alpha-beta", link_name(links), bytes_sent=e.max_bytes_sent,
        steps=sum(t.steps for t in e.cost.values()), latency_s=latency, bandwidth_s=bandwidth,
        reduce_s=reduce, cost=e.cost,
    )


register_model(Model("textbook", price_textbook))
register_model(Model(DEFAULT_MODEL, price_alpha_beta))
