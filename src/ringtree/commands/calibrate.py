"""``ringtree calibrate``: measure a sweep, fit the link constants by least squares, write a
profile that ``cost``, ``crossover``, ``plan`` and ``validate`` take as a link; or, with
``--nccl-tests LOG... --cluster X``, fit a cluster's NCCL model to its nccl-tests output and
write a cluster file (:mod:`ringtree.commands.calibrate_nccl`)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rich.table import Table

from ringtree.collectives import Collective
from ringtree.commands import args as A
from ringtree.commands import calibrate_nccl, nccl_logs
from ringtree.commands.sweep_options import (
    add_plot_option,
    add_save_option,
    add_sweep_options,
    check_can_measure,
    measure,
    note,
    save,
    sweep_from,
)
from ringtree.cost.host import under_load
from ringtree.cost.profile import link_table, write_profile
from ringtree.cost.select import short_time
from ringtree.errors import RingtreeError
from ringtree.measure.fit import Calibration, Fit, calibrate
from ringtree.measure.plots import plot_sweep
from ringtree.measure.result import BenchResult
from ringtree.output import print_json, stdout_console
from ringtree.units import format_bandwidth, format_bytes

#: Timed calls per line at least: the fit needs medians it can trust at the largest sizes.
FIT_MIN_ITERS = 20
#: What calibrate measures by default. All-gather moves the bytes reduce-scatter moves without
#: reducing them, which tells the cost of a byte (beta) from the cost of reducing it (gamma):
#: all-reduce alone cannot, its algorithms' reduced bytes grow with their wire bytes.
FIT_COLLECTIVES = (Collective.ALL_REDUCE, Collective.REDUCE_SCATTER, Collective.ALL_GATHER)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``calibrate`` command."""
    p = sub.add_parser(
        "calibrate",
        help="measure, fit alpha/beta/gamma by least squares, write a link profile (TOML)",
        description="Measure every algorithm over a sweep of sizes on N local processes, then "
        "fit the constants of the cost model to the median times by least squares (relative "
        "errors, constants >= 0): the plain alpha-beta model (steps x alpha + bytes / "
        "bandwidth + reduced bytes x gamma) and the one-machine model that the processes, "
        "sharing the cores, really follow (ringtree.cost.host). Prints both fits with their "
        "residuals and writes a profile: give it to cost/crossover/plan as --profile FILE "
        "(or --link FILE.toml), and check it with 'ringtree validate'. By default it measures "
        "all-reduce, reduce-scatter and all-gather: all-gather moves reduce-scatter's bytes "
        "without reducing them, which separates the cost of a byte from that of reducing it. "
        "With --nccl-tests LOG... --cluster X it measures nothing: it fits the NCCL model's "
        "constants of that cluster (launch floor, network hop, efficiencies) to the logs, "
        "holding back every --hold-back-th size to report the fit's error, and writes a "
        "cluster file for cost, crossover, plan and validate --cluster.",
    )
    add_sweep_options(
        p,
        min_size="48KiB",
        max_size="48MiB",
        step=4,
        budget_s=3.0,
        native=False,
        backends=True,
        op_letter=False,
        collectives="all-reduce, reduce-scatter and all-gather",
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="PROFILE.toml",
        type=A.output_file(".toml"),
        help="where to write the profile (with --nccl-tests: the cluster file)",
    )
    p.add_argument(
        "--cores",
        type=A.count,
        default=None,
        help="cores the processes share (default: this machine's)",
    )
    p.add_argument(
        "--from",
        dest="source",
        nargs="+",
        metavar="FILE.json",
        help="fit saved 'bench --json' results (one per transport) instead of measuring",
    )
    add_save_option(p)
    p.add_argument("--json", action="store_true", help="print the fits as JSON")
    add_plot_option(p, "draw the measured points and the fitted model (.png or .svg)")
    nccl_logs.add_arguments(p, "fit these logs instead of measuring")
    p.add_argument("--hold-back", type=A.non_negative_int, default=4, metavar="K",
                   help="with --nccl-tests: leave every K-th size out of the fit (the 2nd, "
                        "2nd + K, ...) and report the error there (default 4; 0: fit all)")
    nccl_logs.optional_ranks(p)
    p.set_defaults(func=run, nccl_foreign=nccl_logs.foreign(
        p, ("nccl_tests", "cluster", "hold_back", "output", "json", "quiet")))


def _per_backend(path: str | None, backend: str, n_backends: int) -> str | None:
    """``sweep.json`` for one transport, ``sweep-gloo.json`` ... for several."""
    if not path or n_backends == 1:
        return path
    stem, dot, ext = path.rpartition(".")
    return f"{stem}-{backend}.{ext}" if dot else f"{path}-{backend}"


