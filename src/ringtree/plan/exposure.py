"""What compute hides of each collective, and the step it leaves.

Each op of the step is priced (its full calls and its last) on its group; then:

- with a given compute (``--compute``, ``--tflops``/``--mfu``), the DP collectives of a round
  share one stream beside a window of 1/3 (forward) or 2/3 (backward) of one micro-batch's
  compute, under :mod:`ringtree.plan.overlap`'s model, and everything else is exposed;
- with the compute model, every micro-batch waits for its TP, CP, EP and pipeline transfers,
  less what hides behind its layers' weight-gradient GEMMs (the backward's TP collectives),
  forward GEMMs (the forward's, with ``tp_comm_overlap``), attention (ring attention's
  transfers), the next chunk's compute (the interleaved pipeline's sends, ``pp_overlap``) and the
  adjacent micro-batch's other pass (the expert all-to-alls, with ``ep_overlap``); the DP
  collectives hide behind one micro-batch's forward or backward on the busiest stage (or
  none, or also the next forward: ``dp_overlap``); the pipeline runs (m + (p - 1)/v)
  micro-batch times; then the optimizer.
  What a framework adds (FSDP2's flat-buffer copies, Composer's train metrics, DeepSpeed
  ZeRO-3's slower collectives)
  is :mod:`ringtree.plan.frameworks`'.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from ringtree.cost.pricer import NOTHING, CallTime, GroupShape, Pricer
from ringtree.plan.checkpointing import OP, micro_batch_every, share
from ringtree.plan.compute import Device, optimizer_time
from ringtree.plan.frameworks import dp_batch, dp_overlap, framework_s, slow_call, slowed
from ringtree.plan.groups import PP, group_shape
from ringtree.plan.memory import DEEPSPEED
from ringtree.plan.model import Model
from ringtree.plan.overlap import exposed_s
from ringtree.plan.placement import Placement
from ringtree.plan.record import TimedOp, Training
from ringtree.plan.step import MicroBatch
from ringtree.plan.strategy import Layout
from ringtree.plan.volumes import (
    ALL_TO_ALL,
    ATTENTION,
    ATTENTION_BWD,
    BACKWARD,
    FGEMM,
    FORWARD,
    WGRAD,
    Batch,
    CommOp,
    data_parallel_ops,
    micro_batch_ops,
    shard_params,
)

FORWARD_SHARE = 1 / 3
#: Groups whose communication every micro-batch waits for.
PER_MICRO_BATCH = ("tp", "cp", "ep", "pp")


def device(placement: Placement, training: Training) -> Device:
    """The roofline's view of the placement's GPU."""
    assert placement.cluster is not None
    return Device.of(placement.cluster.gpu, training.efficiency, training.precision,
                     training.compile)


Priced = tuple[CommOp, GroupShape, CallTime, CallTime]


def price_ops(ops: list[CommOp], layout: Layout, gpn: int, pricer: Pricer,
              itemsize: int) -> list[Priced]:
    """Each op's full and last call, priced on its group."""
    out = []
    for op in ops:
        shape = group_shape(layout, op.group, gpn)
        full, last = (price_call(op, shape, b, pricer, itemsize)
                      for b in (op.bytes_per_call, op.last_bytes))
        out.append((op, shape, full, last))
    return out


def price_call(op: CommOp, shape: GroupShape, nbytes: int, pricer: Pricer,
               itemsize: int) -> CallTime:
    """One call of ``op`` on ``shape`` (a collective or an all-to-all on one rank, or of no
    bytes, moves nothing)."""
    if op.collective is None and op.kind != ALL_TO_ALL:
        return pricer.point_to_point(shape, nbytes)
    if shape.size == 1 or nbytes == 0:
        return NOTHING
    if op.collective is None:
        return pricer.all_to_all(shape, nbytes)
    return pricer.call(op.collective, shape, nbytes, itemsize)


def _round_s(item: Priced) -> float:
    op, _, full, last = item
    return (op.calls_per_round - 1) * full.time_s + last.time_s


