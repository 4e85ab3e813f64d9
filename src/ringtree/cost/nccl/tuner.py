"""NCCL's tuner, in ringtree's words: per algorithm x protocol, the latency and bandwidth NCCL
assigns on a topology, the time it predicts for a size, what is enabled, and its choice.

NCCL (``src/graph/tuning.cc``, ``src/enqueue.cc``) computes at initialisation a latency
``lat`` (us) and an algorithm bandwidth ``bw`` (GB/s) for every (collective, algorithm,
protocol) and, per call, predicts ``lat + bytes / (1000 bw)`` (us) and runs the cheapest
enabled pair. This module follows the same steps (docs/nccl-tuning-notes.md sections 1-2, with
NCCL 2.30's NVLS model): per-channel bandwidth from the graph (inside a node on one or two
nodes, between nodes beyond), times the channels, capped per protocol and architecture; ring
latency per step on the intra- or inter-node hardware, tree latency per level; the tree's
correction by size and the ring's multi-node plateau factor. ``NCCL_ALGO`` and ``NCCL_PROTO``
act as in NCCL 2.24+ (``[collective:]list`` entries separated by ``;``, a leading ``^``
excluding the names), ``NCCL_NVLS_ENABLE=0`` turns NVLS off, ``NCCL_COLLNET_ENABLE=1`` turns
in-network reduction on where the network has it (SHARP), ``NCCL_PAT_ENABLE=0`` turns PAT off,
``NCCL_LL128_C2C=0`` keeps LL128 off the NICs a GPU reaches over C2C. The tables are NCCL
2.30's; where an older release prices Blackwell otherwise (its per-channel caps before 2.28, no
LL128 over C2C before 2.27) :class:`Settings` ``version`` selects that release's.

These are NCCL's own predictions, used for its choice. What a call then takes is
:mod:`ringtree.cost.nccl.timing`'s business.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ringtree.collectives import Collective
from ringtree.cost.clusters import Cluster
from ringtree.cost.nccl import constants as k
from ringtree.cost.nccl.topology import Graph, Topology
from ringtree.errors import RingtreeError

NCCL_COLLECTIVES = {
    Collective.BROADCAST: "broadcast", Collective.REDUCE: "reduce",
    Collective.ALL_GATHER: "allgather", Collective.REDUCE_SCATTER: "reducescatter",
    Collective.ALL_REDUCE: "allreduce",
}
_ALGO_BY_NCCL = {k.NCCL_NAMES[a].lower(): a for a in k.ALGORITHMS}
_PROTO_BY_NCCL = {k.NCCL_NAMES[p].lower(): p for p in k.PROTOCOLS}


@dataclass(frozen=True)
class Entry:
    """NCCL's figures for one algorithm x protocol: latency (us), algorithm bandwidth (GB/s,
    0 when NCCL disables the pair), and its graph."""

    algorithm: str
    protocol: str
    latency_us: float
    bw_GBps: float
    graph: Graph

    def time_us(self, collective: Collective, nbytes: int, topo: Topology) -> float:
        """NCCL's predicted time for ``nbytes`` (``ncclTopoGetAlgoTime``), inf if disabled."""
        if self.bw_GBps <= 0:
            return math.inf
        bw, lat = self.bw_GBps, self.latency_us
        c = topo.cluster
        corrected = self.algorithm == "tree" or (  # NCCL 2.30: NVLS trees on Blackwell + x86
            self.algorithm == "nvls_tree" and c.gpu.sm >= 100 and c.cpu in ("intel", "amd")
        )
        if collective is Collective.ALL_REDUCE and corrected:
            i = int(math.log2(nbytes >> 6)) if nbytes >= 64 else -1
            if 0 <= i < len(k.TREE_CORRECTION[self.protocol]):
                bw *= k.TREE_CORRECTION[self.protocol][i]
        plateau = nbytes / (execution_channels(topo) * topo.n_ranks) >= 64
        if (collective is Collective.ALL_REDUCE and self.algorithm == "ring"
                and self.protocol == "simple" and topo.nodes > 1 and plateau):
            lat *= k.RING_PLATEAU_FACTOR if topo.cluster.gpu.sm >= 80 else 1.9
        return lat + nbytes / (1000.0 * bw)


