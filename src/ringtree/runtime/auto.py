"""``algorithm="auto"`` in the engine: the shared selector (:mod:`ringtree.cost.select`) on
the link that local processes actually see.

The link is the ``loopback`` preset (gloo over 127.0.0.1 on the project's 2-core machine:
alpha 128 us per step, 1.3 GB/s) adjusted for oversubscription: with more ranks than
cores, every message waits for a core, so alpha grows about as (N/cores)^2.7 and bandwidth
shrinks as (N/cores)^-0.5 (measured there: a 6-step ring of 4 KiB takes 5 ms at N=4 on 2
cores, busbw 0.9 GB/s). So few steps win at small sizes and when oversubscribed, few bytes
at large sizes. RINGTREE_ALGO forces or restricts the choice, as NCCL_ALGO does for NCCL.
"""

from __future__ import annotations

import os
from dataclasses import replace
from functools import lru_cache

from ringtree.algorithms import BuildSpec
from ringtree.collectives import Collective
from ringtree.cost.links import get_link
from ringtree.cost.model import Link
from ringtree.cost.select import choose as select_choose


def loopback_link(n_ranks: int, cores: int | None = None) -> Link:
    """The loopback preset for N local processes on ``cores`` cores (default: this machine)."""
    base = get_link("loopback")
    cores = cores or os.cpu_count() or 1
    over = max(1.0, n_ranks / cores)
    if over == 1.0:
        return base
    return replace(
        base,
        alpha_s=base.alpha_s * over**2.7,
        bandwidth_Bps=base.bandwidth_Bps / over**0.5,
        note=f"{base.note}; {n_ranks} processes on {cores} cores",
    )


@lru_cache(maxsize=4096)
def _choose(
    collective: Collective, n_ranks: int, nbytes: int, itemsize: int, root: int, env: str
) -> tuple[str, int | None]:
    choice = select_choose(
        collective, n_ranks, nbytes, loopback_link(n_ranks), itemsize=itemsize,
        spec=BuildSpec(root=root), env={"RINGTREE_ALGO": env} if env else {},
    )  # fmt: skip
    return choice.algorithm, choice.chosen.n_chunks


def choose(
    collective: Collective, n_ranks: int, nbytes: int, itemsize: int, root: int = 0
) -> tuple[str, int | None]:
    """``(algorithm, n_chunks)`` that "auto" runs for ``nbytes`` (n_chunks None: the
    algorithm's default). Every rank with the same arguments gets the same answer."""
    env = os.environ.get("RINGTREE_ALGO", "")
    return _choose(collective, n_ranks, nbytes, itemsize, root, env)
