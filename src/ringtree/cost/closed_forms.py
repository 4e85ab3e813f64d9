"""Closed forms: an algorithm's Terms without building its schedule, so N in the thousands
costs nothing. Tests assert closed form == :func:`ringtree.cost.model.schedule_terms` for N up
to 64, for every registered algorithm.

Each closed form is ``f(n_ranks, count, itemsize, spec) -> Estimate`` and is registered for the
same ``(collective, algorithm)`` key as its builder.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ringtree.algorithms import DEFAULT_PIPELINE_CHUNKS, BuildSpec
from ringtree.collectives import Collective
from ringtree.cost.model import FLAT, Cost, Terms
from ringtree.errors import RingtreeError


@dataclass(frozen=True)
class Estimate:
    """Terms per level and the most bytes one rank sends (the seed's "bytes per worker")."""

    cost: Cost
    max_bytes_sent: int


ClosedForm = Callable[[int, int, int, BuildSpec], Estimate]
_FORMS: dict[tuple[Collective, str], ClosedForm] = {}

#: Closed forms that walk every rank once (the pipelined trees' stream offsets, the blocks of
#: the folded recursive algorithms), with the most ranks each prices in about a second on one
#: core (measured: the double binary tree 1.4 s at 65,536 ranks, Rabenseifner 0.26 s at 2**20).
#: Above it the algorithm is refused (auto leaves it out and says why); every other closed
#: form answers for any N at once.
RANK_LIMITS: dict[tuple[Collective, str], int] = {
    (Collective.BROADCAST, "tree"): 2**16,
    (Collective.REDUCE, "tree"): 2**16,
    (Collective.ALL_REDUCE, "tree"): 2**16,
    (Collective.ALL_REDUCE, "dbtree"): 2**16,
    (Collective.ALL_REDUCE, "rabenseifner"): 2**20,
    (Collective.ALL_GATHER, "recursive"): 2**20,
    (Collective.REDUCE_SCATTER, "recursive"): 2**20,
}


def closed_form(collective: Collective, algorithm: str) -> Callable[[ClosedForm], ClosedForm]:
    """Decorator: register ``f`` as the closed form of ``algorithm`` for ``collective``."""

    def deco(f: ClosedForm) -> ClosedForm:
        _FORMS[(collective, algorithm)] = f
        return f

    return deco


def estimate(
    collective: Collective, algorithm: str, n_ranks: int, count: int, itemsize: int,
    spec: BuildSpec | None = None,
) -> Estimate:  # fmt: skip
    """The closed-form Estimate of ``algorithm`` (RingtreeError if none is registered)."""
    f = _FORMS.get((collective, algorithm))
    if f is None:
        raise RingtreeError(f"no closed form for {algorithm} {collective.value}")
    limit = RANK_LIMITS.get((collective, algorithm))
    if limit is not None and n_ranks > limit:
        raise RingtreeError(
            f"{algorithm} {collective.value} is priced on up to {limit:,} ranks (its closed "
            f"form walks every rank), not {n_ranks:,}"
        )
    return f(n_ranks, count, itemsize, spec or BuildSpec())


def registered() -> list[tuple[Collective, str]]:
    """Every (collective, algorithm) pair with a closed form."""
    return list(_FORMS)


def has_closed_form(collective: Collective, algorithm: str) -> bool:
    """Whether ``estimate`` can answer for this pair."""
    return (collective, algorithm) in _FORMS


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# -- ring (Patarasuk & Yuan 2009; the seed's 2(N-1)/N * S) ---------------------------------
def _ring_phase(n: int, count: int, itemsize: int, phases: int, reduce_phases: int) -> Estimate:
    """``phases`` ring passes of N-1 steps; every step moves every chunk once, so the busiest
    rank carries the largest chunk, ceil(count/N) elements. In each pass a rank sends every
    chunk but one, a different one per pass (consecutive chunks in ring order)."""
    big = _ceil_div(count, n) * itemsize
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
    return Estimate(
        {FLAT: Terms(steps, steps * big, reduce_phases * (n - 1) * big)}, sent * itemsize
    )


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
        return Estimate({FLAT: Terms(0, 0, 0)}, 0)
    c = spec.n_chunks or DEFAULT_PIPELINE_CHUNKS
    wire = ((n - 2) * _ceil_div(count, c) + count) * itemsize
    return Estimate({FLAT: Terms(n - 2 + c, wire, wire if reduces else 0)}, count * itemsize)


@closed_form(Collective.BROADCAST, "ring")
def ring_broadcast(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """Chain broadcast: (N-2+C) alpha + ((N-2)/C + 1) S beta (Thakur et al. 2005, pipelined)."""
    return _chain(n, count, itemsize, spec, reduces=False)


@closed_form(Collective.REDUCE, "ring")
def ring_reduce(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """Chain reduce: (N-2+C) alpha + ((N-2)/C + 1) S (beta + gamma)."""
    return _chain(n, count, itemsize, spec, reduces=True)


# -- pairwise exchange (Thakur, Rabenseifner & Gropp 2005) --------------------------------
def _pairwise(n: int, count: int, itemsize: int, rs: bool, ag: bool) -> Estimate:
    """N-1 steps per phase; at every step some rank receives (or sends) the largest block,
    ceil(count/N). Rank r sends every block but its own in the reduce-scatter (count - b_r)
    and its own block N-1 times in the all-gather ((N-1) b_r)."""
    if n == 1:
        return Estimate({FLAT: Terms(0, 0, 0)}, 0)
    big, small = _ceil_div(count, n), count // n
    steps = (n - 1) * (rs + ag)
    sent = count + (n - 2) * big if rs and ag else (count - small if rs else (n - 1) * big)
    reduced = (n - 1) * big * itemsize if rs else 0
    return Estimate({FLAT: Terms(steps, steps * big * itemsize, reduced)}, sent * itemsize)


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


# The other families register their closed forms on import (they use the decorator above).
from ringtree.cost import (  # noqa: E402, F401
    closed_forms_hierarchical,
    closed_forms_recursive,
    closed_forms_tree,
)
