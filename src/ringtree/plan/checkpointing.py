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
"""

from __future__ import annotations

import math
from dataclasses import replace

from ringtree.errors import RingtreeError
from ringtree.plan.compute import Device, logits_time
from ringtree.plan.flops import FULL, NONE
from ringtree.plan.memory import (
    activation_bytes_per_layer,
    activation_memory,
    first_stage_layers,
    in_flight,
)
from ringtree.plan.model import Model
from ringtree.plan.precision import BF16
from ringtree.plan.step import MicroBatch, micro_batch
from ringtree.plan.strategy import Layout

OP = "op"
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
) -> MicroBatch:
    """:func:`ringtree.plan.step.micro_batch`, with every ``every``-th layer recomputed."""
    if recompute == OP:
        return _op_micro_batch(m, layout, b, attention, dev)
    full = micro_batch(m, layout, b, recompute, attention, dev)
    r = share(m, layout, recompute, every)
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
