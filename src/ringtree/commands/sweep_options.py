"""Options shared by ``bench``, ``calibrate`` and ``validate`` (nccl-tests' letters where
it has them: -b -e -f -w -d -o -r; ``bench`` takes nccl-tests' whole set, -n -c -a -g -t -i
-T -J and those without a meaning on CPU), and running a sweep with a progress bar on
stderr."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import Any

from ringtree.collectives import ReduceOp
from ringtree.commands import args as A
from ringtree.commands import local
from ringtree.cost.terms import Link
from ringtree.errors import RingtreeError
from ringtree.measure.result import BenchResult
from ringtree.measure.sweep import BENCH_DTYPES, DEFAULT_MAX_ITERS, DEFAULT_MIN_ITERS, Sweep, sizes
from ringtree.measure.sweep_run import BenchFailed, OnLine, stderr_progress
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
    nccl_tests: bool = False,
) -> None:
    """The measuring options, with this command's default sizes and time budget
    (``backends``: --backend takes several, one link each; ``op_letter``: -o is --op).
    ``nccl_tests``: nccl-tests' letters mean what they mean there (``bench``: -n iterations,
    -c check, -a average, -g/-t ranks, and its other flags: :func:`add_nccl_tests_flags`);
    ringtree's own -n (ranks), -c (collectives), -a (algorithms) stay as long names."""
    _add_ranks(p, nccl_tests)
    _add_backend(p, backends)
    _add_sizes(p, min_size, max_size, step, nccl_tests)
    _add_selection(p, native, collectives, nccl_tests)
    _add_calls(p, budget_s, nccl_tests)
    _add_data(p, op_letter, nccl_tests)
    if nccl_tests:
        add_nccl_tests_flags(p)


def _add_ranks(p: argparse.ArgumentParser, nccl_tests: bool) -> None:
    """-n/--ranks N; with ``nccl_tests`` --ranks only, or nccl-tests' -t x -g."""
    convert = A.int_up_to(local.MAX_LOCAL_RANKS, "local processes")
    if not nccl_tests:
        A.add_workers(p, convert)
    else:
        p.add_argument("--ranks", type=convert, default=None, metavar="N",
                       help="number of ranks, one process each (default: -t x -g)")
        p.add_argument("-g", "--ngpus", type=convert, default=1, metavar="G",
                       help="nccl-tests' GPUs per thread: here ranks, each a process on the "
                       "CPU (ranks = -t x -g, default 1)")
        p.add_argument("-t", "--nthreads", type=convert, default=1, metavar="T",
                       help="nccl-tests' threads per process: here ranks too (ranks = -t x -g)")
    local.add_force(p)


def _add_backend(p: argparse.ArgumentParser, several: bool) -> None:
    """--backend (several: one link each, for calibrate)."""
    if several:
        p.add_argument("--backend", choices=("gloo", "mpi"), nargs="+", default=["gloo"],
                       help="transports to calibrate, one link each: gloo (default), mpi")
    else:
        p.add_argument("--backend", choices=("gloo", "mpi"), default="gloo",
                       help="gloo (torch.distributed, default) or mpi (mpi4py under mpirun)")


def _add_sizes(p: argparse.ArgumentParser, min_size: str, max_size: str, step: float,
               nccl_tests: bool) -> None:
    """-b -e -f (and nccl-tests' -i); sizes in the CLI's units (4K = 4096, 4KB = 4000)."""
    p.add_argument("-b", "--minbytes", type=A.size, default=A.size(min_size), metavar="MIN",
                   help=f"smallest buffer (default {min_size}; 4K = 4KiB = 4096 B, as "
                   "nccl-tests reads it; 4KB = 4000 B)")
    p.add_argument("-e", "--maxbytes", type=A.size, default=A.size(max_size), metavar="MAX",
                   help=f"largest buffer (default {max_size})")
    p.add_argument("-f", "--stepfactor", type=factor, default=step, metavar="F",
                   help=f"multiply the size by F each line, F > 1 (default {step:g})")
    if nccl_tests:
        p.add_argument("-i", "--stepbytes", type=A.size, default=None, metavar="STEP",
                       help="add STEP bytes each line instead of -f (nccl-tests' -i)")


