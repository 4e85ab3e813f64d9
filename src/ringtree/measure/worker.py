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
rank is; ``-a`` picks another) and the median over calls.

Lines (``cfg["lines"]``, lists of cell indices; default: one line of every cell): the ranks
measure one line after another, steps 2-5 for the line's cells alone, and write each line's
figures to ``<RINGTREE_BENCH_LINES>/line<k>.rank<r>.json`` as soon as it is done, so that the
launcher prints the line while the next one runs (nccl-tests' order: one line at a time). A
cell's ``placement`` is nccl-tests': ``out`` gives all-reduce, broadcast and reduce an output
of their own (and all-gather a separate input), ``in`` runs them in place (absent: in place,
all-gather as ``cfg["in_place"]`` says). bfloat16 cells hold the values' bit patterns
(int16) on the numpy side, which compare exactly, and bfloat16 tensors on the engine's.
"""

from __future__ import annotations

import json
import math
import os
import resource
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ringtree import dtypes
from ringtree.collectives import Collective, Part, ReduceOp
from ringtree.measure.specs import Spec, spec_for
from ringtree.procs.native import NativeEngine, call_buffers
from ringtree.procs.native_calls import native_call
from ringtree.runtime import api

NATIVE = "native"
PROGRESS_ENV = "RINGTREE_BENCH_PROGRESS"
LINES_ENV = "RINGTREE_BENCH_LINES"
#: Collectives that nccl-tests runs out of place with an output of their own, which torch's
#: API runs in place only (ringtree's engine, and MPI, take a separate output): those whose
#: layout writes the result over the whole input (all-reduce, broadcast, reduce).
OWN_OUTPUT = frozenset(c for c in Collective
                       if c.layout.input is Part.WHOLE and c.layout.output is Part.SAME)
#: Collectives whose input is restored before every call even when they have an output
#: (an all-gather in place writes it; gloo's reduce may use a non-root's as scratch).
RESTORED = frozenset(c for c in Collective if c.layout.own_block_in_output) | {Collective.REDUCE}
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
    budget_s: float | None = None  # the cell's share of cfg["budget_s"] (None: all of it)


def make_cell(engine: NativeEngine, cfg: dict[str, Any], cell: dict[str, Any]) -> Cell:
    """Allocate and fill one cell's buffers on this rank (see the module doc)."""
    spec = spec_for(cell["collective"])
    col, n, rank = spec.collective, engine.size, engine.rank
    op, dtype = ReduceOp.parse(cfg["op"]), cfg["dtype"]
    bf16 = dtype == "bfloat16"
    held = "float32" if bf16 else dtype  # small integers: exact in bfloat16 too
    count = spec.count(int(cell["size_bytes"]), dtypes.itemsize(dtype), n)
    values = spec.input_values(count, held, op, rank, n)
    expected = spec.expected(count, held, op, int(cfg["root"]), rank, n)
    if bf16:
        values, expected = _bf16_bits(values), _bf16_bits(expected)
    placement = cell.get("placement")
    x, y = call_buffers(col, values.copy(), count, n, rank, int(cfg["root"]))
    in_place = placement == "in" or (placement is None and cfg.get("in_place"))
    if in_place and col.layout.own_block_in_output:  # the input: its block of y
        x = y[slice(*col.layout.span(count, n, rank))]
    elif placement == "out" and col in OWN_OUTPUT:
        y = np.empty_like(x)
    algs = [(str(a), None if c is None else int(c)) for a, c in cell["algorithms"]]
    return Cell(
        spec,
        count,
        values,
        expected,
        _on_engine(engine, x, bf16),
        None if y is None else _on_engine(engine, y, bf16),
        x,
        y,
        algs,
        [[] for _ in algs],
        [0] * len(algs),
        cell.get("budget_s"),
    )


def _bf16_bits(a: np.ndarray | None) -> np.ndarray | None:
    """float32 values as the bit patterns (int16) of their bfloat16s."""
    if a is None:
        return None
    import torch

    return torch.from_numpy(a).to(torch.bfloat16).view(torch.int16).numpy()


def _on_engine(engine: NativeEngine, a: np.ndarray, bf16: bool) -> Any:
    """``a`` as the engine's buffer (the same memory); bfloat16 from its bit patterns."""
    buf = engine.array(a)
    return buf.view(engine.torch.bfloat16) if bf16 else buf


class Driver:
    """Runs, times and checks the calls of every cell on this rank."""

    def __init__(self, engine: NativeEngine, transport: Any, cfg: dict[str, Any]) -> None:
        self.engine, self.transport, self.cfg = engine, transport, cfg
        self.op, self.root = ReduceOp.parse(cfg["op"]), int(cfg["root"])

    def prepare(self, c: Cell) -> None:
        """Untimed: poison the output, restore an input the last call overwrote."""
        if c.out_np is not None:
            c.out_np.fill(POISON)
        if c.out_np is None or c.spec.collective in RESTORED:  # a reduce may clobber it
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
        """Count the elements of the last call's result that are not exactly right (nothing
        with ``check`` 0, nccl-tests' -c 0)."""
        if not self.cfg.get("check", True):
            return
        got = c.in_np if c.out_np is None else c.out_np
        if c.expected is not None:
            bad = int(np.count_nonzero(got != c.expected))
        elif c.algorithms[j][0] != NATIVE:  # ringtree's reduce leaves a non-root's input
            bad = int(np.count_nonzero(c.in_np != c.values))
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


def iteration_counts(cfg: dict[str, Any], pace_s: list[float],
                     budgets: list[float | None] | None = None) -> list[int]:
    """Timed calls per cell: ``iters``, or enough to fill ``budget_s`` per cell (or the
    cell's own budget in ``budgets``) at the warm-up's pace (``pace_s``: one round of the
    cell's algorithms), within ``min_iters``..``max_iters``."""
    if cfg.get("iters"):
        return [int(cfg["iters"])] * len(pace_s)
    lo, hi = int(cfg["min_iters"]), int(cfg["max_iters"])
    every = [float(cfg["budget_s"]) if b is None else b for b in budgets or [None] * len(pace_s)]
    return [max(lo, min(hi, math.ceil(b / max(p, 1e-6)))) for p, b in zip(pace_s, every,
                                                                            strict=True)]


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
    """Measure the lines one after another (module doc), each line's cells interleaved;
    rank 0 notes progress in the progress file."""
    if engine.backend == "gloo":
        engine.torch.set_num_threads(1)  # no spinning intra-op pool between timed calls
    drv = Driver(engine, api.transport_for(None), cfg)
    cells = [make_cell(engine, cfg, c) for c in cfg["cells"]]
    lines = cfg.get("lines") or [list(range(len(cells)))]
    progress = os.environ.get(PROGRESS_ENV) if engine.rank == 0 else None
    folder = os.environ.get(LINES_ENV)
    load_start, done = machine_load(), 0
    for k, line in enumerate(lines):
        done = measure_line(drv, [cells[i] for i in line], progress, done)
        if folder:
            _write_line(Path(folder), k, engine.rank, [_figures(cells[i]) for i in line])
    return {"load": machine_load(load_start), "pid": os.getpid(),
            "cells": [_figures(c) for c in cells]}


def measure_line(drv: Driver, cells: list[Cell], progress: str | None, done: int) -> int:
    """Warm up and check the cells, agree on their calls, run them interleaved (sizes and
    algorithms), check the last call of each; returns the calls done so far."""
    n_warm = max(int(drv.cfg["warmup"]), 0 if drv.cfg.get("iters") else 1)
    pace = []
    for c in cells:
        warm: list[list[float]] = [[] for _ in c.algorithms]
        for _ in range(n_warm):
            for j in range(len(c.algorithms)):
                warm[j].append(drv.timed(c, j))
                drv.check(c, j)
        pace.append(sum(statistics.median(w) for w in warm) if n_warm else 0.0)
    agreed = drv.agree_max(pace) if not drv.cfg.get("iters") else pace
    iters = iteration_counts(drv.cfg, agreed, [c.budget_s for c in cells])
    total = done + sum(iters[c] * len(cells[c].algorithms) for c in range(len(cells)))
    for k, members in enumerate(schedule_rounds(iters)):
        calls = round_order(members, [len(cells[c].algorithms) for c in members], k)
        for c, j in calls:
            cell = cells[c]
            cell.times_s[j].append(drv.timed(cell, j))
            if len(cell.times_s[j]) == iters[c]:  # its last call: check it too
                drv.check(cell, j)
        done += len(calls)
        if progress:
            Path(progress).write_text(f"{done} {total}\n")
    return done


def _figures(c: Cell) -> dict[str, Any]:
    """A cell's figures as the launcher reads them."""
    return {"count": c.count, "algorithms": [
        {"times_s": t, "wrong": w} for t, w in zip(c.times_s, c.wrong, strict=True)]}


def _write_line(folder: Path, k: int, rank: int, figures: list[dict[str, Any]]) -> None:
    """Line ``k``'s figures for the launcher, whole or not at all (written, then renamed)."""
    tmp = folder / f".line{k}.rank{rank}.json"
    tmp.write_text(json.dumps({"pid": os.getpid(), "cells": figures}))
    tmp.rename(folder / f"line{k}.rank{rank}.json")
