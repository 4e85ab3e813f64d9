"""How long NCCL takes for one call on a cluster: NCCL's own choice, timed by ringtree's model.

NCCL's tuner (:mod:`ringtree.cost.nccl.tuner`) predicts times only to rank its options; they
are 2-3x off the measured time below ~16 MiB (no launch cost, latencies fitted for the choice)
and off at the plateau too (:mod:`bench.model_vs_published`). So ringtree takes NCCL's
*choice* from NCCL's tuner and prices what it runs with its own model, in three parts:

``time = softmax(host, latency + bus bytes / bus bandwidth)``

* **host**: the CPU's cost of launching one collective (NCCL's enqueue and the kernel launch).
  nccl-tests issues its calls back to back, so this hides behind the GPU's work once a call
  takes longer -- ``softmax(a, b) = (a^4 + b^4)^(1/4)``, which is the larger of the two away
  from their crossing and a little more near it. Measured floors of 8-byte all-reduces on one
  node range from 13 us (AWS p5) to 45 us (Azure ND A100 v4) with the same GPUs: it depends on
  the host, driver and NCCL build, so it is a property of the cluster (``launch_us`` in a
  cluster file, or calibrated from one measurement) with a default for modern hosts.
* **latency**: NCCL's own per-step latencies (``tuning.cc``) for the algorithm and protocol
  chosen, with the network steps at the network's own per-hop latency (InfiniBand NCCL's 5 us
  for a tree level with LL; EFA and TCP-based fabrics many times that), plus a fixed kernel
  latency.
* **bus bandwidth** (nccl-tests' busbw): inside a node, NCCL's NVLink figure (240 GB/s A100,
  370.8 H100) times an efficiency; between nodes, the NICs the job's GPUs reach times an
  efficiency per network; per protocol, LL carries half its bytes as flags (and NCCL caps it),
  LL128 120 of 128; NVLS reduces in the switch (NCCL 2.30's model, which lands on the 480 GB/s
  measured on 8 H100s) but its chunk shrinks below 1 GiB and each chunk costs a fixed overhead;
  on two nodes a tree carries each byte over the network once, so it reaches twice the ring's
  network-bound bandwidth.

Every constant below says where it comes from: NCCL's source, a vendor figure, or a fit to
published nccl-tests results named in ``bench/published/`` (bench/fit_nccl_model.py redoes the
fit; bench/model_vs_published.py reports the error on the systems the fit did not see).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from ringtree.collectives import Collective, bus_factor
from ringtree.cost.clusters import Cluster
from ringtree.cost.nccl import constants as k
from ringtree.cost.nccl import p2p, tuner
from ringtree.cost.nccl.bounds import lower_bound
from ringtree.cost.nccl.topology import Topology, topology
from ringtree.errors import RingtreeError


@dataclass(frozen=True)
class Params:
    """The model's constants (module doc); defaults fitted as ``bench/fit_nccl_model.py``
    prints, see docs/nccl-model.md for the fit and check sets."""

    host_us: float = 13.0
    kernel_us: float = 0.0
    #: posting and completing one peer's send and receive in a grouped p2p call (fitted)
    p2p_peer_us: float = 3.10
    intra_latency_scale: float = 1.218
    ll128_latency_scale: float = 1.346
    simple_latency_scale: float = 1.193
    softmax_power: float = 4.0
    nvlink_efficiency: float = 0.989
    #: a ring's share of the vendor's NVLink line rate (per direction) across the trays of a
    #: multi-node NVLink domain, where it beats NCCL's 40.1 GB/s per link (fitted, GB200 NVL72)
    mnnvl_nvlink_efficiency: float = 0.965
    nvls_chunk_overhead_bytes: float = 12919
    nvls_latency_scale: float = 1.320
    net_efficiency: tuple[tuple[str, float], ...] = (
        ("ib", 0.927), ("roce", 0.927), ("efa", 0.85), ("tcpxo", 0.858), ("tcpx", 0.858),
        ("tcp", 0.6),
    )
    net_hop_us: tuple[tuple[str, float], ...] = (
        ("ib", 5.0), ("roce", 6.0), ("efa", 23.0), ("tcpxo", 50.0), ("tcpx", 50.0),
        ("tcp", 60.0),
    )
    net_simple_step_us: tuple[tuple[str, float], ...] = (
        ("ib", 14.0), ("roce", 14.0), ("efa", 14.0), ("tcpxo", 411.0), ("tcpx", 411.0),
        ("tcp", 411.0),
    )

    def efficiency(self, network: str) -> float:
        """Share of the NICs' line rate a collective's traffic reaches on ``network``."""
        return dict(self.net_efficiency).get(network, 0.8)

    def hop_us(self, network: str) -> float:
        """One network step's latency with LL on a tree, us (NCCL's IB figure: 5.0)."""
        return dict(self.net_hop_us).get(network, 10.0)

    def simple_step_us(self, network: str) -> float:
        """The least a network step takes with the Simple protocol, us: NCCL's IB figure (14)
        on RDMA networks; TCP-based ones move Simple's large chunks through the host's
        stack (GPUDirect-TCPX/O: ~1 ms calls from 1 to 16 MiB, bench/published)."""
        return dict(self.net_simple_step_us).get(network, 14.0)


DEFAULT = Params()


def for_cluster(p: Params, cluster: Cluster, nodes: int = 1) -> Params:
    """``p`` with the cluster's own constants for a call on ``nodes`` nodes (``Cluster.
    nccl_model``, and ``nccl_model_multinode`` over it across nodes, fitted to its nccl-tests
    logs by ``ringtree calibrate --nccl-tests``): a per-network table takes the value for the
    cluster's network."""
    model = cluster.nccl_model + (cluster.nccl_model_multinode if nodes > 1 else ())
    return _overridden(p, model, cluster.network) if model else p


