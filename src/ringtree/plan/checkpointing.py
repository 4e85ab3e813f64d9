"""Activation checkpointing of every K-th layer (``Training.recompute_every``, with
``recompute="full"``): torchtitan's layer-wise selective checkpointing
(``[activation_checkpoint] mode = "selective"``, ``selective_ac_option = "K"``: every K-th
transformer block is wrapped in full checkpointing, the others keep their activations).

Compute, recomputed FLOPs and activations are sums over layers, so a stage of L layers with
ceil(L/K) checkpointed is priced as that share of full recomputation and the rest of none: a
micro-batch's backward is none's plus the share of what full recomputation adds, its
activations none's less the share of what full recomputation saves. K = 1 is full
recomputation itself. The TP, CP and EP collectives that recomputation repeats are counted
per checkpointed layer (:class:`ringtree.plan.volumes.Batch.recompute_every`).

Op-level selective checkpointing (``recompute="op"``, torchtitan's ``selective_ac_option =
"op"``, torchtitan/distributed/activation_checkpoint.py): every block keeps the outputs of the
ops in its save list (matrix multiplications, attention) and recomputes the rest, except that
every second matrix multiplication is recomputed too ("recompute every other mm"). Priced per
layer: the backward repeats half of the forward GEMMs (``OP_GEMMS_RECOMPUTED``, the forward
GEMMs taken as long as the weight gradients') and the forward's memory-bound kernels (norms,
activations, rotary embeddings: the forward less its GEMMs and attention); the layer keeps its
input (2 s b h), attention's output (2 s b q) and every other GEMM output in order (q, k, v,
o, then the MLP's gate, up, down or fc1, fc2: the first, third, ... of them, 2 bytes each)
instead of its whole activations. Of the TP collectives the backward repeats the sequence-
parallel all-gathers (not in the save list: the GEMMs' gathered inputs are recomputed for their
weight gradients) and not the reduce-scatters (in it; :class:`ringtree.plan.volumes.Batch`'s
``op_recompute``). Dense models only.

Micro-batch level recomputation (``recompute="selective+microbatch"``; Korthikanti et al.
2022, App. C): selective recomputation only for as many of a stage's outstanding micro-batches
as memory requires, the others' activations kept whole, "a moving window of microbatches in
which a certain number of them can have all activations stored". The first stage has the
most outstanding (:func:`ringtree.plan.memory.in_flight`: p under 1F1B, p v + p - 1 model
chunks interleaved) and recomputes the largest share: of its w in-flight chunks, the k whose
whole activations fit in what selective recomputation leaves free of the GPU's memory keep
them, and that stage's share (w - k)/w of selective's recomputation prices every
micro-batch's backward and the hardware FLOPs (an upper bound on the other stages').
"""

from __future__ import annotations

import math
from dataclasses import replace

from ringtree.errors import RingtreeError
from ringtree.plan.compute import Device, logits_time
from ringtree.plan.flops import FULL, NONE, SELECTIVE
from ringtree.plan.memory import (
    Memory,
    activation_bytes_per_layer,
    activation_memory,
    first_stage_layers,
    in_flight,
    memory,
)
from ringtree.plan.model import Model
from ringtree.plan.precision import BF16
from ringtree.plan.record import Training
from ringtree.plan.step import MicroBatch, micro_batch
from ringtree.plan.strategy import Layout

OP = "op"
MICROBATCH = "selective+microbatch"
#: torchtitan's op-level policy recomputes every second matrix multiplication
#: (``_get_custom_policy``: ``mm_count % 2 == 0`` is not saved).
OP_GEMMS_RECOMPUTED = 0.5


def check_op(model: Model, recompute: str) -> None:
    """RingtreeError for op-level checkpointing of a mixture of experts (not modelled)."""
    if recompute == OP and model.moe:
        raise RingtreeError("--recompute op (op-level selective checkpointing) is modelled for "
                            "dense models only")


def share(model: Model, layout: Layout, recompute: str, every: int) -> float:
    """The fraction of the busiest stage's layers recomputed: 1 under full recomputation of
    every layer, ceil(L'/K)/L' checkpointing every K-th, 0 otherwise."""
    if recompute != FULL or every <= 1 or not model.layers:
        return 1.0 if recompute == FULL else 0.0
    layers = math.ceil(model.layers / layout.pp)
    return math.ceil(layers / every) / layers


def micro_batch_every(
    m: Model, layout: Layout, b: int, recompute: str, attention: str, dev: Device, every: int,
    recomputed: float = 1.0,
) -> MicroBatch:
    """:func:`ringtree.plan.step.micro_batch`, with every ``every``-th layer recomputed (under
    :data:`MICROBATCH`, the share ``recomputed`` of selective's recomputation)."""
    if recompute == OP:
        return _op_micro_batch(m, layout, b, attention, dev)
    full = micro_batch(m, layout, b, SELECTIVE if recompute == MICROBATCH else recompute,
                       attention, dev)
    r = recomputed if recompute == MICROBATCH else share(m, layout, recompute, every)
    if recompute == MICROBATCH and r < 1.0:
        none = micro_batch(m, layout, b, NONE, attention, dev)
        return replace(none, backward=none.backward + r * (full.backward - none.backward))
    if recompute != FULL or r == 1.0:
        return full
    none = micro_batch(m, layout, b, NONE, attention, dev)
    return replace(none, backward=none.backward + r * (full.backward - none.backward))


