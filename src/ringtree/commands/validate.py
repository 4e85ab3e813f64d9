"""``ringtree validate``: measure sizes a calibration did not see and compare them with the
profile's predictions; check that auto picks the fastest algorithm. With ``--nccl-tests LOG
--cluster X``: a cluster's nccl-tests output against what the NCCL model says that cluster
should give, and why not (:mod:`ringtree.commands.validate_nccl`)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from rich.table import Table

from ringtree.commands import nccl_logs, validate_nccl
from ringtree.commands.calibrate import FIT_MIN_ITERS
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
from ringtree.cost.host import HostLink, under_load
from ringtree.cost.profile import profile_entry
from ringtree.cost.select import short_time
from ringtree.cost.terms import Link
from ringtree.errors import RingtreeError
from ringtree.measure.plots import plot_sweep
from ringtree.measure.result import BenchResult
from ringtree.measure.validate import AUTO_TOLERANCE, Validation, validate
from ringtree.output import print_json, stdout_console
from ringtree.units import format_bytes


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``validate`` command."""
    p = sub.add_parser(
        "validate",
        help="predicted vs measured time on sizes the calibration did not see",
        description="Measure every algorithm at sizes the profile's fit did not see (default "
        "64KiB to 64MiB) on N local processes, and print the profile's prediction next to "
        "each median time with its error (predicted / measured - 1), the median and worst "
        "absolute error, and for every size whether the automatic choice on the profile "
        f"picked the measured fastest algorithm or one within {AUTO_TOLERANCE:.0%} of it. "
        "With --nccl-tests LOG --cluster X it measures nothing: it compares each size of the "
        "logs with the NCCL model of that cluster (a preset or a calibrated file) and says "
        "where the measurement falls outside what the cluster should give, and the likely "
        "causes the model can tell apart.",
    )
    p.add_argument(
        "--profile",
        default=None,
        metavar="FILE.toml[#NAME]",
        help="a profile from 'ringtree calibrate' (#NAME picks a transport)",
    )
    add_sweep_options(p, min_size="64KiB", max_size="64MiB", step=2, budget_s=4.0, native=False)
    p.set_defaults(backend=None)
    add_save_option(p)
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    add_plot_option(p, "draw measured points and the profile's model lines (.png or .svg)")
    p.add_argument(
        "--from",
        dest="source",
        metavar="FILE.json",
        help="compare saved 'bench --json' results instead of measuring",
    )
    nccl_logs.add_arguments(p, "compare these logs instead of measuring")
    nccl_logs.optional_ranks(p)
    p.set_defaults(func=run, nccl_foreign=nccl_logs.foreign(
        p, ("nccl_tests", "cluster", "json", "quiet")))


def run(args: argparse.Namespace) -> int:
    """Measure (or load) unseen sizes, compare, print; or compare nccl-tests logs with the
    NCCL model of a cluster."""
    nccl_logs.check_mode(args, "validate")
    if args.nccl_tests is not None:
        return validate_nccl.run(args)
    if args.profile is None:
        raise RingtreeError("give --profile FILE.toml (from 'ringtree calibrate'), or "
                            "--nccl-tests LOG --cluster X")
    link, table = profile_entry(args.profile)
    plot = Path(args.plot) if args.plot else None
    fit = table.get("fit") if isinstance(table.get("fit"), dict) else {}
    seen = {int(s) for s in fit.get("sizes", []) if isinstance(s, int)}
    fitted_n = int(table.get("n_ranks", 0) or 0)
    if fitted_n and fitted_n != args.ranks:
        note(
            f"ringtree: note: the profile was fitted on {fitted_n} processes; validating "
            f"on {args.ranks}",
            args.quiet,
        )
    if args.source:
        result = BenchResult.load(args.source)
    else:
        backend = args.backend or str(table.get("backend", "gloo"))
        check_can_measure(args, "validate", [backend])
        sweep = sweep_from(args, link=link, native=False, backend=backend, min_iters=FIT_MIN_ITERS)
        unseen = tuple(s for s in sweep.sizes if s not in seen) or sweep.sizes
        found = measure(replace(sweep, sizes=unseen), args.quiet)
        if found is None:
            return 1
        result = found
        save(result, args.save, args.quiet)
    other = float((result.meta.get("load") or {}).get("other_cores", 0.0))
    loaded = under_load(link, other)
    v = validate(result, loaded, skip_sizes=seen)
    others = {"idle_machine": link if loaded is not link else None, "plain_alpha_beta":
              _plain_view(link)}
    extra = {k: validate(result, x, skip_sizes=seen) for k, x in others.items() if x is not None}
    if args.json:
        rec = v.record()
        for k, e in extra.items():
            rec[k] = {"median_abs_error": e.median_abs_error, "worst_abs_error":
                      e.worst_abs_error, "auto_right": e.auto_right[0]}
        rec["load"] = result.meta.get("load", {})
        print_json(rec)
    else:
        render(v, extra, result, fit)
    if plot is not None:
        plot_sweep(
            result,
            plot,
            link=loaded,
            title=f"validate {link.name}: measured (points) vs predicted (lines), "
            f"{result.meta.get('n_ranks')} processes",
        )
        note(f"wrote {plot}", args.quiet)
    return 0


