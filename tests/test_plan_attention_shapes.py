"""Multi-head latent attention (DeepSeek-V3), sliding-window attention (GPT-OSS) and the MoE
token permutation: parameters and FLOPs against hand-computed figures, times as rules."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringtree.cost.clusters import get_cluster
from ringtree.plan.compute import Device, Slice, layer_time
from ringtree.plan.flops import SELECTIVE, layer_flops, model_flops, recompute_flops
from ringtree.plan.model import Model, active_params, attention_params, count_params
from ringtree.plan.moe import permute_bytes, permute_passes
from ringtree.plan.presets import get_model

H100 = Device.of(get_cluster("dgx-h100").gpu)
DS = get_model("deepseek-v3")
#: GPT-OSS 120B (OpenAI's gpt-oss model card; Megatron-Bridge GPTOSSProvider120B): 36 layers of
#: 2,880, 64 query heads of 64, 8 key/value heads, 128 experts of 2,880 (top-4), window 128 on
#: every other layer.
OSS = Model("gpt-oss-120b", 0, 36, 2880, 4096, heads=64, kv_heads=8, head_dim=64, vocab=201088,
            gated=True, experts=128, top_k=4, expert_ffn=2880, window=128, window_every=2)


def test_deepseek_v3_mla_parameters_by_hand():
    h, a = 7168, 128
    q = 7168 * 1536 + 1536 * a * (128 + 64)  # q_a_proj, q_b_proj
    kv = 7168 * (512 + 64) + 512 * a * (128 + 128)  # kv_a_proj_with_mqa, kv_b_proj
    o = a * 128 * h
    assert attention_params(DS) == q + kv + o == 187_105_280
    # the report's 671B total, 37B active (DeepSeek-AI 2024, Sec. 4.2), MTP module excluded
    assert DS.params == pytest.approx(671e9, rel=1e-3)
    assert active_params(DS) == pytest.approx(37e9, rel=0.02)


def test_mla_flops_by_hand():
    s, a = 4096, 128
    f = layer_flops(DS)  # a dense layer (MLP 18,432)
    projections = 2 * 187_105_280
    mlp = 2 * 3 * 7168 * 18432
    assert f.dense == s * (projections + mlp)
    # Q K^T over 128 + 64 dimensions, (softmax) V over 128: 2 s^2 a (192 + 128)
    assert f.attention == 2 * s * s * a * (192 + 128)


def test_windowed_flops_by_hand():
    s = 4096
    full, windowed = layer_flops(OSS), layer_flops(OSS, windowed=True)
    assert full.attention == 2 * s * s * 64 * (64 + 64)
    assert windowed.attention == 2 * s * 128 * 64 * (64 + 64)
    assert windowed.dense == full.dense
    assert OSS.windowed_layers == 18
    dense = OSS.layers * layer_flops(OSS, moe=True).dense
    attention = 18 * full.attention + 18 * windowed.attention
    logits = 2 * s * 2880 * 201088
    assert model_flops(OSS, 2) == pytest.approx(3 * 2 * (dense + attention + logits))
    assert recompute_flops(OSS, 2, SELECTIVE) == pytest.approx(2 * attention)


def test_gpt_oss_counts_as_its_model_card():
    # OpenAI's gpt-oss model card, Table 1: 116.83B parameters, 5.13B active (the card's active
    # count leaves out the input embedding); biases are not counted here
    m = OSS.with_overrides(layers=36)
    assert m.params == pytest.approx(116.83e9, rel=1e-3)
    assert active_params(m) - 201088 * 2880 == pytest.approx(5.13e9, rel=2e-3)


def test_ordinary_attention_is_unchanged():
    m = get_model("llama3-8b")
    assert attention_params(m) == 2 * 4096 * 4096 + 2 * 4096 * 8 * 128
    assert layer_flops(m).attention == 4 * 8192 * 8192 * 4096
    assert count_params(m) == m.params


def test_a_window_makes_attention_cheaper_but_not_free():
    sl = Slice(4096, 4096, 1, False, 8, "flash")
    plain = OSS.with_overrides(window=0, window_every=0)
    assert plain.windowed_layers == 0 and plain.params == count_params(OSS)
    windowed, full = layer_time(OSS, sl, H100, True), layer_time(plain, sl, H100, True)
    assert windowed.attention_fwd < full.attention_fwd
    # half the layers still attend over 4,096 keys (causal: 2,048 on average): about half
    assert windowed.attention_fwd > 0.5 * full.attention_fwd


def test_permutation_bytes_by_hand():
    # 4,096 tokens, top-8, hidden 2,048, 16 local experts of an ep=8 group: permute, sort,
    # unsort, unpermute, each 4 t k h bytes (16-bit, read and written)
    assert permute_passes(16, 8) == 4 and permute_passes(1, 8) == 2 and permute_passes(8, 1) == 2
    assert permute_bytes(4096, 8, 2048, 16, 8) == 4 * 4 * 4096 * 8 * 2048
    assert permute_bytes(4096, 8, 2048, 1, 8) == 2 * 4 * 4096 * 8 * 2048
    assert permute_bytes(4096, 2, 4096, 1, 1, capacity=1.25) == 2 * 4 * 4096 * 2 * 1.25 * 4096


@given(st.sampled_from([16, 32, 64, 128, 256]), st.sampled_from([1024, 4096, 16384]),
       st.sampled_from([1, 8]))
def test_more_experts_at_the_same_active_parameters_never_faster(experts, tokens, ep):
    qwen = Model("qwen3-30b-a3b", 0, 48, 2048, 4096, heads=32, kv_heads=4, head_dim=128,
                 vocab=151936, gated=True, experts=8, top_k=8, expert_ffn=768)
    more = qwen.with_overrides(experts=experts)
    # the same active parameters but the router's (h x experts per layer)
    router = 48 * 2048 * (experts - 8)
    assert active_params(more) - router == active_params(qwen.with_overrides(experts=8))
    sl = Slice(tokens, 4096, 1, False, ep, "flash")
    few = layer_time(qwen.with_overrides(experts=8), sl, H100, True)
    many = layer_time(more, sl, H100, True)
    assert many.forward >= few.forward * (1 - 1e-9)
    assert many.backward >= few.backward * (1 - 1e-9)
