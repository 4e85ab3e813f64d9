"""Memory of one GPU: weights, gradients, optimizer states, activations, and what else a
training step holds at its peak.

Model states (Rajbhandari et al. 2020, ZeRO, Sec. 3.1; Megatron-LM's mixed precision): 16-bit
weights (2 bytes per parameter), gradients accumulated in fp32 main gradients (4 bytes; 2
where they are reduced in 16 bits, ``main_grad_bytes``; 6 under DeepSpeed's ZeRO-1/2, which
keeps the 16-bit gradients too, while its ZeRO-3 reduces them into the fp32 partition: 18
bytes in all), Adam's fp32 master weights, momentum and variance (12
bytes; 8 in fp32 training): 18 bytes per parameter, 6 + 12/d with Megatron's distributed
optimizer over d ranks (Megatron-LM, docs/source/distrib_optimizer.md, "bf16 param, fp32
grads": 18 and 6 + 12/d). ZeRO-1 (Megatron's distributed optimizer) divides the optimizer
states by the data-parallel size (times cp: Megatron shards over the data- and
context-parallel ranks together), ZeRO-2 also the gradients, ZeRO-3 also the weights (which
then need two layers gathered at a time: the one computed and the one prefetched). PyTorch
FSDP2 (``fsdp``) keeps fp32 weights that are also the optimizer's master copy: 4 + 4 + 8 = 16
bytes per parameter, sharded, plus the 16-bit weights it gathers (two blocks under ``zero3``;
all of them, kept from the forward to the backward, under ``zero2`` = no resharding after
forward, and under DDP autocast's copies) and one block's fp32 reduce-scatter input. HSDP
shards over its shard group (x cp) instead of dp x cp. Expert weights are split over ep and
sharded over the ranks that hold the same experts. The busiest pipeline stage counts: the
first holds the embedding, the last the output
layer (or its tied copy) and the logits.

Activations per layer and micro-batch (Korthikanti et al. 2022, Sec. 4, Table 2), in bytes,
for s tokens (s / cp per GPU), micro-batch b, hidden h, tensor-parallel size t, heads a:

    s b h (10 + 24/t + 5 a s / (h t))      GPT, tensor parallel
    s b h (34/t + 5 a s / (h t))           with sequence parallelism
    drop the 5 a s/(h t) term              selective recomputation (or FlashAttention, which
                                           stores no s x s scores)
    2 s b h                                full recomputation (the layer's input only)

generalised to other shapes term by term (Korthikanti's Sec. 4.1 inventory): replicated across
TP unless sp, the two norms' inputs and outputs (8) and dropout masks (2, if the model has
dropout); split across TP, Q and the attention output 4q/h, K and V 4 g d/h, the MLP's inner
activations 4f/h with GeLU or 6f/h with SwiGLU (its gate and up outputs, then their product),
experts' as many times over as tokens are routed (top-k x capacity), plus the dispatched
tokens; the scores 5 a s/h (2 a s/h without dropout).

In flight (Korthikanti et al. 2022, eq. 5 and Sec. 4.2.3): 1F1B keeps min(p - i, m)
micro-batches on stage i, so the first stage holds p x L/p = L layers' activations; the
interleaved schedule with v stages per GPU multiplies that by 1 + (p-1)/(p v); DeepSpeed's
pipeline also keeps each in-flight micro-batch's stage output (2 s b h; Megatron-LM frees it,
Korthikanti et al. 2022, App. B). The backward holds one layer's activation gradients on top
(and, under full recomputation, that layer's recomputed activations). When p does not
divide L, the first and last stages take the fewer layers (as Llama 3 did); the busiest stage's
weights and compute are those of ceil(L/p) layers. Full
recomputation adds one layer's whole activations (the one being recomputed).

Also held: the last stage's logits, V/t per token, in as many bytes per logit as the loss keeps
at its peak (:func:`logit_bytes`: Megatron's fp32 and 16-bit copies, PyTorch's fp32
cross-entropy and its gradients, FlashAttention's fused cross-entropy in 16 bits), and a fixed
``OVERHEAD_BYTES`` for the CUDA context, cuBLAS and NCCL buffers and the allocator's slack.
Under PyTorch's pipelining with FSDP2 the gradients are accumulated unsharded in fp32 over the
micro-batches (:func:`state_memory`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ringtree.plan.compute import FLASH, FUSED_ATTENTION
from ringtree.plan.flops import FULL, NONE, SELECTIVE
from ringtree.plan.model import Model, attention_params, expert_params, mlp_params
from ringtree.plan.precision import BF16, FP8, FP8_WEIGHT_BYTES, fp8_saved_activation
from ringtree.plan.strategy import Layout

#: Frameworks whose memory differs: Megatron-LM accumulates gradients in fp32 main gradients
#: and frees a stage's output once sent (Korthikanti et al. 2022, App. B); DeepSpeed keeps
#: 16-bit gradients beside their fp32 accumulation (its BF16 optimizer) and keeps the outputs.
#: PyTorch FSDP2 (torchtitan) keeps fp32 sharded parameters, the optimizer's master copy,
#: with fp32 gradients and Adam's two moments: 4 + 4 + 8 = 16 bytes per parameter, sharded,
#: plus the 16-bit copies of the blocks it gathers (Zhao et al. 2023, Sec. 4.1; torchtitan's
#: ``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)``).
MEGATRON, DEEPSPEED, FSDP = "megatron", "deepspeed", "fsdp"
FRAMEWORKS = (MEGATRON, DEEPSPEED, FSDP)

#: DeepSpeed ZeRO-3 keeps at most this many gathered parameters resident
#: (``stage3_max_live_parameters``, default 1e9: DeepSpeed's ZeRO configuration docs).
DEEPSPEED_MAX_LIVE_PARAMETERS = 1_000_000_000

#: How the loss is computed, for the bytes per logit it holds (:func:`logit_bytes`); "" is the
#: framework's: vocab-parallel under Megatron-LM and DeepSpeed, PyTorch's under FSDP.
VOCAB_PARALLEL, TORCH_LOSS, TORCH_16_LOSS, FUSED_LOSS = (
    "vocab-parallel", "torch", "torch-16bit", "fused")
LOSSES = (VOCAB_PARALLEL, TORCH_LOSS, TORCH_16_LOSS, FUSED_LOSS)
#: PyTorch's cross-entropy on logits cast to fp32 (torchtitan's ``cross_entropy(pred.float(),
#: ...)``, train.py at 9dec370): at the backward's start log_softmax's fp32 output (saved),
#: nll_loss's dense fp32 gradient of it and log_softmax's fp32 input gradient coexist, 4 + 4 + 4
#: (``torch-16bit``, on the 16-bit logits uncast: 3 ``itemsize``).
TORCH_LOSS_BYTES = 12

#: CUDA context (~0.5 GB), cuBLAS workspaces, NCCL's buffers, allocator fragmentation: an
#: allowance, not a measurement of any one framework.
OVERHEAD_BYTES = 2 * 2**30


@dataclass(frozen=True)
class Memory:
    """Bytes on the busiest GPU: the parts, and ``total``."""

    weights: int
    gradients: int
    optimizer: int
    activations: int
    other: int

    @property
    def states(self) -> int:
        """weights + gradients + optimizer."""
        return self.weights + self.gradients + self.optimizer

    @property
    def total(self) -> int:
        """Everything."""
        return self.states + self.activations + self.other

    def to_json(self) -> dict:
        """The ``memory`` entry of ``--json``."""
        return {
            "weights_bytes": self.weights, "gradients_bytes": self.gradients,
            "optimizer_bytes": self.optimizer, "activations_bytes": self.activations,
            "other_bytes": self.other, "total_bytes": self.total,
        }


def activation_bytes_per_layer(
    m: Model, b: int, t: int, sp: bool, recompute: str, attention: str, cp: int = 1,
    moe: bool = False, precision: str = BF16,
) -> float:
    """Activations one layer keeps for one micro-batch of ``b`` sequences (module doc; FP8
    saves the wgrad GEMMs' inputs in one byte, :mod:`ringtree.plan.precision`)."""
    assert m.seq_len and m.hidden and m.heads
    s, h = m.seq_len / cp, m.hidden
    sbh = s * b * h
    if recompute == FULL:
        return 2 * sbh / (t if sp else 1)
    q, kvd = m.heads * m.dim, m.kv * m.dim
    replicated = 8 + (2 if m.dropout else 0)
    split = (4 * q + 4 * kvd) / h
    mlp = 6 if m.gated else 4
    if moe:
        assert m.expert_ffn
        routed = m.top_k * (m.capacity_factor or 1.0)
        split += routed * (mlp * m.expert_ffn / h + 2)  # expert activations + dispatched
        split += m.shared_experts * mlp * m.expert_ffn / h
        inner = (routed + m.shared_experts) * m.expert_ffn
    else:
        split += mlp * m.ffn_size / h  # type: ignore[operator]
        inner = m.ffn_size  # type: ignore[assignment]
    per = (replicated / t if sp else replicated) + split / t
    if precision == FP8:
        per -= fp8_saved_activation(h, inner, t, sp) / h
    if attention not in FUSED_ATTENTION and recompute != SELECTIVE:
        per += (5 if m.dropout else 2) * m.heads * m.seq_len / (h * t)
    return sbh * per


def logit_bytes(loss: str, framework: str, itemsize: int = 2) -> int:
    """Bytes per logit the loss holds at its peak, the backward's start (every layer's
    activations still held): Megatron-LM's vocab-parallel cross-entropy keeps the 16-bit
    logits and the fp32 softmax it computes and differentiates in place, 4 + ``itemsize``;
    PyTorch's on fp32 logits, :data:`TORCH_LOSS_BYTES` (on 16-bit ones, 3 ``itemsize``);
    FlashAttention's fused Triton
    cross-entropy (llm-foundry's default ``loss_fn: fused_crossentropy``,
    llmfoundry/models/mpt/modeling_mpt.py at 5e85bd62d) saves the 16-bit logits and their
    log-sum-exp and writes the gradient into a new 16-bit tensor
    (``torch.empty_like(logits)`` unless ``inplace_backward``: flash_attn/ops/triton/
    cross_entropy.py), 2 ``itemsize``. ``loss`` "" is the framework's (:data:`VOCAB_PARALLEL`,
    :data:`TORCH_LOSS` under FSDP)."""
    loss = loss or (TORCH_LOSS if framework == FSDP else VOCAB_PARALLEL)
    if loss in (TORCH_LOSS, TORCH_16_LOSS):
        return TORCH_LOSS_BYTES if loss == TORCH_LOSS else 3 * itemsize
    return 2 * itemsize if loss == FUSED_LOSS else 4 + itemsize


def first_stage_layers(layers: int, pp: int) -> int:
    """Layers on the first (and last) stage: L / pp, or one fewer than the others when pp does
    not divide L (Llama 3's layout: "the first and the last stages have one fewer layer";
    Megatron-LM's --decoder-first-pipeline-num-layers)."""
    return layers // pp if pp > 1 else layers


def in_flight(layout: Layout, micro_batches: int) -> float:
    """Micro-batches' worth of a stage's activations the first pipeline stage holds."""
    p, v = layout.pp, layout.v
    if p == 1:
        return 1.0
    held = min(p, micro_batches)
    return held * (1 + (p - 1) / (p * v)) if v > 1 else float(held)


def stage_params(m: Model, layout: Layout) -> tuple[float, float, float]:
    """Parameters one GPU of the busiest stage holds: (non-expert, expert, layers) where
    layers is the stage's layer count."""
    assert m.layers and m.hidden
    p, t = layout.pp, layout.tp
    layers = math.ceil(m.layers / p)
    if m.complete:
        assert m.vocab
        dense_layer = attention_params(m) + 2 * m.hidden
        mlp = mlp_params(m.hidden, m.ffn_size, m.gated)  # type: ignore[arg-type]
        moe_share = m.moe_layers / m.layers
        per_layer = dense_layer + (1 - moe_share) * mlp
        embed = m.vocab * m.hidden * (1 if (p > 1 or m.tied) else 2)
        dense = (layers * per_layer + embed) / t
        experts = (layers * moe_share * expert_params(m) / (layout.expert_tp * layout.ep)
                   if m.moe else 0.0)  # whole experts on one rank when folded (etp=1)
        return dense, experts, layers
    return m.params / (t * p), 0.0, layers


def memory(
    m: Model, layout: Layout, b: int, micro_batches: int, recompute: str = NONE,
    attention: str = FLASH, itemsize: int = 2, framework: str = MEGATRON,
    precision: str = BF16, main_grad_bytes: int = 4, loss: str = "", param_bytes: int = 4,
    no_sync: bool = False,
) -> Memory:
    """Memory of the busiest GPU of ``layout`` (module doc; ``loss``: :func:`logit_bytes`;
    ``param_bytes``, ``no_sync``: :func:`state_memory`, ``no_sync`` with micro_batches > 1)."""
    weights, grads, opt, other = state_memory(m, layout, itemsize, framework, precision,
                                              main_grad_bytes, param_bytes,
                                              no_sync and micro_batches > 1)
    acts = activation_memory(m, layout, b, micro_batches, recompute, attention, itemsize,
                             framework, precision, loss)
    return Memory(weights, grads, opt, acts, other)


def fp8_weights(m: Model, layout: Layout, itemsize: int, framework: str) -> tuple[float, float]:
    """(weights, other) bytes that FP8 adds on the busiest GPU (:mod:`ringtree.plan.precision`):
    under Megatron the linear layers' weights are FP8 parameters (1 byte instead of
    ``itemsize``: their shards, over dp x cp under ZeRO-3 (experts over dp/ep x cp), and the
    two layers ZeRO-3 gathers); elsewhere the 16-bit weights stay and the two layers in use
    get FP8 copies."""
    if not m.complete:
        return 0.0, 0.0
    assert m.layers and m.hidden and m.vocab
    dense, experts, layers = stage_params(m, layout)
    embed = m.vocab * m.hidden * (1 if (layout.pp > 1 or m.tied) else 2)
    linear = dense - (embed + 2 * m.hidden * layers) / layout.tp
    two_layers = 2 * (linear + experts) / max(layers, 1)
    if framework != MEGATRON:
        return 0.0, FP8_WEIGHT_BYTES * two_layers
    saved = itemsize - FP8_WEIGHT_BYTES
    if layout.flavor != "zero3":
        return -saved * (linear + experts), 0.0
    shard, expert_shard = layout.dp * layout.cp, max(1, layout.edp)
    return -saved * (linear / shard + experts / expert_shard), -saved * two_layers


def state_memory(
    m: Model, layout: Layout, itemsize: int = 2, framework: str = MEGATRON,
    precision: str = BF16, main_grad_bytes: int = 4, param_bytes: int = 4,
    no_sync: bool = False,
) -> tuple[int, int, int, int]:
    """(weights, gradients, optimizer states, other) bytes of the busiest GPU: what does not
    depend on the micro-batch (the module doc's model states, with gradients accumulated in
    ``main_grad_bytes`` per parameter in mixed precision, and the fixed allowance; FP8's
    weights, :func:`fp8_weights`). FSDP2 under a pipeline: every micro-batch's backward but
    the last runs without gradient sync (``set_requires_gradient_sync(False)`` in
    torch/distributed/pipelining/stage.py, ``backward_maybe_with_nosync``) and FSDP2
    accumulates the unsharded gradients in the reduce dtype, fp32 (``FSDPParam.
    to_accumulated_grad_if_needed``, torch/distributed/fsdp/_fully_shard/_fsdp_param.py): 4
    bytes per parameter of the stage, unsharded; the same wherever the framework turns the sync
    off over the micro-batches (``no_sync``: NeMo AutoModel's MoE, components/moe/
    fsdp_mixin.py at 8d9bfb90). ``param_bytes``: FSDP2's sharded parameters, fp32 (4: Adam's
    master copy) or, for a model built in bf16, 2, whose gradients and Adam's moments
    (``torch.optim.Adam`` keeps them in the parameter's dtype) are bf16 too: 8 B, not 16."""
    dense, experts, layers = stage_params(m, layout)
    per = _bytes_per_param(layout.flavor, itemsize, framework, main_grad_bytes, param_bytes)
    divs = _divisors(layout, framework == FSDP)
    weights, grads, opt = (
        b * (dense / d + experts / e) for b, (d, e) in zip(per, divs, strict=True))
    other = float(OVERHEAD_BYTES)
    unsharded = itemsize * (dense + experts)  # the 16-bit weights, whole
    if framework == FSDP and layout.flavor != "zero3":
        weights += unsharded  # gathered once and kept (or never sharded: DDP's autocast copy)
    if layout.flavor == "zero3":  # two blocks gathered at once: computed and prefetched
        gathered = 2 * unsharded / max(layers, 1)
        if framework == DEEPSPEED:
            gathered = min(gathered, itemsize * DEEPSPEED_MAX_LIVE_PARAMETERS)
        other += gathered
    if framework == FSDP and (layout.pp > 1 or no_sync):  # accumulated unsharded in fp32
        grads = 4 * (dense + experts)
    if framework == FSDP and layout.flavor in ("zero2", "zero3"):  # a block's flat fp32
        other += 4 * (dense + experts) / max(layers, 1)  # reduce-scatter input
    if precision == FP8:
        held, gathered = fp8_weights(m, layout, itemsize, framework)
        weights, other = weights + held, other + gathered
    return int(weights), int(grads), int(opt), int(other)


def _bytes_per_param(flavor: str, itemsize: int, framework: str,
                     main_grad_bytes: int = 4, param_bytes: int = 4) -> tuple[int, int, int]:
    """Bytes per parameter of (weights, gradients, optimizer states) before sharding (module
    doc): Megatron-LM's 16-bit weights and fp32 main gradients; DeepSpeed's 16-bit gradients
    beside them (but ZeRO-3's reduced into the fp32 partition: 18 B); FSDP2's fp32 sharded
    weights, which are Adam's master copy (16 B; ``param_bytes`` 2: bf16 ones, 8 B);
    ``main_grad_bytes``: Megatron's gradients reduced in 16 bits (2) or fp32 (4)."""
    mixed = itemsize < 4
    if framework == FSDP:
        return param_bytes, param_bytes, 2 * param_bytes
    grads = main_grad_bytes if mixed else 4
    if framework == DEEPSPEED and mixed and flavor != "zero3":
        grads = 4 + itemsize
    return itemsize, grads, 12 if mixed else 8


def _divisors(layout: Layout, fsdp: bool) -> tuple[tuple[int, int], ...]:
    """(dense, expert) divisors of weights, gradients and optimizer states: ZeRO's stages
    over the shard ranks (dp x cp, or HSDP's shard x cp), experts over the ranks holding the
    same experts; FSDP2 shards its fp32 weights under ``zero2`` too."""
    shard = layout.shard_ranks
    expert = max(1, layout.edp) if not layout.hybrid else shard
    z = layout.flavor
    w = (shard, expert) if z == "zero3" or (fsdp and z == "zero2") else (1, 1)
    g = (shard, expert) if z in ("zero2", "zero3") else (1, 1)
    o = (shard, expert) if z != "ddp" else (1, 1)
    return w, g, o


def activation_memory(
    m: Model, layout: Layout, b: int, micro_batches: int, recompute: str = NONE,
    attention: str = FLASH, itemsize: int = 2, framework: str = MEGATRON,
    precision: str = BF16, loss: str = "",
) -> int:
    """Activation bytes of the busiest GPU at its peak (module doc; the logits as ``loss``
    keeps them, :func:`logit_bytes`): the flavour of data parallelism plays no part."""
    if not m.complete:
        return 0
    assert m.layers and m.seq_len and m.vocab and m.hidden
    t, sp, cp = layout.tp, layout.sp, layout.cp
    moe_share = m.moe_layers / m.layers
    one = activation_bytes_per_layer(m, b, t, sp, recompute, attention, cp,
                                     precision=precision)
    if m.moe:
        one_moe = activation_bytes_per_layer(m, b, t, sp, recompute, attention, cp, True,
                                             precision)
        one = (1 - moe_share) * one + moe_share * one_moe
    held = in_flight(layout, micro_batches)
    first = first_stage_layers(m.layers, layout.pp) * one * held
    logits = logit_bytes(loss, framework, itemsize) * b * m.seq_len / cp * m.vocab / t
    last = (first_stage_layers(m.layers, layout.pp) * one if layout.pp > 1 else 0.0) + logits
    acts = max(first, last) if layout.pp > 1 else first + logits
    # the backward's working set: the gradients of one layer's activations (and, under full
    # recomputation, that layer's recomputed activations too)
    whole = activation_bytes_per_layer(m, b, t, sp, NONE, attention, cp, m.moe)
    acts += 2 * whole if recompute == FULL else whole
    if framework == DEEPSPEED and layout.pp > 1:  # stage outputs kept until sent back
        acts += 2 * b * m.seq_len / cp * m.hidden * held
    return int(acts)
