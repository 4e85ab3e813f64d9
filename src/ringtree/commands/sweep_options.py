"""Options shared by ``bench``, ``calibrate`` and ``validate`` (nccl-tests' letters where
it has them: -b -e -f -w -d -o -r), and running a sweep with a progress bar on stderr."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable

from ringtree.bench.result import BenchResult
from ringtree.bench.sweep import (
    BENCH_DTYPES,
    DEFAULT_MAX_ITERS,
    DEFAULT_MIN_ITERS,
    BenchFailed,
    Sweep,
    sizes,
    stderr_progress,
)
from ringtree.collectives import ReduceOp
from ringtree.commands import args as A
from ringtree.commands import local
from ringtree.cost.terms import Link
from ringtree.errors import RingtreeError
from ringtree.output import stderr_console
from ringtree.procs.run import oversubscription_warning

#: Timed (and untimed) calls per line (or run) at most: medians stop moving within a few
#: hundred (OSU's micro-benchmarks time 10,000 calls of their smallest messages); more only
#: run longer (10,000 calls of 1 MiB take ~20 s on 2 cores, of 64 MiB ~15 minutes).
MAX_ITERS = 10_000
#: Sizes per sweep at most: each is measured with every algorithm (-f 2 covers 1 B to 1 EiB
#: in 61).
MAX_SIZES = 100


def factor(text: str) -> float:
    """A size factor (> 1 is checked with the sizes, so the message names -f); finite."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 1, got {text!r}") from None
    if math.isinf(value):
        raise argparse.ArgumentTypeError(f"expected a finite number > 1, got {text!r}")
    return value


def iterations(low: int) -> Callable[[str], int]:
    """--iters (low 1) or --warmup (low 0): at most MAX_ITERS."""
    return A.int_up_to(MAX_ITERS, "more only run longer", low=low)


