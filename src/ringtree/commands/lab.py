"""``ringtree lab ddp``: train the grammar tutor with DDP on local gloo processes, first with
PyTorch's all-reduce and then with ringtree's, and show each step's communication."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.table import Table

from ringtree.algorithms import build
from ringtree.collectives import Collective
from ringtree.commands import args as A
from ringtree.commands import local
from ringtree.cost.money import Price
from ringtree.cost.select import AUTO, short_time
from ringtree.errors import RingtreeError
from ringtree.output import print_json, stderr_console, stdout_console
from ringtree.units import format_bytes, format_usd

MAX_RANKS = 64
#: Training steps per run at most: the tutor's loss is flat after a few hundred; more only
#: run longer.
MAX_STEPS = 10_000
#: Seeds are 32-bit (numpy's generators take no more).
MAX_SEED = 2**32 - 1
NEEDS_NODES = {"hierarchical"}  # all-reduce algorithms that need a node size


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``lab`` command and its ``ddp`` lab."""
    p = sub.add_parser("lab", help="see collectives happen inside real training")
    labs = p.add_subparsers(dest="lab", metavar="LAB", parser_class=type(p))
    labs.required = True
    d = labs.add_parser(
        "ddp",
        help="train a ~500k-parameter model with DDP on local gloo processes, PyTorch's "
        "all-reduce vs ringtree's",
        description="Train the grammar tutor (a ~480k-parameter transformer over a synthetic "
        "grammar, fp32) with DistributedDataParallel on N gloo processes on this machine "
        "(127.0.0.1): first with PyTorch's own all-reduce, then with ringtree's hook, from "
        "the same seed. Per step: loss, buckets, bytes all-reduced and sent per worker, "
        "measured communication time against the cost model's prediction (loopback link), "
        "dollars with a price. At the end: whether the ranks agree and how far the runs differ.",
    )
    d.add_argument(
        "-n", "--ranks", type=A.positive_int, default=2, metavar="N",
        help="number of processes (default 2)",
    )
    local.add_force(d, MAX_RANKS)
    d.add_argument(
        "--steps",
        type=A.int_up_to(MAX_STEPS, "more only run longer"),
        default=50,
        help="training steps per run (default 50)",
    )
    d.add_argument(
        "--algorithm",
        default=AUTO,
        help="ringtree's all-reduce: auto (default: the engine's choice per bucket size) or "
        "ring, tree, dbtree, recursive, rabenseifner, pairwise",
    )
    d.add_argument(
        "--trace",
        metavar="FILE.json",
        type=A.output_file(),
        help="write the real run as a Chrome trace (ui.perfetto.dev, chrome://tracing): a "
        "track per rank with steps, buckets and ringtree's sends/receives/reductions",
    )
    d.add_argument(
        "--torch-profile",
        metavar="DIR",
        type=_profile_dir,
        help="write torch.profiler's Kineto traces of the run with PyTorch's all-reduce to DIR, "
        "one file per rank (rank0.json ...), for 'ringtree profile DIR' and ui.perfetto.dev",
    )
    d.add_argument(
        "--price-cluster-hour",
        type=A.non_negative_number,
        metavar="USD",
        help="what the whole cluster costs per hour, for dollars per step (the seed's lab: 0.70)",
    )
    d.add_argument(
        "--seed",
        type=A.int_up_to(MAX_SEED, "seeds are 32-bit", low=0),
        default=0,
        help="weights and data (default 0)",
    )
    d.add_argument(
        "--bucket-cap-mb",
        type=A.positive_number,
        default=25.0,
        metavar="MB",
        help="DDP's bucket size cap in MiB (default 25, DDP's; 0.5 splits the gradients into "
        "several buckets)",
    )
    d.add_argument("--json", action="store_true", help="print steps and summary as JSON")
    d.set_defaults(func=run)


