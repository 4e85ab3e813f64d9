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


def test_op_level_checkpointing_hand_computed():
    from ringtree.plan.checkpointing import _op_bytes_per_layer
    from ringtree.plan.memory import activation_bytes_per_layer

    # Llama 3 8B, one sequence of 8192 tokens, tp=1: q = h = 4096, k = v = 1024, f = 14336;
    # kept: input h, attention out q, and q, v, gate, down of the 7 GEMM outputs (every other)
    sb, h = 8192, 4096
    kept = h + 4096 + (4096 + 1024 + 14336 + h)
    assert _op_bytes_per_layer(M, 1, Layout("ddp", 1, 1, 1)) == 2 * sb * kept
    none, op, full = step("none"), step("op"), step("full")
    saved = activation_bytes_per_layer(M, 1, 1, False, "none", "flash") - 2 * sb * kept
    assert op.memory.activations == pytest.approx(none.memory.activations - 32 * saved, abs=1)
    assert full.memory.activations < op.memory.activations < none.memory.activations
    assert none.step_time_s < op.step_time_s < full.step_time_s
    # hardware FLOPs: half of the forward's GEMM FLOPs again
    gemms = (full.hardware_flops - none.hardware_flops) - (
        step("selective").hardware_flops - none.hardware_flops)
    assert op.hardware_flops == pytest.approx(none.hardware_flops + gemms / 2)


def test_op_level_checkpointing_of_experts_is_refused():
    from ringtree.errors import RingtreeError

    with pytest.raises(RingtreeError, match="dense models only"):
        plan(PRESETS["mixtral-8x7b"], on_cluster(get_cluster("dgx-h100"), 1),
             parse_strategy("zero3"), Training(recompute="op"), with_verdict=False)
