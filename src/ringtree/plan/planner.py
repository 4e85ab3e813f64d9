"""A training step's plan: every collective timed on the cluster, what compute hides of it,
what the rest costs.

Step time = compute + exposed communication + pipeline bubble, where compute is one GPU's
forward + backward time for its share of the step (the global batch is fixed, so every strategy
gives each GPU the same work), split 1/3 forward, 2/3 backward (the backward does twice the
forward's FLOPs: 6 Psi per token in all, Kaplan et al. 2020), evenly over the m micro-batches.
Communication dollars follow the seed: exposed communication time x price per GPU-second x GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ringtree.errors import RingtreeError
from ringtree.plan.cluster import Cluster
from ringtree.plan.groups import GroupShape, group_shape
from ringtree.plan.model import Model
from ringtree.plan.overlap import exposed_s
from ringtree.plan.strategy import Layout, Strategy
from ringtree.plan.timing import CallTime, Timer
from ringtree.plan.verdict import verdict
from ringtree.plan.volumes import (
    FORWARD,
    Batch,
    CommOp,
    model_state_bytes,
    stage_layers,
    step_collectives,
)

FORWARD_SHARE = 1 / 3
SECONDS_PER_DAY = 86_400


@dataclass(frozen=True)
class Training:
    """How the step is run, whatever the strategy.

    itemsize: bytes per parameter/gradient/activation element.
    micro_batch: sequences per micro-batch (b).
    global_batch: sequences per step over the whole cluster (None: one micro-batch per GPU).
    compute_s: one GPU's forward + backward time per step (None: from tflops and mfu, or
    unknown: then nothing is hidden and no overhead is given).
    tflops, mfu: peak dense TFLOP/s of one GPU and the fraction reached; compute = 6 Psi
    tokens / (GPUs * tflops * 1e12 * mfu) (Kaplan et al. 2020; Narayanan et al. 2021).
    bucket_bytes: gradient bucket (None: the framework's default; 0 for one collective).
    steps_per_second: for the per-day figure (None: 1 / step time).
    """

    itemsize: int = 2
    micro_batch: int = 1
    global_batch: int | None = None
    compute_s: float | None = None
    tflops: float | None = None
    mfu: float | None = None
    bucket_bytes: int | None = None
    steps_per_second: float | None = None


@dataclass(frozen=True)
class TimedOp:
    """One CommOp of the step, priced: per-step bytes per GPU, time, exposed time."""

    op: CommOp
    shape: GroupShape
    call: CallTime
    bytes_per_gpu: int
    time_s: float
    latency_s: float
    exposed_s: float

    def to_json(self) -> dict:
        """The ``collectives`` entry of ``--json``."""
        return {
            "op": self.op.op,
            "bytes_per_gpu": self.bytes_per_gpu,
            "time_s": self.time_s,
            "exposed_s": self.exposed_s,
            "group": self.op.group,
            "group_size": self.shape.size,
            "nodes": self.shape.nodes,
            "calls": self.op.calls,
            "algorithm": self.call.algorithm,
            "hierarchical": self.call.hierarchical,
            "forced": self.call.forced,
            "latency_s": self.latency_s,
            "source": self.op.source,
        }


@dataclass(frozen=True)
class Plan:
    """The plan of one strategy on one cluster."""

    strategy: str
    model: Model
    layout: Layout
    micro_batches: int
    collectives: list[TimedOp]
    compute_s: float | None
    bubble_s: float
    memory_bytes_per_gpu: int
    cluster: Cluster
    training: Training
    verdict: str = field(default="", compare=False)

    @property
    def bytes_per_gpu(self) -> int:
        """Bytes one GPU sends per step, all collectives."""
        return sum(c.bytes_per_gpu for c in self.collectives)

    @property
    def comm_time_s(self) -> float:
        """Communication time per step if nothing overlapped."""
        return sum(c.time_s for c in self.collectives)

    @property
    def exposed_s(self) -> float:
        """Communication time compute does not hide."""
        return sum(c.exposed_s for c in self.collectives)

    @property
    def step_time_s(self) -> float | None:
        """compute + exposed communication + bubble (None without compute)."""
        if self.compute_s is None:
            return None
        return self.compute_s + self.exposed_s + self.bubble_s

    @property
    def overhead(self) -> float | None:
        """Exposed communication over compute (0.156 for 15.6 %)."""
        if not self.compute_s:
            return None
        return self.exposed_s / self.compute_s

    @property
    def fits_memory(self) -> bool:
        """Whether parameters, gradients and optimizer states fit in one GPU's memory."""
        return self.memory_bytes_per_gpu <= self.cluster.gpu_memory_bytes

    @property
    def usd_per_step(self) -> float | None:
        """Dollars of exposed communication per step, on every GPU."""
        rate = self.cluster.usd_per_second
        return None if rate is None else self.exposed_s * rate

    @property
    def usd_per_day(self) -> float | None:
        """usd_per_step x steps per day (from --steps-per-second, else from the step time)."""
        per_step = self.usd_per_step
        if per_step is None:
            return None
        if self.training.steps_per_second is not None:
            return per_step * self.training.steps_per_second * SECONDS_PER_DAY
        step = self.step_time_s
        return None if not step else per_step * SECONDS_PER_DAY / step

    def to_json(self) -> dict:
        """One entry of ``{"plans": [...]}``."""
        return {
            "strategy": self.strategy,
            "collectives": [c.to_json() for c in self.collectives],
            "bytes_per_gpu": self.bytes_per_gpu,
            "comm_time_s": self.comm_time_s,
            "exposed_s": self.exposed_s,
            "overhead": self.overhead,
            "usd_per_step": self.usd_per_step,
            "usd_per_day": self.usd_per_day,
            "layout": {"dp": self.layout.dp, "tp": self.layout.tp, "pp": self.layout.pp},
            "micro_batches": self.micro_batches,
            "compute_s": self.compute_s,
            "bubble_s": self.bubble_s,
            "step_time_s": self.step_time_s,
            "memory_bytes_per_gpu": self.memory_bytes_per_gpu,
            "fits_memory": self.fits_memory,
            "verdict": self.verdict,
        }


def compute_time_s(
    model: Model, cluster: Cluster, training: Training, global_batch: int
) -> float | None:
    """One GPU's compute per step: given, or 6 Psi tokens / (GPUs * peak * mfu); None if
    neither is known."""
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


def plan(
    model: Model, cluster: Cluster, strategy: Strategy, training: Training,
    timer: Timer | None = None, with_verdict: bool = True,
) -> Plan:  # fmt: skip
    """Time every collective of one step of ``strategy`` and what compute hides of it; the
    verdict weighs the other data-parallel flavours of the same layout (priced as well)."""
    layout = strategy.resolve(cluster.gpus)
    stage_layers(model, layout)  # pp <= layers
    global_batch = training.global_batch or cluster.gpus * training.micro_batch
    m = micro_batches(layout, training, global_batch)
    batch = Batch(training.itemsize, training.micro_batch, m, training.bucket_bytes)
    timer = timer or Timer(cluster.intra, cluster.inter)
    compute = compute_time_s(model, cluster, training, global_batch)
    ops = step_collectives(model, layout, batch)
    timed = _time_ops(ops, layout, cluster, timer, compute, m, training.itemsize)
    bubble = (layout.pp - 1) / m * compute if compute is not None else 0.0
    memory = model_state_bytes(model, layout, training.itemsize)
    p = Plan(
        strategy.text, model, layout, m, timed, compute, bubble, memory, cluster, training
    )  # fmt: skip
    if not with_verdict:
        return p

    def other_flavor(flavor: str) -> Plan:
        alt = replace(strategy, text=flavor, flavor=flavor)
        return plan(model, cluster, alt, training, timer, with_verdict=False)

    return replace(p, verdict=verdict(p, other_flavor))


def _time_ops(
    ops: list[CommOp], layout: Layout, cluster: Cluster, timer: Timer, compute_s: float | None,
    m: int, itemsize: int,
) -> list[TimedOp]:  # fmt: skip
    """Price each op's calls, then its exposed time: ops on the critical path show whole;
    ops that share a compute window (and a number of rounds) share one stream, whose round is
    priced under the overlap model and whose exposed time is split by their round times."""
    shapes = {g: group_shape(layout, g, cluster.gpus_per_node) for g in {op.group for op in ops}}
    priced = []
    for op in ops:
        shape = shapes[op.group]
        if op.collective is None:
            full, last = (
                timer.point_to_point(shape, b) for b in (op.bytes_per_call, op.last_bytes)
            )
        else:
            full, last = (
                timer.call(op.collective, shape, b, itemsize)
                for b in (op.bytes_per_call, op.last_bytes)
            )
        priced.append((op, shape, full, last))
    round_s = [(op.calls_per_round - 1) * f.time_s + la.time_s for op, _, f, la in priced]
    exposed_round = list(round_s)
    streams: dict[tuple[str, int], list[int]] = {}
    for i, (op, *_) in enumerate(priced):
        if op.window is not None and compute_s is not None:
            streams.setdefault((op.window, op.rounds), []).append(i)
    for (window, _), members in streams.items():
        share = FORWARD_SHARE if window == FORWARD else 1 - FORWARD_SHARE
        n = max(priced[i][0].calls_per_round for i in members)
        call_s = sum(priced[i][2].time_s for i in members)
        last_s = sum(priced[i][3].time_s for i in members)
        shown = exposed_s(call_s, last_s, n, share * compute_s / m)  # type: ignore[operator]
        total = sum(round_s[i] for i in members)
        for i in members:
            exposed_round[i] = shown * round_s[i] / total if total else 0.0
    out = []
    for (op, shape, full, last), t, shown in zip(priced, round_s, exposed_round, strict=True):
        sent = int((op.calls_per_round - 1) * full.bytes_sent + last.bytes_sent)
        latency = (op.calls_per_round - 1) * full.latency_s + last.latency_s
        r = op.rounds
        out.append(TimedOp(op, shape, full, sent * r, t * r, latency * r, shown * r))
    return out


def rank_key(p: Plan) -> tuple[bool, float]:
    """Plans that fit first, then by step time (or exposed communication without compute)."""
    step = p.step_time_s
    return (not p.fits_memory, step if step is not None else p.exposed_s)


def compare(
    model: Model, cluster: Cluster, strategies: list[Strategy], training: Training,
    skip_invalid: bool = False,
) -> list[Plan]:  # fmt: skip
    """Plans of ``strategies``, best first (:func:`rank_key`); one Timer prices every call, so
    a call that several strategies share is priced once. With ``skip_invalid``, strategies
    that do not apply (a global batch that does not split over their dp) are left out."""
    timer = Timer(cluster.intra, cluster.inter)
    plans = []
    for s in strategies:
        try:
            plans.append(plan(model, cluster, s, training, timer))
        except RingtreeError:
            if not skip_invalid:
                raise
    return sorted(plans, key=rank_key)
