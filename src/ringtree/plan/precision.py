"""The precision of a step's GEMMs (``--precision bf16|fp16|fp8``) and what FP8 changes.

BF16 and FP16 run every GEMM on the GPU's dense 16-bit tensor-core peak. FP8 is priced as
Transformer Engine (Micikevicius et al. 2022, "FP8 Formats for Deep Learning"; NVIDIA
Transformer Engine's ``fp8_autocast``) and torchao's ``Float8Linear`` run it:

- in FP8: the three GEMMs of every linear layer inside the transformer layers (QKV, attention
  output, MLP or experts' up/gate and down): the forward (fprop, E4M3 inputs and weights), the
  input gradient (dgrad) and the weight gradient (wgrad, E5M2 output gradients), on the GPU's
  dense FP8 peak at its own efficiency (:data:`ringtree.plan.compute.GENERATION`), plus the
  write of their BF16 outputs, which FP8 does not speed up (:mod:`ringtree.plan.compute`);
- in BF16: attention's two batched products and its softmax (FlashAttention), the output layer
  (the LM head: Megatron-Core's ``output_layer`` is not a TE module; torchtitan's float8
  converter skips ``output``), the router, norms and element-wise kernels;
- the casts: every FP8 GEMM's inputs are scaled (per-tensor amax), cast and transposed (Hopper's
  FP8 tensor cores take only the "TN" layout, so wgrad and dgrad need transposed copies):
  the activation and the weight in the forward, the output gradient in the backward, each read
  once in 16 bits and written twice in 8 (4 bytes per element, :func:`cast_bytes`); these are
  memory-bound kernels, priced by the roofline's memory term. Transformer Engine fuses some of
  them into the norms and the activation function; the fitted FP8 efficiency absorbs that.

Memory: the fp32 master weights, Adam's fp32 moments and the fp32 main gradients are those of
BF16 training. The weights: under Megatron the linear layers' weights are FP8 parameters, one
byte each, with no 16-bit copy (NVIDIA Megatron-Bridge's FP8 recipes set ``fp8_param_gather =
True``, Transformer Engine's FP8 model parameters: src/megatron/bridge/training/
mixed_precision.py, ``bf16_with_fp8_current_scaling_mixed``, commit 2b8806b9); embeddings and
norms stay 16-bit. Elsewhere (torchao's ``Float8Linear`` under FSDP2) the 16-bit weights stay
and the layers in use get FP8 copies (two layers' worth). Of the activations, the inputs the
backward's wgrad GEMMs read are saved in FP8 rather than BF16: the two norms' outputs (QKV's and
the MLP's inputs) and the MLP's down-projection input (:func:`fp8_saved_activation`).
Everything else (attention's Q, K, V and output for FlashAttention's backward, the norms'
inputs, the MLP's up/gate outputs) stays BF16.
"""

from __future__ import annotations

from ringtree.errors import RingtreeError

BF16, FP16, FP8 = "bf16", "fp16", "fp8"
PRECISIONS = (BF16, FP16, FP8)
#: Bytes a cast-and-transpose kernel moves per element: read 2 (BF16), write the FP8 copy and
#: its transpose (1 + 1); the per-tensor amax is taken in the same pass (Transformer Engine's
#: ``cast_transpose`` with delayed scaling; current scaling's separate amax pass is in the
#: fitted efficiency).
CAST_BYTES_PER_ELEMENT = 4
#: Bytes per parameter of an FP8 weight (an FP8 parameter, or a copy beside a 16-bit one).
FP8_WEIGHT_BYTES = 1


def check_precision(precision: str, fp8_tflops: float, gpu: str) -> None:
    """A RingtreeError for an unknown precision, or FP8 on a GPU without FP8 tensor cores."""
    if precision not in PRECISIONS:
        raise RingtreeError(f"precision {precision!r}: expected one of {', '.join(PRECISIONS)}")
    if precision == FP8 and fp8_tflops <= 0:
        raise RingtreeError(f"--precision fp8 needs FP8 tensor cores: {gpu} has none (Hopper, "
                            "Ada and Blackwell do)")


def cast_bytes(m: float, n: float, k: float) -> tuple[float, float]:
    """(forward, backward) bytes of one FP8 linear layer's casts, for ``(m x k) @ (k x n)``:
    the input (m k) and the weight (k n) before fprop, the output gradient (m n) before dgrad
    and wgrad (module doc)."""
    return CAST_BYTES_PER_ELEMENT * (m * k + k * n), CAST_BYTES_PER_ELEMENT * m * n


def fp8_saved_activation(hidden: int, mlp_inner: float, tp: int, sp: bool) -> float:
    """Bytes per token one layer saves less under FP8 (one byte per element instead of two):
    the two norms' outputs (replicated over TP unless ``sp``) and the down-projection's input
    (``mlp_inner`` elements per token, split over TP)."""
    return 2 * hidden / (tp if sp else 1) + mlp_inner / tp
