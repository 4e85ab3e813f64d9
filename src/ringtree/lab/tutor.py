"""The grammar tutor: a small causal transformer (~480k parameters) that predicts the next word.

Shape (defaults): token and position embeddings of width 128, two pre-norm transformer layers
(4 heads, feed-forward 640, no dropout so that runs are deterministic), a final layer norm
and a linear head over the vocabulary. Parameters: 2 x 231,168 (layers: attention
4 x 128 x 129, feed-forward 128 x 640 + 640 + 640 x 128 + 128, two norms 2 x 256) + 6,144
(token embeddings, 48 words) + 4,096 (positions, 32) + 256 (final norm) + 6,192 (head) =
479,024: the seed's "|theta| = 500k". In fp32 its gradients are 1.92 MB.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ringtree.lab.grammar import VOCABULARY


@dataclass(frozen=True)
class TutorConfig:
    """The model's shape and how it trains.

    vocab: words in the grammar. context: tokens per window. width: embedding size.
    layers, heads, ff: transformer layers, attention heads, feed-forward width.
    batch_size: windows per rank per step. lr, momentum: SGD's (see :func:`optimizer`).
    """

    vocab: int = len(VOCABULARY)
    context: int = 32
    width: int = 128
    layers: int = 2
    heads: int = 4
    ff: int = 640
    batch_size: int = 16
    lr: float = 0.1
    momentum: float = 0.9


class GrammarTutor(nn.Module):
    """Next-token model: ``forward(ids)`` maps (batch, context) token ids to logits of shape
    (batch, context, vocab); position t sees tokens 0..t only (a causal mask)."""

    def __init__(self, config: TutorConfig = TutorConfig()) -> None:
        super().__init__()
        self.config = config
        self.tokens = nn.Embedding(config.vocab, config.width)
        self.positions = nn.Embedding(config.context, config.width)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(
                config.width,
                config.heads,
                config.ff,
                dropout=0.0,
                batch_first=True,
                norm_first=True,
            )
            for _ in range(config.layers)
        )
        self.norm = nn.LayerNorm(config.width)
        self.head = nn.Linear(config.width, config.vocab)
        mask = nn.Transformer.generate_square_subsequent_mask(config.context)
        self.register_buffer("causal_mask", mask, persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Logits for the next token at every position of ``ids``."""
        t = ids.shape[1]
        x = self.tokens(ids) + self.positions(torch.arange(t, device=ids.device))
        mask = self.causal_mask[:t, :t]
        for layer in self.layers:
            x = layer(x, src_mask=mask, is_causal=True)
        return self.head(self.norm(x))


def build_tutor(seed: int, config: TutorConfig = TutorConfig()) -> GrammarTutor:
    """A freshly initialised tutor; the same seed gives the same weights on every process."""
    torch.manual_seed(seed)
    return GrammarTutor(config)


def optimizer(model: nn.Module, config: TutorConfig = TutorConfig()) -> torch.optim.Optimizer:
    """SGD with momentum: the loss falls from 3.9 to about 2.3 in 50 steps, as fast as AdamW
    here, and two runs whose gradients differ by rounding stay within rounding of each other.
    Adam would not keep them so: it divides each gradient by its own running magnitude, so a
    near-zero gradient that rounds to the other sign moves a weight by a whole learning rate.
    """
    return torch.optim.SGD(model.parameters(), lr=config.lr, momentum=config.momentum)


def n_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