@cache
def _overridden(p: Params, model: tuple[tuple[str, float], ...], network: str) -> Params:
    changes: dict[str, Any] = {}
    for name, value in model:  # a later entry of a name wins
        old = getattr(p, name)
        if isinstance(old, tuple):  # a per-network table: this network's entry
            value = tuple((k, v) for k, v in old if k != network) + ((network, value),)
        changes[name] = value
    return replace(p, **changes)


@dataclass(frozen=True)
class NcclCall:
    """One call as NCCL runs it and ringtree times it.

    algorithm, protocol: NCCL's choice (its spelling in ``nccl_name``); channels: what NCCL
    gives the call. time_s: ringtree's prediction; host_s, latency_s, bandwidth_s: its parts
    (the time is their soft maximum, see the module doc). busbw/algbw: nccl-tests' figures for
    that time. nccl_time_s: what NCCL's own tuner predicts for its choice (for comparison;
    NaN for point-to-point collectives, which its tuner does not price).
    """

    collective: Collective
    size_bytes: int
    n_ranks: int
    nodes: int
    algorithm: str
    protocol: str
    channels: int
    time_s: float
    host_s: float
    latency_s: float
    bandwidth_s: float
    busbw_Bps: float
    nccl_time_s: float

    @property
    def algbw_Bps(self) -> float:
        """nccl-tests' algorithm bandwidth: the buffer size over the time."""
        return self.size_bytes / self.time_s if self.time_s > 0 else 0.0

    @property
    def nccl_name(self) -> str:
        """``Ring/LL128``, as NCCL's logs write it."""
        return f"{k.NCCL_NAMES[self.algorithm]}/{k.NCCL_NAMES[self.protocol]}"

    def record(self) -> dict[str, Any]:
        """Plain data (``ringtree cost --cluster ... --json`` rows)."""
        return {
            "collective": self.collective.value, "size_bytes": self.size_bytes,
            "n_ranks": self.n_ranks, "nodes": self.nodes, "time_s": self.time_s,
            "algbw_gbps": self.algbw_Bps / 1e9, "busbw_gbps": self.busbw_Bps / 1e9,
            "algorithm": self.algorithm, "protocol": self.protocol, "channels": self.channels,
            "nccl": self.nccl_name, "host_s": self.host_s, "latency_s": self.latency_s,
            "bandwidth_s": self.bandwidth_s,
            "nccl_tuner_time_s": None if math.isnan(self.nccl_time_s) else self.nccl_time_s,
        }


