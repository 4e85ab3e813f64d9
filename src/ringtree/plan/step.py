"""The compute of one micro-batch on the busiest pipeline stage, from the roofline model.

The busiest stage is the last (ceil(L / pp) layers plus the output layer and the loss); its
forward and backward per micro-batch (the backward with what recomputation repeats: the whole
forward under ``full``, the attention scores under ``selective``) set the pipeline's pace, and
with the pipeline schedule the step: (m + (p - 1)/v) x (forward + backward + what each
micro-batch waits for in communication). Results are cached: a search asks for the same
(layer shape, split, micro-batch) many times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from ringtree.plan.compute import (
    Device,
    LayerTime,
    Slice,
    backward_over_forward,
    layer_time,
    logits_time,
)
from ringtree.plan.flops import FULL, SELECTIVE
from ringtree.plan.model import Model
from ringtree.plan.strategy import Layout


@dataclass(frozen=True)
class MicroBatch:
    """Compute seconds of one micro-batch on the busiest stage.

    forward, backward: compute only (backward includes recomputation). layers: the stage's
    layers. wgrad, attention_fwd, attention_bwd: per layer, the windows the backward's TP
    collectives and the CP transfers hide behind.
    """

    forward: float
    backward: float
    layers: int
    wgrad: float
    attention_fwd: float
    attention_bwd: float


@lru_cache(maxsize=65536)
def _layer(m: Model, sl: Slice, dev: Device, moe: bool) -> LayerTime:
    return layer_time(m, sl, dev, moe)


@lru_cache(maxsize=65536)
def micro_batch(
    m: Model, layout: Layout, b: int, recompute: str, attention: str, dev: Device
) -> MicroBatch:
    """One micro-batch of ``b`` sequences on the busiest stage of ``layout``."""
    assert m.layers and m.seq_len
    layers = math.ceil(m.layers / layout.pp)
    tokens = b * m.seq_len // layout.cp
    sl = Slice(tokens, m.seq_len, layout.tp, layout.sp, layout.ep, attention, layout.expert_tp)
    dense = _layer(m, sl, dev, False)
    parts = [(dense, 1 - m.moe_layers / m.layers)]
    if m.moe:
        parts.append((_layer(m, sl, dev, True), m.moe_layers / m.layers))
    fwd = sum(lt.forward * w for lt, w in parts)
    bwd = sum(lt.backward * w for lt, w in parts)
    att = sum(lt.attention_fwd * w for lt, w in parts)
    wgrad = sum(lt.wgrad * w for lt, w in parts)
    extra = fwd if recompute == FULL else att if recompute == SELECTIVE else 0.0
    out_f, out_b = logits_time(m, tokens, layout.tp, dev)
    return MicroBatch(
        layers * fwd + out_f, layers * (bwd + extra) + out_b, layers, wgrad,
        att, backward_over_forward(attention) * att,
    )
