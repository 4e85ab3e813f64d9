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

PyTorch FSDP2 as torchtitan runs it (``Batch.fsdp``; Liang et al. 2024, torchtitan, Sec. 2.1;
``torch.distributed.fsdp.fully_shard``): one unit per transformer block, its all-gather issued
one block ahead (the next block's gather prefetched behind the current block's compute, so only
the first is exposed), its gradients' reduce-scatter issued as its backward ends (only the
last is exposed; :mod:`ringtree.plan.overlap` prices both). ``zero3`` is
``reshard_after_forward=True`` (gather again in the backward: 3 Psi per micro-batch), ``zero2``
is ``reshard_after_forward=False`` (torchtitan's default beside a pipeline: the forward's
gathers are kept for the backward, 2 Psi per micro-batch; FSDP2 reshards after every backward,
so each micro-batch gathers again). Gradients are reduced in ``reduce_itemsize`` bytes
(torchtitan's ``mixed_precision_reduce = "float32"``: twice bf16's bytes). HSDP
(``Layout.shard``): the gathers and reduce-scatters run over the shard group, then each
block's gradient shard is all-reduced over the dp / shard replicas.

Tensor parallel (over the tp group; Shoeybi et al. 2019, "Megatron-LM", Sec. 3): per layer and
micro-batch, 2 all-reduces of b*s*h elements in the forward (after attention and after the
MLP) and 2 in the backward: 4 per layer. With sequence parallelism (Korthikanti et al. 2022,
Sec. 4.2.2) each all-reduce becomes a reduce-scatter and an all-gather of the same size:
the same bytes, twice the calls.

