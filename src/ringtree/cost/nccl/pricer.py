"""The :class:`~ringtree.cost.pricer.Pricer` of the NCCL model: calls on a cluster as built.

A collective is what :func:`ringtree.cost.nccl.timing.predict_on` says NCCL runs and how long
it takes: a group inside one node is ``nodes=1, gpus_per_node=size``; a group of g members on
each of k nodes is ``nodes=k, gpus_per_node=g`` (one member per node reaches that GPU's
NICs). An uneven group is priced as evenly spread over as many nodes. An all-to-all is the
NCCL model's too (:mod:`ringtree.cost.nccl.p2p`: grouped sends and receives to every peer).
Point-to-point sends (pipeline stages) are priced per link, alpha-beta: inside a node NVLink
(NCCL's figure for the GPU) at ``P2P_EFFICIENCY``; across nodes the GPU's share of its node's
NICs at the network's efficiency from the NCCL model. NCCL_ALGO, NCCL_PROTO, ... come from
``env`` as NCCL reads them. Identical calls are priced once, and each group's topology and
tuner table are worked out once (a sweep or a search prices thousands of calls from a few
hundred shapes).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from ringtree.collectives import Collective, bus_factor
from ringtree.cost.clusters import Cluster
from ringtree.cost.nccl import tuner
from ringtree.cost.nccl.timing import DEFAULT, NcclCall, Params, predict_on
from ringtree.cost.nccl.topology import Topology, intra_bandwidth, topology
from ringtree.cost.pricer import CallTime, GroupShape

#: Share of NVLink's bandwidth a point-to-point transfer reaches (nccl-tests sendrecv on
#: NVSwitch systems: ~80 % of the per-direction figure).
P2P_EFFICIENCY = 0.8
#: Latency of one point-to-point transfer inside a node and across nodes: NCCL's LL-protocol
#: send over NVLink ~ 5 us plus launch; across InfiniBand ~ 10 us more.
P2P_INTRA_S, P2P_INTER_S = 10e-6, 20e-6


def nodes_of(shape: GroupShape) -> tuple[int, int]:
    """(nodes, GPUs per node) of a group for the NCCL model."""
    if shape.nodes == 1:
        return 1, shape.size
    per = shape.per_node or max(1, shape.size // shape.nodes)
    return -(-shape.size // per), per


class NcclPricer:
    """Prices calls on a cluster as built through the NCCL model (module doc)."""

    model = "nccl"

    def __init__(
        self, cluster: Cluster, env: Mapping[str, str] | None = None, params: Params = DEFAULT
    ) -> None:
        self.cluster, self.params = cluster, params
        self.env = dict(env or {})
        self.settings = tuner.Settings.for_cluster(cluster, self.env)
        self.call = lru_cache(maxsize=None)(self._call)
        self.point_to_point = lru_cache(maxsize=None)(self._p2p)
        self.all_to_all = lru_cache(maxsize=None)(self._all_to_all)
        self.topology = lru_cache(maxsize=None)(self._topology)
        self._entries = lru_cache(maxsize=None)(self._table)
        intra, _ = intra_bandwidth(cluster)
        self.intra_Bps = intra * 1e9 * P2P_EFFICIENCY
        net = params.efficiency(cluster.network)
        per_gpu = cluster.node_network_GBps / cluster.gpus_per_node
        self.inter_Bps = per_gpu * 1e9 * net if per_gpu else self.intra_Bps

    def _topology(self, nodes: int, gpus_per_node: int) -> Topology:
        return topology(self.cluster, nodes, gpus_per_node)

    def _table(self, collective: Collective, topo: Topology) -> list[tuner.Entry] | None:
        if collective not in tuner.NCCL_COLLECTIVES:
            return None
        return tuner.table(collective, topo, self.settings)

    def predict(self, collective: Collective, shape: GroupShape, size_bytes: int) -> NcclCall:
        """NCCL's choice and ringtree's time for one call, in the NCCL model's own terms."""
        topo = self.topology(*nodes_of(shape))
        return predict_on(collective, size_bytes, topo, self.settings, self.params,
                          self._entries(collective, topo))

    def _call(
        self, collective: Collective, shape: GroupShape, size_bytes: int, itemsize: int = 1
    ) -> CallTime:
        c = self.predict(collective, shape, size_bytes)
        sent = size_bytes * bus_factor(collective, shape.size)
        name = f"nccl {c.algorithm}/{c.protocol}"
        return CallTime(name, c.time_s, sent, c.latency_s + c.host_s, "NCCL_ALGO" in self.env, c)

    def _p2p(self, shape: GroupShape, size_bytes: int) -> CallTime:
        """One send between neighbouring ranks of the group (across nodes if it spans any)."""
        if shape.intra:
            return CallTime("p2p", P2P_INTRA_S + size_bytes / self.intra_Bps, size_bytes,
                            P2P_INTRA_S)
        return CallTime("p2p", P2P_INTER_S + size_bytes / self.inter_Bps, size_bytes,
                        P2P_INTER_S)

    def _all_to_all(self, shape: GroupShape, size_bytes: int) -> CallTime:
        """One all-to-all of ``size_bytes`` per GPU, as NCCL runs it (module doc)."""
        return self._call(Collective.ALL_TO_ALL, shape, size_bytes, 1)
