"""Whole-step plans against hand-computed alpha-beta figures (custom links, ring forced)."""

import pytest

from ringtree.cost.terms import Link
from ringtree.errors import RingtreeError
from ringtree.plan.model import Model
from ringtree.plan.placement import Placement
from ringtree.plan.planner import compare, plan
from ringtree.plan.presets import PRESETS
from ringtree.plan.record import Training
from ringtree.plan.strategy import parse_strategy

FAST = Link("fast", 100e9, alpha_s=2e-6)
SLOW = Link("slow", 10e9, alpha_s=10e-6)
SEED = Model("seed-7b", 7 * 10**9)  # the seed's 7B: 14 GB of fp16 gradients


@pytest.fixture(autouse=True)
def ring_only(monkeypatch):
    """Hand figures below are the ring's: force it (as NCCL_ALGO would)."""
    monkeypatch.setenv("RINGTREE_ALGO", "ring")


def ring_all_reduce_s(n, nbytes, link):
    """2(N-1) alpha + 2(N-1)/N S / bw, for S a multiple of N elements."""
    return 2 * (n - 1) * link.alpha_s + 2 * (n - 1) / n * nbytes / link.bandwidth_Bps


def cluster(nodes=1, gpn=8, price=None):
    return Placement(nodes, gpn, FAST, SLOW, price)


def test_seed_7b_ddp_8_gpus_one_all_reduce():
    p = plan(SEED, cluster(), parse_strategy("ddp"), Training(bucket_bytes=0))
    (c,) = p.collectives
    assert c.op.calls == 1
    assert p.bytes_per_gpu == 24.5e9  # 2 (N-1)/N x 14 GB
    assert p.comm_time_s == pytest.approx(ring_all_reduce_s(8, 14e9, FAST), rel=1e-12)
    assert p.exposed_s == p.comm_time_s  # no compute given: nothing hides it
    assert p.overhead is None and p.step_time_s is None


def test_buckets_pay_latency_per_call_and_hide_behind_backward():
    t = Training(bucket_bytes=10**9, compute_s=0.3)
    p = plan(SEED, cluster(), parse_strategy("ddp"), t)
    (c,) = p.collectives
    bucket_s = ring_all_reduce_s(8, 1e9, FAST)
    assert c.op.calls == 14
    assert c.time_s == pytest.approx(14 * bucket_s, rel=1e-12)
    assert c.latency_s == pytest.approx(14 * 14 * FAST.alpha_s, rel=1e-12)
    window = 0.2  # backward = 2/3 of compute
    assert c.exposed_s == pytest.approx(max(bucket_s, 14 * bucket_s - 13 / 14 * window))
    assert p.overhead == pytest.approx(c.exposed_s / 0.3)


def test_across_nodes_the_flat_ring_runs_on_the_inter_node_link():
    p = plan(SEED, cluster(nodes=2), parse_strategy("ddp"), Training(bucket_bytes=0))
    assert p.comm_time_s == pytest.approx(ring_all_reduce_s(16, 14e9, SLOW), rel=1e-12)


def test_zero3_3_psi_and_tp_intra_node():
    model = PRESETS["7b"]
    p = plan(model, cluster(nodes=8), parse_strategy("zero3"), Training())
    assert p.bytes_per_gpu == pytest.approx(3 * 63 / 64 * 2 * model.params, rel=1e-9)
    p = plan(model, cluster(nodes=1), parse_strategy("tp=8"), Training())
    act = 4096 * 4096 * 2  # b*s*h fp16
    assert p.micro_batches == 8  # global batch 8 sequences on dp=1
    assert p.bytes_per_gpu == 4 * 32 * 8 * 2 * 7 / 8 * act
    assert p.comm_time_s == pytest.approx(4 * 32 * 8 * ring_all_reduce_s(8, act, FAST))
    assert all(c.shape.intra for c in p.collectives)
    assert p.exposed_s == p.comm_time_s  # TP is on the critical path


