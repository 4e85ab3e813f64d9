"""Closed forms of the linear algorithms (:mod:`ringtree.algorithms.linear`; Thakur,
Rabenseifner & Gropp 2005): gather and scatter, N-1 steps of one block, (N-1) alpha + (N-1)/N S
beta; all-to-all, one step, alpha + (N-1)/N S beta."""

from __future__ import annotations

from ringtree.algorithms import BuildSpec
from ringtree.collectives import Collective
from ringtree.cost.forms.base import NOTHING, Estimate, closed_form, flat


def _linear(n: int, count: int, itemsize: int, root: int, gather: bool) -> Estimate:
    """Step k moves block root + k; the root moves them all, every other rank its own."""
    if n == 1:
        return NOTHING
    base, extra = divmod(count, n)
    others = count - base - (1 if root < extra else 0)  # every block but the root's
    largest = base + (1 if extra > (1 if root < extra else 0) else 0)  # of the others
    sent = largest if gather else others
    return flat(n - 1, others * itemsize, 0, sent * itemsize)


@closed_form(Collective.GATHER, "linear")
def linear_gather(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """N-1 steps, the root receives S - its block: (N-1) alpha + (N-1)/N S beta."""
    return _linear(n, count, itemsize, spec.root, gather=True)


@closed_form(Collective.SCATTER, "linear")
def linear_scatter(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """N-1 steps, the root sends S - its block: (N-1) alpha + (N-1)/N S beta."""
    return _linear(n, count, itemsize, spec.root, gather=False)


@closed_form(Collective.ALL_TO_ALL, "linear")
def linear_all_to_all(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """One step, alpha + (N-1)/N S beta: rank r sends every block but its own (S - |block r|)
    and receives block r from every other rank ((N-1) |block r|); the step lasts as long as
    the busiest rank's larger direction."""
    if n == 1:
        return NOTHING
    base, extra = divmod(count, n)
    sent = count - base
    received = (n - 1) * (base + (1 if extra else 0))
    return flat(1, max(sent, received) * itemsize, 0, sent * itemsize)
