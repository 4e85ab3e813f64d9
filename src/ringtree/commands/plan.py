"""``ringtree plan``: how long a training step takes, whether it fits, what it costs, and
which configuration is best (``--search``)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from ringtree.commands import args as A
from ringtree.commands.plan_render import render_compare, render_plan, render_search
from ringtree.errors import RingtreeError
from ringtree.output import print_json, stderr_console
from ringtree.plan.calibrate import fit_efficiency
from ringtree.plan.checkpointing import MICROBATCH, OP
from ringtree.plan.compute import ATTENTION, Efficiency, default_efficiency
from ringtree.plan.flops import RECOMPUTE
from ringtree.plan.memory import FRAMEWORKS
from ringtree.plan.model import MLPS, SHAPE_FLAGS, Model, custom_shape
from ringtree.plan.placement import DEFAULT_INTER, DEFAULT_INTRA, Placement, place
from ringtree.plan.planner import compare, plan
from ringtree.plan.precision import FP8, PRECISIONS
from ringtree.plan.presets import PRESETS, get_model
from ringtree.plan.record import DP_OVERLAP, Training
from ringtree.plan.search import OBJECTIVES, Space, search
from ringtree.plan.strategy import candidate_strategies, parse_strategy
from ringtree.units import dtype_bytes, format_percent, parse_size

#: --top: the search plans this many in full (verdicts included).
MAX_TOP = 1000


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``plan`` command."""
    p = sub.add_parser(
        "plan",
        help="plan a training run: step time, MFU, memory, collectives, dollars; --search",
        description="One training step of a strategy (DDP, ZeRO-1/2/3, tensor, pipeline, "
        "context and expert parallel, combined): its compute (FLOPs and a roofline on the "
        "cluster's GPUs), every collective (the NCCL model on a cluster as built, or "
        "alpha-beta on two links), what compute hides of them, the pipeline bubble, memory "
        "per GPU, MFU, dollars and a verdict. --compare ranks strategies; --search tries "
        "every configuration.",
    )
    _model_flags(p.add_argument_group("model"))
    _placement_flags(p.add_argument_group("cluster (flags override --cluster FILE.toml)"))
    _training_flags(p.add_argument_group("training step"))
    _output_flags(p.add_argument_group("output"))
    p.set_defaults(func=run)


def _model_flags(m: argparse._ArgumentGroup) -> None:
    m.add_argument("--model", help=f"a preset: {', '.join(PRESETS)}")
    m.add_argument("--params", type=A.params, help="parameter count (7e9, 7B, 500k); overrides")
    for flag, what in (("--layers", "transformer layers"), ("--hidden", "hidden size"),
                       ("--heads", "attention heads"), ("--kv-heads", "key/value heads (GQA)"),
                       ("--ffn", "MLP inner size"), ("--vocab", "vocabulary"),
                       ("--seq-len", "sequence length")):
        m.add_argument(flag, type=A.count, help=f"{what} (overrides the preset)")
    m.add_argument("--mlp", choices=MLPS, help="MLP kind: swiglu (3 matrices, Llama) or gelu "
                   "(2, GPT; the default of a custom shape, whose --ffn defaults to 4h, or "
                   "8h/3 rounded up to 256 with swiglu)")
    m.add_argument("--tied", action="store_true", help="input and output embeddings shared")
    for flag, what in (("--experts", "routed experts per MoE layer"),
                       ("--top-k", "experts each token is routed to"),
                       ("--expert-ffn", "each expert's MLP inner size")):
        m.add_argument(flag, type=A.count, help=f"mixture of experts: {what}")
    for flag, what in (("--shared-experts", "experts every token uses (DeepSeek-V3: 1)"),
                       ("--dense-layers", "first layers with a dense MLP (DeepSeek-V3: 3)")):
        m.add_argument(flag, type=A.non_negative_int, help=f"mixture of experts: {what}")
    m.add_argument("--dtype", default="fp16", help="params/grads/activations dtype (fp16)")


def _placement_flags(c: argparse._ArgumentGroup) -> None:
    c.add_argument(
        "--cluster", metavar="PRESET|FILE",
        help="a cluster as built ('ringtree clusters': dgx-h100, ...; or a TOML file with gpu= "
        "or preset=): NCCL model, compute model; or a TOML file of links ([cluster] intra=...)",
    )
    c.add_argument("--gpus", type=A.count, help="number of GPUs")
    c.add_argument("--nodes", type=A.count, help="number of nodes (or --gpus)")
    c.add_argument("--gpus-per-node", type=A.count, help="GPUs per node (default: 8)")
    c.add_argument("--intra", help=f"link inside a node (default {DEFAULT_INTRA}; or custom:...)")
    c.add_argument("--inter", help=f"link between nodes (default {DEFAULT_INTER})")
    c.add_argument("--profile", metavar="FILE.toml",
                   help="a profile from 'ringtree calibrate' as both links")
    c.add_argument("--price-gpu-hour", type=A.non_negative_number, help="dollars per GPU-hour")
    c.add_argument("--gpu-memory", type=A.size, help="memory of one GPU (default: the GPU's)")


