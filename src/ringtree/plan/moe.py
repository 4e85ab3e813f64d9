"""What a mixture-of-experts layer adds to its GEMMs (Megatron-Core's all-to-all token
dispatcher, megatron/core/transformer/moe/token_dispatcher.py at NVIDIA/Megatron-LM commit
d98e8a64, ``MoEAlltoAllTokenDispatcher``): memory-bound passes over the routed tokens.

Passes. The forward permutes each token's hidden state to its top-k experts ("permutation 1":
t k h elements written, t h read per copy), sends them over the all-to-all, and, when a GPU
holds more than one expert, sorts what it received by local expert (``sort_chunks_by_idxs``,
"permutation 2"); the combine undoes both (``unpermute`` weights each copy by its
probability and sums). Each pass reads and writes t k h 16-bit elements: 4 t k h bytes; the
backward runs each pass's mirror image (priced, as the other memory-bound kernels, at twice
the forward). With one expert per GPU (or no expert parallelism) there is no second sort.

Not priced: the host. The dispatcher copies the token counts per expert to the host in every
layer's forward (``_maybe_dtoh_and_synchronize``: "A synchronization is needed before expert
parallel AlltoAll communication to get the ``input_splits`` and ``output_splits`` CPU
values"), so where a layer's GPU work is small and no CUDA graph is captured the host's
launches set the pace (docs/plan.md, MoE: the runs this leaves outside).
"""

from __future__ import annotations


def permute_passes(local_experts: int, ep: int) -> int:
    """Memory-bound passes over the routed tokens in one forward: permute and unpermute, plus
    the sort and unsort by local expert when a GPU holds several experts of an ep > 1 group."""
    return 4 if ep > 1 and local_experts > 1 else 2


def permute_bytes(tokens: float, top_k: int, hidden: int, local_experts: int, ep: int,
                  capacity: float = 1.0) -> float:
    """Bytes the forward's permutation passes move: 4 t k h (16-bit, read and written) per
    pass, t k times ``capacity`` routed copies."""
    return permute_passes(local_experts, ep) * 2 * 2 * tokens * top_k * capacity * hidden
