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
"""

from __future__ import annotations

import math
from dataclasses import replace

from ringtree.plan.compute import Device
from ringtree.plan.flops import FULL, NONE
from ringtree.plan.memory import activation_memory
from ringtree.plan.model import Model
from ringtree.plan.step import MicroBatch, micro_batch
from ringtree.plan.strategy import Layout


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
    full = micro_batch(m, layout, b, recompute, attention, dev)
    r = share(m, layout, recompute, every)
    if recompute != FULL or r == 1.0:
        return full
    none = micro_batch(m, layout, b, NONE, attention, dev)
    return replace(none, backward=none.backward + r * (full.backward - none.backward))


def activations_every(
    m: Model, layout: Layout, b: int, micro_batches: int, recompute: str, attention: str,
    itemsize: int, framework: str, every: int,
) -> int:
    """:func:`ringtree.plan.memory.activation_memory`, every ``every``-th layer checkpointed."""
    args = (b, micro_batches)
    full = activation_memory(m, layout, *args, recompute, attention, itemsize, framework)
    r = share(m, layout, recompute, every)
    if recompute != FULL or r == 1.0:
        return full
    none = activation_memory(m, layout, *args, NONE, attention, itemsize, framework)
    return int(none - r * (none - full))
