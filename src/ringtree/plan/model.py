"""What is trained: a transformer's shape, from which its parameter count, FLOPs, activation
memory and communication volumes follow.

A model is known either by its parameter count alone (enough to price data parallelism), by
the count with ``layers``, ``hidden`` and ``seq_len`` (enough for tensor and pipeline
parallelism's volumes), or by its whole shape (heads, FFN size, vocabulary: enough for the
compute and activation-memory models). Shapes are Megatron-LM's (Shoeybi et al. 2019):
attention with ``heads`` query heads of ``head_dim`` and ``kv_heads`` key/value heads
(grouped-query attention when fewer, Ainslie et al. 2023), an MLP of ``ffn`` (three matrices
when ``gated``, SwiGLU as in Llama; two with GeLU as in GPT), and for a mixture of experts
``experts`` MLPs of ``expert_ffn`` of which each token uses ``top_k`` (Shazeer et al. 2017;
Fedus et al. 2021), optionally ``shared_experts`` every token uses, after ``dense_layers``
ordinary layers (DeepSeek-V3). Attention may be multi-head latent attention (MLA, DeepSeek-V2/V3:
queries and keys/values projected through ranks ``q_lora_rank`` and ``kv_lora_rank``, each
head's query and key of ``head_dim`` + ``rope_dim``, its value of ``v_head_dim``), and every
``window_every``-th layer may attend to a sliding window of ``window`` keys (GPT-OSS). A
``parallel_block`` computes attention and MLP from the same normalised input, y = x + MLP(LN(x))
+ Attention(LN(x)) (GPT-J; PaLM, Chowdhery et al. 2022, Sec. 2; MegaScale, Jiang et al. 2024,
Sec. 3.1): the same FLOPs, one tensor-parallel collective per layer and pass instead of two.
Presets live in :mod:`ringtree.plan.presets`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from ringtree.errors import RingtreeError

MLPS = ("swiglu", "gelu")
#: The shape fields ``ringtree plan`` takes as flags (--layers, --kv-heads, --top-k, ...).
SHAPE_FLAGS = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq_len", "experts",
               "top_k", "expert_ffn", "shared_experts", "dense_layers")
#: A --params further than this from a complete shape's count contradicts it (refused); nearer,
#: it is the same count rounded ("8B" for Llama 3 8B's 8.03e9) and is used as given.
PARAMS_TOLERANCE = 0.10


@dataclass(frozen=True)
class Model:
    """A model as the planner sees it.

    params: number of parameters (Psi in the ZeRO paper); for an MoE model, all experts.
    layers, hidden, seq_len: L, h, s (TP communicates per layer; PP splits layers).
    heads, kv_heads, head_dim: attention shape (kv_heads < heads: grouped-query attention;
        head_dim defaults to hidden / heads).
    ffn: the dense MLP's inner size; gated: SwiGLU (3 matrices) instead of GeLU (2).
    vocab: vocabulary (padded, as trained); tied: input and output embeddings shared.
    dropout: dropout after attention and MLP (GPT-style; its 1-byte masks are activations).
    experts, top_k, expert_ffn, shared_experts, dense_layers, capacity_factor: mixture of
        experts (experts = 0: dense); capacity_factor None is dropless routing.
    kv_lora_rank, q_lora_rank, rope_dim, v_head_dim: multi-head latent attention (kv_lora_rank
        = 0: ordinary attention; q_lora_rank None: queries projected directly; head_dim is
        the query/key dimension without rotary, rope_dim the rotary part shared by the heads).
    window, window_every: sliding-window attention of ``window`` keys on every
        ``window_every``-th layer (0: none).
    parallel_block: attention and MLP side by side on one input (their outputs summed), so
        tensor parallelism reduces them once per layer and pass (sequence parallelism: one
        all-gather and one reduce-scatter) instead of twice.
    """

    name: str
    params: int
    layers: int | None = None
    hidden: int | None = None
    seq_len: int | None = None
    source: str = ""
    heads: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    ffn: int | None = None
    vocab: int | None = None
    gated: bool = False
    tied: bool = False
    dropout: bool = False
    experts: int = 0
    top_k: int = 1
    expert_ffn: int | None = None
    shared_experts: int = 0
    dense_layers: int = 0
    capacity_factor: float | None = None
    kv_lora_rank: int = 0
    q_lora_rank: int | None = None
    rope_dim: int = 0
    v_head_dim: int | None = None
    window: int = 0
    window_every: int = 0
    parallel_block: bool = False

    def with_overrides(self, params: int | None = None, **shape: int | None) -> Model:
        """This model with any given field replaced (None keeps the preset's value). When a
        shape field changes and ``params`` is not given, the count is recomputed from the
        shape if the shape is complete."""
        names = {f.name for f in fields(self)}
        changes = {k: v for k, v in shape.items() if v is not None}
        for key, value in changes.items():
            if key not in names:
                raise RingtreeError(f"unknown model field {key!r}")
            low = 0 if key in ("shared_experts", "dense_layers", "kv_lora_rank", "rope_dim",
                               "window", "window_every", "parallel_block") else 1
            if value < low:
                raise RingtreeError(f"model {key} must be >= {low}, got {value}")
        if params is not None and params < 1:
            raise RingtreeError(f"model params must be >= 1, got {params}")
        m = replace(self, **changes) if changes else self
        if m.heads and m.hidden and m.head_dim is None and m.hidden % m.heads:
            raise RingtreeError(
                f"hidden size {m.hidden} does not split into {m.heads} attention heads"
            )
        if m.heads is not None and m.kv_heads is not None and m.heads % m.kv_heads:
            raise RingtreeError(
                f"{m.heads} attention heads do not split into {m.kv_heads} key/value groups"
            )
        if params is not None:
            return replace(m, params=params)
        if changes and m.complete:
            return replace(m, params=count_params(m))
        return m

    @property
    def complete(self) -> bool:
        """Whether the whole shape is known (the compute and memory models need it)."""
        return None not in (self.layers, self.hidden, self.seq_len, self.heads, self.ffn_size,
                            self.vocab)

    @property
    def ffn_size(self) -> int | None:
        """The dense MLP's inner size (an MoE model's expert size when it has no dense one)."""
        return self.ffn if self.ffn is not None else self.expert_ffn

    @property
    def moe(self) -> bool:
        """Whether some layers are mixtures of experts."""
        return self.experts > 0

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts."""
        return (self.layers or 0) - self.dense_layers if self.moe else 0

    @property
    def mla(self) -> bool:
        """Whether attention is multi-head latent attention."""
        return self.kv_lora_rank > 0

    @property
    def windowed_layers(self) -> int:
        """Layers whose attention is a sliding window (every ``window_every``-th)."""
        if not (self.window and self.window_every and self.layers):
            return 0
        return self.layers // self.window_every

    @property
    def qk_dim(self) -> int:
        """Each head's query/key dimension (with MLA's rotary part)."""
        return self.dim + self.rope_dim

    @property
    def v_dim(self) -> int:
        """Each head's value dimension."""
        return self.v_head_dim or self.dim

    @property
    def kv(self) -> int:
        """Key/value heads (= heads without grouped-query attention)."""
        assert self.heads
        return self.kv_heads or self.heads

    @property
    def dim(self) -> int:
        """Head dimension d (hidden / heads unless given)."""
        assert self.heads and self.hidden
        return self.head_dim or self.hidden // self.heads

    def require_shape(self, why: str) -> tuple[int, int, int]:
        """``(layers, hidden, seq_len)``, or a RingtreeError saying which are missing."""
        missing = [
            flag
            for flag, v in (
                ("--layers", self.layers), ("--hidden", self.hidden), ("--seq-len", self.seq_len)
            )
            if v is None
        ]
        if missing:
            raise RingtreeError(
                f"{why} needs the model's shape: give {', '.join(missing)} or a --model preset"
            )
        assert self.layers and self.hidden and self.seq_len
        return self.layers, self.hidden, self.seq_len


