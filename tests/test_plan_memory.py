"""Memory per GPU: Korthikanti et al.'s activation formulas (their printed examples and our
evaluation of them in bench/published_training/activation_memory.toml), model states per ZeRO
stage, pipeline in-flight micro-batches."""

import tomllib
from pathlib import Path

import pytest

from ringtree.plan.memory import (
    OVERHEAD_BYTES,
    activation_bytes_per_layer,
    in_flight,
    memory,
    state_memory,
)
from ringtree.plan.model import Model
from ringtree.plan.presets import PRESETS
from ringtree.plan.strategy import Layout

DATA = Path(__file__).parent.parent / "bench" / "published_training" / "activation_memory.toml"
CASES = {
    "per_layer_gib_tensor_parallel": (False, "none"),
    "per_layer_gib_tensor_sequence_parallel": (True, "none"),
    "per_layer_gib_tensor_parallel_selective": (False, "selective"),
    "per_layer_gib_tensor_sequence_parallel_selective": (True, "selective"),
    "per_layer_gib_full_recompute": (False, "full"),
}


def gpt(d):
    h = d["hidden"]
    return Model(d["model"], 1, d["layers"], h, d["seq_len"], heads=d["heads"], ffn=4 * h,
                 vocab=51200, tied=True, dropout=True)


@pytest.mark.parametrize("d", tomllib.loads(DATA.read_text())["derived"], ids=lambda d: d["name"])
def test_korthikanti_activation_memory_per_layer(d):
    m = gpt(d)
    for key, (sp, rc) in CASES.items():
        got = activation_bytes_per_layer(m, d["micro_batch"], d["tp"], sp, rc, "unfused")
        assert got / 2**30 == pytest.approx(d[key], abs=6e-5), key  # printed to 4 decimals
    # eq. 5: the first 1F1B stage holds p micro-batches of L/p layers = L layers' worth
    sel = activation_bytes_per_layer(m, d["micro_batch"], d["tp"], True, "selective", "unfused")
    lay = Layout("ddp", 1, d["tp"], d["pp"], True)
    first = d["layers"] // d["pp"] * sel * in_flight(lay, 10**6) / 2**30
    assert first == pytest.approx(d["first_stage_gib_tensor_sequence_parallel_selective"],
                                  rel=2e-3)


def test_the_papers_own_examples():
    # Sec. 5: 5as/h = 80 for GPT-3, 64 for MT-NLG; selective recomputation saves 70 % and
    # 65 % of the activations (34 + 5as/h -> 34, here with tensor and sequence parallelism)
    g3 = Model("gpt3", 1, 96, 12288, 2048, heads=96, ffn=4 * 12288, vocab=51200, dropout=True)
    mt = Model("mtnlg", 1, 105, 20480, 2048, heads=128, ffn=4 * 20480, vocab=51200, dropout=True)
    for m, saved in ((g3, 0.70), (mt, 0.65)):
        tp = activation_bytes_per_layer(m, 1, 8, True, "none", "unfused")
        sel = activation_bytes_per_layer(m, 1, 8, True, "selective", "unfused")
        assert 1 - sel / tp == pytest.approx(saved, abs=0.01)


def test_interleaving_holds_more_in_flight():
    assert in_flight(Layout("ddp", 1, 8, 1), 64) == 1
    assert in_flight(Layout("ddp", 1, 8, 8), 64) == 8
    assert in_flight(Layout("ddp", 1, 8, 8), 3) == 3  # fewer micro-batches than stages
    # Korthikanti et al. 2022, Sec. 4.2.3: x (1 + (p-1)/(p v))
    assert in_flight(Layout("ddp", 1, 8, 8, v=3), 64) == pytest.approx(8 * (1 + 7 / 24))