#: Overlap options (Training fields of the same names).
_OVERLAPS = (
    ("--tp-comm-overlap", "the forward's TP collectives overlap the GEMMs (Megatron "
     "--tp-comm-overlap, Transformer Engine userbuffers; torchtitan async TP)"),
    ("--pp-overlap", "interleaved pipeline sends overlap the next chunk's compute "
     "(Megatron-Core --overlap-p2p-communication; no effect with v = 1)"),
    ("--ep-overlap", "expert all-to-alls overlap the adjacent micro-batch (Megatron-Core "
     "--overlap-moe-expert-parallel-comm, DeepSeek-V3's DualPipe)"),
)


def _training_flags(t: argparse._ArgumentGroup) -> None:
    t.add_argument(
        "--strategy",
        help="ddp, zero1, zero2, zero3 (fsdp), hsdp,shard=N, or degrees "
        "dp=N,tp=N,pp=N,v=N,cp=N,ep=N[,etp=1][,sp] with a flavour (zero1,tp=8,pp=2,sp) "
        "(default ddp)",
    )
    t.add_argument("--compare", nargs="*", metavar="S",
                   help="rank these strategies (none given: every flavour x tp x pp)")
    t.add_argument("--search", action="store_true", help="try every configuration that fits")
    t.add_argument("--top", type=A.int_up_to(MAX_TOP, "each is planned in full"), default=5,
                   help="--search: how many to show (5)")
    t.add_argument("--objective", choices=OBJECTIVES, default="time",
                   help="--search: step time, or dollars (GPU-seconds) per token")
    t.add_argument("--sharding", type=A.flavors, metavar="F,...",
                   help="--search: only these data-parallel flavours, e.g. zero2,zero3 for what "
                   "your framework runs, hsdp too (default: ddp, zero1, zero2, zero3; and hsdp "
                   "under --framework fsdp)")
    for key, what in (("tp", "tensor"), ("pp", "pipeline"), ("cp", "context"),
                      ("ep", "expert"), ("v", "virtual pipeline")):
        t.add_argument(f"--max-{key}", type=A.count, metavar="N",
                       help=f"--search: {what}-parallel degrees up to N (--max-tp 1: no TP)")
    t.add_argument("--precision", choices=PRECISIONS, default=None,
                   help="the linear layers' GEMMs: bf16 (default), fp16, or fp8 as Transformer "
                   "Engine runs them (BF16 weights and attention, fp32 master weights)")
    t.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True,
                   help="fused kernels as Megatron/Transformer Engine or torch.compile run them "
                   "(default); --no-compile: eager PyTorch, its compute 1.157x slower "
                   "(torchtitan's measured pair)")
    t.add_argument("--recompute", choices=(*RECOMPUTE, OP, MICROBATCH),
                   help="activation recomputation (none; op: torchtitan's op-level selective; "
                   "selective+microbatch: selective for only as many in-flight micro-batches "
                   "as memory needs, Korthikanti et al. 2022 App. C)")
    t.add_argument("--recompute-every", type=A.count, metavar="K",
                   help="with --recompute full: checkpoint every K-th layer only (torchtitan's "
                   "selective_ac_option K; default 1: every layer)")
    t.add_argument("--attention", choices=ATTENTION, default="flash",
                   help="flash (FlashAttention-2+), triton (Triton FlashAttention of 2022: "
                   "llm-foundry MPT) or unfused (Megatron before 2022)")
    t.add_argument("--dp-overlap", choices=DP_OVERLAP, default="backward",
                   help="what DP collectives hide behind (backward)")
    t.add_argument("--framework", choices=FRAMEWORKS, default="megatron",
                   help="megatron (Megatron-LM/NeMo), deepspeed, or fsdp (PyTorch FSDP2 as "
                   "torchtitan runs it): memory per parameter, ZeRO-2/3's schedule (megatron)")
    for flag, what in _OVERLAPS:
        t.add_argument(flag, action="store_true", help=what)
    t.add_argument("--reduce-dtype", metavar="DTYPE",
                   help="dtype of the gradients' reduction (default: fp32 under fsdp, "
                   "torchtitan's; else --dtype)")
    t.add_argument(
        "--compute",
        type=A.positive_duration,
        help="one GPU's forward+backward time per step (200ms), instead of the model",
    )
    t.add_argument("--tflops", type=A.positive_number, help="peak dense TFLOP/s of one GPU")
    t.add_argument("--mfu", type=A.positive_number, help="fraction of --tflops reached, e.g. 0.4")
    t.add_argument(
        "--efficiency",
        type=A.positive_number,
        help="the GEMMs' fraction of peak (default: the GPU generation's)",
    )
    t.add_argument(
        "--calibrate-step",
        type=A.positive_duration,
        metavar="TIME",
        help="fit --efficiency to this measured step time of --strategy",
    )
    t.add_argument("--micro-batch", type=A.count, help="sequences per micro-batch (1)")
    t.add_argument(
        "--global-batch",
        type=A.count,
        help="sequences per step, whole cluster (default: one micro-batch per GPU)",
    )
    t.add_argument("--bucket", help="gradient bucket (default: DDP's 25MiB, DeepSpeed's 5e8 "
                   "elements for zero1/2; 0: none)")
    t.add_argument("--steps-per-second", type=A.positive_number,
                   help="for $/day (default: 1/step time)")


