"""The roofline compute model: GEMMs near the generation's efficiency when large, priced by
their bytes when small; and one layer of Korthikanti et al.'s 22B model against their Table 4
(per-layer forward and backward times on 8 A100s)."""

import tomllib
from pathlib import Path

import pytest

from ringtree.collectives import Collective
from ringtree.cost.clusters import get_cluster
from ringtree.cost.nccl.pricer import NcclPricer
from ringtree.cost.pricer import GroupShape
from ringtree.plan.compute import GENERATION, UNFUSED, Device, Slice, layer_time
from ringtree.plan.model import Model

A100 = get_cluster("dgx-a100")
TABLE4 = {
    t["name"]: t
    for t in tomllib.loads(
        (Path(__file__).parent.parent / "bench" / "published_training" / "korthikanti2022.toml")
        .read_text()
    )["layer_timings"]
}


def test_large_gemms_reach_the_generations_efficiency_small_ones_fall_short():
    dev = Device.of(A100.gpu)
    big = dev.gemm_s(16384, 16384, 16384)
    flops = 2 * 16384**3
    assert flops / big / dev.peak_flops == pytest.approx(GENERATION["ampere"].gemm, rel=0.02)
    # tensor parallelism shrinks N: the same work in 8 narrow GEMMs is slower per FLOP
    narrow = dev.gemm_s(512, 16384 // 8, 4096)
    wide = dev.gemm_s(512, 16384, 4096)
    assert 8 * narrow > wide
    # a GEMM with one row is priced by the bytes it reads (memory-bound)
    thin = dev.gemm_s(1, 8192, 8192)
    assert thin == pytest.approx(2 * 8192 * 8192 / (dev.hbm_Bps * dev.eff.memory)
                                 + dev.eff.kernel_s, rel=0.01)


def test_one_layer_of_22b_matches_korthikanti_table_4():
    m = Model("22b", 1, 48, 6144, 2048, heads=64, ffn=4 * 6144, vocab=51200, dropout=True)
    dev = Device.of(A100.gpu)
    b = 4
    tp = NcclPricer(A100)
    act = b * 2048 * 6144 * 2
    group = GroupShape(8, 1, 8)
    ar = tp.call(Collective.ALL_REDUCE, group, act, 2).time_s
    rs = tp.call(Collective.REDUCE_SCATTER, group, act, 2).time_s
    ag = tp.call(Collective.ALL_GATHER, group, act, 2).time_s
    lt = layer_time(m, Slice(b * 2048, 2048, 8, False, 1, UNFUSED), dev)
    sp = layer_time(m, Slice(b * 2048, 2048, 8, True, 1, UNFUSED), dev)
    fwd = lt.forward + 2 * ar  # the forward's all-reduces are exposed
    bwd = lt.backward + max(0.0, 2 * ar - lt.wgrad)  # the backward's hide behind wgrad
    got = {
        "baseline-no-recompute": (fwd, bwd),
        "baseline-with-recompute": (fwd, bwd + fwd),
        "selective-recompute": (fwd, bwd + lt.attention_fwd),
        "sequence-parallelism": (sp.forward + 2 * (rs + ag), None),
    }
    for name, (f, bw) in got.items():
        want = TABLE4[name]
        assert f * 1e3 == pytest.approx(want["forward_ms"], rel=0.10), name
        if bw is not None:
            assert bw * 1e3 == pytest.approx(want["backward_ms"], rel=0.10), name


def test_flash_attention_holds_no_scores_and_halves_the_causal_work():
    m = Model("x", 1, 1, 4096, 8192, heads=32, ffn=16384, vocab=32000)
    dev = Device.of(get_cluster("dgx-h100").gpu)
    flash = layer_time(m, Slice(8192, 8192, 1, False, 1, "flash"), dev)
    unfused = layer_time(m, Slice(8192, 8192, 1, False, 1, UNFUSED), dev)
    assert flash.attention_fwd < unfused.attention_fwd
