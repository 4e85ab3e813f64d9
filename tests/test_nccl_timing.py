"""ringtree's time for NCCL's choice (ringtree.cost.nccl.timing): nccl-tests' arithmetic,
NCCL's chunk sizes (src/enqueue.cc, calcCollChunking), physical bounds, published figures,
and properties over every preset.

Expected values come from nccl-tests' PERFORMANCE.md (busbw = algbw x 2(n-1)/n, (n-1)/n or 1;
algbw = size / time), NCCL's source as docs/nccl-tuning-notes.md quotes it, NCCL's own NVLink
and NIC figures (topo.h: 20.0 GB/s per A100 link, 20.6 per H100 link; a NIC's Gb/s / 8) and
published measurements (NVIDIA/nccl#812: 192 GB/s busbw on DGX A100 8 x HDR; #1455 and
bench/published/h100-single-node-together-nccl-tests.toml: 479 GB/s NVLS, 368 GB/s ring on one
H100 node at 8 GiB) -- never from running the model.
"""

from __future__ import annotations

import math
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringtree.collectives import Collective
from ringtree.cost.clusters import ALIASES, get_cluster, presets
from ringtree.cost.nccl import NcclCall, predict, timing, tuner
from ringtree.cost.nccl.topology import Graph, topology
from ringtree.errors import RingtreeError

AR, AG, RS = Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER
BC, RD = Collective.BROADCAST, Collective.REDUCE
EVERY = (AR, AG, RS, BC, RD)
KiB, MiB, GiB = 2**10, 2**20, 2**30
NAMES = {"tree": "Tree", "ring": "Ring", "collnet_direct": "CollNetDirect",
         "collnet_chain": "CollNetChain", "nvls": "NVLS", "nvls_tree": "NVLSTree", "pat": "PAT",
         "ll": "LL", "ll128": "LL128", "simple": "Simple"}
PRESETS = sorted(k for k in presets() if k not in ALIASES)
NO_ENV = tuner.Settings.from_env({})


def settings_for(cluster, env=None) -> tuner.Settings:
    """What NCCL reads on ``cluster``: its platform's NCCL_* settings, then the user's."""
    return tuner.Settings.for_cluster(cluster, env or {})


# ------------------------------------------------------------------ nccl-tests' arithmetic


@pytest.mark.parametrize("n", [2, 3, 8, 16, 72, 1024])
def test_bus_factor_is_nccl_tests(n):
    assert timing.bus_factor(AR, n) == pytest.approx(2 * (n - 1) / n)
    assert timing.bus_factor(AG, n) == pytest.approx((n - 1) / n)
    assert timing.bus_factor(RS, n) == pytest.approx((n - 1) / n)
    assert timing.bus_factor(BC, n) == 1.0
    assert timing.bus_factor(RD, n) == 1.0


@pytest.mark.parametrize("collective", EVERY)
@pytest.mark.parametrize(("preset", "nodes"), [("dgx-h100", 1), ("dgx-a100", 4)])
def test_algbw_is_size_over_time_and_busbw_scales_it(collective, preset, nodes):
    for size in (8, 12345, 64 * MiB, 8 * GiB):
        call = predict(collective, size, get_cluster(preset), nodes)
        n = call.n_ranks
        assert n == 8 * nodes and call.nodes == nodes and call.size_bytes == size
        assert call.algbw_Bps == pytest.approx(size / call.time_s)
        factor = {AR: 2 * (n - 1) / n, AG: (n - 1) / n, RS: (n - 1) / n}.get(collective, 1.0)
        assert call.busbw_Bps == pytest.approx(call.algbw_Bps * factor)
        r = call.record()
        assert r["algbw_gbps"] == pytest.approx(size / call.time_s / 1e9)
        assert r["busbw_gbps"] == pytest.approx(call.busbw_Bps / 1e9)
        assert r["nccl"] == f"{NAMES[call.algorithm]}/{NAMES[call.protocol]}"
        assert r["time_s"] == call.time_s and r["channels"] == call.channels


def test_one_rank_costs_only_the_launch():
    c = get_cluster("dgx-h100")
    call = predict(AR, 1 * GiB, c, 1, gpus_per_node=1)
    assert call.n_ranks == 1 and call.busbw_Bps == 0.0  # nccl-tests: 2(1-1)/1 = 0
    assert call.time_s == pytest.approx(call.host_s) and call.time_s > 0


