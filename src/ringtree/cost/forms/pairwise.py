"""Closed forms of pairwise exchange (:mod:`ringtree.algorithms.pairwise`; Thakur,
Rabenseifner & Gropp 2005): the ring's steps and bytes, with every send posted at once."""

from __future__ import annotations

from ringtree.algorithms import BuildSpec
from ringtree.collectives import Collective
from ringtree.cost.forms.base import NOTHING, Estimate, ceil_div, closed_form, flat


def _pairwise(n: int, count: int, itemsize: int, rs: bool, ag: bool) -> Estimate:
    """N-1 steps per phase; at every step some rank receives (or sends) the largest block,
    ceil(count/N). Rank r sends every block but its own in the reduce-scatter (count - b_r)
    and its own block N-1 times in the all-gather ((N-1) b_r)."""
    if n == 1:
        return NOTHING
    big, small = ceil_div(count, n), count // n
    steps = (n - 1) * (rs + ag)
    sent = count + (n - 2) * big if rs and ag else (count - small if rs else (n - 1) * big)
    reduced = (n - 1) * big * itemsize if rs else 0
    return flat(steps, steps * big * itemsize, reduced, sent * itemsize)


@closed_form(Collective.REDUCE_SCATTER, "pairwise")
def pairwise_reduce_scatter(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """N-1 steps, (N-1)/N * S bytes per rank: the ring's (N-1) alpha + (N-1)/N S beta."""
    return _pairwise(n, count, itemsize, rs=True, ag=False)


@closed_form(Collective.ALL_GATHER, "pairwise")
def pairwise_all_gather(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """N-1 steps, (N-1)/N * S bytes per rank: the ring's (N-1) alpha + (N-1)/N S beta."""
    return _pairwise(n, count, itemsize, rs=False, ag=True)


@closed_form(Collective.ALL_REDUCE, "pairwise")
def pairwise_all_reduce(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """2(N-1) steps, 2(N-1)/N * S bytes per rank: the ring's 2(N-1) alpha + 2(N-1)/N S beta."""
    return _pairwise(n, count, itemsize, rs=True, ag=True)
