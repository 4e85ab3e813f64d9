"""``algorithm="auto"`` in the engine: the shared selector (:mod:`ringtree.cost.select`) on
the link the ranks actually see.

gloo (and the in-process transport): the ``loopback`` preset -- gloo over 127.0.0.1 on the
project's 2-core machine, alpha 128 us per step, 1.3 GB/s. MPI between local processes goes
through shared memory: alpha 10 us, 8 GB/s (measured there with mpi4py: a 1 MiB exchange
plus its reduction takes 140 us, 4 MiB 520 us) and a reduced byte costs 0.04 ns (numpy's
float32 add in cache, 25 GB/s), which is what sets recursive doubling (one step, the whole
buffer reduced) apart from the ring (two steps, half of it) at N=2: measured with Open MPI
5, the ring took 1.0-1.05x Open MPI's time at 1-4 MiB, recursive doubling 1.55-1.75x; at
256 KiB recursive doubling was ahead. NCCL: ``pcie4`` (a guess; the topology is not known
here). With more ranks than cores every message waits for a core, so alpha grows about as
(N/cores)^2.7 (measured: a 6-step ring of 4 KiB takes 5 ms at N=4 on 2 cores); bandwidth
shrinks as (N/cores)^-0.5 over loopback TCP (busbw 1.3 GB/s at N=2, 0.9 at N=4) but as
(N/cores)^-1 over shared memory, where every byte is a copy by a CPU the ranks share (Open
MPI's own all-reduce of 64 MiB: busbw 2.1 GB/s at N=2, 1.1 at N=4), and the reductions,
CPU work too, cost N/cores times more (at N=4 on 2 cores, 1 MiB: recursive doubling 1.5-1.8x
Open MPI's time, Rabenseifner 1.35-1.4x). So few steps win at small sizes and when
oversubscribed, few bytes (sent and reduced) at large sizes. RINGTREE_ALGO forces or
restricts the choice, as NCCL_ALGO does for NCCL.
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

SHARED_MEMORY = Link(
    "mpi-shm", 8e9, alpha_s=10e-6, gamma_s_per_byte=0.04e-9,
    note="MPI between local processes (shared memory)",
    source="measured with mpi4py + Open MPI 5 on the project's 2-core machine: 1 MiB "
    "exchange + reduce 140 us, 4 MiB 520 us; numpy float32 add 25 GB/s in cache",
)  # fmt: skip
#: How bandwidth shrinks with N/cores > 1, by link: exponent of (N/cores)^-b (module doc).
BANDWIDTH_EXPONENT = {"mpi-shm": 1.0}
DEFAULT_BANDWIDTH_EXPONENT = 0.5


def link_for(kind: str, n_ranks: int, cores: int | None = None) -> Link:
    """The link "auto" prices for a transport kind (gloo, local, mpi, nccl) and N ranks."""
    base = {"mpi": SHARED_MEMORY, "nccl": get_link("pcie4")}.get(kind) or get_link("loopback")
    return oversubscribed(base, n_ranks, cores)


def loopback_link(n_ranks: int, cores: int | None = None) -> Link:
    """The loopback preset for N local processes on ``cores`` cores (default: this machine)."""
    return oversubscribed(get_link("loopback"), n_ranks, cores)


def oversubscribed(base: Link, n_ranks: int, cores: int | None = None) -> Link:
    """``base`` as seen by N processes sharing ``cores`` cores (unchanged when N <= cores)."""
    if base.name.startswith(("nvlink", "pcie")):
        return base
    cores = cores or os.cpu_count() or 1
    over = max(1.0, n_ranks / cores)
    if over == 1.0:
        return base
    b = BANDWIDTH_EXPONENT.get(base.name, DEFAULT_BANDWIDTH_EXPONENT)
    return replace(
        base,
        alpha_s=base.alpha_s * over**2.7,
        bandwidth_Bps=base.bandwidth_Bps / over**b,
        gamma_s_per_byte=base.gamma_s_per_byte * over,
        note=f"{base.note}; {n_ranks} processes on {cores} cores",
    )


@lru_cache(maxsize=4096)
def _choose(
    collective: Collective, n_ranks: int, nbytes: int, itemsize: int, root: int, env: str,
    kind: str,
) -> tuple[str, int | None]:  # fmt: skip
    choice = select_choose(
        collective, n_ranks, nbytes, link_for(kind, n_ranks), itemsize=itemsize,
        spec=BuildSpec(root=root), env={"RINGTREE_ALGO": env} if env else {},
    )  # fmt: skip
    return choice.algorithm, choice.chosen.n_chunks


def choose(
    collective: Collective,
    n_ranks: int,
    nbytes: int,
    itemsize: int,
    root: int = 0,
    algo_env: str | None = None,
    kind: str = "gloo",
) -> tuple[str, int | None]:
    """``(algorithm, n_chunks)`` that "auto" runs for ``nbytes`` over a ``kind`` transport
    (n_chunks None: the algorithm's default). Every rank with the same arguments gets the
    same answer. ``algo_env``: the RINGTREE_ALGO value (None: read it from the environment)."""
    env = os.environ.get("RINGTREE_ALGO", "") if algo_env is None else algo_env
    return _choose(collective, n_ranks, nbytes, itemsize, root, env, kind)


def explain(
    collective: Collective, n_ranks: int, nbytes: int, itemsize: int, root: int, algo_env: str,
    kind: str,
) -> str:  # fmt: skip
    """Why "auto" picks what it picks: the competing predicted times on the link assumed, and
    any RINGTREE_ALGO in force (for the decision log)."""
    link = link_for(kind, n_ranks)
    choice = select_choose(
        collective, n_ranks, nbytes, link, itemsize=itemsize, spec=BuildSpec(root=root),
        env={"RINGTREE_ALGO": algo_env} if algo_env else {},
    )  # fmt: skip
    return f"auto, {choice.reason()}, on {link.name}"
