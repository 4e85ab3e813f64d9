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

FP8 GEMMs pay their BF16 output's write (2 bytes an element, at the roofline's HBM rate) on
top of their main loop rather than under it: per tile the main loop's work halves in FP8 and
the epilogue's (the output's write, with Transformer Engine's amax of it) does not, so a GEMM
of inner size K runs at K / (K + K0) of its large-K rate, K0 = that rate / (HBM bandwidth x
e_mem): H100 SXM 1,979 x 0.7375 / (3.35 x 0.8) = 545, B200 4,500 x 0.6293 / (8 x 0.8) = 442
(the datasheets' peaks and bandwidths, ringtree/data/gpus.toml; fp8_gemm below). BF16 GEMMs
are left as they are: their e_gemm was calibrated with their (half as large) epilogue inside
it. torchao's H100 microbenchmark shows
the size effect: FP8 over BF16 0.80x at M, K, N = 1024, 2048, 1024 and 1.39x at 4096, 8192,
16384, casts included (torchao/float8/README.md, "Performance", pytorch/ao commit 0cf1281a).

Multi-head latent attention (DeepSeek-V3) runs its five projections as GEMMs; a sliding-window
layer (GPT-OSS) runs FlashAttention over its window, at the rate of that many keys.

Attention ``flash`` (FlashAttention-2 and later, fused, causal: half the scores computed),
``triton`` (the Triton FlashAttention of 2022 that llm-foundry's MPT ran as ``attn_impl:
triton``: the same work, :data:`TRITON_FORWARD` times the forward's time and
:data:`TRITON_BACKWARD` times the backward's) or ``unfused`` (Megatron-LM before 2022: batched
GEMMs for the scores and their product with the values, a fused scale-mask-softmax, dropout on
the s x s scores: all of them full size, memory-bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ringtree.cost.clusters import Gpu
from ringtree.errors import RingtreeError
from ringtree.plan.model import Model
from ringtree.plan.moe import permute_bytes, permute_passes
from ringtree.plan.precision import BF16, FP8, cast_bytes, check_precision

FLASH, UNFUSED, TRITON = "flash", "unfused", "triton"
ATTENTION = (FLASH, UNFUSED, TRITON)
#: Fused attention kernels (no s x s scores in memory).
FUSED_ATTENTION = (FLASH, TRITON)
#: SMs per GPU generation (NVIDIA whitepapers: V100 80, A100 108, H100 SXM 132, B200 148,
#: L40S 142); a GEMM's tiles are spread over them.
SMS = {"volta": 80, "ampere": 108, "hopper": 132, "blackwell": 148, "ada": 142}
TILE_M, TILE_N = 128, 256
#: FlashAttention's backward over its forward: 2.5x the work (five matrix products instead of
#: two, Dao 2023, FlashAttention-2, Sec. 3.1.2) at the forward's rate.
FLASH_BACKWARD = 2.5
#: FlashAttention's rate on sequences of s keys, as a fraction of its rate on long ones:
#: s / (s + 235). Fitted (least squares on 1/rate) to FlashAttention-3's forward on H100 SXM,
#: head dim 128, printed in pytorch/benchmark commit ff65cb67 (PR #2391, "(Batch, Heads,
#: SeqLen, Dhead) ... flash_v3-tflops": 430.32, 517.099, 565.544, 590.233, 614.234, 620.73
#: TFLOP/s at 512, 1k, 2k, 4k, 8k, 16k; the fit gives 630 x s / (s + 235) within 1 %).
FLASH_HALF_KEYS = 235
#: The Triton FlashAttention of 2022 (flash_attn/flash_attn_triton.py, which llm-foundry copied
#: as llmfoundry/models/layers/flash_attn_triton.py and ran as ``attn_impl: triton``) against
#: FlashAttention-2 (the ``flash`` rate): "FlashAttention-2 is around 1.3-1.5x faster than
#: FlashAttention in Triton in the forward pass and around 2x faster in the backward pass"
#: (Dao 2023, arXiv 2307.08691, Sec. 4.1, A100 80GB SXM4, head dims 64 and 128, 512-16k
#: tokens); the forward takes the middle of that range.
TRITON_FORWARD = 1.4
TRITON_BACKWARD = 2.0
#: An eager PyTorch step's compute over a compiled one's (``--no-compile``; the calibrated
#: frameworks fuse their element-wise kernels, as torch.compile does): torchtitan's FSDP vs
#: FSDP + torch.compile, docs/performance.md at commit eaea6f6a, Table 1 (Llama 3.1 8B, 8 H100s,
#: local batch 2, selective checkpointing): 6,667 / 5,762 tokens/s/GPU. Fusing every
#: element-wise kernel of the roofline away gains 6 % on that step, not 16 %: the rest is what
#: eager PyTorch loses besides (launches, unfused autograd), not modelled kernel by kernel.
EAGER = 6667 / 5762


@dataclass(frozen=True)
class Efficiency:
    """What one GPU achieves (module doc). gemm: fraction of the dense BF16 peak a large GEMM
    reaches; memory: fraction of HBM bandwidth; flash: FlashAttention's fraction of the BF16
    peak on long sequences; kernel_s: fixed time per kernel; source: where ``gemm`` comes
    from; fp8_gemm: fraction of the dense FP8 peak a large FP8 GEMM reaches (0: as ``gemm``,
    uncalibrated)."""

    gemm: float
    memory: float = 0.8
    flash: float = 0.35
    kernel_s: float = 3e-6
    source: str = ""
    fp8_gemm: float = 0.0


#: e_gemm per GPU generation, fitted by ``bench/plan_vs_published.py --fit`` on the runs it
#: names as calibration runs (Ampere: Korthikanti et al. 2022's 22B; Hopper: the Megatron-LM
#: README's 70B); the others are checks. fp8_gemm, fitted by ``bench/fit_compute.py``: Hopper on
#: the twelve FP8 rows of NVIDIA NeMo 24.07's DGX-H100 table (GPT3 5B-175B, Llama 2/3, Nemotron
#: 8B-340B on 8-512 GPUs; docs/source/performance/performance_summary.md at commit 8e3d65dc),
#: the value minimising their mean |error| with the output's write priced (module doc; one
#: row, Llama 2 70B, without it gave 0.7573: its layout's exposed TP and pipeline transfers
#: taken into the GEMMs' rate, the TP-free rows of the table 18 % too fast), Blackwell on
#: Megatron-Bridge 25.11's DGX-B200 LLAMA3_8B FP8-CS row (8 GPUs: 30,624 tokens/s/GPU;
#: docs/performance-summary.md at commit 2b8806b9). Megatron-Bridge publishes no
#: dense BF16 row on Blackwell: its BF16 e_gemm is tied to the FP8 one by Hopper's BF16/FP8
#: ratio (0.5841 / 0.7375) in the fit; its FlashAttention ``flash`` is fitted on NVIDIA NeMo's
#: long-sequence LLAMA3-8B (FP8) - B200 row at 1024K tokens (256 GPUs, TP 4, CP 16: 1,608
#: TFLOP/s/GPU, attention 97 % of the FLOPs; performance_long_sequence.md at commit
#: 14d427f5), the two fitted in turn. Volta and Ada are not calibrated: they take Hopper's
#: figures, and say so.
GENERATION: dict[str, Efficiency] = {
    "ampere": Efficiency(0.7214, flash=0.6, source="fitted on Korthikanti et al. 2022, 175B"),
    "hopper": Efficiency(0.5841, flash=0.35, source="fitted on the Megatron-LM README, 70B",
                         fp8_gemm=0.7375),
    "blackwell": Efficiency(
        0.4984, flash=0.4180, fp8_gemm=0.6293,
        source="FP8 fitted on Megatron-Bridge 25.11 DGX-B200 Llama 3 8B (BF16 tied by "
        "Hopper's BF16/FP8 ratio: no BF16 row published), FlashAttention on NeMo's B200 "
        "Llama 3 8B at 1M tokens"),
}
UNCALIBRATED = "not calibrated for {arch}: Hopper's efficiency assumed"


def default_efficiency(gpu: Gpu) -> Efficiency:
    """The generation's efficiency (Hopper's, marked uncalibrated, for the others)."""
    eff = GENERATION.get(gpu.arch)
    if eff is not None:
        return eff
    base = GENERATION["hopper"]
    return Efficiency(base.gemm, base.memory, base.flash, base.kernel_s,
                      UNCALIBRATED.format(arch=gpu.arch), base.fp8_gemm)


@dataclass(frozen=True)
class Device:
    """A GPU as the roofline sees it: peak FLOP/s (dense BF16), HBM bytes/s, SMs, its
    efficiency, the precision of the linear layers' GEMMs and the dense FP8 peak."""

    peak_flops: float
    hbm_Bps: float
    sms: int
    eff: Efficiency
    precision: str = BF16
    fp8_flops: float = 0.0
    eager: float = 1.0

    @classmethod
    def of(cls, gpu: Gpu, eff: Efficiency | None = None, precision: str = BF16,
           compiled: bool = True) -> Device:
        """From a GPU preset (its dense BF16 and FP8 peaks and HBM bandwidth); not
        ``compiled``: an eager PyTorch step, its compute :data:`EAGER` times slower."""
        if gpu.bf16_tflops <= 0 or gpu.memory_bandwidth_GBps <= 0:
            raise RingtreeError(
                f"GPU {gpu.key} has no BF16 peak or memory bandwidth: the compute model needs "
                "both (or give --compute / --tflops with --mfu)"
            )
        check_precision(precision, gpu.fp8_tflops, gpu.key)
        return cls(gpu.bf16_tflops * 1e12, gpu.memory_bandwidth_GBps * 1e9,
                   SMS.get(gpu.arch, 132), eff or default_efficiency(gpu), precision,
                   gpu.fp8_tflops * 1e12, 1.0 if compiled else EAGER)

    def gemm_s(self, m: float, n: float, k: float, batch: float = 1, fp8: bool = False,
               pad: bool = False) -> float:
        """One (batched) GEMM: ``batch`` products (m x k) @ (k x n) in bf16, or with FP8
        inputs (1 byte each) on the FP8 peak plus the write of its BF16 output (module doc);
        with ``pad``, each product's rows computed in whole tiles
        (module doc)."""
        if m <= 0 or n <= 0 or k <= 0 or batch <= 0:
            return 0.0
        rows = math.ceil(m / TILE_M) * TILE_M if pad else m
        flops = 2 * batch * rows * n * k
        waves = batch * math.ceil(m / TILE_M) * math.ceil(n / TILE_N) / self.sms
        tail = waves / (waves + 0.5)
        bw = self.hbm_Bps * self.eff.memory
        if fp8:
            rate = self.fp8_flops * (self.eff.fp8_gemm or self.eff.gemm)
            moved = batch * (m * k + k * n + 2 * m * n)
            # the BF16 output tiles' write after each tile's main loop (module doc)
            compute = flops / (rate * tail) + 2 * batch * rows * n / bw
        else:
            rate, moved = self.peak_flops * self.eff.gemm, 2 * batch * (m * k + k * n + m * n)
            compute = flops / (rate * tail)
        return max(compute, moved / bw) + self.eff.kernel_s

    def linear_s(self, m: float, n: float, k: float) -> tuple[float, float, float]:
        """A linear layer's forward GEMM (m x k) @ (k x n) at the device's precision, and the
        seconds of its FP8 casts in the forward and in the backward (0 unless FP8); its
        backward's two GEMMs (dgrad, wgrad) take the forward's time each."""
        if self.precision != FP8:
            return self.gemm_s(m, n, k), 0.0, 0.0
        fwd, bwd = cast_bytes(m, n, k)
        return self.gemm_s(m, n, k, fp8=True), self.memory_s(fwd, 2), self.memory_s(bwd)

    def grouped_s(self, m: float, n: float, k: float, groups: int) -> tuple[float, float, float]:
        """:meth:`linear_s` for ``groups`` GEMMs of the same shape in one grouped kernel (an
        MoE layer's local experts, Megatron-Core's grouped GEMM): each group's rows computed
        in whole 128-row tiles, its tiles sharing the waves, each group's weights read; as
        the per-expert batch ``m`` shrinks the padding and then the weights' bytes (the
        roofline's memory term) take over."""
        fp8 = self.precision == FP8
        gemm = self.gemm_s(m, n, k, groups, fp8, pad=True)
        if not fp8 or m <= 0:
            return gemm, 0.0, 0.0
        fwd, bwd = cast_bytes(m, n, k)
        return gemm, self.memory_s(groups * fwd, 2), self.memory_s(groups * bwd)

    def memory_s(self, nbytes: float, kernels: int = 1) -> float:
        """Memory-bound kernels moving ``nbytes`` in all."""
        return nbytes / (self.hbm_Bps * self.eff.memory) + kernels * self.eff.kernel_s

    def flash_s(self, flops: float, keys: float) -> float:
        """A fused attention kernel doing ``flops`` over sequences of ``keys`` tokens: the
        generation's ``flash`` fraction of the BF16 peak, less on short sequences
        (keys / (keys + FLASH_HALF_KEYS))."""
        rate = self.peak_flops * self.eff.flash * keys / (keys + FLASH_HALF_KEYS)
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
    E / ep experts, the attention of its tokens against all ``keys`` (s); ``expert_tp`` the
    ranks an expert is split over (0: tp; 1 with etp=1: whole experts, on the 1/tp of the
    tokens the GPU holds under sequence parallelism and dispatches itself)."""

    tokens: int
    keys: int
    tp: int
    sp: bool
    ep: int
    attention: str
    expert_tp: int = 0


@dataclass
class _Sum:
    """A layer's parts as they add up: forward, weight-gradient GEMMs, FP8 casts (forward,
    backward), and the other kernels of the forward."""

    gemm: float = 0.0
    cast_f: float = 0.0
    cast_b: float = 0.0
    other: float = 0.0

    def linear(self, dev: Device, m: float, n: float, k: float, groups: int = 1) -> None:
        """A linear layer (``groups`` of them in one grouped GEMM: an MoE layer's experts)."""
        g, cf, cb = dev.grouped_s(m, n, k, groups) if groups > 1 else dev.linear_s(m, n, k)
        self.gemm, self.cast_f, self.cast_b = self.gemm + g, self.cast_f + cf, self.cast_b + cb


def _mlp(acc: _Sum, dev: Device, tokens: float, hidden: int, ffn: int, tp: int, gated: bool,
         groups: int = 1) -> None:
    """One MLP (or ``groups`` experts) on ``tokens`` each: up (and gate), down, activation."""
    acc.linear(dev, tokens, (2 if gated else 1) * ffn / tp, hidden, groups)
    acc.linear(dev, tokens, hidden, ffn / tp, groups)
    acc.other += dev.memory_s(groups * (6 if gated else 4) * tokens * ffn / tp)


def _experts(acc: _Sum, m: Model, sl: Slice, dev: Device) -> None:
    """An MoE layer's MLP: the router (BF16), the local experts' grouped GEMMs on their
    per-expert batches (tokens x ep x top_k x capacity / experts), shared experts, and the
    permutation of the tokens in and out."""
    assert m.hidden and m.expert_ffn
    h, t = m.hidden, sl.tokens
    cf = m.capacity_factor or 1.0
    etp = sl.expert_tp or sl.tp
    sent = t * etp / sl.tp  # the tokens one expert-TP group dispatches
    per_expert = sent * sl.ep * m.top_k * cf / m.experts
    router = dev.gemm_s(t, m.experts, h)
    acc.gemm += router
    _mlp(acc, dev, per_expert, h, m.expert_ffn, etp, m.gated, m.experts // sl.ep)
    if m.shared_experts:
        _mlp(acc, dev, t, h, m.shared_experts * m.expert_ffn, sl.tp, m.gated)
    local = m.experts // sl.ep
    acc.other += dev.memory_s(permute_bytes(sent, m.top_k, h, local, sl.ep, cf),
                              kernels=permute_passes(local, sl.ep))


def layer_time(m: Model, sl: Slice, dev: Device, moe: bool = False) -> LayerTime:
    """Compute time of one layer (dense, or MoE when ``moe``) for one micro-batch slice."""
    assert m.hidden and m.heads
    h, t, tp = m.hidden, sl.tokens, sl.tp
    q, kvd = m.heads * m.dim, m.kv * m.dim
    local = t / tp if sl.sp else t  # tokens of norms and residuals on this GPU
    acc = _Sum()
    _projections(acc, m, sl, dev)
    if moe:
        _experts(acc, m, sl, dev)
    else:
        _mlp(acc, dev, t, h, m.ffn_size, tp, m.gated)  # type: ignore[arg-type]
    # norms (read, write), residual adds (+ dropout and its mask), rotary embeddings
    resid = (14 if m.dropout else 12) * local * h
    elementwise = dev.memory_s(8 * local * h + resid, kernels=4)
    if m.gated:  # Llama-style: rotary embeddings on q and k
        elementwise += dev.memory_s(4 * t * (q + kvd) / tp)
    att_f, att_b = attention_time(m, sl, dev)
    dense = acc.gemm + acc.other
    forward = dense + acc.cast_f + elementwise + att_f
    backward = 2 * dense + acc.cast_b + 2 * elementwise + att_b
    e = dev.eager
    return LayerTime(e * forward, e * backward, e * att_f, e * acc.gemm)


def _projections(acc: _Sum, m: Model, sl: Slice, dev: Device) -> None:
    """Attention's input and output projections: QKV and output; with MLA (DeepSeek-V3's
    modelling code) the queries' down (r_q) and up projections, the keys/values' down
    projection to r_kv plus the shared rotary key (not split by TP), their up projection to
    the heads' keys and values, the output."""
    h, t, tp, a = m.hidden, sl.tokens, sl.tp, m.heads
    assert h and a
    if m.mla:
        rq = m.q_lora_rank
        if rq:
            acc.linear(dev, t, rq, h)
        acc.linear(dev, t, a * m.qk_dim / tp, rq or h)
        acc.linear(dev, t, m.kv_lora_rank + m.rope_dim, h)
        acc.linear(dev, t, a * (m.dim + m.v_dim) / tp, m.kv_lora_rank)
        acc.linear(dev, t, h, a * m.v_dim / tp)
        return
    q, kvd = a * m.dim, m.kv * m.dim
    acc.linear(dev, t, (q + 2 * kvd) / tp, h)  # QKV
    acc.linear(dev, t, h, q / tp)  # attention output


def backward_over_forward(attention: str) -> float:
    """Attention's backward over its forward time: FlashAttention's 2.5 (its Triton version's
    x TRITON_BACKWARD / TRITON_FORWARD), about 2 for the unfused kernels."""
    if attention == TRITON:
        return FLASH_BACKWARD * TRITON_BACKWARD / TRITON_FORWARD
    return FLASH_BACKWARD if attention == FLASH else 2.0


def attention_time(m: Model, sl: Slice, dev: Device) -> tuple[float, float]:
    """Forward and backward seconds of attention's scores and their product with the values
    (BF16 whatever the precision: FlashAttention, Triton's of 2022, or Megatron's unfused
    kernels), averaged over the layers: a windowed layer's FlashAttention computes each query
    against at most ``window`` keys, at the rate of that many keys."""
    heads = m.heads / sl.tp  # type: ignore[operator]
    t = sl.tokens
    if sl.attention in FUSED_ATTENTION:
        per_key = 2 * t * heads * (m.qk_dim + m.v_dim)
        att_f = dev.flash_s(per_key * sl.keys / 2, sl.keys)  # causal: half
        share = m.windowed_layers / m.layers if m.layers else 0.0
        if share:
            w = min(m.window, sl.keys)
            att_f = (1 - share) * att_f + share * dev.flash_s(per_key * w, w)
        fwd, bwd = (TRITON_FORWARD, TRITON_BACKWARD) if sl.attention == TRITON else (1.0, 1.0)
        return fwd * att_f, bwd * FLASH_BACKWARD * att_f
    scores = t * sl.keys * heads  # elements of the s x s scores on this GPU
    bmm = dev.gemm_s(t, sl.keys, m.dim, heads) + dev.gemm_s(t, m.dim, sl.keys, heads)
    softmax = dev.memory_s(4 * scores)
    dropout = dev.memory_s(5 * scores) if m.dropout else 0.0
    return bmm + softmax + dropout, 2 * bmm + dev.memory_s(6 * scores) + dropout


def logits_time(m: Model, tokens: int, tp: int, dev: Device) -> tuple[float, float]:
    """Forward and backward seconds of the output layer and the loss on ``tokens`` tokens
    (the last pipeline stage's extra work): a GEMM to V / tp logits, softmax cross-entropy in
    fp32 over them."""
    assert m.vocab and m.hidden
    gemm = dev.gemm_s(tokens, m.vocab / tp, m.hidden)
    loss = dev.memory_s(3 * 4 * tokens * m.vocab / tp, kernels=3)
    return dev.eager * (gemm + loss), dev.eager * (2 * gemm + loss)


#: Bytes the optimizer step moves per parameter of a GPU's shard (Megatron-LM mixed precision):
#: the fp32 main gradient read for its norm (4) and by Adam (4), the fp32 main weight and both
#: moments read and written (24), the 16-bit weight written (2), the main gradient zeroed for
#: the next step (4).
ADAM_BYTES_PER_PARAM = 38


def optimizer_time(params: float, dev: Device) -> float:
    """One Adam step over ``params`` parameters (memory-bound)."""
    return dev.memory_s(ADAM_BYTES_PER_PARAM * params, kernels=4)