def test_predict_takes_any_spelling_and_refuses_nonsense():
    c = get_cluster("dgx-a100")
    assert predict("allreduce", 4096, c).collective is AR
    assert predict("ALL_GATHER", 4096, c).collective is AG
    with pytest.raises(RingtreeError):
        predict("all-to-some", 4096, c)  # (all-to-all is a collective now, not in this model)
    with pytest.raises(RingtreeError):
        predict(AR, 4096, c, 0)
    with pytest.raises(RingtreeError, match="NCCL_ALGO"):
        predict(AR, 4096, c, 2, env={"NCCL_ALGO": "Rnig"})


# ------------------------------------------------------------------ NCCL's chunks


@pytest.mark.parametrize(
    ("size", "chunk"),
    # one H100 node: 16 NVLS channels x 8 heads = 128 concurrent ops; 128 KiB, and at most
    # 64 KiB below 64 x 128 x 128 KiB = 1 GiB, 32 KiB below 8 x 128 x 64 KiB = 64 MiB, 16 KiB
    # below 2 x 128 x 32 KiB = 8 MiB (enqueue.cc)
    [(8 * GiB, 128 * KiB), (GiB, 128 * KiB), (GiB - 1, 64 * KiB), (64 * MiB, 64 * KiB),
     (64 * MiB - 1, 32 * KiB), (8 * MiB, 32 * KiB), (8 * MiB - 1, 16 * KiB), (1, 16 * KiB)],
)
def test_nvls_chunk_halvings(size, chunk):
    topo = topology(get_cluster("dgx-h100"), 1)
    assert timing.nvls_chunk_bytes(size, topo, NO_ENV) == chunk


def entry(algorithm: str, protocol: str) -> tuner.Entry:
    return tuner.Entry(algorithm, protocol, 10.0, 100.0, Graph(8, 48.0, 48.0, "nvlink"))


@pytest.mark.parametrize(
    ("size", "chunk"),
    # 4 x 8 H100, 16 channels: s = 1 + log2(4) + 0.1 x 8 = 3.8; LL128's chunk is 614400 / 16 x
    # 15 = 576000 B; halve while size // (16 x chunk) < 3.8 x 64 / 8 = 30.4 and chunk > 131072,
    # then while < 3.8 x 16 / 8 = 7.6 and chunk > 32768 (enqueue.cc, Tree LL128)
    [(GiB, 576000),  # 1 GiB // 9216000 = 116
     (16 * 576000 * 31, 576000),  # 31 chunks per channel: enough
     (16 * 576000 * 30, 288000),  # 30 < 30.4 -> 288000 (60 per channel)
     (16 * MiB, 72000),  # 1, 3, 7 per channel -> 72000 (14 >= 7.6)
     (MiB, 18000),  # 0 -> 72000, then 0 -> 36000, 1 -> 18000 (no more: 18000 <= 32768)
     (1, 18000)],
)
def test_tree_ll128_chunk_halvings(size, chunk):
    topo = topology(get_cluster("dgx-h100"), 4)
    assert timing.tree_chunk_bytes(entry("tree", "ll128"), size, topo, 16, NO_ENV) == chunk


def test_tree_ll128_on_one_node_uses_its_own_depth():
    # one node, 8 GPUs: s = 1 + 0 + 0.8 = 1.8; thresholds 1.8 x 64 / 8 = 14.4, 1.8 x 16 / 8 = 3.6
    topo = topology(get_cluster("dgx-a100"), 1)
    e = entry("tree", "ll128")
    assert timing.tree_chunk_bytes(e, 24 * 576000 * 15, topo, 24, NO_ENV) == 576000
    assert timing.tree_chunk_bytes(e, 24 * 576000 * 14, topo, 24, NO_ENV) == 288000
    assert timing.tree_chunk_bytes(e, 24 * 72000 * 4, topo, 24, NO_ENV) == 72000
    assert timing.tree_chunk_bytes(e, 24 * 72000 * 3, topo, 24, NO_ENV) == 36000


def test_tree_ll_and_simple_chunks_are_one_step():
    # a step is buffer / 8: LL 64 KiB carrying half data, Simple 512 KiB (enqueue.cc)
    topo = topology(get_cluster("dgx-h100"), 4)
    for size in (1, MiB, GiB):
        assert timing.tree_chunk_bytes(entry("tree", "ll"), size, topo, 16, NO_ENV) == 32 * KiB
        assert timing.tree_chunk_bytes(entry("tree", "simple"), size, topo, 16,
                                       NO_ENV) == 512 * KiB


