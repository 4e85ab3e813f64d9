"""What NCCL's topology search finds on a cluster: per algorithm, its channels and their speed.

NCCL searches the machine's graph for rings, trees and NVLS heads at decreasing per-channel
speeds (src/graph/search.cc) and its tuner prices each algorithm from the channel count and
per-channel bandwidth found (docs/nccl-tuning-notes.md, section 3). ringtree does not search a
graph; it applies the rules that search follows on the regular machines a Cluster describes,
which reproduces the channel counts NCCL logs on them:

* one node, all GPUs on NVSwitch: the GPU's NVLink bandwidth T (links x NCCL's per-link figure:
  A100 12 x 20.0 = 240, H100 18 x 20.6 = 370.8 GB/s); from the first candidate speed s <= T,
  floor(T / s) channels at each speed down to 0.49 of the best, keeping the most channels x
  speed (H800, T = 164.8: 2 x 60, 3 x 50, 4 x 40 kept); NCCL then doubles the channels at
  half the speed unless s < 25, or s < 50 on SM > 80 with more than 4 channels
  (``ncclTopoDupChannels``). A100: 6 x 40 ->
  12 x 20 (logged: 24 execution channels, nccl-tests#100); H100: 6 x 60 -> 12 x 30.
* several nodes: a channel runs through one NIC; its speed is a candidate <= the slower of
  the NIC (Gb/s / 8) and the GPU's PCIe link, each NIC carries as many channels as fit in its
  bandwidth and the GPUs' NVLink as many as fit in T, keeping the most channels x speed
  (:func:`_search_net`). DGX A100, 8 x HDR: 8 x 24 = 192 GB/s (NVIDIA measures "192GB/s
  AllReduce BusBW", NVIDIA/nccl#812); DGX H100, 8 x NDR: 8 x 48; GB200 NVL72: 16 x 45.1.
* NVLS (NVSwitch gen3+, Hopper or later, more than 2 GPUs): one head per GPU, at most 32
  (``NCCL_MAX_NVLS_ARITY``: a 72-GPU NVLink domain has 32 heads); per-head speed the first
  candidate s with (heads + 1) x s <= T, the head's link carrying twice its channel (H100:
  9 x 40 = 360; B200: 9 x 80 = 720; GB200 NVL72: 33 x 20 = 660); none when no candidate fits.
  Across nodes a head's network speed is at most 2 s (NCCL's second search pass) and the
  heads share what the node's NICs carry at the search's speed, which no NVLink chain caps (a
  head crosses only its own link): 8 x 400 Gb/s H100 48 each; GB200 NVL72 40 (32 of its 72
  NICs at 48, one per head, as NCCL's NVLS search pairs each head with a NIC of its own).
* PCIe: the GPU's PCIe link (Gen4 x16 24 GB/s); across the CPU root complex NCCL's path is the
  CPU link (``pcie-cpu``: AMD_BW 16 / Intel 10 GB/s, topo.h).
"""

from __future__ import annotations

from dataclasses import dataclass

from ringtree.cost.clusters import Cluster
from ringtree.cost.nccl import constants as k
from ringtree.errors import RingtreeError

#: GPU-to-GPU bandwidth through the CPU, GB/s (src/graph/topo.h: AMD_BW 16.0, SKL_QPI_BW 10.0)
CPU_LINK_GBPS = {"amd": 16.0, "intel": 10.0, "arm": 6.0, "grace": 16.0}


@dataclass(frozen=True)
class Graph:
    """One algorithm's graph: search channels and per-channel GB/s inside and between nodes;
    ``intra_hw``: the intra-node path type NCCL's latencies use (``nvlink`` or ``pci``)."""

    channels: int
    bw_intra: float
    bw_inter: float
    intra_hw: str


@dataclass(frozen=True)
class Topology:
    """What NCCL knows of ``nodes`` nodes of ``cluster``, ``gpus_per_node`` of each node's
    GPUs in the job (default: all), reaching as many of its NICs (see the module doc)."""

    cluster: Cluster
    nodes: int
    gpus_per_node: int
    nics: int
    ring: Graph
    tree: Graph
    nvls: Graph | None

    @property
    def n_ranks(self) -> int:
        """Every GPU of the job."""
        return self.nodes * self.gpus_per_node

    @property
    def arch(self) -> str:
        """NCCL's architecture row (Ada counts as Ampere: SM 89 < 90)."""
        a = self.cluster.gpu.arch
        return {"ada": "ampere"}.get(a, a)

    @property
    def node_column(self) -> int:
        """NCCL's column of the per-arch tables: 0 one node, 1 two, 2 more."""
        return min(self.nodes, 3) - 1


def intra_bandwidth(c: Cluster) -> tuple[float, str]:
    """(GB/s per direction between two GPUs of a node as NCCL models it, path type)."""
    gpu = c.gpu
    if c.fabric in ("nvswitch", "nvlink") and gpu.nvlink_links:
        return gpu.nvlink_GBps, "nvlink"
    if c.fabric == "pcie-cpu":
        return min(gpu.pcie_GBps, CPU_LINK_GBPS.get(c.cpu, 10.0)), "pci"
    return gpu.pcie_GBps, "pci"


def _first_at_most(speeds: tuple[float, ...], limit: float) -> float:
    for s in speeds:
        if s <= limit + 1e-9:
            return s
    return speeds[-1]


