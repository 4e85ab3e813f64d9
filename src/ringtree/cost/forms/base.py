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
from ringtree.cost.model import FLAT, Cost, Terms


@dataclass(frozen=True)
class Estimate:
    """Terms per level and the most bytes one rank sends (the seed's "bytes per worker")."""

    cost: Cost
    max_bytes_sent: int


ClosedForm = Callable[[int, int, int, BuildSpec], Estimate]
FORMS: dict[tuple[Collective, str], ClosedForm] = {}


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
