"""Clusters as they are built: GPUs per node, the fabric inside a node, NICs and network.

A :class:`Cluster` is a node design and its network (a preset of ``ringtree clusters``, or a
``[cluster]`` table of a TOML file); the number of nodes is given separately (``--nodes``).
Presets live in ``ringtree/data/clusters.toml`` and ``gpus.toml``, each with its sources and
the facts no source states listed as assumed. Units: NIC line rates in Gb/s per direction, as
vendors quote them; every other bandwidth in GB/s per direction.

A custom cluster file::

    [cluster]
    gpu = "h100-sxm"          # a GPU preset (``ringtree clusters --json`` lists them)
    gpus_per_node = 8
    fabric = "nvswitch"       # nvswitch | nvlink | pcie | pcie-cpu
    nvls = true
    nics_per_node = 8
    nic_gbps = 400
    network = "ib"            # ib | roce | efa | tcp | tcpx | tcpxo
    cpu = "intel"             # intel | amd | arm | grace

or ``preset = "dgx-h100"`` plus the keys to change. ``gpu`` may also be a table describing a
GPU outside the presets (:data:`GPU_KEYS`): ``gpu = { preset = "h100-sxm", nvlink_links = 8 }``
or a whole ``[cluster.gpu]`` table.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from ringtree.errors import RingtreeError

FABRICS = ("nvswitch", "nvlink", "pcie", "pcie-cpu")
NETWORKS = ("ib", "roce", "efa", "tcp", "tcpx", "tcpxo")
CPUS = ("intel", "amd", "arm", "grace")
#: PCIe x16 bandwidth per direction by generation, as NCCL models it (src/graph/topo.cc:408-411:
#: width x speed / 80; Gen3 12, Gen4 24, Gen5 48, Gen6 96 GB/s)
PCIE_GBPS_X16 = {3: 12.0, 4: 24.0, 5: 48.0, 6: 96.0}


@dataclass(frozen=True)
class Gpu:
    """One GPU model. ``nccl_nvlink_bw``: NCCL's bandwidth per NVLink link (GB/s per
    direction, ``SM80_NVLINK_BW`` ...); ``nvlink_GBps_per_link``: the vendor's."""

    key: str
    name: str
    arch: str
    sm: int
    memory_bytes: int
    bf16_tflops: float
    nvlink_links: int
    nvlink_GBps_per_link: float
    nccl_nvlink_bw: float
    pcie_gen: int
    pcie_lanes: int = 16
    memory_bandwidth_GBps: float = 0.0
    fp8_tflops: float = 0.0
    source: str = ""
    assumed: tuple[str, ...] = ()

    @property
    def nvlink_GBps(self) -> float:
        """NCCL's NVLink bandwidth of the GPU, all links, per direction (A100 240, H100 370.8)."""
        return self.nvlink_links * self.nccl_nvlink_bw

    @property
    def pcie_GBps(self) -> float:
        """The GPU's PCIe link per direction, as NCCL models it."""
        return PCIE_GBPS_X16.get(self.pcie_gen, 24.0) * self.pcie_lanes / 16


