"""``algorithm="auto"``: the runtime's choice among the registered algorithms, by size and N.

Each candidate's time is predicted with the alpha-beta model on a loopback link calibrated
on this project's reference machine (2 cores, gloo over 127.0.0.1): alpha 0.13 ms per step
and 1.3 GB/s per rank at N=2; with more ranks than cores, each message waits for a core, so
alpha grows about as (N/cores)^2.7 (5 ms for a 6-step ring of 4 KiB at N=4 on 2 cores) and
bandwidth as (N/cores)^-0.5 (0.9 GB/s at N=4). Few steps win at small sizes, few bytes at
large ones; the candidates are whatever the registry holds for the collective.
"""

from __future__ import annotations

import os
from functools import lru_cache

from ringtree.algorithms import algorithms_for, build
from ringtree.collectives import Collective
from ringtree.cost.model import Link, schedule_terms, total_time_s

#: Algorithms that need settings "auto" cannot guess (a node size).
_NEEDS_SETTINGS = frozenset({"hierarchical"})


def loopback_link(n_ranks: int, cores: int | None = None) -> Link:
    """The calibrated link of N local processes talking over 127.0.0.1 on ``cores`` cores."""
    cores = cores or os.cpu_count() or 1
    over = max(1.0, n_ranks / cores)
    return Link(
        name="loopback",
        bandwidth_Bps=1.3e9 / over**0.5,
        alpha_s=130e-6 * over**2.7,
        note=f"{n_ranks} local processes on {cores} cores (gloo over 127.0.0.1)",
        source="measured: gloo all_reduce on a 2-core machine, N=2 and N=4",
    )


def predict_s(
    collective: Collective, algorithm: str, n_ranks: int, nbytes: int, itemsize: int, root: int
) -> float:
    """Model time of ``algorithm`` for ``nbytes`` on the loopback link."""
    s = build(collective, algorithm, n_ranks, root=root)
    count = max(1, nbytes // itemsize)
    return total_time_s(schedule_terms(s, count, itemsize), loopback_link(n_ranks))


@lru_cache(maxsize=4096)
def _choose(collective: Collective, n_ranks: int, size_class: int, itemsize: int, root: int) -> str:
    nbytes = 1 << size_class
    names = [a for a in algorithms_for(collective) if a not in _NEEDS_SETTINGS]
    return min(names, key=lambda a: predict_s(collective, a, n_ranks, nbytes, itemsize, root))


def choose(collective: Collective, n_ranks: int, nbytes: int, itemsize: int, root: int = 0) -> str:
    """The algorithm "auto" runs: the fastest registered one under the loopback model, for
    ``nbytes`` rounded to a power of two (so every rank with the same size agrees)."""
    return _choose(collective, n_ranks, max(0, int(nbytes).bit_length() - 1), itemsize, root)
