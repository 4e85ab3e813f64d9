"""Attention's cost as the sequence grows: causal FLOPs 2 s^2 q per layer forward at
FlashAttention's rate, which falls on short sequences (FlashAttention-3's H100 figures); the
Triton FlashAttention of 2022 slower by Dao 2023's ratios."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringtree.cost.clusters import get_cluster
from ringtree.plan.compute import (
    FLASH_BACKWARD,
    FLASH_HALF_KEYS,
    Device,
    Slice,
    attention_time,
    layer_time,
)
from ringtree.plan.placement import on_cluster
from ringtree.plan.planner import plan
from ringtree.plan.presets import get_model
from ringtree.plan.record import Training
from ringtree.plan.strategy import Layout

H100 = Device.of(get_cluster("dgx-h100").gpu)
LLAMA3_8B = get_model("llama3-8b")


def test_flash_attention_forward_hand_computed():
    s, q = 8192, 4096
    lt = layer_time(LLAMA3_8B, Slice(s, s, 1, False, 1, "flash"), H100)
    flops = 2 * s * s * q  # causal: half of 4 s^2 q
    rate = 989e12 * 0.35 * s / (s + FLASH_HALF_KEYS)
    assert lt.attention_fwd == pytest.approx(flops / rate + 3e-6, rel=1e-9)
    # at FLASH_HALF_KEYS keys the kernel runs at half its long-sequence rate
    k = H100.eff.kernel_s
    half, long = H100.flash_s(1e12, FLASH_HALF_KEYS) - k, H100.flash_s(1e12, 1e12) - k
    assert half == pytest.approx(2 * long, rel=1e-6)
    assert FLASH_BACKWARD == 2.5


def test_triton_attention_is_flash_1_4_times_forward_2_times_backward():
    # Dao 2023 (FlashAttention-2), Sec. 4.1: FA2 1.3-1.5x faster than the Triton version in
    # the forward (the middle, 1.4), about 2x in the backward; flash's backward 2.5 x forward
    a100 = Device.of(get_cluster("dgx-a100").gpu)
    s, q = 4096, 4096
    sl = Slice(s, s, 1, False, 1, "triton")
    fwd, bwd = attention_time(LLAMA3_8B, sl, a100)
    flops = 2 * s * s * q
    flash_fwd = flops / (312e12 * 0.6 * s / (s + FLASH_HALF_KEYS)) + 3e-6
    assert fwd == pytest.approx(1.4 * flash_fwd, rel=1e-9)
    assert bwd == pytest.approx(2.0 * 2.5 * flash_fwd, rel=1e-9)
    # the layer's other kernels are the flash layer's
    flash = layer_time(LLAMA3_8B, Slice(s, s, 1, False, 1, "flash"), a100)
    triton = layer_time(LLAMA3_8B, sl, a100)
    assert triton.forward - flash.forward == pytest.approx(0.4 * flash_fwd, rel=1e-9)
    assert triton.wgrad == flash.wgrad


@given(st.integers(8, 17), st.integers(1, 5), st.sampled_from([1, 2, 8]))
def test_a_longer_sequence_is_never_cheaper_per_token(log_s, longer, tp):
    # the same tokens per micro-batch (2^17: fewer, longer sequences), each against its keys
    tokens = 2**17
    s, t = 2**log_s, 2**min(17, log_s + longer)
    per = [(lambda lt: lt.forward + lt.backward)(
        layer_time(LLAMA3_8B, Slice(tokens, n, tp, tp > 1, 1, "flash"), H100)) for n in (s, t)]
    assert per[1] >= per[0]


def test_llama3_8b_at_64k_costs_at_least_1_4_times_per_token_what_it_does_at_8k():
    pl = on_cluster(get_cluster("dgx-h100"), 1)
    per_token = []
    for seq, gbs in ((8192, 64), (65536, 8)):
        m = LLAMA3_8B.with_overrides(seq_len=seq)
        p = plan(m, pl, Layout("zero3", 8, 1, 1), Training(global_batch=gbs, recompute="full"),
                 with_verdict=False)
        per_token.append(p.step_time_s / p.tokens)
    assert per_token[1] / per_token[0] >= 1.4
