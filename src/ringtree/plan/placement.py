"""Where a plan runs (:class:`Placement`): nodes x GPUs per node, the links inside and between
nodes, the price, one GPU's memory, and the cluster as built when it is one; built from a
cluster (a preset, a file) and the command line's flags (:func:`place`).

Either a cluster as built (``--cluster dgx-h100 --nodes 16``, a preset of ``ringtree
clusters`` or a TOML file with a ``gpu`` or ``preset`` key, see :mod:`ringtree.cost.clusters`):
its GPU sets the compute and memory models and the NCCL model prices its collectives; or two
links from command-line flags or a TOML file (flags win), e.g.::

    [cluster]
    nodes = 8              # or: gpus = 64
    gpus_per_node = 8
    intra = "nvlink4"      # a link preset or "custom:bw=450GB/s,lat=3us"
    inter = "ib-hdr"
    price_gpu_hour = 30    # dollars per GPU-hour
    gpu_memory = "80GB"

A file of a cluster as built may say where the plan runs too (``nodes``, ``gpus``,
``gpu_memory``): this module reads those keys and gives the rest to the cluster's reader.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ringtree.cost.clusters import (
    CLUSTER_KEYS,
    Cluster,
    cluster_from_table,
    get_cluster,
    read_cluster_table,
)
from ringtree.cost.links import parse_link
from ringtree.cost.nccl.pricer import P2P_INTER_S, P2P_INTRA_S
from ringtree.cost.nccl.topology import intra_bandwidth
from ringtree.cost.terms import Link
from ringtree.errors import RingtreeError
from ringtree.units import parse_size

DEFAULT_GPU_MEMORY_BYTES = 80 * 10**9  # H100 SXM / A100 80GB
DEFAULT_INTRA, DEFAULT_INTER = "nvlink4", "ib-ndr"
#: The most GPUs a plan takes: 2**17 = 131,072, beyond the largest clusters built so far
#: (~100k GPUs). The group layout is worked out GPU by GPU, and --compare of every strategy
#: on this many takes 10-15 s on one core.
MAX_GPUS = 2**17
#: The highest price per GPU-hour a file gives (the command line's largest number).
MAX_PRICE = 1e12
#: The keys of a placement in a cluster file (a file of links holds only these).
PLACEMENT_KEYS = ("gpus", "nodes", "gpus_per_node", "intra", "inter", "price_gpu_hour",
                  "gpu_memory")
#: Of those, the ones a file of a cluster as built adds to the cluster's own keys (its
#: ``intra``/``inter`` are left unread: the cluster brings its links).
PLACEMENT_ONLY = tuple(k for k in PLACEMENT_KEYS if k not in CLUSTER_KEYS)


@dataclass(frozen=True)
class Placement:
    """nodes x gpus_per_node GPUs; ``intra`` links GPUs of a node, ``inter`` the nodes.

    price_gpu_hour: dollars per GPU per hour (None: no money figures).
    gpu_memory_bytes: memory of one GPU, to say whether the model states fit.
    cluster: the cluster as built, when known (then the NCCL model prices collectives and the
    GPU's peak and memory bandwidth set the compute model; ``intra``/``inter`` describe it).
    """

    nodes: int
    gpus_per_node: int
    intra: Link
    inter: Link
    price_gpu_hour: float | None = None
    gpu_memory_bytes: int = DEFAULT_GPU_MEMORY_BYTES
    cluster: Cluster | None = None

    @property
    def gpus(self) -> int:
        """nodes * gpus_per_node."""
        return self.nodes * self.gpus_per_node

    @property
    def usd_per_second(self) -> float | None:
        """The whole placement's price per second (None without a price)."""
        if self.price_gpu_hour is None:
            return None
        return self.price_gpu_hour * self.gpus / 3600


def read_cluster_file(path: str | Path) -> tuple[Cluster | None, dict[str, Any]]:
    """A cluster file: the cluster as built (None for a file of links) and the placement's
    keys (module doc); RingtreeError naming an unknown key or a bad value."""
    table = read_cluster_table(path)
    if "gpu" in table or "preset" in table:
        own = {k: table.pop(k) for k in PLACEMENT_ONLY if k in table}
        for key in ("intra", "inter"):  # a cluster as built brings its own links
            own.pop(key, None)
        if "price_gpu_hour" in table:  # the cluster's, checked as a placement's price too
            own["price_gpu_hour"] = table["price_gpu_hour"]
        where = f"cluster file {str(path)!r}"
        return cluster_from_table(Path(path).stem, table, where), own
    unknown = sorted(set(table) - set(PLACEMENT_KEYS))
    if unknown:
        raise RingtreeError(
            f"unknown key {unknown[0]!r} in cluster file {str(path)!r}: "
            f"expected {', '.join(PLACEMENT_KEYS)}"
        )
    return None, table


def cluster_of(text: str) -> Cluster:
    """A cluster as built: a preset, or a cluster file (which may say where a plan runs
    too); RingtreeError for a file of links."""
    if not text.strip().lower().endswith(".toml"):
        return get_cluster(text)
    cluster, _ = read_cluster_file(text.strip())
    if cluster is None:
        raise RingtreeError(f"cluster file {text.strip()!r} describes links, not a cluster as "
                            "built: it needs a gpu = ... or preset = ... key")
    return cluster


def place(
    cluster: str | None = None, *, gpus: int | None = None, nodes: int | None = None,
    gpus_per_node: int | None = None, intra: str | None = None, inter: str | None = None,
    profile: str | None = None, price_gpu_hour: float | None = None,
    gpu_memory_bytes: int | None = None,
) -> Placement:
    """Where a plan runs, as the command line says it (None: not given): ``cluster`` a preset
    or a cluster file; or links (``intra``/``inter`` link texts, ``profile`` a calibrated
    profile for both; defaults nvlink4 and ib-ndr) and a size. Flags win over a file's
    keys."""
    given = {"gpus": gpus, "nodes": nodes, "gpus_per_node": gpus_per_node,
             "intra": intra or profile, "inter": inter or profile,
             "price_gpu_hour": price_gpu_hour, "gpu_memory": gpu_memory_bytes}
    built: Cluster | None = None
    table: dict[str, Any] = {}
    if cluster is not None:
        if cluster.strip().lower().endswith(".toml"):
            built, table = read_cluster_file(cluster.strip())
        else:
            built = get_cluster(cluster)
    if built is not None:
        return _on_cluster(built, given, table)
    values = {**table, **{k: v for k, v in given.items() if v is not None}}
    if gpus is not None or nodes is not None:  # a size on the command line wins
        values.update(gpus=gpus, nodes=nodes)
    n, gpn = shape_gpus(values.get("gpus"), values.get("nodes"), values.get("gpus_per_node"))
    memory = _memory(values.get("gpu_memory"))
    return Placement(
        n, gpn, parse_link(str(values.get("intra", DEFAULT_INTRA))),
        parse_link(str(values.get("inter", DEFAULT_INTER))), _price(values.get("price_gpu_hour")),
        DEFAULT_GPU_MEMORY_BYTES if memory is None else memory,
    )


def _on_cluster(cluster: Cluster, given: dict[str, Any], table: dict[str, Any]) -> Placement:
    """Nodes of a cluster as built, from the flags ``given`` or its file's ``table``."""
    if given["intra"] or given["inter"]:
        raise RingtreeError("--intra/--inter/--profile describe links: a cluster as built "
                            "(--cluster PRESET) brings its own; give one or the other")
    gpn = given["gpus_per_node"]
    if gpn is not None and gpn != cluster.gpus_per_node:
        raise RingtreeError(f"{cluster.key} has {cluster.gpus_per_node} GPUs per node, not "
                            f"{gpn}")
    gpus, nodes = given["gpus"], given["nodes"]
    if gpus is None and nodes is None:
        gpus, nodes = table.get("gpus"), table.get("nodes")
    if gpus is None and nodes is None:
        raise RingtreeError(f"give the cluster size: --nodes K (nodes of "
                            f"{cluster.gpus_per_node} GPUs of {cluster.key})")
    nodes, _ = shape_gpus(gpus, nodes, cluster.gpus_per_node)
    price = _price(table.get("price_gpu_hour") if given["price_gpu_hour"] is None
                   else given["price_gpu_hour"])
    memory = (_memory(table.get("gpu_memory")) if given["gpu_memory"] is None
              else given["gpu_memory"])
    return on_cluster(cluster, nodes, price, memory)


def on_cluster(
    cluster: Cluster, nodes: int, price_gpu_hour: float | None = None,
    gpu_memory_bytes: int | None = None,
) -> Placement:
    """``nodes`` nodes of a cluster as built; the price and GPU memory default to the
    cluster's. Its links are those the NCCL model's point-to-point sends see."""
    _at_most_max_gpus(nodes, cluster.gpus_per_node)
    bw, path = intra_bandwidth(cluster)
    intra = Link(
        f"{'NVLink' if path == 'nvlink' else 'PCIe'} {bw:g} GB/s", bw * 1e9, alpha_s=P2P_INTRA_S
    )
    per_gpu = cluster.node_network_GBps / cluster.gpus_per_node
    net = f"{cluster.nics_per_node} x {cluster.nic_gbps:g} Gb/s {cluster.network}"
    inter = Link(net, max(per_gpu, 1e-3) * 1e9, alpha_s=P2P_INTER_S)
    price = price_gpu_hour if price_gpu_hour is not None else cluster.price_gpu_hour
    memory = gpu_memory_bytes if gpu_memory_bytes is not None else cluster.gpu.memory_bytes
    return Placement(nodes, cluster.gpus_per_node, intra, inter, price, memory, cluster)


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


def _price(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RingtreeError(f"price_gpu_hour must be a number of dollars, got {value!r}")
    if value < 0:
        raise RingtreeError(f"price per GPU-hour must be >= 0, got {value}")
    if not value <= MAX_PRICE:  # also inf and nan
        raise RingtreeError(f"price per GPU-hour must be at most {MAX_PRICE:g}, got {value}")
    return float(value)


def _memory(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise RingtreeError(f'gpu_memory must be a size like "80GB" or bytes, got {value!r}')
    return parse_size(value)