def attention_params(m: Model) -> int:
    """Q, K, V and output projections of one layer: h (a d) + 2 h (g d) + (a d) h; with MLA
    (DeepSeek-V3's modelling code: q_a, q_b, kv_a_with_mqa, kv_b, o) h r_q + r_q a (d + d_r)
    + h (r_kv + d_r) + r_kv a (d + d_v) + a d_v h (r_q = 0: h a (d + d_r) for the queries)."""
    h, a = m.hidden, m.heads
    assert h and a
    if m.mla:
        rq, rkv = m.q_lora_rank, m.kv_lora_rank
        q = rq * (h + a * m.qk_dim) if rq else h * a * m.qk_dim
        return q + h * (rkv + m.rope_dim) + rkv * a * (m.dim + m.v_dim) + a * m.v_dim * h
    q = a * m.dim
    return 2 * h * q + 2 * h * m.kv * m.dim


def mlp_params(hidden: int, ffn: int, gated: bool) -> int:
    """One MLP: 3 h f with SwiGLU (gate, up, down), 2 h f with GeLU."""
    return (3 if gated else 2) * hidden * ffn


def expert_params(m: Model) -> int:
    """All experts of one MoE layer (routed and shared) plus the router (h x experts)."""
    assert m.hidden and m.expert_ffn
    one = mlp_params(m.hidden, m.expert_ffn, m.gated)
    return (m.experts + m.shared_experts) * one + m.hidden * m.experts


