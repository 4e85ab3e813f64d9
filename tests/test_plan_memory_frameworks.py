"""Memory as each framework keeps it: the loss's logits (Megatron's vocab-parallel
cross-entropy, PyTorch's fp32 one, FlashAttention's fused one), FSDP2's unsharded fp32
gradients under a pipeline, the GPUs' CUDA-visible capacity; figures computed by hand."""

from ringtree.cost.clusters import gpu_of, gpus
from ringtree.plan.memory import activation_memory, logit_bytes, memory, state_memory
from ringtree.plan.model import Model
from ringtree.plan.strategy import Layout

#: MPT-1B as llm-foundry's benchmark ran it (scripts/train/yamls/pretrain/mpt-1b.yaml, heads
#: changed for d_head = 128): no dropout, GeLU, tied embeddings.
MPT_1B = Model("mpt-1b", 1, 24, 2048, 2048, heads=16, ffn=8192, vocab=50368, tied=True,
               dropout=False)


def test_bytes_per_logit_by_loss():
    assert logit_bytes("", "megatron") == 6  # 16-bit logits + fp32 softmax in place
    assert logit_bytes("", "deepspeed") == 6  # Megatron-DeepSpeed's, the same
    assert logit_bytes("", "fsdp") == 12  # fp32 log-softmax, its gradient, the input's
    assert logit_bytes("fused", "fsdp") == 4  # bf16 logits saved + bf16 gradient
    assert logit_bytes("vocab-parallel", "fsdp") == 6


def test_mpt_1b_at_micro_batch_10_by_hand():
    # 32 s b h per layer without dropout (Korthikanti's 34 less the two masks) under
    # FlashAttention: s b h = 2048 * 10 * 2048 = 41,943,040; 24 layers + the backward's one
    # layer of activation gradients = 25 * 32 * 41,943,040 = 33,554,432,000 B; logits under
    # the fused loss 4 B * 20,480 tokens * 50,368 = 4,126,146,560 B: 37,680,578,560 B in all
    lay = Layout("zero3", 128, 1, 1)
    got = activation_memory(MPT_1B, lay, 10, 1, framework="fsdp", loss="fused")
    assert got == 25 * 32 * 41_943_040 + 4_126_146_560 == 37_680_578_560
    # PyTorch's fp32 cross-entropy would hold 8 B more per logit: 8,252,293,120 B
    torch = activation_memory(MPT_1B, lay, 10, 1, framework="fsdp")
    assert torch - got == 8 * 20_480 * 50_368 == 8_252_293_120


def test_fsdp2_under_a_pipeline_accumulates_unsharded_fp32_gradients():
    m = Model("x", 8e9, 32, 4096)  # shapeless: 8e9 parameters split over the stages
    w, g, o, _ = state_memory(m, Layout("zero2", 4, 1, 2), framework="fsdp")
    assert g == 4 * 4e9  # the stage's 4e9 parameters, unsharded, in fp32
    assert o == 8 * 4e9 / 4  # Adam's moments stay sharded over dp = 4
    _, g1, _, _ = state_memory(m, Layout("zero2", 4, 1, 1), framework="fsdp")
    assert g1 == 4 * 8e9 / 4  # without a pipeline FSDP2 reduce-scatters every backward
    _, gm, _, _ = state_memory(m, Layout("zero1", 4, 1, 2))
    assert gm == 4 * 4e9  # Megatron's fp32 main gradients are unsharded under zero1 anyway


def test_capacity_is_what_cuda_reports_where_known():
    assert gpus()["a100-sxm-40gb"].memory_bytes == 40536 * 2**20  # 39.6 GiB, not 40e9 B
    assert gpus()["a100-sxm-80gb"].memory_bytes == 80 * 10**9  # none measured: as sold
    given = gpu_of({"preset": "a100-sxm-40gb", "memory_gb": 48}, "test")
    assert given.memory_bytes == 48 * 10**9  # a capacity given replaces the preset's



def test_fsdp2_with_a_bf16_model_keeps_8_bytes_and_no_sync_accumulates_in_fp32():
    m = Model("x", 8e9, 32, 4096)
    w, g, o, _ = state_memory(m, Layout("zero3", 8, 1, 1), framework="fsdp", param_bytes=2)
    assert (w, g, o) == (2 * 1e9, 2 * 1e9, 4 * 1e9)  # bf16 shards, bf16 gradients and moments
    _, g, _, _ = state_memory(m, Layout("zero3", 8, 1, 1), framework="fsdp", param_bytes=2,
                              no_sync=True)
    assert g == 4 * 8e9  # every parameter's gradient, unsharded, in fp32
    one, four = (memory(m, Layout("zero3", 8, 1, 1), 1, k, framework="fsdp", param_bytes=2,
                        no_sync=True).gradients for k in (1, 4))
    assert (one, four) == (2 * 1e9, 4 * 8e9)  # one micro-batch: reduce-scattered, sharded