def _add_selection(p: argparse.ArgumentParser, native: bool, collectives: str,
                   nccl_tests: bool) -> None:
    """What to measure: the collectives and algorithms (-c and -a without ``nccl_tests``)."""
    p.add_argument(*([] if nccl_tests else ["-c"]), "--collective", type=A.collective,
                   nargs="+", default=None, metavar="C",
                   help=f"collectives to measure (default {collectives})")
    p.add_argument(
        *([] if nccl_tests else ["-a"]), "--algorithms", default=None, metavar="LIST",
        help=f"comma-separated, of {A.ALGORITHM_NAMES}"
        + (", native (the engine's own call)" if native else "")
        + " (default: every algorithm that runs on N ranks" + (", then native)" if native
                                                                else ")"))


def _add_calls(p: argparse.ArgumentParser, budget_s: float, nccl_tests: bool) -> None:
    """How many calls, checked how, for how long."""
    p.add_argument("-w", "--warmup", "--warmup_iters", dest="warmup", type=iterations(0),
                   default=2, help="untimed (but checked) calls of each line first (default 2)")
    p.add_argument(*(["-n"] if nccl_tests else []), "--iters", type=iterations(1),
                   default=None, metavar="K",
                   help="timed calls per line (default: enough to fill --budget per size, "
                   f"{DEFAULT_MIN_ITERS}..{DEFAULT_MAX_ITERS})")
    p.add_argument("--budget", type=A.positive_duration, default=budget_s, metavar="T",
                   help=f"time per size for the timed calls of all algorithms (default "
                   f"{budget_s:g}s)")
    p.add_argument(*(["-T"] if nccl_tests else []), "--timeout", type=A.positive_duration,
                   default=60.0,
                   help="limit per call (default 60s): a dead or silent rank fails within it")
    if nccl_tests:
        p.add_argument("-c", "--check", type=A.int_up_to(1 << 30, "calls", low=0), default=1,
                       metavar="0|1", help="count the wrong elements of the checked calls "
                       "(default 1; 0: #wrong N/A, as nccl-tests' -c 0)")
        p.add_argument("-a", "--average", type=A.int_up_to(3, "nccl-tests' modes", low=0),
                       default=3, metavar="0..3",
                       help="a call's time over the ranks: 0 rank 0's, 1 mean (nccl-tests' "
                       "default), 2 min, 3 max (default: a collective is done when its last "
                       "rank is)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar or notes")


def _add_data(p: argparse.ArgumentParser, op_letter: bool, nccl_tests: bool) -> None:
    """-d, -o, -r."""
    names = "float, half, double, bfloat16, int8, uint8, int32, int64" if nccl_tests else \
        ", ".join(BENCH_DTYPES)
    p.add_argument("-d", "--dtype", *(["--datatype"] if nccl_tests else []), dest="dtype",
                   default="float32",
                   help=f"element type: {names} (default float32; bfloat16 over gloo)")
    p.add_argument(*(["-o"] if op_letter else []), "--op", default="sum",
                   help="reduce op: sum (default), prod(uct), min, max, avg")
    p.add_argument("-r", "--root", type=A.non_negative_int, default=0,
                   help="root of broadcast/reduce (default 0)")


#: nccl-tests' flags that have no meaning for processes on a CPU: (letters, long name, what
#: it does there). Accepted, so that a command line copied from nccl-tests runs; a value
#: other than nccl-tests' default says on stderr that it is ignored.
CPU_MEANINGLESS = (
    ("-m", "--agg_iters", "aggregated operations per timed call (group calls)", "1"),
    ("-z", "--blocking", "blocking collectives; here every timed call is waited for and "
     "starts after a barrier", "0"),
    ("-G", "--cudagraph", "CUDA graph launches", "0"),
    ("-p", "--parallel_init", "threads initialise NCCL in parallel", "0"),
    ("-y", "--stream_null", "the default CUDA stream", "0"),
    ("-C", "--report_cputime", "CPU time instead of GPU time (here all times are wall clock)",
     "0"),
    ("-R", "--local_register", "NCCL buffer registration", "0"),
    ("-u", "--unalign", "misaligned buffers", "0"),
    ("-N", "--run_cycles", "repeat the whole run (here it runs once: loop in the shell)", "1"),
)


def add_nccl_tests_flags(p: argparse.ArgumentParser) -> None:
    """nccl-tests' flags without a meaning on CPU (:data:`CPU_MEANINGLESS`), and -J."""
    group = p.add_argument_group(
        "nccl-tests flags with no meaning on CPU (accepted and ignored, with a note)")
    for short, long, what, default in CPU_MEANINGLESS:
        group.add_argument(short, long, default=default, metavar="V",
                           help=f"nccl-tests: {what}")
    p.add_argument("-J", "--output_file", dest="json_file", metavar="FILE.json",
                   type=A.output_file(".json"), default=None,
                   help="also write the results as JSON (nccl-tests' -J; as --json FILE)")