@pytest.mark.parametrize(
    ("nodes", "size", "chunk"),
    # NVLSTree: 128 KiB (64 KiB from 4 nodes up, NCCL_NVLSTREE_MAX_CHUNKSIZE's default), at
    # most 64 KiB below 4 x ops x chunk, 32 KiB below 1 x ops x chunk; ops = 16 x 8 heads
    [(2, GiB, 128 * KiB), (2, 64 * MiB, 128 * KiB), (2, 64 * MiB - 1, 64 * KiB),
     (2, 8 * MiB, 64 * KiB), (2, 8 * MiB - 1, 32 * KiB), (4, GiB, 64 * KiB),
     (4, 8 * MiB, 64 * KiB), (4, 8 * MiB - 1, 32 * KiB)],
)
def test_nvls_tree_chunks(nodes, size, chunk):
    topo = topology(get_cluster("dgx-h100"), nodes)
    assert timing.tree_chunk_bytes(entry("nvls_tree", "simple"), size, topo, 16,
                                   NO_ENV) == chunk


# ------------------------------------------------------------------ physical sanity

SANITY = [("dgx-a100", 1), ("dgx-a100", 2), ("dgx-h100", 1), ("dgx-h100", 8), ("aws-p5", 2),
          ("pcie-8x-rtx4090", 1), ("pcie-8x-rtx4090", 4)]
EDGES = sorted({x for p in range(35) for x in (2**p - 1, 2**p, 3 * 2**p) if x})


@pytest.mark.parametrize(("preset", "nodes"), SANITY)
def test_time_never_falls_as_the_size_grows_for_a_fixed_choice(preset, nodes):
    c = get_cluster(preset)
    topo = topology(c, nodes)
    s = settings_for(c)
    for col in (AR, AG, BC):
        for e in tuner.table(col, topo, s):
            if e.algorithm.startswith("nvls"):
                continue  # below: NVLS's chunk steps
            last = 0.0
            for size in EDGES:
                t = timing.predict_on(col, size, topo, s, entries=[e]).time_s
                assert t >= last, (col.value, e.algorithm, e.protocol, size)
                last = t


@pytest.mark.parametrize("edge", [8 * MiB, 64 * MiB, GiB])
def test_nvls_time_never_falls_as_the_size_grows(edge):
    c = get_cluster("dgx-h100")
    a = predict(AR, edge - 1, c, 1)
    b = predict(AR, edge, c, 1)
    assert a.algorithm == b.algorithm == "nvls"
    assert b.time_s >= a.time_s


def nccl_bound(call: NcclCall, topo) -> float:
    """The most busbw (GB/s) the path NCCL models can carry for this call: the GPU's NVLink
    (links x NCCL's per-link figure) or PCIe link inside a node, the job's NICs' line rate
    across nodes (twice it for a tree on two nodes, NVIDIA/nccl#946), NCCL's own figure for
    what reduces in a switch (NVLS) or the network (CollNet) and for PAT; across the trays of
    a multi-node NVLink domain the vendor's NVLink line (GB200: 18 x 50 GB/s), which its rings
    exceed NCCL's figure towards (835-847 GB/s measured on 72 GPUs, coreweave/nccl-tests)."""
    c, g = topo.cluster, topo.cluster.gpu
    pcie = {3: 12.0, 4: 24.0, 5: 48.0}[g.pcie_gen] * g.pcie_lanes / 16  # width x speed / 80
    intra = g.nvlink_links * g.nccl_nvlink_bw if c.fabric in ("nvswitch", "nvlink") else pcie
    if c.mnnvl and topo.gpus_per_node > c.host_gpus:
        intra = g.nvlink_links * g.nvlink_GBps_per_link
    line = topo.nics * c.nic_gbps / 8
    tree_net = 2 * line if topo.nodes == 2 else line
    nccl = tuner.bandwidth(call.collective, call.algorithm, call.protocol, topo) * \
        timing.bus_factor(call.collective, call.n_ranks)
    if call.algorithm == "ring":
        return intra if topo.nodes == 1 else (min(intra, line) if topo.gpus_per_node > 1 else line)
    if call.algorithm == "tree":
        return intra if topo.nodes == 1 else min(intra, tree_net)
    if call.algorithm == "nvls_tree":
        return min(nccl, tree_net)
    return nccl


@pytest.mark.parametrize("preset", PRESETS)
def test_busbw_never_above_nccls_bound(preset):
    c = get_cluster(preset)
    for nodes in (1, 2, 4, 16) if c.nics_per_node else (1,):
        topo = topology(c, nodes)
        s = settings_for(c)
        for col in EVERY:
            for size in (4**i for i in range(19)):
                call = timing.predict_on(col, size, topo, s)
                assert call.busbw_Bps / 1e9 <= nccl_bound(call, topo) * (1 + 1e-9), (
                    nodes,
                    col.value,
                    size,
                    call.nccl_name,
                )