def _search_intra(speeds: tuple[float, ...], total: float) -> tuple[int, float]:
    """``(channels, speed)`` NCCL's one-node ring search keeps (search.cc:1160-1245): from the
    first speed s <= T, floor(T / s) channels at each speed in turn, keeping the largest
    channels x speed (CompareGraphs: a tie keeps the faster), until that reaches T or the next
    speed is at most 0.49 of the kept one."""
    start = speeds.index(_first_at_most(speeds, total))
    best_ch, best_s = 0, 0.0
    for s in speeds[start:]:
        if best_ch and s / best_s <= 0.49:
            break
        ch = max(1, min(int(total // s), k.MAX_SEARCH_CHANNELS))
        if ch * s > best_ch * best_s:
            best_ch, best_s = ch, s
        if best_ch * best_s >= total - 1e-9:
            break
    return best_ch, best_s


def _search_net(speeds: tuple[float, ...], c: Cluster, nics: int, g: int,
                intra: float) -> tuple[int, float]:
    """``(channels, speed)`` of a ring across nodes: from the first speed s <= the slower of
    the NIC and the GPU's PCIe link, each NIC carries ``NIC // s`` channels, and a channel
    enters the node at one GPU and leaves it at another, crossing the NVLink of the g - 1
    others, so with the exits spread over the GPUs ``channels x s x (g - 1) / g <= intra``
    (the GPU's NVLink figure); the search keeps the largest channels x speed as on one node.
    8-GPU nodes keep one channel per NIC (A100 8 x 24; H100 8 x 48: 336 of 370.8 per GPU);
    a 72-GPU NVLink domain with 72 NICs fits 16 x 45.1 in 721.8, not 32 x 48."""
    start = speeds.index(_first_at_most(speeds, min(c.nic_GBps, c.gpu.pcie_GBps)))
    best_ch, best_s = 0, 0.0
    for s in speeds[start:]:
        if best_ch and s / best_s <= 0.49:
            break
        ch = min(nics * max(1, int(c.nic_GBps // s)), k.MAX_SEARCH_CHANNELS)
        if g > 1:
            ch = min(ch, int((intra * g / (g - 1) + 1e-9) // s))
        if ch >= 1 and ch * s > best_ch * best_s:
            best_ch, best_s = ch, s
    return (best_ch, best_s) if best_ch else (1, speeds[-1])


def _dup(channels: int, bw: float, sm: int) -> tuple[int, float]:
    """``ncclTopoDupChannels``: twice the channels at half the speed, except for slow
    channels (< 25 GB/s, or < 50 GB/s on SM > 80 with more than 4 channels)."""
    if bw < 25.0 or (sm > 80 and bw < 50.0 and channels > 4):
        return channels, bw
    return 2 * channels, bw / 2


def topology(cluster: Cluster, nodes: int, gpus_per_node: int | None = None) -> Topology:
    """NCCL's graphs for ``nodes`` nodes of ``cluster`` using ``gpus_per_node`` GPUs of each
    (default: all); RingtreeError when the cluster has no network and ``nodes`` > 1."""
    g = cluster.gpus_per_node if gpus_per_node is None else gpus_per_node
    if nodes < 1:
        raise RingtreeError(f"nodes must be >= 1, got {nodes}")
    if not 1 <= g <= cluster.gpus_per_node:
        raise RingtreeError(
            f"gpus per node must be 1..{cluster.gpus_per_node} on {cluster.key}, got {g}"
        )
    if nodes > 1 and not cluster.nics_per_node:
        raise RingtreeError(f"cluster {cluster.key} has no NICs: it runs on one node only")
    nics = -(-cluster.nics_per_node * g // cluster.gpus_per_node)  # the used GPUs' own NICs
    arch = {"ada": "ampere"}.get(cluster.gpu.arch, cluster.gpu.arch)
    sm = cluster.gpu.sm
    total, hw = intra_bandwidth(cluster)
    if nodes == 1:
        ch, s = _search_intra(k.SEARCH_SPEEDS_INTRA[arch], total)
        ch, bw = _dup(ch, s, sm)
        ring = Graph(ch, bw, bw, hw)
    else:
        ch, s = _search_net(k.SEARCH_SPEEDS_NET[arch], cluster, nics, g, total)
        ch, bw = _dup(ch, s, sm)
        ring = Graph(ch, bw, bw, hw)
    nvls = None
    if cluster.nvls and cluster.fabric == "nvswitch" and sm >= 90 and g >= 2:  # 2.30: g < 2
        heads = min(g, k.MAX_NVLS_ARITY)
        speeds = k.SEARCH_SPEEDS_INTRA[arch]
        s = _first_at_most(speeds, total / (heads + 1))
        if (heads + 1) * s <= total + 1e-9:  # else NCCL's search finds no NVLS graph
            inter = 2 * s
            if nodes > 1:  # the heads share what the NICs carry; no chain caps them by NVLink
                net_ch, net_s = _search_net(k.SEARCH_SPEEDS_NET[arch], cluster, nics, 1, total)
                inter = min(inter, net_ch * net_s / heads)
            nvls = Graph(heads, s, inter, "nvlink")
    tree = ring
    if nodes == 2:  # the search lets a tree's intra-node part run at up to twice the network's
        tree = Graph(ring.channels, min(2 * ring.bw_inter, total / ring.channels), ring.bw_inter,
                     hw)
    return Topology(cluster, nodes, g, nics, ring, tree, nvls)
