"""``ringtree profile``: read torch.profiler (Kineto) traces of a real run and set every
collective against the cost model, split each step into compute, exposed communication and
idle, and reprice the run on another cluster or scale (:mod:`ringtree.kineto`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.table import Table

from ringtree.commands import args as A
from ringtree.commands.cost_cluster import cluster_arg
from ringtree.cost.profile import load_profile
from ringtree.cost.select import short_time
from ringtree.errors import RingtreeError
from ringtree.kineto.calls import Run
from ringtree.kineto.load import load_run
from ringtree.kineto.pricing import Target, loaded
from ringtree.kineto.report import analyse
from ringtree.kineto.whatif import what_if
from ringtree.output import print_json, stderr_console, stdout_console
from ringtree.units import format_bytes

#: At most this many GPUs in a what-if (the planner's own limit).
MAX_WHAT_IF_NODES = 16_384
ROWS = 40


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``profile`` command."""
    p = sub.add_parser(
        "profile", help="read torch.profiler traces: collectives vs the model, step split",
        description="Read torch.profiler (Kineto) traces of a run -- files or directories, one "
        "file per rank, plain or gzipped -- and print every collective's measured time beside "
        "the model's prediction (on a calibrated --profile, or NCCL on a --cluster), each "
        "step split into compute, exposed communication and idle as Holistic Trace Analysis "
        "splits it, the collectives slowest against their prediction, and the ranks that "
        "start their collectives late. --what-if-cluster reprices the run elsewhere.",
    )
    p.add_argument("traces", nargs="+", metavar="TRACE",
                   help="trace files (.json, .json.gz) or directories of them")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--profile", metavar="FILE.toml",
                       help="price on this link profile from 'ringtree calibrate' (a run on "
                       "this machine; FILE.toml#NAME picks a transport)")
    where.add_argument("--cluster", type=cluster_arg, metavar="X",
                       help="price with the NCCL model on this cluster ('ringtree clusters', "
                       "or a TOML file with a [cluster] table)")
    p.add_argument("--nodes", type=A.positive_int, metavar="K",
                   help="nodes the traced run used on --cluster (default: as many as its "
                   "largest group needs at the cluster's GPUs per node)")
    p.add_argument("--what-if-cluster", type=cluster_arg, metavar="Y",
                   help="keep the trace's compute and reprice its collectives on cluster Y: "
                   "the new step times and what they expose (weak scaling)")
    p.add_argument("--what-if-nodes", type=A.int_up_to(MAX_WHAT_IF_NODES, "the planner's "
                   "limit"), metavar="K",
                   help="with --what-if-cluster: groups that span the whole run span K nodes")
    p.add_argument("--chrome", metavar="OUT.json", type=A.output_file(".json"),
                   help="write the traces with a predicted slice beside each priced "
                   "collective (ui.perfetto.dev)")
    p.add_argument("--json", action="store_true", help="print everything as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar or warnings")
    p.set_defaults(func=run)


def _target(args: argparse.Namespace) -> Target | None:
    if args.profile:
        return Target(args.profile, link=load_profile(args.profile))
    if args.cluster is not None:
        return Target(args.cluster.key, cluster=args.cluster, nodes=args.nodes)
    if args.nodes:
        raise RingtreeError("--nodes needs --cluster")
    return None


