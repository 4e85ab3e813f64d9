"""The shared driver, launcher side: a sweep of sizes x algorithms on N local processes,
measured by :mod:`ringtree.bench.worker` under the engine's launcher, gathered into a
:class:`~ringtree.bench.result.BenchResult`.

``sizes(min, max, factor)`` are nccl-tests' ``-b -e -f``. Each algorithm runs at the chunk
count that the automatic choice would give it on ``link`` (default: the engine's own link
for the transport, :func:`ringtree.runtime.auto.link_for`), so a pipelined tree is measured
as auto would run it. A line's time is the median over its calls of the slowest rank's.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ringtree import dtypes
from ringtree.algorithms import BuildSpec, algorithms_for, get_algorithm
from ringtree.bench.result import BenchResult, Row
from ringtree.bench.specs import spec_for
from ringtree.bench.worker import NATIVE, PROGRESS_ENV
from ringtree.collectives import Collective, ReduceOp
from ringtree.cost.select import tuned
from ringtree.cost.terms import Link
from ringtree.errors import RingtreeError
from ringtree.procs.launch import launch_body
from ringtree.runtime.auto import link_for
from ringtree.units import format_bytes

#: The engines a sweep runs on (its worker times CPU collectives).
SWEEP_BACKENDS = ("gloo", "mpi")

#: dtypes a sweep offers (numpy can hold them, so results are checked exactly)
BENCH_DTYPES = ("float32", "float64", "float16", "int32", "int64", "int8", "uint8")
DEFAULT_BUDGET_S = 1.0
DEFAULT_MIN_ITERS, DEFAULT_MAX_ITERS = 5, 200


class BenchFailed(Exception):
    """A rank failed during the sweep; the message names the ranks and their errors."""


def sizes(min_bytes: int, max_bytes: int, factor: float) -> list[int]:
    """``min, min*f, min*f^2, ...`` up to ``max`` (nccl-tests' -b -e -f); RingtreeError when
    min > max, min < 1 or f <= 1."""
    if min_bytes < 1:
        raise RingtreeError(f"minimum size -b must be >= 1 byte, got {min_bytes}")
    if min_bytes > max_bytes:
        raise RingtreeError(
            f"minimum size -b {format_bytes(min_bytes)} is larger than maximum size -e "
            f"{format_bytes(max_bytes)}: give -b <= -e"
        )
    if not factor > 1:
        raise RingtreeError(f"size factor -f must be > 1, got {factor:g}")
    out, s = [], float(min_bytes)
    while round(s) <= max_bytes:
        if not out or round(s) > out[-1]:
            out.append(round(s))
        s *= factor
    return out


def canonical_dtype(name: str) -> str:
    """``float`` -> ``float32`` (:mod:`ringtree.dtypes`' aliases); RingtreeError unless the
    sweep offers it."""
    return dtypes.canonical(name, BENCH_DTYPES, "bench")


@dataclass(frozen=True)
class Sweep:
    """What to measure.

    algorithms: names (ringtree's, or ``native``: the engine's own call); None: every
    algorithm of each collective that runs on N ranks, then native if ``native``. iters:
    timed calls per line; None: as many as fill ``budget_s`` per size at the warm-up's pace
    (each algorithm of a size gets the same number), within min_iters..max_iters. link:
    prices the chunk count of pipelined algorithms (None: the engine's link for the backend);
    chunks: that count, fixed instead.
    """

    n_ranks: int
    sizes: tuple[int, ...]
    collectives: tuple[Collective, ...] = (Collective.ALL_REDUCE,)
    algorithms: tuple[str, ...] | None = None
    backend: str = "gloo"
    dtype: str = "float32"
    op: ReduceOp = ReduceOp.SUM
    root: int = 0
    warmup: int = 2
    iters: int | None = None
    budget_s: float = DEFAULT_BUDGET_S
    min_iters: int = DEFAULT_MIN_ITERS
    max_iters: int = DEFAULT_MAX_ITERS
    in_place: bool = False
    timeout_s: float = 60.0
    link: Link | None = None
    native: bool = True
    chunks: int | None = None


def plan_algorithms(sweep: Sweep, col: Collective) -> list[str]:
    """The algorithms measured for ``col``: those asked for that it has (all that run on N
    when none were asked for), then native if asked for (or by default)."""
    mine = algorithms_for(col)
    if sweep.algorithms is None:
        names = [a for a in mine if runs_on(col, a, sweep.n_ranks)]
        names += [NATIVE] if sweep.native else []
    else:
        names = [a for a in sweep.algorithms if a in mine or a == NATIVE]
    return names


def runs_on(col: Collective, algorithm: str, n_ranks: int) -> bool:
    """Whether ``algorithm`` builds for ``col`` on ``n_ranks`` ranks without more settings
    (hierarchical needs ranks per node)."""
    try:
        tuned(col, algorithm, n_ranks, n_ranks * 4, link_for("gloo"), itemsize=4)
    except RingtreeError:
        return False
    return True


def validate_sweep(sweep: Sweep) -> None:
    """RingtreeError on anything the ranks would trip over, before starting them."""
    if sweep.backend not in SWEEP_BACKENDS:
        raise RingtreeError(
            f"backend {sweep.backend!r} is not swept: expected one of "
            f"{', '.join(SWEEP_BACKENDS)} (NCCL: ringtree run --backend nccl, or "
            "bench/engine_vs_native.py --backends nccl)"
        )
    if sweep.n_ranks < 1:
        raise RingtreeError(f"number of ranks must be >= 1, got {sweep.n_ranks}")
    if not sweep.sizes:
        raise RingtreeError("no sizes to measure")
    canonical_dtype(sweep.dtype)
    if sweep.in_place and Collective.REDUCE_SCATTER in sweep.collectives:
        raise RingtreeError(
            "reduce-scatter has no in-place form in torch.distributed's API "
            "(its output must not overlap its input): drop --in-place"
        )
    if any(c.has_root for c in sweep.collectives) and not 0 <= sweep.root < sweep.n_ranks:
        raise RingtreeError(f"root {sweep.root} is not a rank of 0..{sweep.n_ranks - 1}")
    if any(c.reduces for c in sweep.collectives):
        from ringtree.runtime.kernels import check_dtype

        check_dtype(canonical_dtype(sweep.dtype), sweep.op)
    if sweep.algorithms is not None:
        known = {a for c in sweep.collectives for a in algorithms_for(c)} | {NATIVE}
        for a in sweep.algorithms:
            if a not in known:
                raise RingtreeError(
                    f"unknown algorithm {a!r} for {', '.join(c.value for c in sweep.collectives)}"
                    f": expected some of {', '.join(sorted(known))}"
                )
    for col in sweep.collectives:
        names = plan_algorithms(sweep, col)
        if not names:
            raise RingtreeError(
                f"none of the algorithms asked for runs {col.value}: it has "
                f"{', '.join(algorithms_for(col))}, and native"
            )
        for a in names:
            if a != NATIVE and not runs_on(col, a, sweep.n_ranks):
                raise RingtreeError(
                    f"{a} {col.value} does not run on {sweep.n_ranks} ranks without ranks per node"
                )


def cells(sweep: Sweep) -> list[dict[str, Any]]:
    """The worker's cells: per collective and size, the algorithms with their chunk counts."""
    itemsize = np.dtype(canonical_dtype(sweep.dtype)).itemsize
    link = sweep.link or link_for(sweep.backend)
    out = []
    for col in sweep.collectives:
        names = plan_algorithms(sweep, col)
        spec = spec_for(col)
        for size in sweep.sizes:
            count = spec.count(size, itemsize, sweep.n_ranks)
            algs = []
            for a in names:
                chunks = None
                if a != NATIVE and get_algorithm(col, a).pipelined and count:
                    at = BuildSpec(root=sweep.root)
                    nbytes = count * itemsize
                    chunks = (
                        sweep.chunks
                        or tuned(
                            col, a, sweep.n_ranks, nbytes, link, itemsize=itemsize, spec=at
                        ).n_chunks
                    )
                algs.append([a, chunks])
            out.append({"collective": col.value, "size_bytes": size, "algorithms": algs})
    return out


def metadata(sweep: Sweep) -> dict[str, Any]:
    """Where and how the figures were measured."""
    import ringtree

    meta: dict[str, Any] = {
        "tool": "ringtree bench",
        "ringtree": ringtree.__version__,
        "backend": sweep.backend,
        "n_ranks": sweep.n_ranks,
        "cores": os.cpu_count() or 1,
        "host": platform.node(),
        "python": platform.python_version(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "dtype": canonical_dtype(sweep.dtype),
        "op": sweep.op.value,
        "root": sweep.root,
        "in_place": sweep.in_place,
        "warmup": sweep.warmup,
        "iters": sweep.iters
        if sweep.iters
        else f"time-budgeted: {sweep.budget_s:g} s per size, {sweep.min_iters}..{sweep.max_iters}",
        "timing": "median over calls of the slowest rank's time from a barrier; algorithms "
        "interleaved call by call",
    }
    try:
        if sweep.backend == "gloo":
            import torch

            meta["torch"] = torch.__version__
        else:
            import mpi4py

            meta["mpi4py"] = mpi4py.__version__
    except ImportError:
        pass
    return meta


def run_sweep(sweep: Sweep, progress: Callable[[int, int], None] | None = None) -> BenchResult:
    """Measure ``sweep`` on local processes. ``progress(done, total)`` is called (from another
    thread) as the timed calls go. RingtreeError on bad settings (before any process starts),
    BenchFailed when a rank fails (every process is gone by then)."""
    validate_sweep(sweep)
    todo = cells(sweep)
    dtype = canonical_dtype(sweep.dtype)
    config = {
        "backend": sweep.backend,
        "timeout_s": sweep.timeout_s,
        "dtype": dtype,
        "op": sweep.op.value,
        "root": sweep.root,
        "in_place": sweep.in_place,
        "warmup": sweep.warmup,
        "iters": sweep.iters,
        "budget_s": sweep.budget_s,
        "min_iters": sweep.min_iters,
        "max_iters": sweep.max_iters,
        "cells": todo,
    }
    if sweep.backend == "mpi":
        from ringtree.procs.run import _require_mpi4py

        _require_mpi4py()
    with tempfile.TemporaryDirectory(prefix="ringtree-bench-") as tmp:
        progress_path = Path(tmp) / "progress"
        progress_path.touch()
        env = {PROGRESS_ENV: str(progress_path), "OMP_NUM_THREADS": "1"}
        stop = threading.Event()
        watcher = None
        if progress is not None:
            watcher = threading.Thread(
                target=_watch, args=(progress_path, progress, stop), daemon=True
            )
            watcher.start()
        total_s = 30.0 + 3.0 * sweep.n_ranks + sweep.timeout_s * (len(todo) * 4 + 2)
        try:
            outcome = launch_body(sweep.n_ranks, sweep.backend, "ringtree.bench.worker:run_sweep",
                                  config, timeout_s=total_s, env=env)
        finally:
            stop.set()
            if watcher is not None:
                watcher.join()
    if not outcome.ok:
        raise BenchFailed(outcome.failure_message(total_s))
    results = [r.result for r in outcome.ranks if r.result]
    meta = metadata(sweep)
    meta["load"] = load_summary([r.get("load", {}) for r in results])
    return BenchResult(meta, gather(sweep, todo, [r["cells"] for r in results]))


def load_summary(loads: list[dict[str, float]]) -> dict[str, float]:
    """How busy the machine was during the timed calls: the sweep's own processes and every
    other program (from rank 0's view of ``/proc/stat``), in cores on average."""
    if not loads or "wall_s" not in loads[0]:
        return {}
    wall = max(loads[0]["wall_s"], 1e-9)
    ours = sum(x.get("self_cpu_s", 0.0) for x in loads)
    out = {"timed_wall_s": wall, "sweep_cores": ours / wall}
    if "busy_cpu_s" in loads[0]:
        others = loads[0]["busy_cpu_s"] + loads[0].get("steal_cpu_s", 0.0) - ours
        out["other_cores"] = max(0.0, others / wall)
    return out


def _watch(path: Path, progress: Callable[[int, int], None], stop: Any) -> None:
    last = ""
    while not stop.wait(0.2):
        text = path.read_text().strip()
        if text and text != last:
            done, total = (int(v) for v in text.split())
            progress(done, total)
            last = text


def gather(sweep: Sweep, todo: Sequence[dict[str, Any]], per_rank: list[list[dict]]) -> list[Row]:
    """Rows from every rank's figures: per call the slowest rank, the median over calls."""
    dtype = canonical_dtype(sweep.dtype)
    itemsize = np.dtype(dtype).itemsize
    rows = []
    for i, cell in enumerate(todo):
        col = Collective.parse(cell["collective"])
        spec = spec_for(col)
        count = per_rank[0][i]["count"]
        size = count * itemsize
        for j, (name, chunks) in enumerate(cell["algorithms"]):
            ranks = [cells_[i]["algorithms"][j] for cells_ in per_rank]
            calls = [max(ts) for ts in zip(*(r["times_s"] for r in ranks), strict=True)]
            t = statistics.median(calls) if calls else 0.0
            rows.append(
                Row(
                    collective=col.value,
                    algorithm=name,
                    size_bytes=size,
                    count=count,
                    dtype=dtype,
                    redop=sweep.op.value if col.reduces else None,
                    root=sweep.root if col.has_root else None,
                    time_us=t * 1e6,
                    algbw_GBps=size / t / 1e9 if t else 0.0,
                    busbw_GBps=spec.busbw_Bps(size, t, sweep.n_ranks) / 1e9,
                    wrong=sum(int(r["wrong"]) for r in ranks),
                    iters=len(calls),
                    n_chunks=chunks,
                    spread=spread(calls),
                    times_us=tuple(c * 1e6 for c in calls),
                )
            )
    return rows


def spread(times: Sequence[float]) -> float:
    """(90th - 10th percentile) / median: 0.1 is a quiet machine, 1.0 a busy one."""
    if len(times) < 2:
        return 0.0
    p10, p50, p90 = np.percentile(np.asarray(times), [10, 50, 90])
    return float((p90 - p10) / p50) if p50 > 0 else 0.0


def stderr_progress() -> tuple[Callable[[int, int], None] | None, Callable[[], None]]:
    """A rich progress bar of the timed calls on stderr when it is a terminal:
    ``(update, close)``; else ``(None, no-op)``."""
    if not sys.stderr.isatty():
        return None, lambda: None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from ringtree.output import stderr_console

    bar = Progress(
        "timed calls",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr_console(),
        transient=True,
    )
    task = bar.add_task("calls", total=None)
    bar.start()

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return update, bar.stop
