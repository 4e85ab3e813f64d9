"""The seed's model: bytes per worker ~2S for all-reduce and ~S for the other collectives, over
the link's nominal bandwidth, with no latency term.

It reproduces the seed's worked figures (7B fp16 on 8 GPUs: 28 GB per worker, 28/900 s = 31 ms
on NVLink 4). It is pessimistic about bytes (a ring sends 2(N-1)/N S, not 2S) and optimistic
about bandwidth (vendor NVLink/PCIe figures add both directions, and collectives reach ~80 %
of line rate).
"""

from __future__ import annotations

from ringtree.algorithms import BuildSpec
from ringtree.collectives import Collective
from ringtree.cost.forms import estimate
from ringtree.cost.links import LinkSpec, link_name
from ringtree.cost.model import FLAT, INTER, Link, Terms
from ringtree.cost.prediction import Prediction, textbook_bytes


def nominal_link(links: LinkSpec) -> Link:
    """The link whose nominal bandwidth the textbook uses: the only one, or the inter-node
    link of two levels (the bottleneck the seed reasons about)."""
    return links if isinstance(links, Link) else links[INTER]


def predict_textbook(
    collective: Collective, algorithm: str, n_ranks: int, count: int, itemsize: int,
    links: LinkSpec, spec: BuildSpec,
) -> Prediction:  # fmt: skip
    """bytes = 2S (all-reduce) or S; time = bytes / nominal bandwidth. Steps are the
    algorithm's (from its closed form) but cost nothing."""
    size = count * itemsize
    sent = textbook_bytes(collective, n_ranks, size)
    steps = sum(t.steps for t in estimate(collective, algorithm, n_ranks, count, itemsize, spec)
                .cost.values())  # fmt: skip
    return Prediction(
        collective=collective,
        algorithm=algorithm,
        model="textbook",
        link=link_name(links),
        n_ranks=n_ranks,
        size_bytes=size,
        bytes_sent_per_worker=sent,
        textbook_bytes=sent,
        steps=steps,
        latency_s=0.0,
        bandwidth_s=sent / nominal_link(links).nominal,
        reduce_s=0.0,
        cost={FLAT: Terms(steps, sent, 0)},
    )
