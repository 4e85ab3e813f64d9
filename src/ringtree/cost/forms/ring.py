"""Closed forms of the ring algorithms (:mod:`ringtree.algorithms.ring`): the ring
reduce-scatter, all-gather and all-reduce (Patarasuk & Yuan 2009; the seed's 2(N-1)/N * S) and
the pipelined chain broadcast and reduce (Thakur, Rabenseifner & Gropp 2005)."""

from __future__ import annotations

from ringtree.algorithms import BuildSpec
from ringtree.collectives import Collective
from ringtree.cost.forms.base import NOTHING, Estimate, ceil_div, closed_form, flat


def _ring_phase(n: int, count: int, itemsize: int, phases: int, reduce_phases: int) -> Estimate:
    """``phases`` ring passes of N-1 steps; every step moves every chunk once, so the busiest
    rank carries the largest chunk, ceil(count/N) elements. In each pass a rank sends every
    chunk but one, a different one per pass (consecutive chunks in ring order)."""
    big = ceil_div(count, n) * itemsize
    steps = phases * (n - 1)
    base, extra = divmod(count, n)
    if n == 1:
        sent = 0
    elif phases == 1:
        sent = count - base  # skips a smallest chunk
    elif n == 2:
        sent = count  # skips each of the two chunks once
    else:  # skips two adjacent chunks: two small ones unless only one chunk is small
        sent = 2 * count - (2 * base + (1 if n - extra == 1 else 0))
    return flat(steps, steps * big, reduce_phases * (n - 1) * big, sent * itemsize)


@closed_form(Collective.ALL_REDUCE, "ring")
def ring_all_reduce(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """2(N-1) steps, 2(N-1)/N * S bytes per rank: 2(N-1) alpha + 2(N-1)/N S beta."""
    return _ring_phase(n, count, itemsize, phases=2, reduce_phases=1)


@closed_form(Collective.REDUCE_SCATTER, "ring")
def ring_reduce_scatter(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """N-1 steps, (N-1)/N * S bytes per rank: (N-1) alpha + (N-1)/N S beta."""
    return _ring_phase(n, count, itemsize, phases=1, reduce_phases=1)


@closed_form(Collective.ALL_GATHER, "ring")
def ring_all_gather(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """N-1 steps, (N-1)/N * S bytes per rank: (N-1) alpha + (N-1)/N S beta."""
    return _ring_phase(n, count, itemsize, phases=1, reduce_phases=0)


def _chain(n: int, count: int, itemsize: int, spec: BuildSpec, reduces: bool) -> Estimate:
    """Pipelined chain over C chunks: N-2+C steps; in step t the busiest rank moves the
    lowest-numbered chunk in flight, so wire bytes = (N-2) * ceil(S/C) + S."""
    if n == 1:
        return NOTHING
    c = spec.chunks
    wire = ((n - 2) * ceil_div(count, c) + count) * itemsize
    return flat(n - 2 + c, wire, wire if reduces else 0, count * itemsize)


@closed_form(Collective.BROADCAST, "ring")
def ring_broadcast(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """Chain broadcast: (N-2+C) alpha + ((N-2)/C + 1) S beta (Thakur et al. 2005, pipelined)."""
    return _chain(n, count, itemsize, spec, reduces=False)


@closed_form(Collective.REDUCE, "ring")
def ring_reduce(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """Chain reduce: (N-2+C) alpha + ((N-2)/C + 1) S (beta + gamma)."""
    return _chain(n, count, itemsize, spec, reduces=True)
