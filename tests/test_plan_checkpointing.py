"""Checkpointing every K-th layer: between no recomputation and full, by the share of the
layers checkpointed (hand-computed on Llama 3 8B's 32 layers)."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringtree.cost.clusters import get_cluster
from ringtree.plan.checkpointing import share
from ringtree.plan.placement import on_cluster
from ringtree.plan.planner import plan
from ringtree.plan.presets import PRESETS
from ringtree.plan.record import Training
from ringtree.plan.strategy import Layout, parse_strategy
from ringtree.plan.volumes import Batch, micro_batch_ops

M = PRESETS["llama3-8b"]
H100 = on_cluster(get_cluster("dgx-h100"), 1)


def step(rc, every=1, strategy="zero3"):
    tr = Training(global_batch=8, recompute=rc, recompute_every=every, framework="fsdp")
    return plan(M, H100, parse_strategy(strategy), tr, with_verdict=False)


def test_share_of_layers_checkpointed():
    lay = Layout("ddp", 1, 1, 1)
    assert share(M, lay, "full", 1) == 1.0 and share(M, lay, "none", 4) == 0.0
    assert share(M, lay, "full", 2) == 0.5  # 16 of 32
    assert share(M, lay, "full", 3) == 11 / 32  # ceil(32 / 3)
    assert share(M, Layout("ddp", 1, 1, 4), "full", 3) == 3 / 8  # 8 layers a stage


def test_every_second_layer_is_half_way_between_none_and_full():
    none, full, half = step("none"), step("full"), step("full", 2)
    want = none.memory.activations - 0.5 * (none.memory.activations - full.memory.activations)
    assert half.memory.activations == pytest.approx(want, abs=1)
    assert half.micro.backward == pytest.approx((none.micro.backward + full.micro.backward) / 2)
    assert half.hardware_flops == pytest.approx((none.hardware_flops + full.hardware_flops) / 2)


def test_tp_collectives_repeat_for_the_checkpointed_layers_only():
    lay = Layout("ddp", 1, 8, 1)
    calls = {k: {op.op: op.calls for op in micro_batch_ops(M, lay, Batch(
        2, full_recompute=True, recompute_every=k))} for k in (1, 4)}
    fwd = "all-reduce activations (tp fwd)"
    assert calls[1][fwd] == 2 * (32 + 32) and calls[4][fwd] == 2 * (32 + 8)


@settings(max_examples=10, deadline=None)
@given(k=st.integers(min_value=1, max_value=40))
def test_between_none_and_full(k):
    none, full, some = step("none"), step("full"), step("full", k)
    assert full.memory.activations <= some.memory.activations <= none.memory.activations
    assert none.step_time_s <= some.step_time_s * (1 + 1e-12)
    assert some.step_time_s <= full.step_time_s * (1 + 1e-12)
    assert replace(some.training, recompute_every=1) == full.training