@dataclass(frozen=True)
class Cluster:
    """A node design and its network (see the module doc); ``nodes`` is not part of it."""

    key: str
    name: str
    gpu: Gpu
    gpus_per_node: int
    fabric: str
    nvls: bool = False
    nics_per_node: int = 0
    nic_gbps: float = 0.0
    network: str = "ib"
    sharp: bool = False
    cpu: str = "intel"
    nvswitch_gen: int = 0
    network_name: str = ""
    price_gpu_hour: float | None = None
    #: measured on this cluster, when known: the host's cost of launching one collective and
    #: one network step's latency (see ringtree.cost.nccl.timing); None: the model's defaults
    launch_us: float | None = None
    net_hop_us: float | None = None
    #: NCCL_* settings the platform applies before NCCL reads its environment (e.g. the
    #: network plugin's: aws-ofi-nccl sets NCCL_PROTO=simple on p4d); the user's win
    nccl_env: tuple[tuple[str, str], ...] = ()
    #: GPUs of one host (compute tray) when the NVLink domain spans several, as GB200 NVL72's
    #: 72 GPUs in trays of 4 (multi-node NVLink, MNNVL); 0: the domain is one host
    host_gpus: int = 0
    #: the NCCL model's constants measured on this cluster (a cluster file's ``[cluster.
    #: nccl_model]``, which ``ringtree calibrate --nccl-tests`` fits; see MODEL_KEYS), and
    #: those measured across nodes, for calls that cross nodes (``nccl_model_multinode``)
    nccl_model: tuple[tuple[str, float], ...] = ()
    nccl_model_multinode: tuple[tuple[str, float], ...] = ()
    source: str = ""
    assumed: tuple[str, ...] = ()
    notes: str = ""

    @property
    def nic_GBps(self) -> float:
        """One NIC's line rate in GB/s per direction (NCCL: Mb/s / 8000)."""
        return self.nic_gbps / 8

    @property
    def mnnvl(self) -> bool:
        """Whether the NVLink domain (a "node") spans several hosts (multi-node NVLink)."""
        return 0 < self.host_gpus < self.gpus_per_node

    @property
    def node_network_GBps(self) -> float:
        """All compute NICs of a node, GB/s per direction."""
        return self.nics_per_node * self.nic_GBps

    def record(self) -> dict[str, Any]:
        """Plain data (``ringtree clusters --json``)."""
        g = self.gpu
        return {
            "name": self.key, "title": self.name, "gpu": g.key, "gpu_name": g.name,
            "gpus_per_node": self.gpus_per_node, "fabric": self.fabric, "nvls": self.nvls,
            "nvlink_GBps_per_gpu": g.nvlink_GBps, "nics_per_node": self.nics_per_node,
            "nic_gbps": self.nic_gbps, "network": self.network, "network_name": self.network_name,
            "sharp": self.sharp, "cpu": self.cpu, "price_gpu_hour": self.price_gpu_hour,
            "host_gpus": self.host_gpus,
            "nccl_env": dict(self.nccl_env), "source": self.source,
            "assumed": list(self.assumed), "notes": self.notes,
        }


def _data(name: str) -> dict[str, Any]:
    text = resources.files("ringtree.data").joinpath(name).read_text()
    return tomllib.loads(text)


def _gpu(key: str, t: dict[str, Any]) -> Gpu:
    return Gpu(
        key=key, name=t["name"], arch=t["arch"], sm=int(t["sm"]),
        memory_bytes=(int(t["cuda_memory_mib"]) * 2**20 if "cuda_memory_mib" in t
                      else int(float(t["memory_gb"]) * 10**9)),
        bf16_tflops=float(t.get("bf16_dense_tflops", 0.0)),
        nvlink_links=int(t.get("nvlink_links", 0)),
        nvlink_GBps_per_link=float(t.get("nvlink_gbps_per_link", 0.0)),
        nccl_nvlink_bw=float(t.get("nccl_nvlink_bw_per_link", 0.0)),
        pcie_gen=int(t.get("pcie_gen", 4)), pcie_lanes=int(t.get("pcie_lanes", 16)),
        memory_bandwidth_GBps=float(t.get("memory_bandwidth_gbps", 0.0)),
        fp8_tflops=float(t.get("fp8_dense_tflops", 0.0)),
        source=str(t.get("source", "")), assumed=tuple(t.get("assumed", ())),
    )


@cache
def gpus() -> dict[str, Gpu]:
    """Every GPU preset, by key."""
    return {k: _gpu(k, t) for k, t in _data("gpus.toml")["gpus"].items()}


#: Keys of a GPU described in a cluster file (``gpu = { preset = "h100-sxm", nvlink_links = 8 }``
#: or a whole ``[cluster.gpu]`` table): gpus.toml's, units as there (``cuda_memory_mib``, where
#: given, is the capacity; else ``memory_gb``).
GPU_KEYS = ("preset", "name", "arch", "sm", "memory_gb", "cuda_memory_mib",
            "memory_bandwidth_gbps", "bf16_dense_tflops", "fp8_dense_tflops", "nvlink_links",
            "nvlink_gbps_per_link", "nccl_nvlink_bw_per_link", "pcie_gen", "pcie_lanes", "source")
GPU_REQUIRED = ("name", "arch", "sm", "memory_gb", "memory_bandwidth_gbps", "bf16_dense_tflops")


