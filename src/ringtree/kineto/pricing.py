"""What a traced call should have cost: the one place this package asks a cost model
(:func:`price`), on a calibrated link profile or a cluster (:class:`Target`).

- A link profile (``ringtree calibrate``, processes on one machine): the algorithm the
  trace's backend runs, priced by :func:`ringtree.cost.models.predict` on the profile's
  link. gloo's, from its source (github.com/facebookincubator/gloo): all-reduce ring
  (gloo/allreduce.cc, ``UNSPECIFIED`` runs ``ring``), all-gather ring (allgather.cc), reduce
  ring (reduce.cc), broadcast binomial tree (broadcast.cc), all-to-all pairwise exchange, gather
  and scatter one message per rank (gather.cc, scatter.cc); a
  reduce-scatter runs an all-reduce of the whole buffer (ProcessGroupGloo; its span in the
  trace is a ``gloo:all_reduce``), so it is priced as one. Another backend's calls get
  :func:`ringtree.cost.select.choose`'s automatic choice.
- A cluster: the NCCL model through the pricing seam (:class:`ringtree.cost.nccl.pricer.
  NcclPricer`), NCCL's choice on the nodes the group spans (a group of G ranks fills
  ``ceil(G / gpus per node)`` nodes, or the nodes given).

Point-to-point calls and kernels whose size the trace does not give are not priced.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from functools import cache

from ringtree.collectives import Collective
from ringtree.cost.clusters import Cluster
from ringtree.cost.host import HostLink, available_cores, under_load
from ringtree.cost.models import predict
from ringtree.cost.nccl.pricer import NcclPricer
from ringtree.cost.pricer import GroupShape
from ringtree.cost.select import choose
from ringtree.errors import RingtreeError
from ringtree.kineto.calls import Run
from ringtree.kineto.rank import LOAD_KEY

#: what gloo runs for each collective (module doc), as ringtree's algorithm names
GLOO_RUNS = {
    "all-reduce": ("all-reduce", "ring"), "all-gather": ("all-gather", "ring"),
    "reduce": ("reduce", "ring"), "broadcast": ("broadcast", "tree"),
    "all-to-all": ("all-to-all", "pairwise"), "reduce-scatter": ("all-reduce", "ring"),
    "barrier": ("barrier", "dissemination"), "gather": ("gather", "linear"),
    "scatter": ("scatter", "linear"),
}


@dataclass(frozen=True)
class Target:
    """Where calls are priced: a calibrated ``link`` or a ``cluster`` (on ``nodes`` nodes
    for groups that span more than one; None: as many as the group needs)."""

    name: str
    link: HostLink | None = None
    cluster: Cluster | None = None
    nodes: int | None = None


@dataclass(frozen=True)
class Priced:
    """A prediction: seconds, and what the model says ran (``ring``, ``NVLS/Simple``)."""

    time_s: float
    algorithm: str


def loaded(target: Target | None, run: Run) -> tuple[Target | None, dict[str, float] | None]:
    """``target`` for the load the traces recorded (a one-machine link's cores become those
    other programs left free, as ``ringtree validate`` predicts: :func:`under_load`), and that
    load; unchanged (and None) unless every trace records it (``ringtree lab ddp
    --torch-profile`` does) and the target is such a link."""
    loads = [r.meta.get(LOAD_KEY) for r in run.ranks]
    if target is None or target.link is None or target.link.host is None or not loads \
            or not all(isinstance(x, dict) and "other_cores" in x for x in loads):
        return target, None
    other = statistics.mean(float(x["other_cores"]) for x in loads)  # type: ignore[index]
    free = available_cores(target.link.host.cores, other)
    return replace(target, link=under_load(target.link, other)), {"other_cores": other,
                                                                  "free_cores": free}


def price(collective: str, size_bytes: int | None, n_ranks: int | None, itemsize: int,
          backend: str, target: Target) -> Priced | None:
    """The predicted time of one call (module doc); None where it is not priced: p2p, no
    size or group size, one rank, or a request the model refuses (its reason is dropped:
    the row then shows no prediction)."""
    if size_bytes is None or not n_ranks or n_ranks < 2 or collective not in GLOO_RUNS:
        return None
    try:
        if target.cluster is not None:
            return _on_cluster(collective, size_bytes, n_ranks, target)
        assert target.link is not None
        return _on_link(collective, size_bytes, n_ranks, itemsize, backend, target.link)
    except RingtreeError:
        return None


def nodes_for(n_ranks: int, target: Target) -> tuple[int, int]:
    """``(nodes, GPUs per node)`` a group of ``n_ranks`` uses on the target's cluster."""
    assert target.cluster is not None
    per = target.cluster.gpus_per_node
    if target.nodes and n_ranks > per:
        return target.nodes, max(1, -(-n_ranks // target.nodes))
    return (-(-n_ranks // per), per) if n_ranks > per else (1, n_ranks)


def _on_cluster(collective: str, size: int, n: int, target: Target) -> Priced | None:
    if collective == "barrier":
        return None
    nodes, per = nodes_for(n, target)
    assert target.cluster is not None
    shape = GroupShape(n, nodes, per if nodes > 1 else None)
    call = _pricer(target.cluster).predict(Collective.parse(collective), shape, size)
    return Priced(call.time_s, call.nccl_name if call.algorithm != "p2p" else "p2p")


@cache
def _pricer(cluster: Cluster) -> NcclPricer:
    return NcclPricer(cluster)


def _on_link(collective: str, size: int, n: int, itemsize: int, backend: str,
             link: HostLink) -> Priced:
    if collective == "barrier":
        size, itemsize = 0, 1
    if backend == "gloo":
        col, algorithm = GLOO_RUNS[collective]
        p = predict(col, algorithm, n, size, link, itemsize=itemsize)
        return Priced(p.time_s, algorithm)
    choice = choose(Collective.parse(collective), n, size, link, itemsize=itemsize, env={})
    return Priced(choice.chosen.time_s, choice.algorithm)
