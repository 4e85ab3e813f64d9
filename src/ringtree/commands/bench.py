"""``ringtree bench``: nccl-tests for ringtree -- a sweep of sizes on N local processes,
every algorithm and the engine's own collective, time, algbw, busbw and #wrong per line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ringtree.bench.plots import plot_sweep
from ringtree.bench.result import BenchResult
from ringtree.bench.table import render_text
from ringtree.commands import args as A
from ringtree.commands.sweep_options import (
    add_plot_option,
    add_sweep_options,
    check_can_measure,
    measure,
    note,
    sweep_from,
)
from ringtree.errors import RingtreeError
from ringtree.output import print_json


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``bench`` command."""
    p = sub.add_parser(
        "bench",
        help="nccl-tests for ringtree: time, algbw, busbw and #wrong over a sweep of sizes",
        description="Start N processes on 127.0.0.1 and measure each size with every "
        "algorithm and the engine's own collective ('native'), interleaved call by call. Each "
        "line: size, count, type, redop, root, time (median over calls of the slowest rank, "
        "us), algbw = size / time and busbw = algbw x nccl-tests' factor (all-reduce "
        "2(N-1)/N, reduce-scatter and all-gather (N-1)/N, broadcast and reduce 1), in GB/s "
        "(1e9 B/s), and #wrong: elements that differ from the exact result (inputs are small "
        "integers, exact in any order). Exits 1 if any line is wrong.",
    )
    add_sweep_options(p, min_size="4KiB", max_size="16MiB", step=4, budget_s=1.0, native=True)
    p.add_argument(
        "--in-place",
        action="store_true",
        help="all-gather's input is its own block of the output (all-reduce, "
        "broadcast and reduce are always in place, as in torch.distributed)",
    )
    p.add_argument(
        "--json",
        nargs="?",
        const="-",
        default=None,
        metavar="FILE",
        type=A.output_file(stdout_dash=True),
        help="print the results as JSON (or write them to FILE)",
    )
    p.add_argument(
        "--csv", metavar="FILE", type=A.output_file(), help="also write the lines as CSV to FILE"
    )
    add_plot_option(p, "draw time and busbw against size (FILE.png or FILE.svg)")
    p.add_argument(
        "--profile",
        type=A.link,
        metavar="FILE.toml",
        help="a calibrated profile: pipelined algorithms run at the chunk count "
        "auto picks on it, and the plot shows its predictions",
    )
    p.add_argument(
        "--from",
        dest="source",
        metavar="FILE.json",
        help="print (and plot) saved --json results instead of measuring",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Measure (or load), print the table or JSON, write CSV and plot; 1 if any line is wrong."""
    plot = Path(args.plot) if args.plot else None
    if args.source:
        result = BenchResult.load(args.source)
    else:
        check_can_measure(args, "bench", [args.backend])
        sweep = sweep_from(args, in_place=args.in_place, link=args.profile)
        found = measure(sweep, args.quiet)
        if found is None:
            return 1
        result = found
    if args.json == "-":
        print_json(result.record())
    else:
        sys.stdout.write(render_text(result))
        if args.json:
            _write(args.json, _json_text(result))
    if args.csv:
        _write(args.csv, result.csv_text())
    if plot is not None:
        plot_sweep(result, plot, link=args.profile)
        note(f"wrote {plot}", args.quiet)
    return 1 if any(r.wrong for r in result.rows) else 0


def _json_text(result: BenchResult) -> str:
    import json

    return json.dumps(result.record(), indent=2, allow_nan=False) + "\n"


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError as e:
        raise RingtreeError(f"cannot write {path!r}: {e.strerror}") from None
