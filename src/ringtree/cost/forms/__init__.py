"""Closed forms: an algorithm's Terms without building its schedule, so N in the thousands
costs nothing. One module per algorithm family, as in :mod:`ringtree.algorithms`, each closed
form registered under its algorithm's ``(collective, name)`` key. Tests assert closed form ==
:func:`ringtree.cost.terms.schedule_terms` for N up to 64 for every registered algorithm, and
that every algorithm has a closed form and every closed form an algorithm.
"""

from __future__ import annotations

from ringtree.algorithms import BuildSpec, get_algorithm
from ringtree.collectives import Collective
from ringtree.cost.forms import (  # noqa: F401
    bruck,
    dbtree,
    dissemination,
    hierarchical,
    linear,
    pairwise,
    recursive,
    ring,
    tree,
)
from ringtree.cost.forms.base import FORMS, ClosedForm, Estimate, check_rank_limit, closed_form
from ringtree.errors import RingtreeError

__all__ = [
    "ClosedForm",
    "Estimate",
    "closed_form",
    "estimate",
    "form_of",
    "has_closed_form",
    "registered",
]


def form_of(collective: Collective, algorithm: str, n_ranks: int) -> ClosedForm:
    """The closed form registered for the pair, to price ``n_ranks`` ranks (RingtreeError if
    none is, or above its rank limit)."""
    f = FORMS.get((collective, algorithm))
    if f is None:
        raise RingtreeError(f"no closed form for {algorithm} {collective.value}")
    check_rank_limit(collective, algorithm, n_ranks)
    return f


def estimate(
    collective: Collective, algorithm: str, n_ranks: int, count: int, itemsize: int,
    spec: BuildSpec | None = None,
) -> Estimate:
    """The closed-form Estimate of a registered ``algorithm``, its spec resolved as the builder's
    is (RingtreeError if the algorithm or its closed form is missing)."""
    spec = get_algorithm(collective, algorithm).resolve(spec or BuildSpec())
    return form_of(collective, algorithm, n_ranks)(n_ranks, count, itemsize, spec)


def registered() -> list[tuple[Collective, str]]:
    """Every (collective, algorithm) pair with a closed form."""
    return list(FORMS)


def has_closed_form(collective: Collective, algorithm: str) -> bool:
    """Whether ``estimate`` can answer for this pair."""
    return (collective, algorithm) in FORMS
