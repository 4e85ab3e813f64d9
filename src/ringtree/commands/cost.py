"""``ringtree cost``: what a collective costs on each link, in time, overhead and dollars."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from ringtree.algorithms import BuildSpec
from ringtree.collectives import Collective
from ringtree.commands import args as A
from ringtree.commands import cost_cluster
from ringtree.commands.model_flags import CLUSTER, MODEL_ON, hardware
from ringtree.cost.host import HostLink
from ringtree.cost.links import link_name
from ringtree.cost.models import DEFAULT_MODEL, nominal_link, parse_model
from ringtree.cost.money import Price
from ringtree.cost.query import TEXTBOOK_FACTOR
from ringtree.cost.report import Question, cost_rows
from ringtree.cost.select import AUTO, ENV_VAR
from ringtree.cost.terms import Link
from ringtree.errors import RingtreeError
from ringtree.output import print_json, stdout_console
from ringtree.units import (
    MAX_SIZE_BYTES,
    dtype_bytes,
    format_bandwidth,
    format_bytes,
    format_overhead,
    format_params,
    format_time,
    format_usd,
)

#: The flags that go with one kind of hardware (:mod:`ringtree.commands.model_flags`).
FLAGS = ("--link", "--profile", "-n", "--algorithm", "--root", "--chunks", "--ranks-per-node",
         "--compute", "--price-gpu-hour", "--price-cluster-hour", "--steps-per-second",
         "--hours", "--comm-time", "--nodes", "--gpus-per-node", "-b", "-e", "-f", "--plot")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``cost`` command."""
    p = sub.add_parser(
        "cost",
        help="predict a collective's time, overhead and dollars on one or more links",
        description="Predict what one collective costs on each link: bytes sent per worker, "
        "steps, latency and bandwidth terms, time; the overhead over a compute step; and "
        "dollars per step, per day and per job. 'textbook' is the seed's back-of-envelope "
        "(~2S bytes per worker for all-reduce, vendor bandwidth, no latency); 'alpha-beta' "
        "counts exact bytes and steps, per-step latency and measured bandwidth.",
    )
    p.add_argument("collective", type=A.collective, help=A.COLLECTIVE_HELP)
    size = p.add_mutually_exclusive_group()
    size.add_argument("--size", type=A.size, help="buffer size S in bytes: 14GB, 64MiB, 4096")
    size.add_argument("--params", type=A.params,
                      help="parameter count (7e9, 7B, 500k): S = params x dtype")
    p.add_argument("--dtype", default="fp32", help="element type: fp32 (default), fp16, bf16 ...")
    A.add_workers(p, required=False)
    _link_flags(p)
    _money_flags(p)
    p.add_argument("--json", action="store_true", help='print {"rows": [...]} as JSON')
    cost_cluster.add_arguments(p)
    p.set_defaults(func=run)


def _link_flags(p: argparse.ArgumentParser) -> None:
    """Where and how the models on links price: links, profiles, algorithm, model, spec."""
    p.add_argument("--profile", nargs="+", default=[], type=A.link, metavar="FILE.toml",
                   help="one or more profiles from 'ringtree calibrate' (FILE.toml#NAME picks "
                   "a transport), one row each, after the --link rows")
    p.add_argument("--link", nargs="+", default=[], type=A.links, metavar="L",
                   help="one or more links, one row each: a preset (see 'ringtree links'), "
                   "custom:bw=450GB/s,lat=3us, or INTRA+INTER such as nvlink4+ib-hdr")
    p.add_argument("--algorithm", default=AUTO,
                   help="auto (default: the lowest predicted time; RINGTREE_ALGO=ring|tree|... "
                   "in the environment forces one, as NCCL_ALGO does), or one the collective "
                   f"has, of {A.ALGORITHM_NAMES}")
    p.add_argument("--model", default=None, choices=list(MODEL_ON),
                   help=f"cost model (default: {DEFAULT_MODEL} on a --link, nccl on a --cluster)")
    p.add_argument("--root", type=A.non_negative_int, default=0, help="root of broadcast/reduce")
    p.add_argument("--chunks", type=A.chunks, default=None,
                   help="pipeline chunks for chain/tree algorithms (default: the best power of "
                   "two)")
    A.add_ranks_per_node(p, "ranks per node, for hierarchical (N = nodes x G; give --link "
                         "INTRA+INTER)")