def add_sweep_options(
    p: argparse.ArgumentParser,
    *,
    min_size: str,
    max_size: str,
    step: float,
    budget_s: float,
    native: bool,
    backends: bool = False,
    op_letter: bool = True,
    collectives: str = "all-reduce",
) -> None:
    """The measuring options, with this command's default sizes and time budget
    (``backends``: --backend takes several, one link each; ``op_letter``: -o is --op)."""
    A.add_workers(p, A.int_up_to(local.MAX_LOCAL_RANKS, "local processes"))
    local.add_force(p)
    if backends:
        p.add_argument(
            "--backend",
            choices=("gloo", "mpi"),
            nargs="+",
            default=["gloo"],
            help="transports to calibrate, one link each: gloo (default), mpi",
        )
    else:
        p.add_argument(
            "--backend",
            choices=("gloo", "mpi"),
            default="gloo",
            help="gloo (torch.distributed, default) or mpi (mpi4py under mpirun)",
        )
    p.add_argument(
        "-b",
        "--minbytes",
        type=A.size,
        default=A.size(min_size),
        metavar="MIN",
        help=f"smallest buffer (default {min_size}; 4K = 4000 B, 4KiB = 4096 B)",
    )
    p.add_argument(
        "-e",
        "--maxbytes",
        type=A.size,
        default=A.size(max_size),
        metavar="MAX",
        help=f"largest buffer (default {max_size})",
    )
    p.add_argument(
        "-f",
        "--stepfactor",
        type=factor,
        default=step,
        metavar="F",
        help=f"multiply the size by F each line, F > 1 (default {step:g})",
    )
    p.add_argument(
        "-c",
        "--collective",
        type=A.collective,
        nargs="+",
        default=None,
        metavar="C",
        help=f"collectives to measure (default {collectives})",
    )
    p.add_argument(
        "-a",
        "--algorithms",
        default=None,
        metavar="LIST",
        help=f"comma-separated, of {A.ALGORITHM_NAMES}"
        + (", native (the engine's own call)" if native else "")
        + " (default: every algorithm that runs on N ranks"
        + (", then native)" if native else ")"),
    )
    p.add_argument(
        "-w",
        "--warmup",
        type=iterations(0),
        default=2,
        help="untimed (but checked) calls of each line first (default 2)",
    )
    p.add_argument(
        "--iters",
        type=iterations(1),
        default=None,
        metavar="K",
        help="timed calls per line (default: enough to fill --budget per size, "
        f"{DEFAULT_MIN_ITERS}..{DEFAULT_MAX_ITERS})",
    )
    p.add_argument(
        "--budget",
        type=A.positive_duration,
        default=budget_s,
        metavar="T",
        help=f"time per size for the timed calls of all algorithms (default {budget_s:g}s)",
    )
    p.add_argument(
        "-d",
        "--dtype",
        default="float32",
        help=f"element type: {', '.join(BENCH_DTYPES)} (default float32)",
    )
    p.add_argument(
        *(["-o"] if op_letter else []),
        "--op",
        default="sum",
        help="reduce op: sum (default), product, min, max, avg",
    )
    p.add_argument(
        "-r",
        "--root",
        type=A.non_negative_int,
        default=0,
        help="root of broadcast/reduce (default 0)",
    )
    p.add_argument(
        "--timeout",
        type=A.positive_duration,
        default=60.0,
        help="limit per call (default 60s): a dead or silent rank fails within it",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar or notes")


def sweep_from(
    args: argparse.Namespace,
    *,
    in_place: bool = False,
    link: Link | None = None,
    native: bool = True,
    backend: str | None = None,
    min_iters: int = DEFAULT_MIN_ITERS,
    chunks: int | None = None,
) -> Sweep:
    """The Sweep the options describe (RingtreeError on bad sizes)."""
    algs = None
    if args.algorithms is not None:
        algs = tuple(a.strip().lower() for a in args.algorithms.split(",") if a.strip())
    cols = tuple(args.collective) if args.collective else None
    kw = {"collectives": cols} if cols else {}
    return Sweep(
        n_ranks=args.ranks,
        sizes=tuple(sweep_sizes(args)),
        algorithms=algs,
        backend=backend or args.backend,
        dtype=args.dtype,
        op=ReduceOp.parse(args.op),
        root=args.root,
        warmup=args.warmup,
        iters=args.iters,
        budget_s=args.budget,
        min_iters=min_iters,
        in_place=in_place,
        timeout_s=args.timeout,
        link=link,
        native=native,
        chunks=chunks,
        **kw,
    )


def sweep_sizes(args: argparse.Namespace) -> list[int]:
    """The sizes -b -e -f give (RingtreeError when they are more than MAX_SIZES)."""
    lo, hi, f = args.minbytes, args.maxbytes, args.stepfactor
    if 1 <= lo <= hi and f > 1 and math.log(hi / lo) / math.log(f) >= MAX_SIZES:
        raise RingtreeError(
            f"-b {lo:,} -e {hi:,} -f {f:.10g} make over {MAX_SIZES} sizes: at most {MAX_SIZES} per "
            "sweep (each is measured with every algorithm); give a larger -f"
        )
    return sizes(lo, hi, f)


def check_can_measure(args: argparse.Namespace, command: str, backends: list[str]) -> None:
    """Before starting any process: PyTorch for gloo, the processes fit the cores (or
    --force), the largest size fits the memory; RingtreeError (one line) otherwise."""
    if "gloo" in backends:
        local.require_torch(f"{command} --backend gloo", "or use --backend mpi, or --from FILE")
    local.check_ranks(args.ranks, args.force)
    top = max(sweep_sizes(args), default=0)
    local.check_memory(args.ranks, top, args.dtype, what="the sweep's largest size", flag="-e")


def measure(sweep: Sweep, quiet: bool) -> BenchResult | None:
    """Run the sweep with a progress bar on stderr (a terminal only); None after printing
    the ranks' errors when it failed."""
    from ringtree.bench.sweep import run_sweep

    err = stderr_console()
    warning = oversubscription_warning(sweep.n_ranks)
    if warning and not quiet:
        err.print(f"ringtree: warning: {warning}", highlight=False, soft_wrap=True)
    update, close = stderr_progress() if not quiet else (None, lambda: None)
    try:
        return run_sweep(sweep, update)
    except BenchFailed as e:
        err.print(f"ringtree: error: {e}", highlight=False, soft_wrap=True, markup=False)
        return None
    finally:
        close()


def note(text: str, quiet: bool) -> None:
    """A message on stderr (not with --quiet)."""
    if not quiet:
        print(text, file=sys.stderr)


def add_save_option(p: argparse.ArgumentParser) -> None:
    """``--save FILE.json``: keep the measured sweep (what ``bench --json`` writes)."""
    p.add_argument(
        "--save",
        metavar="FILE.json",
        type=A.output_file(),
        help="also write the measured sweep as JSON (reuse it with --from)",
    )


def add_plot_option(p: argparse.ArgumentParser, text: str) -> None:
    """``--plot FILE`` (.png or .svg), checked writable before any work."""
    from ringtree.bench.plots import SUFFIXES

    p.add_argument("--plot", metavar="FILE", type=A.output_file(*SUFFIXES), help=text)


def save(result: BenchResult, path: str | None, quiet: bool) -> None:
    """Write ``result`` as JSON to ``path`` (nothing when None)."""
    if not path:
        return
    import json

    try:
        with open(path, "w") as f:
            json.dump(result.record(), f, indent=1, allow_nan=False)
    except OSError as e:
        from ringtree.errors import RingtreeError

        raise RingtreeError(f"cannot write {path!r}: {e.strerror}") from None
    note(f"wrote {path}", quiet)
