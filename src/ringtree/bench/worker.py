"""The shared driver, rank side: :func:`run_sweep`, the body each rank runs under the one
rank main (:mod:`ringtree.procs.rank`, started by :func:`ringtree.procs.launch.launch_body`).

A cell is a collective and a size, measured with several algorithms (ringtree's, by name,
or ``native``: the engine's own call). Every rank

1. builds each cell's input from the collective's spec (small integers: exact in any order);
2. makes ``warmup`` untimed calls of every algorithm, each checked against the expected
   result (#wrong);
3. agrees with the others on each cell's number of timed calls (``iters``, or enough to fill
   ``budget_s`` per cell at the warm-up's pace, within ``min_iters``..``max_iters``);
4. times the calls *interleaved*: in rounds, each round a call of every algorithm of the
   cells due in it, the cells and the algorithms within a cell rotated round by round
   (:func:`round_order`), every cell's calls spread over the whole run -- so a slow spell
   of a noisy machine hits every algorithm and size alike.
   Before each call it restores the input / poisons the output (untimed), then a barrier;
   the time is this rank's from the barrier's exit to the call's return;
5. checks the last timed call of each algorithm too, and reports every call's time.

The launcher takes, per call, the slowest rank's time (a collective is done when its last
rank is) and the median over calls.
"""

from __future__ import annotations

import math
import os
import resource
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ringtree.bench.specs import Spec, spec_for
from ringtree.collectives import ReduceOp
from ringtree.procs.native import NativeEngine, call_buffers
from ringtree.procs.native_calls import native_call
from ringtree.runtime import api

NATIVE = "native"
PROGRESS_ENV = "RINGTREE_BENCH_PROGRESS"
#: what a poisoned output holds before a call (no correct result has it: inputs are -5..5)
POISON = 99


@dataclass
class Cell:
    """One collective and size: its buffers (shared by its algorithms: every call restores
    the input and poisons the output first), expected result and per-algorithm figures."""

    spec: Spec
    count: int
    values: np.ndarray
    expected: np.ndarray | None
    inbuf: Any
    outbuf: Any
    in_np: np.ndarray
    out_np: np.ndarray | None
    algorithms: list[tuple[str, int | None]]
    times_s: list[list[float]]
    wrong: list[int]


def make_cell(engine: NativeEngine, cfg: dict[str, Any], cell: dict[str, Any]) -> Cell:
    """Allocate and fill one cell's buffers on this rank."""
    spec = spec_for(cell["collective"])
    col, n, rank = spec.collective, engine.size, engine.rank
    op, dtype = ReduceOp.parse(cfg["op"]), cfg["dtype"]
    count = spec.count(int(cell["size_bytes"]), np.dtype(dtype).itemsize, n)
    values = spec.input_values(count, dtype, op, rank, n)
    expected = spec.expected(count, dtype, op, int(cfg["root"]), rank, n)
    x, y = call_buffers(col, values.copy(), count, n, rank, int(cfg["root"]))
    if cfg.get("in_place") and col.layout.own_block_in_output:  # the input: its block of y
        x = y[slice(*col.layout.span(count, n, rank))]
    algs = [(str(a), None if c is None else int(c)) for a, c in cell["algorithms"]]
    return Cell(
        spec,
        count,
        values,
        expected,
        engine.array(x),
        None if y is None else engine.array(y),
        x,
        y,
        algs,
        [[] for _ in algs],
        [0] * len(algs),
    )


class Driver:
    """Runs, times and checks the calls of every cell on this rank."""

    def __init__(self, engine: NativeEngine, transport: Any, cfg: dict[str, Any]) -> None:
        self.engine, self.transport, self.cfg = engine, transport, cfg
        self.op, self.root = ReduceOp.parse(cfg["op"]), int(cfg["root"])

    def prepare(self, c: Cell) -> None:
        """Untimed: poison the output, restore an input the last call overwrote."""
        if c.out_np is not None:
            c.out_np.fill(POISON)
        if c.out_np is None or c.spec.collective.layout.own_block_in_output:
            np.copyto(c.in_np, c.values)

    def call(self, c: Cell, j: int) -> None:
        """Algorithm ``j`` of the cell, once."""
        name, n_chunks = c.algorithms[j]
        e = self.engine
        if name == NATIVE:
            native_call(c.spec.collective, e.backend)(e, c.inbuf, c.outbuf, self.op, self.root)
            return
        api.collective(c.spec.collective, c.inbuf, c.outbuf, self.op, self.root, self.transport,
                       algorithm=name, timeout=self.cfg["timeout_s"], check=False,
                       n_chunks=n_chunks)

    def timed(self, c: Cell, j: int) -> float:
        """Prepare, barrier, then this rank's time for one call."""
        self.prepare(c)
        self.engine.barrier()
        t0 = time.perf_counter()
        self.call(c, j)
        return time.perf_counter() - t0

    def check(self, c: Cell, j: int) -> None:
        """Count the elements of the last call's result that are not exactly right."""
        got = c.in_np if c.out_np is None else c.out_np
        if c.expected is not None:
            bad = int(np.count_nonzero(got != c.expected))
        elif c.algorithms[j][0] != NATIVE:  # ringtree's reduce leaves a non-root's input
            bad = int(np.count_nonzero(got != c.values))
        else:  # the engines promise nothing about a non-root's buffer
            bad = 0
        c.wrong[j] = max(c.wrong[j], bad)

    def agree_max(self, values: list[float]) -> list[float]:
        """Element-wise maximum over the ranks (the engine's own all-reduce)."""
        e = self.engine
        if e.backend == "gloo":
            t = e.torch.tensor(values, dtype=e.torch.float64)
            e.dist.all_reduce(t, op=e.dist.ReduceOp.MAX)
            return [float(v) for v in t.tolist()]
        local = np.array(values, dtype=np.float64)
        out = np.empty_like(local)
        e.comm.Allreduce(local, out, op=e.MPI.MAX)
        return [float(v) for v in out]