def test_dgx_a100_busbw_at_8_gib_holds_from_2_to_16_nodes():
    # a ring crosses each node once per channel: the network bound does not shrink with the
    # node count; NVIDIA measures 192 GB/s on DGX A100 with 8 x HDR (NVIDIA/nccl#812)
    c = get_cluster("dgx-a100")
    busbw = [predict(AR, 8 * GiB, c, n).busbw_Bps / 1e9 for n in (2, 4, 8, 16)]
    assert max(busbw) <= 1.10 * min(busbw)
    assert all(abs(b / 192 - 1) <= 0.10 for b in busbw), busbw


def test_one_dgx_h100_node_at_8_gib():
    c = get_cluster("dgx-h100")
    nvls = predict(AR, 8 * GiB, c, 1)
    # measured 479 GB/s busbw with NVLS (NVIDIA/nccl#1455, together-nccl-tests)
    assert nvls.algorithm == "nvls" and 450 <= nvls.busbw_Bps / 1e9 <= 480
    ring = predict(AR, 8 * GiB, c, 1, env={"NCCL_NVLS_ENABLE": "0"})
    # measured 368 GB/s with NVLS off; NCCL's NVLink figure 18 x 20.6 = 370.8 is the bound
    assert ring.algorithm == "ring" and ring.protocol == "simple"
    assert 350 <= ring.busbw_Bps / 1e9 <= 18 * 20.6


@pytest.mark.parametrize("preset", ["dgx-a100", "dgx-h100", "dgx-b200", "azure-nd-h100-v5"])
def test_small_calls_pick_ll_large_ones_simple(preset):
    c = get_cluster(preset)
    tiny = predict(AR, 8, c, 1)
    assert tiny.protocol == "ll" and tiny.channels == 1
    for nodes in (1, 4):
        assert predict(AR, 8 * GiB, c, nodes).protocol == "simple"
        assert predict(AG, 8 * GiB, c, nodes).protocol == "simple"


def test_a_tree_on_two_nodes_passes_the_nic_rate():
    # on 2 nodes a tree sends each byte over the network once: up to ~2x the NICs' rate
    # (sjeaugey, NVIDIA/nccl#946; AddyLaddy #812); not from 4 nodes on
    c = get_cluster("dgx-a100")
    line = 8 * 200 / 8
    tree = {"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple"}
    two = predict(AR, 8 * GiB, c, 2, env=tree)
    assert (two.algorithm, two.protocol) == ("tree", "simple")
    assert two.busbw_Bps / 1e9 > line
    assert predict(AR, 8 * GiB, c, 4, env=tree).busbw_Bps / 1e9 <= line


def test_a_slower_network_is_never_faster():
    fast, slow = get_cluster("dgx-h100"), get_cluster("gcp-a3")  # 8 x 400G IB; 4 x 200G TCPX
    for size in (MiB, 64 * MiB, 8 * GiB):
        assert predict(AR, size, slow, 4).time_s > predict(AR, size, fast, 4).time_s


def test_restricting_nccl_to_one_pair_runs_that_pair():
    c = get_cluster("dgx-h100")
    for algo, proto in (("Tree", "LL"), ("Ring", "LL128"), ("Tree", "Simple"),
                        ("NVLSTree", "Simple")):
        for size in (8, MiB, 8 * GiB):
            call = predict(AR, size, c, 2, env={"NCCL_ALGO": algo, "NCCL_PROTO": proto})
            assert call.nccl_name == f"{algo}/{proto}"
    with pytest.raises(RingtreeError, match="no algorithm/protocol"):
        predict(AR, 8, c, 2, env={"NCCL_ALGO": "NVLS"})  # NVLS across nodes needs collnet


def test_a_platforms_nccl_settings_apply_and_the_users_win():
    # aws-ofi-nccl forces NCCL_PROTO=simple on p4d/p4de (LL/LL128 are not safe over their EFA)
    p4de = get_cluster("aws-p4de")
    assert dict(p4de.nccl_env).get("NCCL_PROTO", "").lower() == "simple"
    assert predict(AR, 8, p4de, 2).protocol == "simple"
    assert predict(AR, 8, p4de, 2, env={"NCCL_PROTO": "LL"}).protocol == "ll"


# ------------------------------------------------------------------ speed