def execution_channels(topo: Topology) -> int:
    """The channels NCCL runs (twice the search's, twice again on SM90+ across nodes when the
    ring's per-channel bandwidth exceeds 45 GB/s and there are fewer than 16; at most 64)."""
    ch = 2 * min(topo.ring.channels, topo.tree.channels)
    if topo.cluster.gpu.sm >= 90 and topo.nodes > 1 and topo.ring.bw_intra > 45.0 and ch < 16:
        ch *= 2
    return min(ch, 64)


def _steps(collective: Collective, n: int) -> int:
    if collective is Collective.ALL_REDUCE:
        return 2 * (n - 1)
    if collective in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER):
        return n - 1
    return n


def _graph(algorithm: str, topo: Topology) -> Graph | None:
    if algorithm in ("nvls", "nvls_tree"):
        return topo.nvls
    return topo.tree if algorithm in ("tree", "pat") else topo.ring


def _caps(topo: Topology, version: tuple[int, int] | None) -> tuple[float, float, float]:
    """NCCL's per-channel caps (ring LL128, tree LL128, tree) for the topology's architecture
    and node column, as release ``version`` has them (None: 2.30)."""
    col = topo.node_column
    if topo.arch == "blackwell" and version is not None and version < k.BLACKWELL_CAPS_SINCE:
        old = k.BLACKWELL_CAPS_BEFORE_2_28
        return old["ring_ll128"][col], old["tree_ll128"][col], old["tree"][col]
    arch = topo.arch
    return (k.PER_CH_MAX_RING_LL128_BW[arch][col], k.PER_CH_MAX_TREE_LL128_BW[arch][col],
            k.PER_CH_MAX_TREE_BW[arch][col])


def bandwidth(collective: Collective, algorithm: str, protocol: str, topo: Topology,
              version: tuple[int, int] | None = None) -> float:
    """NCCL's algorithm bandwidth, GB/s (0: disabled), as release ``version`` prices it
    (None: 2.30); see the module doc."""
    g = _graph(algorithm, topo)
    if g is None or g.channels < 1:
        return 0.0
    arch, col_i, nodes, n = topo.arch, topo.node_column, topo.nodes, topo.n_ranks
    ppn = topo.gpus_per_node
    if algorithm in ("nvls", "nvls_tree"):
        if g.channels < 2 or arch not in k.NVLS_EFFICIENCY:
            return 0.0
        intra = g.bw_intra * k.NVLS_EFFICIENCY[arch] * (g.channels - 1) / g.channels
        if collective is Collective.ALL_REDUCE:
            intra *= 2
        else:
            intra *= (ppn - 1) / ppn
        inter = g.bw_inter * (2 if algorithm == "nvls_tree" and nodes <= 2 else 1)
        bw = min(intra, inter)
        if algorithm == "nvls_tree":
            bw = min(bw, k.PER_CH_MAX_NVLS_TREE_BW[arch][col_i])
    elif algorithm.startswith("collnet"):
        bw = g.bw_intra
    else:
        bw = g.bw_intra if nodes <= 2 else g.bw_inter
    bus = g.channels * bw
    ring_ll128, tree_ll128, tree = _caps(topo, version)
    if algorithm == "ring" and protocol == "ll":
        bus = min(_ll_max(topo), 0.5 * bus)
    elif algorithm == "ring" and protocol == "ll128":
        bus = min(k.LL128_FACTOR * bus, g.channels * ring_ll128)
    elif algorithm == "tree" and collective is Collective.ALL_REDUCE:
        bus = min(k.LL128_FACTOR * bus, g.channels * tree)
        if protocol == "ll":
            bus = min(bus / k.TREE_LL_DIVISOR, _ll_max(topo))
        elif protocol == "ll128":
            factor = 7 / 9 if nodes == 1 else 120 / 128
            bus = min(bus * factor, g.channels * tree_ll128)
    elif algorithm == "pat":
        bus *= k.PAT_FACTOR
    elif algorithm == "collnet_direct":
        f = ppn / max(g.channels, 1)
        f -= (f - 1) / 2
        bus = bus / max(f, 1.0) * (0.85 if topo.cluster.gpu.sm >= 90 else 1.0)
    if algorithm in ("ring", "nvls", "nvls_tree"):
        return bus * n / _steps(collective, n)
    if collective in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER):
        return bus
    return bus * 0.5


def _ll_max(topo: Topology) -> float:
    if topo.nodes == 1:
        return k.LL_MAX_BW[topo.arch][0]
    row = k.LL_MAX_BW_BY_CPU["amd" if topo.cluster.cpu == "amd" else "intel"]
    return row[topo.node_column]