def _output_flags(o: argparse._ArgumentGroup) -> None:
    o.add_argument("--json", action="store_true", help='print {"plans": [...]}')
    o.add_argument(
        "--chrome",
        type=A.output_file(".json"),
        metavar="FILE.json",
        help="the step as a Chrome/Perfetto trace (one track per stage)",
    )
    o.add_argument(
        "--svg", type=A.output_file(".svg"), metavar="FILE.svg", help="the step as an SVG timeline"
    )


def _model(args: argparse.Namespace) -> Model:
    shape = {k: getattr(args, k) for k in SHAPE_FLAGS}
    if args.model is None and args.params is None and args.layers is None:
        raise RingtreeError(f"give --model ({', '.join(PRESETS)}), --params, or the shape "
                            "(--layers --hidden --heads --vocab --seq-len [--ffn])")
    base = get_model(args.model) if args.model else Model("custom", args.params or 1)
    return custom_shape(base, args.params, args.mlp, args.tied, **shape)


def _placement(args: argparse.Namespace) -> Placement:
    return place(args.cluster, gpus=args.gpus, nodes=args.nodes,
                 gpus_per_node=args.gpus_per_node, intra=args.intra, inter=args.inter,
                 profile=args.profile, price_gpu_hour=args.price_gpu_hour,
                 gpu_memory_bytes=args.gpu_memory)


def _training(args: argparse.Namespace, placement: Placement) -> Training:
    if args.compute is not None and (args.tflops is not None or args.mfu is not None):
        raise RingtreeError("give either --compute or --tflops with --mfu, not both")
    if (args.tflops is None) != (args.mfu is None):
        raise RingtreeError("--tflops and --mfu go together (compute = 6 Psi tokens / flops)")
    if args.recompute_every is not None and args.recompute != "full":
        raise RingtreeError("--recompute-every K checkpoints every K-th layer: give --recompute "
                            "full with it")
    if args.mfu is not None and args.mfu > 1:
        raise RingtreeError(f"--mfu is a fraction of the peak, 0 < mfu <= 1, got {args.mfu}")
    eff: Efficiency | None = None
    if args.efficiency is not None:
        if args.efficiency > 1:
            raise RingtreeError(f"--efficiency is a fraction of peak, at most 1, got "
                                f"{args.efficiency}")
        if placement.cluster is None:
            raise RingtreeError("--efficiency sets the compute model of a cluster as built "
                                "(--cluster PRESET)")
        eff = replace(default_efficiency(placement.cluster.gpu), gemm=args.efficiency,
                      source="--efficiency")
    bucket = None if args.bucket is None else parse_size(args.bucket)
    precision, itemsize = _precision(args)
    return Training(
        itemsize=itemsize, precision=precision, compile=args.compile,
        micro_batch=args.micro_batch or 1,
        global_batch=args.global_batch, compute_s=args.compute, tflops=args.tflops,
        mfu=args.mfu, bucket_bytes=bucket, steps_per_second=args.steps_per_second,
        recompute=args.recompute or "none", attention=args.attention,
        dp_overlap=args.dp_overlap, efficiency=eff, framework=args.framework,
        reduce_itemsize=None if args.reduce_dtype is None else dtype_bytes(args.reduce_dtype),
        tp_comm_overlap=args.tp_comm_overlap, pp_overlap=args.pp_overlap,
        recompute_every=args.recompute_every or 1, ep_overlap=args.ep_overlap,
    )


