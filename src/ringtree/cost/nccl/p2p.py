"""Collectives NCCL runs as grouped point-to-point calls: all-to-all, gather, scatter.

NCCL has no algorithm choice for these: ``alltoall_perf``, ``gather_perf`` and
``scatter_perf`` (nccl-tests ``src/alltoall.cu``, ``gather.cu``, ``scatter.cu``) post one
``ncclSend``/``ncclRecv`` per peer inside a group, and NCCL spreads them over its p2p channels
(as many as its collective channels; ``NCCL_NCHANNELS_PER_NET_PEER`` 2 per remote peer) with
the Simple protocol, or LL for a peer's message of at most ``NCCL_P2P_LL_THRESHOLD`` (16 KiB,
``src/enqueue.cc``). For an S-byte buffer on N ranks, g per node:

* all-to-all: every rank sends S/N to every peer, (N-1) S/N through its own links; (N-g) S/N
  leave the node through its NICs, which all g GPUs share (PXN routes each GPU's remote
  traffic to the NIC nearest its destination rail, so the node's NICs carry g (N-g) S/N);
* gather (scatter): the root receives (sends) S/N from (to) each peer, all of it through its
  own links; its node's NICs carry the remote part, (N-g) S/N.

Time: ``softmax(host, latency + max(NVLink bytes / NVLink bandwidth, network bytes / network
bandwidth))``, with :mod:`ringtree.cost.nccl.timing`'s host floor, NVLink and network figures;
latency: one NVLink step (NCCL's Simple ring figure, scaled as the collectives'), one network
step across nodes, and a cost per peer (``p2p_peer_us``: posting and completing one peer's
send and receive, fitted). nccl-tests' busbw for all three is algbw x (N-1)/N.
"""

from __future__ import annotations

from ringtree.collectives import Collective
from ringtree.cost.nccl import constants as k
from ringtree.cost.nccl.topology import Topology

#: The collectives priced here (NCCL's tuner has no entry for them).
P2P_COLLECTIVES = (Collective.ALL_TO_ALL, Collective.GATHER, Collective.SCATTER)
#: A peer's message at most this large goes with LL (NCCL_P2P_LL_THRESHOLD, src/enqueue.cc)
P2P_LL_THRESHOLD = 16384


def bytes_moved(collective: Collective, size: int, topo: Topology) -> tuple[float, float]:
    """(bytes over the busiest GPU's own links, bytes over its node's NICs) for an S-byte
    call. A GPU's links carry every peer's block, (N-1) S/N: the node's peers' over NVLink,
    the remote ones too, forwarded over NVLink by the peer whose NIC they use (PXN) or
    through the GPU's own PCIe link from its NIC (ringtree.cost.nccl.bounds: a gather's root
    cannot take in more than its links carry)."""
    n, g = topo.n_ranks, topo.gpus_per_node
    per_peer = size / n
    if collective is Collective.ALL_TO_ALL:
        return (n - 1) * per_peer, g * (n - g) * per_peer
    return (n - 1) * per_peer, (n - g) * per_peer  # gather / scatter: the root's


def protocol(size: int, topo: Topology) -> str:
    """Simple, or LL when a peer's message is at most P2P_LL_THRESHOLD."""
    return "ll" if size / max(topo.n_ranks, 1) <= P2P_LL_THRESHOLD else "simple"


def latency_us(topo: Topology, net_hop_us: float, intra_scale: float, peer_us: float) -> float:
    """One NVLink step, one network step across nodes, and ``peer_us`` per peer."""
    intra = k.HW_LAT[topo.ring.intra_hw]["ring"][k.PROTOCOLS.index("simple")] * intra_scale
    net = net_hop_us if topo.nodes > 1 else 0.0
    return intra + net + (topo.n_ranks - 1) * peer_us