def iteration_counts(cfg: dict[str, Any], pace_s: list[float]) -> list[int]:
    """Timed calls per cell: ``iters``, or enough to fill ``budget_s`` per cell at the
    warm-up's pace (``pace_s``: one round of the cell's algorithms), within
    ``min_iters``..``max_iters``."""
    if cfg.get("iters"):
        return [int(cfg["iters"])] * len(pace_s)
    lo, hi, budget = int(cfg["min_iters"]), int(cfg["max_iters"]), float(cfg["budget_s"])
    return [max(lo, min(hi, math.ceil(budget / max(p, 1e-6)))) for p in pace_s]


def schedule_rounds(iters: list[int]) -> list[list[int]]:
    """Spread every cell's calls evenly over the rounds: round k holds the cells that get a
    call in it (cell c runs in ``iters[c]`` of the ``max(iters)`` rounds), so a slow spell
    of the machine hits small and large sizes alike."""
    total = max(iters, default=0)
    rounds: list[list[int]] = [[] for _ in range(total)]
    for c, k in enumerate(iters):
        for i in range(k):
            rounds[(i * total) // k].append(c)
    return rounds


def round_order(members: list[int], n_algorithms: list[int], k: int) -> list[tuple[int, int]]:
    """Round k's calls ``(cell, algorithm)``: the cells rotated by k, and within each cell
    its algorithms rotated by k -- so that no algorithm is always the first to touch a
    cell's buffers after another cell's (cold caches), nor always follows the same one."""
    shift = k % max(1, len(members))
    out = []
    for c, n in zip(
        members[shift:] + members[:shift], n_algorithms[shift:] + n_algorithms[:shift], strict=True
    ):
        out += [(c, (j + k) % n) for j in range(n)]
    return out


def machine_load(start: dict[str, float] | None = None) -> dict[str, float]:
    """This process's CPU seconds, the whole machine's busy and stolen CPU seconds (Linux
    ``/proc/stat``; absent elsewhere) and the wall clock; with ``start``: the differences."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    now = {"wall_s": time.perf_counter(), "self_cpu_s": usage.ru_utime + usage.ru_stime}
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
        jiffies = [int(v) / os.sysconf("SC_CLK_TCK") for v in fields]
        now["busy_cpu_s"] = sum(jiffies[:3]) + sum(jiffies[5:7])  # user nice system irq softirq
        now["steal_cpu_s"] = jiffies[7] if len(jiffies) > 7 else 0.0
    except (OSError, ValueError, IndexError):
        pass
    if start is None:
        return now
    return {k: v - start[k] for k, v in now.items() if k in start}


def run_sweep(engine: NativeEngine, cfg: dict[str, Any]) -> dict[str, Any]:
    """Warm up and check every cell, agree on the calls, run them interleaved (sizes and
    algorithms), check the last call of each; rank 0 notes progress in the progress file."""
    if engine.backend == "gloo":
        engine.torch.set_num_threads(1)  # no spinning intra-op pool between timed calls
    drv = Driver(engine, api.transport_for(None), cfg)
    cells = [make_cell(engine, cfg, c) for c in cfg["cells"]]
    progress = os.environ.get(PROGRESS_ENV) if engine.rank == 0 else None
    n_warm = max(int(cfg["warmup"]), 0 if cfg.get("iters") else 1)
    pace = []
    for c in cells:
        warm: list[list[float]] = [[] for _ in c.algorithms]
        for _ in range(n_warm):
            for j in range(len(c.algorithms)):
                warm[j].append(drv.timed(c, j))
                drv.check(c, j)
        pace.append(sum(statistics.median(w) for w in warm) if n_warm else 0.0)
    iters = iteration_counts(cfg, drv.agree_max(pace) if not cfg.get("iters") else pace)
    rounds = schedule_rounds(iters)
    load_start = machine_load()
    total = sum(iters[c] * len(cells[c].algorithms) for c in range(len(cells)))
    done = 0
    for k, members in enumerate(rounds):
        calls = round_order(members, [len(cells[c].algorithms) for c in members], k)
        for c, j in calls:
            cell = cells[c]
            cell.times_s[j].append(drv.timed(cell, j))
            if len(cell.times_s[j]) == iters[c]:  # its last call: check it too
                drv.check(cell, j)
        done += len(calls)
        if progress:
            Path(progress).write_text(f"{done} {total}\n")
    load = machine_load(load_start)
    return {
        "load": load,
        "cells": [
            {
                "count": c.count,
                "algorithms": [
                    {"times_s": t, "wrong": w} for t, w in zip(c.times_s, c.wrong, strict=True)
                ],
            }
            for c in cells
        ],
    }