def activations_every(
    m: Model, layout: Layout, b: int, micro_batches: int, recompute: str, attention: str,
    itemsize: int, framework: str, every: int, precision: str = BF16, loss: str = "",
) -> int:
    """:func:`ringtree.plan.memory.activation_memory`, every ``every``-th layer checkpointed."""
    args = (b, micro_batches)
    if recompute == OP:
        none = activation_memory(m, layout, *args, NONE, attention, itemsize, framework,
                                 precision, loss)
        held = first_stage_layers(m.layers or 1, layout.pp) * in_flight(layout, micro_batches)
        saved = _op_bytes_per_layer(m, b, layout)
        whole = activation_bytes_per_layer(m, b, layout.tp, layout.sp, NONE, attention,
                                           layout.cp)
        return int(none - held * max(0.0, whole - saved))
    full = activation_memory(m, layout, *args, recompute, attention, itemsize, framework,
                                 precision, loss)
    r = share(m, layout, recompute, every)
    if recompute != FULL or r == 1.0:
        return full
    none = activation_memory(m, layout, *args, NONE, attention, itemsize, framework,
                                 precision, loss)
    return int(none - r * (none - full))


def training_memory(m: Model, layout: Layout, tr: Training, micro_batches: int,
                    recompute: str = "") -> Memory:
    """:func:`ringtree.plan.memory.memory` with ``tr``'s settings (``recompute`` "": its own;
    every K-th layer and op-level checkpointing as :func:`activations_every` counts them)."""
    rc = recompute or tr.recompute
    mem = memory(m, layout, tr.micro_batch, micro_batches, rc, tr.attention, tr.itemsize,
                 tr.framework, tr.precision, tr.main_grad_bytes, tr.loss, tr.param_bytes,
                 tr.fsdp_no_sync)
    if tr.recompute_every > 1 or rc == OP:
        mem = replace(mem, activations=activations_every(
            m, layout, tr.micro_batch, micro_batches, rc, tr.attention, tr.itemsize,
            tr.framework, tr.recompute_every, tr.precision, tr.loss))
    return mem


def microbatch_kept(m: Model, layout: Layout, tr: Training, micro_batches: int,
                    capacity: int) -> tuple[float, Memory]:
    """Micro-batch level recomputation (module doc): (the share of selective's recomputation
    the first stage runs, in [0, 1]; the busiest GPU's memory). A chunk kept whole adds its
    layers' (none - selective) activations, the attention scores, to selective's memory."""
    sel = training_memory(m, layout, tr, micro_batches, SELECTIVE)
    chunks = round(in_flight(layout, micro_batches) * layout.v)
    whole = activation_bytes_per_layer(m, tr.micro_batch, layout.tp, layout.sp, NONE,
                                       tr.attention, layout.cp, precision=tr.precision)
    saved = activation_bytes_per_layer(m, tr.micro_batch, layout.tp, layout.sp, SELECTIVE,
                                       tr.attention, layout.cp, precision=tr.precision)
    extra = first_stage_layers(m.layers or 1, layout.pp) / layout.v * (whole - saved)
    if extra <= 0:  # nothing to save (fused attention): keep every micro-batch whole
        return 0.0, sel
    kept = min(chunks, max(0, math.floor((capacity - sel.total) / extra)))
    return 1 - kept / chunks, replace(sel, activations=int(sel.activations + kept * extra))


def _op_micro_batch(m: Model, layout: Layout, b: int, attention: str, dev: Device) -> MicroBatch:
    """One micro-batch under op-level checkpointing (module doc)."""
    assert m.seq_len
    none = micro_batch(m, layout, b, NONE, attention, dev)
    out_f, _ = logits_time(m, b * m.seq_len // layout.cp, layout.tp, dev)
    per_layer = (none.forward - out_f) / none.layers
    kernels = max(0.0, per_layer - none.wgrad - none.attention_fwd)
    extra = OP_GEMMS_RECOMPUTED * none.wgrad + kernels
    return replace(none, backward=none.backward + none.layers * extra)


def _op_bytes_per_layer(m: Model, b: int, layout: Layout) -> float:
    """Bytes one layer keeps under op-level checkpointing (module doc)."""
    assert m.seq_len and m.hidden and m.heads and m.ffn_size
    t = layout.tp
    sb = m.seq_len / layout.cp * b
    q, kvd, f, h = m.heads * m.dim, m.kv * m.dim, m.ffn_size, m.hidden
    outputs = [q / t, kvd / t, kvd / t, h] + ([f / t, f / t, h] if m.gated else [f / t, h])
    kept = sum(outputs[0::2]) + q / t + (h / t if layout.sp else h)  # + attention out, input
    return 2 * sb * kept


def op_flops(flops: float, selective: float, full: float) -> float:
    """Hardware FLOPs under op-level checkpointing, from the model FLOPs and the hardware
    FLOPs of selective and full recomputation: half the GEMMs (full's extra less attention's,
    which selective's extra is) repeated."""
    return flops + OP_GEMMS_RECOMPUTED * ((full - flops) - (selective - flops))