def intra_busbw(topo: Topology, p: Params) -> float:
    """A ring's bus bandwidth inside one node, GB/s: NCCL's NVLink figure (or PCIe path)
    times ``nvlink_efficiency``; across the trays of a multi-node NVLink domain the vendor's
    NVLink line rate times ``mnnvl_nvlink_efficiency`` (GB200 NVL72's 72-GPU ring reaches
    835-847 GB/s busbw, above NCCL's 18 x 40.1 = 721.8; one tray's 4 GPUs 680)."""
    from ringtree.cost.nccl.topology import intra_bandwidth

    c = topo.cluster
    if c.mnnvl and topo.gpus_per_node > c.host_gpus and topo.ring.intra_hw == "nvlink":
        return c.gpu.nvlink_links * c.gpu.nvlink_GBps_per_link * p.mnnvl_nvlink_efficiency
    total, _ = intra_bandwidth(c)
    return total * p.nvlink_efficiency


def net_busbw(topo: Topology, p: Params, nics: int | None = None) -> float:
    """A ring's bus bandwidth bound by the network, GB/s: the NICs its channels cross per
    node (the job's, at most one per search channel: a 72-GPU node's 16 channels reach 16 of
    its 72 NICs) times their line rate times the network's efficiency (every ring crosses
    each node once per channel, so this does not shrink with the node count); ``nics``:
    another algorithm's NICs instead (an NVLS tree's: its heads' own)."""
    c = topo.cluster
    used = min(topo.nics, topo.ring.channels) if nics is None else nics
    return used * c.nic_GBps * p.efficiency(c.network)