Pipeline parallel (over the pp group; Narayanan et al. 2021, Sec. 2.2 and 4.1): per micro-batch
and stage boundary, one point-to-point send of the activations forward and one of their
gradients backward, b*s*h/tp elements each (the scatter/gather optimisation: each TP rank sends
its 1/tp; b*s*h without it, as DeepSpeed's pipeline engine sends), v times each with v
interleaved stages per GPU; the 1F1B schedule idles a fraction (p-1)/(m+p-1) of the step (the
bubble, :mod:`ringtree.plan.pipeline`).

Full activation recomputation (Korthikanti et al. 2022, Sec. 5) repeats each layer's forward in
the backward pass, with its 2 TP collectives (and its all-to-alls and CP transfers).

Context parallel (over the cp group; Megatron-Core's ring attention, Liu et al. 2023): each
layer's forward passes every GPU's keys and values around the ring, cp - 1 sends of
2 (b s / cp) g d / tp elements; the backward passes them again with their gradients (twice the
bytes). Gradients are then reduced over the data- and context-parallel ranks together.

Expert parallel (over the ep group, inside dp; Lepikhin et al. 2020, GShard; Fedus et al. 2021):
per MoE layer and micro-batch, an all-to-all sends each GPU's routed tokens to their experts'
GPUs (dispatch) and one brings them back (combine), in the forward and again in the backward:
4 all-to-alls of A = c k (b s / (cp tp)) h p bytes per GPU, of which (ep - 1)/ep leaves it (c
the capacity factor, 1 when dropless; k experts per token; the tokens of a TP group split
between its ranks). Expert gradients are reduced over the ranks holding the same experts
(dp / ep x cp of them), the others over dp x cp.

Not modelled: embedding/LM-head TP collectives.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ringtree.collectives import Collective
from ringtree.errors import RingtreeError
from ringtree.plan.groups import CP, DP, DPCP, DPR, DPS, EDP, EP, PP, TP
from ringtree.plan.model import Model, expert_params
from ringtree.plan.strategy import Layout

FORWARD, BACKWARD = "forward", "backward"
#: Per-layer windows: the backward's TP collectives overlap the weight-gradient GEMMs of
#: their layer (Megatron-LM's asynchronous all-reduce of the input gradient); CP transfers
#: overlap the layer's attention (ring attention).
WGRAD, ATTENTION, ATTENTION_BWD = "wgrad", "attention", "attention-bwd"
#: The forward's TP collectives may overlap their layer's forward GEMMs (Transformer Engine's
#: userbuffers, Megatron-LM's --tp-comm-overlap; ``Training.tp_comm_overlap``).
FGEMM = "fgemm"
SEND, ALL_TO_ALL = "send", "all-to-all"
ZERO = "Rajbhandari et al. 2020 (ZeRO), Sec. 7"
FSDP = "Rajbhandari et al. 2020 (ZeRO), Sec. 7.2.2; Zhao et al. 2023 (PyTorch FSDP)"
FSDP2 = "torchtitan (Liang et al. 2024), Sec. 2.1: FSDP2 per block, prefetched; HSDP"
DDP = "Li et al. 2020 (PyTorch DDP); Rajbhandari et al. 2020 (ZeRO), Sec. 7.1"
MEGATRON = "Shoeybi et al. 2019 (Megatron-LM), Sec. 3"
SEQ_PAR = "Korthikanti et al. 2022 (reducing activation recomputation), Sec. 4.2.2"
PIPELINE = "Narayanan et al. 2021 (Megatron-LM on GPU clusters), Sec. 2.2, 4.1"
RECOMPUTE = "Korthikanti et al. 2022, Sec. 5 (full recomputation repeats the forward)"
RING_ATTENTION = "Liu et al. 2023 (ring attention); Megatron-Core context parallelism"
MOE = "Lepikhin et al. 2020 (GShard); Fedus et al. 2021 (Switch); Megatron-Core MoE"


@dataclass(frozen=True)
class Batch:
    """The step's work on one pipeline (one data-parallel replica).

    itemsize: bytes per parameter, gradient and activation element (p).
    micro_batch: sequences per micro-batch (b).
    micro_batches: micro-batches per step (m); gradients accumulate over them.
    bucket_bytes: gradient bucket size for DDP and ZeRO-1/2 (0: one collective for all;
        None: the framework's default, :func:`default_bucket_bytes`).
    full_recompute: the backward repeats the forward's TP collectives and all-to-alls.
    scatter_gather: pipeline sends carry 1/tp of the activations each (Megatron-LM); False:
        each TP rank sends all of them (DeepSpeed's pipeline engine).
    fsdp: ZeRO-2/3 as PyTorch FSDP2 runs them (module doc).
    recompute_every: with full_recompute, only every K-th layer is recomputed
        (:mod:`ringtree.plan.checkpointing`): ceil(L'/K) layers repeat their forward's TP,
        CP and EP communication.
    reduce_itemsize: bytes per gradient element in the reduce-scatter (None: itemsize).
    op_recompute: op-level checkpointing (:mod:`ringtree.plan.checkpointing`): the backward
        repeats each layer's sequence-parallel all-gathers, not its reduce-scatters.
    """

    itemsize: int
    micro_batch: int = 1
    micro_batches: int = 1
    bucket_bytes: int | None = None
    full_recompute: bool = False
    scatter_gather: bool = True
    fsdp: bool = False
    reduce_itemsize: int | None = None
    recompute_every: int = 1
    op_recompute: bool = False

    def recomputed(self, layers: int) -> int:
        """How many of ``layers`` repeat their forward in the backward."""
        return math.ceil(layers / max(self.recompute_every, 1)) if self.full_recompute else 0


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
    may hide behind (FORWARD or BACKWARD of one micro-batch; WGRAD or ATTENTION of each layer
    it runs in), None when it is on the critical path. ``collective`` None means
    point-to-point: ``kind`` SEND (one send per call) or ALL_TO_ALL.
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
    kind: str = ""
    phase: str = ""

    @property
    def calls(self) -> int:
        """Calls per step."""
        return self.calls_per_round * self.rounds


def _even(
    op: str, col: Collective | None, group: str, size: int, calls: int, rounds: int,
    window: str | None, source: str, kind: str = "", phase: str = "",
) -> CommOp:
    kind = kind or ("" if col is not None else SEND)
    return CommOp(op, col, group, size, calls, size, rounds, window, source, kind, phase)


def _bucketed(
    op: str, col: Collective, group: str, total_bytes: int, itemsize: int, bucket_bytes: int,
    rounds: int, window: str | None, source: str,
) -> CommOp:
    """``total_bytes`` in buckets of ``bucket_bytes`` (element-aligned), the last smaller."""
    bucket = (bucket_bytes // itemsize) * itemsize
    if bucket <= 0 or bucket >= total_bytes:
        return _even(op, col, group, total_bytes, 1, rounds, window, source)
    n = math.ceil(total_bytes / bucket)
    return CommOp(op, col, group, bucket, n, total_bytes - (n - 1) * bucket, rounds, window,
                  source)


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


def expert_total(model: Model) -> int:
    """Parameters of all experts of all MoE layers (0 for a dense model)."""
    return model.moe_layers * expert_params(model) if model.moe and model.complete else 0


def shard_params(model: Model, layout: Layout) -> int:
    """Parameters on one GPU before ZeRO partitioning: ceil(Psi / (tp * pp)), experts over
    expert_tp * pp * ep instead (tp unless etp=1)."""
    experts = expert_total(model)
    dense = math.ceil((model.params - experts) / (layout.tp * layout.pp))
    return dense + math.ceil(experts / (layout.expert_tp * layout.pp * layout.ep))


def step_collectives(model: Model, layout: Layout, batch: Batch) -> list[CommOp]:
    """Every CommOp of one training step for ``layout`` (an empty list on one GPU): the
    data-parallel ones, then those every micro-batch runs."""
    split = layout.tp > 1 or layout.pp > 1 or layout.cp > 1 or layout.ep > 1
    if split:
        model.require_shape(f"strategy {layout.name}")
    return data_parallel_ops(model, layout, batch) + micro_batch_ops(model, layout, batch)


def data_parallel_ops(model: Model, layout: Layout, batch: Batch) -> list[CommOp]:
    """The collectives of the data-parallel flavour (and of the experts' gradients)."""
    p = batch.itemsize
    layers = stage_layers(model, layout)
    ops: list[CommOp] = []
    experts = expert_total(model)
    dense = math.ceil((model.params - experts) / (layout.tp * layout.pp))
    hybrid = layout.hybrid
    if layout.dp * layout.cp > 1:
        group = DPS if hybrid else DP if layout.cp == 1 else DPCP
        ops += _data_parallel(layout, dense * p, layers, batch, group, "")
    if experts and layout.edp > 1:
        share = math.ceil(experts / (layout.expert_tp * layout.pp * layout.ep))
        ops += _data_parallel(layout, share * p, layers, batch, DPS if hybrid else EDP,
                              " (experts)")
    return ops


def micro_batch_ops(model: Model, layout: Layout, batch: Batch) -> list[CommOp]:
    """What every micro-batch communicates: TP, CP, EP and pipeline transfers."""
    if not (layout.tp > 1 or layout.pp > 1 or layout.cp > 1 or layout.ep > 1):
        return []
    _, h, s = model.require_shape(f"strategy {layout.name}")
    p, m = batch.itemsize, batch.micro_batches
    layers = stage_layers(model, layout)
    ops: list[CommOp] = []
    act = batch.micro_batch * (s // layout.cp) * h * p
    if layout.tp > 1:
        again = batch.recomputed(layers)
        ops += _tensor_parallel(layout, act, layers, m, again,
                                layers if batch.op_recompute else again,
                                1 if model.parallel_block else 2)
    if layout.cp > 1:
        ops += _context_parallel(model, layout, batch, layers)
    if layout.ep > 1 and model.moe:
        ops += _expert_parallel(model, layout, batch, layers)
    if layout.pp > 1:
        split = layout.tp if batch.scatter_gather else 1
        boundary = math.ceil(act / split / p) * p
        sends = 2 * layout.v
        ops.append(
            _even("send activations+grads (pp)", None, PP, boundary, sends, m, None, PIPELINE)
        )
    return ops


def _data_parallel(
    layout: Layout, grads: int, layers: int, batch: Batch, group: str, suffix: str
) -> list[CommOp]:
    flavor = layout.flavor
    if flavor == "zero3" or (flavor == "zero2" and (batch.fsdp or layout.hybrid)):
        return _fsdp(layout, grads, layers, batch, group, suffix)
    m, p = batch.micro_batches, batch.itemsize
    bucket = batch.bucket_bytes
    if bucket is None:
        bucket = default_bucket_bytes(flavor, p)
    if flavor == "ddp":
        ar = Collective.ALL_REDUCE
        return [_bucketed(f"all-reduce grads{suffix}", ar, group, grads, p, bucket, 1,
                          BACKWARD, DDP)]
    if flavor in ("zero1", "zero2"):
        rs, ag = Collective.REDUCE_SCATTER, Collective.ALL_GATHER
        rs_rounds = 1 if flavor == "zero1" else m
        return [
            _bucketed(f"reduce-scatter grads{suffix}", rs, group, grads, p, bucket, rs_rounds,
                      BACKWARD, ZERO),
            _bucketed(f"all-gather params{suffix}", ag, group, grads, p, bucket, 1, None, ZERO),
        ]
    raise AssertionError(f"flavour {flavor!r}")  # pragma: no cover - parse_strategy's


def _fsdp(
    layout: Layout, grads: int, layers: int, batch: Batch, group: str, suffix: str
) -> list[CommOp]:
    """Per block and micro-batch: the parameters' all-gather before its forward (and again
    before its backward under ``zero3``), its gradients' reduce-scatter after; under HSDP the
    shard's all-reduce over the replicas (module doc)."""
    m, p = batch.micro_batches, batch.itemsize
    unit = math.ceil(grads / layers / p) * p  # one layer's parameters
    red = batch.reduce_itemsize or p
    red_unit = unit // p * red  # its gradients, in the reduction's dtype
    ag, rs = Collective.ALL_GATHER, Collective.REDUCE_SCATTER
    source = FSDP2 if batch.fsdp or layout.hybrid else FSDP
    ops = [_even(f"all-gather params (fwd){suffix}", ag, group, unit, layers, m, FORWARD,
                 source)]
    if layout.flavor == "zero3":
        ops.append(_even(f"all-gather params (bwd){suffix}", ag, group, unit, layers, m,
                         BACKWARD, source))
    ops.append(_even(f"reduce-scatter grads{suffix}", rs, group, red_unit, layers, m, BACKWARD,
                     source))
    if layout.hybrid and layout.dp > layout.shard:
        part = math.ceil(red_unit / layout.shard_ranks / red) * red
        ops.append(_even(f"all-reduce grad shards (hsdp){suffix}", Collective.ALL_REDUCE, DPR,
                         part, layers, m, BACKWARD, source))
    return ops


def _tensor_parallel(layout: Layout, act: int, layers: int, m: int, again: int,
                     gathers: int, per: int = 2) -> list[CommOp]:
    """``per`` collectives per layer forward (2, twice with sp; 1 with a parallel block, whose
    attention and MLP share one input and one output), on the critical path unless they
    overlap the forward GEMMs, again in the ``again`` layers whose forward recomputation
    repeats (the all-gathers in ``gathers`` layers: op-level checkpointing repeats only
    those); as many backward, beside the weight gradients."""
    if layout.sp:  # (name, collective, layers repeating it) forward, then backward
        pairs = [("all-gather activations (sp {})", Collective.ALL_GATHER, gathers),
                 ("reduce-scatter activations (sp {})", Collective.REDUCE_SCATTER, again)]
        source = SEQ_PAR
    else:
        pairs = [("all-reduce activations (tp {})", Collective.ALL_REDUCE, again)]
        source = MEGATRON
    forward = [_even(name.format("fwd"), col, TP, act, per * (layers + n), m, FGEMM,
                     f"{source}; {RECOMPUTE}" if n else source, phase=FORWARD)
               for name, col, n in pairs]
    backward = [_even(name.format("bwd"), col, TP, act, per * layers, m, WGRAD, source,
                      phase=BACKWARD) for name, col, _ in pairs]
    return forward + backward


def _context_parallel(model: Model, layout: Layout, batch: Batch, layers: int) -> list[CommOp]:
    """Ring attention: cp - 1 sends of a K and V block per layer forward (and recomputed
    forward), twice the bytes per layer backward, each beside the layer's attention."""
    assert model.seq_len and model.heads
    p, cp = batch.itemsize, layout.cp
    kv = math.ceil(model.kv / layout.tp) * model.dim
    block = 2 * batch.micro_batch * (model.seq_len // cp) * kv * p
    m = batch.micro_batches
    return [
        _even("send keys+values (cp fwd)", None, CP, block,
              (cp - 1) * (layers + batch.recomputed(layers)), m,
              ATTENTION, RING_ATTENTION, phase=FORWARD),
        _even("send keys+values+grads (cp bwd)", None, CP, 2 * block, (cp - 1) * layers, m,
              ATTENTION_BWD, RING_ATTENTION, phase=BACKWARD),
    ]


def alltoall_bytes(model: Model, layout: Layout, batch: Batch) -> int:
    """A = c k (b s / (cp tp)) h p: the bytes of one dispatch (or combine) per GPU."""
    assert model.seq_len and model.hidden
    tokens = batch.micro_batch * model.seq_len // (layout.cp * layout.tp)
    cf = model.capacity_factor or 1.0
    return math.ceil(cf * model.top_k * tokens) * model.hidden * batch.itemsize


def _expert_parallel(model: Model, layout: Layout, batch: Batch, layers: int) -> list[CommOp]:
    """Dispatch and combine all-to-alls per MoE layer, forward (twice with full
    recomputation) and backward, on the critical path."""
    assert model.layers
    moe = math.ceil(layers * model.moe_layers / model.layers)  # the stage's MoE layers
    size, m = alltoall_bytes(model, layout, batch), batch.micro_batches
    return [
        _even("all-to-all dispatch+combine (ep fwd)", None, EP, size,
              2 * (moe + batch.recomputed(moe)), m, None,
              MOE, ALL_TO_ALL, FORWARD),
        _even("all-to-all dispatch+combine (ep bwd)", None, EP, size, 2 * moe, m, None, MOE,
              ALL_TO_ALL, BACKWARD),
    ]


def model_state_bytes(model: Model, layout: Layout, itemsize: int) -> int:
    """Parameters + gradients + Adam states on one GPU (ZeRO paper, Sec. 3.1 and 5).

    Mixed precision (p < 4 bytes): p*Psi' + p*Psi' + 12*Psi' (fp32 master copy, momentum,
    variance); in fp32, 8*Psi' for momentum and variance. ZeRO-1 divides the optimizer states
    by dp, ZeRO-2 also the gradients, ZeRO-3 all three. Activations are not counted (the
    link-priced plan's memory; :mod:`ringtree.plan.memory` has the whole of it).
    """
    psi = shard_params(model, layout)
    params, grads, opt = itemsize * psi, itemsize * psi, (12 if itemsize < 4 else 8) * psi
    dp = layout.shard_ranks
    if layout.flavor == "zero1":
        opt = math.ceil(opt / dp)
    elif layout.flavor == "zero2":
        grads, opt = math.ceil(grads / dp), math.ceil(opt / dp)
    elif layout.flavor == "zero3":
        params, grads, opt = (math.ceil(x / dp) for x in (params, grads, opt))
    return params + grads + opt
