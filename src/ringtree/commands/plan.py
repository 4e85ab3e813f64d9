"""``ringtree plan``: will this training strategy be communication-bound, and what will it cost?"""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

from ringtree.commands import args as A
from ringtree.cost.links import parse_link
from ringtree.errors import RingtreeError
from ringtree.output import print_json, stdout_console
from ringtree.plan.cluster import (
    DEFAULT_GPU_MEMORY_BYTES,
    Cluster,
    read_cluster_toml,
    shape_gpus,
)
from ringtree.plan.model import PRESETS, Model, get_model
from ringtree.plan.planner import Plan, Training, compare, plan
from ringtree.plan.strategy import candidate_strategies, parse_strategy
from ringtree.units import (
    dtype_bytes,
    format_bytes,
    format_params,
    format_percent,
    format_time,
    format_usd,
    parse_size,
)

DEFAULT_INTRA, DEFAULT_INTER = "nvlink4", "ib-ndr"
VERDICTS_SHOWN = 10  # --compare prints the verdicts of the best ones


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``plan`` command."""
    p = sub.add_parser(
        "plan",
        help="plan a training strategy: its collectives, exposed time, overhead, dollars",
        description="Every collective of one training step of a strategy (DDP, ZeRO-1/2/3, "
        "tensor and pipeline parallel, combined), timed on a cluster with the cost model's "
        "closed forms; what backward/forward compute hides of it; overhead, dollars and a "
        "verdict. --compare ranks several strategies.",
    )
    m = p.add_argument_group("model")
    m.add_argument("--model", help=f"a preset: {', '.join(PRESETS)} (Llama-2 shapes)")
    m.add_argument("--params", type=A.params, help="parameter count (7e9, 7B, 500k); overrides")
    m.add_argument("--layers", type=A.count, help="transformer layers (overrides)")
    m.add_argument("--hidden", type=A.count, help="hidden size (overrides)")
    m.add_argument("--seq-len", type=A.count, help="sequence length (overrides)")
    m.add_argument("--dtype", default="fp16", help="params/grads/activations dtype (fp16)")
    c = p.add_argument_group("cluster (flags override --cluster FILE.toml)")
    c.add_argument("--cluster", metavar="FILE", help="a TOML file with a [cluster] table")
    c.add_argument("--gpus", type=A.count, help="number of GPUs")
    c.add_argument("--nodes", type=A.count, help="number of nodes (or --gpus)")
    c.add_argument(
        "--gpus-per-node",
        type=A.count,
        help="GPUs per node (default: 8, or --gpus if fewer)",
    )
    c.add_argument("--intra", help=f"link inside a node (default {DEFAULT_INTRA}; or custom:...)")
    c.add_argument("--inter", help=f"link between nodes (default {DEFAULT_INTER})")
    c.add_argument(
        "--profile",
        metavar="FILE.toml",
        help="a profile from 'ringtree calibrate' as both links (--intra/--inter override)",
    )
    c.add_argument("--price-gpu-hour", type=A.non_negative_number, help="dollars per GPU-hour")
    c.add_argument("--gpu-memory", type=A.size, help="memory of one GPU (default 80GB)")
    t = p.add_argument_group("training step")
    t.add_argument(
        "--strategy",
        help="ddp, zero1, zero2, zero3 (fsdp), tp=N, pp=N, or combined: dp=N,tp=N,pp=N[,sp] "
        "with a flavour (zero1,tp=8) (default ddp)",
    )
    t.add_argument(
        "--compare",
        nargs="*",
        metavar="S",
        help="rank these strategies side by side (none given: every flavour x tp x pp)",
    )
    t.add_argument(
        "--compute",
        type=A.positive_duration,
        help="one GPU's forward+backward time per step (200ms); same for every strategy",
    )
    t.add_argument("--tflops", type=A.positive_number, help="peak dense TFLOP/s of one GPU")
    t.add_argument("--mfu", type=A.positive_number, help="fraction of --tflops reached, e.g. 0.4")
    t.add_argument("--micro-batch", type=A.count, default=1, help="sequences per micro-batch (1)")
    t.add_argument(
        "--global-batch",
        type=A.count,
        help="sequences per step, whole cluster (default: one micro-batch per GPU)",
    )
    t.add_argument(
        "--bucket",
        help="gradient bucket (default: DDP's 25MiB, DeepSpeed's 5e8 elements for zero1/2; "
        "0: none)",
    )
    t.add_argument(
        "--steps-per-second", type=A.positive_number, help="for $/day (default: 1/step time)"
    )
    p.add_argument("--json", action="store_true", help='print {"plans": [...]}')
    p.set_defaults(func=run)


def _model(args: argparse.Namespace) -> Model:
    if args.model is None and args.params is None:
        raise RingtreeError(f"give --model ({', '.join(PRESETS)}) or --params")
    base = get_model(args.model) if args.model else Model("custom", args.params)
    return base.with_overrides(args.params, args.layers, args.hidden, args.seq_len)


def _cluster(args: argparse.Namespace) -> Cluster:
    values: dict[str, Any] = read_cluster_toml(args.cluster) if args.cluster else {}
    flags = {
        "gpus": args.gpus, "nodes": args.nodes, "gpus_per_node": args.gpus_per_node,
        "intra": args.intra or args.profile, "inter": args.inter or args.profile,
        "price_gpu_hour": args.price_gpu_hour,
        "gpu_memory": args.gpu_memory,
    }  # fmt: skip
    values.update({k: v for k, v in flags.items() if v is not None})
    if args.gpus is not None or args.nodes is not None:  # a size on the command line wins
        for key in ("gpus", "nodes"):
            values[key] = flags[key]
    nodes, gpn = shape_gpus(values.get("gpus"), values.get("nodes"), values.get("gpus_per_node"))
    price = values.get("price_gpu_hour")
    if price is not None and (isinstance(price, bool) or not isinstance(price, int | float)):
        raise RingtreeError(f"price_gpu_hour must be a number of dollars, got {price!r}")
    if price is not None and price < 0:
        raise RingtreeError(f"price per GPU-hour must be >= 0, got {price}")
    if price is not None and not price <= A.MAX_NUMBER:  # also inf and nan
        raise RingtreeError(f"price per GPU-hour must be at most {A.MAX_NUMBER:g}, got {price}")
    memory = values.get("gpu_memory", DEFAULT_GPU_MEMORY_BYTES)
    if isinstance(memory, bool) or not isinstance(memory, int | str):
        raise RingtreeError(f'gpu_memory must be a size like "80GB" or bytes, got {memory!r}')
    return Cluster(
        nodes,
        gpn,
        parse_link(str(values.get("intra", DEFAULT_INTRA))),
        parse_link(str(values.get("inter", DEFAULT_INTER))),
        price,
        parse_size(memory),
    )


def _training(args: argparse.Namespace) -> Training:
    if args.compute is not None and (args.tflops is not None or args.mfu is not None):
        raise RingtreeError("give either --compute or --tflops with --mfu, not both")
    if (args.tflops is None) != (args.mfu is None):
        raise RingtreeError("--tflops and --mfu go together (compute = 6 Psi tokens / flops)")
    if args.mfu is not None and args.mfu > 1:
        raise RingtreeError(f"--mfu is a fraction of the peak, 0 < mfu <= 1, got {args.mfu}")
    bucket = None if args.bucket is None else parse_size(args.bucket)
    return Training(
        itemsize=dtype_bytes(args.dtype),
        micro_batch=args.micro_batch,
        global_batch=args.global_batch,
        compute_s=args.compute,
        tflops=args.tflops,
        mfu=args.mfu,
        bucket_bytes=bucket,
        steps_per_second=args.steps_per_second,
    )


def run(args: argparse.Namespace) -> int:
    """Plan one strategy, or compare several; print tables or JSON."""
    model, cluster, training = _model(args), _cluster(args), _training(args)
    if args.compare is not None:
        if args.strategy is not None:
            raise RingtreeError("give --strategy or --compare, not both")
        if args.compare:
            plans = compare(model, cluster, [parse_strategy(s) for s in args.compare], training)
        else:
            grid = candidate_strategies(cluster.gpus, cluster.gpus_per_node, model.layers)
            plans = compare(model, cluster, grid, training, skip_invalid=True)
    else:
        plans = [plan(model, cluster, parse_strategy(args.strategy or "ddp"), training)]
    if args.json:
        print_json({"plans": [p.to_json() for p in plans]})
    elif args.compare is not None:
        _render_compare(plans)
    else:
        _render_plan(plans[0])
    return 0


def _t(seconds: float | None) -> str:
    return "-" if seconds is None else format_time(seconds, exact=False)


def _usd(usd: float | None) -> str:
    return "-" if usd is None else format_usd(usd, exact=False)


def _pct(fraction: float | None) -> str:
    return "-" if fraction is None else format_percent(fraction, exact=False)


def _header(p: Plan) -> str:
    c, mdl = p.cluster, p.model
    lay = p.layout
    where = (
        f"{c.gpus} GPUs = {c.nodes} node{'s' * (c.nodes > 1)} x {c.gpus_per_node}, "
        f"{c.intra.name} inside" + (f", {c.inter.name} between" if c.nodes > 1 else "")
    )
    return (
        f"{mdl.name} ({format_params(mdl.params)} params) on {where}; {p.strategy}: "
        f"dp={lay.dp} x tp={lay.tp} x pp={lay.pp}, {p.micro_batches} micro-batch"
        f"{'es' * (p.micro_batches > 1)} per step"
    )


def _render_plan(p: Plan) -> None:
    console = stdout_console()
    console.print(_header(p))
    table = Table()
    for col in ("collective", "group", "calls", "algorithm", "bytes/GPU", "time", "exposed"):
        table.add_column(col, justify="left" if col in ("collective", "algorithm") else "right")
    for c in p.collectives:
        group = f"{c.op.group} {c.shape.size}" + (
            f" ({c.shape.nodes} nodes)" if c.shape.nodes > 1 else ""
        )
        table.add_row(
            c.op.op, group, str(c.op.calls), c.call.algorithm,
            format_bytes(c.bytes_per_gpu), _t(c.time_s), _t(c.exposed_s),
        )  # fmt: skip
    table.add_row(
        "total", "", str(sum(c.op.calls for c in p.collectives)), "",
        format_bytes(p.bytes_per_gpu), _t(p.comm_time_s), _t(p.exposed_s), style="bold",
    )  # fmt: skip
    console.print(table)
    for c in p.collectives:
        if c.call.hierarchical:
            console.print(
                f"{c.op.op}: hierarchical ({c.shape.nodes} nodes x {c.shape.per_node}), "
                "cheaper than any flat algorithm here"
            )
    fits = "fits" if p.fits_memory else "does NOT fit"
    console.print(
        f"compute {_t(p.compute_s)}, bubble {_t(p.bubble_s)}, step {_t(p.step_time_s)}; "
        f"overhead {_pct(p.overhead)}; model states {format_bytes(p.memory_bytes_per_gpu)} "
        f"per GPU ({fits} in {format_bytes(p.cluster.gpu_memory_bytes)})"
    )
    if p.cluster.price_gpu_hour is not None:
        console.print(
            f"exposed communication costs {_usd(p.usd_per_step)} per step, "
            f"{_usd(p.usd_per_day)} per day (cluster: {_usd(p.cluster.usd_per_second * 86400)}"  # type: ignore[operator]
            " per day)"
        )
    console.print(f"verdict: {p.verdict}")


def _render_compare(plans: list[Plan]) -> None:
    console = stdout_console()
    if not plans:
        console.print("no strategy applies")
        return
    console.print(_header(plans[0]).split(";")[0])
    table = Table()
    cols = ("#", "strategy", "dp x tp x pp", "m", "bytes/GPU", "comm", "exposed", "bubble")
    cols += ("step", "overhead", "memory/GPU", "$/step", "$/day")
    for col in cols:
        table.add_column(col, justify="left" if col == "strategy" else "right")
    for i, p in enumerate(plans, start=1):
        lay = p.layout
        mem = format_bytes(p.memory_bytes_per_gpu) + ("" if p.fits_memory else " (too big)")
        table.add_row(
            str(i), p.strategy, f"{lay.dp} x {lay.tp} x {lay.pp}", str(p.micro_batches),
            format_bytes(p.bytes_per_gpu), _t(p.comm_time_s), _t(p.exposed_s), _t(p.bubble_s),
            _t(p.step_time_s), _pct(p.overhead), mem, _usd(p.usd_per_step), _usd(p.usd_per_day),
        )  # fmt: skip
    console.print(table)
    shown = plans if len(plans) <= VERDICTS_SHOWN else plans[:VERDICTS_SHOWN]
    for i, p in enumerate(shown, start=1):
        console.print(f"{i}. {p.strategy}: {p.verdict}")
    if len(shown) < len(plans):
        console.print(f"(verdicts of the first {len(shown)}; --json has every one)")
