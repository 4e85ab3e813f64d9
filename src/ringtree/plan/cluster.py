"""Where it is trained: nodes x GPUs per node, the links inside and between nodes, the price.

Either a cluster as built (``--cluster dgx-h100 --nodes 16``, a preset of ``ringtree
clusters`` or a TOML file with a ``gpu`` or ``preset`` key, see
:mod:`ringtree.cost.clusters`): its GPU sets the compute and memory models and the NCCL model
prices its collectives; or two links from command-line flags or a TOML file (flags win), e.g.::

    [cluster]
    nodes = 8              # or: gpus = 64
    gpus_per_node = 8
    intra = "nvlink4"      # a link preset or "custom:bw=450GB/s,lat=3us"
    inter = "ib-hdr"
    price_gpu_hour = 30    # dollars per GPU-hour
    gpu_memory = "80GB"
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ringtree.cost.clusters import Cluster as Hardware
from ringtree.cost.clusters import read_cluster_table
from ringtree.cost.terms import Link
from ringtree.errors import RingtreeError

DEFAULT_GPU_MEMORY_BYTES = 80 * 10**9  # H100 SXM / A100 80GB
#: The most GPUs a plan takes: 2**17 = 131,072, beyond the largest clusters built so far
#: (~100k GPUs). The group layout is worked out GPU by GPU, and --compare of every strategy
#: on this many takes 10-15 s on one core.
MAX_GPUS = 2**17
CLUSTER_KEYS = ("gpus", "nodes", "gpus_per_node", "intra", "inter", "price_gpu_hour", "gpu_memory")


@dataclass(frozen=True)
class Cluster:
    """nodes x gpus_per_node GPUs; ``intra`` links GPUs of a node, ``inter`` the nodes.

    price_gpu_hour: dollars per GPU per hour (None: no money figures).
    gpu_memory_bytes: memory of one GPU, to say whether the model states fit.
    hardware: the cluster as built, when known (then the NCCL model prices collectives and the
    GPU's peak and memory bandwidth set the compute model; ``intra``/``inter`` describe it).
    """

    nodes: int
    gpus_per_node: int
    intra: Link
    inter: Link
    price_gpu_hour: float | None = None
    gpu_memory_bytes: int = DEFAULT_GPU_MEMORY_BYTES
    hardware: Hardware | None = None

    @property
    def gpus(self) -> int:
        """nodes * gpus_per_node."""
        return self.nodes * self.gpus_per_node

    @property
    def usd_per_second(self) -> float | None:
        """The whole cluster's price per second (None without a price)."""
        if self.price_gpu_hour is None:
            return None
        return self.price_gpu_hour * self.gpus / 3600


def read_cluster_toml(path: str | Path, hardware_ok: bool = False) -> dict[str, Any]:
    """The ``[cluster]`` table of a TOML file (or its top level), keys checked (with
    ``hardware_ok``, a table of a cluster as built is returned unchecked: its reader checks
    it)."""
    table = read_cluster_table(path)
    if hardware_ok and is_hardware_table(table):
        return table
    unknown = sorted(set(table) - set(CLUSTER_KEYS))
    if unknown:
        raise RingtreeError(
            f"unknown key {unknown[0]!r} in cluster file {str(path)!r}: "
            f"expected {', '.join(CLUSTER_KEYS)}"
        )
    return table


def shape_gpus(gpus: int | None, nodes: int | None, gpus_per_node: int | None) -> tuple[int, int]:
    """``(nodes, gpus_per_node)`` from any two of the three (or GPUs alone: one node of up to
    8 GPUs, else nodes of 8)."""
    for name, v in (("gpus", gpus), ("nodes", nodes), ("gpus per node", gpus_per_node)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise RingtreeError(f"{name} must be a whole number >= 1, got {v!r}")
    if gpus_per_node is None:
        if gpus is not None and nodes is not None:
            if gpus % nodes:
                raise RingtreeError(f"{gpus} GPUs do not split evenly over {nodes} nodes")
            return _at_most_max_gpus(nodes, gpus // nodes)
        gpus_per_node = min(gpus, 8) if gpus is not None else 8
    if gpus is None and nodes is None:
        raise RingtreeError("give the cluster size: --gpus N or --nodes N")
    if gpus is None:
        assert nodes is not None
        return _at_most_max_gpus(nodes, gpus_per_node)
    if gpus % gpus_per_node:
        raise RingtreeError(f"{gpus} GPUs are not a whole number of nodes of {gpus_per_node}")
    if nodes is not None and nodes * gpus_per_node != gpus:
        raise RingtreeError(f"{nodes} nodes x {gpus_per_node} GPUs is not {gpus} GPUs")
    return _at_most_max_gpus(gpus // gpus_per_node, gpus_per_node)


def _at_most_max_gpus(nodes: int, gpus_per_node: int) -> tuple[int, int]:
    if nodes * gpus_per_node > MAX_GPUS:
        raise RingtreeError(
            f"{nodes:,} nodes x {gpus_per_node:,} GPUs = {nodes * gpus_per_node:,} GPUs: plans "
            f"take up to {MAX_GPUS:,} GPUs (the layout is worked out GPU by GPU)"
        )
    return nodes, gpus_per_node


#: Latency of one point-to-point transfer inside a node and across nodes, the alphas of the
#: links that describe a cluster as built (the verdict's words, :mod:`ringtree.plan.nccl_timing`'s
#: sends): NCCL's LL-protocol send over NVLink ~ 5 us plus launch; across InfiniBand ~ 10 us more.
P2P_INTRA_S, P2P_INTER_S = 10e-6, 20e-6


def from_hardware(
    hw: Hardware, nodes: int, price_gpu_hour: float | None = None,
    gpu_memory_bytes: int | None = None,
) -> Cluster:
    """``nodes`` nodes of a cluster as built; the price and GPU memory default to the
    preset's."""
    from ringtree.cost.nccl.topology import intra_bandwidth

    _at_most_max_gpus(nodes, hw.gpus_per_node)
    bw, path = intra_bandwidth(hw)
    intra = Link(
        f"{'NVLink' if path == 'nvlink' else 'PCIe'} {bw:g} GB/s", bw * 1e9, alpha_s=P2P_INTRA_S
    )
    per_gpu = hw.node_network_GBps / hw.gpus_per_node
    net = f"{hw.nics_per_node} x {hw.nic_gbps:g} Gb/s {hw.network}"
    inter = Link(net, max(per_gpu, 1e-3) * 1e9, alpha_s=P2P_INTER_S)
    price = price_gpu_hour if price_gpu_hour is not None else hw.price_gpu_hour
    memory = gpu_memory_bytes if gpu_memory_bytes is not None else hw.gpu.memory_bytes
    return Cluster(nodes, hw.gpus_per_node, intra, inter, price, memory, hw)


def is_hardware_table(table: dict[str, Any]) -> bool:
    """Whether a ``[cluster]`` table describes a cluster as built (a ``gpu`` or ``preset``)."""
    return "gpu" in table or "preset" in table
