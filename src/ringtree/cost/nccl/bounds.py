"""The least time a collective can take on a cluster: its bytes over the links they must cross.

Whatever algorithm runs (ring, tree, NVLS reducing inside the switch, SHARP in the network),
a call cannot end before the bytes it must move have crossed the narrowest links on their way.
:func:`lower_bound` gives that time from the hardware's line rates (the vendor's, per
direction: not NCCL's lower tuning figures, not an efficiency), so a prediction under it is a
bug in the model. ``tests/test_nccl_bounds.py`` checks every preset against it.

The links, per direction:

* a GPU's own links: inside an NVLink domain (one node of an NVSwitch or NVLink preset) its
  NVLink (links x the vendor's per-link figure: 25 GB/s NVLink 2-4, 50 GB/s NVLink 5): NCCL's
  transports move data between GPUs of a domain over NVLink only, never PCIe peer-to-peer;
  across nodes NVLink plus its PCIe link (a remote block comes from the GPU's own NIC over
  PCIe or from a peer's over NVLink, PXN); on a PCIe-only node the PCIe link;
* a node's NICs across nodes: the NICs the job's GPUs use, at their line rate (Gb/s / 8).

The bytes, for S the nccl-tests size of the call (all-reduce, broadcast, reduce: the buffer;
all-gather: the gathered output; reduce-scatter: each rank's input; all-to-all: each rank's
send buffer; gather, scatter: the root's whole buffer), N ranks, g per node, K nodes:

* all-reduce: every output element depends on every rank's input, so each GPU must receive at
  least S (its share of the others' contributions, in any form: partial sums, the switch's
  reduced result) and send at least S (its input has to reach the others); across nodes each
  node receives and sends at least S. (Without in-network reduction the true least is
  2 (K-1)/K S per node; S holds with SHARP too, so it is the bound kept.)
* all-gather: each GPU receives the N - 1 blocks it lacks, (N-1)/N S, and sends its block,
  S/N; a node receives (K-1)/K S.
* reduce-scatter: each GPU's input blocks of the others' outputs must leave it, (N-1)/N S,
  and it receives at least its own block's contributions, S/N; a node sends (K-1)/K S.
* broadcast: the root sends S, every other GPU (node) receives S; reduce: the root receives
  S, every other GPU (node) sends S.
* all-to-all: each GPU sends and receives (N-1)/N S; a node sends and receives g (N-g)/N S.
* gather (scatter): the root receives (sends) (N-1)/N S, its node (N-g)/N S from (to) the
  other nodes.

Cost: a few arithmetic operations.
"""

from __future__ import annotations

from dataclasses import dataclass

from ringtree.collectives import Collective
from ringtree.cost.clusters import Cluster
from ringtree.cost.nccl.topology import Topology

#: PCIe x16 per direction by generation, GB/s: transfer rate x 16 lanes x encoding / 8
#: (PCI-SIG: Gen3 8 GT/s and Gen4 16 GT/s, 128b/130b: 15.75 and 31.5; Gen5 32 GT/s 63.0;
#: Gen6 64 GT/s, FLIT mode 242/256: 121.0)
PCIE_LINE_GBPS_X16 = {3: 15.75, 4: 31.5, 5: 63.0, 6: 121.0}


@dataclass(frozen=True)
class Bound:
    """The least time of a call (seconds) and the link that sets it."""

    time_s: float
    link: str
    bytes_moved: float
    GBps: float


def gpu_line_GBps(c: Cluster, nodes: int) -> float:
    """A GPU's links per direction at their line rate (module doc): NVLink inside one NVLink
    node, NVLink + PCIe across nodes, PCIe alone without NVLink."""
    g = c.gpu
    pcie = PCIE_LINE_GBPS_X16.get(g.pcie_gen, 31.5) * g.pcie_lanes / 16
    if c.fabric not in ("nvswitch", "nvlink") or not g.nvlink_links:
        return pcie
    nvlink = g.nvlink_links * g.nvlink_GBps_per_link
    return nvlink + (pcie if nodes > 1 else 0.0)


def node_line_GBps(topo: Topology) -> float:
    """The job's NICs of one node per direction at their line rate."""
    return topo.nics * topo.cluster.nic_gbps / 8


def _gpu_bytes(col: Collective, size: float, n: int) -> float:
    """The most bytes one GPU must receive or send (module doc), n >= 2."""
    if col is Collective.ALL_REDUCE or col in (Collective.BROADCAST, Collective.REDUCE):
        return size
    if col in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_TO_ALL,
               Collective.GATHER, Collective.SCATTER):
        return size * (n - 1) / n
    return 0.0


def _node_bytes(col: Collective, size: float, n: int, g: int, nodes: int) -> float:
    """The most bytes one node must receive or send through its NICs (module doc)."""
    if col is Collective.ALL_REDUCE or col in (Collective.BROADCAST, Collective.REDUCE):
        return size
    if col in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER):
        return size * (nodes - 1) / nodes
    if col is Collective.ALL_TO_ALL:
        return size * g * (n - g) / n
    if col in (Collective.GATHER, Collective.SCATTER):
        return size * (n - g) / n
    return 0.0


def lower_bound(collective: Collective | str, size_bytes: int, topo: Topology) -> Bound:
    """The least time of ``collective`` on ``size_bytes`` over ``topo``'s links (module doc):
    the larger of a GPU's bytes over its own links and a node's bytes over its NICs; 0 on one
    rank or for the barrier (no payload)."""
    col = Collective.parse(collective)
    n, g, nodes = topo.n_ranks, topo.gpus_per_node, topo.nodes
    if n < 2 or size_bytes <= 0:
        return Bound(0.0, "none", 0.0, 0.0)
    gpu_bw = gpu_line_GBps(topo.cluster, nodes)
    gpu_bytes = _gpu_bytes(col, size_bytes, n)
    best = Bound(gpu_bytes / (gpu_bw * 1e9), "a GPU's own links", gpu_bytes, gpu_bw)
    if nodes > 1 and topo.nics:
        node_bw = node_line_GBps(topo)
        node_bytes = _node_bytes(col, size_bytes, n, g, nodes)
        t = node_bytes / (node_bw * 1e9)
        if t > best.time_s:
            best = Bound(t, "the node's NICs", node_bytes, node_bw)
    return best
