"""The published runs of ``bench/published_training/*.toml`` read into what ``ringtree plan``
takes: one small function per field (precision, strategy, framework, GPU and cluster, model
shape, batch, recomputation), and the reasons a run is left out or outside the model.

A run is *left out* when no plan can be set up from it (no GPU, no shape, no measured figure);
it is *outside the model* when it can be planned but needs something main's planner does not
price yet (FP8 GEMMs, mixture-of-experts compute, torch.compile, ...): it is predicted and
shown, not counted. Each reason is named; a run with several has them all.

When the planner gains a feature, its reason goes from the ``_*_why`` function that names it
and the field reaches the plan in ``plan_vs_published.settings``: :func:`precision` (``fp8``),
:func:`framework` (``torchtitan``, ``llm-foundry``, ``megatron-bridge``: FSDP2, Megatron-FSDP),
the run's ``compile``, its ``recompute`` (``op``, ``every 2``,
``selective+microbatch-level``), :func:`strategy`'s ``shard=N``,
its MoE shape (:func:`model` already carries experts, top-k and the expert FFN).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

from moe_runs import BLACKWELL_BF16, FOLDED_A2A, GPT_OSS, HOST_BOUND, OLD_CONTAINER, PIPELINED_HOST
from torchtitan_runs import torchtitan_why

from ringtree.cost.clusters import Cluster, get_cluster, gpus
from ringtree.errors import RingtreeError
from ringtree.plan.model import Model, count_params
from ringtree.plan.placement import Placement, on_cluster
from ringtree.plan.strategy import Layout

HERE = Path(__file__).resolve().parent / "published_training"
#: Settings the era of each source fixes: attention kernels, DP overlap, dropout. Sources not
#: named (2024 and later: Megatron-Core, NeMo, torchtitan) use FlashAttention,
#: overlap data-parallel communication with the backward and train without dropout.
ERA = {
    "narayanan2021": ("unfused", "none", True),
    "korthikanti2022": ("unfused", "none", True),
    "mt-nlg530b": ("unfused", "none", True),
    "bloom176b": ("unfused", "none", False),
    "megascale2024": ("unfused", "none", True),
    "megatron-lm-readme": ("flash", "full", True),
    "llama3": ("flash", "full", False),
    # llm-foundry's benchmark sweep (scripts/train/benchmarking/submit_benchmarks.py at
    # 5e85bd62d: --attn_impl defaults to 'triton', and sweep.sh never sets it): the Triton
    # FlashAttention of 2022 (llmfoundry/models/layers/flash_attn_triton.py); no dropout
    # (attn_pdrop, resid_pdrop, emb_pdrop 0.0 in configuration_mpt.py at b2a43a147)
    "llm-foundry-mpt": ("triton", "full", False),
}
MODERN = ("flash", "full", False)
EXCLUDED = {
    "palm540b": "TPU v4, not a GPU",
    "opt175b": "'up to 147 TFLOP/s' without an iteration time or a definition of the FLOPs",
}
#: Sources that ran DeepSpeed's pipeline engine (no scatter/gather of the sends, v = 1).
DEEPSPEED = ("bloom176b", "mt-nlg530b")
#: Sources whose framework had no asynchronous TP all-reduce in the backward (Megatron-LM
#: added it in late 2021; the DeepSpeed forks of 2021-22 did not have it).
NO_TP_OVERLAP = ("narayanan2021", "mt-nlg530b", "bloom176b")
#: Sources whose context parallelism gathers keys and values with the latency exposed (Llama 3,
#: Dubey et al. 2024, 3.3.2) rather than overlapping a ring with attention.
ALL_GATHER_CP = ("llama3",)
#: Sources whose era had no sequence parallelism (Korthikanti et al. 2022 introduced it).
NO_SP = ("narayanan2021", "mt-nlg530b", "bloom176b")
#: What a system built on Megatron-LM changes in its step (Training fields), as its source
#: states it. MegaScale (Jiang et al. 2024): FlashAttention-2 (Sec. 3.3); the all-gather of the
#: parameters prefetched and overlapped per model chunk, the gradients' reduce-scatter after
#: each chunk's backward (Sec. 3.2, data parallelism); pipeline sends decoupled from receives
#: and overlapped with compute (Sec. 3.2, Figure 4); the TP/SP all-gather and reduce-scatter
#: fused into the FFN path's GEMMs, chunked and pipelined, forward and backward (Sec. 3.2,
#: Figure 3c). Its parallel block and window are the model's (``parallel_block``, ``window``).
SYSTEMS = {
    "megascale": {"attention": "flash", "dp_overlap": "full", "pp_overlap": True,
                  "tp_comm_overlap": True},
}
#: Cluster presets by the GPU a run names (the first prefix that matches).
GPUS = (("GB200", "dgx-gb200-nvl72"), ("B200", "dgx-b200"), ("H100", "dgx-h100"),
        ("H200", "dgx-h100"), ("A100", "dgx-a100"), ("Ampere", "dgx-a100"))
#: GPUs that sit in their generation's DGX node but are another part (an H200 host of 8 GPUs
#: on NVLink with a 400 Gb/s NIC per GPU, as the Trainy benchmark describes, is a DGX H100 of
#: H200s; Meta's Grand Teton H100 of 96 GB HBM2e at 500 W, torchtitan's, is a DGX H100 of those).
PARTS = (("A100-40GB", "a100-sxm-40gb"), ("H200", "h200-sxm"), ("H100-HBM2e", "h100-hbm2e-96gb"))
#: Model families with SwiGLU MLPs and untied embeddings (Llama, Qwen3, DeepSeek, GPT-OSS,
#: Mixtral); the others (GPT-3, MPT, BLOOM, OPT) have GeLU MLPs and tied embeddings.
GATED = re.compile(r"llama|qwen|deepseek|gpt.?oss|mixtral", re.IGNORECASE)


@dataclass
class Run:
    """One published run set up for the planner; ``published_*``: the figure compared (an
    iteration time, else an MFU, else model TFLOP/s per GPU)."""

    source: str
    name: str
    data: dict
    arch: str
    model: Model
    placement: Placement
    published_s: float | None
    published_mfu: float | None
    published_tflops: float | None = None


def precision(r: dict) -> str:
    """The GEMMs' precision: ``fp8``, ``fp16``, ``bf16`` or ``mixed-16bit`` (16-bit, the
    source does not say which)."""
    text = str(r.get("precision", "mixed-16bit")).lower()
    for p in ("fp8", "fp16", "bf16"):
        if text.startswith(p):
            return p
    return "mixed-16bit"


def planner_precision(r: dict) -> str:
    """The GEMMs' precision the planner prices: the run's, 16-bit of unstated kind as BF16
    (FP16 and BF16 GEMMs run at one peak)."""
    p = precision(r)
    return "bf16" if p == "mixed-16bit" else p


def fused(label: str, r: dict) -> bool:
    """Whether the run's kernels are fused (``Training.compile``): torchtitan runs eager unless
    the source says torch.compile; the other frameworks fuse theirs (Megatron-LM, Transformer
    Engine, llm-foundry's Triton/FlashAttention kernels)."""
    return bool(r.get("compile", label != "torchtitan"))


def framework(source: str, r: dict) -> str:
    """The framework the run used, as the source names it (``megatron`` where unnamed)."""
    if source in DEEPSPEED or (source == "narayanan2021" and r.get("zero") == 3):
        return "deepspeed"
    return str(r.get("framework", "megatron"))


def planner_framework(label: str) -> str:
    """What the planner's memory, pipeline and data-parallel schedule take for it:
    ``deepspeed``, ``fsdp`` (PyTorch FSDP/FSDP2: torchtitan, llm-foundry, NeMo AutoModel) or
    ``megatron`` (Megatron-LM, NeMo, Megatron-Bridge, Megatron-FSDP included)."""
    if label == "deepspeed":
        return "deepspeed"
    return "fsdp" if label in PYTORCH_FSDP else "megatron"


#: Cross-entropy train metrics each framework computes on every micro-batch's logits
#: (``Training.train_metrics``): llm-foundry's MPT keeps LanguageCrossEntropy and
#: LanguagePerplexity (llmfoundry/models/mpt/modeling_mpt.py at b2a43a147: ``use_train_metrics``
#: defaults to True; the benchmark yamls do not set it), which Composer updates after every
#: micro-batch's backward.
TRAIN_METRICS = {"llm-foundry": 2}
#: How each framework's loss is computed, where it is not the planner framework's
#: (``Training.loss``, :func:`ringtree.plan.memory.logit_bytes`): llm-foundry's MPT defaults to
#: FlashAttention's fused cross-entropy (``loss_fn: fused_crossentropy``,
#: llmfoundry/models/mpt/modeling_mpt.py at 5e85bd62d; the benchmark YAMLs do not set it).
LOSS = {"llm-foundry": "fused"}


def loss(label: str, r: dict) -> str:
    """How the run's loss is computed (``Training.loss``): the row's ``loss`` (NeMo
    AutoModel's MoE benchmark configs set ``MaskedCrossEntropy`` with ``fp32_upcast: false``,
    examples/benchmark/configs/*.yaml at 8d9bfb90: ``torch-16bit``), else the framework's."""
    return str(r.get("loss") or LOSS.get(label, ""))


#: Frameworks that shard with PyTorch's FSDP/FSDP2.
PYTORCH_FSDP = ("torchtitan", "llm-foundry", "nemo-automodel")


def hsdp_shard(r: dict) -> int:
    """The sharding group of an HSDP run (a printed FSDP group smaller than dp), as
    ``Layout.shard`` takes it (0: none)."""
    label = str(r.get("fsdp_label", ""))
    if r.get("hsdp_shard"):
        return int(r["hsdp_shard"])
    if label.isdigit() and 1 < int(label) < dp_degree(r):
        return int(label)
    return 0


def flavors(source: str, r: dict) -> list[str]:
    """The data-parallel flavours the source allows (both ZeRO-0 and ZeRO-1 where unstated)."""
    if source == "llama3":
        # FSDP that "shards optimizer states and gradients, but for model shards we do not
        # reshard after forward computation": ZeRO-2 (weights whole during the step)
        return ["zero2"]
    z = r.get("zero")
    if z is None and r.get("sharding_strategy") == "SHARD_GRAD_OP":
        z = 2  # PyTorch FSDP's SHARD_GRAD_OP: no resharding after forward
    if z is None and r.get("fsdp"):
        # FSDP / FSDP2 / Megatron-FSDP reshard after forward by default; torchtitan does not
        # with pipeline parallelism (reshard_after_forward "default": False when pp > 1)
        pp_default = framework(source, r) == "torchtitan" and r.get("pp", 1) > 1
        z = 2 if pp_default else 3
    if z is None:
        return ["ddp", "zero1"]
    return [{0: "ddp", 1: "zero1", 2: "zero2", 3: "zero3"}[int(z)]]


def dp_degree(r: dict) -> int:
    """Data-parallel replicas: as printed, else GPUs / (tp * pp * cp)."""
    return int(r.get("dp") or r["gpus"] // (r.get("tp", 1) * r.get("pp", 1) * r.get("cp", 1)))


def strategy(source: str, r: dict) -> str:
    """The run's strategy as ``ringtree plan --strategy`` spells it (the first flavour where
    the source leaves it open; ``,shard=N`` for HSDP)."""
    lay = Layout(flavors(source, r)[0], dp_degree(r), r.get("tp", 1), r.get("pp", 1),
                 bool(r.get("sequence_parallel")), r.get("cp", 1), r.get("ep", 1),
                 r.get("virtual_stages", 1), etp=folded_etp(r))
    shard = hsdp_shard(r)
    return lay.name + (f",shard={shard}" if shard else "")


def folded_etp(r: dict) -> int:
    """``Layout.etp`` of the run: 1 where it states expert_tensor_parallel 1 and tp x cp > 1
    (the expert-parallel groups span those ranks), else 0."""
    return 1 if r.get("etp") == 1 and r.get("tp", 1) * r.get("cp", 1) > 1 else 0


def expert_degree(r: dict) -> int:
    """The ep the planner can lay out: the run's where its groups fit (inside dp, or whole tp x
    cp blocks of tp x cp x dp with etp=1), else 1 (the run is then outside the model)."""
    ep, block = r.get("ep", 1), r.get("tp", 1) * r.get("cp", 1) if folded_etp(r) else 1
    return ep if ep % block == 0 and dp_degree(r) % (ep // block) == 0 else 1


def global_batch(r: dict) -> int:
    """Sequences per step: as printed, else as derived, else tokens per step / seq_len."""
    g = r.get("global_batch") or r.get("derived_global_batch")
    return int(g if g is not None else round(r["global_batch_tokens"] / r["seq_len"]))


def micro_batches(r: dict) -> list[int]:
    """The micro-batch sizes to try: as printed; torchtitan's local batch without pipelining
    (one forward per step), split into pp micro-batches with it
    (torchtitan_runs.TORCHTITAN_PP);
    else 1, 2, 4, 8."""
    if "micro_batch" in r:
        return [int(r["micro_batch"])]
    if "local_batch" in r:
        return [max(1, int(r["local_batch"]) // r.get("pp", 1))]
    return [1, 2, 4, 8]



def main_grad_bytes(r: dict) -> int:
    """Bytes per parameter of the accumulated gradients: 2 where the recipe reduces them in
    BF16 (``grad_reduce_dtype``), else Megatron's fp32 main gradients."""
    return 2 if str(r.get("grad_reduce_dtype", "fp32")).lower() in ("bf16", "fp16") else 4


def recomputes(r: dict) -> list[str]:
    """The recomputation modes to try: the stated one when the planner has it, else all."""
    rc = str(r.get("recompute", ""))
    if rc.startswith("every"):
        return ["full"]  # every k-th layer: recompute_every()
    if rc == "selective+microbatch-level":  # Korthikanti et al. 2022, App. C
        return ["selective+microbatch"]
    return [rc] if rc in ("none", "selective", "full", "op") else ["none", "selective", "full"]


def recompute_every(r: dict) -> int:
    """k of a run that checkpoints every k-th layer ("every 2"), else 1."""
    rc = str(r.get("recompute", ""))
    return int(rc.split()[1]) if rc.startswith("every ") else 1


def cluster(source: str, r: dict) -> Cluster:
    """The cluster preset of the run's GPU, with what the source says differs from it."""
    gpu = str(r.get("gpu", ""))
    key = next((v for k, v in GPUS if gpu.startswith(k)), None)
    if key is None:
        raise RingtreeError(f"no cluster preset for GPU {gpu!r}")
    hw = get_cluster(key)
    part = next((v for k, v in PARTS if gpu.startswith(k)), None)
    if part:
        hw = replace(hw, gpu=gpus()[part])
    if source == "bloom176b":  # Jean Zay: 4 Omni-Path 100 Gb/s links per node
        hw = replace(hw, nics_per_node=4, nic_gbps=100.0)
    elif source in ("llama3", "megascale2024") or "RoCE" in str(r.get("table", "")):
        hw = replace(hw, network="roce")
    return hw


def placement(source: str, r: dict) -> Placement:
    """Nodes of the run's cluster (a job smaller than a node: that many GPUs of one node, on
    its NVLink). A GB200 job of at most 72 GPUs is one NVLink domain of that
    many; a larger one is taken as domains of 64 (the sources do not say how it is spread)."""
    hw = cluster(source, r)
    n = int(r["gpus"])
    per = min(int(r.get("gpus_per_node", 8)), n)  # a job of 2 GPUs: part of one node
    if hw.gpus_per_node > 8:
        per = n if n <= hw.gpus_per_node else 64
    if per != hw.gpus_per_node:  # the NICs of the GPUs used
        nics = max(1, hw.nics_per_node * per // hw.gpus_per_node)
        hw = replace(hw, gpus_per_node=per, nics_per_node=nics)
    memory = re.search(r"(\d+)GB", str(r.get("gpu", "")))
    size = int(memory.group(1)) * 10**9 if memory and "HBM2e" in str(r["gpu"]) else None
    return on_cluster(hw, n // per, gpu_memory_bytes=size)


def model(source: str, r: dict) -> Model:
    """The shape as stated (FFN: printed, derived, expansion ratio x hidden, else 4 x hidden)."""
    gated = source == "llama3" or bool(GATED.search(str(r.get("model", ""))))
    h = r["hidden"]
    ffn = r.get("ffn") or r.get("derived_ffn") or r.get("expansion_ratio", 4) * h
    m = Model(
        r["name"], 0, r["layers"], h, r["seq_len"], source, heads=r["heads"],
        kv_heads=r.get("kv_heads"), head_dim=r.get("head_dim", r.get("qk_head_dim")), ffn=ffn,
        vocab=r.get("vocab", 51200), gated=gated, tied=not gated,
        dropout=ERA.get(source, MODERN)[2], experts=r.get("experts", 0), top_k=r.get("top_k", 1),
        expert_ffn=r.get("expert_ffn"), shared_experts=r.get("shared_experts", 0),
        dense_layers=r.get("dense_layers", 0), parallel_block=bool(r.get("parallel_block")),
        **_attention_shape(r),
    )
    return replace(m, params=count_params(m))


def _attention_shape(r: dict) -> dict:
    """MLA's ranks and head dimensions (``attention_kind = "mla"``), the sliding window."""
    out = {"window": r.get("window_size", 0), "window_every": r.get("window_every", 0)}
    if r.get("attention_kind") == "mla":
        out.update(kv_lora_rank=r["kv_lora_rank"], q_lora_rank=r.get("q_lora_rank"),
                   rope_dim=r["qk_pos_emb_head_dim"],
                   v_head_dim=r["v_head_dim"])
    return out


#: Runs the model misses by more than 20 % with no mechanism found yet: each is shown (not
#: counted) with its error and what sets it apart from its neighbours (docs/plan.md).
UNEXPLAINED = {
    ("nemo-automodel-perf", "deepseek-v3-671b-256gpu"): "+85 %",
    ("nemo-automodel-perf", "deepseek-v3-671b-1024gpu"): "+57 %",
    ("nemo-automodel-perf", "qwen3-moe-30b-8gpu"): "+40 %",
    ("megatron-bridge-26.04-perf", "qwen3_30b_a3b-dgx-h100-fp8-16gpu"): "+21 %",
    ("llm-foundry-mpt", "mpt-70b-a100-40gb-bf16-seq2048-64gpu-mb2"): "-23 %",
    ("llm-foundry-mpt", "mpt-760m-a100-80gb-bf16-seq512-8gpu-mb96"): "-22 %",
    ("llm-foundry-mpt", "mpt-1b-a100-40gb-bf16-seq2048-32gpu-mb10"): "-21 %",
    ("llm-foundry-mpt", "mpt-30b-a100-80gb-bf16-seq8192-8gpu-mb1"): "-20 %",
}
#: What sets each family of UNEXPLAINED apart.
UNEXPLAINED_WHY = {
    "nemo-automodel-perf": ("NeMo AutoModel's MoE (FSDP2 with expert parallelism, DeepEP, a fake "
                            "balanced gate) runs faster than the model prices it; the cause is "
                            "not established"),
    "megatron-bridge-26.04-perf": ("Qwen3-30B-A3B at ep=16 over two H100 nodes: slower than "
                                   "priced, while the same model at ep=8 in one node is within 20 "
                                   "%; whether the recipe overlaps the all-to-all is not stated"),
    "llm-foundry-mpt": ("faster than its neighbours say it should be: the same model at other "
                        "GPU counts or sequence lengths is within 5-17 % (docs/plan.md, PyTorch "
                        "FSDP runs); no mechanism found"),
}


def _unexplained_why(source: str, r: dict) -> str | None:
    err = UNEXPLAINED.get((source, r.get("name")))
    if err is None:
        return None
    return f"{UNEXPLAINED_WHY[source]} (predicted {err})"


#: Between a run's reasons (a reason may itself hold "; ").
SEP = " | "


def outside(source: str, r: dict) -> str | None:
    """Why a run is outside what main's planner describes (its error is shown, not counted):
    every reason, joined by :data:`SEP`, or None."""
    why = [w for w in (_moe_why(r), torchtitan_why(r), _unexplained_why(source, r)) if w]
    return SEP.join(why) or None



def _moe_fit_why(r: dict) -> str | None:
    """MoE rows whose missing mechanism is named (their errors as the harness shows them)."""
    if not r.get("experts"):
        return None
    model, gpu = str(r.get("model", "")).lower(), str(r.get("gpu", ""))
    mb = r.get("framework") == "megatron-bridge"
    if r.get("window_size") and mb:
        return GPT_OSS
    if mb and gpu.startswith("B200") and "qwen3" in model and r.get("micro_batch") == 1:
        return HOST_BOUND
    if mb and gpu.startswith("H100") and r.get("virtual_stages", 1) >= 12:
        return PIPELINED_HOST
    if precision(r) == "bf16" and gpu.startswith(("B200", "GB200")):
        return BLACKWELL_BF16
    if folded_etp(r) and r.get("moe_a2a_overlap") and gpu.startswith("H100"):
        return FOLDED_A2A
    if r.get("release") == "25.11" and gpu.startswith("GB200") and "30b" in model:
        return OLD_CONTAINER
    return None


def _moe_why(r: dict) -> str | None:
    why = [w for w in (_moe_fit_why(r),) if w]
    if r.get("ep", 1) > 1 and expert_degree(r) == 1:
        why.append(f"ep={r['ep']} spans tensor- and data-parallel ranks (dp={dp_degree(r)}) "
                   "and the source states no expert tensor parallelism of 1 (so it is planned "
                   "with ep=1, every expert of the stage on each GPU: predicted not to fit)")
    return SEP.join(why) or None


def left_out(source: str, r: dict) -> str | None:
    """Why no plan can be set up from a run at all (it is listed, never predicted)."""
    if source in EXCLUDED:
        return EXCLUDED[source]
    if not (r.get("iteration_time_s") or r.get("derived_iteration_time_s") or r.get("mfu")
            or r.get("tflops_per_gpu")):
        return "no iteration time, throughput, MFU or TFLOP/s"
    if not all(k in r for k in ("layers", "hidden", "heads", "seq_len")):
        return "model shape not given"
    return None


def setup(source: str, r: dict) -> Run:
    """A run as the planner takes it, with the figure its error is measured on."""
    place = placement(source, r)
    t = r.get("iteration_time_s") or r.get("derived_iteration_time_s")
    mfu = None if t else r.get("mfu")
    tflops = None if t or mfu else r.get("tflops_per_gpu")
    return Run(source, r["name"], r, place.cluster.gpu.arch, model(source, r), place, t, mfu,
               tflops)


def load() -> tuple[list[Run], list[tuple[str, str, str, dict]]]:
    """Every run that can be planned, and (source, run, why, its data) for those left out."""
    runs, skipped = [], []
    for path in sorted(HERE.glob("*.toml")):
        source = path.stem
        for r in tomllib.loads(path.read_text()).get("runs", []):
            why = left_out(source, r)
            if why:
                skipped.append((source, r["name"], why, r))
            else:
                runs.append(setup(source, r))
    return runs, skipped


def described(source: str, r: dict) -> dict:
    """What a run is, as stated: its precision, framework, GPU and strategy."""
    try:
        stated = strategy(source, r)
    except (KeyError, ZeroDivisionError):
        stated = None
    return {"precision": precision(r), "framework": framework(source, r),
            "gpu_model": r.get("gpu"), "gpus": r.get("gpus"), "stated_strategy": stated}
