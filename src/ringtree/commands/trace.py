"""``ringtree trace``: the step-by-step schedule of a collective."""

from __future__ import annotations

import argparse

from ringtree.algorithms import build, default_algorithm
from ringtree.collectives import Collective
from ringtree.commands import args as A
from ringtree.cost.links import get_link
from ringtree.cost.terms import step_times_s
from ringtree.errors import RingtreeError
from ringtree.output import print_json, stderr_console, stdout_console
from ringtree.schedule import Schedule
from ringtree.trace.chrome import schedule_chrome_trace, write_chrome_trace
from ringtree.trace.html import write_html
from ringtree.trace.steps import trace_data
from ringtree.trace.svg import write_svg
from ringtree.trace.text import render_steps
from ringtree.units import dtype_bytes, format_bandwidth, format_time

#: The most ranks traced: a trace is every transfer of every step, and after each step what
#: every rank holds; above a few hundred ranks that is millions of lines that take minutes to
#: build ('ringtree cost' prices any N from closed forms).
MAX_RANKS = 256
#: The most pipeline chunks traced (auto never picks more than 1,024).
MAX_CHUNKS = 1024
#: What a trace may hold: transfers, and (rank, chunk) states after each step. At the limits
#: (a ring all-reduce on 128 ranks) it takes 5-7 s on one core.
MAX_TRANSFERS = 2**15
MAX_HOLDINGS = 2**22


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
        help=A.COLLECTIVE_HELP,
    )
    A.add_workers(
        p,
        A.int_up_to(
            MAX_RANKS, "a trace lists every step of every rank; 'ringtree cost' takes any N"
        ),
    )
    p.add_argument(
        "--algorithm",
        default=None,
        help="ring, tree, dbtree, recursive, rabenseifner, pairwise, hierarchical, bruck, "
        "linear or dissemination, as the collective has them (default: its first that needs "
        "no nodes: ring, pairwise for all-to-all, tree for gather/scatter)",
    )
    p.add_argument(
        "--root", type=A.non_negative_int, default=0, help="root of broadcast/reduce/gather/scatter"
    )
    p.add_argument("--size", type=A.size, default=1 << 20, help="payload in bytes (default 1MiB)")
    p.add_argument("--dtype", default="fp32", help="element type (default fp32)")
    p.add_argument(
        "--chunks",
        type=A.int_up_to(MAX_CHUNKS, "auto never pipelines in more"),
        default=None,
        help="pipeline chunks for chain/tree algorithms (dbtree: per half)",
    )
    A.add_ranks_per_node(p, "ranks per node, for hierarchical (N must be nodes x G)")
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
        help="add each step's modelled time on this link (a preset or custom:bw=..,lat=..); "
        "also the link of --chrome (default there: loopback)",
    )
    p.add_argument("--json", action="store_true", help="print the trace as JSON")
    p.add_argument(
        "--svg",
        metavar="FILE",
        type=A.output_file(),
        help="also write a picture of every step (SVG)",
    )
    p.add_argument(
        "--html",
        metavar="FILE",
        type=A.output_file(),
        help="also write a page that steps through it (HTML)",
    )
    p.add_argument(
        "--chrome",
        metavar="FILE",
        type=A.output_file(),
        help="also write its predicted timeline on --link (default loopback) as a Chrome trace "
        "(JSON; open in ui.perfetto.dev or chrome://tracing)",
    )
    p.set_defaults(func=run)


def _check_size(s: Schedule) -> None:
    """RingtreeError when the trace of ``s`` would take more than a few seconds."""
    transfers = sum(len(step.transfers) for step in s.steps)
    holdings = s.n_steps * s.n_ranks * s.n_chunks
    if transfers > MAX_TRANSFERS or holdings > MAX_HOLDINGS:
        raise RingtreeError(
            f"{s.algorithm} {s.collective.value} on {s.n_ranks} ranks is too big to trace: "
            f"{transfers:,} transfers and {holdings:,} (step, rank, chunk) states, at most "
            f"{MAX_TRANSFERS:,} and {MAX_HOLDINGS:,}; use fewer ranks or chunks, or "
            "'ringtree cost' for any N"
        )


def run(args: argparse.Namespace) -> int:
    """Build the schedule, print it as a table or JSON, and write the files asked for."""
    itemsize = dtype_bytes(args.dtype)
    if args.size % itemsize:
        raise RingtreeError(f"size {args.size} B is not a whole number of {args.dtype} elements")
    schedule = build(
        args.collective,
        default_algorithm(args.collective) if args.algorithm is None else args.algorithm,
        args.ranks,
        root=args.root,
        n_chunks=args.chunks,
        ranks_per_node=args.ranks_per_node,
        fold=args.fold,
    )
    _check_size(schedule)
    count = 0 if args.collective is Collective.BARRIER else args.size // itemsize  # no data
    data = trace_data(schedule, count, itemsize)
    step_times = None
    if args.link is not None:
        step_times = step_times_s(schedule, count, itemsize, args.link)
        data["link"] = args.link.name
        data["step_times_s"] = step_times
    messages = stderr_console()
    if args.svg:  # files first: a bad path or an unreadable picture fails before any output
        write_svg(args.svg, schedule)
        messages.print(f"wrote {args.svg}: a picture of {schedule.n_steps} steps", soft_wrap=True)
    if args.html:
        write_html(args.html, schedule, count, itemsize)
        messages.print(
            f"wrote {args.html}: a page that steps through {schedule.n_steps} steps",
            soft_wrap=True,
        )
    if args.chrome:
        link = args.link or get_link("loopback")
        write_chrome_trace(args.chrome, schedule_chrome_trace(schedule, count, itemsize, link))
        messages.print(
            f"wrote {args.chrome}: the predicted timeline on {link.name} "
            f"({format_bandwidth(link.bandwidth_Bps)}, alpha {format_time(link.alpha_s)})",
            soft_wrap=True,
        )
    if args.json:
        print_json(data)
    else:
        render_steps(stdout_console(), data, step_times)
    return 0