def _streams(priced: list[Priced], windows: dict[str, float], eligible: list[int],
             exposed: list[float]) -> None:
    """Ops that share a compute window (and a number of rounds) share one stream, whose round
    is priced under the overlap model; its exposed time is split by their round times."""
    streams: dict[tuple[str, int], list[int]] = {}
    for i in eligible:
        op = priced[i][0]
        streams.setdefault((op.window, op.rounds), []).append(i)  # type: ignore[arg-type]
    for (window, _), members in streams.items():
        n = max(priced[i][0].calls_per_round for i in members)
        call_s = sum(priced[i][2].time_s for i in members)
        last_s = sum(priced[i][3].time_s for i in members)
        shown = exposed_s(call_s, last_s, n, windows[window])
        total = sum(_round_s(priced[i]) for i in members)
        for i in members:
            exposed[i] = shown * _round_s(priced[i]) / total if total else 0.0


def timed_ops(priced: list[Priced], exposed_round: list[float]) -> list[TimedOp]:
    """The priced ops written up per step (bytes per GPU, time, latency, exposed seconds)."""
    out = []
    for (op, shape, full, last), shown in zip(priced, exposed_round, strict=True):
        sent = int((op.calls_per_round - 1) * full.bytes_sent + last.bytes_sent)
        latency = (op.calls_per_round - 1) * full.latency_s + last.latency_s
        r = op.rounds
        t = _round_s((op, shape, full, last))
        out.append(TimedOp(op, shape, full, sent * r, t * r, latency * r, shown * r))
    return out


def given_step(priced: list[Priced], compute_s: float | None, m: int) -> list[TimedOp]:
    """Exposure with a given compute: DP windows are shares of it; the rest is exposed."""
    exposed = [_round_s(x) for x in priced]
    if compute_s is not None:
        windows = {FORWARD: FORWARD_SHARE * compute_s / m,
                   BACKWARD: (1 - FORWARD_SHARE) * compute_s / m}
        eligible = [i for i, x in enumerate(priced) if x[0].window in windows]
        _streams(priced, windows, eligible, exposed)
    return timed_ops(priced, exposed)


@dataclass(frozen=True)
class Core:
    """A modelled step before it is written up: every op priced with its exposed seconds per
    round, and the step's compute, bubble and optimizer seconds."""

    priced: list[Priced]
    exposed: list[float]
    compute: float
    bubble: float
    optimizer: float
    mb: MicroBatch

    @property
    def step_s(self) -> float:
        """compute + exposed + bubble + optimizer."""
        shown = sum(e * x[0].rounds for e, x in zip(self.exposed, self.priced, strict=True))
        return self.compute + shown + self.bubble + self.optimizer


@lru_cache(maxsize=65536)
def per_micro_batch(
    model: Model, layout: Layout, training: Training, pricer: Pricer, gpn: int,
    m: int, mb: MicroBatch,
) -> tuple[list[Priced], list[float], float]:
    """What each micro-batch communicates, priced; what it waits for (per round); their sum.
    Shared by the data-parallel flavours of a layout (cached)."""
    batch = Batch(training.itemsize, training.micro_batch, m, training.bucket_bytes,
                  training.recompute == "full", training.framework != DEEPSPEED,
                  recompute_every=training.recompute_every,
                  op_recompute=training.recompute == OP)
    again = share(model, layout, training.recompute, training.recompute_every)
    priced = price_ops(micro_batch_ops(model, layout, batch), layout, gpn, pricer,
                       training.itemsize)
    per_layer = {}
    if training.cp_overlap:
        per_layer.update({ATTENTION: mb.attention_fwd, ATTENTION_BWD: mb.attention_bwd})
    if training.tp_overlap:
        per_layer[WGRAD] = mb.wgrad
    if training.tp_comm_overlap:  # the forward GEMMs: as long as the weight gradients'
        per_layer[FGEMM] = mb.wgrad
    exposed = []
    for item in priced:
        op = item[0]
        hide = mb.layers * per_layer.get(op.window or "", 0.0)
        if op.window in (ATTENTION, FGEMM):
            hide *= 1 + again
        if op.group == PP and training.pp_overlap and layout.v > 1:  # the next chunk's compute
            hide = mb.forward + mb.backward
        if op.kind == ALL_TO_ALL and training.ep_overlap:  # behind the adjacent micro-batch's
            hide = mb.backward if op.phase == FORWARD else mb.forward  # other pass
        exposed.append(max(0.0, _round_s(item) - hide))
    return priced, exposed, sum(exposed)


