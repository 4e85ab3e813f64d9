"""Physical bounds on the NCCL model (ringtree.cost.nccl.bounds): no prediction of any preset
beats the bytes it must move over the links they cross.

The bound's figures are checked by hand from vendor line rates (NVLink 4: 18 x 25 GB/s per
direction; NVLink 5: 18 x 50; PCIe Gen5 x16: 32 GT/s x 16 x 128/130 / 8 = 63.0 GB/s; a
400 Gb/s NIC: 50 GB/s) and the bytes each collective must move; then every prediction of every
preset -- every collective, 1 to 64 nodes, 8 B to 16 GiB, NVLS on and off, every algorithm and
protocol NCCL_ALGO / NCCL_PROTO can force, the tuners of NCCL 2.26, 2.27 and 2.30 -- is held to
it.
"""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ringtree.collectives import Collective
from ringtree.cost.clusters import ALIASES, get_cluster, presets
from ringtree.cost.nccl import p2p, timing, tuner
from ringtree.cost.nccl.bounds import lower_bound
from ringtree.cost.nccl.topology import topology
from ringtree.errors import RingtreeError

GiB = 2**30
PRESETS = sorted(k for k in presets() if k not in ALIASES)
COLLECTIVES = [c for c in Collective if c is not Collective.BARRIER]
SIZES = [8 * 4**i for i in range(16)] + [3 * 2**20 + 7, 16 * GiB]
NODES = (1, 2, 8, 64)


def _sweep(preset: str, nodes: int, env: dict[str, str], version: tuple[int, int] | None
           ) -> list[str]:
    """Every collective and size on ``nodes`` nodes of ``preset`` with NCCL ``version``'s
    tuner: the predictions under their bound, described."""
    c = get_cluster(preset)
    topo = topology(c, nodes)
    s = tuner.Settings.for_cluster(c, env, version)
    bad = []
    for col in COLLECTIVES:
        entries = tuner.table(col, topo, s) if col in tuner.NCCL_COLLECTIVES else None
        for size in SIZES:
            call = timing.predict_on(col, size, topo, s, timing.DEFAULT, entries)
            b = lower_bound(col, size, topo)
            if call.time_s < b.time_s * (1 - 1e-9):
                bad.append(f"{col.value} {size} B {call.nccl_name}: {call.time_s:.3e} s < "
                           f"{b.time_s:.3e} s over {b.link}")
    return bad


@pytest.mark.parametrize("version", [None, (2, 26)])
@pytest.mark.parametrize("nvls", ["2", "0"])
@pytest.mark.parametrize("nodes", NODES)
@pytest.mark.parametrize("preset", PRESETS)
def test_no_prediction_beats_its_links(preset, nodes, nvls, version):
    if nodes > 1 and not get_cluster(preset).nics_per_node:
        pytest.skip("one node only: no NICs")
    assert _sweep(preset, nodes, {"NCCL_NVLS_ENABLE": nvls}, version) == []


ALGOS = ["Ring", "Tree", "NVLS", "NVLSTree", "CollNetDirect", "CollNetChain", "PAT"]


@settings(max_examples=300, deadline=None)
@given(preset=st.sampled_from(PRESETS), nodes=st.integers(1, 512), col=st.sampled_from(
    COLLECTIVES), size=st.integers(1, 2**34), algo=st.sampled_from([None, *ALGOS]),
    proto=st.sampled_from([None, "LL", "LL128", "Simple"]), share=st.floats(0.01, 1.0),
    version=st.sampled_from([None, (2, 26), (2, 27)]))
def test_no_forced_choice_beats_its_links(preset, nodes, col, size, algo, proto, share,
                                          version):
    c = get_cluster(preset)
    assume(nodes == 1 or c.nics_per_node)
    g = max(1, round(share * c.gpus_per_node))
    env = {k: v for k, v in (("NCCL_ALGO", algo), ("NCCL_PROTO", proto),
                             ("NCCL_COLLNET_ENABLE", "1")) if v}
    try:
        call = timing.predict(col, size, c, nodes, gpus_per_node=g, env=env, version=version)
    except RingtreeError:
        assume(False)  # the environment leaves NCCL nothing to run
    b = lower_bound(col, size, topology(c, nodes, g))
    assert call.time_s >= b.time_s * (1 - 1e-9), (call.nccl_name, b)


# ------------------------------------------------------------------ the bound by hand