def gpu_of(value: Any, where: str) -> Gpu:
    """A GPU preset by key, or a GPU described by a table (:data:`GPU_KEYS`; ``preset``
    starts from a preset's figures, the other keys replace them); RingtreeError naming
    ``where``."""
    if not isinstance(value, dict):
        if str(value) not in gpus():
            raise RingtreeError(f"{where}: gpu {str(value)!r} is not a GPU preset: expected "
                                f"one of {', '.join(gpus())}, or a table of {', '.join(GPU_KEYS)}")
        return gpus()[str(value)]
    unknown = sorted(set(value) - set(GPU_KEYS))
    if unknown:
        raise RingtreeError(f"{where}: unknown gpu key {unknown[0]!r}: expected "
                            f"{', '.join(GPU_KEYS)}")
    table = dict(value)
    base = table.pop("preset", None)
    if base is not None:
        gpu_of(base, where)  # a preset, or the error naming them
        preset = dict(_data("gpus.toml")["gpus"][str(base)])
        if "memory_gb" in table:  # a capacity given replaces the preset's measured one
            preset.pop("cuda_memory_mib", None)
        table = {**preset, **table}
    missing = [k for k in GPU_REQUIRED if k not in table]
    if missing:
        raise RingtreeError(f"{where}: the gpu table needs {', '.join(missing)} (or preset = a "
                            "GPU preset to start from)")
    try:
        gpu = _gpu(str(table["name"]), table)
    except (TypeError, ValueError) as e:
        raise RingtreeError(f"{where}: gpu: {e}") from None
    if min(gpu.bf16_tflops, gpu.memory_bandwidth_GBps, gpu.memory_bytes) <= 0:
        raise RingtreeError(f"{where}: gpu bf16_dense_tflops, memory_bandwidth_gbps and "
                            "memory_gb must be > 0")
    return gpu


#: Keys a [cluster] table may hold besides the Cluster's own fields: the preset it starts
#: from, and documentation of a preset's figures that no model reads.
OTHER_KEYS = ("preset", "derived", "rails", "gpudirect_rdma", "cpu_model", "price_source")
#: Every field of a Cluster but its key is a key of its table, read by its type (a field
#: added to Cluster is read from files with no more code); gpu, gpus_per_node and the pair
#: tables (PAIRS) are read by their own rules below.
_FIELDS = {f.name: f.type for f in fields(Cluster) if f.name != "key"}
CLUSTER_KEYS = (*_FIELDS, *OTHER_KEYS)
_READ: dict[Any, Callable[[Any], Any]] = {
    "str": str, "bool": bool, "int": int, "float": float,
    "float | None": lambda v: float(v) if v else None, "tuple[str, ...]": tuple,
}
#: The fields held as tuples of (key, value) pairs, written as tables.
PAIRS = ("nccl_env", "nccl_model", "nccl_model_multinode")
#: The keys whose values must be one of these.
CHOICES = {"fabric": FABRICS, "network": NETWORKS, "cpu": CPUS}
#: Constants of ringtree.cost.nccl.timing.Params a cluster file may set for itself in its
#: ``nccl_model`` table (the per-network ones for the cluster's network); the others are
#: NCCL's or the model's own and hold for every system.
MODEL_KEYS = (
    "intra_latency_scale", "ll128_latency_scale", "simple_latency_scale", "nvlink_efficiency",
    "nvls_chunk_overhead_bytes", "nvls_latency_scale", "p2p_peer_us", "net_efficiency",
    "net_simple_step_us",
)


def _cluster(key: str, t: dict[str, Any], where: str) -> Cluster:
    unknown = sorted(set(t) - set(CLUSTER_KEYS))
    if unknown:
        raise RingtreeError(
            f"unknown key {unknown[0]!r} in {where}: expected {', '.join(CLUSTER_KEYS)}"
        )
    gpu = gpu_of(t.get("gpu", ""), where)
    for name, allowed in CHOICES.items():
        if name in t and t[name] not in allowed:
            raise RingtreeError(
                f"{where}: {name} {t[name]!r} unknown: expected one of {', '.join(allowed)}"
            )
    model = _nccl_model(t.get("nccl_model", {}), where)
    multinode = _nccl_model(t.get("nccl_model_multinode", {}), where)
    try:
        values = {name: _READ[kind](t[name]) for name, kind in _FIELDS.items()
                  if name in t and kind in _READ}
        c = Cluster(**{"name": key, "fabric": "", **values, "key": key, "gpu": gpu,
                       "gpus_per_node": _whole(t, "gpus_per_node", where),
                       "nccl_env": _nccl_env(t.get("nccl_env", {}), where),
                       "nccl_model": model, "nccl_model_multinode": multinode})
    except (TypeError, ValueError) as e:
        raise RingtreeError(f"{where}: {e}") from None
    if c.fabric not in FABRICS:
        raise RingtreeError(f"{where}: fabric {c.fabric!r} unknown: expected {', '.join(FABRICS)}")
    if c.nics_per_node < 0 or c.nic_gbps < 0 or (c.nics_per_node and not c.nic_gbps):
        raise RingtreeError(f"{where}: nics_per_node and nic_gbps must be > 0 together")
    return c


