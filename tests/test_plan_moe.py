"""Mixture-of-experts compute: FLOPs from the parameters a token uses, grouped GEMMs that run
further from peak as the per-expert batch shrinks, the router priced."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringtree.cost.clusters import get_cluster
from ringtree.plan.compute import Device, Slice, layer_time
from ringtree.plan.flops import model_flops
from ringtree.plan.model import active_params, count_params
from ringtree.plan.placement import on_cluster
from ringtree.plan.planner import plan
from ringtree.plan.presets import get_model
from ringtree.plan.record import Training
from ringtree.plan.strategy import parse_strategy

H100 = Device.of(get_cluster("dgx-h100").gpu)
MIXTRAL = get_model("mixtral-8x7b")


def test_mixtral_counts_its_active_parameters():
    # Jiang et al. 2024: 46.7B parameters, 12.9B active per token
    assert MIXTRAL.params == pytest.approx(46.7e9, rel=0.01)
    assert active_params(MIXTRAL) == pytest.approx(12.9e9, rel=0.01)
    p = plan(MIXTRAL, on_cluster(get_cluster("dgx-h100"), 8), parse_strategy("zero1,ep=8"),
             Training(global_batch=256, recompute="selective"), with_verdict=False)
    per_token = p.model_flops / p.tokens / 6
    # 6 x active parameters, plus attention: 12 s q L / 6 = 2 s q L per token
    attention = 2 * 4096 * 4096 * 32
    assert per_token == pytest.approx(active_params(MIXTRAL) + attention, rel=0.01)
    assert 11e9 <= per_token <= 18e9
    assert p.mfu == pytest.approx(p.model_flops / (p.step_time_s * 64 * 989e12))


@given(st.sampled_from([8, 16, 32, 64, 128]))
def test_more_experts_with_the_same_active_parameters_same_flops(experts):
    wider = MIXTRAL.with_overrides(experts=experts)
    assert wider.params > MIXTRAL.params or experts == 8
    assert model_flops(wider, 4) == pytest.approx(model_flops(MIXTRAL, 4))


def test_grouped_gemms_slow_down_as_the_per_expert_batch_shrinks():
    # the same routed work (top-2 of experts of 14336) spread over more, smaller batches
    tokens, ep = 4096, 8
    times = []
    for experts in (8, 64, 512):
        m = MIXTRAL.with_overrides(experts=experts)
        times.append(layer_time(m, Slice(tokens, 4096, 1, False, ep, "flash"), H100, True))
    # per GPU: experts/ep local experts, each on tokens*ep*top_k/experts rows
    assert times[0].forward < times[1].forward < times[2].forward
    # 512 experts: 128 rows each, their weights' bytes dominate (memory-bound)
    local, rows, h, f = 64, 4096 * 8 * 2 / 512, 4096, 14336
    weight_bytes = local * 2 * 3 * h * f
    assert times[2].wgrad >= weight_bytes / (H100.hbm_Bps * H100.eff.memory)
    assert rows == 128


def test_the_router_is_priced_and_counted_in_the_parameters_not_the_flops():
    m = MIXTRAL
    # the router's h x experts weights are parameters (Mixtral's 46.7B includes them) ...
    no_router = count_params(m) - 32 * 4096 * 8
    assert count_params(m) > no_router
    # ... its GEMM is timed in the layer (tokens x h @ h x experts, BF16), not in the FLOPs
    lt = layer_time(m, Slice(4096, 4096, 1, False, 1, "flash"), H100, True)
    router = H100.gemm_s(4096, 8, 4096)
    assert 0 < router < lt.wgrad
    assert model_flops(m, 1) == pytest.approx(
        3 * 4096 * (32 * (2 * (2 * 4096 * 4096 + 2 * 4096 * 1024) + 2 * 2 * 3 * 4096 * 14336
                          + 4 * 4096 * 4096) + 2 * 4096 * 32000))
