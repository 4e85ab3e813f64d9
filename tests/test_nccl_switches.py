"""NCCL's switch points (ringtree.cost.nccl.switches.switch_points): every range agrees with
NCCL's choice, the ranges tile the asked interval, each switch is exact to the element, and on
one DGX A100 node the switches fall where NCCL's own figures (tuning.cc, worked by hand in
docs/nccl-tuning-notes.md section 3.4) make Ring/LL, Ring/LL128 and Ring/Simple cross."""

from __future__ import annotations

import math
from functools import cache

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringtree.collectives import Collective
from ringtree.cost.clusters import get_cluster
from ringtree.cost.nccl import tuner
from ringtree.cost.nccl.switches import switch_points
from ringtree.cost.nccl.topology import topology

AR, AG, BC = Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.BROADCAST
NAMES = {"tree": "Tree", "ring": "Ring", "nvls": "NVLS", "nvls_tree": "NVLSTree", "pat": "PAT",
         "collnet_direct": "CollNetDirect", "collnet_chain": "CollNetChain", "ll": "LL",
         "ll128": "LL128", "simple": "Simple"}
CASES = [("dgx-a100", 1, AR), ("dgx-h100", 1, AR), ("dgx-h100", 4, AR), ("dgx-a100", 16, AR),
         ("aws-p5", 2, AR), ("gcp-a3-mega", 2, AG), ("dgx-h100", 2, BC),
         ("pcie-8x-rtx4090", 2, AR)]


def pick(collective, size, topo, s) -> str:
    e = tuner.choose(collective, size, topo, s)
    return f"{NAMES[e.algorithm]}/{NAMES[e.protocol]}"


@pytest.mark.parametrize(("preset", "nodes", "collective"), CASES)
@pytest.mark.parametrize("itemsize", [1, 4])
def test_ranges_agree_with_the_choice_tile_the_range_and_switch_exactly(
    preset, nodes, collective, itemsize
):
    c = get_cluster(preset)
    topo = topology(c, nodes)
    s = tuner.Settings.for_cluster(c, {})
    lo, hi = itemsize, 2**36
    out = switch_points(collective, topo, s, lo, hi, itemsize=itemsize)
    r = out.ranges
    assert r[0].lo_bytes == lo and r[-1].hi_bytes == hi
    for a, b in zip(r, r[1:], strict=False):
        assert b.lo_bytes == a.hi_bytes + itemsize  # contiguous, no gap, no overlap
        assert a.choice != b.choice
        # exact to the element: one element below the switch NCCL still runs the old choice
        assert pick(collective, b.lo_bytes - itemsize, topo, s) == a.choice
        assert pick(collective, b.lo_bytes, topo, s) == b.choice
    for x in r:
        assert x.lo_bytes <= x.hi_bytes
        assert x.lo_bytes % itemsize == 0 and x.hi_bytes % itemsize == 0
        mid = (x.lo_bytes + x.hi_bytes) // 2 // itemsize * itemsize
        for size in (x.lo_bytes, mid, x.hi_bytes):
            assert pick(collective, size, topo, s) == x.choice, (x, size)
    rec = out.record()
    assert [w["size_bytes"] for w in rec["switches"]] == [x.lo_bytes for x in r[1:]]
    assert rec["model"] == "nccl" and rec["n_ranks"] == topo.n_ranks


def test_one_a100_node_switches_where_nccls_figures_cross():
    # Ring/LL 6.6 + 14 x 0.6 us at min(87.7, 120) x 8/14 GB/s; Ring/LL128 14 + 14 x 1.9 at
    # 0.92 x 240 x 8/14; Ring/Simple 8.4 + 14 x 3.4 at 240 x 8/14 (tuning.cc, 12 x 20 GB/s
    # channels); no tree or NVLS pair wins anywhere on this node
    ll = (6.6 + 14 * 0.6, min(87.7, 0.5 * 240) * 8 / 14)
    ll128 = (14.0 + 14 * 1.9, min(0.92 * 240, 12 * 20.0) * 8 / 14)
    simple = (8.4 + 14 * 3.4, 240 * 8 / 14)

    def cross(a, b):  # a.lat + S / (1000 a.bw) = b.lat + S / (1000 b.bw)
        return (b[0] - a[0]) / (1 / (1000 * a[1]) - 1 / (1000 * b[1]))

    c = get_cluster("dgx-a100")
    out = switch_points(AR, topology(c, 1), tuner.Settings.for_cluster(c, {}), 4, 2**34,
                        itemsize=4)
    assert [x.choice for x in out.ranges] == ["Ring/LL", "Ring/LL128", "Ring/Simple"]
    first, second = (x.lo_bytes for x in out.ranges[1:])
    assert first == 4 * math.ceil(cross(ll, ll128) / 4)  # the first element past the cross
    assert second == 4 * math.ceil(cross(ll128, simple) / 4)


