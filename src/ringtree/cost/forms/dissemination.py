"""Closed form of the dissemination barrier (:mod:`ringtree.algorithms.dissemination`;
Hensgen, Finkel & Manber 1988): ceil(log2 N) rounds of one message per rank, L alpha (plus L
times its token's bytes; the engine's token is empty)."""

from __future__ import annotations

from ringtree.algorithms import BuildSpec
from ringtree.algorithms.tree import ceil_log2
from ringtree.collectives import Collective
from ringtree.cost.forms.base import Estimate, closed_form, flat


@closed_form(Collective.BARRIER, "dissemination")
def dissemination_barrier(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """L = ceil(log2 N) steps: L alpha + L S beta for a token of S bytes (0 in the engine)."""
    steps = ceil_log2(n)
    return flat(steps, steps * count * itemsize, 0, steps * count * itemsize)