def test_speed_30_sizes_5_collectives_on_16_nodes():
    """A sweep is interactive: 30 sizes x 5 collectives on 16 nodes, in-process (the goal is
    0.5 s; 2 s here for noisy CI machines)."""
    c = get_cluster("dgx-h100")
    predict(AR, 8, c, 16)  # imports and caches warm
    start = time.perf_counter()
    for col in EVERY:
        for i in range(30):
            predict(col, 8 * 2**i, c, 16)
    assert time.perf_counter() - start < 2.0


# ------------------------------------------------------------------ properties


@st.composite
def jobs(draw):
    c = get_cluster(draw(st.sampled_from(PRESETS)))
    nodes = draw(st.integers(1, 32)) if c.nics_per_node else 1
    g = draw(st.one_of(st.none(), st.integers(1, c.gpus_per_node)))
    return c, nodes, g


@given(jobs(), st.sampled_from(EVERY), st.integers(1, 2**36))
def test_every_prediction_is_a_finite_positive_time_from_the_table(job, collective, size):
    c, nodes, g = job
    call = predict(collective, size, c, nodes, gpus_per_node=g)
    assert 0 < call.time_s < math.inf
    assert 0 <= call.busbw_Bps < math.inf and call.channels >= 1
    assert call.algbw_Bps == pytest.approx(size / call.time_s)
    if call.n_ranks > 1:
        topo = topology(c, nodes, g)
        table = tuner.table(collective, topo, settings_for(c))
        assert (call.algorithm, call.protocol) in {(e.algorithm, e.protocol) for e in table}
        assert call.busbw_Bps == pytest.approx(
            call.algbw_Bps * timing.bus_factor(collective, call.n_ranks)
        )


@given(jobs(), st.sampled_from(EVERY), st.integers(1, 2**36), st.data())
def test_one_allowed_pair_is_exactly_the_choice(job, collective, size, data):
    c, nodes, g = job
    topo = topology(c, nodes, g)
    if topo.n_ranks == 1:
        return
    e = data.draw(st.sampled_from(tuner.table(collective, topo, settings_for(c))))
    env = {"NCCL_ALGO": NAMES[e.algorithm], "NCCL_PROTO": NAMES[e.protocol]}
    call = predict(collective, size, c, nodes, gpus_per_node=g, env=env)
    assert (call.algorithm, call.protocol) == (e.algorithm, e.protocol)


# ------------------------------------------------------------------ point-to-point collectives

P2P = (Collective.ALL_TO_ALL, Collective.GATHER, Collective.SCATTER)


@pytest.mark.parametrize("collective", P2P)
def test_p2p_collectives_run_as_sends_with_nccl_tests_factor(collective):
    """alltoall.cu / gather.cu / scatter.cu: busbw = algbw (N-1)/N; NCCL posts one send and
    receive per peer (no tuner entry: algorithm p2p), LL up to 16 KiB per peer."""
    c = get_cluster("dgx-h100")
    for nodes in (1, 2):
        n = 8 * nodes
        small = predict(collective, 16384 * n, c, nodes)
        large = predict(collective, 1 << 30, c, nodes)
        assert (small.algorithm, small.protocol) == ("p2p", "ll")
        assert (large.algorithm, large.protocol) == ("p2p", "simple")
        assert timing.bus_factor(collective, n) == pytest.approx((n - 1) / n)
        assert large.busbw_Bps == pytest.approx(large.algbw_Bps * (n - 1) / n)
        assert large.record()["nccl_tuner_time_s"] is None  # NCCL's tuner does not price it


def test_all_to_all_is_bound_by_nvlink_in_a_node_and_by_the_nics_across():
    """One node: each GPU sends (N-1)/N of its buffer over NVLink, so busbw stays under the
    GPU's NVLink figure (370.8 GB/s on H100). k nodes of g: (N-g)/N leaves through the GPU's
    share of its node's NICs (8 x 400 Gb/s / 8 = 50 GB/s), so busbw <= 50 (N-1)/(N-g)."""
    c = get_cluster("dgx-h100")
    one = predict("all-to-all", 16 << 30, c, 1)
    assert 0.9 * 370.8 < one.busbw_Bps / 1e9 <= 370.8
    for nodes in (2, 4, 10):
        n = 8 * nodes
        bound = 50.0 * (n - 1) / (n - 8)
        got = predict("all-to-all", 16 << 30, c, nodes).busbw_Bps / 1e9
        assert 0.8 * bound < got <= bound


def test_barrier_is_not_an_nccl_collective():
    with pytest.raises(RingtreeError, match="NCCL has no barrier"):
        predict("barrier", 4, get_cluster("dgx-h100"), 2)
