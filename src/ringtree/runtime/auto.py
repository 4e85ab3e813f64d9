"""``algorithm="auto"`` in the engine: the link each transport's ranks see, priced by the shared
selector (:func:`ringtree.cost.select.engine_choice`).

gloo (and the in-process transport): the ``loopback`` one-machine model; MPI between local
processes: the ``mpi-shm`` one (both in :data:`ringtree.cost.links.LOCAL_HOSTS`, with their
measurements: as many ranks as cores see the link as measured, more see it slowed down by
:func:`ringtree.cost.host.on_cores`; over gloo each message a step sends or receives costs
its share too, so a step with many peers costs more); NCCL: ``pcie4`` (a guess; the topology
is not known here). So few steps and messages win at small sizes and when oversubscribed, few
bytes (sent and reduced) at large sizes. RINGTREE_ALGO forces or restricts the choice, as
NCCL_ALGO does for NCCL, per collective where it is scoped (``allreduce:ring``), and is
ignored, with a WARN line, for a collective it leaves nothing to run.
"""

from __future__ import annotations

import os
from functools import lru_cache

from ringtree.collectives import Collective
from ringtree.cost.host import HostLink, on_cores
from ringtree.cost.links import LOCAL_HOSTS, get_link
from ringtree.cost.select import ENV_VAR, engine_choice
from ringtree.cost.terms import Link
from ringtree.runtime import log


def link_for(kind: str, cores: int | None = None) -> Link:
    """The link "auto" prices for a transport kind (gloo, local, mpi, nccl): for local
    processes a polling one-machine model on ``cores`` cores (default: this machine's),
    priced per step and per message for the N ranks of each call (:mod:`ringtree.cost.host`)."""
    if kind == "nccl":
        return get_link("pcie4")
    host = LOCAL_HOSTS["mpi-shm" if kind == "mpi" else "loopback"]
    return host.with_cores(cores or os.cpu_count() or 1)


def seen_link(kind: str, n_ranks: int, cores: int | None = None) -> Link:
    """The plain alpha-beta link that N local ranks of a ``kind`` transport see on ``cores``
    cores (default: this machine's): a step of one message each way, as a trace draws it."""
    link = link_for(kind, cores)
    return on_cores(link, n_ranks) if isinstance(link, HostLink) else link


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
    env = os.environ.get(ENV_VAR, "") if algo_env is None else algo_env
    return _choose(collective, n_ranks, nbytes, itemsize, root, env, kind)


@lru_cache(maxsize=4096)
def _choose(
    collective: Collective, n_ranks: int, nbytes: int, itemsize: int, root: int, env: str,
    kind: str,
) -> tuple[str, int | None]:
    """:func:`choose`, kept per call shape (each rank asks once per shape, DDP once per
    bucket and step). A RINGTREE_ALGO that does not apply to the call is logged once (WARN)."""
    choice = engine_choice(collective, n_ranks, nbytes, link_for(kind), itemsize, root, env)
    if choice.note:
        log.warn_once(choice.note)
    return choice.algorithm, choice.chosen.n_chunks


def explain(
    collective: Collective, n_ranks: int, nbytes: int, itemsize: int, root: int, algo_env: str,
    kind: str,
) -> str:
    """Why "auto" picks what it picks: the competing predicted times on the link assumed, and
    any RINGTREE_ALGO in force (for the decision log)."""
    link = link_for(kind)
    choice = engine_choice(collective, n_ranks, nbytes, link, itemsize, root, algo_env)
    return f"auto, {choice.reason()}, on {link.name}"
