"""FLOPs of a training step, as Megatron-LM counts them, and what recomputation adds.

Model FLOPs per step (Megatron-LM, ``megatron/training/training.py``,
``num_floating_point_operations``; for GPT shapes Korthikanti et al. 2022, eq. 7), for B
sequences of s tokens, L layers of hidden size h, a query heads of d (q = a d), g key/value
heads, MLP inner size f (x 3/2 when gated), k experts per token, vocabulary V:

    12 B s L h^2 [ (1 + g/a + s/h) q/h  +  (f/h) k (3/2 if gated)  +  V / (2 L h) ]

that is, per token and layer, 6 x the parameters each token multiplies (forward 2, backward 4)
plus the attention scores and their product with the values, 4 s q forward; plus the logits.
Multi-head latent attention counts its five projections (2 x their parameters per token) and
scores of d_qk = d + d_rope against values of d_v: 2 s^2 a (d_qk + d_v) per layer; a layer with
a sliding window of w keys counts 2 s w a (d_qk + d_v).
The attention term counts the full s x s product, as every published MFU does (causal masking
halves the work a fused kernel does; the compute model takes that into account, the count does
not). For GPT shapes (f = 4h, g = a, q = h) this is 72 B s L h^2 (1 + s/6h + V/12Lh).

MFU and HFU (Chowdhery et al. 2022, PaLM, Sec. 4.1 and App. B): model FLOPs (above) or
hardware FLOPs (above plus what recomputation repeats) per second, over the GPUs' peak.
Full recomputation repeats each layer's forward (Narayanan et al. 2021, eq. 3:
96 B s L h^2 (1 + s/6h + V/16Lh)); selective recomputation repeats the attention scores and
their product with the values (Korthikanti et al. 2022, Sec. 5: 2.7 % more for GPT-3).
"""

from __future__ import annotations

from dataclasses import dataclass

from ringtree.plan.model import Model, attention_params

NONE, SELECTIVE, FULL = "none", "selective", "full"
RECOMPUTE = (NONE, SELECTIVE, FULL)


@dataclass(frozen=True)
class LayerFlops:
    """Forward FLOPs of one layer for one sequence of s tokens (the whole layer, before any
    split): ``dense`` the projections and MLP, ``attention`` the score and value products."""

    dense: float
    attention: float

    @property
    def forward(self) -> float:
        """dense + attention."""
        return self.dense + self.attention


def _mlp_per_token(m: Model, moe: bool) -> float:
    """Forward FLOPs of one layer's MLP per token: 2 x the parameters a token multiplies."""
    assert m.hidden
    mult = 3 if m.gated else 2
    if moe:
        assert m.expert_ffn
        routed = m.top_k * mult * m.hidden * m.expert_ffn
        shared = m.shared_experts * mult * m.hidden * m.expert_ffn
        return 2 * (routed + shared)  # the router is not counted (Megatron-LM)
    return 2 * mult * m.hidden * m.ffn_size  # type: ignore[operator]


def layer_flops(m: Model, moe: bool = False, windowed: bool = False) -> LayerFlops:
    """Forward FLOPs of one (dense, or MoE when ``moe``) layer for one sequence: the
    projections 2 x their parameters per token (:func:`attention_params`: MLA's low-rank ones
    too), the scores and their product with the values 2 s k a (d_qk + d_v) over k keys per
    query (k = s, or the window on a ``windowed`` layer: a query attends to at most ``window``
    keys)."""
    assert m.hidden and m.seq_len and m.heads
    s = m.seq_len
    dense = s * (2 * attention_params(m) + _mlp_per_token(m, moe))
    keys = min(m.window, s) if windowed and m.window else s
    attention = 2 * s * keys * m.heads * (m.qk_dim + m.v_dim)  # Q K^T and (softmax) V
    return LayerFlops(dense, attention)


def logits_flops(m: Model) -> float:
    """Forward FLOPs of the output layer for one sequence: 2 s h V."""
    assert m.seq_len and m.hidden and m.vocab
    return 2 * m.seq_len * m.hidden * m.vocab


def _attention_per_seq(m: Model) -> float:
    """Attention's forward FLOPs of all layers for one sequence (windowed and full)."""
    assert m.layers
    w = m.windowed_layers
    full = layer_flops(m).attention
    return (m.layers - w) * full + (w * layer_flops(m, windowed=True).attention if w else 0.0)


def _dense_per_seq(m: Model) -> float:
    """The projections' and MLPs' forward FLOPs of all layers for one sequence."""
    assert m.layers
    moe = m.moe_layers * layer_flops(m, moe=True).dense if m.moe else 0.0
    return (m.layers - m.moe_layers) * layer_flops(m).dense + moe


def model_flops(m: Model, sequences: int) -> float:
    """Model FLOPs of forward + backward for ``sequences`` sequences (Megatron-LM's count)."""
    per_seq = _dense_per_seq(m) + _attention_per_seq(m) + logits_flops(m)
    return 3 * per_seq * sequences


def recompute_flops(m: Model, sequences: int, recompute: str) -> float:
    """FLOPs recomputation repeats for ``sequences`` sequences: every layer's forward (full),
    the attention scores and their product with the values (selective), nothing (none)."""
    if recompute == NONE:
        return 0.0
    if recompute == SELECTIVE:
        return _attention_per_seq(m) * sequences
    return (_dense_per_seq(m) + _attention_per_seq(m)) * sequences


def hardware_flops(m: Model, sequences: int, recompute: str) -> float:
    """Model FLOPs plus what recomputation repeats (PaLM's hardware FLOPs)."""
    return model_flops(m, sequences) + recompute_flops(m, sequences, recompute)


def megatron_gpt_flops(batch: int, seq: int, layers: int, hidden: int, vocab: int) -> float:
    """72 B s L h^2 (1 + s/6h + V/12Lh): Korthikanti et al. 2022, eq. 7, for checking."""
    return (
        72
        * batch
        * seq
        * layers
        * hidden**2
        * (1 + seq / (6 * hidden) + vocab / (12 * layers * hidden))
    )
