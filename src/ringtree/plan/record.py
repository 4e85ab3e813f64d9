"""A plan as a record: the settings of a training step (:class:`Training`), one priced
collective (:class:`TimedOp`) and the whole step's figures (:class:`Plan`: step time, MFU and
HFU, memory, dollars, its ``--json`` form)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ringtree.cost.pricer import CallTime, GroupShape
from ringtree.plan.compute import FLASH, Efficiency
from ringtree.plan.flops import NONE
from ringtree.plan.memory import MEGATRON, Memory
from ringtree.plan.model import Model
from ringtree.plan.placement import Placement
from ringtree.plan.precision import BF16
from ringtree.plan.step import MicroBatch
from ringtree.plan.strategy import Layout
from ringtree.plan.volumes import CommOp

SECONDS_PER_DAY = 86_400
DP_OVERLAP = ("none", "backward", "full")


@dataclass(frozen=True)
class Training:
    """How the step is run, whatever the strategy.

    itemsize: bytes per parameter/gradient/activation element.
    micro_batch: sequences per micro-batch (b).
    global_batch: sequences per step over the whole cluster (None: one micro-batch per GPU).
    compute_s: one GPU's forward + backward time per step (None: from tflops and mfu, or the
    compute model on a cluster as built, or unknown: then nothing is hidden).
    tflops, mfu: peak dense TFLOP/s of one GPU and the fraction reached; compute = 6 Psi
    tokens / (GPUs * tflops * 1e12 * mfu) (Kaplan et al. 2020; Narayanan et al. 2021).
    bucket_bytes: gradient bucket (None: the framework's default; 0 for one collective).
    steps_per_second: for the per-day figure (None: 1 / step time).
    recompute: activation recomputation, none | selective | full | op (torchtitan's op-level
    selective checkpointing) | selective+microbatch (selective for only the in-flight
    micro-batches memory requires): :mod:`ringtree.plan.checkpointing`.
    attention: ``flash`` (FlashAttention-2 and later), ``triton`` (the Triton FlashAttention of
    2022, llm-foundry's MPT) or ``unfused`` (Megatron-LM before 2022).
    dp_overlap: ``backward`` (gradients hide behind the backward, ZeRO-1/2's parameter
    gathers after the optimizer step do not), ``full`` (those hide behind the next forward,
    Megatron's --overlap-param-gather) or ``none`` (every DP collective after the backward).
    efficiency: the compute model's constants (None: the GPU generation's).
    nccl_env: NCCL_ALGO, NCCL_PROTO, ... for the NCCL model.
    framework: ``megatron``, ``deepspeed`` or ``fsdp`` (PyTorch FSDP2 as torchtitan runs it):
    what the model states' and the pipeline's memory is (:mod:`ringtree.plan.memory`), whether
    pipeline sends split over the TP ranks (Megatron-LM's scatter/gather and torchtitan's
    sequence-sharded stage outputs; DeepSpeed's engine sends whole activations from each), how
    ZeRO-2/3 communicate (:mod:`ringtree.plan.volumes`) and what the framework adds
    (:mod:`ringtree.plan.fsdp`).
    tp_comm_overlap: the forward's TP collectives overlap the layer's forward GEMMs (Megatron-LM's
    --tp-comm-overlap with Transformer Engine's userbuffers, NeMo's default on H100; torchtitan's
    async TP): each layer hides up to its GEMMs' time, as long as its weight gradients'.
    ep_overlap: the expert all-to-alls of one micro-batch overlap the adjacent micro-batch's
    other pass (Megatron-Core v0.14's combined 1F1B, --overlap-moe-expert-parallel-comm;
    DeepSeek-V3's DualPipe): the forward's hide behind a backward, the backward's behind a
    forward; False (Megatron-Core's default): on the critical path.
    recompute_every: with ``recompute="full"``, checkpoint every K-th layer only (torchtitan's
    ``selective_ac_option = "K"``; :mod:`ringtree.plan.checkpointing`); 1: every layer.
    reduce_itemsize: bytes per gradient element in the data-parallel reduction (None: the
    framework's: fp32 under ``fsdp``, torchtitan's ``mixed_precision_reduce``; else itemsize).
    tp_overlap: the backward's TP collectives overlap the weight-gradient GEMMs (Megatron-LM's
    asynchronous all-reduce of the input gradient, since late 2021); False: on the critical
    path like the forward's.
    cp_overlap: context parallelism's key/value transfers overlap the layer's attention
    (Megatron-Core's ring attention); False: they are on the critical path (all-gather-based
    context parallelism, as Llama 3 trained: "the all-gather communication latency is exposed
    in the critical path", Dubey et al. 2024, section 3.3.2).
    precision: the linear layers' GEMMs, ``bf16``, ``fp16`` or ``fp8`` (Transformer Engine's
    recipe: :mod:`ringtree.plan.precision`); ``itemsize`` stays the 16-bit weights' 2.
    train_metrics: cross-entropy metrics computed on every micro-batch's logits beside the loss
    (Composer's train metrics: llm-foundry's MPT keeps two, :mod:`ringtree.plan.frameworks`).
    compile: fused kernels (Megatron-LM's and Transformer Engine's, or torch.compile), as
    the calibration runs had; False: eager PyTorch, its compute
    :data:`ringtree.plan.compute.EAGER` times slower.
    pp_overlap: the interleaved schedule's pipeline sends overlap the next chunk's compute
    (Megatron-Core's ``overlap_p2p_comm``, which Megatron-Bridge sets whenever pp > 1 and
    v > 1: src/megatron/bridge/training/comm_overlap.py at commit 0685ff5d); False: every
    micro-batch waits for them. No effect when v = 1.
    main_grad_bytes: bytes per parameter of the gradients accumulated and reduced: 4 (fp32
    main gradients, Megatron-LM's default for BF16) or 2 (16-bit, Megatron-Core's
    ``grad_reduce_in_fp32=False``: NeMo's ``optim.grad_sync_dtype: bf16``).
    loss: how the cross-entropy is computed, for the logits' memory
    (:func:`ringtree.plan.memory.logit_bytes`): ``vocab-parallel``, ``torch`` or ``fused``;
    "" is the framework's.
    param_bytes: under ``fsdp``, bytes of the sharded parameters: 4 (fp32, Adam's master copy)
    or 2 (a model built in bf16: gradients and Adam's moments bf16 too).
    fsdp_no_sync: under ``fsdp``, gradient sync is off for all but the last micro-batch, so the
    gradients accumulate unsharded in fp32 (:func:`ringtree.plan.memory.state_memory`).
    """

    itemsize: int = 2
    micro_batch: int = 1
    global_batch: int | None = None
    compute_s: float | None = None
    tflops: float | None = None
    mfu: float | None = None
    bucket_bytes: int | None = None
    steps_per_second: float | None = None
    recompute: str = NONE
    attention: str = FLASH
    dp_overlap: str = "backward"
    efficiency: Efficiency | None = None
    nccl_env: tuple[tuple[str, str], ...] = ()
    framework: str = MEGATRON
    tp_overlap: bool = True
    cp_overlap: bool = True
    precision: str = BF16
    compile: bool = True
    reduce_itemsize: int | None = None
    tp_comm_overlap: bool = False
    pp_overlap: bool = False
    recompute_every: int = 1
    ep_overlap: bool = False
    main_grad_bytes: int = 4
    train_metrics: int = 0
    loss: str = ""
    param_bytes: int = 4
    fsdp_no_sync: bool = False


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
            "bytes_per_call": self.op.bytes_per_call,
            "kind": self.op.kind or (self.op.collective.value if self.op.collective else ""),
            "algorithm": self.call.algorithm,
            "hierarchical": self.call.hierarchical,
            "forced": self.call.forced,
            "latency_s": self.latency_s,
            "source": self.op.source,
        }


@dataclass(frozen=True)
class Plan:
    """The plan of one strategy on one placement (see the module doc for the step time)."""

    strategy: str
    model: Model
    layout: Layout
    micro_batches: int
    collectives: list[TimedOp]
    compute_s: float | None
    bubble_s: float
    memory_bytes_per_gpu: int
    placement: Placement
    training: Training
    verdict: str = field(default="", compare=False)
    memory: Memory | None = None
    optimizer_s: float = 0.0
    model_flops: float | None = None
    hardware_flops: float | None = None
    peak_flops: float | None = None
    micro: MicroBatch | None = None

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
        """compute + exposed communication + bubble + optimizer (None without compute)."""
        if self.compute_s is None:
            return None
        return self.compute_s + self.exposed_s + self.bubble_s + self.optimizer_s

    @property
    def overhead(self) -> float | None:
        """Exposed communication over compute (0.156 for 15.6 %)."""
        if not self.compute_s:
            return None
        return self.exposed_s / self.compute_s

    @property
    def fits_memory(self) -> bool:
        """Whether the memory counted fits in one GPU's memory."""
        return self.memory_bytes_per_gpu <= self.placement.gpu_memory_bytes

    @property
    def tokens(self) -> int | None:
        """Tokens per step (None without a sequence length)."""
        s = self.model.seq_len
        return None if s is None else s * self.micro_batches * self.layout.dp * (
            self.training.micro_batch)

    def _utilisation(self, flops: float | None) -> float | None:
        step = self.step_time_s
        if flops is None or not step or not self.peak_flops:
            return None
        return flops / (step * self.placement.gpus * self.peak_flops)

    @property
    def mfu(self) -> float | None:
        """Model FLOPs utilisation (Chowdhery et al. 2022): model FLOPs / (step x peak)."""
        return self._utilisation(self.model_flops)

    @property
    def hfu(self) -> float | None:
        """Hardware FLOPs utilisation: with what recomputation repeats."""
        return self._utilisation(self.hardware_flops)

    @property
    def usd_per_step(self) -> float | None:
        """Dollars of exposed communication per step, on every GPU."""
        rate = self.placement.usd_per_second
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

    @property
    def step_usd(self) -> float | None:
        """Dollars of the whole step: step time x the cluster's price."""
        rate, step = self.placement.usd_per_second, self.step_time_s
        return None if rate is None or step is None else rate * step

    def to_json(self) -> dict:
        """One entry of ``{"plans": [...]}``."""
        lay = self.layout
        tokens, step = self.tokens, self.step_time_s
        return {
            "strategy": self.strategy, "flavor": lay.flavor,
            "dp": lay.dp, "tp": lay.tp, "pp": lay.pp, "cp": lay.cp, "ep": lay.ep, "v": lay.v,
            "sp": lay.sp, "micro_batch": self.training.micro_batch,
            "recompute": self.training.recompute, "precision": self.training.precision,
            "compile": self.training.compile,
            "collectives": [c.to_json() for c in self.collectives],
            "bytes_per_gpu": self.bytes_per_gpu, "comm_time_s": self.comm_time_s,
            "exposed_s": self.exposed_s, "overhead": self.overhead,
            "usd_per_step": self.usd_per_step, "usd_per_day": self.usd_per_day,
            "step_usd": self.step_usd,
            "usd_per_million_tokens": (
                None if self.step_usd is None or not tokens else self.step_usd * 1e6 / tokens
            ),
            "layout": {"dp": lay.dp, "tp": lay.tp, "pp": lay.pp},
            "micro_batches": self.micro_batches, "compute_s": self.compute_s,
            "bubble_s": self.bubble_s, "optimizer_s": self.optimizer_s,
            "step_time_s": step, "tokens_per_step": tokens,
            "tokens_per_s": tokens / step if tokens and step else None,
            "mfu": self.mfu, "hfu": self.hfu,
            "model_flops_per_step": self.model_flops,
            "memory_bytes_per_gpu": self.memory_bytes_per_gpu,
            "memory_per_gpu_bytes": self.memory_bytes_per_gpu,
            "memory": self.memory.to_json() if self.memory else None,
            "gpu_memory_bytes": self.placement.gpu_memory_bytes,
            "fits_memory": self.fits_memory, "fits": self.fits_memory,
            "verdict": self.verdict,
        }