def _nccl_env(t: Any, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(t, dict) or not all(
        isinstance(k, str) and k.startswith("NCCL_") and isinstance(v, str | int)
        for k, v in t.items()
    ):
        raise RingtreeError(f"{where}: nccl_env must be a table of NCCL_* = value")
    return tuple(sorted((k, str(v)) for k, v in t.items()))


def _nccl_model(t: Any, where: str) -> tuple[tuple[str, float], ...]:
    bad = (not isinstance(t, dict) or sorted(set(t) - set(MODEL_KEYS))
           or [v for v in t.values() if isinstance(v, bool) or not isinstance(v, int | float)
               or not 0 <= v < 1e12])
    if bad:
        raise RingtreeError(f"{where}: nccl_model and nccl_model_multinode must be tables of "
                            f"numbers >= 0 with keys among {', '.join(MODEL_KEYS)}")
    return tuple(sorted((k, float(v)) for k, v in t.items()))


def _whole(t: dict[str, Any], key: str, where: str) -> int:
    v = t.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise RingtreeError(f"{where}: {key} must be a whole number >= 1, got {v!r}")
    return v


#: Other names of presets: an HGX board is built like the DGX system of its generation.
ALIASES = {"hgx-a100": "dgx-a100", "hgx-h100": "dgx-h100", "hgx-b200": "dgx-b200"}


@cache
def presets() -> dict[str, Cluster]:
    """Every cluster preset, by key (aliases included, named as such)."""
    tables = _data("clusters.toml")["clusters"]
    out = {k: _cluster(k, t, f"preset {k}") for k, t in tables.items()}
    for alias, target in ALIASES.items():
        base = out[target]
        out[alias] = replace(base, key=alias, notes=f"built as {target}: {base.notes}".strip())
    return out


def get_cluster(text: str) -> Cluster:
    """A preset by name (any case), or a TOML file's ``[cluster]`` table (a path ending in
    ``.toml``); RingtreeError naming the presets or the file's problem."""
    if text.strip().lower().endswith(".toml"):
        return load_cluster(text.strip())
    key = text.strip().lower()
    if key not in presets():
        raise RingtreeError(
            f"unknown cluster {text!r}: expected one of {', '.join(presets())} or a FILE.toml"
        )
    return presets()[key]


def read_cluster_table(path: str | Path) -> dict[str, Any]:
    """The ``[cluster]`` table of a TOML file (or its top level), unchecked; RingtreeError when
    the file cannot be read or is not TOML."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise RingtreeError(f"cannot read cluster file {str(path)!r}: {e.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise RingtreeError(f"malformed cluster file {str(path)!r}: not valid TOML: {e}") from None
    table = data.get("cluster", data)
    if not isinstance(table, dict):
        raise RingtreeError(f"cluster file {str(path)!r}: [cluster] must be a table")
    return dict(table)


def load_cluster(path: str | Path) -> Cluster:
    """The cluster of a TOML file's ``[cluster]`` table (``preset = NAME`` starts from a
    preset), named after the file; every key must be a Cluster's (a file that also says
    where a plan runs is read by :func:`ringtree.plan.placement.read_cluster_file`)."""
    return cluster_from_table(Path(path).stem, read_cluster_table(path),
                              f"cluster file {str(path)!r}")


def cluster_from_table(key: str, table: dict[str, Any], where: str) -> Cluster:
    """A Cluster from a ``[cluster]`` table: its keys, or ``preset = NAME`` and the keys
    that differ from that preset (RingtreeError naming ``where``)."""
    table = dict(table)
    base = table.pop("preset", None)
    if base is not None:
        start = get_cluster(str(base))
        return _cluster(key, {**_as_table(start), **table}, where)
    return _cluster(key, table, where)


def _as_table(c: Cluster) -> dict[str, Any]:
    """The table :func:`cluster_from_table` reads back as ``c`` (its assumptions left out:
    a cluster that starts from a preset and changes it is not the preset's)."""
    t: dict[str, Any] = {}
    for f in fields(Cluster):
        value = getattr(c, f.name)
        if f.name in ("key", "assumed") or value is None or (f.name in PAIRS and not value):
            continue
        t[f.name] = c.gpu.key if f.name == "gpu" else dict(value) if f.name in PAIRS else value
    return t
