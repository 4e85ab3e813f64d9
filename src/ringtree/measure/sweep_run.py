"""The shared driver, launcher side: a :class:`~ringtree.measure.sweep.Sweep` measured on N
local processes by :mod:`ringtree.measure.worker` under the engine's launcher, gathered into a
:class:`~ringtree.measure.result.BenchResult`, its progress on stderr. A line's time is the
median over its calls of the slowest rank's (by default: ``Sweep.average``, nccl-tests' -a).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ringtree import dtypes
from ringtree.collectives import Collective
from ringtree.measure.result import BenchResult, Row
from ringtree.measure.specs import spec_for
from ringtree.measure.sweep import (
    AVERAGES,
    Sweep,
    canonical_dtype,
    cells,
    in_place_of,
    line_groups,
    validate_sweep,
)
from ringtree.measure.worker import LINES_ENV, PROGRESS_ENV
from ringtree.procs.launch import launch_body


class BenchFailed(Exception):
    """A rank failed during the sweep; the message names the ranks and their errors."""


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
        "timing": f"median over calls of {AVERAGES[sweep.average]} time from a barrier "
        f"(-a {sweep.average}); "
        + ("one line at a time, its placements interleaved call by call" if sweep.lines
           else "algorithms interleaved call by call"),
        "average": sweep.average,
        "check": sweep.check,
        "lines": sweep.lines,
        "min_bytes": min(sweep.sizes),
        "max_bytes": max(sweep.sizes),
        "step": sweep.step,
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


#: What :func:`run_sweep` calls with each line as soon as every rank has measured it: the
#: line's rows and each rank's process id.
OnLine = Callable[[list[Row], list[int]], None]


def run_sweep(sweep: Sweep, progress: Callable[[int, int], None] | None = None,
              on_line: OnLine | None = None, meta: dict[str, Any] | None = None) -> BenchResult:
    """Measure ``sweep`` on local processes. ``progress(done, total)`` is called (from another
    thread) as the timed calls go, ``on_line(rows, pids)`` (from another thread too, in
    order) with each line once every rank has it. ``meta``: the result's metadata (default
    :func:`metadata`'s, now), to which the machine's load and the ranks' process ids are
    added. RingtreeError on bad settings (before any process starts), BenchFailed when a
    rank fails (every process is gone by then)."""
    validate_sweep(sweep)
    meta = dict(meta or metadata(sweep))
    todo = cells(sweep)
    groups = line_groups(sweep, todo)
    config = {
        "backend": sweep.backend, "timeout_s": sweep.timeout_s,
        "dtype": canonical_dtype(sweep.dtype), "op": sweep.op.value, "root": sweep.root,
        "in_place": sweep.in_place, "warmup": sweep.warmup, "iters": sweep.iters,
        "budget_s": sweep.budget_s, "min_iters": sweep.min_iters,
        "max_iters": sweep.max_iters, "check": sweep.check, "cells": todo, "lines": groups,
    }
    if sweep.backend == "mpi":
        from ringtree.procs.run import _require_mpi4py

        _require_mpi4py()
    with tempfile.TemporaryDirectory(prefix="ringtree-bench-") as tmp:
        progress_path, lines_dir = Path(tmp) / "progress", Path(tmp) / "lines"
        progress_path.touch()
        lines_dir.mkdir()
        env = {PROGRESS_ENV: str(progress_path), LINES_ENV: str(lines_dir),
               "OMP_NUM_THREADS": "1"}
        stop = threading.Event()
        reader = _LineReader(sweep, todo, groups, lines_dir, on_line)
        watcher = threading.Thread(target=_watch, args=(progress_path, progress, reader, stop),
                                   daemon=True)
        watcher.start()
        total_s = 30.0 + 3.0 * sweep.n_ranks + sweep.timeout_s * (len(todo) * 4 + 2)
        try:
            outcome = launch_body(sweep.n_ranks, sweep.backend, "ringtree.measure.worker:run_sweep",
                                  config, timeout_s=total_s, env=env)
        finally:
            stop.set()
            watcher.join()
        if outcome.ok:
            reader.poll()  # the lines the watcher had not seen yet
    if not outcome.ok:
        raise BenchFailed(outcome.failure_message(total_s))
    results = [r.result for r in outcome.ranks if r.result]
    meta["load"] = load_summary([r.get("load", {}) for r in results])
    meta["pids"] = [int(r.get("pid", 0)) for r in results]
    return BenchResult(meta, gather(sweep, todo, [r["cells"] for r in results]))


class _LineReader:
    """Hands each line to ``on_line`` once every rank has written it (in order)."""

    def __init__(self, sweep: Sweep, todo: Sequence[dict[str, Any]], groups: list[list[int]],
                 folder: Path, on_line: OnLine | None) -> None:
        self.sweep, self.todo, self.groups, self.folder = sweep, todo, groups, folder
        self.on_line, self.next = on_line, 0

    def poll(self) -> None:
        """Report every line that is complete now."""
        n = self.sweep.n_ranks
        while self.on_line is not None and self.next < len(self.groups):
            paths = [self.folder / f"line{self.next}.rank{r}.json" for r in range(n)]
            if not all(p.exists() for p in paths):
                return
            parts = [json.loads(p.read_text()) for p in paths]
            line = self.groups[self.next]
            rows = gather(self.sweep, [self.todo[i] for i in line],
                          [part["cells"] for part in parts])
            self.on_line(rows, [int(part["pid"]) for part in parts])
            self.next += 1


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


def _watch(path: Path, progress: Callable[[int, int], None] | None, reader: _LineReader,
           stop: Any) -> None:
    last = ""
    while not stop.wait(0.1):
        reader.poll()
        text = path.read_text().strip()
        if progress is not None and text and text != last:
            done, total = (int(v) for v in text.split())
            progress(done, total)
            last = text


def gather(sweep: Sweep, todo: Sequence[dict[str, Any]], per_rank: list[list[dict]]) -> list[Row]:
    """Rows from every rank's figures: per call the ranks' time as ``sweep.average`` says
    (the slowest rank's by default), the median over calls."""
    dtype = canonical_dtype(sweep.dtype)
    itemsize = dtypes.itemsize(dtype)
    combine = {0: lambda ts: ts[0], 1: statistics.fmean, 2: min, 3: max}[sweep.average]
    rows = []
    for i, cell in enumerate(todo):
        col = Collective.parse(cell["collective"])
        spec = spec_for(col)
        count = per_rank[0][i]["count"]
        size = count * itemsize
        for j, (name, chunks) in enumerate(cell["algorithms"]):
            ranks = [cells_[i]["algorithms"][j] for cells_ in per_rank]
            calls = [combine(ts) for ts in zip(*(r["times_s"] for r in ranks), strict=True)]
            t = statistics.median(calls) if calls else 0.0
            rows.append(Row(
                collective=col.value, algorithm=name, size_bytes=size, count=count,
                dtype=dtype, redop=sweep.op.value if col.reduces else None,
                root=sweep.root if col.has_root else None, time_us=t * 1e6,
                algbw_GBps=size / t / 1e9 if t else 0.0,
                busbw_GBps=spec.busbw_Bps(size, t, sweep.n_ranks) / 1e9,
                wrong=sum(int(r["wrong"]) for r in ranks), iters=len(calls), n_chunks=chunks,
                spread=spread(calls), times_us=tuple(c * 1e6 for c in calls),
                in_place=in_place_of(sweep, cell),
            ))
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
        redirect_stdout=False,  # stdout is data: the table's lines go there as measured
        redirect_stderr=False,
    )
    task = bar.add_task("calls", total=None)
    bar.start()

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return update, bar.stop
