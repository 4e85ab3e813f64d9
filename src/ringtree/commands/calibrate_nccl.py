"""``ringtree calibrate --nccl-tests LOG... --cluster X -o FILE.toml``: fit the NCCL model's
per-cluster constants to a cluster's nccl-tests output and write a cluster file that
``cost``, ``crossover``, ``plan`` and ``validate`` take (:mod:`ringtree.measure.nccl_fit`)."""

from __future__ import annotations

import argparse
import datetime
import math
from pathlib import Path
from typing import Any

from rich.table import Table

from ringtree import __version__
from ringtree.collectives import bus_factor
from ringtree.commands import nccl_logs
from ringtree.commands.sweep_options import note
from ringtree.cost.clusters import Cluster, read_cluster_table
from ringtree.cost.profile import toml_text
from ringtree.errors import RingtreeError
from ringtree.measure import nccl_fit, published
from ringtree.measure.nccl_tests import Test, size_label
from ringtree.output import print_json, stdout_console

#: Keys of a base cluster file that the calibration writes anew.
FITTED_KEYS = ("launch_us", "net_hop_us", "nccl_model", "nccl_model_multinode")


def run(args: argparse.Namespace) -> int:
    """Read the logs, fit, write the cluster file, print the fit."""
    tests, cluster, env = nccl_logs.read(args)
    cal = nccl_fit.fit(tests, cluster, args.hold_back, env)
    text = file_text(cal, args.cluster, args.nccl_tests, tests)
    try:
        Path(args.output).write_text(text)
    except OSError as e:
        raise RingtreeError(f"cannot write cluster file {args.output!r}: {e.strerror}") from None
    rec = record(cal, args, tests)
    if args.json:
        print_json(rec)
    else:
        render(cal, rec, tests)
    note(f"wrote {args.output}", args.quiet)
    return 0


def _at_bounds(cal: nccl_fit.Calibration) -> list[str]:
    """The fitted constants that ended at a bound of their search."""
    out = []
    bounds = {name: (lo, hi) for name, lo, hi, _ in nccl_fit.CONSTANTS}
    for key in cal.fitted:
        if key.split(".")[-1] not in bounds:  # the floor's fields: set, not searched
            continue
        lo, hi = bounds[key.split(".")[-1]]
        v = nccl_fit.value_of(cal.cluster, key)
        if min(abs(v - lo), abs(v - hi)) <= 0.002 * (hi - lo):
            out.append(key)
    return out


def record(cal: nccl_fit.Calibration, args: argparse.Namespace,
           tests: list[Test]) -> dict[str, Any]:
    """Plain data of the fit (``--json``, and the file's [calibration] table)."""
    return {
        "cluster_file": args.output, "base": args.cluster, "logs": list(args.nccl_tests),
        "tests": nccl_logs.shapes(tests), "constants": cal.constants(),
        "fitted": list(cal.fitted), "at_bounds": _at_bounds(cal), "fit_points": cal.fit_points,
        "fit_mean_abs_error": cal.fit_mean_abs_error,
        "uncalibrated_mean_abs_error": cal.uncalibrated_mean_abs_error,
        "held_back_sizes": list(cal.held_back_sizes),
        "held_back_mean_abs_error": cal.held_back_mean_abs_error,
        "held_back_median_abs_error": cal.held_back_median_abs_error,
        "held_back": [{"collective": p.run.collective.value, "nodes": p.run.nodes,
                       "size_bytes": p.size, "measured_busbw_gbps": _busbw(p, p.measured_us),
                       "predicted_busbw_gbps": p.predicted_busbw,
                       "error": (p.measured_us or 0.0) / p.predicted_us - 1}
                      for p in cal.held_back],
        "seconds": cal.seconds,
    }


def _busbw(p: published.Point, time_us: float | None) -> float:
    """busbw (GB/s) of a point's size in ``time_us``."""
    r = p.run
    return p.size * bus_factor(r.collective, r.n_ranks) / ((time_us or math.inf) * 1e3)