def test_the_environment_moves_the_switches():
    c = get_cluster("dgx-h100")
    topo = topology(c, 1)
    default = switch_points(AR, topo, tuner.Settings.for_cluster(c, {}), 1, 2**34)
    assert default.ranges[-1].choice == "NVLS/Simple"
    off = switch_points(AR, topo, tuner.Settings.for_cluster(c, {"NCCL_NVLS_ENABLE": "0"}), 1,
                        2**34)
    assert all("NVLS" not in x.choice for x in off.ranges)
    simple = switch_points(AR, topo, tuner.Settings.for_cluster(c, {"NCCL_PROTO": "Simple",
                                                                    "NCCL_ALGO": "Ring"}), 1,
                           2**34)
    assert [x.choice for x in simple.ranges] == ["Ring/Simple"]


def test_every_allowed_pair_is_timed_at_every_sample():
    c = get_cluster("dgx-h100")
    topo = topology(c, 2)
    s = tuner.Settings.for_cluster(c, {})
    out = switch_points(AR, topo, s, 8, 2**30, itemsize=4)
    want = {f"{NAMES[e.algorithm]}/{NAMES[e.protocol]}" for e in tuner.table(AR, topo, s)}
    assert set(out.times_s) == want
    assert out.sizes_bytes == sorted(out.sizes_bytes)
    assert out.sizes_bytes[0] == 8 and out.sizes_bytes[-1] == 2**30
    for times in out.times_s.values():
        assert len(times) == len(out.sizes_bytes) and all(t > 0 for t in times)


def test_a_single_size():
    c = get_cluster("dgx-a100")
    out = switch_points(AR, topology(c, 1), tuner.Settings.for_cluster(c, {}), 64, 64)
    assert len(out.ranges) == 1
    assert (out.ranges[0].lo_bytes, out.ranges[0].hi_bytes) == (64, 64)


@cache
def whole_range(case):
    preset, nodes, collective = case
    c = get_cluster(preset)
    topo = topology(c, nodes)
    s = tuner.Settings.for_cluster(c, {})
    return topo, s, switch_points(collective, topo, s, 1, 2**36)


@given(st.sampled_from(CASES), st.integers(1, 2**36))
def test_any_size_runs_the_choice_of_its_range(case, size):
    # nothing hides between two samples: NCCL's pick at any size is its range's
    topo, s, out = whole_range(case)
    (r,) = [x for x in out.ranges if x.lo_bytes <= size <= x.hi_bytes]
    assert pick(case[2], size, topo, s) == r.choice


def test_a_pick_that_switches_back_at_a_power_of_two_is_found():
    # hypothesis found it: NCCL's tree correction steps at 2^23 B, so on 4 DGX H100 nodes
    # NVLSTree/Simple wins from 7,903,820 B and Tree/LL128 again from 8 MiB (both ends checked)
    topo, s, out = whole_range(("dgx-h100", 4, AR))
    assert range_of(out, 7_903_820) == ("NVLSTree/Simple", 7_903_820, 2**23 - 1)
    assert pick(AR, 7_903_819, topo, s) == pick(AR, 2**23, topo, s) == "Tree/LL128"


def range_of(out, size):
    (r,) = [x for x in out.ranges if x.lo_bytes <= size <= x.hi_bytes]
    return r.choice, r.lo_bytes, r.hi_bytes
