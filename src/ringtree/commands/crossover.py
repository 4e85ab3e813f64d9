"""``ringtree crossover``: the payload sizes where one algorithm overtakes another."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rich.table import Table

from ringtree.algorithms import BuildSpec
from ringtree.commands import args as A
from ringtree.commands import cost_cluster
from ringtree.commands.model_flags import CLUSTER, MODEL_ON, hardware
from ringtree.cost.crossover import CrossoverMap, crossover_map
from ringtree.cost.models import DEFAULT_MODEL, parse_model
from ringtree.cost.nccl.p2p import P2P_COLLECTIVES
from ringtree.cost.nccl.pricer import NcclPricer
from ringtree.cost.nccl.switches import Switches, switch_points
from ringtree.cost.nccl.tuner import NCCL_COLLECTIVES
from ringtree.cost.select import short_time
from ringtree.errors import RingtreeError
from ringtree.output import print_json, stderr_console, stdout_console
from ringtree.units import dtype_bytes, format_bytes

PLOT_SUFFIXES = (".png", ".svg")
#: The flags that go with one kind of hardware (:mod:`ringtree.commands.model_flags`).
FLAGS = ("-n", "--ranks-per-node", "--nodes", "--gpus-per-node")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``crossover`` command."""
    p = sub.add_parser(
        "crossover",
        help="payload sizes where the predicted times of two algorithms cross",
        description="For every pair of algorithms of a collective, the buffer sizes at which "
        "their predicted times cross and which wins below and above (e.g. tree below, ring "
        "above), plus the automatic choice by size. Pipelined algorithms are priced at their "
        "best chunk count for each size. On a --cluster: the sizes where NCCL's choice of "
        "algorithm and protocol changes (LL -> LL128 -> Simple, tree -> ring, NVLS), with "
        "NCCL_ALGO, NCCL_PROTO and NCCL_NVLS_ENABLE from the environment.",
    )
    p.add_argument(
        "collective",
        type=A.collective,
        help=A.COLLECTIVE_HELP,
    )
    A.add_workers(p, required=False)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--link",
        type=A.links,
        metavar="L",
        help="a preset (see 'ringtree links'), custom:bw=450GB/s,lat=3us, or INTRA+INTER",
    )
    where.add_argument(
        "--profile",
        dest="link",
        type=A.link,
        metavar="FILE.toml",
        help="a profile from 'ringtree calibrate' (FILE.toml#NAME picks a transport)",
    )
    where.add_argument(
        "--cluster",
        type=cost_cluster.cluster_arg,
        metavar="NAME|FILE.toml",
        help="a preset of 'ringtree clusters' or a [cluster] TOML: NCCL's switch points there",
    )
    A.add_nodes(p, "GPUs of each node in the job (default: the --cluster's)")
    p.add_argument("--dtype", default="fp32", help="element type (default fp32)")
    p.add_argument(
        "--model",
        default=None,
        choices=list(MODEL_ON),
        help=f"cost model (default: {DEFAULT_MODEL} on a --link, nccl on a --cluster)",
    )
    A.add_ranks_per_node(p, "ranks per node: adds hierarchical (N = nodes x G)")
    p.add_argument(
        "--min-size", type=A.size, default=None, help="smallest buffer (default: one element)"
    )
    p.add_argument("--max-size", type=A.size, default=10**11, help="largest buffer (default 100GB)")
    p.add_argument("--json", action="store_true", help='print {"crossovers": [...]} as JSON')
    p.add_argument(
        "--plot",
        metavar="FILE",
        default=None,
        type=A.output_file(*PLOT_SUFFIXES),
        help="also draw time against size, log-log, crossovers marked (FILE.png or FILE.svg)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Compute the crossovers; print a table or JSON; draw the plot when asked."""
    if hardware(args, FLAGS) == CLUSTER:
        return run_cluster(args)
    if args.ranks is None:
        raise RingtreeError("give the number of workers: -n N (or --cluster NAME --nodes K)")
    result = crossover_map(
        args.collective,
        args.ranks,
        args.link,
        parse_model(args.model or DEFAULT_MODEL),
        itemsize=dtype_bytes(args.dtype),
        spec=BuildSpec(ranks_per_node=args.ranks_per_node),
        min_bytes=args.min_size,
        max_bytes=args.max_size,
    )
    if args.json:
        print_json(result.record())
    else:
        render(result)
    if args.plot is not None:
        plot(result, Path(args.plot))
        stderr_console().print(f"wrote {args.plot}")
    return 0


def render(m: CrossoverMap) -> None:
    """A table of crossovers, then the pairs that never cross and the automatic choice."""
    console = stdout_console()
    table = Table(
        title=f"{m.collective.value} on {m.n_ranks} workers over {m.link}, {m.model} model: "
        "where predicted times cross"
    )
    for name in ("a", "b", "cross at", "faster below", "faster above", "time there"):
        table.add_column(name, justify="right" if name in ("cross at", "time there") else "left")
    for c in m.crossovers:
        table.add_row(c.a, c.b, format_bytes(c.size_bytes), c.below, c.above, short_time(c.time_s))
    if m.crossovers:
        console.print(table)
    else:
        console.print(f"{m.collective.value} on {m.n_ranks} workers over {m.link}: no two "
                      "algorithms' predicted times cross")
    lo, hi = format_bytes(m.sizes_bytes[0]), format_bytes(m.sizes_bytes[-1])
    for a, b, w in m.never:
        what = "cost the same" if w == "tie" else f"{w} is faster throughout"
        console.print(f"{a} vs {b}: no crossover from {lo} to {hi}, {what}")
    picks = ", ".join(f"{alg} {format_bytes(x0)}..{format_bytes(x1)}" for alg, x0, x1 in m.winners)
    console.print(f"auto picks: {picks}")
    for name, why in m.skipped.items():
        console.print(f"{name} left out: {why}")


def plot(m: CrossoverMap, path: Path) -> None:
    """Log-log time against size for every algorithm, each crossover marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5))
    for alg, times in m.times_s.items():
        ax.plot(m.sizes_bytes, times, label=alg, linewidth=1.6)
    for c in m.crossovers:
        main = {c.a, c.b} == {"ring", "tree"}
        ax.plot([c.size_bytes], [c.time_s], "o" if main else "x", color="black",
                markersize=7 if main else 4)
        if main:
            ax.axvline(c.size_bytes, color="grey", linestyle=":", linewidth=1)
            ax.annotate(
                f"ring/tree: {format_bytes(c.size_bytes)}",
                (c.size_bytes, c.time_s),
                textcoords="offset points",
                xytext=(-8, 10),
                ha="right",
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("buffer size S (bytes)")
    ax.set_ylabel("predicted time (s)")
    ax.set_title(f"{m.collective.value}, {m.n_ranks} workers, {m.link} ({m.model})")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def run_cluster(args: argparse.Namespace) -> int:
    """NCCL's switch points on the cluster: a table or JSON, a plot when asked."""
    if args.collective not in NCCL_COLLECTIVES:
        raise RingtreeError(
            f"NCCL has no algorithm to choose for {args.collective.value}: it runs "
            + (
                "as grouped sends and receives (LL up to 16 KiB per peer, then Simple)"
                if args.collective in P2P_COLLECTIVES
                else "no such collective"
            )
        )
    g = args.gpus_per_node or args.cluster.gpus_per_node
    if args.nodes * g > cost_cluster.MAX_GPUS:
        raise RingtreeError(f"{args.nodes} nodes x {g} GPUs is more than "
                            f"{cost_cluster.MAX_GPUS:,} ranks")
    itemsize = dtype_bytes(args.dtype)
    lo = args.min_size or itemsize
    if lo > args.max_size:
        raise RingtreeError(f"--min-size {lo} is more than --max-size {args.max_size}")
    pricer = NcclPricer(args.cluster, os.environ)
    result = switch_points(args.collective, pricer.topology(args.nodes, g), pricer.settings, lo,
                           args.max_size, itemsize=itemsize)
    if args.json:
        print_json({**result.record(), "cluster": args.cluster.key})
    else:
        render_cluster(args, result)
    if args.plot is not None:
        plot_cluster(args, result, Path(args.plot))
        stderr_console().print(f"wrote {args.plot}")
    return 0


def render_cluster(args: argparse.Namespace, s: Switches) -> None:
    """NCCL's pick by size range, then each switch point."""
    console = stdout_console()
    table = Table(title=f"{s.collective.value} on {s.nodes} x {s.n_ranks // s.nodes} GPUs of "
                  f"{args.cluster.key}: what NCCL runs by size")
    for name in ("from", "to", "NCCL runs"):
        table.add_column(name, justify="right" if name != "NCCL runs" else "left")
    for r in s.ranges:
        table.add_row(format_bytes(r.lo_bytes), format_bytes(r.hi_bytes), r.choice)
    console.print(table)
    for a, b in zip(s.ranges, s.ranges[1:], strict=False):
        console.print(f"{a.choice} -> {b.choice} at {b.lo_bytes:,} B ({format_bytes(b.lo_bytes)})")
    if len(s.ranges) == 1:
        console.print(f"NCCL runs {s.ranges[0].choice} at every size")
    note = cost_cluster.nccl_settings_note(args.cluster)
    if note:
        console.print(f"with {note}")


def plot_cluster(args: argparse.Namespace, s: Switches, path: Path) -> None:
    """Log-log time of every algorithm/protocol NCCL allows, NCCL's pick drawn bold."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5))
    for name, times in s.times_s.items():
        ax.plot(s.sizes_bytes, times, label=name, linewidth=1.0, alpha=0.7)
    for r in s.ranges[1:]:
        ax.axvline(r.lo_bytes, color="grey", linestyle=":", linewidth=1)
    for r in s.ranges:
        xs = [x for x in s.sizes_bytes if r.lo_bytes <= x <= r.hi_bytes]
        ys = [s.times_s[r.choice][s.sizes_bytes.index(x)] for x in xs]
        ax.plot(xs, ys, color="black", linewidth=2.2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("buffer size S (bytes)")
    ax.set_ylabel("time, ringtree's NCCL model (s)")
    ax.set_title(f"{s.collective.value}, {s.nodes} x {args.cluster.key}: NCCL's pick in black")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