def run(args: argparse.Namespace) -> int:
    """Measure per transport (or load), fit, write the profile, print the fits; or fit the
    NCCL model to nccl-tests logs."""
    nccl_logs.check_mode(args, "calibrate")
    if args.nccl_tests is not None:
        return calibrate_nccl.run(args)
    if args.hold_back != 4:
        raise RingtreeError("--hold-back goes with --nccl-tests LOG")
    out = args.output
    plot = Path(args.plot) if args.plot else None
    cores = args.cores or os.cpu_count() or 1
    results: list[BenchResult] = []
    if args.collective is None:
        args.collective = list(FIT_COLLECTIVES)
    if args.source:
        results = [BenchResult.load(path) for path in args.source]
    else:
        check_can_measure(args, "calibrate", args.backend)
        for backend in dict.fromkeys(args.backend):
            # unpipelined: on one machine the fitted model gains nothing from more chunks (each
            # costs messages, none saves CPU), so the profile runs them with one chunk; the fit
            # must see them so (a pipelined tree hid a one-chunk tree's slowness at 1-4 MiB)
            sweep = sweep_from(args, native=False, backend=backend, min_iters=FIT_MIN_ITERS,
                               chunks=1)
            found = measure(sweep, args.quiet)
            if found is None:
                return 1
            results.append(found)
            save(found, _per_backend(args.save, backend, len(args.backend)), args.quiet)
    cals = [calibrate(r, cores) for r in results]
    names = [c.backend for c in cals]
    if len(set(names)) != len(names):
        raise RingtreeError(
            f"two results for one transport ({', '.join(names)}): give one "
            "bench result per transport"
        )
    tables = {c.backend: link_table(c.link(), _fit_table(c)) for c in cals}
    write_profile(out, {"links": tables}, header=_header(cals))
    if args.json:
        print_json(
            {
                "profile": out,
                "links": [
                    {
                        "backend": c.backend,
                        "n_ranks": c.n_ranks,
                        "alpha-beta": c.plain.record(),
                        "host": c.host.record(),
                    }
                    for c in cals
                ],
            }
        )
    else:
        for c in cals:
            render(c)
    note(f"wrote {out}", args.quiet)
    if plot is not None:
        other = float((results[0].meta.get("load") or {}).get("other_cores", 0.0))
        plot_sweep(
            results[0],
            plot,
            link=under_load(cals[0].link(), other),
            title=f"calibration: {cals[0].backend}, {cals[0].n_ranks} processes, "
            f"{cores} cores: measured (points) and fitted model (lines)",
        )
        note(f"wrote {plot}", args.quiet)
    return 0


def _fit_table(c: Calibration) -> dict[str, object]:
    sizes = sorted({r.sample.size_bytes for r in c.host.residuals})
    algs = list(dict.fromkeys(r.sample.algorithm for r in c.host.residuals))
    cols = list(dict.fromkeys(r.sample.collective.value for r in c.host.residuals))
    load = c.meta.get("load") or {}
    fit = {
        "date": str(c.meta.get("date", "")),
        "collectives": cols,
        "algorithms": algs,
        "sizes": sizes,
        "samples": len(c.host.residuals),
        "timing": str(c.meta.get("timing", "")),
        "host_median_abs_error": c.host.median_abs_error,
        "host_worst_abs_error": c.host.worst_abs_error,
        "host_dropped": list(c.host.dropped),
        "plain_median_abs_error": c.plain.median_abs_error,
        "plain_worst_abs_error": c.plain.worst_abs_error,
        "plain_dropped": list(c.plain.dropped),
    }
    fit["free_cores"] = c.host.cores
    if "other_cores" in load:
        fit["other_programs_cores"] = load["other_cores"]
    return {"backend": c.backend, "n_ranks": c.n_ranks, "fit": fit}


def _header(cals: list[Calibration]) -> str:
    lines = ["ringtree link profile, written by 'ringtree calibrate'."]
    for c in cals:
        lines.append(
            f"{c.backend}: {c.n_ranks} processes on {c.cores} cores, "
            f"{c.meta.get('host', '')}, {c.meta.get('date', '')}"
        )
    lines.append("Use: ringtree cost all-reduce -n 4 --size 64MiB --profile THIS.toml")
    return "\n".join(lines)


def render(c: Calibration) -> None:
    """The two fits side by side, then the residuals of the model the profile uses."""
    console = stdout_console()
    t = Table(
        title=f"{c.backend} on {c.n_ranks} processes, {c.cores} cores ({c.host.cores:.2f} left "
        f"free by other programs while timing): fitted "
        f"constants ({len(c.host.residuals)} measured lines)"
    )
    for name in (
        "model",
        "alpha (per step)",
        "per message",
        "bandwidth",
        "reduce (1/gamma)",
        "median |error|",
        "worst |error|",
    ):
        t.add_column(name, justify="left" if name == "model" else "right")
    for label, f in (
        ("one machine (used up to 256 ranks)", c.host),
        ("alpha-beta (plain)", c.plain),
    ):
        k = f.constants
        t.add_row(
            label,
            short_time(k["alpha_s"]),
            short_time(k["message_s"]) if "message_s" in k else "-",
            format_bandwidth(f.bandwidth_Bps),
            format_bandwidth(1 / k["gamma_s_per_byte"]) if k["gamma_s_per_byte"] else "free",
            f"{f.median_abs_error:.1%}",
            f"{f.worst_abs_error:.1%}",
        )
    console.print(t)
    _residuals(c.host, c.plain)


def _residuals(host: Fit, plain: Fit) -> None:
    t = Table(title="residuals: fitted against measured (error = fitted / measured - 1)")
    for name in (
        "collective",
        "algorithm",
        "size",
        "chunks",
        "measured",
        "one machine",
        "error",
        "alpha-beta",
        "error ",
    ):
        t.add_column(name, justify="left" if name in ("collective", "algorithm") else "right")
    for h, p in zip(host.residuals, plain.residuals, strict=True):
        s = h.sample
        t.add_row(
            s.collective.value,
            s.algorithm,
            format_bytes(s.size_bytes),
            str(s.n_chunks or "-"),
            short_time(s.time_s),
            short_time(h.predicted_s),
            f"{h.error:+.0%}",
            short_time(p.predicted_s),
            f"{p.error:+.0%}",
        )
    stdout_console().print(t)
