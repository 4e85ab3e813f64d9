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

from dataclasses import dataclass, replace
from functools import lru_cache

from ringtree.cost.clusters import Cluster
from ringtree.cost.link_pricer import LinkPricer
from ringtree.cost.nccl.pricer import NcclPricer
from ringtree.cost.pricer import Pricer
from ringtree.cost.terms import INTER, INTRA
from ringtree.errors import RingtreeError
from ringtree.plan.checkpointing import (
    MICROBATCH,
    OP,
    check_op,
    microbatch_kept,
    op_flops,
    share,
    training_memory,
)
from ringtree.plan.exposure import (
    data_parallel_priced,
    device,
    given_step,
    modelled_step,
    price_ops,
    timed_ops,
)
from ringtree.plan.flops import hardware_flops, model_flops
from ringtree.plan.frameworks import dp_batch, slowed
from ringtree.plan.memory import DEEPSPEED, FRAMEWORKS, Memory
from ringtree.plan.model import Model
from ringtree.plan.pipeline import check_schedule
from ringtree.plan.placement import Placement
from ringtree.plan.record import DP_OVERLAP, Plan, TimedOp, Training
from ringtree.plan.step import MicroBatch
from ringtree.plan.strategy import Layout, Strategy
from ringtree.plan.verdict import verdict
from ringtree.plan.volumes import (
    micro_batch_ops,
    model_state_bytes,
    stage_layers,
    step_collectives,
)


