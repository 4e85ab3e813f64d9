"""Time one call on one parallel group of a cluster as built, with the NCCL model.

A collective is what :func:`ringtree.cost.nccl.predict` says NCCL runs and how long it takes:
a group inside one node is ``nodes=1, gpus_per_node=size``; a group of g members on each of k
nodes is ``nodes=k, gpus_per_node=g`` (one member per node reaches that GPU's NICs). An uneven
group is priced as evenly spread over as many nodes. Identical calls are priced once (a search
prices thousands of configurations from a few hundred distinct calls).

An all-to-all (expert parallelism) is the NCCL model's too (:mod:`ringtree.cost.nccl.p2p`:
grouped sends and receives to every peer; S (g-1)/n bytes per GPU over NVLink while the node's
NICs carry the rest). Point-to-point pipeline sends are priced per link, alpha-beta: inside a
node NVLink (NCCL's figure for the GPU) at ``P2P_EFFICIENCY``; across nodes the GPU's share of
its node's NICs at the network's efficiency from the NCCL model.
"""

from __future__ import annotations

from functools import lru_cache

from ringtree.collectives import Collective, bus_factor
from ringtree.cost.clusters import Cluster as Hardware
from ringtree.cost.nccl import DEFAULT, predict
from ringtree.cost.nccl.topology import intra_bandwidth
from ringtree.plan.cluster import P2P_INTER_S, P2P_INTRA_S
from ringtree.plan.groups import GroupShape
from ringtree.plan.timing import CallTime

#: Share of NVLink's bandwidth a point-to-point transfer reaches (nccl-tests sendrecv on
#: NVSwitch systems: ~80 % of the per-direction figure).
P2P_EFFICIENCY = 0.8


def _ranks(shape: GroupShape) -> tuple[int, int]:
    """(nodes, GPUs per node) of a group for the NCCL model."""
    if shape.nodes == 1:
        return 1, shape.size
    per = shape.per_node or max(1, shape.size // shape.nodes)
    return -(-shape.size // per), per


class NcclTimer:
    """Prices calls on ``nodes`` nodes of a cluster as built, through the NCCL model."""

    def __init__(self, hardware: Hardware, env: dict[str, str] | None = None) -> None:
        self.hardware = hardware
        self.env = dict(env or {})
        self.call = lru_cache(maxsize=None)(self._call)
        self.point_to_point = lru_cache(maxsize=None)(self._p2p)
        self.all_to_all = lru_cache(maxsize=None)(self._all_to_all)
        intra, _ = intra_bandwidth(hardware)
        self.intra_Bps = intra * 1e9 * P2P_EFFICIENCY
        net = DEFAULT.efficiency(hardware.network)
        per_gpu = hardware.node_network_GBps / hardware.gpus_per_node
        self.inter_Bps = per_gpu * 1e9 * net if per_gpu else self.intra_Bps

    def _call(
        self, collective: Collective, shape: GroupShape, nbytes: int, itemsize: int
    ) -> CallTime:
        """NCCL's choice and time for one call of ``nbytes`` (the full buffer)."""
        if shape.size == 1 or nbytes == 0:
            return CallTime("none", 0.0, 0, 0.0)
        nodes, per = _ranks(shape)
        env = self.env or None
        c = predict(collective, nbytes, self.hardware, nodes, gpus_per_node=per, env=env)
        sent = nbytes * bus_factor(collective, shape.size)
        name = f"nccl {c.algorithm}/{c.protocol}"
        return CallTime(name, c.time_s, sent, c.latency_s + c.host_s, "NCCL_ALGO" in self.env)

    def _p2p(self, shape: GroupShape, nbytes: int) -> CallTime:
        """One send between neighbouring ranks of the group (across nodes if it spans any)."""
        if shape.intra:
            return CallTime("p2p", P2P_INTRA_S + nbytes / self.intra_Bps, nbytes, P2P_INTRA_S)
        return CallTime("p2p", P2P_INTER_S + nbytes / self.inter_Bps, nbytes, P2P_INTER_S)

    def _all_to_all(self, shape: GroupShape, nbytes: int) -> CallTime:
        """One all-to-all of ``nbytes`` per GPU, as NCCL runs it (module doc)."""
        return self._call(Collective.ALL_TO_ALL, shape, nbytes, 1)
