"""``ringtree validate --nccl-tests LOG... --cluster X``: each size of a cluster's nccl-tests
output against the NCCL model of that cluster, the error, and findings where the measurement
falls outside what the cluster should give (:mod:`ringtree.measure.nccl_diagnose`)."""

from __future__ import annotations

import argparse

from rich.table import Table

from ringtree.commands import nccl_logs
from ringtree.measure.nccl_diagnose import Check, Validation, validate
from ringtree.measure.nccl_tests import size_label
from ringtree.output import print_json, stdout_console

MARKS = {1: "short", -1: "faster", 0: ""}


def run(args: argparse.Namespace) -> int:
    """Read the logs and the cluster, compare, print."""
    tests, cluster, env = nccl_logs.read(args)
    v = validate(tests, cluster, env)
    if args.json:
        rec = v.record()
        rec["logs"] = list(args.nccl_tests)
        print_json(rec)
    else:
        render(v, nccl_logs.shapes(tests))
    return 0


def render(v: Validation, shapes: str) -> None:
    """One table per test, the median error, then the findings."""
    console = stdout_console()
    runs: dict[int, list[Check]] = {}
    for c in v.checks:
        runs.setdefault(id(c.run), []).append(c)
    for checks in runs.values():
        r, t = checks[0].run, checks[0].test
        table = Table(title=f"{t.test}_perf on {r.nodes} x {r.gpus_per_node} GPUs ({t.source}, "
                            f"line {t.line}) against {v.cluster.key}: busbw measured and "
                            "predicted (error = predicted / measured - 1)")
        for name in ("size", "time", "busbw", "predicted", "error", "NCCL (model)", "bytes",
                     ""):
            table.add_column(name, justify="left" if name in ("NCCL (model)", "") else "right")
        for c in checks:
            table.add_row(size_label(c.size_bytes), f"{c.measured_us:.1f} us",
                          f"{c.measured_busbw_gbps:.2f}", f"{c.predicted_busbw_gbps:.2f}",
                          f"{c.error:+.1%}", c.choice, f"{c.bytes_share:.0%}",
                          MARKS[c.outside])
        console.print(table)
    console.print(f"{shapes}: median |error| {v.median_abs_error:.1%} over {len(v.checks)} "
                  "sizes", highlight=False)
    if not v.findings:
        console.print(f"every size within what {v.cluster.key} should give", highlight=False)
    for f in v.findings:
        console.print(f"[{f.kind}] {f.message}", highlight=False, markup=False)
