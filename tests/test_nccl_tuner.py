"""NCCL's tuner as ringtree models it (ringtree.cost.nccl.tuner, .topology), checked against
NCCL's own source and logs, never against the model's outputs.

References (docs/nccl-tuning-notes.md quotes them with file:line; NCCL's source is
github.com/NVIDIA/nccl, tags v2.27.7-1 and v2.30.7-1):

* NCCL_ALGO / NCCL_PROTO syntax: ``parseList`` and its comment's examples, tuning.cc:34-130.
* What is enabled: tuning.cc:255-264 (which collective runs which algorithm), 383-474 (NVLSTree
  off on one node, CollNet and multi-node NVLS need collnet, LL128's "auto" rule), 191-199
  (PAT: 1 GPU per node), src/transport/nvls.cc (NCCL_NVLS_ENABLE), search.cc (NVLS graph
  only with an NVSwitch and SM >= 90).
* Channels: logged counts (nccl-tests#100: 24 channels on one DGX A100; NVIDIA/nccl#892: 16 on
  an H800; #812: 8 x 24 GB/s = 192 GB/s on DGX A100 8 x HDR; #1453: 16 coll channels on H100
  nodes) and connect.cc's execution-channel rule.
* Latency and bandwidth: the constant tables of tuning.cc written here as literals, combined by
  hand the way tuning.cc:266-378 does; the figures docs/nccl-tuning-notes.md section 3.4 prints.
* The per-call tree correction and ring plateau factor: tuning.cc:555-578.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from ringtree.collectives import Collective
from ringtree.cost.clusters import cluster_from_table, get_cluster
from ringtree.cost.nccl import tuner
from ringtree.cost.nccl.topology import Graph, topology
from ringtree.errors import RingtreeError

AR, AG, RS = Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER
BC, RD = Collective.BROADCAST, Collective.REDUCE
EVERY_ALGO = frozenset({"tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree",
                        "pat"})
EVERY_PROTO = frozenset({"ll", "ll128", "simple"})
FUNCS = ("broadcast", "reduce", "allgather", "reducescatter", "allreduce")
MiB = 2**20


def env(**values: str) -> tuner.Settings:
    return tuner.Settings.from_env(values)


def pairs(collective, topo, settings=None) -> set[tuple[str, str]]:
    """The (algorithm, protocol) pairs NCCL would price for ``collective``."""
    return {(e.algorithm, e.protocol)
            for e in tuner.table(collective, topo, settings or env())}


def three(algorithm: str) -> set[tuple[str, str]]:
    return {(algorithm, p) for p in EVERY_PROTO}


def entry_of(collective, topo, algorithm: str, protocol: str) -> tuner.Entry:
    """NCCL's table entry for one pair (with NCCL's defaults)."""
    (e,) = [x for x in tuner.table(collective, topo, env())
            if (x.algorithm, x.protocol) == (algorithm, protocol)]
    return e


# ------------------------------------------------------------------ NCCL_ALGO / NCCL_PROTO


def test_defaults_leave_everything_to_nccl():
    s = env()
    assert s.algos is None and s.protos is None
    assert (s.nvls, s.collnet, s.pat) == (True, False, 2)  # NVLS on, CollNet off, PAT auto (2)


def test_an_empty_value_is_as_if_unset():
    # NCCL: parseList over "" finds no token and changes nothing
    s = env(NCCL_ALGO="", NCCL_PROTO="")
    assert s.algos is None and s.protos is None


def test_caret_excludes_the_names_for_every_collective():
    s = env(NCCL_ALGO="^Ring")
    assert set(s.algos) == set(FUNCS)
    assert all(v == EVERY_ALGO - {"ring"} for v in s.algos.values())


def test_a_collective_prefix_applies_to_that_collective_only():
    s = env(NCCL_ALGO="allreduce:tree")
    assert s.algos == {"allreduce": frozenset({"tree"})}
    topo = topology(get_cluster("dgx-h100"), 2)
    assert pairs(AR, topo, s) == three("tree")
    # the other collectives keep NCCL's defaults
    assert pairs(BC, topo, s) == pairs(BC, topo) == three("ring")
    assert pairs(AG, topo, s) == pairs(AG, topo)


@pytest.mark.parametrize(
    ("var", "value", "want"),
    [
        # the three examples of parseList's comment (tuning.cc)
        ("NCCL_ALGO", "ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring",
         {"allreduce": {"tree", "collnet_direct"}, "broadcast": {"ring"},
          "reduce": {"ring", "collnet_direct"}, "allgather": {"ring", "collnet_direct"},
          "reducescatter": {"ring", "collnet_direct"}}),
        ("NCCL_PROTO", "LL,Simple;allreduce:^LL",
         {"allreduce": {"ll128", "simple"}, **{f: {"ll", "simple"} for f in FUNCS[:4]}}),
        ("NCCL_PROTO", "^LL128;allreduce:LL128",
         {"allreduce": {"ll128"}, **{f: {"ll", "simple"} for f in FUNCS[:4]}}),
        # names and prefixes are case-insensitive (strcasecmp)
        ("NCCL_ALGO", "RING;AllReduce:TREE,nvlstree",
         {"allreduce": {"tree", "nvls_tree"}, **{f: {"ring"} for f in FUNCS[:4]}}),
    ],
)
def test_nccl_source_examples(var, value, want):
    s = tuner.Settings.from_env({var: value})
    got = s.algos if var == "NCCL_ALGO" else s.protos
    assert got == {k: frozenset(v) for k, v in want.items()}


@pytest.mark.parametrize(
    ("var", "value", "named"),
    [
        ("NCCL_ALGO", "Rnig", "rnig"),
        ("NCCL_ALGO", "ring,bogus", "bogus"),
        ("NCCL_ALGO", "allreduc:ring", "allreduc"),
        ("NCCL_PROTO", "LL129", "ll129"),
        ("NCCL_PROTO", "allreduce:^Fast", "fast"),
        ("NCCL_NVLS_ENABLE", "yes", "yes"),
        ("NCCL_PAT_ENABLE", "on", "on"),
        ("NCCL_COLLNET_ENABLE", "-1", "-1"),
    ],
)
def test_a_bad_value_is_an_error_naming_it(var, value, named):
    with pytest.raises(RingtreeError) as e:
        tuner.Settings.from_env({var: value})
    assert var in str(e.value) and named in str(e.value).lower()


def test_only_the_first_entry_may_omit_the_collective():
    # tuning.cc: "All entries except the first must have a prefix"
    with pytest.raises(RingtreeError, match="first entry"):
        env(NCCL_ALGO="ring;tree")


@pytest.mark.parametrize(("value", "on"), [("0", False), ("1", True), ("2", True)])
def test_nvls_enable_switch(value, on):
    s = env(NCCL_NVLS_ENABLE=value)
    assert s.nvls is on
    topo = topology(get_cluster("dgx-h100"), 1)
    assert (("nvls", "simple") in pairs(AR, topo, s)) is on


# ------------------------------------------------------------------ what is enabled


def test_one_h100_node_all_reduce_prices_ring_tree_and_nvls():
    # tree runs on one node (2.5+); NVLSTree is disabled on one node; NVLS only with Simple
    topo = topology(get_cluster("dgx-h100"), 1)
    assert pairs(AR, topo) == three("ring") | three("tree") | {("nvls", "simple")}


def test_several_h100_nodes_use_nvls_tree_not_nvls():
    # multi-node NVLS needs collnet (NVLS + IB SHARP), which is off by default
    topo = topology(get_cluster("dgx-h100"), 2)
    assert pairs(AR, topo) == three("ring") | three("tree") | {("nvls_tree", "simple")}


def test_a100_has_no_nvls():
    # the NVLS graph needs SM >= 90 (search.cc), even where a file claims NVLS
    claims = cluster_from_table("x", {"preset": "dgx-a100", "nvls": True}, "test")
    for c in (get_cluster("dgx-a100"), claims):
        topo = topology(c, 1)
        assert topo.nvls is None
        assert pairs(AR, topo) == three("ring") | three("tree")


def test_nvls_needs_the_nvswitch_that_has_it():
    no_nvls = cluster_from_table("x", {"preset": "dgx-h100", "nvls": False}, "test")
    assert topology(no_nvls, 1).nvls is None
    assert topology(get_cluster("dgx-h100"), 1, 4).nvls is not None
    assert topology(get_cluster("dgx-h100"), 1, 1).nvls is None


@pytest.mark.parametrize("nodes", [1, 2])
@pytest.mark.parametrize("collective", [BC, RD])
def test_broadcast_and_reduce_run_ring_only(collective, nodes):
    topo = topology(get_cluster("dgx-h100"), nodes)
    assert pairs(collective, topo) == three("ring")
    # asking for another algorithm leaves NCCL nothing: "no algorithm/protocol available"
    s = env(NCCL_ALGO="Tree")
    assert pairs(collective, topo, s) == set()
    with pytest.raises(RingtreeError, match="no algorithm/protocol available"):
        tuner.choose(collective, 1024, topo, s)


@pytest.mark.parametrize("collective", [AG, RS])
def test_all_gather_and_reduce_scatter(collective):
    h100 = get_cluster("dgx-h100")
    # one node: ring and NVLS; across nodes NVLS needs collnet, tree never runs them
    assert pairs(collective, topology(h100, 1)) == three("ring") | {("nvls", "simple")}
    assert pairs(collective, topology(h100, 2)) == three("ring")


def test_ll128_only_over_nvlink_unless_named():
    pcie = topology(get_cluster("pcie-8x-l40s-ethernet"), 1)
    assert ("ring", "ll128") not in pairs(AR, pcie)
    assert ("ring", "ll128") in pairs(AR, topology(get_cluster("dgx-a100"), 1))
    # naming it sets it on, not "auto" (tuning.cc); so does a ^ list that keeps it
    assert pairs(AR, pcie, env(NCCL_PROTO="LL128")) == {("ring", "ll128"), ("tree", "ll128")}
    assert ("ring", "ll128") in pairs(AR, pcie, env(NCCL_PROTO="^LL"))
    # another collective's entry does not name it for all-reduce
    assert ("ring", "ll128") not in pairs(AR, pcie, env(NCCL_PROTO="allgather:LL128"))


def test_ll128_on_volta_nvlink():
    # SM 70 is the oldest LL128 runs on by default
    volta = cluster_from_table("v", {"gpu": "v100-sxm2", "gpus_per_node": 8,
                                     "fabric": "nvswitch"}, "test")
    assert ("ring", "ll128") in pairs(AR, topology(volta, 1))


def test_pat_only_with_one_gpu_per_node_across_nodes_and_not_all_reduce():
    h100 = get_cluster("dgx-h100")
    one_per_node = topology(h100, 4, 1)
    for col in (AG, RS):
        assert ("pat", "simple") in pairs(col, one_per_node)
        assert ("pat", "ll") not in pairs(col, one_per_node)  # PAT: Simple only
        assert ("pat", "simple") not in pairs(col, one_per_node, env(NCCL_PAT_ENABLE="0"))
        assert not any(a == "pat" for a, _ in pairs(col, topology(h100, 4)))
    assert not any(a == "pat" for a, _ in pairs(AR, one_per_node))


def test_collnet_needs_sharp_and_the_switch():
    sharp = cluster_from_table("s", {"preset": "dgx-h100", "sharp": True}, "test")
    topo = topology(sharp, 2)
    assert not any(a.startswith("collnet") for a, _ in pairs(AR, topo))
    on = env(NCCL_COLLNET_ENABLE="1")
    got = pairs(AR, topo, on)
    assert {("collnet_direct", "simple"), ("collnet_chain", "simple")} <= got
    assert ("nvls", "simple") in got  # NVLS across nodes rides on collnet
    assert ("collnet_direct", "ll") not in got  # CollNet: Simple only
    assert ("collnet_chain", "simple") not in pairs(AG, topo, on)  # chain: all-reduce only
    # no SHARP in the fabric: nothing, whatever the environment says
    assert not any(a.startswith("collnet") for a, _ in pairs(AR, topology(get_cluster(
        "dgx-h100"), 2), on))


def test_every_entry_of_the_table_is_enabled_and_positive():
    for name in ("dgx-a100", "dgx-h100", "aws-p5", "pcie-8x-rtx4090"):
        for nodes in (1, 2, 8):
            topo = topology(get_cluster(name), nodes)
            for col in (AR, AG, RS, BC, RD):
                for e in tuner.table(col, topo, env()):
                    assert tuner.enabled(col, e.algorithm, e.protocol, topo, env())
                    assert e.bw_GBps > 0 and e.latency_us > 0


# ------------------------------------------------------------------ topology: channels


def test_one_dgx_a100_node():
    topo = topology(get_cluster("dgx-a100"), 1)
    # 12 NVLinks x 20.0 = 240 GB/s: 6 x 40 found, doubled to 12 x 20; 24 execution channels
    # ("Channel 23/24", nccl-tests#100)
    assert (topo.ring.channels, topo.ring.bw_intra) == (12, 20.0)
    assert topo.ring.intra_hw == "nvlink"
    assert tuner.execution_channels(topo) == 24


def test_one_dgx_h100_node():
    topo = topology(get_cluster("dgx-h100"), 1)
    # 18 x 20.6 = 370.8: 6 x 60 doubled to 12 x 30; NVLS one head per GPU at the first
    # speed s with 9 s <= 370.8, i.e. 40
    assert (topo.ring.channels, topo.ring.bw_intra) == (12, 30.0)
    assert tuner.execution_channels(topo) == 24
    assert (topo.nvls.channels, topo.nvls.bw_intra) == (8, 40.0)


def test_h800_has_16_channels():
    # H800: 8 NVLinks x 20.6 = 164.8 -> 4 x 40 -> 8 x 20: "16 coll channels" (NVIDIA/nccl#892)
    h100 = get_cluster("dgx-h100")
    h800 = replace(h100, gpu=replace(h100.gpu, nvlink_links=8))
    topo = topology(h800, 1)
    assert (topo.ring.channels, topo.ring.bw_intra) == (8, 20.0)
    assert tuner.execution_channels(topo) == 16


@pytest.mark.parametrize("nodes", [2, 4, 16])
def test_dgx_a100_across_nodes_is_8_x_24(nodes):
    # 8 HDR NICs (25.0) behind PCIe Gen4 (24.0): 8 x 24 = 192 GB/s, no doubling below 25
    # (NVIDIA/nccl#812: "192GB/s AllReduce BusBW" on DGX-A100 8x200G)
    topo = topology(get_cluster("dgx-a100"), nodes)
    assert (topo.ring.channels, topo.ring.bw_inter) == (8, 24.0)
    assert tuner.execution_channels(topo) == 16


def test_dgx_h100_across_nodes_is_8_x_48():
    # NDR (50.0) behind Gen5 (48.0); SM90, < 50 GB/s and > 4 channels: no doubling; x2 then
    # 16 execution channels ("16 coll channels", NVIDIA/nccl#1453)
    topo = topology(get_cluster("dgx-h100"), 3)
    assert (topo.ring.channels, topo.ring.bw_inter) == (8, 48.0)
    assert tuner.execution_channels(topo) == 16
    assert topo.node_column == 2 and topo.n_ranks == 24


def test_a_job_reaches_its_gpus_own_nics():
    p4de = get_cluster("aws-p4de")  # 4 NICs for 8 GPUs
    assert topology(p4de, 2).nics == 4
    assert topology(p4de, 2, 2).nics == 1
    assert topology(get_cluster("dgx-h100"), 2, 3).nics == 3


def test_topology_refuses_impossible_jobs():
    h100 = get_cluster("dgx-h100")
    with pytest.raises(RingtreeError, match="nodes"):
        topology(h100, 0)
    with pytest.raises(RingtreeError, match="1..8"):
        topology(h100, 1, 9)
    lonely = cluster_from_table("lonely", {"preset": "dgx-h100", "nics_per_node": 0,
                                           "nic_gbps": 0}, "test")
    assert topology(lonely, 1).n_ranks == 8
    with pytest.raises(RingtreeError, match="no NICs"):
        topology(lonely, 2)


# ------------------------------------------------------------------ latency and bandwidth by hand

# Each case: (cluster, nodes, {(algorithm, protocol): (latency us, algorithm bandwidth GB/s)}),
# from tuning.cc's constants (literals below) and the graph of the tests above, and the figure
# docs/nccl-tuning-notes.md section 3.4 prints for it (rounded to 0.1).
A100_1 = {  # ring/tree 12 x 20 = 240; Ampere N1 caps: llMax 87.7, tree 24.0, LL128 20.0
    ("ring", "ll"): (6.6 + 14 * 0.6, min(87.7, 0.5 * 240) * 8 / 14, 15.0, 50.1),
    ("ring", "ll128"): (14.0 + 14 * 1.9, min(0.92 * 240, 12 * 20.0) * 8 / 14, 40.6, 126.2),
    ("ring", "simple"): (8.4 + 14 * 3.4, 240 * 8 / 14, 56.0, 137.1),
    ("tree", "ll"): (6.8 + 2 * 7 * 0.6, min(min(0.92 * 240, 12 * 24.0) / 3.8, 87.7) * 0.5,
                     15.2, 29.1),
    ("tree", "ll128"): (14.0 + 2 * 7 * 1.25,
                        min(min(0.92 * 240, 12 * 24.0) * 7 / 9, 12 * 20.0) * 0.5, 31.5, 85.9),
    ("tree", "simple"): (8.4 + 2 * 7 * 4.0, min(0.92 * 240, 12 * 24.0) * 0.5, 64.4, 110.4),
}
H100_1 = {  # 12 x 30 = 360; Hopper N1: llMax 141.0, tree 38.7, LL128 36.7; NVLS (2.30 model)
    ("ring", "ll"): (6.6 + 14 * 0.6, min(141.0, 0.5 * 360) * 8 / 14, 15.0, 80.6),
    ("ring", "ll128"): (14.0 + 14 * 1.9, min(0.92 * 360, 12 * 36.7) * 8 / 14, 40.6, 189.3),
    ("ring", "simple"): (8.4 + 14 * 3.4, 360 * 8 / 14, 56.0, 205.7),
    ("tree", "ll"): (6.8 + 2 * 7 * 0.6, min(min(0.92 * 360, 12 * 38.7) / 3.8, 141.0) * 0.5,
                     15.2, 43.6),
    ("tree", "ll128"): (14.0 + 2 * 7 * 1.25,
                        min(min(0.92 * 360, 12 * 38.7) * 7 / 9, 12 * 36.7) * 0.5, 31.5, 128.8),
    ("tree", "simple"): (8.4 + 2 * 7 * 4.0, min(0.92 * 360, 12 * 38.7) * 0.5, 64.4, 165.6),
    # NVLS replaces the base latency with NVLink's 25; 8 heads x min(40 x 0.85 x 7/8 x 2,
    # bwInter) x nRanks/nsteps (measured algbw ~273, NVIDIA/nccl#1455)
    ("nvls", "simple"): (25.0, 8 * min(40 * 0.85 * 7 / 8 * 2, 60) * 8 / 14, 25.0, 272.0),
}
A100_4 = {  # 4 DGX A100 (AMD): 8 x 24 = 192; N4: llMax (AMD row) 19.0, tree 17.8, LL128 20.0;
    # 62 steps, 6 across the network; net overhead 2.0 us on AMD (x3 Simple)
    ("ring", "ll"): (6.6 + 56 * max(0.6, 2.0) + 6 * 2.7, min(19.0, 0.5 * 192) * 32 / 62,
                     134.8, 9.8),
    ("ring", "ll128"): (14.0 + 56 * max(1.9, 2.0) + 6 * 4.0,
                        min(0.92 * 192, 8 * 20.0) * 32 / 62, 150.0, 82.6),
    ("ring", "simple"): (8.4 + 56 * max(3.4, 6.0) + 6 * 14.0, 192 * 32 / 62, 428.4, 99.1),
    ("tree", "ll"): (6.8 + 2 * (7 * 0.6 + 2 * 5.0),
                     min(min(0.92 * 192, 8 * 17.8) / 3.8, 19.0) * 0.5, 35.2, 9.5),
    ("tree", "ll128"): (14.0 + 2 * (7 * 1.25 + 2 * 8.5),
                        min(min(0.92 * 192, 8 * 17.8) * 120 / 128, 8 * 20.0) * 0.5, 65.5, 66.8),
    ("tree", "simple"): (8.4 + 2 * (7 * 4.0 + 2 * 14.0), min(0.92 * 192, 8 * 17.8) * 0.5,
                         120.4, 71.2),
}
H100_4 = {  # 4 DGX H100 (Intel): 8 x 48 = 384; N4: llMax (Intel row) 20.4, tree 36.0, LL128
    # ring 36.7, tree 29.0; net overhead 1.0 us (x3 Simple)
    ("ring", "ll"): (6.6 + 56 * max(0.6, 1.0) + 6 * 2.7, min(20.4, 0.5 * 384) * 32 / 62,
                     78.8, 10.5),
    ("ring", "ll128"): (14.0 + 56 * max(1.9, 1.0) + 6 * 4.0,
                        min(0.92 * 384, 8 * 36.7) * 32 / 62, 144.4, 151.5),
    ("ring", "simple"): (8.4 + 56 * max(3.4, 3.0) + 6 * 14.0, 384 * 32 / 62, 282.8, 198.2),
    ("tree", "ll"): (6.8 + 2 * (7 * 0.6 + 2 * 5.0),
                     min(min(0.92 * 384, 8 * 36.0) / 3.8, 20.4) * 0.5, 35.2, 10.2),
    ("tree", "ll128"): (14.0 + 2 * (7 * 1.25 + 2 * 8.5),
                        min(min(0.92 * 384, 8 * 36.0) * 120 / 128, 8 * 29.0) * 0.5, 65.5, 116.0),
    ("tree", "simple"): (8.4 + 2 * (7 * 4.0 + 2 * 14.0), min(0.92 * 384, 8 * 36.0) * 0.5,
                         120.4, 144.0),
    # NVLSTree (2.30): 25 + 2 log2(4) x 20.9; 8 x min(59.5, 48, perChMaxNVLSTreeBw 45.5) x 32/62
    ("nvls_tree", "simple"): (25.0 + 2 * 2 * 20.9, 8 * min(59.5, 48.0, 45.5) * 32 / 62,
                              108.6, 187.9),
}


@pytest.mark.parametrize(
    ("preset", "nodes", "want"),
    [("dgx-a100", 1, A100_1), ("dgx-h100", 1, H100_1), ("dgx-a100", 4, A100_4),
     ("dgx-h100", 4, H100_4)],
    ids=["a100x1", "h100x1", "a100x4", "h100x4"],
)
def test_all_reduce_latency_and_bandwidth_by_hand(preset, nodes, want):
    topo = topology(get_cluster(preset), nodes)
    table = {(e.algorithm, e.protocol): e for e in tuner.table(AR, topo, env())}
    assert set(table) == set(want)
    for key, (lat, bw, lat_notes, bw_notes) in want.items():
        e = table[key]
        assert e.latency_us == pytest.approx(lat, rel=1e-9), key
        assert e.bw_GBps == pytest.approx(bw, rel=1e-6), key
        # and the worked figures of the reading notes, to their rounding
        assert e.latency_us == pytest.approx(lat_notes, abs=0.051), key
        assert e.bw_GBps == pytest.approx(bw_notes, abs=0.051), key


def test_logged_tree_ll_latency_of_three_h100_nodes():
    # NVIDIA/nccl#1453 (3 x 8 H100): "128 Bytes -> Algo 0 proto 0 time 25.214764", of which
    # 128 B / (1000 x 8.67 GB/s) = 0.0148 us is bandwidth: 6.8 + 2 (7 x 0.6 + 1 x 5.0) = 25.2
    topo = topology(get_cluster("dgx-h100"), 3)
    assert tuner.latency(AR, "tree", "ll", topo) == pytest.approx(25.2, abs=1e-9)


def test_ring_simple_lat_on_one_node_per_notes():
    # "on a single node ring AllReduce costs 8.4 + 2(n-1) x 3.4 us on NVLink with Simple"
    for g in (2, 4, 8):
        topo = topology(get_cluster("dgx-h100"), 1, g)
        assert tuner.latency(AR, "ring", "simple", topo) == pytest.approx(8.4 + 2 * (g - 1) * 3.4)


def test_ring_broadcast_latency_uses_trees_simple_figure():
    # tuning.cc: Broadcast/Reduce add nsteps x hwLat[hw][Ring][p], the Tree entry for Simple
    one = topology(get_cluster("dgx-h100"), 1)
    assert tuner.latency(BC, "ring", "simple", one) == pytest.approx(8.4 + 8 * 4.0)
    assert tuner.latency(BC, "ring", "ll", one) == pytest.approx(6.6 + 8 * 0.6)
    two = topology(get_cluster("dgx-h100"), 2)
    assert tuner.latency(RD, "ring", "simple", two) == pytest.approx(8.4 + 16 * 14.0)


def test_pat_latency_and_bandwidth():
    # PAT (2.30): 8.0 + log2i(nNodes) x interLat / 3.5 + 2.8 nRanks; interLat with ppn = 1 is
    # the tree's network figure (14 for Simple); busBw x 0.75, kept as is for AG/RS
    topo = topology(get_cluster("dgx-h100"), 8, 1)
    assert tuner.latency(AG, "pat", "simple", topo) == pytest.approx(8.0 + 3 * 14 / 3.5 + 2.8 * 8)
    tree = topo.tree
    assert tuner.bandwidth(AG, "pat", "simple", topo) == pytest.approx(
        tree.channels * tree.bw_inter * 0.75
    )


# tuning.cc:555-559: treeCorrectionFactor[proto][log2(bytes >> 6)], 64 B .. 256 MiB
TREE_CORRECTION = {
    "ll": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0,
           1.0, 1.0, 1.0),
    "ll128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9,
              .9, .9, 1.0, 1.0),
    "simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7,
               .8, .9, .9),
}


@pytest.mark.parametrize("proto", ["ll", "ll128", "simple"])
def test_tree_all_reduce_time_takes_nccls_correction(proto):
    topo = topology(get_cluster("dgx-a100"), 4)
    e = entry_of(AR, topo, "tree", proto)
    for i, f in enumerate(TREE_CORRECTION[proto]):
        for size in (64 << i, (128 << i) - 1):  # both ends of the bucket
            want = e.latency_us + size / (1000 * e.bw_GBps * f)
            assert e.time_us(AR, size, topo) == pytest.approx(want, rel=1e-12), (proto, size)
    for size in (1, 63, 512 * MiB, 8 << 30):  # outside the table: no factor
        assert e.time_us(AR, size, topo) == pytest.approx(e.latency_us + size / (1000 * e.bw_GBps))


def test_ring_simple_plateau_factor_across_nodes():
    # x1.4 on SM >= 80 once nBytes / (execution channels x nRanks) >= 64 (tuning.cc:571-574)
    topo = topology(get_cluster("dgx-a100"), 4)
    e = entry_of(AR, topo, "ring", "simple")
    edge = 64 * 16 * 32  # 16 execution channels, 32 ranks
    plain = e.latency_us + (edge - 1) / (1000 * e.bw_GBps)
    assert e.time_us(AR, edge - 1, topo) == pytest.approx(plain)
    plateau = 1.4 * e.latency_us + edge / (1000 * e.bw_GBps)
    assert e.time_us(AR, edge, topo) == pytest.approx(plateau)
    # not on one node, nor for all-gather
    one = topology(get_cluster("dgx-a100"), 1)
    r1 = entry_of(AR, one, "ring", "simple")
    want = r1.latency_us + (1 << 30) / (1000 * r1.bw_GBps)
    assert r1.time_us(AR, 1 << 30, one) == pytest.approx(want)
    ag = entry_of(AG, topo, "ring", "simple")
    assert ag.time_us(AG, 1 << 30, topo) == pytest.approx(ag.latency_us + (1 << 30) /
                                                          (1000 * ag.bw_GBps))


def test_a_disabled_pair_never_wins():
    g = Graph(8, 24.0, 24.0, "nvlink")
    topo = topology(get_cluster("dgx-a100"), 1)
    off = tuner.Entry("tree", "ll", 0.0, 0.0, g)
    assert off.time_us(AR, 8, topo) == float("inf")


# ------------------------------------------------------------------ the choice


@pytest.mark.parametrize(
    ("size", "want"),
    [(8, ("ring", "ll")), (2 * MiB, ("ring", "ll")), (4 * MiB, ("ring", "ll128")),
     (16 * MiB, ("ring", "ll128")), (32 * MiB, ("ring", "simple")), (8 << 30, ("ring", "simple"))],
)
def test_one_a100_node_picks_as_the_notes_work_out(size, want):
    # notes 3.4: "A100 1 node Ring/LL up to 2 MiB, Ring/LL128 4-16 MiB, Ring/Simple from 32 MiB"
    topo = topology(get_cluster("dgx-a100"), 1)
    e = tuner.choose(AR, size, topo, env())
    assert (e.algorithm, e.protocol) == want


@pytest.mark.parametrize(
    ("size", "want"),
    [(8, ("ring", "ll")), (1 * MiB, ("ring", "ll")), (2 * MiB, ("nvls", "simple")),
     (8 << 30, ("nvls", "simple"))],
)
def test_one_h100_node_switches_to_nvls_from_2_mib(size, want):
    # Ring/LL: 15.0 + S / 80.57e3; NVLS: 25.0 + S / 272e3 us: they cross at ~1.15 MB
    topo = topology(get_cluster("dgx-h100"), 1)
    e = tuner.choose(AR, size, topo, env())
    assert (e.algorithm, e.protocol) == want
    off = tuner.choose(AR, size, topo, env(NCCL_NVLS_ENABLE="0"))
    assert off.algorithm != "nvls"


def test_ties_go_to_the_first_in_nccls_order():
    g = Graph(8, 24.0, 24.0, "nvlink")
    topo = topology(get_cluster("dgx-a100"), 1)
    a = tuner.Entry("tree", "simple", 10.0, 50.0, g)
    b = tuner.Entry("ring", "simple", 10.0, 50.0, g)
    assert tuner.choose(AG, 4096, topo, env(), [a, b]) is a
    assert tuner.choose(AG, 4096, topo, env(), [b, a]) is b


def test_the_choice_is_the_cheapest_enabled_pair():
    for preset, nodes in (("dgx-a100", 1), ("dgx-h100", 2), ("aws-p5", 4), ("gcp-a3", 2)):
        topo = topology(get_cluster(preset), nodes)
        for col in (AR, AG, RS, BC, RD):
            entries = tuner.table(col, topo, env())
            for size in (1, 4096, 3 * MiB, 1 << 30):
                e = tuner.choose(col, size, topo, env())
                assert e in entries
                assert all(e.time_us(col, size, topo) <= x.time_us(col, size, topo)
                           for x in entries)


# ------------------------------------------------------------------ channels of one call


def test_nvls_runs_on_its_16_hopper_channels():
    topo = topology(get_cluster("dgx-h100"), 1)
    e = tuner.choose(AR, 1 << 30, topo, env())
    assert e.algorithm == "nvls"
    assert tuner.channels_used(e, AR, 1 << 30, topo) == 16  # NVLS_NCHANNELS_SM90
    assert tuner.channels_used(e, AR, 1 << 20, topo) == 16  # "always comm->nvlsChannels"


def test_nvls_on_one_blackwell_node_runs_24_channels():
    """NVLS_NCHANNELS_SM100_NVL = 24 inside one NVLink domain, _SM100 = 32 across nodes
    (src/transport/nvls.cc, 2.27-2.30)."""
    topo = topology(get_cluster("dgx-b200"), 1)
    (e,) = [x for x in tuner.table(AR, topo, env()) if x.algorithm == "nvls"]
    assert tuner.channels_used(e, AR, 1 << 30, topo) == 24
    two = topology(get_cluster("dgx-b200"), 2)
    (e2,) = [x for x in tuner.table(AR, two, env()) if x.algorithm == "nvls_tree"]
    assert tuner.channels_used(e2, AR, 1 << 30, two) == 32


def test_pat_enable_1_forces_pat_on_all_gather_and_reduce_scatter():
    """ncclPatEnable (tuning.cc): NCCL_PAT_ENABLE other than 2 is returned as is, so 1 turns
    PAT on even with several GPUs per node; all-reduce has no PAT."""
    topo = topology(get_cluster("dgx-h100"), 4)
    for col in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER):
        assert tuner.enabled(col, "pat", "simple", topo, env(NCCL_PAT_ENABLE="1"))
        assert not tuner.enabled(col, "pat", "simple", topo, env())
        assert not tuner.enabled(col, "pat", "ll", topo, env(NCCL_PAT_ENABLE="1"))
    assert not tuner.enabled(AR, "pat", "simple", topo, env(NCCL_PAT_ENABLE="1"))


def test_a_bare_caret_excludes_nothing():
    """NCCL_ALGO=^ names nothing to exclude: every algorithm stays (NCCL's parser)."""
    from ringtree.cost.nccl import constants as k

    assert set(env(NCCL_ALGO="^").algos.values()) == {frozenset(k.ALGORITHMS)}
    topo = topology(get_cluster("dgx-a100"), 4)
    assert tuner.table(AR, topo, env(NCCL_ALGO="^")) == tuner.table(AR, topo, env())


@pytest.mark.parametrize(
    ("proto", "threshold"),
    # bytes per channel below which one channel is dropped: threads x bytes per thread
    # (comm.h: LL 8, LL128 8, Simple 64; Ring LL x nRanks; LL 512, LL128 640, Simple 512
    # threads): Ring LL on 8 ranks 8 x 8 x 512 = 32 KiB, LL128 5 KiB, Simple 32 KiB
    [("ll", 8 * 8 * 512), ("ll128", 8 * 640), ("simple", 64 * 512)],
)
def test_ring_channels_drop_for_small_calls(proto, threshold):
    topo = topology(get_cluster("dgx-a100"), 1)  # 24 execution channels
    e = entry_of(AR, topo, "ring", proto)
    for size in (1, threshold - 1, threshold, 5 * threshold - 1, 5 * threshold,
                 24 * threshold - 1, 24 * threshold, 1 << 30):
        want = max(1, min(24, size // threshold))
        assert tuner.channels_used(e, AR, size, topo) == want, size


def test_ring_ll_threshold_grows_with_the_ranks():
    topo = topology(get_cluster("dgx-a100"), 4)  # 32 ranks, 16 execution channels
    e = entry_of(AR, topo, "ring", "ll")
    per = 8 * 512 * 32
    assert tuner.channels_used(e, AR, 3 * per, topo) == 3
    assert tuner.channels_used(e, AR, 3 * per - 1, topo) == 2
    assert tuner.channels_used(e, AR, 100 * per, topo) == 16