def nvls_head_nics(topo: Topology) -> int:
    """The NICs an NVLS tree's heads own per node: each GPU's share of the node's NICs, for
    every head (8 heads of 8 H100s with 8 NICs: 8; 32 heads of a 72-GPU NVL72 rack: 32)."""
    heads = topo.nvls.channels if topo.nvls else topo.gpus_per_node
    return -(-topo.nics * heads // topo.gpus_per_node)


def nvls_chunk_bytes(nbytes: int, topo: Topology, settings: tuner.Settings) -> int:
    """NVLS's chunk for a call (src/enqueue.cc, calcCollChunking): NCCL_NVLS_CHUNKSIZE
    (128 KiB), at most 64, 32, 16 KiB when the call is smaller than 64, 8, 2 x channels x
    heads x chunk."""
    heads = topo.nvls.channels if topo.nvls else topo.gpus_per_node
    ops = tuner.nvls_channels(topo) * heads
    chunk = settings.nvls_chunk
    for times, cap in ((64, 64 * 1024), (8, 32 * 1024), (2, 16 * 1024)):
        if nbytes < times * ops * chunk and chunk > cap:
            chunk = cap
    return chunk


#: Payload of one step of a connection's buffer, by protocol (docs/nccl-tuning-notes.md 2.5):
#: LL half of its 64 KiB step, LL128 15/16 of 614,400 B, Simple 512 KiB
STEP_PAYLOAD = {"ll": 32 * 1024, "ll128": 576_000, "simple": 512 * 1024}


def tree_chunk_bytes(entry: tuner.Entry, nbytes: int, topo: Topology, channels: int,
                     settings: tuner.Settings) -> int:
    """The chunk a tree pipelines (``calcCollChunking``, src/enqueue.cc): one step's payload;
    LL128 halves it (to 128 KiB, then to 32 KiB) while the call has fewer than ``64 s / ppn``
    (then ``16 s / ppn``) chunks per channel, ``s = 1 + log2 nodes + ppn / 10``; an NVLS tree
    starts from the NVLS tree's largest chunk and takes at most 256..32 KiB as the call has
    fewer than 32, 16, 4, 1 chunks per head and channel."""
    ch = max(channels, 1)
    if entry.algorithm == "nvls_tree":
        heads = topo.nvls.channels if topo.nvls else topo.gpus_per_node
        ops = ch * heads
        cap = settings.nvlstree_max_chunk or (64 * 1024 if topo.nodes >= 4 else settings.nvls_chunk)
        chunk = min(settings.nvls_chunk, cap)
        for times, cap in ((32, 256 * 1024), (16, 128 * 1024), (4, 64 * 1024), (1, 32 * 1024)):
            if nbytes < times * ops * chunk and chunk > cap:
                chunk = cap
        return chunk
    chunk = STEP_PAYLOAD[entry.protocol]
    if entry.protocol == "ll128":
        ppn = topo.gpus_per_node
        s = 1 + int(math.log2(topo.nodes)) + 0.1 * ppn
        while nbytes // (ch * chunk) < s * 64 / ppn and chunk > 128 * 1024:
            chunk //= 2
        while nbytes // (ch * chunk) < s * 16 / ppn and chunk > 32 * 1024:
            chunk //= 2
    return chunk


def smooth_chunk_bytes(entry: tuner.Entry, collective: Collective, nbytes: int, topo: Topology,
                       settings: tuner.Settings) -> float:
    """NVLS's (or an NVLS tree's) chunk for a call, made continuous in the size: NCCL's chunk
    (:func:`nvls_chunk_bytes`, :func:`tree_chunk_bytes`) is a step function of the size, so
    a model whose efficiency follows it exactly makes a call one byte past a step ~10 %
    faster than the one before. Here the chunk runs log-linearly in the size from each size
    where NCCL's chunk grows to the next (from its smallest, 8x below the first step; NCCL's
    largest above the last): it meets NCCL's at every step and the time never falls as the
    size grows."""

    def chunk(size: int) -> int:
        if entry.algorithm == "nvls_tree":
            ch = tuner.channels_used(entry, collective, size, topo)
            return tree_chunk_bytes(entry, size, topo, ch, settings)
        return nvls_chunk_bytes(size, topo, settings)

    knots = _steps_of(chunk)
    if knots:  # from NCCL's smallest chunk, 8x below its first step (NVLS's steps: 8x, 16x)
        knots.insert(0, (max(1, knots[0][0] // 8), chunk(1)))
    lo = max((kn for kn in knots if kn[0] <= nbytes), default=None)
    hi = min((kn for kn in knots if kn[0] > nbytes), default=None)
    if lo is None or hi is None:
        return float(chunk(nbytes))
    f = math.log(nbytes / lo[0]) / math.log(hi[0] / lo[0])
    return lo[1] * (hi[1] / lo[1]) ** f


def _steps_of(chunk: Callable[[int], int]) -> list[tuple[int, int]]:
    """``(size, chunk)`` at each size from 1 B to 2**50 B where the non-decreasing step
    function ``chunk`` takes a new value (bisection on powers of two, then on bytes)."""
    out: list[tuple[int, int]] = []
    lo, c_lo = 1, chunk(1)
    for e in range(1, 51):
        hi = 1 << e
        c_hi = chunk(hi)
        if c_hi != c_lo:
            a, b = lo, hi
            while b - a > 1:
                m = (a + b) // 2
                a, b = (m, b) if chunk(m) == c_lo else (a, m)
            out.append((b, chunk(b)))
        lo, c_lo = hi, c_hi
    return out


def tree_fill_us(entry: tuner.Entry, size: int, topo: Topology, bus_GBps: float,
                 channels: int, settings: tuner.Settings) -> float:
    """The time a pipelined tree needs to fill: every hop but the last waits for a chunk
    (one step's payload, or the channel's whole share when smaller) before passing it on;
    a ring's steps carry S/N each, so its formula already holds this. Depth in hops: up and
    down the tree, ``2 ((GPUs per node - 1) + log2 nodes)`` (NCCL's own count of tree
    latencies), for NVLS trees ``2 log2 nodes``; the chunk is :func:`tree_chunk_bytes`."""
    levels = int(math.log2(topo.nodes)) if topo.nodes > 1 else 0
    if entry.algorithm == "tree":
        depth = 2 * ((topo.gpus_per_node - 1) + levels)
    elif entry.algorithm == "nvls_tree":
        depth = 2 * levels
    else:
        return 0.0
    if depth <= 1 or bus_GBps <= 0:
        return 0.0
    chunk = min(tree_chunk_bytes(entry, size, topo, channels, settings), size / max(channels, 1))
    per_channel = bus_GBps / max(channels, 1)
    return (depth - 1) * chunk / (1000.0 * per_channel)


def busbw(entry: tuner.Entry, collective: Collective, nbytes: int, topo: Topology,
          settings: tuner.Settings, p: Params) -> float:
    """The bus bandwidth (GB/s) the chosen algorithm and protocol reach (module doc)."""
    n, nodes = topo.n_ranks, topo.nodes
    intra = intra_busbw(topo, p)
    net = net_busbw(topo, p) if nodes > 1 else float("inf")
    a, proto = entry.algorithm, entry.protocol
    own = tuner.bandwidth(collective, a, proto, topo, settings.version) * bus_factor(collective, n)
    if a in ("nvls", "nvls_tree"):
        bw = own
        c = smooth_chunk_bytes(entry, collective, nbytes, topo, settings)
        c0 = p.nvls_chunk_overhead_bytes
        bw *= min(1.0, (c / (c + c0)) / ((128 * 1024) / (128 * 1024 + c0)))
        if a == "nvls_tree":
            heads = net_busbw(topo, p, nvls_head_nics(topo))
            bw = min(bw, 2 * heads if nodes == 2 else heads)
        return bw
    if a == "ring":
        bw = min(intra, net) if topo.gpus_per_node > 1 else net
    elif a == "tree":
        bw = min(intra, 2 * net if nodes == 2 else net)
        if nodes > 2:  # NCCL's per-channel tree cap beyond 2 nodes (perChMaxTreeBw, measured)
            bw = min(bw, topo.tree.channels * k.PER_CH_MAX_TREE_BW[topo.arch][2])
    else:  # CollNet, PAT: NCCL's own figure
        return own
    if proto == "ll128":
        bw *= k.LL128_FACTOR * (7 / 9 if a == "tree" and nodes == 1 else 1.0)
    elif proto == "ll":
        bw = bw * 0.5 if a == "ring" else bw / k.TREE_LL_DIVISOR
        if nodes == 1:
            bw = min(bw, k.LL_MAX_BW[topo.arch][0])
    return bw


def latency_us(entry: tuner.Entry, collective: Collective, topo: Topology, p: Params) -> float:
    """NCCL's latency of the choice, with its intra-node terms times ``intra_latency_scale``
    (and the LL128, Simple and NVLS scales), each network step longer by what the network's hop
    latency adds to InfiniBand's (NCCL's tree/LL figure, 5.0 us), plus ``kernel_us``."""
    c = topo.cluster
    extra = (c.net_hop_us or p.hop_us(c.network)) - k.HW_LAT["net"]["tree"][0]
    if entry.protocol == "simple":
        nccl_simple = k.HW_LAT["net"]["tree"][2]
        extra = max(extra, p.simple_step_us(c.network) - nccl_simple)
    proto = {"ll128": p.ll128_latency_scale, "simple": p.simple_latency_scale}
    intra = p.intra_latency_scale * proto.get(entry.protocol, 1.0)
    if entry.algorithm.startswith("nvls"):
        intra *= p.nvls_latency_scale
    lat = tuner.latency(collective, entry.algorithm, entry.protocol, topo, intra, extra)
    return p.kernel_us + lat


def predict(
    collective: Collective | str,
    size_bytes: int,
    cluster: Cluster,
    nodes: int = 1,
    *,
    gpus_per_node: int | None = None,
    env: dict[str, str] | None = None,
    params: Params = DEFAULT,
    version: tuple[int, int] | None = None,
) -> NcclCall:
    """NCCL's choice for one call of ``size_bytes`` on ``nodes`` nodes of ``cluster`` and
    ringtree's time for it; ``env``: NCCL_ALGO, NCCL_PROTO, NCCL_NVLS_ENABLE, ... as NCCL
    reads them (RingtreeError on a bad value, or when they leave no algorithm); ``version``:
    the NCCL release (major, minor) whose tuner chooses where releases differ (None: 2.30)."""
    col = Collective.parse(collective)
    topo = topology(cluster, nodes, gpus_per_node)
    settings = tuner.Settings.for_cluster(cluster, env or {}, version)
    return predict_on(col, size_bytes, topo, settings, params)


def predict_on(
    col: Collective, size_bytes: int, topo: Topology, settings: tuner.Settings,
    params: Params = DEFAULT, entries: list[tuner.Entry] | None = None,
) -> NcclCall:
    """:func:`predict` on a topology already worked out (a sweep reuses it)."""
    n = topo.n_ranks
    params = for_cluster(params, topo.cluster, topo.nodes)
    host = topo.cluster.launch_us or params.host_us
    if n == 1:
        return NcclCall(col, size_bytes, 1, topo.nodes, "ring", "simple", 1, host * 1e-6,
                        host * 1e-6, 0.0, 0.0, 0.0, 0.0)
    if col in p2p.P2P_COLLECTIVES:
        return _predict_p2p(col, size_bytes, topo, params, host)
    if col not in tuner.NCCL_COLLECTIVES:
        raise RingtreeError(
            f"NCCL has no {col.value}: torch.distributed's barrier on NCCL is an all-reduce of "
            "one element (price all-reduce --size 4)"
        )
    entry = tuner.choose(col, size_bytes, topo, settings, entries)
    lat = latency_us(entry, col, topo, params)
    bw = busbw(entry, col, size_bytes, topo, settings, params)
    channels = tuner.channels_used(entry, col, size_bytes, topo)
    band = size_bytes * bus_factor(col, n) / (1000.0 * bw) if bw > 0 else 0.0
    band += tree_fill_us(entry, size_bytes, topo, bw, channels, settings)
    # never past the links (bounds.py): NCCL's doubled 2-node tree bandwidth times a fitted
    # efficiency just over 0.5 made aws-g6e's 2-node, 1-GPU tree 7e-8 faster than its NIC
    band = max(band, lower_bound(col, size_bytes, topo).time_s * 1e6)
    q = params.softmax_power
    t_us = (host**q + (lat + band) ** q) ** (1 / q)
    bus = size_bytes * bus_factor(col, n) / (t_us * 1e-6) if t_us > 0 else 0.0
    return NcclCall(
        col, size_bytes, n, topo.nodes, entry.algorithm, entry.protocol, channels, t_us * 1e-6,
        host * 1e-6,
        lat * 1e-6, band * 1e-6, bus, entry.time_us(col, size_bytes, topo) * 1e-6,
    )


def _predict_p2p(col: Collective, size: int, topo: Topology, p: Params, host: float) -> NcclCall:
    """All-to-all, gather, scatter as NCCL's grouped sends and receives (:mod:`.p2p`)."""
    c = topo.cluster
    proto = p2p.protocol(size, topo)
    nvlink_bytes, net_bytes = p2p.bytes_moved(col, size, topo)
    half = 0.5 if proto == "ll" else 1.0  # LL: half of each line is flags
    band = nvlink_bytes / (1000.0 * intra_busbw(topo, p) * half)
    if topo.nodes > 1:
        band = max(band, net_bytes / (1000.0 * net_busbw(topo, p) * half))
    scale = p.intra_latency_scale * p.simple_latency_scale
    lat = p2p.latency_us(topo, c.net_hop_us or p.hop_us(c.network), scale, p.p2p_peer_us)
    q = p.softmax_power
    t_us = (host**q + (lat + band) ** q) ** (1 / q)
    bus = size * bus_factor(col, topo.n_ranks) / (t_us * 1e-6)
    return NcclCall(col, size, topo.n_ranks, topo.nodes, "p2p", proto,
                    tuner.execution_channels(topo), t_us * 1e-6, host * 1e-6, lat * 1e-6,
                    band * 1e-6, bus, math.nan)