def latency(
    collective: Collective, algorithm: str, protocol: str, topo: Topology,
    intra_scale: float = 1.0, net_extra_us: float = 0.0,
) -> float:
    """NCCL's latency of one call, us (see the module doc). ``intra_scale`` multiplies the
    base and intra-node terms; ``net_extra_us`` is added to each network step (0, 1: NCCL's
    own)."""
    p = k.PROTOCOLS.index(protocol)
    g = _graph(algorithm, topo) or topo.ring
    nodes, n, ppn = topo.nodes, topo.n_ranks, topo.gpus_per_node
    intra_hw = g.intra_hw
    intra = k.HW_LAT[intra_hw][algorithm][p] * intra_scale
    inter = k.HW_LAT["net"]["tree" if ppn == 1 else algorithm][p] + net_extra_us
    lat = k.BASE_LAT[algorithm][p] * intra_scale
    if algorithm == "ring":
        steps = _steps(collective, n)
        if collective in (Collective.BROADCAST, Collective.REDUCE):
            per = k.HW_LAT["net" if nodes > 1 else intra_hw]["tree" if protocol == "simple"
                                                             else "ring"][p]
            return lat + steps * (per + net_extra_us if nodes > 1 else per * intra_scale)
        n_inter = 0 if nodes == 1 else (nodes - 1) * (2 if collective is
                                                      Collective.ALL_REDUCE else 1)
        overhead = 0.0
        if nodes > 1:
            overhead = k.NET_OVERHEAD.get(topo.cluster.cpu, 1.0) * (3 if protocol == "simple"
                                                                    else 1)
        return lat + (steps - n_inter) * max(intra, overhead) + n_inter * inter
    levels = int(math.log2(nodes)) if nodes > 1 else 0
    if algorithm == "tree":
        return lat + 2 * ((ppn - 1) * intra + levels * inter)
    if algorithm == "collnet_direct":
        return lat + 2 * (min(1, ppn - 1) * intra + (ppn - 1) * 0.4 * intra_scale) + inter
    if algorithm == "collnet_chain":
        return lat + 2 * (ppn - 1) * intra + inter
    if algorithm == "nvls":
        return intra + (inter if nodes > 1 else 0.0)
    if algorithm == "nvls_tree":
        return intra + 2 * levels * inter
    return 8.0 * intra_scale + levels * inter / 3.5 + 2.8 * n * intra_scale  # PAT


@dataclass(frozen=True)
class Settings:
    """What the environment enables: per collective, the algorithms and protocols allowed
    (``None``: NCCL's defaults), NVLS, CollNet, PAT and LL128-over-C2C switches, NVLS's chunk
    sizes, the raw values, and the NCCL release (major, minor) whose tuner to follow where
    releases differ (``None``: 2.30)."""

    algos: dict[str, frozenset[str]] | None
    protos: dict[str, frozenset[str]] | None
    nvls: bool
    collnet: bool
    pat: int
    raw: dict[str, str]
    #: NCCL_NVLS_CHUNKSIZE (default 128 KiB) and NCCL_NVLSTREE_MAX_CHUNKSIZE (default: 64 KiB
    #: from 4 nodes up, else the NVLS chunk), src/transport/nvls.cc:160-161, 227-231
    nvls_chunk: int = 128 * 1024
    nvlstree_max_chunk: int | None = None
    ll128_c2c: bool = True
    version: tuple[int, int] | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str], version: tuple[int, int] | None = None
                 ) -> Settings:
        """Parse NCCL_ALGO, NCCL_PROTO, NCCL_NVLS_ENABLE, NCCL_COLLNET_ENABLE, NCCL_PAT_ENABLE,
        NCCL_LL128_C2C, NCCL_NVLS_CHUNKSIZE, NCCL_NVLSTREE_MAX_CHUNKSIZE (RingtreeError naming
        a bad value) for NCCL release ``version`` (None: 2.30)."""
        names = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_NVLS_ENABLE", "NCCL_COLLNET_ENABLE",
                 "NCCL_PAT_ENABLE", "NCCL_LL128_C2C", "NCCL_NVLS_CHUNKSIZE",
                 "NCCL_NVLSTREE_MAX_CHUNKSIZE")
        raw = {v: env[v] for v in names if env.get(v)}
        return cls(
            algos=_parse_list(raw["NCCL_ALGO"], _ALGO_BY_NCCL, "NCCL_ALGO")
            if "NCCL_ALGO" in raw else None,
            protos=_parse_list(raw["NCCL_PROTO"], _PROTO_BY_NCCL, "NCCL_PROTO")
            if "NCCL_PROTO" in raw else None,
            nvls=_switch(raw, "NCCL_NVLS_ENABLE", True),
            collnet=_switch(raw, "NCCL_COLLNET_ENABLE", False),
            pat=int(raw.get("NCCL_PAT_ENABLE", "2").strip())
            if _switch(raw, "NCCL_PAT_ENABLE", True) else 0,
            raw=raw,
            nvls_chunk=_bytes(raw, "NCCL_NVLS_CHUNKSIZE") or 128 * 1024,
            nvlstree_max_chunk=_bytes(raw, "NCCL_NVLSTREE_MAX_CHUNKSIZE"),
            ll128_c2c=_switch(raw, "NCCL_LL128_C2C", True)
            and (version is None or version >= k.LL128_OVER_C2C_SINCE),
            version=version,
        )

    @classmethod
    def for_cluster(cls, cluster: Cluster, env: Mapping[str, str],
                    version: tuple[int, int] | None = None) -> Settings:
        """:meth:`from_env` on the cluster's platform settings (``nccl_env``: what its network
        plugin sets) overridden by ``env``'s NCCL_* values, as NCCL ``version`` would see them."""
        merged = dict(cluster.nccl_env)
        merged.update({k: v for k, v in env.items() if k.startswith("NCCL_")})
        return cls.from_env(merged, version)