def count_params(m: Model) -> int:
    """Parameters of a complete shape, without biases: per layer the attention projections,
    the MLP (or the experts and router), two norm weights; plus the embedding (and the output
    layer unless tied) and the final norm. Llama-2's shapes give the released checkpoints'
    counts exactly (tests)."""
    assert m.complete and m.layers and m.hidden and m.vocab
    h = m.hidden
    per_layer = attention_params(m) + 2 * h + (m.q_lora_rank or 0) + m.kv_lora_rank  # norms
    dense = mlp_params(h, m.ffn_size, m.gated)  # type: ignore[arg-type]
    total = m.layers * per_layer + (m.layers - m.moe_layers) * dense
    total += m.moe_layers * expert_params(m) if m.moe else 0
    return total + (1 if m.tied else 2) * m.vocab * h + h


def active_params(m: Model) -> int:
    """Parameters one token uses: all of a dense model; an MoE model's attention, dense
    layers, shared experts and top_k routed experts."""
    if not m.moe:
        return m.params
    assert m.hidden and m.expert_ffn
    unused = (m.experts - m.top_k) * mlp_params(m.hidden, m.expert_ffn, m.gated)
    return m.params - m.moe_layers * unused


def swiglu_ffn(hidden: int) -> int:
    """SwiGLU's inner size for ``hidden``: 2/3 of 4h, rounded up to a multiple of 256 (Llama's
    rule, ``multiple_of=256`` in the released model code; Llama 2 7B: 4096 -> 11008)."""
    return 256 * math.ceil(8 * hidden / 3 / 256)


def custom_shape(base: Model, params: int | None, mlp: str | None, tied: bool,
                 **shape: int | None) -> Model:
    """``base`` with the shape flags applied: the MLP kind, tied embeddings, any shape field;
    a shape without an FFN size takes 4h (GeLU) or :func:`swiglu_ffn` (SwiGLU); the parameter
    count from a complete shape, or ``params`` when it agrees with it (:data:`PARAMS_TOLERANCE`;
    a RingtreeError when it contradicts it or when neither is known)."""
    m = base
    if mlp is not None:
        m = replace(m, gated=mlp == "swiglu")
    if tied:
        m = replace(m, tied=True)
    if shape.get("experts") and not (shape.get("expert_ffn") or m.expert_ffn):
        raise RingtreeError("--experts needs --expert-ffn (each expert's MLP inner size)")
    hidden = shape.get("hidden") or m.hidden
    if shape.get("ffn") is None and m.ffn is None and hidden and not (
            shape.get("experts") or m.moe):
        shape["ffn"] = swiglu_ffn(hidden) if m.gated else 4 * hidden
    changed = m is not base or any(v is not None for v in shape.values())
    m = m.with_overrides(None, **shape)
    if changed and m.complete:
        m = replace(m, params=count_params(m))
    if params is None:
        if base.name == "custom" and not m.complete:
            missing = [f"--{k.replace('_', '-')}" for k in ("layers", "hidden", "heads",
                       "vocab", "seq_len") if getattr(m, k) is None]
            raise RingtreeError(f"give --params, or the whole shape to count them (missing "
                                f"{', '.join(missing)})")
        return m
    if m.complete and abs(params / m.params - 1) > PARAMS_TOLERANCE:
        raise RingtreeError(
            f"--params {params:.4g} contradicts the shape's {m.params:.4g} parameters (more than "
            f"{PARAMS_TOLERANCE:.0%} apart): drop --params or fix the shape"
        )
    return replace(m, params=params)