def modelled_step(
    model: Model, placement: Placement, layout: Layout, training: Training, pricer: Pricer,
    m: int, recomputed: float = 1.0,
) -> Core:
    """The step under the compute model (module doc; ``recomputed``: the share of selective's
    recomputation run under micro-batch level recomputation, from
    :func:`ringtree.plan.checkpointing.microbatch_kept`)."""
    dev = device(placement, training)
    mb = micro_batch_every(model, layout, training.micro_batch, training.recompute,
                           training.attention, dev, training.recompute_every, recomputed)
    gpn = placement.gpus_per_node
    key = replace(layout, flavor="ddp")
    per, per_exposed, waits = per_micro_batch(model, key, training, pricer, gpn, m, mb)
    dp = data_parallel_priced(model, layout, training, pricer, gpn, m)
    dp, exposed = data_parallel_exposed(dp, mb, dp_overlap(layout, training))
    bubble = (layout.pp - 1) / layout.v * (mb.forward + mb.backward + waits)
    opt = optimizer_s(model, layout, dev)
    compute = m * (mb.forward + mb.backward) + framework_s(model, layout, training, dev, m)
    return Core(dp + per, exposed + per_exposed, compute, bubble, opt, mb)


def data_parallel_priced(
    model: Model, layout: Layout, training: Training, pricer: Pricer, gpn: int, m: int,
) -> list[Priced]:
    """The data-parallel collectives of the step, priced (at DeepSpeed ZeRO-3's speed where
    :func:`ringtree.plan.frameworks.slowed`)."""
    priced = price_ops(data_parallel_ops(model, layout, dp_batch(training, m)), layout, gpn,
                       pricer, training.itemsize)
    if slowed(layout, training):
        priced = [(op, shape, slow_call(full), slow_call(last))
                  for op, shape, full, last in priced]
    return priced


def data_parallel_exposed(
    dp: list[Priced], mb: MicroBatch, overlap: str
) -> tuple[list[Priced], list[float]]:
    """What compute leaves exposed of the DP collectives (per round), with the ops as
    overlapped (ZeRO-1/2's parameter gathers behind the next forward under ``full``)."""
    exposed = [_round_s(x) for x in dp]
    if overlap != "none" and dp:
        if overlap == "full":
            dp = [(replace(x[0], window=FORWARD), *x[1:]) if x[0].window is None else x
                  for x in dp]
        eligible = [i for i, x in enumerate(dp) if x[0].window is not None]
        _streams(dp, {FORWARD: mb.forward, BACKWARD: mb.backward}, eligible, exposed)
    return dp, exposed


def optimizer_s(model: Model, layout: Layout, dev: Device) -> float:
    """The optimizer step over the GPU's shard (the whole of its parameters under DDP)."""
    params = shard_params(model, layout) / (1 if layout.flavor == "ddp" else layout.shard_ranks)
    return optimizer_time(params, dev)


#: A priced set of DP collectives reduced to what their exposure depends on: the seconds on
#: the critical path, and each stream's (window, calls, call s, last call s, rounds).
DpSummary = tuple[float, tuple[tuple[str, int, float, float, int], ...]]


def data_parallel_summary(dp: list[Priced], overlap: str) -> DpSummary:
    """:func:`data_parallel_exposed` reduced for a search: the same sums, in closed form."""
    if overlap == "none":
        return sum(_round_s(x) * x[0].rounds for x in dp), ()
    critical = 0.0
    streams: dict[tuple[str, int], list[Priced]] = {}
    for x in dp:
        window = x[0].window or (FORWARD if overlap == "full" else None)
        if window is None:
            critical += _round_s(x) * x[0].rounds
        else:
            streams.setdefault((window, x[0].rounds), []).append(x)
    out = []
    for (window, rounds), members in streams.items():
        if not sum(_round_s(x) for x in members):
            continue
        n = max(x[0].calls_per_round for x in members)
        out.append((window, n, sum(x[2].time_s for x in members),
                    sum(x[3].time_s for x in members), rounds))
    return critical, tuple(out)


def data_parallel_exposed_s(summary: DpSummary, mb: MicroBatch) -> float:
    """Exposed DP seconds per step from :func:`data_parallel_summary`."""
    critical, streams = summary
    windows = {FORWARD: mb.forward, BACKWARD: mb.backward}
    return critical + sum(
        exposed_s(call, last, n, windows[w]) * rounds for w, n, call, last, rounds in streams
    )