def _bytes(raw: dict[str, str], name: str) -> int | None:
    if name not in raw:
        return None
    v = raw[name].strip()
    if not v.isdigit() or not 0 < int(v) <= 1 << 30:
        raise RingtreeError(f"{name}={v!r} is not valid: expected a size in bytes, 1..2**30")
    return int(v)


def _switch(raw: dict[str, str], name: str, default: bool) -> bool:
    if name not in raw:
        return default
    v = raw[name].strip()
    if v not in ("0", "1", "2"):
        raise RingtreeError(f"{name}={v!r} is not valid: expected 0, 1 or 2")
    return v != "0"


def _parse_list(text: str, names: dict[str, str], var: str) -> dict[str, frozenset[str]]:
    """NCCL's ``[collective:][^]name,name;collective:...`` syntax (NCCL 2.24+): per NCCL
    collective name, the set allowed; the unprefixed first entry applies to all."""
    every = frozenset(names.values())
    out: dict[str, frozenset[str]] = {}
    for i, entry in enumerate(e.strip() for e in text.split(";")):
        if not entry:
            continue
        coll, sep, body = entry.partition(":")
        if not sep:
            coll, body = "", entry
            if i:
                raise RingtreeError(f"{var}={text!r}: only the first entry may omit the "
                                    "collective (e.g. 'ring;allreduce:tree')")
        coll = coll.strip().lower()
        if coll and coll not in NCCL_COLLECTIVES.values():
            raise RingtreeError(f"{var}={text!r}: unknown collective {coll!r}: expected "
                                f"{', '.join(NCCL_COLLECTIVES.values())}")
        body = body.strip()
        negate = body.startswith("^")
        items = [x.strip().lower() for x in body.lstrip("^").split(",") if x.strip()]
        bad = [x for x in items if x not in names]
        if bad or not (items or negate):  # a bare "^" excludes nothing, as in NCCL
            known = ", ".join(k.NCCL_NAMES[v] for v in sorted(every))
            raise RingtreeError(f"{var}={text!r}: unknown name {bad[0] if bad else body!r}: "
                                f"expected some of {known}")
        chosen = frozenset(names[x] for x in items)
        allowed = every - chosen if negate else chosen
        for c in [coll] if coll else NCCL_COLLECTIVES.values():
            out[c] = allowed
    return out


def nic_over_c2c(cluster: Cluster) -> bool:
    """Whether a GPU reaches its NICs through its CPU over NVLink-C2C (Grace: GB200, GH200),
    NCCL's P2C path (PHB before 2.27)."""
    return cluster.cpu == "grace"


