"""What is trained: a model's size and the shapes that set its communication volumes.

Presets ``7b``, ``13b``, ``70b`` are Llama-2 (Touvron et al. 2023, "Llama 2: Open Foundation
and Fine-Tuned Chat Models", Table 1, and the released configs): their parameter counts are
computed from the published shapes by :func:`llama_params` (6,738,415,616 / 13,015,864,320 /
68,976,648,192, the figures the released checkpoints have). ``grammar-tutor`` is the seed's
500k-parameter model; its layer count, hidden size and sequence length are ringtree's
assumption (the seed gives only the parameter count).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ringtree.errors import RingtreeError


@dataclass(frozen=True)
class Model:
    """A model as the planner sees it.

    params: number of parameters (Psi in the ZeRO paper).
    layers: transformer layers (TP communicates per layer; PP splits layers into stages).
    hidden: hidden size h (TP and PP move b*s*h activations).
    seq_len: tokens per sequence s.
    """

    name: str
    params: int
    layers: int | None = None
    hidden: int | None = None
    seq_len: int | None = None
    source: str = ""

    def with_overrides(
        self,
        params: int | None = None,
        layers: int | None = None,
        hidden: int | None = None,
        seq_len: int | None = None,
    ) -> Model:
        """This model with any given field replaced (None keeps the preset's value)."""
        changes = {
            k: v
            for k, v in {
                "params": params, "layers": layers, "hidden": hidden, "seq_len": seq_len
            }.items()
            if v is not None
        }  # fmt: skip
        for key, value in changes.items():
            if value < 1:
                raise RingtreeError(f"model {key} must be >= 1, got {value}")
        return replace(self, **changes) if changes else self

    def require_shape(self, why: str) -> tuple[int, int, int]:
        """``(layers, hidden, seq_len)``, or a RingtreeError saying which are missing."""
        missing = [
            flag
            for flag, v in (
                ("--layers", self.layers), ("--hidden", self.hidden), ("--seq-len", self.seq_len)
            )
            if v is None
        ]  # fmt: skip
        if missing:
            raise RingtreeError(
                f"{why} needs the model's shape: give {', '.join(missing)} or a --model preset "
                f"({', '.join(PRESETS)})"
            )
        assert self.layers and self.hidden and self.seq_len
        return self.layers, self.hidden, self.seq_len


def llama_params(layers: int, hidden: int, ffn: int, vocab: int, kv_heads_fraction: float) -> int:
    """Parameters of a Llama-style decoder (no biases, untied input/output embeddings).

    Per layer: q and o projections 2h^2, k and v 2h^2 * (kv heads / heads) (grouped-query
    attention), SwiGLU MLP 3*h*ffn, two RMSNorm weights 2h; plus embeddings and LM head
    2*vocab*h and the final norm h.
    """
    attn = 2 * hidden * hidden + int(2 * hidden * hidden * kv_heads_fraction)
    per_layer = attn + 3 * hidden * ffn + 2 * hidden
    return layers * per_layer + 2 * vocab * hidden + hidden


_LLAMA2 = "Llama-2 shape (Touvron et al. 2023, Table 1; released config)"

PRESETS: dict[str, Model] = {
    "grammar-tutor": Model(
        "grammar-tutor", 500_000, layers=2, hidden=128, seq_len=64,
        source="the seed's 500k parameters; layers/hidden/seq_len are ringtree's assumption",
    ),
    "7b": Model(
        "7b", llama_params(32, 4096, 11008, 32000, 1.0), layers=32, hidden=4096, seq_len=4096,
        source=_LLAMA2,
    ),
    "13b": Model(
        "13b", llama_params(40, 5120, 13824, 32000, 1.0), layers=40, hidden=5120, seq_len=4096,
        source=_LLAMA2,
    ),
    "70b": Model(
        "70b", llama_params(80, 8192, 28672, 32000, 8 / 64), layers=80, hidden=8192,
        seq_len=4096, source=_LLAMA2 + ", grouped-query attention with 8 KV heads",
    ),
}  # fmt: skip


def get_model(name: str) -> Model:
    """The preset called ``name`` (case-insensitive), or a RingtreeError listing them."""
    key = name.strip().lower()
    if key not in PRESETS:
        raise RingtreeError(f"unknown model preset {name!r}: expected one of {', '.join(PRESETS)}")
    return PRESETS[key]