def test_pipeline_bubble_and_step_time():
    model = PRESETS["7b"]
    p = plan(model, cluster(nodes=2), parse_strategy("pp=4"), Training(compute_s=1.0))
    assert p.micro_batches == 4  # 16 sequences over dp=4
    assert p.bubble_s == pytest.approx(3 / 4)  # (p-1)/m of compute
    idle = p.bubble_s / (p.bubble_s + p.compute_s)
    assert idle == pytest.approx(3 / 7)  # (p-1)/(m+p-1), Narayanan et al. 2021
    assert p.step_time_s == pytest.approx(1.0 + p.exposed_s + 0.75)


def test_dollars_follow_the_seed():
    t = Training(bucket_bytes=0, steps_per_second=1.0)
    p = plan(SEED, cluster(price=30.0), parse_strategy("ddp"), t)
    assert p.usd_per_step == pytest.approx(p.exposed_s * 30 / 3600 * 8)
    assert p.usd_per_day == pytest.approx(p.usd_per_step * 86400)
    p = plan(SEED, cluster(price=30.0), parse_strategy("ddp"), Training(compute_s=0.2))
    assert p.usd_per_day == pytest.approx(p.usd_per_step * 86400 / p.step_time_s)


def test_compute_from_flops():
    t = Training(tflops=1000.0, mfu=0.5, global_batch=16)
    p = plan(PRESETS["7b"], cluster(nodes=2), parse_strategy("ddp"), t)
    want = 6 * PRESETS["7b"].params * 16 * 4096 / (16 * 1000e12 * 0.5)
    assert p.compute_s == pytest.approx(want)


def test_verdicts():
    big = plan(PRESETS["7b"], cluster(nodes=8), parse_strategy("ddp"), Training(compute_s=0.2))
    assert not big.fits_memory
    assert big.verdict.startswith("does not fit: model states need 108 GB per GPU")
    assert "use zero" in big.verdict
    easy = plan(SEED, cluster(), parse_strategy("zero1"), Training(compute_s=100.0))
    assert easy.verdict.startswith("compute-bound")
    tp = plan(PRESETS["7b"], cluster(nodes=2), parse_strategy("tp=16"), Training(compute_s=0.1))
    assert "tp=16 spans 2 nodes: keep tp within a node (<= 8)" in tp.verdict
    bubble = plan(PRESETS["7b"], cluster(), parse_strategy("pp=8"), Training(compute_s=10.0))
    assert "pipeline bubble" in bubble.verdict


def test_compare_ranks_by_step_time_fitting_first():
    ranked = compare(
        PRESETS["7b"], cluster(nodes=8), [parse_strategy(s) for s in ("ddp", "zero3", "tp=8")],
        Training(compute_s=0.2),
    )
    assert [p.layout.flavor for p in ranked][-1] == "ddp"  # does not fit: last
    steps = [p.step_time_s for p in ranked[:-1]]
    assert steps == sorted(steps)


@pytest.mark.parametrize(
    ("strategy", "model", "message"),
    [
        ("tp=3", PRESETS["7b"], "not divisible by tp x pp = 3 x 1"),
        ("pp=64", PRESETS["7b"], "pp=64 pipeline stages but the model has 32 layers"),
        ("tp=2", SEED, "needs the model's shape"),
    ],
)
def test_bad_layouts(strategy, model, message):
    with pytest.raises(RingtreeError, match=message):
        plan(model, cluster(nodes=8), parse_strategy(strategy), Training())


def test_global_batch_must_split_over_dp():
    with pytest.raises(RingtreeError, match="global batch of 10 sequences"):
        plan(SEED, cluster(), parse_strategy("ddp"), Training(global_batch=10))