def ignored_flags(args: argparse.Namespace) -> list[str]:
    """Notes for the nccl-tests flags given a value other than their default."""
    out = []
    for short, long, what, default in CPU_MEANINGLESS:
        value = getattr(args, long.lstrip("-"), default)
        if str(value) != default:
            out.append(f"ringtree: note: {short} {value} ({long.lstrip('-')}: {what}) has no "
                       "meaning on CPU: ignored")
    return out


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
    """The Sweep the options describe (RingtreeError on bad sizes). bench's (nccl-tests'
    letters): nccl-tests' order, each line printed as measured, out of place and in place,
    unless --interleave."""
    algs = None
    if args.algorithms is not None:
        algs = tuple(a.strip().lower() for a in args.algorithms.split(",") if a.strip())
    cols = tuple(args.collective) if args.collective else None
    kw: dict[str, Any] = {"collectives": cols} if cols else {}
    if hasattr(args, "average"):  # bench: nccl-tests' flags
        lines = not getattr(args, "interleave", False)
        kw.update(lines=lines, pairs=lines, average=args.average, check=args.check > 0,
                  step=step_text(args))
    return Sweep(
        n_ranks=ranks_of(args), sizes=tuple(sweep_sizes(args)), algorithms=algs,
        backend=backend or args.backend, dtype=args.dtype, op=ReduceOp.parse(args.op),
        root=args.root, warmup=args.warmup, iters=args.iters, budget_s=args.budget,
        min_iters=min_iters, in_place=in_place, timeout_s=args.timeout, link=link,
        native=native, chunks=chunks, **kw,
    )


def ranks_of(args: argparse.Namespace) -> int:
    """--ranks, else nccl-tests' -t x -g (bench), within the local processes' limit."""
    if args.ranks is not None:
        return int(args.ranks)
    return int(args.nthreads * args.ngpus)


def step_text(args: argparse.Namespace) -> str:
    """nccl-tests' ``step:`` field: ``4(factor)`` or ``1048576(bytes)``."""
    step = getattr(args, "stepbytes", None)
    return f"{step}(bytes)" if step else f"{args.stepfactor:g}(factor)"


def sweep_sizes(args: argparse.Namespace) -> list[int]:
    """The sizes -b -e -f (or -i) give (RingtreeError when they are more than MAX_SIZES)."""
    lo, hi, f = args.minbytes, args.maxbytes, args.stepfactor
    step = getattr(args, "stepbytes", None)
    if step is not None:
        if step < 1:
            raise RingtreeError(f"size step -i must be >= 1 byte, got {step}")
        if 1 <= lo <= hi and (hi - lo) // step + 1 > MAX_SIZES:
            raise RingtreeError(f"-b {lo:,} -e {hi:,} -i {step:,} make over {MAX_SIZES} "
                                f"sizes: at most {MAX_SIZES} per sweep; give a larger -i")
        if lo < 1 or lo > hi:
            sizes(lo, hi, 2.0)  # its message names -b and -e
        return list(range(lo, hi + 1, step))
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
    n = ranks_of(args)
    flag = "-n" if not hasattr(args, "ngpus") else (
        "--ranks" if args.ranks is not None else f"-t {args.nthreads} x -g {args.ngpus} =")
    local.check_ranks(n, args.force, flag)
    top = max(sweep_sizes(args), default=0)
    local.check_memory(n, top, args.dtype, what="the sweep's largest size", flag="-e")


def measure(sweep: Sweep, quiet: bool, on_line: OnLine | None = None,
            meta: dict[str, Any] | None = None, bar: bool = True) -> BenchResult | None:
    """Run the sweep with a progress bar on stderr (a terminal only, and ``bar``), handing
    each line to ``on_line`` as it is measured; None after printing the ranks' errors when
    it failed."""
    from ringtree.measure.sweep_run import run_sweep

    err = stderr_console()
    warning = oversubscription_warning(sweep.n_ranks)
    if warning and not quiet:
        err.print(f"ringtree: warning: {warning}", highlight=False, soft_wrap=True)
    update, close = stderr_progress() if bar and not quiet else (None, lambda: None)
    try:
        return run_sweep(sweep, update, on_line, meta)
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
    from ringtree.measure.plots import SUFFIXES

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