def _money_flags(p: argparse.ArgumentParser) -> None:
    """The overhead over a compute step and the dollars."""
    p.add_argument("--compute", type=A.positive_duration, metavar="T",
                   help="compute time per step (200ms): adds overhead = comm time / compute "
                   "time")
    price = p.add_mutually_exclusive_group()
    price.add_argument("--price-gpu-hour", type=A.non_negative_number, metavar="X",
                       help="dollars per worker (GPU) per hour; the cluster costs X x workers")
    price.add_argument("--price-cluster-hour", type=A.non_negative_number, metavar="X",
                       help="dollars per hour for the whole cluster")
    p.add_argument("--steps-per-second", type=A.positive_number, metavar="K",
                   help="training steps per second for the per-day and per-job dollars "
                   "(default: 1)")
    p.add_argument("--hours", type=A.non_negative_number, metavar="H",
                   help="job length: adds the job's whole compute cost and its communication "
                   "share")
    p.add_argument("--comm-time", type=A.duration, metavar="T",
                   help="use this communication time per step (1ms) instead of the modelled "
                   "one for the dollar figures")


def question(args: argparse.Namespace) -> Question:
    """The library's Question from the parsed arguments (RingtreeError on inconsistent ones)."""
    itemsize = dtype_bytes(args.dtype)
    size_bytes = args.size if args.params is None else args.params * itemsize
    if size_bytes > MAX_SIZE_BYTES:
        raise RingtreeError(
            f"--params {args.params:,} x {itemsize} B ({args.dtype}) = {size_bytes:,} B is too "
            f"large: at most 2**60 = {MAX_SIZE_BYTES:,} B, so that byte counts stay exact"
        )
    if size_bytes % itemsize:
        raise RingtreeError(f"size {size_bytes} B is not a whole number of {args.dtype} elements")
    price = None
    if args.price_gpu_hour is not None:
        price = Price.per_worker(args.price_gpu_hour, args.ranks)
    elif args.price_cluster_hour is not None:
        price = Price.cluster(args.price_cluster_hour)
    for flag, value in (
        ("--steps-per-second", args.steps_per_second),
        ("--hours", args.hours),
        ("--comm-time", args.comm_time),
    ):
        if value is not None and price is None:
            raise RingtreeError(
                f"{flag} needs a price: give --price-gpu-hour or --price-cluster-hour"
            )
    return Question(
        collective=args.collective,
        algorithm=args.algorithm,
        n_ranks=args.ranks,
        size_bytes=size_bytes,
        itemsize=itemsize,
        model=parse_model(args.model),
        spec=BuildSpec(root=args.root, n_chunks=args.chunks, ranks_per_node=args.ranks_per_node),
        compute_s=args.compute,
        price=price,
        steps_per_second=args.steps_per_second or 1.0,
        hours=args.hours,
        comm_time_s=args.comm_time,
    )


def run(args: argparse.Namespace) -> int:
    """Cost the collective on every link (or on a --cluster); print a table or JSON."""
    if hardware(args, FLAGS) == CLUSTER:
        return cost_cluster.run(args)
    if args.ranks is None:
        raise RingtreeError("give the number of workers: -n N (or --cluster NAME --nodes K)")
    if args.collective is Collective.BARRIER:  # it moves no data, whatever the size
        args.size, args.params = 0, None
    elif args.size is None and args.params is None:
        raise RingtreeError("give --size S or --params P")
    args.model = args.model or DEFAULT_MODEL
    args.link = [*args.link, *args.profile]
    if not args.link:
        raise RingtreeError("give --link L (a preset, custom:...), --profile FILE.toml or "
                            "--cluster NAME")
    q = question(args)
    rows = cost_rows(q, args.link)
    if args.json:
        print_json({"rows": rows})
    else:
        render(q, args, rows)
    return 0


def _bandwidth_cell(link: Any, model: str) -> str:
    """The bandwidth (and alpha) the model uses for this link."""
    levels = [link] if isinstance(link, Link) else list(link.values())
    if model == "textbook":
        used = nominal_link(link)
        both = " (both ways)" if used.nominal_both_directions else ""
        return f"{format_bandwidth(used.nominal)} nominal{both}"
    if isinstance(link, HostLink) and link.host is not None:
        h = link.host
        return (f"{format_bandwidth(h.bandwidth_Bps)} through the CPU, alpha "
                f"{format_time(h.alpha_s, exact=False)}, "
                f"{format_time(h.message_s, exact=False)}/message ({h.cores} cores)")
    return "\n".join(
        f"{format_bandwidth(x.bandwidth_Bps)}, alpha {format_time(x.alpha_s, exact=False)}"
        for x in levels
    )


