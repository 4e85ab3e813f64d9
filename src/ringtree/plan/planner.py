"""A training step's plan: every collective timed on the cluster, what compute hides of it,
the pipeline's bubble, memory, MFU, and what the rest costs.

Two ways to know the compute:

- *given* (``--compute``, or ``--tflops`` with ``--mfu``: 6 Psi tokens / (GPUs x peak x mfu),
  Kaplan et al. 2020): one GPU's forward + backward per step, split 1/3 forward, 2/3
  backward, evenly over the m micro-batches; DP collectives hide behind those windows, the
  rest is on the critical path, and the bubble adds (p - 1)/(v m) of compute.
- *modelled* (a cluster as built and a model's whole shape): the roofline of
  :mod:`ringtree.plan.compute` per micro-batch on the busiest stage (:mod:`ringtree.plan.step`);
  the backward's TP collectives hide behind each layer's weight-gradient GEMMs and CP
  transfers behind its attention; the pipeline runs (m + (p - 1)/v) micro-batch times; DP
  collectives hide behind one micro-batch's forward or backward; then the optimizer step.

Step time = compute + exposed communication + bubble + optimizer step. Communication dollars
follow the seed: exposed communication time x price per GPU-second x GPUs; the whole step's
dollars are the step time x that.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from ringtree.errors import RingtreeError
from ringtree.plan.cluster import Cluster
from ringtree.plan.exposure import device, given_step, modelled_step, price_ops, timed_ops
from ringtree.plan.flops import hardware_flops, model_flops
from ringtree.plan.memory import MEGATRON, Memory, memory
from ringtree.plan.model import Model
from ringtree.plan.nccl_timing import NcclTimer
from ringtree.plan.pipeline import check_schedule
from ringtree.plan.record import DP_OVERLAP, Plan, Training
from ringtree.plan.strategy import Layout, Strategy
from ringtree.plan.timing import Timer
from ringtree.plan.verdict import verdict
from ringtree.plan.volumes import Batch, model_state_bytes, stage_layers, step_collectives


def compute_time_s(
    model: Model, cluster: Cluster, training: Training, global_batch: int
) -> float | None:
    """One GPU's compute per step when given: as given, or 6 Psi tokens / (GPUs * peak *
    mfu); None if neither is known."""
    if training.compute_s is not None:
        return training.compute_s
    if training.tflops is None or training.mfu is None:
        return None
    if model.seq_len is None:
        raise RingtreeError("--tflops/--mfu need the sequence length: give --seq-len or --model")
    flops = 6 * model.params * global_batch * model.seq_len
    return flops / (cluster.gpus * training.tflops * 1e12 * training.mfu)


def micro_batches(layout: Layout, training: Training, global_batch: int) -> int:
    """m = global batch / (dp * micro-batch): how many micro-batches each replica runs."""
    per_replica = layout.dp * training.micro_batch
    if global_batch % per_replica:
        raise RingtreeError(
            f"global batch of {global_batch} sequences does not split into dp={layout.dp} "
            f"replicas x micro-batches of {training.micro_batch} (strategy {layout.name})"
        )
    return global_batch // per_replica


def modelled(model: Model, cluster: Cluster, training: Training) -> bool:
    """Whether the compute model applies: a cluster as built, a whole shape, no compute
    given."""
    given = training.compute_s is not None or training.tflops is not None
    return cluster.hardware is not None and model.complete and not given


def _check(model: Model, layout: Layout, training: Training) -> None:
    stage_layers(model, layout)  # pp <= layers
    if layout.ep > 1 and not model.moe:
        raise RingtreeError(f"ep={layout.ep} needs a mixture-of-experts model ({model.name} "
                            "is dense)")
    if model.moe and model.experts % layout.ep:
        raise RingtreeError(f"ep={layout.ep} does not divide the {model.experts} experts")
    if layout.cp > 1 and (model.seq_len is None or model.seq_len % (2 * layout.cp)):
        raise RingtreeError(
            f"cp={layout.cp} needs a sequence length divisible by 2 cp (load-balanced ring "
            f"attention), got {model.seq_len}"
        )
    if training.dp_overlap not in DP_OVERLAP:
        raise RingtreeError(f"dp overlap {training.dp_overlap!r}: expected {', '.join(DP_OVERLAP)}")


def timer_for(cluster: Cluster, training: Training) -> Timer | NcclTimer:
    """The NCCL model on a cluster as built, else the links' alpha-beta model."""
    if cluster.hardware is not None:
        return NcclTimer(cluster.hardware, dict(training.nccl_env))
    return Timer(cluster.intra, cluster.inter)