@pytest.mark.parametrize(
    ("flavor", "grads", "opt"),
    [("ddp", 4, 12), ("zero1", 4, 12 / 64), ("zero2", 4 / 64, 12 / 64), ("zero3", 4 / 64, 12 / 64)],
)
def test_model_states_mixed_precision(flavor, grads, opt):
    m = PRESETS["7b"]
    w, g, o, other = state_memory(m, Layout(flavor, 64, 1, 1))
    psi = m.params  # pp = tp = 1: every parameter (untied embeddings counted)
    assert w == pytest.approx(2 * psi / (64 if flavor == "zero3" else 1), rel=1e-6)
    assert g == pytest.approx(grads * psi, rel=1e-6)  # fp32 main gradients
    assert o == pytest.approx(opt * psi, rel=1e-6)  # fp32 master weights + Adam moments
    assert other >= OVERHEAD_BYTES
    _, g_ds, _, _ = state_memory(m, Layout(flavor, 64, 1, 1), framework="deepspeed")
    # 16-bit gradients beside fp32 ones; ZeRO-3 reduces them into its fp32 partition (18 B)
    assert g_ds == pytest.approx(g * (4 if flavor == "zero3" else 6) / 4, rel=1e-9)
    # gradients reduced in BF16 (Megatron-Core's grad_reduce_in_fp32=False): 2 bytes, the rest as is
    w16, g16, o16, _ = state_memory(m, Layout(flavor, 64, 1, 1), main_grad_bytes=2)
    assert (w16, o16) == (w, o)
    assert g16 == pytest.approx(grads / 2 * psi, rel=1e-6)


def test_megatron_distributed_optimizer_is_6_plus_12_over_d():
    # Megatron-LM docs/source/distrib_optimizer.md: bf16 params, fp32 grads: 18 B/param
    # without the distributed optimizer, 6 + 12/d with it
    m = PRESETS["7b"]
    for flavor, per in (("ddp", 18), ("zero1", 6 + 12 / 64)):
        w, g, o, _ = state_memory(m, Layout(flavor, 64, 1, 1))
        assert w + g + o == pytest.approx(per * m.params, rel=1e-6)


def test_fsdp_keeps_16_bytes_per_parameter_sharded():
    # FSDP2 (torchtitan): fp32 sharded params (the master copy) + fp32 grads + Adam's two
    # moments = 16 B/param over the shard group; DeepSpeed ZeRO-3 keeps 18
    m = PRESETS["7b"]
    w, g, o, other = state_memory(m, Layout("zero3", 64, 1, 1), framework="fsdp")
    assert w + g + o == pytest.approx(16 * m.params / 64, rel=1e-6)
    w, g, o, _ = state_memory(m, Layout("zero3", 64, 1, 1), framework="deepspeed")
    assert w + g + o == pytest.approx(18 * m.params / 64, rel=1e-6)
    # two bf16 blocks gathered + one block's fp32 reduce-scatter input: 8 B/param / L
    assert other - OVERHEAD_BYTES == pytest.approx(8 * m.params / m.layers, rel=1e-6)


def test_fsdp_without_reshard_keeps_the_16_bit_weights_whole():
    m = PRESETS["7b"]
    w3 = state_memory(m, Layout("zero3", 64, 1, 1), framework="fsdp")
    w2 = state_memory(m, Layout("zero2", 64, 1, 1), framework="fsdp")
    assert w2[0] == pytest.approx((2 + 4 / 64) * m.params, rel=1e-6)
    assert sum(w2) > sum(w3)


def test_hsdp_shards_over_its_shard_group():
    m = PRESETS["7b"]
    hsdp = state_memory(m, Layout("zero3", 64, 1, 1, shard=8), framework="fsdp")
    fsdp8 = state_memory(m, Layout("zero3", 8, 1, 1), framework="fsdp")
    assert hsdp == fsdp8


def test_recomputation_and_sequence_parallelism_save_memory():
    m, lay = PRESETS["70b"], Layout("ddp", 4, 8, 2, sp=True)
    none, sel, full = (memory(m, lay, 1, 64, rc).total for rc in ("none", "selective", "full"))
    assert full < sel <= none
    assert memory(m, Layout("ddp", 4, 8, 2), 1, 64).activations > memory(m, lay, 1, 64).activations


def test_pipeline_splits_weights_and_the_first_stage_keeps_the_fewer_layers():
    m = PRESETS["llama3-405b"]  # 126 layers on 16 stages: 8 on the busiest, 7 on the first
    one = memory(m, Layout("zero1", 8, 8, 16, sp=True), 1, 32)
    two = memory(m, Layout("zero1", 16, 8, 8, sp=True), 1, 32)
    assert two.weights > 1.9 * one.weights