def test_one_h100_node_all_reduce_needs_the_result_over_nvlink():
    topo = topology(get_cluster("dgx-h100"), 1)
    b = lower_bound(Collective.ALL_REDUCE, 10**9, topo)
    assert b.time_s == pytest.approx(1e9 / (18 * 25e9))  # 2.22 ms: 450 GB/s per direction
    ag = lower_bound(Collective.ALL_GATHER, 8 * 10**9, topo)
    assert ag.time_s == pytest.approx(7e9 / 450e9)  # 7 of 8 blocks come in


def test_across_nodes_the_nics_bound_an_all_gather():
    # 2 x 8 H100, 8 x 400 Gb/s: the node takes in 1/2 of 16 GB over 400 GB/s (20 ms); a GPU
    # 15/16 of it over NVLink + PCIe Gen5 (450 + 63 GB/s: 29 ms) -- the larger wins
    topo = topology(get_cluster("dgx-h100"), 2)
    b = lower_bound(Collective.ALL_GATHER, 16 * 10**9, topo)
    assert b.time_s == pytest.approx(max(8e9 / 400e9, 15e9 / 513e9))
    assert b.link == "a GPU's own links"
    topo = topology(get_cluster("dgx-h100"), 64)  # 63/64 of it crosses the node's NICs
    b = lower_bound(Collective.ALL_GATHER, 16 * 10**9, topo)
    assert b.time_s == pytest.approx(16e9 * 63 / 64 / 400e9) and b.link == "the node's NICs"


def test_a_gathers_root_takes_in_every_block():
    topo = topology(get_cluster("dgx-a100"), 2)  # 16 ranks: 15/16 of S into the root
    b = lower_bound(Collective.GATHER, 16 * 10**9, topo)
    assert b.time_s == pytest.approx(15e9 / (12 * 25e9 + 31.5e9))
    nvlink, net = p2p.bytes_moved(Collective.GATHER, 16 * 10**9, topo)
    assert nvlink == pytest.approx(15e9) and net == pytest.approx(8e9)


def test_pcie_gpus_are_bound_by_their_pcie_link():
    topo = topology(get_cluster("pcie-8x-rtx4090"), 1)
    b = lower_bound(Collective.BROADCAST, 10**9, topo)
    assert b.GBps == pytest.approx(31.5)  # Gen4 x16, 16 GT/s x 16 x 128/130 / 8


def test_one_rank_and_empty_calls_have_no_bound():
    topo = topology(get_cluster("dgx-h100"), 1, 1)
    assert lower_bound(Collective.ALL_REDUCE, GiB, topo).time_s == 0.0
    topo = topology(get_cluster("dgx-h100"), 1)
    assert lower_bound(Collective.ALL_REDUCE, 0, topo).time_s == 0.0
    assert lower_bound(Collective.BARRIER, 8, topo).time_s == 0.0


# ------------------------------------------------------------------ the causes fixed


def test_a_72_gpu_nvlink_domain_has_32_nvls_heads():
    # NCCL_MAX_NVLS_ARITY = 32 (src/include/device.h); a head's link carries two channels, so
    # 33 x s <= 18 x 40.1: s = 20 of Blackwell's search speeds (search.cc)
    topo = topology(get_cluster("dgx-gb200-nvl72"), 1)
    assert topo.nvls is not None and (topo.nvls.channels, topo.nvls.bw_intra) == (32, 20)
    call = timing.predict(Collective.ALL_REDUCE, 8 * GiB, get_cluster("dgx-gb200-nvl72"), 1)
    assert call.algorithm == "nvls" and call.algbw_Bps < 900e9  # under NVLink 5's line


def test_nvls_runs_only_all_reduce_beyond_32_local_ranks():
    topo = topology(get_cluster("dgx-gb200-nvl72"), 1)
    s = tuner.Settings.from_env({})
    for col in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER):
        assert not any(e.algorithm == "nvls" for e in tuner.table(col, topo, s))
    small = topology(get_cluster("dgx-gb200-nvl72"), 1, 8)  # 8 GPUs of the domain: NVLS
    assert any(e.algorithm == "nvls" for e in tuner.table(Collective.ALL_GATHER, small, s))


def test_a_ring_across_72_gpu_nodes_fits_its_channels_in_nvlink():
    # 32 channels x 48 GB/s through every GPU would be 1,536 GB/s on an NVLink of 721.8
    ring = topology(get_cluster("dgx-gb200-nvl72"), 2).ring
    assert ring.channels * ring.bw_intra * 71 / 72 <= 18 * 40.1
