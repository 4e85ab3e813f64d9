"""GB200 NVL72 racks across the network (multi-node NVLink: a rack is one NCCL node of 72 GPUs),
as NCCL's own code prices and chooses there, worked out by hand from github.com/NVIDIA/nccl:

* the ring and tree graphs across racks: 16 channels x 45.1 GB/s (search.cc:1064 at 2.30.7:
  72 GPUs' chain fits 16 x 45.1 in 18 x 40.1 of NVLink); the NVLS graph: 32 heads x 20 GB/s
  inside (33 x 20 <= 721.8), each head with a NIC of its own, its network speed raised to
  2 x 20 in the search's second pass (search.cc:1112 at 2.26.2);
* the tuner (tuning.cc:266-378 at 2.30.7, :225-330 at 2.26.2): tree = min(0.92 x 16 x 45.1,
  16 x perChMaxTreeBw) / 2 with perChMaxTreeBw beyond 2 nodes 24 GB/s from 2.28, 72 before;
  ring = 16 x 45.1 x nRanks / nsteps; ring LL128 capped at 16 x 40 (2.30); NVLS tree =
  32 x min(20 x 0.74 x 31/32 x 2, 40, 80) x nRanks / nsteps;
* LL128 across racks: GB200's GPUs reach their NICs through Grace over C2C, a PHB path that
  keeps LL128 off before 2.27 (tuning.cc:429 at 2.26.2) and P2C from 2.27 (tuning.cc:525-529
  at 2.30.7, NCCL_LL128_C2C=1 by default);
* latencies (tuning.cc:395-431): ring 8.4 + (2878 - 38) x 3.4 + 38 x 14 us Simple (x 1.4 for
  a multi-node Simple all-reduce), tree 8.4 + 2 x (71 x 4.0 + 4 x 14) us on 20 racks.
"""

from __future__ import annotations

import pytest

from ringtree.collectives import Collective
from ringtree.cost.clusters import get_cluster
from ringtree.cost.nccl import timing, tuner
from ringtree.cost.nccl.topology import Graph, topology

AR = Collective.ALL_REDUCE
GiB = 2**30
NVL72 = get_cluster("dgx-gb200-nvl72")
OFF = {"NCCL_NVLS_ENABLE": "0"}


def table(nodes, env, version=None):
    topo = topology(NVL72, nodes)
    s = tuner.Settings.for_cluster(NVL72, env, version)
    return topo, s, {(e.algorithm, e.protocol): e for e in tuner.table(AR, topo, s)}


def test_graphs_across_racks():
    topo = topology(NVL72, 20)
    assert (topo.ring.channels, topo.ring.bw_inter) == (16, 45.1)
    assert topo.nvls == Graph(32, 20, 40, "nvlink")
    # 8 H100s with 8 x 400 Gb/s NICs keep 48: each head has its own NIC at the search's speed
    assert topology(get_cluster("dgx-h100"), 4).nvls.bw_inter == 48


def test_twenty_racks_by_nccls_tables():
    n = 1440
    _, _, new = table(20, OFF)
    assert new["tree", "simple"].bw_GBps == pytest.approx(min(0.92 * 16 * 45.1, 16 * 24) / 2)
    assert new["ring", "simple"].bw_GBps == pytest.approx(16 * 45.1 * n / (2 * (n - 1)))
    assert new["ring", "ll128"].bw_GBps == pytest.approx(16 * 40 * n / (2 * (n - 1)))
    assert new["ring", "simple"].latency_us == pytest.approx(8.4 + 2840 * 3.4 + 38 * 14)
    assert new["tree", "simple"].latency_us == pytest.approx(8.4 + 2 * (71 * 4.0 + 4 * 14))
    _, _, old = table(20, OFF, (2, 26))
    assert old["tree", "simple"].bw_GBps == pytest.approx(min(0.92 * 16 * 45.1, 16 * 72) / 2)
    assert ("ring", "ll128") not in old and ("tree", "ll128") not in old  # PHB: no LL128


@pytest.mark.parametrize(("version", "size", "want"), [
    ((2, 26), 512 * 2**20, "tree/simple"), ((2, 26), 16 * GiB, "tree/simple"),
    (None, 512 * 2**20, "tree/simple"), (None, 16 * GiB, "ring/ll128"),
])
def test_what_nccl_runs_on_twenty_racks_without_nvls(version, size, want):
    # 2.26: tree 688 us + S / 331.9 GB/s beats ring 1.4 x 10,196 us + S / 361.1 up to ~56 GB;
    # 2.30: its 24 GB/s tree channel loses to the LL128 ring (5,562 us + S / 320.2) from 2.3 GB
    topo, s, _ = table(20, OFF, version)
    e = tuner.choose(AR, size, topo, s)
    assert f"{e.algorithm}/{e.protocol}" == want


def test_two_racks_tree_then_ring_in_both_releases():
    # 2 nodes: tree 604 us + S / 331.9 against ring 1,403 us + S / 362.9: the ring from ~3 GB
    for version in ((2, 26), None):
        topo, s, _ = table(2, OFF, version)
        assert tuner.choose(AR, 2 * GiB, topo, s).algorithm == "tree"
        assert tuner.choose(AR, 4 * GiB, topo, s).algorithm == "ring"


def test_ll128_over_c2c_follows_the_release_and_the_switch():
    assert ("ring", "ll128") in table(2, OFF, (2, 27))[2]
    assert ("ring", "ll128") not in table(2, {**OFF, "NCCL_LL128_C2C": "0"})[2]
    assert ("ring", "ll128") in table(2, {**OFF, "NCCL_PROTO": "LL128,Simple"}, (2, 26))[2]
    assert ("ring", "ll128") in table(1, OFF, (2, 26))[2]  # one rack: no NIC in the path


def test_nccls_default_across_racks_is_the_nvls_tree():
    n = 1440
    topo, s, t = table(20, {})
    e = tuner.choose(AR, 16 * GiB, topo, s)
    assert (e.algorithm, e.protocol) == ("nvls_tree", "simple")
    assert e.bw_GBps == pytest.approx(32 * (20 * 0.74 * 31 / 32 * 2) * n / (2 * (n - 1)))
    # its 32 heads' own NICs carry it, not the ring's 16
    assert timing.nvls_head_nics(topo) == 32
    assert timing.nvls_head_nics(topology(get_cluster("dgx-h100"), 4)) == 8
    bus = timing.predict(AR, 16 * GiB, NVL72, 20).busbw_Bps / 1e9
    ring_nics = timing.net_busbw(topo, timing.DEFAULT)  # 16 x 50 x 0.927
    assert ring_nics == pytest.approx(16 * 50 * 0.927)
    assert ring_nics < bus < 32 * 50