def _plain_view(link: Link) -> Link | None:
    """The same profile without its one-machine model (the plain alpha-beta fit)."""
    if isinstance(link, HostLink) and link.host is not None:
        return replace(link, host=None, name=f"{link.name} (alpha-beta)")
    return None


def render(v: Validation, extra: dict[str, Validation], result: BenchResult, fit: dict) -> None:
    """Per size and algorithm: measured, predicted, error; per size: auto's pick; summary."""
    console = stdout_console()
    picks = {(p.collective, p.size_bytes): p for p in v.picks}
    t = Table(
        title=f"{v.link} on {v.n_ranks} processes: predicted vs measured "
        "(median of the calls), sizes the fit did not see"
    )
    for name in ("collective", "size", "algorithm", "chunks", "measured", "predicted", "error", ""):
        t.add_column(name, justify="left" if name in ("collective", "algorithm", "") else "right")
    for c in v.checks:
        p = picks[(c.collective, c.size_bytes)]
        tags = [
            x
            for x, on in (("fastest", c.algorithm == p.fastest), ("auto", c.algorithm == p.auto))
            if on
        ]
        t.add_row(
            c.collective,
            format_bytes(c.size_bytes),
            c.algorithm,
            str(c.n_chunks or "-"),
            short_time(c.measured_s),
            short_time(c.predicted_s),
            f"{c.error:+.1%}",
            ", ".join(tags),
        )
    console.print(t)
    for p in v.picks:
        if p.ok is None:
            line = f"auto picks {p.auto}, which was not measured"
        else:
            slower = p.auto_measured_s / p.fastest_s - 1  # type: ignore[operator]
            verdict = "ok" if p.ok else "NO"
            line = (
                f"auto picks {p.auto}: {'the fastest' if p.auto == p.fastest else f'{slower:+.0%} vs fastest {p.fastest}'}"  # noqa: E501
                f" -> {verdict}"
            )
        console.print(f"{p.collective} {format_bytes(p.size_bytes):>9}: {line}", highlight=False)
    right, judged = v.auto_right
    w = v.worst
    console.print(
        f"median |error| {v.median_abs_error:.1%}, worst {v.worst_abs_error:.1%}"
        + (f" ({w.algorithm} at {format_bytes(w.size_bytes)})" if w else "")
        + f"; auto picked the fastest or within {AUTO_TOLERANCE:.0%} of it at {right} of "
        f"{judged} sizes ({right / max(judged, 1):.0%})",
        highlight=False,
    )
    labels = {
        "idle_machine": "predicted for an idle machine (the load not counted)",
        "plain_alpha_beta": "the plain alpha-beta fit",
    }
    for key, e in extra.items():
        console.print(
            f"{labels[key]}: median |error| {e.median_abs_error:.1%}, worst "
            f"{e.worst_abs_error:.1%}, auto right at {e.auto_right[0]} of {e.auto_right[1]} sizes",
            highlight=False,
        )
    load = result.meta.get("load") or {}
    if "other_cores" in load:
        was = fit.get("other_programs_cores")
        then = f" (during calibration: {was:.2f})" if isinstance(was, float) else ""
        console.print(
            f"other programs used {load['other_cores']:.2f} cores while timing{then}; predicted "
            f"for the {v.free_cores:.2f} cores they left free"
            if v.free_cores
            else f"other programs used {load['other_cores']:.2f} cores while timing{then}",
            highlight=False,
        )
    if v.skipped_sizes:
        console.print(
            "left out (the fit saw them): " + ", ".join(format_bytes(s) for s in v.skipped_sizes),
            highlight=False,
        )