def test_hierarchical_all_reduce_where_cheaper(monkeypatch):
    monkeypatch.delenv("RINGTREE_ALGO")
    from ringtree.algorithms import BuildSpec
    from ringtree.cost.select import choose
    from ringtree.cost.terms import INTER, INTRA

    t = Training(bucket_bytes=0)
    p = plan(SEED, cluster(nodes=4), parse_strategy("ddp"), t)  # 4 nodes x 8, fast inside
    (c,) = p.collectives
    assert c.call.hierarchical and c.to_json()["hierarchical"]
    # intra 2(g-1) steps on FAST, inter 2(M-1) steps of S/g on SLOW (g = 8, M = 4)
    want = 14 * FAST.alpha_s + 14 * 14e9 / 8 / FAST.bandwidth_Bps
    want += 6 * SLOW.alpha_s + 6 * 14e9 / 8 / 4 / SLOW.bandwidth_Bps
    assert c.time_s == pytest.approx(want, rel=1e-12)
    flat = choose("all-reduce", 32, 14 * 10**9, SLOW, itemsize=2)  # every flat algorithm
    assert c.time_s < flat.chosen.time_s
    # an intra-node link slower than the network: flat wins and nothing says hierarchical
    slow_inside = Placement(4, 8, Link("slow-pcie", 5e9, alpha_s=5e-6), SLOW)
    (c,) = plan(SEED, slow_inside, parse_strategy("ddp"), t).collectives
    assert not c.call.hierarchical
    spec = BuildSpec(ranks_per_node=8)
    both = choose("all-reduce", 32, 14 * 10**9, {INTRA: slow_inside.intra, INTER: SLOW},
                  itemsize=2, spec=spec)
    assert c.call.algorithm == both.chosen.algorithm != "hierarchical"


def test_verdict_asks_for_buckets_when_one_all_reduce_cannot_overlap():
    h200 = Placement(1, 8, FAST, SLOW, gpu_memory_bytes=141 * 10**9)
    p = plan(SEED, h200, parse_strategy("ddp"), Training(bucket_bytes=0, compute_s=0.2))
    assert "bucket it" in p.verdict
    bucketed = plan(SEED, h200, parse_strategy("ddp"), Training(compute_s=0.2))
    assert bucketed.exposed_s < p.exposed_s  # buckets hide what backward can


def test_a_suggested_zero_stage_is_priced_faster_and_fits():
    model, c, t = PRESETS["7b"], cluster(nodes=8), Training(compute_s=0.2)
    z3 = plan(model, c, parse_strategy("zero3"), t)
    assert "use zero" in z3.verdict
    flavor = z3.verdict.split("use ")[1].split(" ")[0]
    alt = plan(model, c, parse_strategy(flavor), t)
    assert alt.fits_memory and alt.step_time_s < 0.95 * z3.step_time_s
    assert "instead of" in z3.verdict
    # 70B on 16,384 GPUs: only ZeRO-3's states fit in 80 GB, so nothing to switch to
    huge = Placement(2048, 8, FAST, SLOW)
    z3 = plan(PRESETS["70b"], huge, parse_strategy("zero3"), Training(compute_s=1.0))
    assert "use zero" not in z3.verdict and "shrink dp with tp/pp" in z3.verdict


def test_zero3_across_nodes_uses_hierarchical_gathers(monkeypatch):
    monkeypatch.delenv("RINGTREE_ALGO")
    model = PRESETS["7b"]
    p = plan(model, cluster(nodes=8), parse_strategy("zero3"), Training())
    assert all(c.call.algorithm == "hierarchical" for c in p.collectives)
    layer = 2 * model.params // 32  # one layer's fp16 parameters, S
    g, m = 8, 8  # 8 nodes of 8
    one = (g - 1) * FAST.alpha_s + (g - 1) / g * layer / FAST.bandwidth_Bps
    one += (m - 1) * SLOW.alpha_s + (m - 1) / m * layer / g / SLOW.bandwidth_Bps
    for c in p.collectives:
        assert c.time_s == pytest.approx(32 * one, rel=1e-9)