def file_text(cal: nccl_fit.Calibration, base: str, logs: list[str],
              tests: list[Test]) -> str:
    """The cluster file: the base (``preset = NAME``, or a file's own keys), the fitted
    constants, and a [calibration] table saying from what and how well."""
    if base.strip().lower().endswith(".toml"):
        table = {k: v for k, v in read_cluster_table(base).items() if k not in FITTED_KEYS}
    else:
        table = {"preset": cal.cluster.key}
    c: Cluster = cal.cluster
    for key in ("launch_us", "net_hop_us"):
        if getattr(c, key) is not None:
            table[key] = round(float(getattr(c, key)), 4)
    for key in ("nccl_model", "nccl_model_multinode"):
        if getattr(c, key):
            table[key] = {k: round(v, 6) for k, v in getattr(c, key)}
    held = cal.held_back_median_abs_error
    calibration = {
        "written_by": f"ringtree {__version__} calibrate --nccl-tests",
        "date": datetime.date.today().isoformat(), "logs": [Path(x).name for x in logs],
        "tests": nccl_logs.shapes(tests), "fitted": list(cal.fitted), "tried": list(cal.tried),
        "fit_points": cal.fit_points, "fit_mean_abs_error": round(cal.fit_mean_abs_error, 4),
        "held_back_sizes": list(cal.held_back_sizes),
    }
    if held is not None:
        calibration["held_back_median_abs_error"] = round(held, 4)
        calibration["held_back_mean_abs_error"] = round(cal.held_back_mean_abs_error or 0.0, 4)
    header = (f"ringtree cluster file: {base} with the NCCL model's constants fitted to\n"
              f"{', '.join(Path(x).name for x in logs)} ({nccl_logs.shapes(tests)}).\n"
              "Use: ringtree cost all-reduce --cluster THIS.toml --nodes N --size 1GiB")
    return toml_text({"cluster": table, "calibration": calibration}, header)


def render(cal: nccl_fit.Calibration, rec: dict[str, Any], tests: list[Test]) -> None:
    """The fitted constants, then the held-back sizes against the fitted model."""
    console = stdout_console()
    t = Table(title=f"{cal.cluster.key}: constants fitted to {rec['tests']}")
    for name in ("constant", "fitted", "note"):
        t.add_column(name, justify="left" if name != "fitted" else "right")
    for name, value in rec["constants"].items():
        why = ("at its bound: the model lacks a term here" if name in rec["at_bounds"] else
               "set by the floor (sizes up to 4 KiB)" if name in ("launch_us", "net_hop_us")
               else "" if name in cal.fitted else "the model's value fitted best (not written)")
        t.add_row(name, f"{value:.4g}", why)
    console.print(t)
    if cal.held_back:
        h = Table(title="held back from the fit: measured against the fitted model")
        for name in ("collective", "nodes", "size", "measured busbw", "predicted", "error"):
            h.add_column(name, justify="left" if name == "collective" else "right")
        for p in cal.held_back:
            h.add_row(p.run.collective.value, str(p.run.nodes), size_label(p.size),
                      f"{_busbw(p, p.measured_us):.2f} GB/s", f"{p.predicted_busbw:.2f} GB/s",
                      f"{(p.measured_us or 0.0) / p.predicted_us - 1:+.1%}")
        console.print(h)
    held = cal.held_back_median_abs_error
    console.print(
        f"mean |busbw error| on the {cal.fit_points} fitted sizes "
        f"{cal.fit_mean_abs_error:.1%} ({cal.uncalibrated_mean_abs_error:.1%} before)"
        + (f"; on the {len(cal.held_back)} held back: median {held:.1%}, mean "
           f"{cal.held_back_mean_abs_error:.1%}" if held is not None else "")
        + f"; {cal.seconds:.1f} s", highlight=False)
