"""What a closed form returns (:class:`Estimate`) and the registry of closed forms.

A closed form is ``f(n_ranks, count, itemsize, spec) -> Estimate``, registered with
:func:`closed_form` under the same ``(collective, name)`` key as its algorithm's
:class:`~ringtree.algorithms.Algorithm` entry. It is given the spec the algorithm's builder
gets (:meth:`~ringtree.algorithms.Algorithm.resolve`: the chunk count filled in), so defaults
live in the registry entry alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ringtree.algorithms import BuildSpec
from ringtree.collectives import Collective
from ringtree.cost.terms import FLAT, Cost, Terms
from ringtree.errors import RingtreeError


@dataclass(frozen=True)
class Estimate:
    """Terms per level and the most bytes one rank sends (the seed's "bytes per worker")."""

    cost: Cost
    max_bytes_sent: int


ClosedForm = Callable[[int, int, int, BuildSpec], Estimate]
FORMS: dict[tuple[Collective, str], ClosedForm] = {}

#: Closed forms that walk every rank once (the pipelined trees' stream offsets, the blocks of
#: the folded recursive algorithms), with the most ranks each prices in about a second on one
#: core (measured: the double binary tree 1.4 s at 65,536 ranks, Rabenseifner 0.16 s at 10**6).
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
    (Collective.ALL_TO_ALL, "bruck"): 2**20,  # 0.8 s at 2**20
    (Collective.GATHER, "tree"): 2**20,  # 0.2 s
    (Collective.SCATTER, "tree"): 2**20,
}


def check_rank_limit(collective: Collective, algorithm: str, n_ranks: int) -> None:
    """RingtreeError when the closed form of the pair walks every rank and ``n_ranks`` is
    above its RANK_LIMITS entry."""
    limit = RANK_LIMITS.get((collective, algorithm))
    if limit is not None and n_ranks > limit:
        raise RingtreeError(
            f"{algorithm} {collective.value} is priced on up to {limit:,} ranks (its closed "
            f"form walks every rank), not {n_ranks:,}"
        )


def closed_form(collective: Collective, algorithm: str) -> Callable[[ClosedForm], ClosedForm]:
    """Decorator: register ``f`` as the closed form of ``algorithm`` for ``collective``."""

    def deco(f: ClosedForm) -> ClosedForm:
        FORMS[(collective, algorithm)] = f
        return f

    return deco


def ceil_div(a: int, b: int) -> int:
    """ceil(a / b) for b > 0."""
    return -(-a // b)


def flat(steps: int, wire_bytes: float, reduce_bytes: float, max_bytes_sent: int) -> Estimate:
    """An Estimate on a single level."""
    return Estimate({FLAT: Terms(steps, wire_bytes, reduce_bytes)}, max_bytes_sent)


NOTHING = flat(0, 0, 0, 0)