def enabled(collective: Collective, algorithm: str, protocol: str, topo: Topology,
            env: Settings) -> bool:
    """Whether NCCL would consider this pair (its defaults and the environment's say)."""
    name = NCCL_COLLECTIVES[collective]
    if env.algos is not None and algorithm not in env.algos.get(name, frozenset(k.ALGORITHMS)):
        return False
    named = env.protos is not None and protocol in env.protos.get(name, frozenset())
    if env.protos is not None and protocol not in env.protos.get(name, frozenset(k.PROTOCOLS)):
        return False
    c, nodes = topo.cluster, topo.nodes
    # LL128's default: NVLink inside nodes, SM >= 70, and across nodes no NIC behind a C2C
    # link unless NCCL runs LL128 over C2C (naming it in NCCL_PROTO forces it on)
    c2c_nic = nodes > 1 and nic_over_c2c(c) and not env.ll128_c2c
    if protocol == "ll128" and not named and (topo.ring.intra_hw != "nvlink" or c.gpu.sm < 70
                                             or c2c_nic):
        return False
    if protocol != "simple" and algorithm in ("nvls", "nvls_tree", "pat", "collnet_direct",
                                              "collnet_chain"):
        return False
    if collective in (Collective.BROADCAST, Collective.REDUCE):
        return algorithm == "ring"
    if algorithm in ("nvls", "nvls_tree"):
        if not env.nvls or topo.nvls is None:
            return False
        if collective is not Collective.ALL_REDUCE and topo.gpus_per_node > k.MAX_NVLS_ARITY:
            return False
        if algorithm == "nvls_tree":
            return collective is Collective.ALL_REDUCE and nodes > 1
        return nodes == 1 or (c.sharp and env.collnet)
    if algorithm.startswith("collnet"):
        if not (c.sharp and env.collnet and nodes > 1):
            return False
        if topo.gpus_per_node > k.MAX_COLLNET_LOCAL_RANKS:
            return False
        return algorithm == "collnet_direct" or collective is Collective.ALL_REDUCE
    if algorithm == "pat":  # NCCL_PAT_ENABLE=1 forces it; 2 (default): 1 GPU per node only
        if collective is Collective.ALL_REDUCE or c.gpu.sm < 60 or env.pat == 0:
            return False
        return env.pat == 1 or (topo.gpus_per_node == 1 and nodes > 1)
    if collective in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER):
        return algorithm == "ring"
    return algorithm in ("ring", "tree")


def table(collective: Collective, topo: Topology, env: Settings) -> list[Entry]:
    """Every enabled (algorithm, protocol) with NCCL's latency and bandwidth, in NCCL's order
    (its ties go to the first)."""
    out = []
    for a in k.ALGORITHMS:
        for p in k.PROTOCOLS:
            if not enabled(collective, a, p, topo, env):
                continue
            bw = bandwidth(collective, a, p, topo, env.version)
            if bw > 0:
                g = _graph(a, topo) or topo.ring
                out.append(Entry(a, p, latency(collective, a, p, topo), bw, g))
    return out


def choose(collective: Collective, nbytes: int, topo: Topology, env: Settings,
           entries: list[Entry] | None = None) -> Entry:
    """NCCL's pick for one call of ``nbytes``: the lowest predicted time (first on ties);
    RingtreeError when the environment leaves nothing ("no algorithm/protocol available")."""
    entries = table(collective, topo, env) if entries is None else entries
    if not entries:
        raise RingtreeError(
            f"no algorithm/protocol available for {collective.value} on this cluster with "
            + (", ".join(f"{a}={v}" for a, v in env.raw.items()) or "NCCL's defaults")
        )
    return min(entries, key=lambda e: e.time_us(collective, nbytes, topo))


def nvls_channels(topo: Topology) -> int:
    """The channels NVLS runs (src/transport/nvls.cc): Hopper 16; Blackwell 24 inside one
    NVLink domain, 32 across nodes."""
    if topo.nodes == 1 and topo.arch in k.NVLS_CHANNELS_ONE_NODE:
        return k.NVLS_CHANNELS_ONE_NODE[topo.arch]
    return k.NVLS_CHANNELS.get(topo.arch, 16)


def channels_used(entry: Entry, collective: Collective, nbytes: int, topo: Topology) -> int:
    """The channels NCCL gives one call (``topoGetAlgoInfo``): NVLS its heads' channels;
    ring and tree start from the execution channels and drop one while the call has fewer
    than ``threads x threshold`` bytes per channel."""
    if entry.algorithm in ("nvls", "nvls_tree"):
        return nvls_channels(topo)
    nc = execution_channels(topo)
    threshold = k.THREAD_THRESHOLD[entry.protocol] * k.THREADS[entry.protocol]
    if entry.algorithm == "ring" and entry.protocol == "ll":
        threshold *= topo.n_ranks
    while nc > 1 and nbytes < nc * threshold:
        nc -= 1
    return nc
