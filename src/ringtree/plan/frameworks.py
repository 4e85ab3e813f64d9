"""What a training framework adds to a step beyond its collectives' volumes.

- PyTorch FSDP2 (``fsdp``, as torchtitan runs it): the copies in and out of flat buffers that
  frame each collective (``torch.distributed.fsdp._fully_shard._fsdp_collectives``). Before a
  block's all-gather its local shards are copied into one flat input (copy-in: S/d bytes read
  and written, S the block's unsharded parameter bytes on this GPU, d the shard group); after
  it the gathered buffer is split into the block's unsharded parameters (copy-out: S read, S
  written); before its reduce-scatter the block's gradients are cast to the reduction's dtype
  and packed into one flat input (S read, S r/p written, r the reduction's bytes per
  element). They are memory-bound kernels, priced by the roofline's memory term
  (:meth:`ringtree.plan.compute.Device.memory_s`), and on the critical path: the copy-out runs
  on the compute stream once the gather is waited on, and the others hold the HBM the
  compute uses.
- Composer (llm-foundry's trainer): its train metrics, each a cross-entropy over the
  micro-batch's logits after the backward (``metrics_s``), memory-bound on the critical path.
- DeepSpeed ZeRO-3 of 2021 (``deepspeed`` with ``zero3``): its parameter gathers and gradient
  reductions ran ``DEEPSPEED_ZERO3_SLOWDOWN`` times slower than NCCL's collectives of the same
  bytes would, and none hid behind compute (``DEEPSPEED_ZERO3`` below: fitted on one run,
  checked on five).

Memory per framework is :mod:`ringtree.plan.memory`'s.
"""

from __future__ import annotations

from dataclasses import replace

from ringtree.cost.pricer import CallTime
from ringtree.plan.compute import Device
from ringtree.plan.memory import DEEPSPEED, FSDP
from ringtree.plan.model import Model
from ringtree.plan.record import Training
from ringtree.plan.strategy import Layout
from ringtree.plan.volumes import Batch, shard_params, stage_layers

#: DeepSpeed ZeRO-3 (2021, integrated into Megatron-LM) against NCCL's collectives: Narayanan
#: et al. 2021, Table 2, 174.6B on 768 A100s, 66.75 s per step (micro-batch 2, global batch
#: 1,536), which the compute model puts at 28.6 s of compute and the NCCL model at 7.19 s of
#: ZeRO-3 collectives: (66.75 - 28.6) / 7.19 = 5.3 (``bench/plan_vs_published.py`` checks the
#: other five rows of the table with it). The published step is the same on 768 and 1,536
#: GPUs while NCCL's time for the same bytes barely changes: the framework, not the network,
#: sets it.
DEEPSPEED_ZERO3_SLOWDOWN = 5.3
DEEPSPEED_ZERO3 = "Narayanan et al. 2021, Table 2 (DeepSpeed ZeRO-3, 174.6B on 768 A100s)"
#: torchtitan's ``mixed_precision_reduce = "float32"`` (torchtitan/config/job_config.py): FSDP2
#: reduce-scatters fp32 gradients.
FSDP_REDUCE_ITEMSIZE = 4

#: Bytes per logit one Composer train metric moves: ``LanguageCrossEntropy.update`` calls
#: ``torch.nn.CrossEntropyLoss(reduction='sum')`` on the micro-batch's logits
#: (composer/metrics/nlp.py at 28cc4caf6), after every micro-batch's backward and under the
#: trainer's precision context (``_eval_train_metrics``, composer/trainer/trainer.py there),
#: where autocast runs cross-entropy in fp32: the bf16 logits cast to fp32 (2 bytes read, 4
#: written), log_softmax (4 read, 4 written); the targets' gather is negligible. Three kernels.
METRIC_BYTES_PER_LOGIT = 14
METRIC_KERNELS = 3


def reduce_itemsize(training: Training) -> int:
    """Bytes per gradient element in the data-parallel reduction (Training.reduce_itemsize)."""
    if training.reduce_itemsize is not None:
        return training.reduce_itemsize
    return FSDP_REDUCE_ITEMSIZE if training.framework == FSDP else training.itemsize


def dp_batch(training: Training, m: int) -> Batch:
    """The data-parallel collectives' settings of ``training`` with ``m`` micro-batches."""
    return Batch(training.itemsize, training.micro_batch, m, training.bucket_bytes,
                 fsdp=training.framework == FSDP, reduce_itemsize=reduce_itemsize(training))


def slowed(layout: Layout, training: Training) -> bool:
    """Whether the DP collectives run at DeepSpeed ZeRO-3's speed (module doc)."""
    return training.framework == DEEPSPEED and layout.flavor == "zero3"


def slow_call(call: CallTime) -> CallTime:
    """One call at DeepSpeed ZeRO-3's speed."""
    return replace(call, time_s=call.time_s * DEEPSPEED_ZERO3_SLOWDOWN)


def dp_overlap(layout: Layout, training: Training) -> str:
    """What the DP collectives hide behind: ``none`` under DeepSpeed ZeRO-3, else as set."""
    return "none" if slowed(layout, training) else training.dp_overlap


def copy_s(model: Model, layout: Layout, training: Training, dev: Device, m: int) -> float:
    """FSDP2's flat-buffer copies per step on one GPU (module doc); 0 for other frameworks,
    flavours without per-block gathers, or one data-parallel rank."""
    sharded = layout.flavor == "zero3" or (layout.flavor == "zero2" and (
        training.framework == FSDP or layout.hybrid))
    if training.framework != FSDP or not sharded or layout.shard_ranks == 1:
        return 0.0
    p, d = training.itemsize, layout.shard_ranks
    block = shard_params(model, layout) * p / stage_layers(model, layout)
    gathers = 2 if layout.flavor == "zero3" else 1
    per_block = gathers * 2 * block * (1 + 1 / d) + block * (1 + reduce_itemsize(training) / p)
    blocks = m * stage_layers(model, layout)
    return dev.memory_s(blocks * per_block, kernels=blocks * (2 * gathers + 1))


def metrics_s(model: Model, layout: Layout, training: Training, dev: Device, m: int) -> float:
    """Composer's train metrics per step on one GPU (module doc): ``training.train_metrics``
    cross-entropies over each of the ``m`` micro-batches' logits (b s / cp tokens x V / tp)."""
    n = training.train_metrics
    if not n or not model.vocab or not model.seq_len:
        return 0.0
    logits = training.micro_batch * model.seq_len / layout.cp * model.vocab / layout.tp
    return m * dev.memory_s(n * METRIC_BYTES_PER_LOGIT * logits, kernels=n * METRIC_KERNELS)


def framework_s(model: Model, layout: Layout, training: Training, dev: Device, m: int) -> float:
    """What the framework adds to a step's compute on one GPU: FSDP2's copies and Composer's
    train metrics."""
    return copy_s(model, layout, training, dev, m) + metrics_s(model, layout, training, dev, m)
