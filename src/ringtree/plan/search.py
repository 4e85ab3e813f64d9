"""Search every configuration of a training run for the fastest (or cheapest per token) that
fits: dp x tp x pp x cp (and ep for a mixture of experts), v interleaved stages, sequence
parallelism, the ZeRO stage, the micro-batch and the recomputation.

What is tried (Megatron-LM's rules, where a framework has one):

- tp: powers of two up to a node that divide the heads and the key/value heads; sp on and off
  when tp > 1;
- cp: powers of two while each GPU keeps at least ``MIN_CP_TOKENS`` of the sequence (and the
  sequence splits into 2 cp chunks, for load-balanced causal attention);
- pp: every count up to the layers that divides the GPUs left (stages may be uneven); v > 1
  (up to ``MAX_V``, pp x v at most the layers) when m is a multiple of pp (Megatron-LM; not
  under DeepSpeed's pipeline engine, which has neither interleaving nor sp nor cp, and runs
  ZeRO-1 at most beside a pipeline);
- dp: what is left; ep: the powers of two that divide dp and the experts;
- the ZeRO stage (``ddp``, ``zero1``, ``zero2``, ``zero3``; ``flavors`` keeps those a
  framework runs, e.g. ``zero2`` alone for an FSDP that does not reshard after forward),
  micro-batches of 1, 2, 4, ... that divide the batch per replica, recomputation none,
  selective and full; a micro-batch or a recomputation given on the command line is kept.

Each is checked for memory first (cheap); those that fit are timed with the compute model and
the NCCL model (:func:`ringtree.plan.planner.modelled_step`, whose calls are cached: thousands
of configurations share a few hundred group shapes and sizes). The best ``top`` are then
planned in full, verdict included. ``objective="cost"`` ranks by dollars (or GPU-seconds,
without a price) per token and also tries fewer nodes of the cluster (halving down to one).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import lru_cache

from ringtree.errors import RingtreeError
from ringtree.plan.exposure import (
    data_parallel_exposed_s,
    data_parallel_priced,
    data_parallel_summary,
    device,
    optimizer_s,
    per_micro_batch,
)
from ringtree.plan.flops import RECOMPUTE
from ringtree.plan.memory import MEGATRON, activation_memory, state_memory
from ringtree.plan.model import Model
from ringtree.plan.placement import Placement
from ringtree.plan.planner import modelled, plan, pricer_for
from ringtree.plan.record import Plan, Training
from ringtree.plan.step import MicroBatch, micro_batch
from ringtree.plan.strategy import FLAVORS, Layout
from ringtree.units import format_bytes, format_percent

MIN_CP_TOKENS = 1024
#: The most configurations a search takes on (~25,000 a second on one core: 40 s).
MAX_CONSIDERED = 1_000_000
MAX_MICRO_BATCH = 64
MAX_V = 8
OBJECTIVES = ("time", "cost")


@dataclass(frozen=True)
class Candidate:
    """One configuration tried: its layout, micro-batch, recomputation and node count."""

    layout: Layout
    micro_batch: int
    recompute: str
    nodes: int


@dataclass(frozen=True)
class SearchResult:
    """What a search found: how many configurations it considered, how many fit, the best
    ``top`` planned in full (best first), what limits the best, and the objective."""

    considered: int
    fitting: int
    plans: list[Plan]
    limits: str
    objective: str
    nodes: tuple[int, ...] = ()

    def to_json(self) -> dict:
        """``{"considered": N, "fitting": n, "objective", "limits", "plans": [...]}``."""
        return {
            "considered": self.considered, "fitting": self.fitting,
            "objective": self.objective, "limits": self.limits, "nodes": list(self.nodes),
            "plans": [p.to_json() for p in self.plans],
        }


def _powers(limit: int) -> list[int]:
    return [2**k for k in range(limit.bit_length()) if 2**k <= limit]


@dataclass(frozen=True)
class _Group:
    """Configurations that differ only in their data-parallel flavour and recomputation."""

    tp: int
    cp: int
    pp: int
    dp: int
    ep: int
    b: int
    m: int
    v: int
    sp: bool
    flavors: tuple[str, ...]


def _groups(
    model: Model, cluster: Placement, training: Training, nodes: int, fixed_b: int | None,
    allowed: tuple[str, ...] = FLAVORS,
) -> Iterator[_Group]:
    """The space of the module doc on ``nodes`` nodes, flavours (of ``allowed``) and
    recomputation apart."""
    assert model.layers and model.seq_len and model.heads
    gpus = nodes * cluster.gpus_per_node
    layers = model.layers
    tps = [t for t in _powers(cluster.gpus_per_node)
           if model.heads % t == 0 and model.kv % t == 0]
    megatron = training.framework == MEGATRON  # DeepSpeed's pipeline: no interleaving, no sp
    cps = [c for c in _powers(model.seq_len // MIN_CP_TOKENS or 1)
           if (model.seq_len % (2 * c) == 0 and megatron) or c == 1]
    flavors = FLAVORS if megatron else ("ddp", "zero1")  # nor ZeRO-2/3 with a pipeline
    batch = training.global_batch
    for tp in tps:
        for cp in cps:
            if gpus % (tp * cp):
                continue
            rest = gpus // (tp * cp)
            for pp in (p for p in range(1, min(layers, rest) + 1) if rest % p == 0):
                dp = rest // pp
                glob = batch or dp * (fixed_b or 1)
                per_replica, odd = divmod(glob, dp)
                if odd:
                    continue
                bs = [fixed_b] if fixed_b else _powers(min(per_replica, MAX_MICRO_BATCH))
                vs = [1] + [
                    v for v in range(2, MAX_V + 1) if pp > 1 and pp * v <= layers and megatron
                ]
                eps = [e for e in _powers(dp) if model.experts % e == 0] if model.moe else [1]
                fl = tuple(f for f in (flavors if pp > 1 else FLAVORS) if f in allowed)
                if not fl:
                    continue
                for ep in eps:
                    for b in bs:
                        if per_replica % b:
                            continue
                        m = per_replica // b
                        for v in vs:
                            if v > 1 and m % pp:
                                continue
                            for sp in (False, True) if tp > 1 and megatron else (False,):
                                yield _Group(tp, cp, pp, dp, ep, b, m, v, sp, fl)


def candidates(model: Model, cluster: Placement, training: Training, nodes: int,
               fixed_b: int | None, fixed_rc: str | None,
               flavors: tuple[str, ...] = FLAVORS) -> Iterator[Candidate]:
    """Every configuration on ``nodes`` nodes of ``cluster`` (module doc)."""
    recs = [fixed_rc] if fixed_rc else list(RECOMPUTE)
    for g in _groups(model, cluster, training, nodes, fixed_b, flavors):
        for rc in recs:
            for flavor in g.flavors:
                lay = Layout(flavor, g.dp, g.tp, g.pp, g.sp, g.cp, g.ep, g.v)
                yield Candidate(lay, g.b, rc, nodes)


def _objective(step: float, gpus: int, tokens: float, price: float | None, what: str) -> float:
    if what == "time":
        return step
    return step * gpus * (price or 1.0) / tokens


@lru_cache(maxsize=4)
def _scorer(model: Model, cluster: Placement, training: Training) -> _Scorer:
    """The run's scorer, kept for the next search of the same run (another objective, other
    flavours or a fixed recomputation finds its parts timed already)."""
    return _Scorer(model, cluster, training)


class _Scorer:
    """Times configurations from cached parts: model states per layout and flavour,
    activations per micro-batch shape, the micro-batch's compute and communication per
    layout, the DP collectives' exposure per layout, flavour and micro-batch count. The step
    is :class:`ringtree.plan.exposure.Core`'s, assembled the same way (a test checks)."""

    def __init__(self, model: Model, cluster: Placement, training: Training) -> None:
        self.model, self.cluster, self.training = model, cluster, training
        self.pricer = pricer_for(cluster, training)
        self.dev = device(cluster, training)
        self.cache: dict[tuple, object] = {}
        self.variants: dict[tuple[int, str], Training] = {}

    def variant(self, b: int, rc: str) -> Training:
        """The training settings with micro-batch ``b`` and recomputation ``rc``."""
        tr = self.variants.get((b, rc))
        if tr is None:
            tr = self.variants[(b, rc)] = replace(self.training, micro_batch=b, recompute=rc)
        return tr

    def _get(self, key: tuple, make: Callable[[], object]) -> object:
        got = self.cache.get(key)
        if got is None:
            got = self.cache[key] = make()
        return got

    def steps(self, g: _Group, rc: str, cluster: Placement) -> list[tuple[str, float]]:
        """(flavour, step seconds) of the flavours of ``g`` that fit, with ``rc``."""
        model, tr, get = self.model, self.variant(g.b, rc), self._get
        lay0 = Layout("ddp", g.dp, g.tp, g.pp, g.sp, g.cp, g.ep, g.v)
        acts = get(("a", g.tp, g.sp, g.cp, g.pp, g.v, g.b, g.m, rc), lambda: activation_memory(
            model, lay0, g.b, g.m, rc, tr.attention, tr.itemsize, tr.framework, tr.precision))
        limit = cluster.gpu_memory_bytes - acts  # type: ignore[operator]
        base = (g.tp, g.cp, g.pp, g.dp, g.ep)
        fitting = []
        for f in g.flavors:
            lay = Layout(f, g.dp, g.tp, g.pp, g.sp, g.cp, g.ep, g.v)
            states = get(("s", f, *base), lambda lay=lay: sum(
                state_memory(model, lay, tr.itemsize, tr.framework, tr.precision,
                             tr.main_grad_bytes)))
            if states <= limit:  # type: ignore[operator]
                fitting.append(lay)
        if not fitting:
            return []
        gpn = cluster.gpus_per_node
        mb: MicroBatch = get(("m", g.tp, g.cp, g.sp, g.ep, g.pp, g.b, rc), lambda: micro_batch(
            model, lay0, g.b, rc, tr.attention, self.dev))  # type: ignore[assignment]
        waits = get(("w", *base, g.v, g.sp, g.b, rc), lambda: per_micro_batch(
            model, lay0, tr, self.pricer, gpn, g.m, mb)[2])
        pipe = (g.m + (g.pp - 1) / g.v) * (mb.forward + mb.backward + waits)  # type: ignore[operator]
        out = []
        for lay in fitting:
            summary = get(
                ("d", lay.flavor, *base, g.m),
                lambda lay=lay: data_parallel_summary(
                    data_parallel_priced(model, lay, tr, self.pricer, gpn, g.m), tr.dp_overlap
                ),
            )
            opt = get(("o", lay.flavor, *base), lambda lay=lay: optimizer_s(model, lay, self.dev))
            shown = data_parallel_exposed_s(summary, mb)  # type: ignore[arg-type]
            out.append((lay.flavor, pipe + shown + opt))  # type: ignore[operator]
        return out


