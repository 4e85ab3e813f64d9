"""``ringtree bench``: nccl-tests for ringtree -- a sweep of sizes on N local processes,
every algorithm and the engine's own collective, time, algbw, busbw and #wrong per line,
with nccl-tests' flags, units and output (each line printed as it is measured)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ringtree.commands import args as A
from ringtree.commands.sweep_options import (
    add_plot_option,
    add_sweep_options,
    check_can_measure,
    ignored_flags,
    measure,
    note,
    sweep_from,
)
from ringtree.errors import RingtreeError
from ringtree.measure.plots import plot_sweep
from ringtree.measure.result import BenchResult
from ringtree.measure.sweep_run import metadata
from ringtree.measure.table import TableWriter, render_text
from ringtree.output import print_json


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``bench`` command."""
    p = sub.add_parser(
        "bench",
        help="nccl-tests for ringtree: time, algbw, busbw and #wrong over a sweep of sizes",
        description="Start N processes on 127.0.0.1 and measure each size with every "
        "algorithm and the engine's own collective ('native'), with nccl-tests' flags and "
        "output: one table per collective and algorithm, each line printed as soon as it is "
        "measured (a pipe too), out of place and in place where the collective has both. "
        "Each line: size, count, type, redop, root, then per placement time (median over "
        "calls of the slowest rank's, -a 3, us), algbw = size / time and busbw = algbw x "
        "nccl-tests' factor (all-reduce 2(N-1)/N, reduce-scatter and all-gather (N-1)/N, "
        "broadcast and reduce 1), in GB/s (1e9 B/s), and #wrong: elements that differ from "
        "the exact result (inputs are small integers, exact in any order); then each "
        "table's '# Out of bounds values' and '# Avg bus bandwidth'. Sizes: 4K = 4096 B, as "
        "nccl-tests reads them. Ranks: --ranks N, or nccl-tests' -g (and -t). Exits 1 if "
        "any line is wrong.",
    )
    add_sweep_options(p, min_size="4KiB", max_size="16MiB", step=4, budget_s=1.0, native=True,
                      nccl_tests=True)
    p.add_argument(
        "--interleave",
        action="store_true",
        help="ringtree's order instead of nccl-tests': every call of the sweep interleaved "
        "(sizes and algorithms), so that a noisy machine's slow spells hit all alike; the "
        "lines are printed at the end, one placement each (the collective's torch form)",
    )
    p.add_argument(
        "--in-place",
        action="store_true",
        help="with --interleave: all-gather's input is its own block of the output "
        "(all-reduce, broadcast and reduce are in place, as in torch.distributed)",
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
    """Measure (or load), print the table (line by line as measured) or JSON, write JSON,
    CSV and plot; 1 if any line is wrong."""
    plot = Path(args.plot) if args.plot else None
    table = args.json != "-"
    if args.source:
        result = BenchResult.load(args.source)
        if table:
            _out(render_text(result))
    else:
        found = _measure(args, table)
        if found is None:
            return 1
        result = found
    if not table:
        print_json(result.record())
    for path in dict.fromkeys(p for p in (args.json, args.json_file) if p and p != "-"):
        _write(path, _json_text(result))
    if args.csv:
        _write(args.csv, result.csv_text())
    if plot is not None:
        plot_sweep(result, plot, link=args.profile)
        note(f"wrote {plot}", args.quiet)
    return 1 if any(r.wrong for r in result.rows) else 0


def _measure(args: argparse.Namespace, table: bool) -> BenchResult | None:
    """Run the sweep, the table's lines written to stdout as they come (with ``table``)."""
    check_can_measure(args, "bench", [args.backend])
    for line in ignored_flags(args):
        note(line, args.quiet)
    sweep = sweep_from(args, in_place=args.in_place, link=args.profile)
    meta = metadata(sweep)
    writer = TableWriter(meta, _out) if table else None
    found = measure(sweep, args.quiet, writer.add if writer else None, meta,
                    bar=not (table and sys.stdout.isatty()))  # on a terminal the lines show it
    if found is not None and writer is not None:
        writer.meta = found.meta  # now with the load while timing
        writer.close()
    return found


def _out(text: str) -> None:
    """Write to stdout now, a pipe too (a line as soon as it is measured)."""
    sys.stdout.write(text)
    sys.stdout.flush()


def _json_text(result: BenchResult) -> str:
    import json

    return json.dumps(result.record(), indent=2, allow_nan=False) + "\n"


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError as e:
        raise RingtreeError(f"cannot write {path!r}: {e.strerror}") from None
