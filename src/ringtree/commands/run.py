"""``ringtree run``: a collective on N local processes, checked against the engine's own."""

from __future__ import annotations

import argparse

from rich.table import Table

from ringtree.commands import args as A
from ringtree.commands import local
from ringtree.commands.sweep_options import iterations
from ringtree.cost.select import short_time
from ringtree.output import print_json, stderr_console, stdout_console
from ringtree.procs.run import RunFailed, RunReport, oversubscription_warning, run_processes
from ringtree.units import format_bytes

_NATIVE = {"gloo": "torch.distributed (gloo)", "nccl": "torch.distributed (NCCL)", "mpi": "MPI"}


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``run`` command."""
    p = sub.add_parser(
        "run",
        help="run a collective on N local processes, verified against the engine's own",
        description="Start N processes on 127.0.0.1 (no set-up), run the collective with "
        "ringtree's algorithm over the engine's point-to-point, check the result against the "
        "engine's own collective on the same data, and report the median time per call, the "
        "bytes each rank's transport sent next to the schedule's count, and the model's "
        "prediction. Exits 1 if a rank fails (dead peer, timeout, mismatch).",
    )
    p.add_argument(
        "collective",
        type=A.collective,
        help=A.COLLECTIVE_HELP,
    )
    A.add_workers(p, A.int_up_to(local.MAX_LOCAL_RANKS, "local processes"))
    local.add_force(p)
    p.add_argument(
        "--backend", choices=("gloo", "nccl", "mpi"), default="gloo",
        help="gloo (torch.distributed on CPU, default), nccl (torch.distributed on CUDA GPUs; "
        "more ranks than GPUs share them over NCCL's sockets) or mpi (mpi4py under mpirun)",
    )
    p.add_argument("--size", type=A.size, default=1 << 20, help="buffer size (default 1MiB)")
    p.add_argument("--algorithm", default="auto", help="algorithm name or auto (default: auto)")
    p.add_argument("--op", default="sum", help="reduce op: sum, product, min, max, avg")
    p.add_argument("--root", type=A.non_negative_int, default=0,
                   help="root of broadcast, reduce, gather and scatter (default 0)")
    A.add_ranks_per_node(p, "ranks per node, for hierarchical (the local ranks play nodes of G)")
    p.add_argument("--dtype", default="fp32", help="element type (default fp32)")
    p.add_argument("--iters", type=iterations(1), default=10, help="timed calls (default 10)")
    p.add_argument(
        "--timeout", type=A.positive_duration, default=60.0,
        help="limit per call, e.g. 30s (default 60s): a dead or silent peer fails within it",
    )
    p.add_argument(
        "--no-check", action="store_true",
        help="skip the fingerprint exchange that detects ranks calling differently",
    )
    p.add_argument(
        "--kill-rank", type=A.non_negative_int, default=None, metavar="R",
        help="make rank R die mid-collective, to see how the others fail",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Launch, verify, report; exit 1 with the ranks' errors when the collective fails."""
    err = stderr_console()
    if args.backend != "mpi":
        local.require_torch(f"run --backend {args.backend}", "or use --backend mpi")
    local.check_ranks(args.ranks, args.force)
    local.check_memory(args.ranks, args.size, args.dtype)
    warning = oversubscription_warning(args.ranks)
    if warning:
        err.print(f"ringtree: warning: {warning}", highlight=False, soft_wrap=True)
    try:
        report = run_processes(
            args.ranks, args.collective, args.size, backend=args.backend,
            algorithm=args.algorithm, op=args.op, root=args.root, dtype=args.dtype,
            iters=args.iters, timeout_s=args.timeout, check=not args.no_check,
            kill_rank=args.kill_rank, ranks_per_node=args.ranks_per_node,
        )
    except RunFailed as e:
        err.print(f"ringtree: error: {e}", highlight=False, soft_wrap=True, markup=False)
        return 1
    if args.json:
        print_json(report.record())
    else:
        print_report(report)
    return 0 if report.correct else 1


def print_report(report: RunReport) -> None:
    """The per-rank bytes table and the verdict lines."""
    console = stdout_console()
    table = Table(
        title=f"{report.algorithm} {report.collective} of {format_bytes(report.size_bytes)} "
        f"({report.dtype}) on {report.n_ranks} {report.backend} processes"
    )
    table.add_column("rank", justify="right")
    table.add_column("bytes sent (transport)", justify="right")
    table.add_column("bytes sent (schedule)", justify="right")
    table.add_column("messages", justify="right")
    table.add_column("match")
    for r in report.ranks:
        same = r["bytes_sent"] == r["bytes_sent_schedule"]
        table.add_row(
            str(r["rank"]), f"{r['bytes_sent']:,}", f"{r['bytes_sent_schedule']:,}",
            str(r["messages_sent"]), "yes" if same else "NO",
        )
    console.print(table)
    verdict = "correct" if report.correct else "WRONG"
    console.print(
        f"result: {verdict} (verified against {_NATIVE[report.backend]}'s own "
        f"{report.collective} on the same data)",
        highlight=False,
    )
    ratio = (f"measured/predicted {report.time_s / report.predicted_s:.2f}"
             if report.predicted_s else "no steps, no ratio")
    console.print(
        f"time per call: {short_time(report.time_s)} measured (median of {report.iters}), "
        f"{short_time(report.predicted_s)} predicted ({report.n_steps} steps on the link "
        f"{report.link}); {ratio}",
        highlight=False,
    )
