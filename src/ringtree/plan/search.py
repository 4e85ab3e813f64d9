"""Search every configuration of a training run for the fastest (or cheapest per token) that
fits: dp x tp x pp x cp (and ep for a mixture of experts), v interleaved stages, sequence
parallelism, the ZeRO stage, the micro-batch and the recomputation.

What is tried (Megatron-LM's rules, where a framework has one):

- tp: powers of two up to a node that divide the heads and the key/value heads; sp on and off
  when tp > 1;
- cp: powers of two while each GPU keeps at least ``MIN_CP_TOKENS`` of the sequence (and the
  sequence splits into 2 cp chunks, for load-balanced causal attention);
- pp: every count up to the layers that divides the GPUs left (stages may be uneven); v > 1
  when the layers split evenly into pp x v chunks and m is a multiple of pp;
- dp: what is left; ep: the powers of two that divide dp and the experts;
- the ZeRO stage (``ddp``, ``zero1``, ``zero2``, ``zero3``), micro-batches of 1, 2, 4, ... that
  divide the batch per replica, recomputation none, selective and full; a micro-batch or a
  recomputation given on the command line is kept.

Each is checked for memory first (cheap); those that fit are timed with the compute model and
the NCCL model (:func:`ringtree.plan.planner.modelled_step`, whose calls are cached: thousands
of configurations share a few hundred group shapes and sizes). The best ``top`` are then
planned in full, verdict included. ``objective="cost"`` ranks by dollars (or GPU-seconds,
without a price) per token and also tries fewer nodes of the cluster (halving down to one).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from ringtree.errors import RingtreeError
from ringtree.plan.cluster import Cluster
from ringtree.plan.exposure import modelled_step
from ringtree.plan.flops import RECOMPUTE
from ringtree.plan.memory import memory
from ringtree.plan.model import Model
from ringtree.plan.planner import default_global_batch, modelled, plan, timer_for
from ringtree.plan.record import Plan, Training
from ringtree.plan.strategy import FLAVORS, Layout
from ringtree.units import format_bytes, format_percent

MIN_CP_TOKENS = 1024
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

    def to_json(self) -> dict:
        """``{"considered": N, "fitting": n, "objective", "limits", "plans": [...]}``."""
        return {
            "considered": self.considered, "fitting": self.fitting,
            "objective": self.objective, "limits": self.limits,
            "plans": [p.to_json() for p in self.plans],
        }  # fmt: skip


def _powers(limit: int) -> list[int]:
    return [2**k for k in range(limit.bit_length()) if 2**k <= limit]


def candidates(model: Model, cluster: Cluster, training: Training, nodes: int,
               fixed_b: int | None, fixed_rc: str | None) -> Iterator[Candidate]:  # fmt: skip
    """Every configuration on ``nodes`` nodes of ``cluster`` (module doc)."""
    assert model.layers and model.seq_len and model.heads
    gpus = nodes * cluster.gpus_per_node
    layers = model.layers
    tps = [t for t in _powers(cluster.gpus_per_node)
           if model.heads % t == 0 and model.kv % t == 0]  # fmt: skip
    cps = [c for c in _powers(model.seq_len // MIN_CP_TOKENS or 1)
           if model.seq_len % (2 * c) == 0 or c == 1]  # fmt: skip
    recs = [fixed_rc] if fixed_rc else list(RECOMPUTE)
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
                vs = [1] + [v for v in range(2, MAX_V + 1) if pp > 1 and layers % (pp * v) == 0]
                eps = [e for e in _powers(dp) if model.experts % e == 0] if model.moe else [1]
                for b in bs:
                    if per_replica % b:
                        continue
                    m = per_replica // b
                    for v in vs:
                        if v > 1 and m % pp:
                            continue
                        for ep in eps:
                            for sp in (False, True) if tp > 1 else (False,):
                                for flavor in FLAVORS:
                                    lay = Layout(flavor, dp, tp, pp, sp, cp, ep, v)
                                    for rc in recs:
                                        yield Candidate(lay, b, rc, nodes)


def _objective(step: float, gpus: int, tokens: float, price: float | None, what: str) -> float:
    if what == "time":
        return step
    return step * gpus * (price or 1.0) / tokens


def search(
    model: Model, cluster: Cluster, training: Training, top: int = 5, objective: str = "time",
    fixed_micro_batch: bool = False, fixed_recompute: bool = False,
) -> SearchResult:  # fmt: skip
    """Every configuration, the fitting ones timed, the best ``top`` planned (module doc)."""
    if objective not in OBJECTIVES:
        raise RingtreeError(f"objective {objective!r}: expected one of {', '.join(OBJECTIVES)}")
    if not modelled(model, cluster, training):
        raise RingtreeError(
            "--search needs the compute model: a cluster as built (--cluster PRESET --nodes K) "
            "and the model's whole shape, without --compute/--tflops"
        )
    model.require_complete("--search")
    node_counts = [cluster.nodes]
    if objective == "cost":
        node_counts += [n for n in (cluster.nodes // 2**k for k in range(1, 20)) if n >= 1]
        node_counts = sorted(set(node_counts), reverse=True)
    timer = timer_for(cluster, training)
    fixed_b = training.micro_batch if fixed_micro_batch else None
    fixed_rc = training.recompute if fixed_recompute else None
    variants: dict[tuple[int, str], Training] = {}
    considered = 0
    scored: list[tuple[float, Candidate]] = []
    limit_bytes = cluster.gpu_memory_bytes
    assert model.seq_len
    for nodes in node_counts:
        sub = replace(cluster, nodes=nodes)
        for cand in candidates(model, sub, training, nodes, fixed_b, fixed_rc):
            considered += 1
            lay = cand.layout
            tr = variants.get((cand.micro_batch, cand.recompute))
            if tr is None:
                tr = replace(training, micro_batch=cand.micro_batch, recompute=cand.recompute)
                variants[(cand.micro_batch, cand.recompute)] = tr
            glob = default_global_batch(sub, lay, tr)
            m = glob // (lay.dp * cand.micro_batch)
            mem = memory(model, lay, cand.micro_batch, m, cand.recompute, tr.attention,
                         tr.itemsize, tr.main_grads_fp32)  # fmt: skip
            if mem.total > limit_bytes:
                continue
            step = modelled_step(model, sub, lay, tr, timer, m).step_s
            tokens = glob * model.seq_len
            key = _objective(step, sub.gpus, tokens, cluster.price_gpu_hour, objective)
            scored.append((key, cand))
    scored.sort(key=lambda x: x[0])
    plans = []
    for _, cand in scored[:top]:
        tr = variants[(cand.micro_batch, cand.recompute)]
        sub = replace(cluster, nodes=cand.nodes)
        plans.append(plan(model, sub, cand.layout, tr, timer if cand.nodes == cluster.nodes
                          else None))  # fmt: skip
    return SearchResult(considered, len(scored), plans, limits(plans[0]) if plans else "",
                        objective)  # fmt: skip


def limits(p: Plan) -> str:
    """Where the best plan's step goes, largest first, and its memory headroom."""
    step = p.step_time_s or 0.0
    if not step:
        return ""
    parts: dict[str, float] = {"compute": p.compute_s or 0.0, "pipeline bubble": p.bubble_s,
                               "optimizer step": p.optimizer_s}  # fmt: skip
    for c in p.collectives:
        if c.exposed_s > 0:
            name = f"exposed {c.op.group.upper()} communication"
            parts[name] = parts.get(name, 0.0) + c.exposed_s
    shown = ", ".join(
        f"{k} {format_percent(v / step, exact=False)}"
        for k, v in sorted(parts.items(), key=lambda kv: -kv[1]) if v / step >= 0.005
    )  # fmt: skip
    have = format_bytes(p.cluster.gpu_memory_bytes)
    return f"{shown}; memory {format_bytes(p.memory_bytes_per_gpu)} of {have}"