def compute_time_s(
    model: Model, placement: Placement, training: Training, global_batch: int
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
    return flops / (placement.gpus * training.tflops * 1e12 * training.mfu)


def micro_batches(layout: Layout, training: Training, global_batch: int) -> int:
    """m = global batch / (dp * micro-batch): how many micro-batches each replica runs."""
    per_replica = layout.dp * training.micro_batch
    if global_batch % per_replica:
        raise RingtreeError(
            f"global batch of {global_batch} sequences does not split into dp={layout.dp} "
            f"replicas x micro-batches of {training.micro_batch} (strategy {layout.name})"
        )
    return global_batch // per_replica


def modelled(model: Model, placement: Placement, training: Training) -> bool:
    """Whether the compute model applies: a cluster as built, a whole shape, no compute
    given."""
    given = training.compute_s is not None or training.tflops is not None
    return placement.cluster is not None and model.complete and not given


def _check(model: Model, layout: Layout, training: Training) -> None:
    stage_layers(model, layout)  # pp <= layers
    if layout.ep > 1 and not model.moe:
        raise RingtreeError(f"ep={layout.ep} needs a mixture-of-experts model ({model.name} "
                            "is dense)")
    if model.moe and model.experts % layout.ep:
        raise RingtreeError(f"ep={layout.ep} does not divide the {model.experts} experts")
    where = layout.ep_misfit()
    if where:
        raise RingtreeError(f"ep={layout.ep} does not divide {where} (expert parallelism "
                            "runs inside data parallelism, or over tp x cp x dp with etp=1)")
    if layout.cp > 1 and (model.seq_len is None or model.seq_len % (2 * layout.cp)):
        raise RingtreeError(
            f"cp={layout.cp} needs a sequence length divisible by 2 cp (load-balanced ring "
            f"attention), got {model.seq_len}"
        )
    if layout.hybrid and (layout.dp % layout.shard or layout.ep > 1):
        raise RingtreeError(f"shard={layout.shard} needs dp ({layout.dp}) a multiple of it and "
                            "no expert parallelism")
    check_op(model, training.recompute)
    if training.recompute_every < 1:
        raise RingtreeError(f"recompute every {training.recompute_every} layers: expected >= 1")
    if training.framework not in FRAMEWORKS:
        raise RingtreeError(f"framework {training.framework!r}: expected one of "
                            f"{', '.join(FRAMEWORKS)}")
    if training.dp_overlap not in DP_OVERLAP:
        raise RingtreeError(f"dp overlap {training.dp_overlap!r}: expected {', '.join(DP_OVERLAP)}")


def pricer_for(placement: Placement, training: Training) -> Pricer:
    """The NCCL model on a cluster as built, else the alpha-beta model on the two links."""
    if placement.cluster is not None:
        return _nccl_pricer(placement.cluster, training.nccl_env)
    return LinkPricer({INTRA: placement.intra, INTER: placement.inter})


@lru_cache(maxsize=32)
def _nccl_pricer(cluster: Cluster, env: tuple[tuple[str, str], ...]) -> NcclPricer:
    """One NCCL pricer per cluster and environment, so that plans on the same cluster share
    its priced calls (a pricer holds nothing but them)."""
    return NcclPricer(cluster, dict(env))


def plan(
    model: Model, placement: Placement, strategy: Strategy | Layout, training: Training,
    pricer: Pricer | None = None, with_verdict: bool = True,
) -> Plan:
    """Time every collective of one step of ``strategy`` and what compute hides of it; the
    verdict weighs the other data-parallel flavours of the same layout (priced as well)."""
    layout = strategy.resolve(placement.gpus) if isinstance(strategy, Strategy) else strategy
    text = strategy.text if isinstance(strategy, Strategy) else layout.name
    _check(model, layout, training)
    global_batch = default_global_batch(placement, layout, training)
    m = micro_batches(layout, training, global_batch)
    check_schedule(layout.pp, m, layout.v)
    pricer = pricer or pricer_for(placement, training)
    mem: Memory | None = None
    if placement.cluster is not None and model.complete:
        mem = training_memory(model, layout, training, m)
    again = 1.0  # the share of selective's recomputation run under MICROBATCH
    if training.recompute == MICROBATCH:
        again, kept = microbatch_kept(model, layout, training, m, placement.gpu_memory_bytes)
        mem = kept if mem is not None else None
    need = mem.total if mem else model_state_bytes(model, layout, training.itemsize)
    flops, hw_flops = step_flops(model, global_batch, training.recompute)
    if training.recompute == MICROBATCH and flops is not None:
        hw_flops = flops + again * ((step_flops(model, global_batch, "selective")[1] or flops)
                                    - flops)
    elif training.recompute == OP and flops is not None:
        hw_flops = op_flops(flops, step_flops(model, global_batch, "selective")[1] or flops,
                            hw_flops or flops)
    elif training.recompute == "full" and flops is not None and hw_flops is not None:
        hw_flops = flops + share(model, layout, training.recompute,
                                 training.recompute_every) * (hw_flops - flops)
    if modelled(model, placement, training):
        s = _modelled(model, placement, layout, training, pricer, m, again)
    else:
        s = _given(model, placement, layout, training, pricer, m, global_batch)
    p = Plan(text, model, layout, m, s.timed, s.compute, s.bubble, need, placement, training,
             "", mem, s.optimizer, flops, hw_flops, s.peak, s.micro)
    if not with_verdict:
        return p

    def alternative(alt: Layout, changed: Training) -> Plan | None:
        try:
            return plan(model, placement, alt, changed, pricer, with_verdict=False)
        except RingtreeError:
            return None

    return replace(p, verdict=verdict(p, alternative))


@dataclass(frozen=True)
class _Step:
    """A step's priced collectives and the figures beside them (compute None: unknown)."""

    timed: list[TimedOp]
    compute: float | None
    bubble: float
    optimizer: float
    peak: float | None
    micro: MicroBatch | None


def _modelled(model: Model, placement: Placement, layout: Layout, training: Training,
              pricer: Pricer, m: int, recomputed: float = 1.0) -> _Step:
    """The step under the compute model (:func:`ringtree.plan.exposure.modelled_step`)."""
    core = modelled_step(model, placement, layout, training, pricer, m, recomputed)
    peak = device(placement, training).peak_flops
    return _Step(timed_ops(core.priced, core.exposed), core.compute, core.bubble,
                 core.optimizer, peak, core.mb)


def _given(model: Model, placement: Placement, layout: Layout, training: Training,
           pricer: Pricer, m: int, global_batch: int) -> _Step:
    """The step with a given compute (or none): DP windows are shares of it (none under
    DeepSpeed ZeRO-3, :mod:`ringtree.plan.frameworks`), the bubble (p - 1)/(v m) of it."""
    batch = replace(dp_batch(training, m), full_recompute=training.recompute == "full",
                    scatter_gather=training.framework != DEEPSPEED,
                    recompute_every=training.recompute_every)
    gpn = placement.gpus_per_node
    step_collectives(model, layout, batch)  # the shape checks
    dp = data_parallel_priced(model, layout, training, pricer, gpn, m)
    if slowed(layout, training):
        dp = [(replace(op, window=None), *rest) for op, *rest in dp]  # type: ignore[misc]
    priced = dp + price_ops(micro_batch_ops(model, layout, batch), layout, gpn, pricer,
                            training.itemsize)
    compute = compute_time_s(model, placement, training, global_batch)
    bubble = (layout.pp - 1) / (layout.v * m) * compute if compute is not None else 0.0
    peak = training.tflops * 1e12 if training.tflops else None
    if peak is None and placement.cluster is not None and compute is not None:
        peak = placement.cluster.gpu.bf16_tflops * 1e12 or None
    return _Step(given_step(priced, compute, m), compute, bubble, 0.0, peak, None)


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


def default_global_batch(placement: Placement, layout: Layout, training: Training) -> int:
    """The global batch: given, or one micro-batch per data-parallel replica's GPU."""
    return training.global_batch or placement.gpus * training.micro_batch // layout.cp


def rank_key(p: Plan) -> tuple[bool, float]:
    """Plans that fit first, then by step time (or exposed communication without compute)."""
    step = p.step_time_s
    return (not p.fits_memory, step if step is not None else p.exposed_s)


def compare(
    model: Model, placement: Placement, strategies: list[Strategy], training: Training,
    skip_invalid: bool = False,
) -> list[Plan]:
    """Plans of ``strategies``, best first (:func:`rank_key`); one Pricer prices every call,
    so a call that several strategies share is priced once. With ``skip_invalid``, strategies
    that do not apply (a global batch that does not split over their dp) are left out."""
    pricer = pricer_for(placement, training)
    plans = []
    for s in strategies:
        try:
            plans.append(plan(model, placement, s, training, pricer))
        except RingtreeError:
            if not skip_invalid:
                raise
    return sorted(plans, key=rank_key)
