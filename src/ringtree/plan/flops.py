"""FLOPs of a training step, as Megatron-LM counts them, and what recomputation adds.

Model FLOPs per step (Megatron-LM, ``megatron/training/training.py``,
``num_floating_point_operations``; for GPT shapes Korthikanti et al. 2022, eq. 7), for B
sequences of s tokens, L layers of hidden size h, a query heads of d (q = a d), g key/value
heads, MLP inner size f (x 3/2 when gated), k experts per token, vocabulary V:

    12 B s L h^2 [ (1 + g/a + s/h) q/h  +  (f/h) k (3/2 if gated)  +  V / (2 L h) ]

that is, per token and layer, 6 x the parameters each token multiplies (forward 2, backward 4)
plus the attention scores and their product with the values, 4 s q forward; plus the logits.
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

from ringtree.plan.model import Model

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


def layer_flops(m: Model, moe: bool = False) -> LayerFlops:
    """Forward FLOPs of one (dense, or MoE when ``moe``) layer for one sequence."""
    assert m.hidden and m.seq_len and m.heads
    s, h, q, kvd = m.seq_len, m.hidden, m.heads * m.dim, m.kv * m.dim
    projections = 2 * (2 * h * q + 2 * h * kvd)  # Q, O and K, V, per token
    dense = s * (projections + _mlp_per_token(m, moe))
    attention = 2 * 2 * s * s * q  # Q K^T and (softmax) V
    return LayerFlops(dense, attention)


def logits_flops(m: Model) -> float:
    """Forward FLOPs of the output layer for one sequence: 2 s h V."""
    assert m.seq_len and m.hidden and m.vocab
    return 2 * m.seq_len * m.hidden * m.vocab


def model_flops(m: Model, sequences: int) -> float:
    """Model FLOPs of forward + backward for ``sequences`` sequences (Megatron-LM's count)."""
    assert m.layers
    dense, moe = layer_flops(m), layer_flops(m, moe=True) if m.moe else None
    per_seq = (m.layers - m.moe_layers) * dense.forward + logits_flops(m)
    if moe is not None:
        per_seq += m.moe_layers * moe.forward
    return 3 * per_seq * sequences


def recompute_flops(m: Model, sequences: int, recompute: str) -> float:
    """FLOPs recomputation repeats for ``sequences`` sequences: every layer's forward (full),
    the attention scores and their product with the values (selective), nothing (none)."""
    assert m.layers
    if recompute == NONE:
        return 0.0
    dense, moe = layer_flops(m), layer_flops(m, moe=True) if m.moe else None
    dense_layers = m.layers - m.moe_layers
    if recompute == SELECTIVE:
        return m.layers * dense.attention * sequences
    per_seq = dense_layers * dense.forward + (m.moe_layers * moe.forward if moe else 0.0)
    return per_seq * sequences


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
