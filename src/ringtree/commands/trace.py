"""``ringtree trace``: the step-by-step schedule of a collective."""

from __future__ import annotations

import argparse

from ringtree.algorithms import build
from ringtree.commands import args as A
from ringtree.cost.model import step_times_s
from ringtree.errors import RingtreeError
from ringtree.output import print_json, stdout_console
from ringtree.trace.steps import trace_data
from ringtree.trace.text import render_steps
from ringtree.units import dtype_bytes


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``trace`` command."""
    p = sub.add_parser(
        "trace",
        help="show who sends which chunk to whom, step by step",
        description="Show an algorithm's schedule: each step's transfers "
        "(src -> dst, chunk, copy|reduce, bytes) and, after each step, the chunks each rank "
        "holds complete.",
    )
    p.add_argument(
        "collective",
        type=A.collective,
        help="all-reduce, reduce-scatter, all-gather, broadcast or reduce",
    )
    A.add_workers(p)
    p.add_argument(
        "--algorithm",
        default="ring",
        help="ring, tree, dbtree, recursive, rabenseifner or hierarchical, as the collective "
        "has them (default: ring)",
    )
    p.add_argument("--root", type=A.non_negative_int, default=0, help="root of broadcast/reduce")
    p.add_argument("--size", type=A.size, default=1 << 20, help="payload in bytes (default 1MiB)")
    p.add_argument("--dtype", default="fp32", help="element type (default fp32)")
    p.add_argument(
        "--chunks",
        type=A.positive_int,
        default=None,
        help="pipeline chunks for chain/tree algorithms (dbtree: per half)",
    )
    p.add_argument(
        "--ranks-per-node",
        type=A.positive_int,
        default=None,
        metavar="G",
        help="ranks per node, for hierarchical (N must be nodes x G)",
    )
    p.add_argument(
        "--no-fold",
        dest="fold",
        action="store_false",
        help="recursive/rabenseifner: refuse N that is not a power of two instead of folding "
        "the extra ranks into partners",
    )
    p.add_argument(
        "--link",
        type=A.link,
        default=None,
        help="add each step's modelled time on this link (a preset or custom:bw=..,lat=..)",
    )
    p.add_argument("--json", action="store_true", help="print the trace as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the schedule, then print it as a table or JSON."""
    itemsize = dtype_bytes(args.dtype)
    if args.size % itemsize:
        raise RingtreeError(f"size {args.size} B is not a whole number of {args.dtype} elements")
    schedule = build(
        args.collective,
        args.algorithm,
        args.ranks,
        root=args.root,
        n_chunks=args.chunks,
        ranks_per_node=args.ranks_per_node,
        fold=args.fold,
    )
    count = args.size // itemsize
    data = trace_data(schedule, count, itemsize)
    step_times = None
    if args.link is not None:
        step_times = step_times_s(schedule, count, itemsize, args.link)
        data["link"] = args.link.name
        data["step_times_s"] = step_times
    if args.json:
        print_json(data)
    else:
        render_steps(stdout_console(), data, step_times)
    return 0
