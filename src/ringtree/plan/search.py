"""Search every configuration of a training run for the fastest (or cheapest per token) that
fits: dp x tp x pp x cp (and ep for a mixture of experts), v interleaved stages, sequence
parallelism, the ZeRO stage, the micro-batch and the recomputation.

What is tried (Megatron-LM's rules, where a framework has one):

- tp: powers of two up to a node that divide the heads and the key/value heads; sp on and off
  when tp > 1;
- cp: powers of two while each GPU keeps at least ``MIN_CP_TOKENS`` of the sequence (and the
  sequence splits into 2 cp chunks, for load-balanced causal attention);
- pp: every count up to the layers that divides the GPUs left (stages may be uneven); v > 1
  when m is a multiple of pp (Megatron-LM; not under DeepSpeed's pipeline engine, which has
  neither interleaving nor sp nor cp, and runs ZeRO-1 at most beside a pipeline): up to
  ``MAX_V`` with pp x v at most the layers (chunks may be uneven), and beyond that every v
  whose pp x v divides the layers, down to one layer per chunk (NeMo 24.07's Llama 2 70B
  recipe: pp=4, v=20; its 13B: pp=4, v=10);
- dp: what is left; ep: the powers of two that divide dp and the experts;
- ``space`` caps tp, pp, cp, ep and v (:class:`Space`: ``max_tp=1`` for a framework without
  tensor parallelism);
- the ZeRO stage (``ddp``, ``zero1``, ``zero2``, ``zero3``, and ``hsdp``: zero3 over shard
  groups of one node's data-parallel ranks, gpus per node / (tp cp) of them, where dp spans
  more; tried by default under the ``fsdp`` framework; ``flavors`` keeps those a framework
  runs, e.g. ``zero2`` alone for an FSDP that does not reshard after forward),
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
from ringtree.plan.checkpointing import MICROBATCH, activations_every, micro_batch_every
from ringtree.plan.exposure import (
    data_parallel_exposed_s,
    data_parallel_priced,
    data_parallel_summary,
    device,
    optimizer_s,
    per_micro_batch,
)
from ringtree.plan.flops import RECOMPUTE
from ringtree.plan.frameworks import dp_overlap, framework_s
from ringtree.plan.memory import DEEPSPEED, FSDP, state_memory
from ringtree.plan.model import Model
from ringtree.plan.placement import Placement
from ringtree.plan.planner import modelled, plan, pricer_for
from ringtree.plan.record import Plan, Training
from ringtree.plan.step import MicroBatch
from ringtree.plan.strategy import FLAVORS, Layout
from ringtree.units import format_bytes, format_percent

MIN_CP_TOKENS = 1024
#: The most configurations a search takes on (~25,000 a second on one core: 40 s).
MAX_CONSIDERED = 1_000_000
MAX_MICRO_BATCH = 64
MAX_V = 8
OBJECTIVES = ("time", "cost")
HSDP = "hsdp"


@dataclass(frozen=True)
class Space:
    """The largest degree of each kind a search tries (None: as large as the rules allow)."""

    max_tp: int | None = None
    max_pp: int | None = None
    max_cp: int | None = None
    max_ep: int | None = None
    max_v: int | None = None

    def allows(self, key: str, value: int) -> bool:
        """Whether ``value`` is within the limit on ``key`` (tp, pp, cp, ep, v)."""
        limit = getattr(self, f"max_{key}")
        return limit is None or value <= limit


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
    shard: int = 0

    def layout(self, flavor: str) -> Layout:
        """The layout of ``flavor`` (``hsdp``: zero3 over this group's shard)."""
        if flavor == HSDP:
            return Layout("zero3", self.dp, self.tp, self.pp, self.sp, self.cp, self.ep, self.v,
                          self.shard)
        return Layout(flavor, self.dp, self.tp, self.pp, self.sp, self.cp, self.ep, self.v)


def _groups(
    model: Model, cluster: Placement, training: Training, nodes: int, fixed_b: int | None,
    allowed: tuple[str, ...] = FLAVORS, space: Space = Space(),
) -> Iterator[_Group]:
    """The space of the module doc on ``nodes`` nodes, flavours (of ``allowed``) and
    recomputation apart."""
    assert model.layers and model.seq_len and model.heads
    gpn = cluster.gpus_per_node
    gpus = nodes * gpn
    layers = model.layers
    tps = [t for t in _powers(gpn)
           if model.heads % t == 0 and model.kv % t == 0 and space.allows("tp", t)]
    megatron = training.framework != DEEPSPEED  # DeepSpeed's pipeline: no interleaving, no sp
    cps = [c for c in _powers(model.seq_len // MIN_CP_TOKENS or 1)
           if ((model.seq_len % (2 * c) == 0 and megatron) or c == 1) and space.allows("cp", c)]
    flavors = FLAVORS if megatron else ("ddp", "zero1")  # nor ZeRO-2/3 with a pipeline
    batch = training.global_batch
    for tp in tps:
        for cp in cps:
            if gpus % (tp * cp):
                continue
            rest = gpus // (tp * cp)
            for pp in (p for p in range(1, min(layers, rest) + 1) if rest % p == 0):
                if not space.allows("pp", pp):
                    break
                dp = rest // pp
                glob = batch or dp * (fixed_b or 1)
                per_replica, odd = divmod(glob, dp)
                if odd:
                    continue
                bs = [fixed_b] if fixed_b else _powers(min(per_replica, MAX_MICRO_BATCH))
                vs = _virtual_stages(layers, pp, space) if megatron else [1]
                eps = [e for e in _powers(dp) if model.experts % e == 0
                       and space.allows("ep", e)] if model.moe else [1]
                fl = tuple(f for f in (flavors if pp > 1 else FLAVORS) if f in allowed)
                shard = gpn // (tp * cp)
                hsdp = (HSDP in allowed and "zero3" in flavors + FLAVORS * (pp == 1)
                        and shard >= 2 and dp > shard and dp % shard == 0)
                for ep in eps:
                    fe = fl + (HSDP,) * (hsdp and ep == 1)
                    if not fe:
                        continue
                    for b in bs:
                        if per_replica % b:
                            continue
                        m = per_replica // b
                        for v in vs:
                            if v > 1 and m % pp:
                                continue
                            for sp in (False, True) if tp > 1 and megatron else (False,):
                                yield _Group(tp, cp, pp, dp, ep, b, m, v, sp, fe,
                                             shard if HSDP in fe else 0)


def _virtual_stages(layers: int, pp: int, space: Space) -> list[int]:
    """v = 1; with a pipeline, 2..MAX_V with pp x v at most the layers, then every v whose
    pp x v divides them (module doc); within ``space``."""
    if pp == 1:
        return [1]
    vs = [v for v in range(2, MAX_V + 1) if pp * v <= layers]
    vs += [v for v in range(MAX_V + 1, layers // pp + 1) if layers % (pp * v) == 0]
    return [1] + [v for v in vs if space.allows("v", v)]


def candidates(model: Model, cluster: Placement, training: Training, nodes: int,
               fixed_b: int | None, fixed_rc: str | None,
               flavors: tuple[str, ...] = FLAVORS, space: Space = Space(),
               ) -> Iterator[Candidate]:
    """Every configuration on ``nodes`` nodes of ``cluster`` (module doc)."""
    recs = [fixed_rc] if fixed_rc else list(RECOMPUTE)
    for g in _groups(model, cluster, training, nodes, fixed_b, flavors, space):
        for rc in recs:
            for flavor in g.flavors:
                yield Candidate(g.layout(flavor), g.b, rc, nodes)


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
        acts = get(("a", g.tp, g.sp, g.cp, g.pp, g.v, g.b, g.m, rc), lambda: activations_every(
            model, lay0, g.b, g.m, rc, tr.attention, tr.itemsize, tr.framework,
            tr.recompute_every, tr.precision, tr.loss))
        limit = cluster.gpu_memory_bytes - acts  # type: ignore[operator]
        base = (g.tp, g.cp, g.pp, g.dp, g.ep)
        fitting = []
        for f in g.flavors:
            lay = g.layout(f)
            no_sync = tr.fsdp_no_sync and g.m > 1
            states = get(("s", f, no_sync, *base), lambda lay=lay, ns=no_sync: sum(
                state_memory(model, lay, tr.itemsize, tr.framework, tr.precision,
                             tr.main_grad_bytes, tr.param_bytes, ns)))
            if states <= limit:  # type: ignore[operator]
                fitting.append((f, lay))
        if not fitting:
            return []
        gpn = cluster.gpus_per_node
        mb: MicroBatch = get(("m", g.tp, g.cp, g.sp, g.ep, g.pp, g.b, rc),
                             lambda: micro_batch_every(model, lay0, g.b, rc, tr.attention,
                                                       self.dev, tr.recompute_every)
                             )  # type: ignore[assignment]
        waits = get(("w", *base, g.v, g.sp, g.b, rc), lambda: per_micro_batch(
            model, lay0, tr, self.pricer, gpn, g.m, mb)[2])
        pipe = (g.m + (g.pp - 1) / g.v) * (mb.forward + mb.backward + waits)  # type: ignore[operator]
        out = []
        for f, lay in fitting:
            summary = get(
                ("d", f, *base, g.m),
                lambda lay=lay: data_parallel_summary(
                    data_parallel_priced(model, lay, tr, self.pricer, gpn, g.m),
                    dp_overlap(lay, tr),
                ),
            )
            opt = get(("o", f, *base), lambda lay=lay: optimizer_s(model, lay, self.dev))
            opt += get(("c", f, *base, g.b, g.m),  # type: ignore[operator]
                       lambda lay=lay: framework_s(model, lay, tr, self.dev, g.m))
            shown = data_parallel_exposed_s(summary, mb)  # type: ignore[arg-type]
            out.append((f, pipe + shown + opt))  # type: ignore[operator]
        return out


def search(
    model: Model, cluster: Placement, training: Training, top: int = 5, objective: str = "time",
    fixed_micro_batch: bool = False, fixed_recompute: bool = False,
    flavors: tuple[str, ...] | None = None, space: Space = Space(),
) -> SearchResult:
    """Every configuration, the fitting ones timed, the best ``top`` planned (module doc);
    ``flavors``: the ZeRO stages tried (None: :func:`default_flavors`); ``space``: limits on
    the degrees."""
    flavors = flavors or default_flavors(training)
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
    if MICROBATCH in recs:  # its share depends on each configuration's free memory
        raise RingtreeError(f"--search does not try --recompute {MICROBATCH}: plan one "
                            "strategy with it, or search with selective")
    total = sum(
        len(g.flavors) * len(recs)
        for nodes in node_counts
        for g in _groups(model, replace(cluster, nodes=nodes), training, nodes, fixed_b, flavors,
                         space)
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
        for g in _groups(model, sub, training, nodes, fixed_b, flavors, space):
            glob = g.m * g.b * g.dp
            tokens = glob * model.seq_len
            for rc in recs:
                considered += len(g.flavors)
                for flavor, step in scorer.steps(g, rc, sub):
                    key = _objective(step, sub.gpus, tokens, cluster.price_gpu_hour, objective)
                    lay = g.layout(flavor)
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


def default_flavors(training: Training) -> tuple[str, ...]:
    """The ZeRO stages a search tries: FLAVORS, and ``hsdp`` under the ``fsdp`` framework."""
    return FLAVORS + (HSDP,) if training.framework == FSDP else FLAVORS


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