def search(
    model: Model, cluster: Placement, training: Training, top: int = 5, objective: str = "time",
    fixed_micro_batch: bool = False, fixed_recompute: bool = False,
    flavors: tuple[str, ...] = FLAVORS,
) -> SearchResult:
    """Every configuration, the fitting ones timed, the best ``top`` planned (module doc);
    ``flavors``: the ZeRO stages tried."""
    if objective not in OBJECTIVES:
        raise RingtreeError(f"objective {objective!r}: expected one of {', '.join(OBJECTIVES)}")
    if not modelled(model, cluster, training):
        raise RingtreeError(
            "--search needs the compute model: a cluster as built (--cluster PRESET --nodes K) "
            "and the model's whole shape, without --compute/--tflops"
        )
    assert model.seq_len
    node_counts = [cluster.nodes]
    if objective == "cost":
        node_counts += [n for n in (cluster.nodes // 2**k for k in range(1, 20)) if n >= 1]
        node_counts = sorted(set(node_counts), reverse=True)
    fixed_b = training.micro_batch if fixed_micro_batch else None
    recs = [training.recompute] if fixed_recompute else list(RECOMPUTE)
    total = sum(
        len(g.flavors) * len(recs)
        for nodes in node_counts
        for g in _groups(model, replace(cluster, nodes=nodes), training, nodes, fixed_b, flavors)
    )
    if total > MAX_CONSIDERED:
        raise RingtreeError(
            f"the search would consider {total:,} configurations, more than {MAX_CONSIDERED:,} "
            "(~40 s): fix --micro-batch or --recompute, or search fewer nodes"
        )
    scorer = _scorer(model, cluster, training)
    considered = 0
    scored: list[tuple[float, Candidate]] = []
    for nodes in node_counts:
        sub = replace(cluster, nodes=nodes)
        for g in _groups(model, sub, training, nodes, fixed_b, flavors):
            glob = g.m * g.b * g.dp
            tokens = glob * model.seq_len
            for rc in recs:
                considered += len(g.flavors)
                for flavor, step in scorer.steps(g, rc, sub):
                    key = _objective(step, sub.gpus, tokens, cluster.price_gpu_hour, objective)
                    lay = Layout(flavor, g.dp, g.tp, g.pp, g.sp, g.cp, g.ep, g.v)
                    scored.append((key, Candidate(lay, g.b, rc, nodes)))
    scored.sort(key=lambda x: x[0])
    plans = []
    for _, cand in scored[:top]:
        tr = scorer.variant(cand.micro_batch, cand.recompute)
        if training.global_batch is None:
            tr = replace(tr, global_batch=cand.layout.dp * cand.micro_batch)
        sub = replace(cluster, nodes=cand.nodes)
        pricer = scorer.pricer if cand.nodes == cluster.nodes else None
        plans.append(plan(model, sub, cand.layout, tr, pricer))
    return SearchResult(considered, len(scored), plans, limits(plans[0]) if plans else "",
                        objective, tuple(node_counts))


def limits(p: Plan) -> str:
    """Where the best plan's step goes, largest first, and its memory headroom."""
    step = p.step_time_s or 0.0
    if not step:
        return ""
    parts: dict[str, float] = {"compute": p.compute_s or 0.0, "pipeline bubble": p.bubble_s,
                               "optimizer step": p.optimizer_s}
    for c in p.collectives:
        if c.exposed_s > 0:
            name = f"exposed {c.op.group.upper()} communication"
            parts[name] = parts.get(name, 0.0) + c.exposed_s
    shown = ", ".join(
        f"{k} {format_percent(v / step, exact=False)}"
        for k, v in sorted(parts.items(), key=lambda kv: -kv[1]) if v / step >= 0.005
    )
    have = format_bytes(p.placement.gpu_memory_bytes)
    return f"{shown}; memory {format_bytes(p.memory_bytes_per_gpu)} of {have}"
