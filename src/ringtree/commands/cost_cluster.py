"""``ringtree cost --cluster``: what NCCL runs and how long it takes on a described cluster.

Prints what ``all_reduce_perf`` and friends would print on that cluster (size, count, type,
time, algbw, busbw) plus NCCL's choice (algorithm, protocol, channels), for one size or a
``-b MIN -e MAX -f F`` sweep as nccl-tests spells it. NCCL_ALGO, NCCL_PROTO,
NCCL_NVLS_ENABLE, NCCL_COLLNET_ENABLE and NCCL_PAT_ENABLE in the environment act as in NCCL.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any

from rich.table import Table

from ringtree.commands import args as A
from ringtree.cost.clusters import Cluster
from ringtree.cost.nccl import tuner
from ringtree.cost.nccl.p2p import P2P_COLLECTIVES
from ringtree.cost.nccl.pricer import NcclPricer
from ringtree.cost.pricer import GroupShape
from ringtree.errors import RingtreeError
from ringtree.measure.sweep import sizes
from ringtree.output import print_json, stderr_console, stdout_console
from ringtree.plan.placement import cluster_of
from ringtree.units import MAX_SIZE_BYTES, dtype_bytes, format_time

#: At most this many sizes in a sweep (8 B .. 8 GiB by 2 is 31).
MAX_SIZES = 200
#: At most this many GPUs (a single number of ranks NCCL takes: int).
MAX_GPUS = 2**31 - 1
PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of the cluster path (see the module doc)."""
    g = p.add_argument_group("on a cluster (the NCCL model)")
    g.add_argument(
        "--cluster",
        type=cluster_arg,
        default=None,
        metavar="NAME|FILE.toml",
        help="a preset of 'ringtree clusters' or a TOML file with a [cluster] table: prices "
        "with the NCCL model (its choice of algorithm, protocol and channels)",
    )
    A.add_nodes(g, "GPUs of each node in the job (default: all of the cluster's)")
    g.add_argument("-b", "--minbytes", type=A.size, default=None, metavar="MIN",
                   help="sweep from MIN bytes (nccl-tests' -b, its units: 8G = 8 GiB)")
    g.add_argument("-e", "--maxbytes", type=A.size, default=None, metavar="MAX",
                   help="sweep up to MAX bytes (nccl-tests' -e, 8G = 8 GiB)")
    g.add_argument("-f", "--stepfactor", type=A.positive_number, default=2.0, metavar="F",
                   help="multiply the size by F each line (default 2)")
    g.add_argument(
        "--plot",
        type=A.output_file(*PLOT_SUFFIXES),
        default=None,
        metavar="FILE",
        help="also draw busbw against size with NCCL's choice marked (FILE.png/.svg/.pdf)",
    )


def cluster_arg(text: str) -> Cluster:
    """A --cluster value: a preset or a [cluster] TOML (argparse error otherwise)."""
    try:
        return cluster_of(text)
    except RingtreeError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def sweep_sizes(args: argparse.Namespace) -> list[int]:
    """``--size``, or ``-b -e -f`` (RingtreeError naming what is missing or too many)."""
    if args.size is not None:
        if args.minbytes is not None or args.maxbytes is not None:
            raise RingtreeError("give --size S or -b MIN -e MAX, not both")
        return [args.size]
    if args.minbytes is None or args.maxbytes is None:
        raise RingtreeError("give --size S, or a sweep -b MIN -e MAX [-f F]")
    lo, hi, f = args.minbytes, args.maxbytes, args.stepfactor
    if lo < 1 or lo > hi or not f > 1:
        raise RingtreeError(f"-b {lo} -e {hi} -f {f:g}: need 1 <= MIN <= MAX and F > 1")
    if math.log(hi / lo) / math.log(f) >= MAX_SIZES:  # counted before any is made
        raise RingtreeError(f"-b {lo} -e {hi} -f {f:g} make over {MAX_SIZES} sizes: give a "
                            "larger -f")
    return sizes(lo, hi, f)


def rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    """One row per size: the NCCL pricer's record of the call plus count and type."""
    cluster: Cluster = args.cluster
    itemsize = dtype_bytes(args.dtype)
    g = args.gpus_per_node or cluster.gpus_per_node
    if args.nodes * g > MAX_GPUS:
        raise RingtreeError(f"{args.nodes} nodes x {g} GPUs is more than {MAX_GPUS:,} ranks")
    pricer = NcclPricer(cluster, os.environ)
    shape = GroupShape(args.nodes * g, args.nodes, g)
    pricer.topology(args.nodes, g)  # the cluster's problems before the sizes'
    out = []
    for size in sweep_sizes(args):
        if size > MAX_SIZE_BYTES:
            raise RingtreeError(f"size {size:,} B is more than 2**60 B")
        size -= size % itemsize
        call = pricer.call(args.collective, shape, size, itemsize)
        out.append({**call.record(), "count": size // itemsize, "type": args.dtype,
                    "cluster": cluster.key, "model": pricer.model})
    return out


def run(args: argparse.Namespace) -> int:
    """Price the collective on the cluster; print a table or JSON; plot when asked."""
    if args.collective not in tuner.NCCL_COLLECTIVES and args.collective not in P2P_COLLECTIVES:
        raise RingtreeError(
            f"NCCL has no {args.collective.value}: torch.distributed's barrier on NCCL is an "
            "all-reduce of one element (ringtree cost all-reduce --size 4 --cluster ...)"
        )
    if args.params is not None:
        args.size = args.params * dtype_bytes(args.dtype)
    out = rows(args)
    if args.json:
        print_json({"rows": out})
    else:
        render(args, out)
    if args.plot:
        plot(args, out, Path(args.plot))
        stderr_console().print(f"wrote {args.plot}")
    return 0


def render(args: argparse.Namespace, out: list[dict[str, Any]]) -> None:
    """An nccl-tests table with NCCL's choice beside each line."""
    c: Cluster = args.cluster
    first = out[0]
    table = Table(
        title=f"{args.collective.value} on {args.nodes} x {first['n_ranks'] // args.nodes} GPUs "
        f"of {c.key} ({c.gpu.key}, {c.fabric}{' + NVLS' if c.nvls else ''}, "
        f"{c.nics_per_node} x {c.nic_gbps:g} Gb/s {c.network}): NCCL's choice, ringtree's time",
    )
    for name in ("size (B)", "count", "type", "time (us)", "algbw (GB/s)", "busbw (GB/s)",
                 "algorithm", "protocol", "channels"):
        table.add_column(name, justify="right")
    for r in out:
        table.add_row(
            f"{r['size_bytes']}", f"{r['count']}", r["type"], f"{r['time_s'] * 1e6:.2f}",
            f"{r['algbw_gbps']:.2f}", f"{r['busbw_gbps']:.2f}", r["nccl"].split("/")[0],
            r["nccl"].split("/")[1], f"{r['channels']}",
        )
    console = stdout_console()
    console.print(table)
    note = nccl_settings_note(c)
    note = f"; {note}" if note else ""
    console.print(
        f"time = softmax(host launch {format_time(first['host_s'], exact=False)}, "
        f"latency + bytes / busbw) -- docs/nccl-model.md{note}",
        soft_wrap=True,
    )


def plot(args: argparse.Namespace, out: list[dict[str, Any]], path: Path) -> None:
    """busbw against size (log x), one colour per algorithm/protocol NCCL picks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    x = [r["size_bytes"] for r in out]
    ax.plot(x, [r["busbw_gbps"] for r in out], color="0.6", lw=1)
    for choice in dict.fromkeys(r["nccl"] for r in out):
        pts = [r for r in out if r["nccl"] == choice]
        ax.scatter([r["size_bytes"] for r in pts], [r["busbw_gbps"] for r in pts], s=18,
                   label=choice, zorder=3)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    c: Cluster = args.cluster
    ax.set_title(f"{args.collective.value}, {args.nodes} x {c.key}: NCCL's choice, ringtree's time")
    ax.legend(title="NCCL algorithm/protocol", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    try:
        fig.savefig(path)
    except OSError as e:
        raise RingtreeError(f"cannot write {path}: {e.strerror}") from None
    finally:
        plt.close(fig)


def nccl_settings_note(c: Cluster) -> str:
    """The NCCL settings in force: the platform's (``nccl_env``) and the environment's."""
    user = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}
    parts = [f"{k}={v} (set by the platform)" for k, v in c.nccl_env if k not in user]
    return ", ".join(parts + [f"{k}={v}" for k, v in user.items()])
