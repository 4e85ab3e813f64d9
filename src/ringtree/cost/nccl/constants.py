"""NCCL's tuning constants, as NCCL 2.27-2.30 ship them (figures carried over, with where).

Read from github.com/NVIDIA/nccl at tags ``v2.27.7-1`` (593de54) and ``v2.30.7-1`` (73cf112),
and where older releases price Blackwell otherwise at ``v2.25.1-1`` and ``v2.26.2-1``;
``tuning.cc`` is ``src/graph/tuning.cc``, ``topo.h`` is ``src/graph/topo.h``. Latencies in
microseconds, bandwidths in GB/s (1 GB/s = 1000 bytes per microsecond), as NCCL writes them.
docs/nccl-tuning-notes.md explains each table; :mod:`ringtree.cost.nccl.tuner` uses them the
way NCCL's tuner does, in ringtree's own code.
"""

from __future__ import annotations

ALGORITHMS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
PROTOCOLS = ("ll", "ll128", "simple")
#: NCCL's spelling of each name (NCCL_ALGO / NCCL_PROTO and its logs)
NCCL_NAMES = {
    "tree": "Tree", "ring": "Ring", "collnet_direct": "CollNetDirect",
    "collnet_chain": "CollNetChain", "nvls": "NVLS", "nvls_tree": "NVLSTree", "pat": "PAT",
    "ll": "LL", "ll128": "LL128", "simple": "Simple", "p2p": "P2P",
}

#: baseLat[algo][proto], us (tuning.cc:134-137 at 2.27.7; PAT's row added in 2.30.7)
BASE_LAT = {
    "tree": (6.8, 14.0, 8.4),
    "ring": (6.6, 14.0, 8.4),
    "collnet_direct": (0.0, 0.0, 0.0),
    "collnet_chain": (0.0, 0.0, 0.0),
    "nvls": (0.0, 0.0, 0.0),
    "nvls_tree": (0.0, 0.0, 0.0),
    "pat": (8.0, 8.0, 8.0),
}

#: hwLat[hw][algo][proto], us per step (tuning.cc:143-156 at 2.27.7; NVLSTree's network
#: latency 14 -> 20.9 and PAT's rows from 2.30.7). hw: nvlink, pci, net.
HW_LAT = {
    "nvlink": {
        "tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4), "collnet_direct": (0.0, 0.0, 3.7),
        "collnet_chain": (0.0, 0.0, 2.8), "nvls": (0.0, 0.0, 25.0),
        "nvls_tree": (0.0, 0.0, 25.0), "pat": (0.0, 0.0, 4.0),
    },
    "pci": {
        "tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7), "collnet_direct": (0.0, 0.0, 3.7),
        "collnet_chain": (0.0, 0.0, 2.8), "nvls": (0.0, 0.0, 0.0), "nvls_tree": (0.0, 0.0, 0.0),
        "pat": (0.0, 0.0, 4.0),
    },
    "net": {
        "tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0), "collnet_direct": (0.0, 0.0, 31.0),
        "collnet_chain": (0.0, 0.0, 30.0), "nvls": (0.0, 0.0, 18.0),
        "nvls_tree": (0.0, 0.0, 20.9), "pat": (0.0, 0.0, 14.0),
    },
}

#: Per-architecture caps, columns for 1 node / 2 nodes / more (tuning.cc:165-189 at 2.27.7;
#: Blackwell rows and perChMaxNVLSTreeBw from 2.30.7). llMaxBw: the whole LL operation's bus
#: bandwidth; the others per channel. On several nodes NCCL picks the LL row by CPU instead
#: (row 0 Intel, row 1 AMD).
LL_MAX_BW = {
    "volta": (39.0, 39.0, 20.4), "ampere": (87.7, 22.5, 19.0),
    "hopper": (141.0, 45.0, 35.0), "blackwell": (2 * 141.0, 2 * 45.0, 2 * 35.0),
}
LL_MAX_BW_BY_CPU = {"intel": LL_MAX_BW["volta"], "amd": LL_MAX_BW["ampere"]}
PER_CH_MAX_RING_LL128_BW = {
    "volta": (20.0,) * 3, "ampere": (20.0,) * 3, "hopper": (36.7,) * 3, "blackwell": (40.0,) * 3,
}
PER_CH_MAX_TREE_LL128_BW = {
    "volta": (20.0,) * 3, "ampere": (20.0,) * 3, "hopper": (36.7, 36.7, 29.0),
    "blackwell": (55.6, 31.67, 20.0),
}
PER_CH_MAX_TREE_BW = {
    "volta": (26.5, 18.5, 10.0), "ampere": (24.0, 23.6, 17.8), "hopper": (38.7, 41.4, 36.0),
    "blackwell": (70.0, 42.8, 24.0),
}
#: Blackwell's rows before NCCL 2.28, twice Hopper's (tuning.cc:158-175 at 2.25.1, :172-189 at
#: 2.27.7): per-channel caps of ring LL128, tree LL128 and tree. 2.28 put in the rows above
#: ("Update tuning data for ... GB200-NV72", release notes 2.28.3): a tree channel beyond 2
#: nodes 72 -> 24 GB/s.
BLACKWELL_CAPS_BEFORE_2_28 = {
    "ring_ll128": (2 * 36.7,) * 3, "tree_ll128": (2 * 36.7, 2 * 36.7, 2 * 29.0),
    "tree": (2 * 38.7, 2 * 41.4, 2 * 36.0),
}
BLACKWELL_CAPS_SINCE = (2, 28)
#: LL128 to a NIC the GPU reaches through its CPU over C2C (GB200's Grace: NCCL's P2C path)
#: runs from NCCL 2.27 unless NCCL_LL128_C2C=0 (tuning.cc:525-529 at 2.30.7); before, that path
#: is PHB, past PXN, so LL128 stays off across nodes (tuning.cc:429 at 2.26.2; release notes
#: 2.27.3: "Add support for P2C (PXN over C2C) and the LL128 protocol")
LL128_OVER_C2C_SINCE = (2, 27)
PER_CH_MAX_NVLS_TREE_BW = {"hopper": (0.0, 57.7, 45.5), "blackwell": (0.0, 96.0, 80.0)}
#: NVLS efficiency of the switch reduction (tuning.cc:139-144 at 2.30.7)
NVLS_EFFICIENCY = {"hopper": 0.85, "blackwell": 0.74}

