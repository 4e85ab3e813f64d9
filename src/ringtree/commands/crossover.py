"""``ringtree crossover``: the payload sizes where one algorithm overtakes another."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table

from ringtree.algorithms import BuildSpec
from ringtree.commands import args as A
from ringtree.cost.crossover import CrossoverMap, crossover_map
from ringtree.cost.models import DEFAULT_MODEL, MODELS, parse_model
from ringtree.cost.select import short_time
from ringtree.output import print_json, stderr_console, stdout_console
from ringtree.units import dtype_bytes, format_bytes

PLOT_SUFFIXES = (".png", ".svg")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``crossover`` command."""
    p = sub.add_parser(
        "crossover",
        help="payload sizes where the predicted times of two algorithms cross",
        description="For every pair of algorithms of a collective, the buffer sizes at which "
        "their predicted times cross and which wins below and above (e.g. tree below, ring "
        "above), plus the automatic choice by size. Pipelined algorithms are priced at their "
        "best chunk count for each size.",
    )
    p.add_argument(
        "collective",
        type=A.collective,
        help="all-reduce, reduce-scatter, all-gather, broadcast or reduce",
    )
    A.add_workers(p)
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
    p.add_argument("--dtype", default="fp32", help="element type (default fp32)")
    p.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        choices=list(MODELS),
        help=f"cost model (default: {DEFAULT_MODEL})",
    )
    p.add_argument(
        "--ranks-per-node",
        type=A.positive_int,
        default=None,
        metavar="G",
        help="ranks per node: adds hierarchical (N = nodes x G)",
    )
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
    result = crossover_map(
        args.collective,
        args.ranks,
        args.link,
        parse_model(args.model),
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
                      "algorithms' predicted times cross")  # fmt: skip
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
                markersize=7 if main else 4)  # fmt: skip
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