def _profile_dir(text: str) -> str:
    """A folder the lab can write its traces to, made if missing (checked before any work)."""
    folder = Path(text)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        A.check_writable(str(folder / "rank0.json"))
    except OSError as e:
        raise argparse.ArgumentTypeError(f"cannot write to folder {text!r}: {e.strerror}") from None
    except RingtreeError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def _check(args: argparse.Namespace) -> None:
    """Reject what would only fail inside the processes, before starting them."""
    if args.ranks > MAX_RANKS:
        raise RingtreeError(f"at most {MAX_RANKS} local processes, got -n {args.ranks}")
    name = args.algorithm.strip().lower()
    if name in NEEDS_NODES:
        raise RingtreeError(
            f"--algorithm {name} needs ranks per node, which local processes do not have: "
            "use auto, ring, tree, dbtree, recursive, rabenseifner or pairwise"
        )
    if name != AUTO:
        build(Collective.ALL_REDUCE, name, args.ranks)  # names the accepted ones
    local.require_torch("lab ddp")
    local.check_ranks(args.ranks, args.force)


def run(args: argparse.Namespace) -> int:
    """Train both runs, print the steps and the summary, write the trace."""
    _check(args)  # before the imports: ringtree.lab.ddp needs PyTorch
    from ringtree.lab.ddp import LabConfig, run_lab
    from ringtree.lab.report import step_rows, summary
    from ringtree.procs.run import RunFailed

    price = Price.cluster(args.price_cluster_hour) if args.price_cluster_hour is not None else None
    config = LabConfig(
        ranks=args.ranks,
        steps=args.steps,
        algorithm=args.algorithm.strip().lower(),
        seed=args.seed,
        trace=bool(args.trace),
        bucket_cap_mb=args.bucket_cap_mb,
        torch_profile=str(Path(args.torch_profile).resolve()) if args.torch_profile else None,
    )
    messages = stderr_console()
    messages.print(
        f"training the grammar tutor with DDP on {config.ranks} gloo processes: {config.steps} "
        f"steps with PyTorch's all-reduce, then {config.steps} with ringtree's "
        f"({config.algorithm}) ...",
        soft_wrap=True,
    )
    try:
        result = run_lab(config)
    except RunFailed as e:
        messages.print(f"ringtree: error: {e}", soft_wrap=True, markup=False, highlight=False)
        return 1
    rows, summ = step_rows(result, price), summary(result, price)
    if args.trace:
        from ringtree.lab.chrome import lab_chrome_trace
        from ringtree.trace.chrome import write_chrome_trace

        trace = lab_chrome_trace(result)
        write_chrome_trace(args.trace, trace)
        n_slices = sum(1 for e in trace["traceEvents"] if e["ph"] == "X")
        messages.print(f"wrote {args.trace}: {n_slices} slices on {config.ranks} ranks",
                       soft_wrap=True)
    if args.torch_profile:
        messages.print(f"wrote {config.ranks} torch.profiler traces to {args.torch_profile} "
                       f"(read them with 'ringtree profile {args.torch_profile}')", soft_wrap=True)
    if args.json:
        print_json({"config": _config_record(config), "steps": rows, "summary": summ,
                    "buckets": {run: [b for rr in ranks for b in rr.buckets]
                                for run, ranks in result.runs.items()}})
        return 0
    console = stdout_console()
    console.print(_steps_table(rows, price is not None))
    for line in _summary_lines(summ):
        console.print(line, soft_wrap=True, highlight=False, markup=False)
    return 0


def _config_record(config: Any) -> dict[str, Any]:
    return {
        "ranks": config.ranks,
        "steps": config.steps,
        "algorithm": config.algorithm,
        "seed": config.seed,
        "bucket_cap_mb": config.bucket_cap_mb,
        "link": "loopback",
    }


