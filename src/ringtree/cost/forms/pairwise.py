"""Closed forms of pairwise exchange (:mod:`ringtree.algorithms.pairwise`; Thakur,
Rabenseifner & Gropp 2005): the ring's steps and bytes, with every send posted at once; and
the all-to-all's linear shift, (N-1) alpha + (N-1)/N S beta."""

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


@closed_form(Collective.ALL_TO_ALL, "pairwise")
def pairwise_all_to_all(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """N-1 steps, (N-1)/N * S bytes per rank (S: one rank's input): (N-1) alpha + (N-1)/N S
    beta. Every step sends every block size once, so the busiest rank carries the largest,
    ceil(S/N); rank r sends all its blocks but its own (block r, the smallest at most)."""
    if n == 1:
        return NOTHING
    big = ceil_div(count, n) * itemsize
    return flat(n - 1, (n - 1) * big, 0, (count - count // n) * itemsize)