def plan(
    model: Model, cluster: Cluster, strategy: Strategy | Layout, training: Training,
    timer: Timer | NcclTimer | None = None, with_verdict: bool = True,
) -> Plan:
    """Time every collective of one step of ``strategy`` and what compute hides of it; the
    verdict weighs the other data-parallel flavours of the same layout (priced as well)."""
    layout = strategy.resolve(cluster.gpus) if isinstance(strategy, Strategy) else strategy
    text = strategy.text if isinstance(strategy, Strategy) else layout.name
    _check(model, layout, training)
    global_batch = default_global_batch(cluster, layout, training)
    m = micro_batches(layout, training, global_batch)
    check_schedule(layout.pp, m, layout.v)
    timer = timer or timer_for(cluster, training)
    mem: Memory | None = None
    if cluster.hardware is not None and model.complete:
        mem = memory(model, layout, training.micro_batch, m, training.recompute,
                     training.attention, training.itemsize, training.framework)
        need = mem.total
    else:
        need = model_state_bytes(model, layout, training.itemsize)
    flops, hw_flops = step_flops(model, global_batch, training.recompute)
    peak = None
    if modelled(model, cluster, training):
        dev = device(cluster, training)
        core = modelled_step(model, cluster, layout, training, timer, m)
        timed = timed_ops(core.priced, core.exposed)
        compute, bubble, opt, mb, peak = core.compute, core.bubble, core.optimizer, core.mb, (
            dev.peak_flops)
    else:
        batch = Batch(training.itemsize, training.micro_batch, m, training.bucket_bytes,
                      training.recompute == "full", training.framework == MEGATRON)
        priced = price_ops(step_collectives(model, layout, batch), layout,
                        cluster.gpus_per_node, timer, training.itemsize)
        mb, opt = None, 0.0
        compute = compute_time_s(model, cluster, training, global_batch)
        timed = given_step(priced, compute, m)
        bubble = (layout.pp - 1) / (layout.v * m) * compute if compute is not None else 0.0
        peak = training.tflops * 1e12 if training.tflops else None
        if peak is None and cluster.hardware is not None and compute is not None:
            peak = cluster.hardware.gpu.bf16_tflops * 1e12 or None
    p = Plan(
        text, model, layout, m, timed, compute, bubble, need, cluster, training, "", mem,
        opt, flops, hw_flops, peak, mb,
    )
    if not with_verdict:
        return p

    def alternative(alt: Layout, changed: Training) -> Plan | None:
        try:
            return plan(model, cluster, alt, changed, timer, with_verdict=False)
        except RingtreeError:
            return None

    return replace(p, verdict=verdict(p, alternative))


@lru_cache(maxsize=1024)
def step_flops(model: Model, global_batch: int, recompute: str) -> tuple[float | None, ...]:
    """(model FLOPs, hardware FLOPs) per step: Megatron-LM's count for a whole shape, 6 Psi
    tokens with only a sequence length, None without."""
    if model.complete:
        return model_flops(model, global_batch), hardware_flops(model, global_batch, recompute)
    if model.seq_len is not None:
        six = 6.0 * model.params * global_batch * model.seq_len
        return six, six
    return None, None


def default_global_batch(cluster: Cluster, layout: Layout, training: Training) -> int:
    """The global batch: given, or one micro-batch per data-parallel replica's GPU."""
    return training.global_batch or cluster.gpus * training.micro_batch // layout.cp


def rank_key(p: Plan) -> tuple[bool, float]:
    """Plans that fit first, then by step time (or exposed communication without compute)."""
    step = p.step_time_s
    return (not p.fits_memory, step if step is not None else p.exposed_s)


def compare(
    model: Model, cluster: Cluster, strategies: list[Strategy], training: Training,
    skip_invalid: bool = False,
) -> list[Plan]:
    """Plans of ``strategies``, best first (:func:`rank_key`); one Timer prices every call, so
    a call that several strategies share is priced once. With ``skip_invalid``, strategies
    that do not apply (a global batch that does not split over their dp) are left out."""
    timer = timer_for(cluster, training)
    plans = []
    for s in strategies:
        try:
            plans.append(plan(model, cluster, s, training, timer))
        except RingtreeError:
            if not skip_invalid:
                raise
    return sorted(plans, key=rank_key)