@contextmanager
def _progress(quiet: bool) -> Iterator[Callable[[Path, int, int], Any] | None]:
    """A rich bar per file on stderr when it is a terminal (bytes read)."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

    bar = Progress("{task.description}", BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                   console=stderr_console(), transient=True)

    def factory(path: Path, i: int, n: int) -> Callable[[int], None]:
        task = bar.add_task(f"reading {path.name} ({i + 1}/{n})", total=path.stat().st_size)
        return lambda done: bar.update(task, completed=done)

    with bar:
        yield factory


def run(args: argparse.Namespace) -> int:
    """Read, analyse, print."""
    if args.what_if_nodes and args.what_if_cluster is None:
        raise RingtreeError("--what-if-nodes needs --what-if-cluster")
    target = _target(args)
    with _progress(args.quiet) as progress:
        trace = load_run(args.traces, progress)
    if not trace.calls and not any(r.steps for r in trace.ranks):
        raise RingtreeError("the traces hold no collective and no ProfilerStep: nothing to "
                            "report (are they torch.profiler traces of a distributed run?)")
    target, load = loaded(target, trace)
    report = analyse(trace, target)
    report["load"] = load
    if args.what_if_cluster is not None:
        report["what_if"] = _what_if(trace, args)
    if args.chrome:
        _chrome(args.chrome, trace, target, args.quiet)
    if args.json:
        print_json(report)
        return 0
    if not args.quiet:
        messages = stderr_console()
        for w in report["warnings"]:
            messages.print(f"ringtree: warning: {w}", soft_wrap=True, markup=False,
                           highlight=False)
    _print(report, trace)
    return 0


def _what_if(trace: Run, args: argparse.Namespace) -> dict[str, Any]:
    y = args.what_if_cluster
    t = Target(y.key, cluster=y, nodes=args.what_if_nodes)
    world = args.what_if_nodes * y.gpus_per_node if args.what_if_nodes else None
    return what_if(trace, t, world)


def _chrome(path: str, trace: Run, target: Target | None, quiet: bool) -> None:
    from ringtree.kineto.chrome import write_annotated
    from ringtree.kineto.instances import instances
    from ringtree.kineto.report import priced

    found, _ = instances(trace)
    n = write_annotated(path, trace, found, priced(found, trace.backend, target))
    if not quiet:
        stderr_console().print(f"wrote {path}: the traces and {n} predicted slices",
                               soft_wrap=True)


def _t(x: float | None) -> str:
    return short_time(x) if x is not None else "-"


def _share(x: float, whole: float) -> str:
    return f"{_t(x)} ({x / whole:.0%})" if whole else _t(x)


def _print(report: dict[str, Any], trace: Run) -> None:
    console = stdout_console()
    n_calls = sum(r["count"] for r in report["collectives"])
    console.print(f"{len(trace.ranks)} ranks ({report['backend'] or 'backend unknown'}, "
                  f"{report['device'].upper()}), {n_calls} collective calls; priced on "
                  f"{report['target'] or 'nothing (give --profile or --cluster)'}"
                  + (f" for the {report['load']['free_cores']:.2f} cores other programs left "
                     "free while it ran" if report.get("load") else ""),
                  soft_wrap=True, highlight=False, markup=False)
    if report["collectives"]:
        console.print(_collectives_table(report["collectives"]))
    if report["steps"]:
        console.print(_split_table(report["steps"], "each step on its slowest rank (critical "
                                   "path): compute, exposed communication, idle", "step"))
    elif report["overall"]:
        console.print(_split_table(report["overall"], "each rank's whole trace (no "
                                   "ProfilerStep markers)", None))
    for table in (_slowest_table(report["slowest"]), _stragglers_table(report["stragglers"])):
        if table is not None:
            console.print(table)
    if "what_if" in report:
        _print_what_if(console, report["what_if"])


def _collectives_table(rows: list[dict[str, Any]]) -> Table:
    t = Table(title="collectives by kind and size (time: each collective's last rank to "
              "join it, over its calls)", title_justify="left")
    for name in ("collective", "size", "group", "type", "count", "median", "p90", "predicted",
                 "meas/pred", "busbw", "kernel / model"):
        t.add_column(name, justify="left" if name in ("collective", "kernel / model") else
                     "right")
    for r in rows[:ROWS]:
        kind = r["collective"] + (f" ({r['label']})" if r["label"] else "")
        alg = " / ".join(x for x in (r["kernel"], r["predicted_algorithm"]) if x) or "-"
        t.add_row(kind, format_bytes(r["size_bytes"]) if r["size_bytes"] is not None else "?",
                  str(r["group_size"] or "?"), r["dtype"] or "-", str(r["count"]),
                  _t(r["measured_s"]), _t(r["measured_p90_s"]), _t(r["predicted_s"]),
                  f"{r['ratio']:.2f}" if r["ratio"] is not None else "-",
                  f"{r['busbw_gbps']:.3g} GB/s" if r["busbw_gbps"] else "-", alg)
    if len(rows) > ROWS:
        t.caption = f"{len(rows) - ROWS} more rows in --json"
    return t


def _split_table(rows: list[dict[str, Any]], title: str, key: str | None) -> Table:
    t = Table(title=title, title_justify="left")
    cols = ([key] if key else []) + ["rank", "time", "compute", "exposed comm", "memory",
                                     "idle", "overlap"]
    for c in cols:
        t.add_column(c, justify="right")
    for r in rows[:ROWS]:
        parts = [_share(r[k], r["time_s"]) for k in ("compute_s", "exposed_comm_s", "memory_s",
                                                      "idle_s")]
        cells = ([str(r[key])] if key else []) + [
            str(r["rank"]), _t(r["time_s"]), *parts,
            f"{r['overlap']:.0%}" if r["overlap"] is not None else "-"]
        t.add_row(*cells)
    return t


def _slowest_table(rows: list[dict[str, Any]]) -> Table | None:
    if not rows:
        return None
    t = Table(title="slowest against their prediction", title_justify="left")
    for c in ("collective", "size", "group", "step", "ranks", "measured", "predicted", "x"):
        t.add_column(c, justify="left" if c == "collective" else "right")
    for r in rows[:5]:
        ranks = r["ranks"]
        t.add_row(r["collective"], format_bytes(r["size_bytes"]), str(r["group_size"]),
                  str(r["step"] if r["step"] is not None else "-"),
                  ",".join(map(str, ranks)) if len(ranks) <= 8 else f"{len(ranks)} ranks",
                  _t(r["measured_s"]), _t(r["predicted_s"]), f"{r['ratio']:.2f}")
    return t


def _stragglers_table(rows: list[dict[str, Any]]) -> Table | None:
    if len(rows) < 2:
        return None
    t = Table(title="who starts late (delay after the group's first rank to start)",
              title_justify="left")
    for c in ("rank", "collectives", "last to start", "median delay", "largest delay"):
        t.add_column(c, justify="right")
    for r in rows[:8]:
        t.add_row(str(r["rank"]), str(r["collectives"]), f"{r['last']}",
                  _t(r["median_s"]), _t(r["max_s"]))
    return t


def _print_what_if(console: Any, w: dict[str, Any]) -> None:
    t = Table(title=f"what if: the same steps on {w['target']} with {w['ranks']} ranks in the "
              f"run-wide groups (traced: {w['from_ranks']})", title_justify="left")
    for c in ("step", "time", "exposed comm", "what-if time", "what-if exposed", "unpriced"):
        t.add_column(c, justify="right")
    for s in w["steps"][:ROWS]:
        t.add_row(str(s["step"]), _t(s["time_s"]), _t(s["exposed_comm_s"]),
                  _t(s["what_if_time_s"]), _t(s["what_if_exposed_comm_s"]),
                  str(s["unpriced_calls"]))
    console.print(t)
    for a in w["assumptions"]:
        console.print(f"assumed: {a}", soft_wrap=True, highlight=False, markup=False)
