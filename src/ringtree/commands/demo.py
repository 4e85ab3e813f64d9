"""``ringtree demo``: the main job. A ring all-reduce across 4 local gloo processes: the
schedule step by step, the run verified against torch.distributed's own all_reduce, and the
measured time next to the model's prediction."""

from __future__ import annotations

import argparse

from rich.table import Table

from ringtree.algorithms import build
from ringtree.collectives import Collective
from ringtree.commands import local
from ringtree.cost.select import short_time
from ringtree.cost.terms import step_times_s
from ringtree.output import print_json, stderr_console, stdout_console
from ringtree.procs.run import RunFailed, run_processes
from ringtree.runtime.auto import seen_link
from ringtree.trace.steps import trace_data
from ringtree.trace.text import render_steps
from ringtree.units import format_bytes

N_RANKS, SIZE_BYTES, ITERS = 4, 1 << 20, 10


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``demo`` command."""
    p = sub.add_parser(
        "demo",
        help="the main job: a ring all-reduce on 4 local processes, traced, verified, timed",
        description="Run a ring all-reduce of 1 MiB across 4 local processes over "
        "torch.distributed (gloo, 127.0.0.1): print the schedule step by step, check the "
        "result against dist.all_reduce on the same data, and compare the measured time with "
        "the alpha-beta model's prediction.",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the schedule, each step's predicted and measured time, the bytes sent and "
        "the verdict as JSON",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Trace, run, verify, compare; exit 1 if the run fails or the result is wrong."""
    local.require_torch("demo")
    out, err = stdout_console(), stderr_console()
    s = build(Collective.ALL_REDUCE, "ring", N_RANKS)
    count, itemsize = SIZE_BYTES // 4, 4
    link = seen_link("gloo", N_RANKS)
    predicted = step_times_s(s, count, itemsize, link)
    trace = trace_data(s, count, itemsize)
    if not args.json:
        out.print(
            f"ringtree demo: ring all-reduce of {format_bytes(SIZE_BYTES)} (float32) across "
            f"{N_RANKS} local processes over torch.distributed (gloo, 127.0.0.1)\n",
            highlight=False,
        )
        render_steps(out, trace, step_times=predicted)
    err.print(f"starting {N_RANKS} processes ...", highlight=False)
    try:
        report = run_processes(N_RANKS, Collective.ALL_REDUCE, SIZE_BYTES, algorithm="ring",
                               iters=ITERS, timeout_s=60.0)
    except RunFailed as e:
        err.print(f"ringtree: error: {e}", highlight=False, markup=False)
        return 1
    # a step ends when its slowest rank is done with it
    done = [max(col) for col in zip(*report.step_done_s, strict=True)]
    measured = [b - a for a, b in zip([0.0, *done], done, strict=False)]
    sent = {(r["bytes_sent"], r["bytes_sent_schedule"]) for r in report.ranks}
    same = all(a == b for a, b in sent)
    if args.json:
        print_json(
            {
                "trace": trace,
                "link": link.name,
                "predicted_step_s": predicted,
                "measured_step_s": measured,
                "bytes_sent_match_schedule": same,
                "run": report.record(),
            }
        )
        return 0 if report.correct and same else 1
    table = Table(title="each step: predicted vs measured (median of the slowest rank)")
    for name in ("step", "phase", "predicted", "measured"):
        table.add_column(name, justify="left" if name == "phase" else "right")
    for k, (p, m) in enumerate(zip(predicted, measured, strict=True)):
        table.add_row(str(k + 1), s.steps[k].phase, short_time(p), short_time(m))
    out.print(table)
    per_rank = ", ".join(f"{r['bytes_sent']:,}" for r in report.ranks)
    out.print(
        f"bytes sent per rank: {per_rank} "
        f"counted by the transport, {'equal to' if same else 'DIFFERENT FROM'} the schedule's "
        f"2(N-1)/N x S = {s.bytes_sent(0, count, itemsize):,}",
        highlight=False,
    )
    if report.correct:
        out.print(
            f"verified against torch.distributed: dist.all_reduce on the same inputs gives "
            f"the same result on all {N_RANKS} ranks",
            highlight=False,
        )
    else:
        out.print("WRONG: the result differs from torch.distributed's dist.all_reduce")
    ratio = report.time_s / report.predicted_s
    out.print(
        f"time per call: measured {short_time(report.time_s)} (median of {ITERS}), predicted "
        f"{short_time(report.predicted_s)} ({s.n_steps} steps x alpha {short_time(link.alpha_s)}"
        f" + {format_bytes(s.bytes_sent(0, count, itemsize))} at "
        f"{link.bandwidth_Bps / 1e9:.2f} GB/s on the loopback link); measured/predicted "
        f"{ratio:.2f}",
        highlight=False,
    )
    return 0 if report.correct and same else 1