def _algorithm_title(q: Question, rows: list[dict[str, Any]]) -> str:
    """``ring``, ``ring (auto)``, ``tree (forced by RINGTREE_ALGO)``, or ``auto`` when the
    links' picks differ."""
    used = {row["algorithm"] for row in rows}
    if q.algorithm.strip().lower() != AUTO:
        return q.algorithm
    if len(used) > 1:
        return "auto (per link, below)"
    how = f"forced by {ENV_VAR}" if rows[0]["forced"] else "auto"
    return f"{used.pop()} ({how})"


def _chunks_note(row: dict[str, Any]) -> str:
    chunks = row.get("n_chunks")
    return f"; {row['algorithm']} pipelined in {chunks} chunks" if chunks else ""


def render(q: Question, args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    """The rich table, then the auto choice per link and one line per assumption that
    produced an overhead or dollars."""
    console = stdout_console()
    table = _table(q, args, rows)
    if not console.is_terminal:  # piped: one line per row, never wrapped
        wide = console.options.update_width(10_000)
        console.width = max(console.width, Measurement.get(console, wide, table).maximum)
    console.print(table)
    if any("reason" in row for row in rows):
        console.print(f"auto choice (lowest predicted time; {ENV_VAR} overrides):")
        for link, row in zip(args.link, rows, strict=True):
            console.print(
                f"  {link_name(link)}: {row['reason']}{_chunks_note(row)}", soft_wrap=True
            )
    if q.compute_s is not None:
        console.print(f"overhead = time / compute time per step ({format_time(q.compute_s)})")
    if q.price is not None:
        _dollars_note(console, q, args, rows)


def _table(q: Question, args: argparse.Namespace, rows: list[dict[str, Any]]) -> Table:
    """One row per link: bytes, steps, the terms, the time (the seed's rounding, the exact
    figure beside), then the overhead and dollars asked for."""
    what = (f"{format_params(args.params)} params x {args.dtype}" if args.params is not None
            else args.dtype)
    tag = "~2S" if TEXTBOOK_FACTOR[q.collective] == 2 else "~S"
    table = Table(
        title=f"{q.collective.value} of a {format_bytes(q.size_bytes)} buffer ({what}) on "
        f"{q.n_ranks} workers, {_algorithm_title(q, rows)}, {q.model} model",
    )
    for name in ("link", "bandwidth used", "sent per worker", "steps", "latency",
                 "bandwidth term", "time"):
        table.add_column(name, justify="left" if name in ("link", "bandwidth used") else "right")
    extra: list[tuple[str, Callable[[dict], str]]] = []
    if q.compute_s is not None:
        compute_s = q.compute_s
        extra.append(("overhead", lambda r: format_overhead(r["time_s"], compute_s)))
    if q.price is not None:
        keys = [("$ per step", "usd_per_step"), ("$ per day", "usd_per_day")]
        if q.hours is not None:
            keys.append(("$ comm per job", "usd_comm_per_job"))
        extra += [(h, lambda r, k=k: format_usd(r[k])) for h, k in keys]
    for header, _ in extra:
        table.add_column(header, justify="right")
    for link, row in zip(args.link, rows, strict=True):
        sent = format_bytes(row["bytes_sent_per_worker"])
        if q.model == "textbook":
            sent += f" ({tag})"
        elif row["textbook_bytes"]:
            sent += f" ({tag} = {format_bytes(row['textbook_bytes'])})"
        latency = "-" if q.model == "textbook" else format_time(row["latency_s"], exact=False)
        table.add_row(link_name(link), _bandwidth_cell(link, q.model), sent, str(row["steps"]),
                      latency, format_time(row["bandwidth_s"], exact=False),
                      format_time(row["time_s"]), *(fmt(row) for _, fmt in extra))
    return table


def _dollars_note(console: Console, q: Question, args: argparse.Namespace,
                  rows: list[dict[str, Any]]) -> None:
    """What the dollars assume: the time priced, the price, the steps per second, the job."""
    assert q.price is not None
    basis = (
        f"--comm-time {format_time(q.comm_time_s)} instead of the modelled time"
        if q.comm_time_s is not None
        else "the modelled time"
    )
    per_worker = (
        f" (${args.price_gpu_hour:g} per worker-hour x {q.n_ranks})"
        if args.price_gpu_hour is not None
        else ""
    )
    console.print(
        f"dollars: {basis} x {format_usd(q.price.usd_per_hour)}/h for the cluster"
        f"{per_worker}; {q.steps_per_second:g} step/s for the day"
    )
    if q.hours is not None:
        console.print(
            f"the {q.hours:g}-hour job costs {format_usd(rows[0]['usd_per_job'])} of "
            "compute in all; '$ comm per job' is the part spent communicating"
        )