def _steps_table(rows: list[dict[str, Any]], money: bool) -> Table:
    table = Table(
        title="DDP on gloo, step by step (communication: measured vs predicted on loopback)",
        title_justify="left",
    )
    both_predictions = any(r["torch"]["predicted_s"] != r["ringtree"]["predicted_s"] for r in rows)
    for name in ("step", "buckets", "all-reduced", "sent/worker", "loss torch", "loss ringtree",
                 "comm torch", "comm ringtree"):
        table.add_column(name, justify="right")
    if both_predictions:
        table.add_column("pred. torch", justify="right")
    table.add_column("predicted" if not both_predictions else "pred. ringtree", justify="right")
    if money:
        table.add_column("$ comm", justify="right")
    for r in rows:
        t, g = r["torch"], r["ringtree"]
        sent = g["sent_per_worker"]
        cells = [
            str(r["step"]),
            str(g["buckets"]),
            format_bytes(g["allreduced_bytes"]),
            format_bytes(sent) if sent is not None else "-",
            f"{t['loss']:.3f}",
            f"{g['loss']:.3f}",
            short_time(t["measured_s"]),
            short_time(g["measured_s"]),
        ]
        if both_predictions:
            cells.append(short_time(t["predicted_s"]))
        cells.append(short_time(g["predicted_s"]))
        if money:
            cells.append(format_usd(g["usd"], exact=False))
        table.add_row(*cells)
    return table


def _summary_lines(s: dict[str, Any]) -> list[str]:
    t, g = s["runs"]["torch"], s["runs"]["ringtree"]
    seed = s["seed"]
    sent = g["sent_per_worker_per_step"]
    lines = [
        f"grammar tutor: {s['parameters']:,} parameters, trained in fp32: "
        f"{format_bytes(s['gradient_bytes'])} of gradients all-reduced per step "
        f"(the seed's tutor: {seed['parameters'] // 1000}k in fp16 = "
        f"{format_bytes(seed['gradient_bytes'])}, ~2 x that = "
        f"{format_bytes(seed['bytes_per_worker'])} per worker)",
        f"sent per worker per step: textbook ~2S = {format_bytes(s['textbook_bytes_per_worker'])}"
        f", ring exactly 2(N-1)/N x S = {format_bytes(s['ring_bytes_per_worker'])} at "
        f"N={s['ranks']}, counted by ringtree's transport: "
        + (format_bytes(sent) if sent is not None else "-"),
        f"loss (mean over ranks): {t['first_loss']:.3f} -> {t['final_loss']:.3f} with PyTorch, "
        f"{g['first_loss']:.3f} -> {g['final_loss']:.3f} with ringtree "
        f"({', '.join(g['algorithms'])})",
        f"communication over {s['steps']} steps: PyTorch {short_time(t['comm_measured_s'])} "
        f"measured ({short_time(t['comm_predicted_s'])} predicted), ringtree "
        f"{short_time(g['comm_measured_s'])} measured ({short_time(g['comm_predicted_s'])} "
        "predicted)",
        f"final parameters identical on every rank: PyTorch {_yes(t)}, ringtree {_yes(g)}",
        "largest difference between the two runs' final parameters: "
        f"{s['max_difference_between_runs']:.3g}"
        + (" (bitwise equal)" if s["max_difference_between_runs"] == 0 else ""),
    ]
    if "price_cluster_hour" in s:
        lines.append(
            f"at ${s['price_cluster_hour']:g}/hour for the cluster: communication "
            f"{format_usd(g['usd_comm_per_step'], exact=False)} per step "
            f"({format_usd(g['usd_comm_per_day'], exact=False)} per day at "
            f"{g['steps_per_second']:.3g} steps/s), "
            f"{format_usd(g['usd_comm_run'], exact=False)} of the run's "
            f"{format_usd(g['usd_run'], exact=False)} (ringtree's run)"
        )
    lines.append(f"wall time: {s['wall_s']:.1f} s (start-up, both runs, results)")
    return lines


def _yes(run: dict[str, Any]) -> str:
    if run["ranks_identical"]:
        return "yes"
    return f"NO (max difference {run['max_difference_between_ranks']:.3g})"