#: Net post overhead added per network step, us: 1.0 on Intel, 2.0 on AMD (tuning.cc:202-209)
NET_OVERHEAD = {"intel": 1.0, "amd": 2.0, "arm": 1.0, "grace": 1.0}

#: Ring LL128 and Tree factors of the bus bandwidth (tuning.cc:279-298): 120/128 ~ 0.92
LL128_FACTOR = 0.92
TREE_LL_DIVISOR = 3.8
PAT_FACTOR = 0.75

#: treeCorrectionFactor[proto][log2(bytes / 64)] for Tree AllReduce, 64 B .. 256 MiB
#: (tuning.cc:555-559 at 2.27.7)
TREE_CORRECTION = {
    "ll": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0,
           1.0, 1.0, 1.0),
    "ll128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9,
              .9, .9, 1.0, 1.0),
    "simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7,
               .8, .9, .9),
}
#: Ring Simple AllReduce across nodes: latency x1.4 ("plateau effect"; x1.9 before SM80)
RING_PLATEAU_FACTOR = 1.4

#: Candidate per-channel speeds of NCCL's topology search, GB/s (src/graph/search.cc:952-963)
SEARCH_SPEEDS_INTRA = {
    "volta": (40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3),
    "ampere": (40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3),
    "hopper": (60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3),
    "blackwell": (90, 80, 70, 60, 50, 40, 30, 24, 20, 19, 18),
}
SEARCH_SPEEDS_NET = {
    "volta": (48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4, 1.2, 0.24, 0.12),
    "ampere": (48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4, 1.2, 0.24, 0.12),
    "hopper": (48, 45, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12),
    "blackwell": (96, 48, 45.1, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24,
                  0.12),
}
#: Most search channels of a ring graph (MAXCHANNELS/2; device.h:87); NVLS heads per arch
#: (NVLS_NCHANNELS_SM90, _SM100; src/transport/nvls.cc:147-149)
MAX_SEARCH_CHANNELS = 32
NVLS_CHANNELS = {"hopper": 16, "blackwell": 32}
#: Blackwell inside one NVLink domain (one node): NVLS_NCHANNELS_SM100_NVL (src/transport/nvls.cc)
NVLS_CHANNELS_ONE_NODE = {"blackwell": 24}
#: Most NVLS heads (NCCL_MAX_NVLS_ARITY, src/include/device.h:206 at 2.27.7, :213 at 2.30.7):
#: the NVLS search keeps min(32, GPUs) channels, one head each (src/graph/search.cc:1127), and
#: NVLS runs only all-reduce when a node has more local ranks (src/enqueue.cc:2005 at 2.30.7)
MAX_NVLS_ARITY = 32
#: CollNet (Direct and Chain) runs only with at most 8 local ranks (NCCL_MAX_DIRECT_ARITY + 1,
#: src/enqueue.cc:2000-2003 at 2.30.7)
MAX_COLLNET_LOCAL_RANKS = 8

#: Bytes per thread below which NCCL uses fewer channels (src/include/comm.h:38-40): LL, LL128,
#: Simple; Ring LL multiplies by nRanks. Threads per channel: LL 512, LL128 640, Simple 512.
THREAD_THRESHOLD = {"ll": 8, "ll128": 8, "simple": 64}
THREADS = {"ll": 512, "ll128": 640, "simple": 512}
