"""How long one GPU computes a transformer layer: a roofline per kernel, with the GEMMs'
achieved fraction of peak depending on their sizes.

Each kernel of a layer's forward (the GEMMs, attention, norms, activation, residual adds) takes

    max(FLOPs / (peak x e_gemm x tail), bytes / (HBM bandwidth x e_mem)) + kernel_s

where ``tail`` is the GEMM's wave quantisation, smoothed: a GEMM of M x N outputs runs in
tiles of 128 x 256 spread over the GPU's SMs, and on average half a wave is lost at the end
(waves / (waves + 1/2); cuBLAS's split-K and tile choices keep it from being the full step
function). So GEMMs that tensor parallelism and small micro-batches shrink run further from
peak, and kernels that move more than they compute (norms, softmax, dropout, activations,
the attention scores before FlashAttention) are priced by their bytes.

The backward pass runs each GEMM twice (input and weight gradients), reads and writes about
twice the forward's bytes in memory-bound kernels, and FlashAttention's backward does 2.5x its
forward's work (Dao 2023: five matrix products instead of two). ``e_gemm`` is the one
constant fitted per GPU generation on published training runs (bench/plan_vs_published.py);
``--calibrate-step`` fits it to a measured step instead. The rest are fixed: HBM efficiency
0.8 (STREAM-like kernels reach 80-90 % of the datasheet), FlashAttention at 0.6 of peak on
Ampere (Dao 2023, FlashAttention-2: "50-73 % of the theoretical maximum FLOPs/s on A100") and
0.35 on Hopper (Shah et al. 2024, FlashAttention-3: FlashAttention-2 "achieves only 35 %
utilization on H100"), 3 us per kernel.

Attention ``flash`` (FlashAttention, fused, causal: half the scores computed) or ``unfused``
(Megatron-LM before 2022: batched GEMMs for the scores and their product with the values,
a fused scale-mask-softmax, dropout on the s x s scores: all of them full size, memory-bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ringtree.cost.clusters import Gpu
from ringtree.errors import RingtreeError
from ringtree.plan.model import Model

FLASH, UNFUSED = "flash", "unfused"
ATTENTION = (FLASH, UNFUSED)
#: SMs per GPU generation (NVIDIA whitepapers: V100 80, A100 108, H100 SXM 132, B200 148,
#: L40S 142); a GEMM's tiles are spread over them.
SMS = {"volta": 80, "ampere": 108, "hopper": 132, "blackwell": 148, "ada": 142}
TILE_M, TILE_N = 128, 256


@dataclass(frozen=True)
class Efficiency:
    """What one GPU achieves (module doc). gemm: fraction of the dense peak a large GEMM
    reaches; memory: fraction of HBM bandwidth; flash: FlashAttention's fraction of the peak;
    kernel_s: fixed time per kernel; source: where ``gemm`` comes from."""

    gemm: float
    memory: float = 0.8
    flash: float = 0.35
    kernel_s: float = 3e-6
    source: str = ""


#: e_gemm per GPU generation, fitted by ``bench/plan_vs_published.py --fit`` on the runs it
#: names as calibration runs (Ampere: Korthikanti et al. 2022's 22B; Hopper: the Megatron-LM
#: README's 70B); the others are checks. Volta, Ada and Blackwell are not calibrated: they
#: take Hopper's figure, and say so.
GENERATION: dict[str, Efficiency] = {
    "ampere": Efficiency(0.7214, flash=0.6, source="fitted on Korthikanti et al. 2022, 175B"),
    "hopper": Efficiency(0.5816, flash=0.35, source="fitted on the Megatron-LM README, 70B"),
}
UNCALIBRATED = "not calibrated for {arch}: Hopper's efficiency assumed"


def default_efficiency(gpu: Gpu) -> Efficiency:
    """The generation's efficiency (Hopper's, marked uncalibrated, for the others)."""
    eff = GENERATION.get(gpu.arch)
    if eff is not None:
        return eff
    base = GENERATION["hopper"]
    return Efficiency(base.gemm, base.memory, base.flash, base.kernel_s,
                      UNCALIBRATED.format(arch=gpu.arch))


@dataclass(frozen=True)
class Device:
    """A GPU as the roofline sees it: peak FLOP/s, HBM bytes/s, SMs, and its efficiency."""

    peak_flops: float
    hbm_Bps: float
    sms: int
    eff: Efficiency

    @classmethod
    def of(cls, gpu: Gpu, eff: Efficiency | None = None) -> Device:
        """From a GPU preset (its dense BF16 peak and HBM bandwidth)."""
        if gpu.bf16_tflops <= 0 or gpu.memory_bandwidth_GBps <= 0:
            raise RingtreeError(
                f"GPU {gpu.key} has no BF16 peak or memory bandwidth: the compute model needs "
                "both (or give --compute / --tflops with --mfu)"
            )
        return cls(gpu.bf16_tflops * 1e12, gpu.memory_bandwidth_GBps * 1e9,
                   SMS.get(gpu.arch, 132), eff or default_efficiency(gpu))

    def gemm_s(self, m: float, n: float, k: float, batch: float = 1) -> float:
        """One (batched) GEMM: ``batch`` products (m x k) @ (k x n) in bf16 (module doc)."""
        if m <= 0 or n <= 0 or k <= 0 or batch <= 0:
            return 0.0
        flops = 2 * batch * m * n * k
        waves = batch * math.ceil(m / TILE_M) * math.ceil(n / TILE_N) / self.sms
        tail = waves / (waves + 0.5)
        compute = flops / (self.peak_flops * self.eff.gemm * tail)
        memory = 2 * batch * (m * k + k * n + m * n) / (self.hbm_Bps * self.eff.memory)
        return max(compute, memory) + self.eff.kernel_s

    def memory_s(self, nbytes: float, kernels: int = 1) -> float:
        """Memory-bound kernels moving ``nbytes`` in all."""
        return nbytes / (self.hbm_Bps * self.eff.memory) + kernels * self.eff.kernel_s

    def flash_s(self, flops: float) -> float:
        """A fused attention kernel doing ``flops``."""
        rate = self.peak_flops * self.eff.flash
        return flops / rate + self.eff.kernel_s


@dataclass(frozen=True)
class LayerTime:
    """One layer, one micro-batch, one GPU, compute only (seconds).

    forward, backward: the passes; attention_fwd: the attention scores and their product
    with the values in the forward (what selective recomputation repeats); wgrad: the weight
    gradients' GEMMs in the backward (what the backward's TP collectives overlap with).
    """

    forward: float
    backward: float
    attention_fwd: float
    wgrad: float


@dataclass(frozen=True)
class Slice:
    """What one GPU computes of a layer: ``tokens`` (b s / cp) of a micro-batch, 1/tp of the
    heads and MLP, 1/tp of the tokens in norms and residuals under sequence parallelism,
    E / ep experts, the attention of its tokens against all ``keys`` (s)."""

    tokens: int
    keys: int
    tp: int
    sp: bool
    ep: int
    attention: str


def _mlp(dev: Device, tokens: float, hidden: int, ffn: int, tp: int, gated: bool) -> tuple:
    """Forward and weight-gradient seconds of one MLP on ``tokens`` (and its activation)."""
    up = dev.gemm_s(tokens, (2 if gated else 1) * ffn / tp, hidden)
    down = dev.gemm_s(tokens, hidden, ffn / tp)
    act = dev.memory_s((6 if gated else 4) * tokens * ffn / tp)
    return up + down + act, up + down


def layer_time(m: Model, sl: Slice, dev: Device, moe: bool = False) -> LayerTime:
    """Compute time of one layer (dense, or MoE when ``moe``) for one micro-batch slice."""
    assert m.hidden and m.heads
    h, t, tp = m.hidden, sl.tokens, sl.tp
    q, kvd = m.heads * m.dim, m.kv * m.dim
    local = t / tp if sl.sp else t  # tokens of norms and residuals on this GPU
    # projections
    qkv = dev.gemm_s(t, (q + 2 * kvd) / tp, h)
    out = dev.gemm_s(t, h, q / tp)
    gemm_f = qkv + out
    wgrad = qkv + out
    # MLP, or experts
    if moe:
        assert m.expert_ffn
        cf = m.capacity_factor or 1.0
        per_expert = t * sl.ep * m.top_k * cf / m.experts
        local_experts = m.experts // sl.ep
        f_e, w_e = _mlp(dev, per_expert, h, m.expert_ffn, tp, m.gated)
        router = dev.gemm_s(t, m.experts, h)
        mlp_f, mlp_w = local_experts * f_e + router, local_experts * w_e + router
        if m.shared_experts:
            f_s, w_s = _mlp(dev, t, h, m.shared_experts * m.expert_ffn, tp, m.gated)
            mlp_f, mlp_w = mlp_f + f_s, mlp_w + w_s
        permute = dev.memory_s(2 * 2 * 2 * t * m.top_k * cf * h, kernels=2)  # (un)permute
        mlp_f += permute
    else:
        mlp_f, mlp_w = _mlp(dev, t, h, m.ffn_size, tp, m.gated)  # type: ignore[arg-type]
    # norms (read, write), residual adds (+ dropout and its mask), rotary embeddings
    resid = (14 if m.dropout else 12) * local * h
    elementwise = dev.memory_s(8 * local * h + resid, kernels=4)
    if m.gated:  # Llama-style: rotary embeddings on q and k
        elementwise += dev.memory_s(4 * t * (q + kvd) / tp)
    # attention: scores and their product with the values
    heads = m.heads / tp
    score_flops = 4 * t * sl.keys * q / tp
    if sl.attention == FLASH:
        att_f = dev.flash_s(score_flops / 2)  # causal: half the scores
        att_b = 2.5 * att_f
    else:
        scores = t * sl.keys * heads  # elements of the s x s scores on this GPU
        bmm = dev.gemm_s(t, sl.keys, m.dim, heads) + dev.gemm_s(t, m.dim, sl.keys, heads)
        softmax = dev.memory_s(4 * scores)
        dropout = dev.memory_s(5 * scores) if m.dropout else 0.0
        att_f = bmm + softmax + dropout
        att_b = 2 * bmm + dev.memory_s(6 * scores) + (dropout if m.dropout else 0.0)
    forward = gemm_f + mlp_f + elementwise + att_f
    backward = 2 * (gemm_f + mlp_f) + 2 * elementwise + att_b
    return LayerTime(forward, backward, att_f, wgrad + mlp_w)


def logits_time(m: Model, tokens: int, tp: int, dev: Device) -> tuple[float, float]:
    """Forward and backward seconds of the output layer and the loss on ``tokens`` tokens
    (the last pipeline stage's extra work): a GEMM to V / tp logits, softmax cross-entropy in
    fp32 over them."""
    assert m.vocab and m.hidden
    gemm = dev.gemm_s(tokens, m.vocab / tp, m.hidden)
    loss = dev.memory_s(3 * 4 * tokens * m.vocab / tp, kernels=3)
    return gemm + loss, 2 * gemm + loss


#: Bytes the optimizer step moves per parameter of a GPU's shard (Megatron-LM mixed precision):
#: the fp32 main gradient read for its norm (4) and by Adam (4), the fp32 main weight and both
#: moments read and written (24), the 16-bit weight written (2), the main gradient zeroed for
#: the next step (4).
ADAM_BYTES_PER_PARAM = 38


def optimizer_time(params: float, dev: Device) -> float:
    """One Adam step over ``params`` parameters (memory-bound)."""
    return dev.memory_s(ADAM_BYTES_PER_PARAM * params, kernels=4)