def _precision(args: argparse.Namespace) -> tuple[str, int]:
    """(precision, bytes per 16-bit element): ``--dtype fp8`` is ``--precision fp8`` (FP8
    training keeps 16-bit weights and activations)."""
    itemsize = dtype_bytes(args.dtype)
    if itemsize == 1:
        if args.precision not in (None, FP8):
            raise RingtreeError(f"--dtype {args.dtype} and --precision {args.precision} "
                                "disagree: give --precision fp8")
        return FP8, 2
    return args.precision or "bf16", itemsize


def run(args: argparse.Namespace) -> int:
    """Plan one strategy, compare several, or search them all; print tables or JSON."""
    _check_modes(args)
    model, placement = _model(args), _placement(args)
    training = _training(args, placement)
    if args.calibrate_step is not None:
        training = _calibrated(args, model, placement, training)
    if args.search:
        found = search(model, placement, training, args.top, args.objective,
                       fixed_micro_batch=args.micro_batch is not None,
                       fixed_recompute=args.recompute is not None,
                       flavors=args.sharding, space=_space(args))
        _pictures(args, found.plans[0] if found.plans else None)
        if args.json:
            print_json(found.to_json())
        else:
            render_search(found)
        return 0
    if args.compare is not None:
        if args.compare:
            plans = compare(model, placement, [parse_strategy(s) for s in args.compare],
                            training)
        else:
            grid = candidate_strategies(placement.gpus, placement.gpus_per_node, model.layers)
            plans = compare(model, placement, grid, training, skip_invalid=True)
    else:
        plans = [plan(model, placement, parse_strategy(args.strategy or "ddp"), training)]
    _pictures(args, plans[0] if plans else None)
    if args.json:
        print_json({"plans": [p.to_json() for p in plans]})
    elif args.compare is not None:
        render_compare(plans)
    else:
        render_plan(plans[0])
    return 0


def _space(args: argparse.Namespace) -> Space:
    return Space(args.max_tp, args.max_pp, args.max_cp, args.max_ep, args.max_v)


def _check_modes(args: argparse.Namespace) -> None:
    """One of --strategy, --compare, --search (--strategy with --search only for
    --calibrate-step)."""
    if args.search and args.compare is not None:
        raise RingtreeError("give --search or --compare, not both")
    limited = [k for k in ("tp", "pp", "cp", "ep", "v") if getattr(args, f"max_{k}") is not None]
    if limited and not args.search:
        raise RingtreeError(f"--max-{limited[0]} limits --search: give --search too (or "
                            "--strategy with the degrees you want)")
    if args.sharding is not None and not args.search:
        raise RingtreeError("--sharding narrows --search: give --search too (or --strategy "
                            "with the flavour you want)")
    if args.compare is not None and args.strategy is not None:
        raise RingtreeError("give --strategy or --compare, not both")
    if args.search and args.strategy is not None and args.calibrate_step is None:
        raise RingtreeError("give --strategy or --search, not both (--strategy with --search "
                            "only names the measured strategy of --calibrate-step)")
    if args.calibrate_step is not None and args.strategy is None:
        raise RingtreeError("--calibrate-step needs the --strategy that was measured")


def _calibrated(args: argparse.Namespace, model: Model, placement: Placement,
                training: Training) -> Training:
    """``training`` with the efficiency fitted to the measured step (said on stderr)."""
    eff = fit_efficiency(model, placement, parse_strategy(args.strategy), training,
                         args.calibrate_step)
    assert placement.cluster is not None  # fit_efficiency refuses a placement on links
    fp8 = training.precision == FP8
    default = default_efficiency(placement.cluster.gpu)
    got, was = (eff.fp8_gemm, default.fp8_gemm) if fp8 else (eff.gemm, default.gemm)
    stderr_console().print(
        f"calibrated: {'FP8 ' if fp8 else ''}GEMMs reach {format_percent(got)} of peak "
        f"({eff.source}); the default is {format_percent(was)}"
    )
    return replace(training, efficiency=eff)


def _pictures(args: argparse.Namespace, best: Any) -> None:
    if not (args.chrome or args.svg):
        return
    if best is None:
        raise RingtreeError("no plan to draw: no configuration fits")
    from ringtree.plan.picture import write_chrome, write_svg

    if args.chrome:
        write_chrome(best, args.chrome)
    if args.svg:
        write_svg(best, args.svg)
