"""The collectives of one training step, per strategy, from the published formulas.

Notation: Psi parameters, p bytes per parameter/gradient element, dp x tp x pp GPUs, L layers,
h hidden size, s sequence length, b micro-batch (sequences), m micro-batches per step on each
pipeline. A GPU holds Psi' = Psi / (tp * pp) parameters and L' = L / pp layers.

Data parallel (over the dp group; Rajbhandari et al. 2020, "ZeRO", Sec. 7):

- ``ddp``: all-reduce of the p*Psi' gradient bytes, once per step (gradients accumulate locally
  over micro-batches), in buckets (default 25 MiB): 2 Psi per worker. PyTorch DDP (Li et al.
  2020).
- ``zero1`` (P_os): reduce-scatter of the gradients once per step + all-gather of the updated
  parameters after the optimizer step: Psi + Psi = 2 Psi, as DDP; in buckets (default 5e8
  elements, DeepSpeed's).
- ``zero2`` (P_os+g): the same volumes, but the gradients are partitioned, so the
  reduce-scatter runs every micro-batch (m times per step).
- ``zero3`` (P_os+g+p; FSDP, Zhao et al. 2023): per micro-batch, all-gather of each layer's
  parameters before its forward and again before its backward, and reduce-scatter of its
  gradients after: 3 Psi.

Tensor parallel (over the tp group; Shoeybi et al. 2019, "Megatron-LM", Sec. 3): per layer and
micro-batch, 2 all-reduces of b*s*h elements in the forward (after attention and after the
MLP) and 2 in the backward: 4 per layer. With sequence parallelism (Korthikanti et al. 2022,
Sec. 4.2.2) each all-reduce becomes a reduce-scatter and an all-gather of the same size:
the same bytes, twice the calls.

Pipeline parallel (over the pp group; Narayanan et al. 2021, Sec. 2.2 and 4.1): per micro-batch
and stage boundary, one point-to-point send of the activations forward and one of their
gradients backward, b*s*h/tp elements each (the scatter/gather optimisation: each TP rank sends
its 1/tp); the 1F1B schedule idles a fraction (p-1)/(m+p-1) of the step (the bubble).

Not modelled: embedding/LM-head TP collectives, activation recomputation, expert or context
parallelism.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ringtree.collectives import Collective
from ringtree.errors import RingtreeError
from ringtree.plan.groups import DP, PP, TP
from ringtree.plan.model import Model
from ringtree.plan.strategy import Layout

FORWARD, BACKWARD = "forward", "backward"
ZERO = "Rajbhandari et al. 2020 (ZeRO), Sec. 7"
FSDP = "Rajbhandari et al. 2020 (ZeRO), Sec. 7.2.2; Zhao et al. 2023 (PyTorch FSDP)"
DDP = "Li et al. 2020 (PyTorch DDP); Rajbhandari et al. 2020 (ZeRO), Sec. 7.1"
MEGATRON = "Shoeybi et al. 2019 (Megatron-LM), Sec. 3"
SEQ_PAR = "Korthikanti et al. 2022 (reducing activation recomputation), Sec. 4.2.2"
PIPELINE = "Narayanan et al. 2021 (Megatron-LM on GPU clusters), Sec. 2.2, 4.1"


@dataclass(frozen=True)
class Batch:
    """The step's work on one pipeline (one data-parallel replica).

    itemsize: bytes per parameter, gradient and activation element (p).
    micro_batch: sequences per micro-batch (b).
    micro_batches: micro-batches per step (m); gradients accumulate over them.
    bucket_bytes: gradient bucket size for DDP and ZeRO-1/2 (0: one collective for all;
        None: the framework's default, :func:`default_bucket_bytes`).
    """

    itemsize: int
    micro_batch: int = 1
    micro_batches: int = 1
    bucket_bytes: int | None = None


DDP_BUCKET_BYTES = 25 * 2**20  # torch DDP bucket_cap_mb=25, which it multiplies by 1024 * 1024
DEEPSPEED_BUCKET_ELEMENTS = 500_000_000  # DeepSpeed reduce_bucket_size / allgather_bucket_size


def default_bucket_bytes(flavor: str, itemsize: int) -> int:
    """The framework's default bucket: PyTorch DDP's 25 MiB for ``ddp``; DeepSpeed's 5e8
    elements for ``zero1``/``zero2`` (ZeRO-3 gathers per layer instead)."""
    return DDP_BUCKET_BYTES if flavor == "ddp" else DEEPSPEED_BUCKET_ELEMENTS * itemsize


@dataclass(frozen=True)
class CommOp:
    """One kind of communication in a step.

    A *round* is ``calls_per_round`` calls (the last of ``last_bytes``, the others of
    ``bytes_per_call``), repeated ``rounds`` times per step. ``window`` is the compute a round
    may hide behind (FORWARD or BACKWARD of one micro-batch), None when it is on the critical
    path. ``collective`` None means point-to-point sends.
    """

    op: str
    collective: Collective | None
    group: str
    bytes_per_call: int
    calls_per_round: int
    last_bytes: int
    rounds: int
    window: str | None
    source: str

    @property
    def calls(self) -> int:
        """Calls per step."""
        return self.calls_per_round * self.rounds


def _even(
    op: str, col: Collective | None, group: str, size: int, calls: int, rounds: int,
    window: str | None, source: str,
) -> CommOp:  # fmt: skip
    return CommOp(op, col, group, size, calls, size, rounds, window, source)


def _bucketed(
    op: str, col: Collective, total_bytes: int, batch: Batch, bucket_bytes: int, rounds: int,
    window: str | None, source: str,
) -> CommOp:  # fmt: skip
    """``total_bytes`` in buckets of ``bucket_bytes`` (element-aligned), the last smaller."""
    p = batch.itemsize
    bucket = (bucket_bytes // p) * p
    if bucket <= 0 or bucket >= total_bytes:
        return _even(op, col, DP, total_bytes, 1, rounds, window, source)
    n = math.ceil(total_bytes / bucket)
    return CommOp(op, col, DP, bucket, n, total_bytes - (n - 1) * bucket, rounds, window, source)


def stage_layers(model: Model, layout: Layout) -> int:
    """Layers on the busiest pipeline stage, ceil(L / pp); RingtreeError if pp > L."""
    layers = model.layers
    if layers is None:
        return 1
    if layout.pp > layers:
        raise RingtreeError(
            f"pp={layout.pp} pipeline stages but the model has {layers} layers (need pp <= layers)"
        )
    return math.ceil(layers / layout.pp)


def shard_params(model: Model, layout: Layout) -> int:
    """Parameters on one GPU before ZeRO partitioning: ceil(Psi / (tp * pp))."""
    return math.ceil(model.params / (layout.tp * layout.pp))


def step_collectives(model: Model, layout: Layout, batch: Batch) -> list[CommOp]:
    """Every CommOp of one training step for ``layout`` (an empty list on one GPU)."""
    if layout.tp > 1 or layout.pp > 1:
        model.require_shape(f"strategy {layout.name}")
    p, m = batch.itemsize, batch.micro_batches
    layers = stage_layers(model, layout)
    grads = shard_params(model, layout) * p
    ops: list[CommOp] = []
    if layout.dp > 1:
        ops += _data_parallel(layout.flavor, grads, layers, batch)
    if layout.tp > 1 or layout.pp > 1:
        _, h, s = model.require_shape(f"strategy {layout.name}")
        act = batch.micro_batch * s * h * p
        if layout.tp > 1:
            ops += _tensor_parallel(layout, act, layers, m)
        if layout.pp > 1:
            boundary = math.ceil(act / layout.tp / p) * p
            ops.append(
                _even("send activations+grads (pp)", None, PP, boundary, 2, m, None, PIPELINE)
            )
    return ops


def _data_parallel(flavor: str, grads: int, layers: int, batch: Batch) -> list[CommOp]:
    m = batch.micro_batches
    bucket = batch.bucket_bytes
    if bucket is None:
        bucket = default_bucket_bytes(flavor, batch.itemsize)
    if flavor == "ddp":
        ar = Collective.ALL_REDUCE
        return [_bucketed("all-reduce grads", ar, grads, batch, bucket, 1, BACKWARD, DDP)]
    if flavor in ("zero1", "zero2"):
        rs, ag = Collective.REDUCE_SCATTER, Collective.ALL_GATHER
        rs_rounds = 1 if flavor == "zero1" else m
        return [
            _bucketed("reduce-scatter grads", rs, grads, batch, bucket, rs_rounds, BACKWARD, ZERO),
            _bucketed("all-gather params", ag, grads, batch, bucket, 1, None, ZERO),
        ]
    unit = math.ceil(grads / layers / batch.itemsize) * batch.itemsize  # one layer's shard
    ag, rs = Collective.ALL_GATHER, Collective.REDUCE_SCATTER
    return [
        _even("all-gather params (fwd)", ag, DP, unit, layers, m, FORWARD, FSDP),
        _even("all-gather params (bwd)", ag, DP, unit, layers, m, BACKWARD, FSDP),
        _even("reduce-scatter grads", rs, DP, unit, layers, m, BACKWARD, FSDP),
    ]


def _tensor_parallel(layout: Layout, act: int, layers: int, m: int) -> list[CommOp]:
    if not layout.sp:
        ar = Collective.ALL_REDUCE
        return [
            _even("all-reduce activations (tp fwd)", ar, TP, act, 2 * layers, m, None, MEGATRON),
            _even("all-reduce activations (tp bwd)", ar, TP, act, 2 * layers, m, None, MEGATRON),
        ]
    rs, ag = Collective.REDUCE_SCATTER, Collective.ALL_GATHER
    return [
        _even("reduce-scatter activations (sp)", rs, TP, act, 4 * layers, m, None, SEQ_PAR),
        _even("all-gather activations (sp)", ag, TP, act, 4 * layers, m, None, SEQ_PAR),
    ]


def model_state_bytes(model: Model, layout: Layout, itemsize: int) -> int:
    """Parameters + gradients + Adam states on one GPU (ZeRO paper, Sec. 3.1 and 5).

    Mixed precision (p < 4 bytes): p*Psi' + p*Psi' + 12*Psi' (fp32 master copy, momentum,
    variance); in fp32, 8*Psi' for momentum and variance. ZeRO-1 divides the optimizer states
    by dp, ZeRO-2 also the gradients, ZeRO-3 all three. Activations are not counted.
    """
    psi = shard_params(model, layout)
    params, grads, opt = itemsize * psi, itemsize * psi, (12 if itemsize < 4 else 8) * psi
    dp = layout.dp
    if layout.flavor == "zero1":
        opt = math.ceil(opt / dp)
    elif layout.flavor == "zero2":
        grads, opt = math.ceil(grads / dp), math.ceil(opt / dp)
    elif layout.flavor == "zero3":
        params, grads, opt = (math.ceil(x / dp) for x in (params, grads, opt))
    return params + grads + opt
