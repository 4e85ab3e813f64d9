"""Model presets, each with its source; parameter counts are computed from the shapes
(:func:`ringtree.plan.model.count_params`) and tested against the published ones.

- ``7b``, ``13b``, ``70b``: Llama-2 (Touvron et al. 2023, Table 1, and the released configs):
  6,738,415,616 / 13,015,864,320 / 68,976,648,192 parameters, the released checkpoints'.
- ``llama3-8b``, ``llama3-70b``, ``llama3-405b``: Llama 3 (Llama Team 2024, Table 3; vocabulary
  128,256 as released), sequence 8,192 as pre-trained.
- ``gpt3-175b``: GPT-3 (Brown et al. 2020, Table 2.1) as Megatron-LM trains it (Narayanan et al.
  2021): vocabulary padded to 51,200, tied embeddings, dropout, GeLU MLP of 4h.
- ``mixtral-8x7b``: Mixtral (Jiang et al. 2024, Table 1): 8 experts, top-2, 46.7B parameters.
  Sequence 4,096 is ringtree's default (Mixtral's context is 32k: ``--seq-len``).
- ``deepseek-v3-like``: DeepSeek-V3's sizes (DeepSeek-AI 2024, Sec. 4.2): 61 layers of 7,168,
  the first 3 dense (MLP 18,432), then 256 routed experts of 2,048 (top-8) and 1 shared;
  vocabulary 129,280; sequence 4,096; multi-head latent attention of 128 heads (Sec. 4.2:
  q_lora_rank 1,536, kv_lora_rank 512, per-head query/key 128 + 64 rotary, value 128; the
  released config.json the same): 671.0B parameters, 37.5B active per token (the report's
  671B and 37B; its multi-token prediction module not counted).
- ``grammar-tutor``: the seed's 500k-parameter model; its shape is ringtree's assumption.
"""

from __future__ import annotations

from dataclasses import replace

from ringtree.errors import RingtreeError
from ringtree.plan.model import Model, count_params

_LLAMA2 = "Llama-2 shape (Touvron et al. 2023, Table 1; released config)"
_LLAMA3 = "Llama 3 shape (Llama Team 2024, 'The Llama 3 Herd of Models', Table 3)"


def _shaped(m: Model) -> Model:
    return replace(m, params=count_params(m))


def _llama(name: str, layers: int, hidden: int, heads: int, kv: int, ffn: int, vocab: int,
           seq: int, source: str) -> Model:
    return _shaped(
        Model(
            name,
            0,
            layers,
            hidden,
            seq,
            source,
            heads=heads,
            kv_heads=kv,
            ffn=ffn,
            vocab=vocab,
            gated=True,
        )
    )


PRESETS: dict[str, Model] = {
    "grammar-tutor": Model(
        "grammar-tutor", 500_000, layers=2, hidden=128, seq_len=64,
        source="the seed's 500k parameters; layers/hidden/seq_len are ringtree's assumption",
    ),
    "7b": _llama("7b", 32, 4096, 32, 32, 11008, 32000, 4096, _LLAMA2),
    "13b": _llama("13b", 40, 5120, 40, 40, 13824, 32000, 4096, _LLAMA2),
    "70b": _llama("70b", 80, 8192, 64, 8, 28672, 32000, 4096,
                  _LLAMA2 + ", grouped-query attention with 8 KV heads"),
    "llama3-8b": _llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, _LLAMA3),
    "llama3-70b": _llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, _LLAMA3),
    "llama3-405b": _llama("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192, _LLAMA3),
    "gpt3-175b": _shaped(Model(
        "gpt3-175b", 0, 96, 12288, 2048, heads=96, ffn=4 * 12288, vocab=51200, tied=True,
        dropout=True,
        source="GPT-3 175B (Brown et al. 2020, Table 2.1) as Megatron-LM trains it "
        "(Narayanan et al. 2021: vocabulary padded to 51,200)",
    )),
    "mixtral-8x7b": _shaped(Model(
        "mixtral-8x7b", 0, 32, 4096, 4096, heads=32, kv_heads=8, vocab=32000, gated=True,
        experts=8, top_k=2, expert_ffn=14336,
        source="Mixtral 8x7B (Jiang et al. 2024, 'Mixtral of Experts', Table 1); sequence "
        "4,096 is ringtree's default (context 32k)",
    )),
    "deepseek-v3-like": _shaped(Model(
        "deepseek-v3-like", 0, 61, 7168, 4096, heads=128, head_dim=128, ffn=18432,
        vocab=129280, gated=True, experts=256, top_k=8, expert_ffn=2048, shared_experts=1,
        dense_layers=3, kv_lora_rank=512, q_lora_rank=1536, rope_dim=64, v_head_dim=128,
        source="DeepSeek-V3's sizes (DeepSeek-AI 2024, 'DeepSeek-V3 Technical Report', "
        "Sec. 4.2), multi-head latent attention, without multi-token prediction",
    )),
}

ALIASES = {"deepseek-v3": "deepseek-v3-like", "llama2-7b": "7b", "llama2-13b": "13b",
           "llama2-70b": "70b", "mixtral": "mixtral-8x7b"}


def get_model(name: str) -> Model:
    """The preset called ``name`` (case-insensitive), or a RingtreeError listing them."""
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in PRESETS:
        raise RingtreeError(f"unknown model preset {name!r}: expected one of {', '.join(PRESETS)}")
    return PRESETS[key]
